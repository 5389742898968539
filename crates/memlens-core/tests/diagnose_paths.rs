//! The diagnosis's two ways to read allocator states give the same answer: `diagnose_device`
//! (states reconstructed only at the events it reads, `state::SampledStates`) against
//! `diagnose_with_history` (the same events seeked in a whole Allocator State History), on
//! every fixture and every real snapshot in `../shared/snapshots`, at the peak and at two other
//! moments (`--at`).

use memlens_core::analysis::{diagnose_device, diagnose_with_history, Options};
use memlens_core::model::Snapshot;
use memlens_core::state::AllocatorHistory;
use memlens_fixture as fixture;

/// Compares both paths on every device of `snap`; returns the number of devices compared.
fn check(name: &str, snap: &Snapshot) -> usize {
    let mut n = 0;
    for device in snap.devices() {
        let history = AllocatorHistory::new(snap, device);
        let events = history.events() as u32;
        for at in [None, Some(0), Some(events / 3)] {
            let o = Options {
                at,
                ..Options::default()
            };
            let light = diagnose_device(snap, device, &o);
            let full = diagnose_with_history(snap, &history, &o);
            assert_eq!(light, full, "{name}: device {device}, at {at:?}");
            assert!(
                !light.fragmentation_over_time.is_empty(),
                "{name}: device {device}: no fragmentation samples"
            );
        }
        n += 1;
    }
    n
}

#[test]
fn fixtures_diagnose_the_same_without_the_whole_history() {
    let mut devices = 0;
    for (path, text) in fixture::fixture_texts() {
        let name = path.display().to_string();
        let Ok(bytes) = fixture::build(&text) else {
            continue;
        };
        let snap = memlens_core::load(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        devices += check(&name, &snap);
    }
    assert!(devices >= 10, "only {devices} fixture devices compared");
}

#[test]
fn real_snapshots_diagnose_the_same_without_the_whole_history() {
    let Some(files) = fixture::shared_snapshots() else {
        return;
    };
    let mut devices = 0;
    for p in &files {
        let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let snap = memlens_core::load(&bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        devices += check(&p.display().to_string(), &snap);
    }
    println!("{devices} devices compared");
}
