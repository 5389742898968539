//! Allocator State History against its invariants, on hand-made fixtures and on every real
//! snapshot in `../shared/snapshots`: blocks tile their segment at every event, the state after
//! the last event is the file's, a state does not depend on the direction it was reached from,
//! and requested / reserved bytes follow the trace (the timeline's baseline + running sums).

use memlens_core::device_stats;
use memlens_core::model::{BlockState, Snapshot};
use memlens_core::state::{AllocatorHistory, State, StateColumns};
use memlens_core::trace::Action;
use memlens_fixture as fixture;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;

fn load_file(p: &std::path::Path) -> Snapshot {
    let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    memlens_core::load(&bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn load_fixture(text: &str) -> Snapshot {
    let bytes = fixture::build(text).unwrap_or_else(|e| panic!("fixture: {e}"));
    memlens_core::load(&bytes).unwrap_or_else(|e| panic!("fixture: {e}"))
}

/// Blocks tile every segment exactly; the numbers agree with a recount of the blocks.
fn check_tiling(st: &State, what: &str) {
    let c = st.columns();
    let total_blocks: usize = c.segment_blocks.iter().map(|r| r.len()).sum();
    assert_eq!(
        total_blocks,
        c.block_address.len(),
        "{what}: blocks outside every segment"
    );
    let mut prev_end = 0u64;
    for (k, r) in c.segment_blocks.iter().enumerate() {
        let a = c.segment_address[k];
        let size = c.segment_size_bytes[k];
        assert!(
            a >= prev_end,
            "{what}: segment 0x{a:x} overlaps the previous one"
        );
        prev_end = a + size;
        assert!(!r.is_empty(), "{what}: segment 0x{a:x} has no blocks");
        let mut cursor = a;
        for b in r.start as usize..r.end as usize {
            assert_eq!(
                c.block_address[b], cursor,
                "{what}: gap or overlap in segment 0x{a:x}"
            );
            assert!(c.block_size_bytes[b] > 0, "{what}: empty block");
            cursor += c.block_size_bytes[b];
        }
        assert_eq!(
            cursor,
            a + size,
            "{what}: blocks of segment 0x{a:x} do not add up to its size"
        );
    }
    let n = st.numbers();
    let mut alloc = 0;
    let mut pending = 0;
    let mut inactive = 0;
    let mut requested = 0;
    let mut largest = 0;
    for b in 0..c.block_address.len() {
        let size = c.block_size_bytes[b];
        match c.block_state[b] {
            BlockState::ActiveAllocated => {
                alloc += size;
                requested += c.block_requested_size_bytes[b];
            }
            BlockState::ActivePendingFree => {
                pending += size;
                requested += c.block_requested_size_bytes[b];
            }
            BlockState::Inactive => {
                inactive += size;
                largest = largest.max(size);
            }
            BlockState::Unknown => {}
        }
    }
    let whole_free: u64 = c
        .segment_blocks
        .iter()
        .enumerate()
        .filter(|(_, r)| r.len() == 1 && c.block_state[r.start as usize] == BlockState::Inactive)
        .map(|(k, _)| c.segment_size_bytes[k])
        .sum();
    assert_eq!(n.allocated_bytes, alloc, "{what}: allocated");
    assert_eq!(n.pending_free_bytes, pending, "{what}: pending");
    assert_eq!(n.inactive_bytes, inactive, "{what}: inactive");
    assert_eq!(
        n.requested_bytes,
        requested + n.unplaced_requested_bytes,
        "{what}: requested"
    );
    assert_eq!(
        n.largest_free_block_bytes, largest,
        "{what}: largest free block"
    );
    assert_eq!(
        n.inactive_split_bytes,
        inactive - whole_free,
        "{what}: inactive split"
    );
    assert_eq!(
        n.reserved_bytes,
        c.segment_size_bytes.iter().sum::<u64>(),
        "{what}: reserved"
    );
}

/// The state after the last event is the file's segments and blocks (inactive blocks compared
/// without stack; the model drops those). Where the file's blocks do not tile their segment
/// (counted in `file_fixups`), the state's extra blocks must be inactive fillers.
fn check_final_equals_file(h: &AllocatorHistory, s: &Snapshot, device: u32, what: &str) {
    let st = h.state_at(h.events().checked_sub(1));
    let c = st.columns();
    let segs: Vec<_> = {
        let mut v: Vec<_> = s.segments.iter().filter(|g| g.device == device).collect();
        v.sort_by_key(|g| g.address);
        v
    };
    let fixups = h.diagnostics().file_fixups;
    assert_eq!(c.segment_address.len(), segs.len(), "{what}: segment count");
    let mut matched = 0usize;
    for (k, g) in segs.iter().enumerate() {
        assert_eq!(c.segment_address[k], g.address, "{what}: segment address");
        assert_eq!(
            c.segment_size_bytes[k], g.total_size_bytes,
            "{what}: segment size"
        );
        assert_eq!(c.segment_stream[k], g.stream, "{what}: segment stream");
        assert_eq!(
            c.segment_pool_id[k],
            Some(g.pool_id),
            "{what}: segment pool"
        );
        assert_eq!(
            c.segment_is_expandable[k], g.is_expandable,
            "{what}: expandable"
        );
        let r = c.segment_blocks[k].start as usize..c.segment_blocks[k].end as usize;
        let mut file_blocks = s.segment_blocks(g).iter().peekable();
        for bi in r {
            match file_blocks.peek() {
                Some(b) if b.address == c.block_address[bi] => {
                    assert_eq!(
                        c.block_size_bytes[bi], b.size_bytes,
                        "{what}: block size at 0x{:x}",
                        b.address
                    );
                    assert_eq!(
                        c.block_state[bi], b.state,
                        "{what}: block state at 0x{:x}",
                        b.address
                    );
                    if b.state.is_active() {
                        assert_eq!(
                            c.block_requested_size_bytes[bi], b.requested_size_bytes,
                            "{what}: requested at 0x{:x}",
                            b.address
                        );
                        assert_eq!(
                            c.block_stack[bi], b.stack,
                            "{what}: stack at 0x{:x}",
                            b.address
                        );
                    }
                    file_blocks.next();
                    matched += 1;
                }
                _ => {
                    assert!(
                        fixups > 0,
                        "{what}: block 0x{:x} is not in the file",
                        c.block_address[bi]
                    );
                    assert_eq!(
                        c.block_state[bi],
                        BlockState::Inactive,
                        "{what}: filler block 0x{:x} not inactive",
                        c.block_address[bi]
                    );
                }
            }
        }
        assert!(
            file_blocks.next().is_none() || fixups > 0,
            "{what}: file blocks of 0x{:x} missing",
            g.address
        );
    }
    if fixups == 0 {
        assert_eq!(matched, c.block_address.len(), "{what}: block count");
    }
}

fn fingerprint(c: &StateColumns, st: &State) -> u64 {
    let mut h = DefaultHasher::new();
    c.hash_into(&mut h);
    st.unplaced()
        .map(|b| (b.address, b.requested_size_bytes, b.state.name()))
        .collect::<Vec<_>>()
        .hash(&mut h);
    h.finish()
}

trait HashInto {
    fn hash_into(&self, h: &mut DefaultHasher);
}

impl HashInto for StateColumns {
    fn hash_into(&self, h: &mut DefaultHasher) {
        self.segment_address.hash(h);
        self.segment_size_bytes.hash(h);
        self.segment_stream.hash(h);
        self.segment_pool_id.hash(h);
        self.segment_is_expandable.hash(h);
        self.segment_stack.hash(h);
        self.block_address.hash(h);
        self.block_size_bytes.hash(h);
        self.block_requested_size_bytes.hash(h);
        self.block_state
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .hash(h);
        self.block_stack.hash(h);
        self.block_alloc_event.hash(h);
    }
}

/// Everything the history promises, for one device. `every`: check tiling and compare states at
/// every event (else at ~500 sampled ones; the relations are checked at every event either way). Returns the number of events and the last position where the
/// requested or reserved relation fails, so callers can judge it.
fn check_device(s: &Snapshot, device: u32, every: bool, what: &str) -> (usize, Option<usize>) {
    let h = AllocatorHistory::new(s, device);
    assert!(
        h.replays_consistently(),
        "{what}: replaying the ops does not meet the checkpoints"
    );
    check_final_equals_file(&h, s, device, what);
    // The state a viewer shows before the history exists is the history's last state.
    let quick = AllocatorHistory::last_state(s, device);
    let built = h.state_at(Some(usize::MAX));
    assert!(
        quick == built,
        "{what}: last_state differs from the history's last state"
    );
    assert_eq!(
        (quick.event(), quick.columns(), quick.numbers()),
        (built.event(), built.columns(), built.numbers()),
        "{what}: last_state's columns or numbers differ from the history's"
    );
    if h.diagnostics().file_fixups == 0 {
        // The last state's numbers are the file's (as `memlens stats` computes them).
        let st = device_stats(s, device);
        let last = h.state_at(h.events().checked_sub(1)).numbers();
        let got = (
            last.allocated_bytes,
            last.active_bytes,
            last.requested_bytes,
            last.reserved_bytes,
            last.inactive_split_bytes,
            last.largest_free_block_bytes,
        );
        let want = (
            st.allocated_bytes,
            st.active_bytes,
            st.requested_bytes,
            st.reserved_bytes,
            st.inactive_split_bytes,
            st.largest_free_block_bytes,
        );
        assert_eq!(
            got, want,
            "{what}: numbers of the last state vs device_stats"
        );
    }
    let n = h.events();
    let stats = device_stats(s, device);
    let rows = s.device_rows(device);
    let t = &s.trace;
    let sample = if every { 1 } else { (n / 500).max(1) };
    let sampled = |pos: usize| pos % sample == 0 || pos == n;

    // Forward walk by +1 from before the first event, fingerprints of every state.
    let mut st = h.state_at(None);
    assert_eq!(st.event(), None);
    let mut prints = std::collections::HashMap::new();
    let mut req = stats.timeline_baseline_bytes as i128;
    let mut res = stats.reserved_baseline_bytes as i128;
    let (mut req_bad, mut res_bad) = (0usize, 0usize);
    let mut last_bad = None;
    let mut first_bad: Option<String> = None;
    for pos in 0..=n {
        if pos > 0 {
            h.step(&mut st, 1);
            let r = rows.start as usize + pos - 1;
            let size = t.size_bytes[r] as i128;
            match t.action[r] {
                Action::Alloc => req += size,
                Action::FreeCompleted => req -= size,
                Action::SegmentAlloc | Action::SegmentMap => res += size,
                Action::SegmentFree | Action::SegmentUnmap => res -= size,
                _ => {}
            }
        }
        assert_eq!(st.event(), pos.checked_sub(1), "{what}: position");
        if sampled(pos) {
            check_tiling(&st, &format!("{what} after event {:?}", pos.checked_sub(1)));
            prints.insert(pos, fingerprint(&st.columns(), &st));
        }
        let num = st.numbers();
        if num.requested_bytes as i128 != req || num.reserved_bytes as i128 != res {
            last_bad = Some(pos);
        }
        if num.requested_bytes as i128 != req {
            req_bad += 1;
            first_bad.get_or_insert_with(|| {
                format!(
                    "requested at {:?}: {} vs {}",
                    pos.checked_sub(1),
                    num.requested_bytes,
                    req
                )
            });
        }
        if num.reserved_bytes as i128 != res {
            res_bad += 1;
            first_bad.get_or_insert_with(|| {
                format!(
                    "reserved at {:?}: {} vs {}",
                    pos.checked_sub(1),
                    num.reserved_bytes,
                    res
                )
            });
        }
    }
    // Backward walk by -1 from the last event: the same states.
    let mut back = h.state_at(n.checked_sub(1));
    for pos in (0..=n).rev() {
        if pos < n {
            h.step(&mut back, -1);
        }
        if let Some(p) = prints.get(&pos) {
            assert_eq!(
                fingerprint(&back.columns(), &back),
                *p,
                "{what}: state {pos} differs walking backward"
            );
        }
    }
    // Jumps from far away and fresh states: the same states.
    let mut jumper = h.state_at(None);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let jumps = if every { n.min(300) } else { 200 };
    for _ in 0..jumps {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let pos = (x % (n as u64 + 1)) as usize;
        let pos = if sampled(pos) {
            pos
        } else {
            pos - pos % sample
        };
        h.seek(&mut jumper, pos.checked_sub(1));
        assert_eq!(
            fingerprint(&jumper.columns(), &jumper),
            prints[&pos],
            "{what}: state {pos} differs after a jump"
        );
        let fresh = h.state_at(pos.checked_sub(1));
        assert_eq!(
            fingerprint(&fresh.columns(), &fresh),
            prints[&pos],
            "{what}: fresh state {pos} differs"
        );
        assert_eq!(
            fresh.numbers(),
            jumper.numbers(),
            "{what}: numbers at {pos}"
        );
    }
    if let Some(b) = &first_bad {
        println!("  {what}: relation broken at {req_bad} (requested) / {res_bad} (reserved) states; first: {b}");
    }
    (n, last_bad)
}

/// The last event whose undo was skipped (the relations may fail at states up to it).
fn last_skipped_event(h: &AllocatorHistory) -> Option<usize> {
    use memlens_core::state::IssueKind as K;
    h.diagnostics()
        .issues
        .iter()
        .filter(|i| {
            matches!(
                i.kind,
                K::AllocWithoutBlock
                    | K::DoubleFree
                    | K::SegmentAllocMismatch
                    | K::SegmentFreeOverlap
                    | K::SegmentMapMismatch
                    | K::SegmentUnmapOverlap
                    | K::AddressOverflow
                    | K::RequestedMismatch
            )
        })
        .map(|i| i.event as usize)
        .max()
}

/// Checks every snapshot of a folder; returns how many devices were checked.
fn check_folder(dir: &std::path::Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        println!(
            "NOTICE: {} is absent; real-snapshot state checks skipped",
            dir.display()
        );
        return 0;
    };
    let mut files: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "pickle"))
        .collect();
    files.sort();
    check_files(&files)
}

