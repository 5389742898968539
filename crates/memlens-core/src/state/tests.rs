//! Unit tests of the state primitives, the size rules and the build's inference; scenario
//! fixtures and real snapshots are in `tests/state.rs`.

use super::build::round_size;
use super::live::{Blk, RangeFlags, State};
use super::*;
use crate::model::BlockState;

const MIB: u64 = 1 << 20;

fn snap(text: &str) -> Snapshot {
    let bytes = match memlens_fixture::build(text) {
        Ok(b) => b,
        Err(e) => panic!("fixture: {e}"),
    };
    match crate::load(&bytes) {
        Ok(s) => s,
        Err(e) => panic!("fixture does not load: {e}"),
    }
}

fn meta() -> SegmentMeta {
    SegmentMeta {
        stream: 0,
        pool_id: Some((0, 0)),
        is_expandable: true,
        kind: SegmentKind::Unknown,
        stack: StackId::EMPTY,
    }
}

fn active(size: u64) -> Blk {
    Blk {
        size,
        requested: size - 100,
        stack: StackId(3),
        alloc_event: Some(7),
        state: BlockState::ActiveAllocated,
    }
}

/// (address, size, state) of every block.
fn layout(st: &State) -> Vec<(u64, u64, &'static str)> {
    st.blocks()
        .map(|b| (b.address, b.size_bytes, b.state.name()))
        .collect()
}

fn segs(st: &State) -> Vec<(u64, u64)> {
    st.segments().map(|s| (s.address, s.size_bytes)).collect()
}

#[test]
fn round_size_is_torch_round_size_without_power2_divisions() {
    assert_eq!(round_size(0), 512);
    assert_eq!(round_size(1), 512);
    assert_eq!(round_size(512), 512);
    assert_eq!(round_size(513), 1024);
    assert_eq!(round_size(25_000_000), 25_000_448);
    // Saturates instead of wrapping (such an entry is skipped as an overflow).
    assert_eq!(round_size(u64::MAX), u64::MAX);
}

#[test]
fn carve_and_release_are_inverses_wherever_the_block_sits() {
    for (at, size) in [(0, MIB), (MIB, MIB), (3 * MIB, MIB), (0, 4 * MIB)] {
        let mut st = State::empty(1);
        st.derived = true;
        st.add_segment(0x1000_0000, 4 * MIB, meta());
        let before = st.clone();
        let addr = 0x1000_0000 + at;
        let flags = st.carve(addr, active(size));
        assert_eq!(flags, Some((at > 0, at + size < 4 * MIB)));
        assert_eq!(st.blocks().filter(|b| b.state.is_active()).count(), 1);
        assert_eq!(st.numbers().allocated_bytes, size);
        assert_eq!(st.numbers().requested_bytes, size - 100);
        let (l, r) = st.free_neighbours(addr, size);
        assert_eq!(Some((l, r)), flags);
        st.release(addr, l, r);
        assert_eq!(st, before, "carve at {at} then release");
        assert_eq!(st.numbers(), before.numbers());
    }
}

#[test]
fn carve_refuses_live_memory_and_ranges_past_the_hole() {
    let mut st = State::empty(1);
    st.add_segment(0, 4 * MIB, meta());
    assert!(st.carve(0, active(MIB)).is_some());
    let before = st.clone();
    assert_eq!(st.carve(MIB / 2, active(512)), None, "inside a live block");
    assert_eq!(st.carve(3 * MIB, active(2 * MIB)), None, "past the segment");
    assert_eq!(
        st.carve(8 * MIB, active(512)),
        None,
        "outside every segment"
    );
    assert_eq!(st, before);
}

#[test]
fn release_does_not_merge_across_segments() {
    let mut st = State::empty(1);
    st.add_segment(0, 2 * MIB, meta());
    st.add_segment(2 * MIB, 2 * MIB, meta());
    st.carve(2 * MIB, active(MIB));
    // The flags a build would record: nothing free on the left inside this segment.
    assert_eq!(st.free_neighbours(2 * MIB, MIB), (false, true));
    st.release(2 * MIB, false, true);
    assert_eq!(
        layout(&st),
        vec![(0, 2 * MIB, "inactive"), (2 * MIB, 2 * MIB, "inactive")]
    );
    assert_eq!(st.numbers().inactive_split_bytes, 0);
}

