//! Every result type the worker ships comes back from its columns as it went, on every fixture
//! (`tests/fixtures/*.txt`) and every real snapshot in `../shared/snapshots`: the three timeline
//! layouts and the preview, allocator states at a spread of events, and (through serde, as
//! they travel in message headers) the per-state numbers and the device stats.

use memlens_core::columns::{round_trip, Columns};
use memlens_core::layout::{TimelineKind, TimelineLayout};
use memlens_core::state::{AllocatorHistory, StateNumbers};
use memlens_core::{DeviceStats, Snapshot};
fn back<T: Columns>(what: &str, v: &T) -> T {
    round_trip(v).unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Compares what travels of a layout (the derived indices are rebuilt, so compare behaviour).
fn same_layout(what: &str, a: &TimelineLayout, b: &TimelineLayout) {
    assert_eq!(a.n_events, b.n_events, "{what}: n_events");
    assert_eq!(a.elements, b.elements, "{what}: elements");
    assert_eq!(a.piece_start, b.piece_start, "{what}: piece_start");
    assert_eq!(a.piece_t0, b.piece_t0, "{what}: piece_t0");
    assert_eq!(a.piece_y0, b.piece_y0, "{what}: piece_y0");
    assert_eq!(a.total_bytes, b.total_bytes, "{what}: total_bytes");
    assert_eq!(a.time_us, b.time_us, "{what}: time_us");
    assert_eq!(a.markers, b.markers, "{what}: markers");
    assert_eq!(a.regions, b.regions, "{what}: regions");
    assert_eq!(a.warnings, b.warnings, "{what}: warnings");
    assert_eq!(a.pools, b.pools, "{what}: pools");
    assert_eq!(a.is_monotone(), b.is_monotone(), "{what}: monotone");
    assert_eq!(a.is_preview(), b.is_preview(), "{what}: preview");
    let x = f64::from(a.x_end());
    assert_eq!(a.max_total(0.0, x), b.max_total(0.0, x), "{what}: max");
}

fn json_back<T: serde::Serialize + serde::de::DeserializeOwned>(what: &str, v: &T) -> T {
    let text = serde_json::to_string(v).unwrap_or_else(|e| panic!("{what}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn check(name: &str, s: &Snapshot) {
    for d in s.devices() {
        for kind in [
            TimelineKind::Active,
            TimelineKind::Segments,
            TimelineKind::Allocated,
        ] {
            let l = TimelineLayout::build(s, d, kind);
            same_layout(&format!("{name} {d} {kind:?}"), &l, &back(name, &l));
        }
        let p = TimelineLayout::build_preview(s, d, TimelineKind::Active);
        same_layout(&format!("{name} {d} preview"), &p, &back(name, &p));

        let stats: DeviceStats = memlens_core::device_stats(s, d);
        assert_eq!(json_back(name, &stats), stats, "{name} {d}: stats");

        let hist = AllocatorHistory::new(s, d);
        let n = hist.events();
        let mut picks: Vec<Option<usize>> = vec![None];
        picks.extend((0..=8).map(|k| Some(n.saturating_sub(1) * k / 8)));
        picks.extend(hist.ooms().take(2).map(Some));
        for ev in picks {
            let st = hist.state_at(ev);
            let c = st.columns();
            assert_eq!(back(name, &c), c, "{name} {d} {ev:?}: state columns");
            let nums: StateNumbers = st.numbers();
            assert_eq!(json_back(name, &nums), nums, "{name} {d} {ev:?}: numbers");
        }
        let last = AllocatorHistory::last_state(s, d).columns();
        assert_eq!(back(name, &last), last, "{name} {d}: last state");
    }
}

#[test]
fn fixtures_come_back_from_their_columns() {
    let fixtures = memlens_fixture::fixture_texts();
    assert!(
        fixtures.len() >= 15,
        "fixture set missing in {}",
        memlens_fixture::fixtures_dir().display()
    );
    for (p, text) in fixtures {
        let bytes =
            memlens_fixture::build(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let s = memlens_core::load(&bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        check(&p.display().to_string(), &s);
    }
}

#[test]
fn real_snapshots_come_back_from_their_columns() {
    let Some(files) = memlens_fixture::shared_snapshots() else {
        return;
    };
    assert!(
        !files.is_empty(),
        "no *.pickle in {}",
        memlens_fixture::shared_snapshots_dir().display()
    );
    for p in files {
        let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let s = memlens_core::load(&bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        check(&p.display().to_string(), &s);
    }
}