/// Checks every snapshot file; returns how many devices were checked.
fn check_files(files: &[PathBuf]) -> usize {
    let mut checked = 0;
    for p in files {
        let s = load_file(p);
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        for device in s.devices() {
            let what = format!("{name} device {device}");
            let h = AllocatorHistory::new(&s, device);
            let d = h.diagnostics().clone();
            let every = h.events() <= 3000;
            let (n, bad) = check_device(&s, device, every, &what);
            println!(
                "{what}: {n} events, stride {}, {} KiB; skipped {}, unplaced frees {}+{}, unsplit inferred {}, size rule {}/{}; warnings {:?}",
                h.stride(),
                h.memory_bytes() / 1024,
                d.skipped(),
                d.free_outside_segments,
                d.free_over_live_block,
                d.inferred_unsplit,
                d.size_rule_agreed,
                d.size_rule_checked,
                d.warnings()
            );
            // The relations hold at every state after the last skipped undo (a skipped undo,
            // e.g. an alloc whose free was never recorded, shifts all states before it).
            if let Some(pos) = bad {
                let last = last_skipped_event(&h);
                assert!(
                    last.is_some_and(|e| pos <= e + 1),
                    "{what}: requested/reserved relation broken at state {pos}, after the last skipped undo {last:?}"
                );
                println!("  {what}: relations hold only from the state after event {last:?} on");
            }
            checked += 1;
        }
    }
    checked
}