#[test]
fn removing_and_adding_ranges_are_inverses() {
    // Unmap the head, the tail, the middle (splits the segment) and everything.
    for (at, size) in [(0, MIB), (3 * MIB, MIB), (MIB, 2 * MIB), (0, 4 * MIB)] {
        let mut st = State::empty(1);
        st.derived = true;
        st.add_segment(0x10_0000_0000, 4 * MIB, meta());
        let before = st.clone();
        let addr = 0x10_0000_0000 + at;
        let (flags, m) = match st.remove_range(addr, size, None) {
            Some(x) => x,
            None => panic!("range {at}+{size} not removable"),
        };
        let pieces = usize::from(at > 0) + usize::from(at + size < 4 * MIB);
        assert_eq!(st.segments().count(), pieces);
        assert_eq!(st.numbers().reserved_bytes, 4 * MIB - size);
        assert_eq!(
            flags,
            RangeFlags {
                seg_left: at > 0,
                seg_right: at + size < 4 * MIB,
                blk_left: at > 0,
                blk_right: at + size < 4 * MIB
            }
        );
        st.add_range(addr, size, flags, m);
        assert_eq!(st, before, "range {at}+{size}");
    }
}

#[test]
fn a_range_holding_a_live_block_cannot_be_unmapped() {
    let mut st = State::empty(1);
    st.add_segment(0, 4 * MIB, meta());
    st.carve(MIB, active(MIB));
    let before = st.clone();
    assert!(st.remove_range(0, 2 * MIB, None).is_none());
    assert_eq!(st, before);
}

/// A history with one 12 MiB large segment: `segment_alloc`, alloc of `req`, free, and the
/// final state one free segment.
fn one_block_history(req: u64) -> (Snapshot, AllocatorHistory) {
    let s = snap(&format!(
        "segment 0x7f0000000000 12MiB\n  block rest inactive\n\
         segment_alloc 0x7f0000000000 12MiB\nalloc a 0x7f0000000000 {req}\nfree a\n"
    ));
    let h = AllocatorHistory::new(&s, 0);
    (s, h)
}

#[test]
fn a_block_owns_a_remainder_torch_would_not_split() {
    // 12 000 000 B rounds to 12 000 256; the 582 656 B left (≤ 1 MiB) stay in the block.
    let (_, h) = one_block_history(12_000_000);
    let st = h.state_at(Some(1));
    assert_eq!(
        layout(&st),
        vec![(0x7f0000000000, 12 * MIB, "active_allocated")]
    );
    let n = st.numbers();
    assert_eq!(n.rounding_waste_bytes, 12 * MIB - 12_000_000);
    assert_eq!(n.largest_free_block_bytes, 0);
    assert_eq!(h.diagnostics().inferred_unsplit, 1);
    // The free_requested in between: the same block, pending.
    let st = h.state_at(Some(2));
    assert_eq!(
        layout(&st),
        vec![(0x7f0000000000, 12 * MIB, "active_pending_free")]
    );
}

#[test]
fn a_remainder_over_1_mib_is_split_off() {
    // 11 000 000 B rounds to 11 000 320; 1 582 592 B (> 1 MiB) are left: split off.
    let (_, h) = one_block_history(11_000_000);
    let st = h.state_at(Some(1));
    assert_eq!(
        layout(&st),
        vec![
            (0x7f0000000000, 11_000_320, "active_allocated"),
            (
                0x7f0000000000 + 11_000_320,
                12 * MIB - 11_000_320,
                "inactive"
            )
        ]
    );
    assert_eq!(h.diagnostics().inferred_unsplit, 0);
}

