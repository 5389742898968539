//! The analysis on the fixture texts (tests/fixtures): each planted case reads back as planted.

use super::{diagnose_device, DeviceDiagnosis, Options};
use crate::analysis::verdict::VerdictKind;

/// Every fixture that builds, decoded, with its path for messages.
fn fixture_snapshots() -> Vec<(String, crate::Snapshot)> {
    memlens_fixture::fixture_texts()
        .into_iter()
        .filter_map(|(path, text)| {
            let name = path.display().to_string();
            let bytes = memlens_fixture::build(&text).ok()?;
            let snap = crate::load(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
            Some((name, snap))
        })
        .collect()
}

fn diagnose_fixture(name: &str) -> DeviceDiagnosis {
    let path = memlens_fixture::fixtures_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let bytes = memlens_fixture::build(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let snap = crate::load(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    let device = snap.default_device().unwrap_or(0);
    diagnose_device(&snap, device, &Options::default())
}

#[test]
fn oom_fixture_reads_the_request_the_device_free_and_the_user_frame() {
    let d = diagnose_fixture("oom.txt");
    let o = d.ooms.first().unwrap_or_else(|| panic!("no oom read"));
    assert_eq!(o.requested_bytes, 64 << 30);
    assert_eq!(o.device_free_bytes, Some(123_456));
    assert_eq!(o.pool, "large");
    assert!(!o.fits_in_free_total);
    assert_eq!(o.frame, "model.py:44:attention");
    assert_eq!(d.verdict.kind, VerdictKind::TooMuch);
    assert_eq!(d.peak.top[0].frame, "model.py:30:forward");
    assert_eq!(d.peak.top[0].bytes, 943_718_400);
}

#[test]
fn record_stream_fixture_reports_the_pending_free() {
    let d = diagnose_fixture("pending_free_record_stream.txt");
    assert!(d.pending_frees.count >= 1, "{:?}", d.pending_frees);
    assert!(d
        .pending_frees
        .largest
        .iter()
        .all(|p| p.free_event.is_none_or(|f| f > p.free_requested_event)));
    assert_eq!(d.pending_frees.largest[0].frame, "loader.py:31:prefetch");
}

#[test]
fn private_pool_fixture_reports_the_pool_and_no_leak() {
    let d = diagnose_fixture("private_pool.txt");
    assert!(!d.private_pools.is_empty(), "no private pool read");
    assert!(d.private_pools.iter().all(|p| p.pool_id != (0, 0)));
    assert_ne!(d.verdict.kind, VerdictKind::Leak);
}

#[test]
fn every_fixture_diagnoses_and_its_groupings_sum_to_the_live_total() {
    for (name, snap) in fixture_snapshots() {
        for d in super::diagnose(&snap, &Options::default()).devices {
            let total = d.peak.allocated_bytes;
            assert_eq!(
                d.peak.top.iter().map(|g| g.bytes).sum::<u64>(),
                total,
                "{name}"
            );
            assert_eq!(
                d.peak.by_class.iter().map(|g| g.bytes).sum::<u64>(),
                total,
                "{name}"
            );
            assert!(!d.verdict.summary.is_empty(), "{name}");
        }
    }
}

#[test]
fn icicle_width_is_the_live_total_and_children_fit_their_parents() {
    for (name, snap) in fixture_snapshots() {
        for device in snap.devices() {
            let d = diagnose_device(&snap, device, &Options::default());
            let replay = crate::replay::replay_device(&snap, device);
            let ic = super::icicle::icicle_at(&snap, &replay, d.peak.event);
            assert_eq!(ic.total_bytes, d.peak.allocated_bytes, "{name}");
            let roots: u64 = ic
                .nodes
                .iter()
                .filter(|n| n.depth == 0)
                .map(|n| n.bytes)
                .sum();
            assert!(roots <= ic.total_bytes, "{name}");
            // Depth-first order: each node lies inside the last node one level up.
            let mut open: Vec<(u64, u64)> = Vec::new();
            for n in &ic.nodes {
                open.truncate(n.depth as usize);
                if let Some(&(a, b)) = open.last() {
                    assert!(
                        a <= n.offset_bytes && n.offset_bytes + n.bytes <= b,
                        "{name}: {n:?}"
                    );
                }
                open.push((n.offset_bytes, n.offset_bytes + n.bytes));
            }
        }
    }
}

#[test]
fn callers_of_a_frame_hold_what_it_holds() {
    let path = memlens_fixture::fixtures_dir().join("oom.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
    let bytes = memlens_fixture::build(&text).unwrap_or_else(|e| panic!("{e}"));
    let snap = crate::load(&bytes).unwrap_or_else(|e| panic!("{e}"));
    let replay = crate::replay::replay_device(&snap, 0);
    let d = diagnose_device(&snap, 0, &Options::default());
    let ic = super::icicle::callers_at(&snap, &replay, d.peak.event, "train.py:50:<module>");
    // Every live allocation of the fixture comes from train.py:50.
    assert_eq!(ic.total_bytes, d.peak.allocated_bytes);
    assert_eq!(ic.nodes[0].frame, "train.py:50:<module>");
    assert_eq!(ic.nodes[0].depth, 0);
    let inner = super::icicle::callers_at(&snap, &replay, d.peak.event, "model.py:30:forward");
    assert_eq!(inner.nodes[0].frame, "model.py:30:forward");
    assert_eq!(inner.nodes[1].frame, "train.py:50:<module>");
    assert_eq!(inner.nodes[1].depth, 1);
}

#[test]
fn what_grew_between_two_moments_sums_to_the_change_of_the_live_total() {
    for (name, snap) in fixture_snapshots() {
        for device in snap.devices() {
            let replay = crate::replay::replay_device(&snap, device);
            let last = replay.events.checked_sub(1);
            let b = super::compare::between(&snap, &replay, None, last);
            let net: i64 = b.by_frame.iter().map(|c| c.change_bytes).sum();
            assert_eq!(net, b.to_bytes as i64 - b.from_bytes as i64, "{name}");
            // By full stack: every changed stack sums to the same change, each within its frame.
            let all = super::stack_change::stack_changes(
                (&snap, &replay, None),
                (&snap, &replay, last),
                None,
            );
            let net: i64 = all.iter().map(|c| c.change_bytes).sum();
            assert_eq!(net, b.to_bytes as i64 - b.from_bytes as i64, "{name}");
            for f in &b.by_frame {
                let in_frame: i64 = all
                    .iter()
                    .filter(|c| c.frame == f.frame)
                    .map(|c| c.change_bytes)
                    .sum();
                assert_eq!(in_frame, f.change_bytes, "{name}: {}", f.frame);
            }
            let top = super::compare::TOP_STACK_CHANGES.min(all.len());
            assert_eq!(b.by_stack, all[..top], "{name}");
            assert_eq!(b.to_bytes, replay.live_bytes_at(last), "{name}");
        }
    }
}

#[test]
fn two_moments_of_two_devices_sum_to_the_change_and_match_the_peaks() {
    for (name, snap) in fixture_snapshots() {
        let devices = snap.devices();
        let (Some(&da), Some(&db)) = (devices.first(), devices.last()) else {
            continue;
        };
        let (ra, rb) = (
            crate::replay::replay_device(&snap, da),
            crate::replay::replay_device(&snap, db),
        );
        let (ea, eb) = (ra.events.checked_sub(1), rb.events / 2);
        let m = super::compare::compare_moments((&snap, &ra, ea), (&snap, &rb, Some(eb)));
        let net: i64 = m.by_frame.iter().map(|c| c.change_bytes).sum();
        assert_eq!(
            net,
            m.b.allocated_bytes as i64 - m.a.allocated_bytes as i64,
            "{name}"
        );
        assert_eq!(m.a.allocated_bytes, ra.live_bytes_at(ea));
        let net: i64 = m.by_class.iter().map(|c| c.change_bytes).sum();
        let change = m.b.allocated_bytes as i64 - m.a.allocated_bytes as i64;
        assert_eq!(net, change, "{name}: by class");
        let all =
            super::stack_change::stack_changes((&snap, &ra, ea), (&snap, &rb, Some(eb)), None);
        assert_eq!(
            all.iter().map(|c| c.change_bytes).sum::<i64>(),
            change,
            "{name}: by stack"
        );
        let top = super::compare::TOP_STACK_CHANGES.min(all.len());
        assert_eq!(m.by_stack, all[..top], "{name}");
        // A side's groups cross to the page as JSON (stacks' frames interned) and read back
        // the same.
        let g = super::compare::moment_groups(&snap, &ra, ea);
        let json = serde_json::to_string(&g).unwrap_or_else(|e| panic!("{name}: {e}"));
        let back: super::compare::MomentGroups =
            serde_json::from_str(&json).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(back, g, "{name}");
        // Two devices at their peaks: the same as comparing the snapshot with itself there.
        let c = super::compare::compare_device_peaks(&snap, da, &snap, db);
        let same = super::compare::compare_peaks(&snap, &snap, Some(db));
        if da == db {
            assert_eq!(c, same.devices[0], "{name}");
            assert_eq!(c.peak_change_bytes, 0, "{name}");
        }
        assert_eq!(c.device, db);
        let stacks = super::stack_change::stack_changes(
            (&snap, &ra, c.a.event),
            (&snap, &rb, c.b.event),
            Some(super::compare::TOP_STACK_CHANGES),
        );
        assert_eq!(c.by_stack, stacks, "{name}: stacks at the peaks");
    }
}

#[test]
fn every_live_allocation_s_path_runs_through_its_icicle_cells() {
    for (name, snap) in fixture_snapshots() {
        for device in snap.devices() {
            let replay = crate::replay::replay_device(&snap, device);
            let last = replay.events.checked_sub(1);
            let ic = super::icicle::icicle_at(&snap, &replay, last);
            let min = ic.total_bytes / super::icicle::MIN_SHARE_INV;
            for a in replay.live_at(last) {
                let stack = a.alloc_event.map(|_| a.stack);
                let path = super::icicle::allocation_path(&snap, stack, None)
                    .unwrap_or_else(|| panic!("{name}: no path"));
                let cells = ic.path_nodes(&path);
                // Each cell is the path's frame at its depth, nested in the one above it.
                for (d, &i) in cells.iter().enumerate() {
                    let n = &ic.nodes[i];
                    assert_eq!((n.depth as usize, &n.frame), (d, &path[d]), "{name}");
                    if let Some(&p) = d.checked_sub(1).and_then(|k| cells.get(k)) {
                        let p = &ic.nodes[p];
                        assert!(p.offset_bytes <= n.offset_bytes, "{name}");
                        assert!(
                            n.offset_bytes + n.bytes <= p.offset_bytes + p.bytes,
                            "{name}"
                        );
                    }
                }
                // An allocation at least as wide as the cut is drawn down to its leaf.
                if a.size_bytes >= min.max(1) {
                    assert_eq!(cells.len(), path.len(), "{name}: {path:?}");
                }
            }
            // Inverted for the leaf of the largest path: its path starts with that frame.
            let Some(top) = ic.nodes.iter().max_by_key(|n| (n.depth, n.bytes)) else {
                continue;
            };
            if top.frame.starts_with('(') {
                continue;
            }
            let inv = super::icicle::callers_at(&snap, &replay, last, &top.frame);
            for a in replay.live_at(last) {
                let stack = a.alloc_event.map(|_| a.stack);
                if let Some(p) = super::icicle::allocation_path(&snap, stack, Some(&top.frame)) {
                    assert_eq!(p[0], top.frame, "{name}");
                    assert_eq!(inv.path_nodes(&p).first(), Some(&0), "{name}");
                }
            }
        }
    }
}