#[test]
fn real_snapshots_hold_the_invariants() {
    let Some(files) = fixture::shared_snapshots() else {
        return;
    };
    let n = check_files(&files);
    println!("{n} devices checked");
}

/// More folders of snapshots (e.g. made with `memlens synth`) to check the same way:
/// `MEMLENS_STATE_SNAPSHOTS=/tmp/a:/tmp/b cargo test --release -p memlens-core --test state`.
#[test]
fn extra_snapshots_hold_the_invariants() {
    let Ok(dirs) = std::env::var("MEMLENS_STATE_SNAPSHOTS") else {
        println!("NOTICE: MEMLENS_STATE_SNAPSHOTS is not set; no extra snapshots checked");
        return;
    };
    for d in dirs.split(':').filter(|d| !d.is_empty()) {
        let n = check_folder(std::path::Path::new(d));
        assert!(n > 0, "no snapshots in {d}");
    }
}

/// Ground truth for the inferred sizes: `memlens synth` runs with the same seed and workload are
/// prefixes of each other, so the short run's final segments are the true state of the long run
/// after the short run's last event. `MEMLENS_STATE_PREFIX_PAIRS=short.pickle,long.pickle:…`.
/// Compares segments and block address/size/state/requested (stacks are per-file ids).
#[test]
fn prefix_runs_match_the_true_states() {
    let Ok(pairs) = std::env::var("MEMLENS_STATE_PREFIX_PAIRS") else {
        println!("NOTICE: MEMLENS_STATE_PREFIX_PAIRS is not set; no prefix runs checked");
        return;
    };
    for pair in pairs.split(':').filter(|p| !p.is_empty()) {
        let Some((short, long)) = pair.split_once(',') else {
            panic!("MEMLENS_STATE_PREFIX_PAIRS: `{pair}` is not SHORT,LONG");
        };
        let s = load_file(std::path::Path::new(short));
        let l = load_file(std::path::Path::new(long));
        for device in s.devices() {
            let n_short = s.device_rows(device).len();
            let h = AllocatorHistory::new(&l, device);
            let truth = AllocatorHistory::new(&s, device)
                .state_at(n_short.checked_sub(1))
                .columns();
            let got = h.state_at(n_short.checked_sub(1)).columns();
            assert_eq!(
                got.segment_address, truth.segment_address,
                "{pair} device {device}: segments"
            );
            assert_eq!(
                got.segment_size_bytes, truth.segment_size_bytes,
                "{pair} device {device}: segment sizes"
            );
            let key = |c: &StateColumns, i: usize| {
                (
                    c.block_address[i],
                    c.block_size_bytes[i],
                    c.block_state[i].name(),
                    c.block_requested_size_bytes[i],
                )
            };
            let t: std::collections::BTreeSet<_> = (0..truth.block_address.len())
                .map(|i| key(&truth, i))
                .collect();
            let g: std::collections::BTreeSet<_> =
                (0..got.block_address.len()).map(|i| key(&got, i)).collect();
            let wrong: Vec<_> = g.difference(&t).take(5).collect();
            let missing: Vec<_> = t.difference(&g).take(5).collect();
            println!(
                "{pair} device {device}: after event {}: {} true blocks, {} reconstructed not true, {} true not reconstructed; e.g. {wrong:x?} vs {missing:x?}",
                n_short as i64 - 1,
                t.len(),
                g.difference(&t).count(),
                t.difference(&g).count()
            );
            assert!(
                wrong.is_empty() && missing.is_empty(),
                "{pair} device {device}: reconstructed state differs from the true one"
            );
        }
    }
}

