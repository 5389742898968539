//! Native tests of the Allocator State History's data on the page (no browser): on every
//! fixture in tests/fixtures and every real snapshot in ../shared/snapshots (skipped with a
//! notice when absent), at a spread of events: the list columns and their versions, that they
//! and the states come back from their columns as the worker ships them, and the link from
//! events and blocks to timeline elements. (The segment map's placement and hit test are core's,
//! tested there: `crates/memlens-core/tests/segment_map.rs`.)

use super::*;
use memlens_core::columns::round_trip;
use memlens_core::layout::{TimelineKind, TimelineLayout};
use memlens_core::replay::replay_device;
use memlens_core::state::events::EventList;
use memlens_core::state::AllocatorHistory;
use memlens_core::trace::Action;
use memlens_core::Snapshot;
use std::collections::HashMap;
use std::rc::Rc;

fn fixture_snapshots() -> Vec<(String, Snapshot)> {
    let dir = memlens_fixture::fixtures_dir();
    let mut out = Vec::new();
    for (p, text) in memlens_fixture::fixture_texts() {
        let Ok(bytes) = memlens_fixture::build(&text) else {
            continue;
        };
        if let Ok(s) = memlens_core::load(&bytes) {
            out.push((p.display().to_string(), s));
        }
    }
    assert!(out.len() >= 5, "fixtures not found in {}", dir.display());
    out
}

fn real_snapshots() -> Vec<(String, Snapshot)> {
    let Some(files) = memlens_fixture::shared_snapshots() else {
        return Vec::new();
    };
    files
        .into_iter()
        .filter_map(|p| {
            let f = std::fs::File::open(&p).ok()?;
            let s = memlens_core::load_reader(f, None).ok()?;
            Some((p.display().to_string(), s))
        })
        .collect()
}

/// Entries to look at: the ends and a spread in between.
fn sample(n: usize) -> Vec<Option<usize>> {
    let mut v = vec![None];
    if n > 0 {
        v.extend([0, n / 7, n / 3, n / 2, (2 * n) / 3, n - 1].map(Some));
    }
    v.dedup();
    v
}

fn check_snapshot(name: &str, snap: &Snapshot) {
    for device in snap.devices() {
        let h = AllocatorHistory::new(snap, device);
        let ev = EventList::build(snap, &replay_device(snap, device), Vec::new());
        let n = ev.len();
        assert_eq!(n, snap.device_rows(device).len(), "{name}: list length");
        assert_eq!(ev.meta.n_events as usize, n);
        let back = round_trip(&ev).map(|mut b| {
            b.device = device;
            b
        });
        assert_eq!(back.as_ref(), Ok(&ev), "{name}: list columns travel");
        // Versions: an allocation's alloc, free_requested and free_completed share one; the
        // next allocation at that address has the next.
        let mut open: HashMap<u64, u32> = HashMap::new();
        let mut next: HashMap<u64, u32> = HashMap::new();
        for i in 0..n {
            let (a, v) = (ev.addr[i], ev.version[i]);
            match ev.action(i) {
                Action::Alloc => {
                    assert_eq!(
                        v,
                        *next.get(&a).unwrap_or(&0),
                        "{name}: alloc version at {i}"
                    );
                    open.insert(a, v);
                }
                Action::FreeCompleted => {
                    if let Some(o) = open.remove(&a) {
                        assert_eq!(v, o, "{name}: free_completed version at {i}");
                    }
                    next.insert(a, v + 1);
                }
                _ => {}
            }
            let line = ev.line(i);
            match ev.action(i) {
                Action::Oom => assert!(line.starts_with("OOM (requested "), "{name}: {line}"),
                Action::Snapshot => assert_eq!(line, "snapshot"),
                x => {
                    assert!(
                        line.starts_with(&format!("{:<14} ", x.name())),
                        "{name}: {line}"
                    );
                    assert!(line.ends_with(" bytes)"), "{name}: {line}");
                }
            }
        }
        let layout = Rc::new(TimelineLayout::build(snap, device, TimelineKind::Active));
        let el = &layout.elements;
        // Each alloc entry links to the element it allocates.
        for i in 0..n {
            if ev.action(i) == Action::Alloc {
                let e = element_of_event(&layout, &ev, i as u32);
                let e = e.unwrap_or_else(|| panic!("{name}: alloc {i} has no element"));
                assert_eq!(
                    el.alloc_row.get(e as usize),
                    Some(i as u32),
                    "{name}: alloc {i}"
                );
                assert_eq!(el.addr[e as usize], ev.addr[i]);
            }
        }
        for at in sample(n) {
            let st = h.state_at(at);
            let f = StateFrame::from_state(&st);
            assert_eq!(
                round_trip(&f).as_ref(),
                Ok(&f),
                "{name}: frame after {at:?} travels"
            );
            assert_eq!(f.event, at.map(|e| e as u32), "{name}: state event");
            // Blocks tile their segment.
            for k in 0..f.segments() {
                let sum: u64 = f.blocks_of(k).map(|b| f.columns.block_size_bytes[b]).sum();
                assert_eq!(
                    sum, f.columns.segment_size_bytes[k],
                    "{name}: blocks of segment {k} after {at:?}"
                );
            }
            // Every active block links to an element alive then, at its address, made by its
            // alloc when the block knows it.
            for b in 0..f.columns.block_address.len() {
                if !f.block_state(b).is_active() {
                    continue;
                }
                let e = element_at(&layout, f.columns.block_address[b], f.event, false);
                let Some(e) = e else {
                    panic!(
                        "{name}: block {:#x} after {at:?} has no element",
                        f.columns.block_address[b]
                    );
                };
                assert_eq!(el.addr[e as usize], f.columns.block_address[b]);
                if let Some(ae) = f.columns.block_alloc_event[b] {
                    assert_eq!(
                        el.alloc_row.get(e as usize),
                        Some(ae),
                        "{name}: element of block {:#x}",
                        f.columns.block_address[b]
                    );
                }
            }
        }
    }
}

#[test]
fn fixtures_list_and_link() {
    for (name, snap) in fixture_snapshots() {
        check_snapshot(&name, &snap);
    }
}

#[test]
fn real_snapshots_list_and_link() {
    for (name, snap) in real_snapshots() {
        check_snapshot(&name, &snap);
    }
}