#[test]
fn a_neighbour_freed_beyond_the_remainder_does_not_hide_it() {
    // Segment 0..12 MiB. `b` (2 MiB at 10 MiB) lives before `a` (9.5 MB at 0) and is freed
    // while `a` lives; `a` owned 0..10 MiB (the 0.4 MiB remainder was not split).
    let s = snap(
        "segment 0x7f0000000000 12MiB\n  block rest inactive\n\
         segment_alloc 0x7f0000000000 12MiB\n\
         alloc b 0x7f0000a00000 2MiB\n\
         alloc a 0x7f0000000000 10000000\n\
         free b\n\
         free a\n",
    );
    let h = AllocatorHistory::new(&s, 0);
    let st = h.state_at(Some(3));
    assert_eq!(
        layout(&st),
        vec![
            (0x7f0000000000, 10 * MIB, "active_allocated"),
            (0x7f0000a00000, 2 * MIB, "active_pending_free")
        ]
    );
    let st = h.state_at(Some(4));
    assert_eq!(
        layout(&st),
        vec![
            (0x7f0000000000, 10 * MIB, "active_allocated"),
            (0x7f0000a00000, 2 * MIB, "inactive")
        ]
    );
}

#[test]
fn a_block_living_inside_the_remainder_keeps_the_rounded_size() {
    // `c` (512 B) lives inside what would be `a`'s remainder while `a` lives: `a` cannot have
    // owned it, so `a` keeps its rounded size.
    let s = snap(
        "segment 0x7f0000000000 12MiB\n  block rest inactive\n\
         segment_alloc 0x7f0000000000 12MiB\n\
         alloc a 0x7f0000000000 12000000\n\
         alloc c 0x7f0000ba2800 100\n\
         free c\n\
         free a\n",
    );
    let h = AllocatorHistory::new(&s, 0);
    let st = h.state_at(Some(1));
    assert_eq!(st.blocks().next().map(|b| b.size_bytes), Some(12_000_256));
    // `c` itself owns the 373.5 KiB behind it (not split off in a large segment).
    assert_eq!(h.diagnostics().inferred_unsplit, 1);
    let st = h.state_at(Some(2));
    assert_eq!(
        st.blocks().nth(2).map(|b| (b.address, b.size_bytes)),
        Some((0x7f0000ba2800, 12 * MIB - 0xba2800))
    );
}

#[test]
fn without_free_requested_entries_blocks_stay_allocated_until_freed() {
    // `skip_actions=["free_requested"]`: only free_completed.
    let s = snap(
        "segment 0x7f0000000000 2MiB\n  block rest inactive\n\
         segment_alloc 0x7f0000000000 2MiB\nalloc a 0x7f0000000000 1000\nfree_completed a\n",
    );
    let h = AllocatorHistory::new(&s, 0);
    let st = h.state_at(Some(1));
    assert_eq!(layout(&st)[0], (0x7f0000000000, 1024, "active_allocated"));
}

#[test]
fn a_free_outside_every_segment_is_an_unplaced_allocation() {
    let s = snap(
        "segment 0x7f0000000000 2MiB\n  block rest inactive\n\
         free_completed 0x7fff00000000 3000\nalloc a 0x7f0000000000 1000\nfree a\n",
    );
    let h = AllocatorHistory::new(&s, 0);
    assert_eq!(h.diagnostics().free_outside_segments, 1);
    let st = h.state_at(None);
    let n = st.numbers();
    assert_eq!(
        (
            n.unplaced_allocations,
            n.unplaced_requested_bytes,
            n.requested_bytes
        ),
        (1, 3000, 3000)
    );
    assert_eq!(
        st.unplaced()
            .map(|b| (b.address, b.size_bytes))
            .collect::<Vec<_>>(),
        vec![(0x7fff00000000, 3072)]
    );
    let st = h.state_at(Some(0));
    assert_eq!(st.numbers().requested_bytes, 0);
    assert_eq!(crate::device_stats(&s, 0).timeline_baseline_bytes, 3000);
}

#[test]
fn an_alloc_with_no_live_block_is_skipped_and_reported() {
    // History stopped before the frees: the final state is empty.
    let s =
        snap("segment 0x7f0000000000 2MiB\n  block rest inactive\nalloc a 0x7f0000000000 1000\n");
    let h = AllocatorHistory::new(&s, 0);
    let d = h.diagnostics();
    assert_eq!((d.alloc_without_block, d.skipped()), (1, 1));
    assert_eq!(
        d.issues,
        vec![Issue {
            event: 0,
            kind: IssueKind::AllocWithoutBlock
        }]
    );
    assert!(!d.warnings().is_empty());
    assert_eq!(h.state_at(None).numbers().allocated_bytes, 0);
}