const MIB: u64 = 1 << 20;

/// (offset from `base`, size, state) of every block.
fn blocks_of(st: &State, base: u64) -> Vec<(i64, u64, &'static str)> {
    st.blocks()
        .map(|b| (b.address as i64 - base as i64, b.size_bytes, b.state.name()))
        .collect()
}

/// (offset from `base`, size) of every segment.
fn segments_of(st: &State, base: u64) -> Vec<(i64, u64)> {
    st.segments()
        .map(|g| (g.address as i64 - base as i64, g.size_bytes))
        .collect()
}

/// Expandable segments: one segment grows by `segment_map` (merging with the mapped range next
/// to it), shrinks by `segment_unmap`, splits in two when its middle is unmapped, and goes.
#[test]
fn expandable_segments_grow_shrink_and_split() {
    let s = load_fixture(
        "setting expandable_segments true\n\
         segment 0x7f3000000000 32MiB expandable\n\
           block 24MiB allocated requested=25165824\n\
           block 8MiB allocated requested=8388608\n\
         segment_map 0x7f3000000000 40MiB\n\
         alloc a 0x7f3000000000 24MiB\n\
         segment_map 0x7f3002800000 20MiB\n\
         alloc big 0x7f3001800000 30MiB\n\
         free big\n\
         segment_unmap 0x7f3002800000 20MiB\n\
         alloc m 0x7f3001800000 8MiB\n\
         segment_map 0x7f3002800000 20MiB\n\
         alloc y 0x7f3002800000 20MiB\n\
         segment_unmap 0x7f3002000000 8MiB\n\
         free y\n\
         segment_unmap 0x7f3002800000 20MiB\n",
    );
    let base = 0x7f3000000000u64;
    let h = AllocatorHistory::new(&s, 0);
    assert_eq!(h.events(), 14);
    assert_eq!(h.diagnostics().warnings(), Vec::<String>::new());
    let (a, m, al, pf, fr) = (
        (0, 24 * MIB, "active_allocated"),
        (24, 8 * MIB, "active_allocated"),
        "active_allocated",
        "active_pending_free",
        "inactive",
    );
    let mb = |o: i64| o * MIB as i64;
    type Expected<'a> = (Option<usize>, Vec<(i64, u64)>, Vec<(i64, u64, &'a str)>);
    let expect: Vec<Expected> = vec![
        (None, vec![], vec![]),
        (Some(0), vec![(0, 40 * MIB)], vec![(0, 40 * MIB, fr)]),
        (
            Some(1),
            vec![(0, 40 * MIB)],
            vec![(mb(a.0), a.1, a.2), (mb(24), 16 * MIB, fr)],
        ),
        (
            Some(2),
            vec![(0, 60 * MIB)],
            vec![(0, 24 * MIB, al), (mb(24), 36 * MIB, fr)],
        ),
        (
            Some(3),
            vec![(0, 60 * MIB)],
            vec![
                (0, 24 * MIB, al),
                (mb(24), 30 * MIB, al),
                (mb(54), 6 * MIB, fr),
            ],
        ),
        (
            Some(4),
            vec![(0, 60 * MIB)],
            vec![
                (0, 24 * MIB, al),
                (mb(24), 30 * MIB, pf),
                (mb(54), 6 * MIB, fr),
            ],
        ),
        (
            Some(5),
            vec![(0, 60 * MIB)],
            vec![(0, 24 * MIB, al), (mb(24), 36 * MIB, fr)],
        ),
        (
            Some(6),
            vec![(0, 40 * MIB)],
            vec![(0, 24 * MIB, al), (mb(24), 16 * MIB, fr)],
        ),
        (
            Some(7),
            vec![(0, 40 * MIB)],
            vec![
                (0, 24 * MIB, al),
                (mb(m.0), m.1, m.2),
                (mb(32), 8 * MIB, fr),
            ],
        ),
        (
            Some(8),
            vec![(0, 60 * MIB)],
            vec![
                (0, 24 * MIB, al),
                (mb(24), 8 * MIB, al),
                (mb(32), 28 * MIB, fr),
            ],
        ),
        (
            Some(9),
            vec![(0, 60 * MIB)],
            vec![
                (0, 24 * MIB, al),
                (mb(24), 8 * MIB, al),
                (mb(32), 8 * MIB, fr),
                (mb(40), 20 * MIB, al),
            ],
        ),
        (
            Some(10),
            vec![(0, 32 * MIB), (mb(40), 20 * MIB)],
            vec![
                (0, 24 * MIB, al),
                (mb(24), 8 * MIB, al),
                (mb(40), 20 * MIB, al),
            ],
        ),
        (
            Some(11),
            vec![(0, 32 * MIB), (mb(40), 20 * MIB)],
            vec![
                (0, 24 * MIB, al),
                (mb(24), 8 * MIB, al),
                (mb(40), 20 * MIB, pf),
            ],
        ),
        (
            Some(12),
            vec![(0, 32 * MIB), (mb(40), 20 * MIB)],
            vec![
                (0, 24 * MIB, al),
                (mb(24), 8 * MIB, al),
                (mb(40), 20 * MIB, fr),
            ],
        ),
        (
            Some(13),
            vec![(0, 32 * MIB)],
            vec![(0, 24 * MIB, al), (mb(24), 8 * MIB, al)],
        ),
    ];
    // Forward, backward and by jumps: the same states.
    let mut st = h.state_at(None);
    for (event, segs, blocks) in &expect {
        h.seek(&mut st, *event);
        assert_eq!(&segments_of(&st, base), segs, "segments after {event:?}");
        assert_eq!(&blocks_of(&st, base), blocks, "blocks after {event:?}");
        assert!(
            st.segments().all(|g| g.is_expandable && g.stream == 0),
            "after {event:?}"
        );
    }
    for (event, segs, blocks) in expect.iter().rev() {
        h.seek(&mut st, *event);
        assert_eq!(
            &segments_of(&st, base),
            segs,
            "segments after {event:?} (backward)"
        );
        assert_eq!(
            &blocks_of(&st, base),
            blocks,
            "blocks after {event:?} (backward)"
        );
    }
    // The file's segment keeps its pool; the range mapped next to it inherits it.
    assert_eq!(
        h.state_at(Some(13)).segments().next().map(|g| g.pool_id),
        Some(Some((0, 0)))
    );
    let n = h.state_at(Some(10)).numbers();
    assert_eq!(
        (n.reserved_bytes, n.allocated_bytes, n.inactive_bytes),
        (52 * MIB, 52 * MIB, 0)
    );
    check_device(&s, 0, true, "expandable fixture");
}

/// Unmapped ranges join only expandable segments of their own stream.
#[test]
fn unmapped_ranges_join_only_their_stream() {
    let s = load_fixture(
        "segment 0x7f3001400000 20MiB expandable stream=0\n  block rest inactive\n\
         segment 0x7f3002800000 20MiB expandable stream=7\n  block rest inactive\n\
         segment_unmap 0x7f3003c00000 20MiB stream=7\n\
         segment_unmap 0x7f3000000000 20MiB stream=7\n",
    );
    let h = AllocatorHistory::new(&s, 0);
    let st = h.state_at(None);
    let got: Vec<(u64, u64, u64)> = st
        .segments()
        .map(|g| (g.address, g.size_bytes, g.stream))
        .collect();
    assert_eq!(
        got,
        vec![
            (0x7f3000000000, 20 * MIB, 7),
            (0x7f3001400000, 20 * MIB, 0),
            (0x7f3002800000, 40 * MIB, 7),
        ]
    );
    check_device(&s, 0, true, "stream fixture");
}

/// Private pools (CUDA graphs, `MemPool`): file segments keep `segment_pool_id`; segments known
/// only from the trace take the entries' `pool_id` (torch ≥ 2.11) or have no known pool.
#[test]
fn private_pool_segments_keep_their_pool() {
    let a1: u64 = 0x7f7700000000;
    let a2 = a1 + 20 * MIB;
    let a3 = a1 + 40 * MIB;
    let a4 = a1 + 60 * MIB;
    let json = format!(
        r#"{{"segments":[
            {{"device":0,"address":{a1},"total_size":{t20},"stream":0,"segment_type":"large","segment_pool_id":[0,0],"is_expandable":false,
              "blocks":[{{"address":{a1},"size":{t4},"requested_size":4000000,"state":"active_allocated"}},
                        {{"address":{a1b},"size":{t16},"requested_size":0,"state":"inactive"}}]}},
            {{"device":0,"address":{a2},"total_size":{t20},"stream":0,"segment_type":"large","segment_pool_id":[1,0],"is_expandable":false,
              "blocks":[{{"address":{a2},"size":{t16},"requested_size":16777216,"state":"active_allocated"}},
                        {{"address":{a2b},"size":{t4},"requested_size":0,"state":"inactive"}}]}}],
          "device_traces":[[
            {{"action":"segment_alloc","addr":{a3},"size":{t2},"stream":0,"pool_id":[1,0]}},
            {{"action":"alloc","addr":{a3},"size":2000,"stream":0,"pool_id":[1,0]}},
            {{"action":"free_requested","addr":{a3},"size":2000,"stream":0}},
            {{"action":"free_completed","addr":{a3},"size":2000,"stream":0}},
            {{"action":"segment_free","addr":{a3},"size":{t2},"stream":0,"pool_id":[1,0]}},
            {{"action":"segment_alloc","addr":{a4},"size":{t20},"stream":0}},
            {{"action":"segment_free","addr":{a4},"size":{t20},"stream":0}},
            {{"action":"alloc","addr":{a2},"size":16777216,"stream":0}}]]}}"#,
        t2 = 2 * MIB,
        t4 = 4 * MIB,
        t16 = 16 * MIB,
        t20 = 20 * MIB,
        a1b = a1 + 4 * MIB,
        a2b = a2 + 16 * MIB,
    );
    let s = memlens_core::load(json.as_bytes()).unwrap_or_else(|e| panic!("json: {e}"));
    let h = AllocatorHistory::new(&s, 0);
    assert_eq!(h.diagnostics().warnings(), Vec::<String>::new());
    type Pool = (u64, Option<(i64, i64)>, String);
    let pools = |e: Option<usize>| -> Vec<Pool> {
        h.state_at(e)
            .segments()
            .map(|g| (g.address - a1, g.pool_id, format!("{:?}", g.kind)))
            .collect()
    };
    let big = |x: u64| x * MIB;
    assert_eq!(
        pools(None),
        vec![
            (0, Some((0, 0)), "Large".into()),
            (big(20), Some((1, 0)), "Large".into())
        ]
    );
    assert_eq!(
        pools(Some(1)),
        vec![
            (0, Some((0, 0)), "Large".into()),
            (big(20), Some((1, 0)), "Large".into()),
            (big(40), Some((1, 0)), "Small".into())
        ]
    );
    assert_eq!(
        pools(Some(5)),
        vec![
            (0, Some((0, 0)), "Large".into()),
            (big(20), Some((1, 0)), "Large".into()),
            (big(60), None, "Large".into())
        ]
    );
    // Before its alloc, the private pool's segment is free; the default pool's block is older.
    let st = h.state_at(Some(6));
    let by_pool = |p: (i64, i64)| -> u64 {
        st.segments()
            .filter(|g| g.pool_id == Some(p))
            .flat_map(|g| st.segment_blocks(&g).collect::<Vec<_>>())
            .filter(|b| b.state.is_active())
            .map(|b| b.size_bytes)
            .sum()
    };
    assert_eq!((by_pool((0, 0)), by_pool((1, 0))), (4 * MIB, 0));
    let st = h.state_at(Some(7));
    let b = st
        .block_at(a2 + 5)
        .map(|(g, b)| (g.pool_id, b.state.name(), b.alloc_event));
    assert_eq!(b, Some((Some((1, 0)), "active_allocated", Some(7))));
    // The small block's size: 2000 B round to 2048.
    let st = h.state_at(Some(1));
    assert_eq!(
        st.block_at(a3)
            .map(|(_, b)| (b.size_bytes, b.requested_size_bytes)),
        Some((2048, 2000))
    );
    check_device(&s, 0, true, "private pool fixture");
}