#[test]
fn seeks_clamp_and_report_their_event() {
    let (_, h) = one_block_history(1000);
    assert_eq!(h.events(), 4);
    let mut st = h.state_at(Some(99));
    assert_eq!(st.event(), Some(3));
    h.step(&mut st, -100);
    assert_eq!(st.event(), None);
    assert_eq!(st.numbers().reserved_bytes, 0);
    h.step(&mut st, 1);
    assert_eq!(
        (st.event(), st.numbers().reserved_bytes),
        (Some(0), 12 * MIB)
    );
    h.step(&mut st, 100);
    assert_eq!(st.event(), Some(3));
}

#[test]
fn a_state_of_another_history_is_taken_over() {
    let (_, h1) = one_block_history(1000);
    let (_, h2) = one_block_history(11_000_000);
    let mut st = h1.state_at(Some(1));
    h2.seek(&mut st, Some(1));
    assert_eq!(st, h2.state_at(Some(1)));
    assert_eq!(st.blocks().next().map(|b| b.size_bytes), Some(11_000_320));
}

#[test]
fn a_snapshot_without_trace_has_one_state() {
    let s = snap("segment 0x7f0000000000 2MiB\n  block 1MiB allocated requested=1000000\n  block rest inactive\n");
    let h = AllocatorHistory::new(&s, 0);
    assert_eq!(h.events(), 0);
    let st = h.state_at(None);
    assert_eq!(
        layout(&st),
        vec![
            (0x7f0000000000, MIB, "active_allocated"),
            (0x7f0000100000, MIB, "inactive")
        ]
    );
    let n = st.numbers();
    assert_eq!(
        (n.allocated_bytes, n.requested_bytes, n.inactive_split_bytes),
        (MIB, 1_000_000, MIB)
    );
    assert!((n.fragmentation_pct - 0.0).abs() < 1e-9);
    assert_eq!(segs(&st), vec![(0x7f0000000000, 2 * MIB)]);
    // A device that has nothing: an empty state.
    let h = AllocatorHistory::new(&s, 3);
    assert_eq!(h.state_at(None).counts(), (0, 0));
}

#[test]
fn fragmentation_is_one_minus_largest_over_total_free() {
    let s = snap(
        "segment 0x7f0000000000 20MiB\n  block 2MiB inactive\n  block 2MiB allocated requested=2097152\n  block rest inactive\n",
    );
    let n = AllocatorHistory::new(&s, 0).state_at(None).numbers();
    assert_eq!(
        (n.inactive_bytes, n.largest_free_block_bytes),
        (18 * MIB, 16 * MIB)
    );
    assert!((n.fragmentation_pct - 100.0 * (1.0 - 16.0 / 18.0)).abs() < 1e-9);
}

#[test]
fn checkpoints_taken_while_a_block_lived_get_its_remainder() {
    // `a` owns its unsplit remainder and lives across many checkpoints (stride 32).
    let mut text = String::from(
        "segment 0x7f0000000000 12MiB\n  block rest inactive\n\
         segment 0x7f1000000000 2MiB\n  block rest inactive\n\
         segment_alloc 0x7f0000000000 12MiB\nalloc a 0x7f0000000000 12000000\n",
    );
    for _ in 0..100 {
        text.push_str("alloc s 0x7f1000000000 1000\nfree s\n");
    }
    text.push_str("free a\n");
    let s = snap(&text);
    let h = AllocatorHistory::new(&s, 0);
    assert_eq!(h.stride(), 32);
    assert_eq!(h.diagnostics().inferred_unsplit, 1);
    assert!(h.replays_consistently());
    for e in [1, 31, 32, 33, 64, 150, 301] {
        let st = h.state_at(Some(e));
        let first = st.blocks().next().map(|b| (b.size_bytes, b.state));
        assert_eq!(
            first,
            Some((12 * MIB, BlockState::ActiveAllocated)),
            "after event {e}"
        );
    }
    let mut st = h.state_at(Some(302));
    assert_eq!(
        st.blocks().next().map(|b| b.state),
        Some(BlockState::ActivePendingFree)
    );
    h.step(&mut st, 1);
    assert_eq!(
        st.blocks().next().map(|b| (b.size_bytes, b.state)),
        Some((12 * MIB, BlockState::Inactive))
    );
}