/// At an `oom`, the request against the largest free block and the total free: here the free
/// memory would hold the request, but no single block does.
#[test]
fn oom_compares_the_request_with_the_free_blocks() {
    let s = load_fixture(
        "stack big \"model.py:44:attention|train.py:50:<module>\"\n\
         segment 0x7f9900000000 1GiB\n\
           block 400MiB allocated requested=419430400\n\
           block 100MiB inactive\n\
           block 400MiB allocated requested=419430400\n\
           block rest inactive\n\
         segment_alloc 0x7f9900000000 1GiB\n\
         alloc x 0x7f9900000000 400MiB\n\
         alloc h 0x7f9919000000 100MiB\n\
         alloc y 0x7f991f400000 400MiB\n\
         free h\n\
         oom 200MiB device_free=123456 frames=@big\n",
    );
    let h = AllocatorHistory::new(&s, 0);
    assert_eq!(h.ooms().collect::<Vec<_>>(), vec![6]);
    let st = h.state_at(Some(6));
    let oom = st
        .numbers()
        .oom
        .unwrap_or_else(|| panic!("no oom numbers at the oom event"));
    assert_eq!(oom.requested_bytes, 200 * MIB);
    assert_eq!(oom.device_free_bytes, Some(123456));
    assert_eq!(oom.largest_free_block_bytes, 124 * MIB);
    assert_eq!(oom.total_free_bytes, 224 * MIB);
    let n = st.numbers();
    assert!((n.fragmentation_pct - 100.0 * (1.0 - 124.0 / 224.0)).abs() < 1e-9);
    assert_eq!(n.inactive_split_bytes, 224 * MIB);
    // Only the oom event has oom numbers.
    assert_eq!(h.state_at(Some(5)).numbers().oom, None);
    // Before the free of `h`, the largest hole is the tail.
    let n = h.state_at(Some(3)).numbers();
    assert_eq!(
        (n.largest_free_block_bytes, n.inactive_bytes),
        (124 * MIB, 124 * MIB)
    );
    check_device(&s, 0, true, "oom fixture");
}

/// A trace that begins mid-stream (ring buffer): frees of blocks allocated before it, a
/// segment freed that the final state does not have, with an allocation inside it.
#[test]
fn a_trace_starting_mid_stream_reconstructs_what_it_frees() {
    let s = load_fixture(
        "segment 0x7f5000000000 20MiB\n\
           block 4MiB allocated requested=4000000\n\
           block 2MiB allocated requested=2000000\n\
           block rest inactive\n\
         free_completed 0x7f5000600000 1000000\n\
         free_requested 0x7f5000700000 3000000\n\
         free_completed 0x7f5000700000 3000000\n\
         free_completed 0x7f5001400000 4096\n\
         segment_free 0x7f5001400000 2MiB\n\
         alloc 0x7f5000400000 2000000\n",
    );
    let base = 0x7f5000000000u64;
    let h = AllocatorHistory::new(&s, 0);
    assert_eq!(h.diagnostics().warnings(), Vec::<String>::new());
    let st = h.state_at(None);
    assert_eq!(
        segments_of(&st, base),
        vec![(0, 20 * MIB), (20 * MIB as i64, 2 * MIB)]
    );
    assert_eq!(
        blocks_of(&st, base),
        vec![
            (0, 4 * MIB, "active_allocated"),
            (4 * MIB as i64, 2 * MIB, "inactive"),
            // Freed first thing: requested before the trace, so pending.
            (6 * MIB as i64, 1_000_448, "active_pending_free"),
            (6 * MIB as i64 + 1_000_448, MIB - 1_000_448, "inactive"),
            (7 * MIB as i64, 3_000_320, "active_allocated"),
            (7 * MIB as i64 + 3_000_320, 13 * MIB - 3_000_320, "inactive"),
            (20 * MIB as i64, 4096, "active_pending_free"),
            (20 * MIB as i64 + 4096, 2 * MIB - 4096, "inactive"),
        ]
    );
    assert!(
        st.blocks()
            .filter(|b| b.state.is_active())
            .all(|b| b.alloc_event.is_none()),
        "allocated before the trace"
    );
    assert_eq!(st.segments().nth(1).map(|g| g.pool_id), Some(None));
    let stats = device_stats(&s, 0);
    assert_eq!(
        st.numbers().requested_bytes as i64,
        stats.timeline_baseline_bytes
    );
    check_device(&s, 0, true, "mid-stream fixture");
}

/// Every fixture of `tests/fixtures` (made by the fixture builder) holds the invariants.
#[test]
fn every_fixture_holds_the_invariants() {
    for (p, text) in memlens_fixture::fixture_texts() {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let s = load_fixture(&text);
        for device in s.devices() {
            let what = format!("fixture {name} device {device}");
            let (n, bad) = check_device(&s, device, true, &what);
            let h = AllocatorHistory::new(&s, device);
            if let Some(pos) = bad {
                let last = last_skipped_event(&h);
                assert!(
                    last.is_some_and(|e| pos <= e + 1),
                    "{what}: relation broken at state {pos} after the last skipped undo {last:?}"
                );
            }
            println!("{what}: {n} events; {:?}", h.diagnostics().warnings());
        }
    }
}
