//! Unit tests of the segment map on hand-made states: group order and labels, row packing and
//! wrapping, the fitted row size, and hit testing (inside a block, between segments, outside).
//! Every fixture and real snapshot is placed and hit-tested in `tests/segment_map.rs`.

use super::*;
use crate::model::BlockState;
use crate::trace::StackId;

const MIB: u64 = 1 << 20;

/// One segment: address, pool, stream, and its blocks (size, state) from its start.
struct Seg {
    addr: u64,
    pool: Option<(i64, i64)>,
    stream: u64,
    blocks: Vec<(u64, BlockState)>,
}

fn seg(addr: u64, pool: Option<(i64, i64)>, blocks: &[(u64, BlockState)]) -> Seg {
    Seg {
        addr,
        pool,
        stream: 0,
        blocks: blocks.to_vec(),
    }
}

/// The segments in address order, as a state's columns.
fn columns(mut segs: Vec<Seg>) -> StateColumns {
    segs.sort_by_key(|s| s.addr);
    let mut c = StateColumns::default();
    for s in &segs {
        let size: u64 = s.blocks.iter().map(|b| b.0).sum();
        c.segment_address.push(s.addr);
        c.segment_size_bytes.push(size);
        c.segment_stream.push(s.stream);
        c.segment_pool_id.push(s.pool);
        c.segment_is_expandable.push(false);
        c.segment_kind.push(crate::state::SegmentKind::Large);
        c.segment_stack.push(StackId::EMPTY);
        let b0 = c.block_address.len() as u32;
        let mut a = s.addr;
        for (i, &(bs, st)) in s.blocks.iter().enumerate() {
            c.block_address.push(a);
            c.block_size_bytes.push(bs);
            c.block_requested_size_bytes.push(bs);
            c.block_state.push(st);
            c.block_stack.push(StackId::EMPTY);
            c.block_alloc_event.push(st.is_active().then_some(i as u32));
            a += bs;
        }
        c.segment_blocks.push(b0..c.block_address.len() as u32);
    }
    c
}

use BlockState::{ActiveAllocated as A, Inactive as F};

/// Default pool: a 2 MiB segment (two blocks) and a 6 MiB one; a private pool's 2 MiB segment;
/// a segment of unknown pool.
fn state() -> StateColumns {
    columns(vec![
        seg(0x1000_0000, Some((0, 0)), &[(MIB, A), (MIB, F)]),
        seg(0x2000_0000, Some((0, 0)), &[(4 * MIB, A), (2 * MIB, F)]),
        seg(0x3000_0000, Some((1, 7)), &[(2 * MIB, A)]),
        seg(0x4000_0000, None, &[(2 * MIB, F)]),
    ])
}

fn pieces_of(g: &MapGeometry, seg: u32) -> Vec<Piece> {
    g.pieces.iter().copied().filter(|p| p.seg == seg).collect()
}

#[test]
fn groups_are_default_then_private_then_unknown_with_their_sums() {
    let g = place(&state(), 16 * MIB, 800.0);
    let labels: Vec<&str> = g.groups.iter().map(|g| g.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "default pool · stream 0 · 2 segments · 8 MiB reserved, 3 MiB free",
            "private pool (1, 7) · stream 0 · 1 segment · 2 MiB reserved, 0 B free",
            "pool unknown · stream 0 · 1 segment · 2 MiB reserved, 2 MiB free",
        ]
    );
    assert!(g.groups.windows(2).all(|w| w[0].y < w[1].y));
    assert_eq!(g.width_px, 800.0 + 2.0 * PAD);
}

#[test]
fn the_largest_segment_comes_first_and_a_long_one_wraps() {
    let c = state();
    // 16 MiB rows (50 px a MiB): the 6 MiB segment first, then the 2 MiB one beside it after a
    // gap of bpr / 128.
    let g = place(&c, 16 * MIB, 800.0);
    let big = pieces_of(&g, 1);
    let small = pieces_of(&g, 0);
    assert_eq!(big.len(), 1);
    assert_eq!((big[0].x0, big[0].bytes), (PAD, 6 * MIB));
    assert_eq!(big[0].x1, PAD + 300.0);
    assert_eq!(small.len(), 1);
    assert_eq!(small[0].y, big[0].y, "fits beside it");
    assert!((small[0].x0 - (PAD + 300.0 + 800.0 / 128.0)).abs() < 1e-9);
    // 8 MiB rows: 6 MiB + the gap + 2 MiB is more than a row, so the small one goes below.
    let g = place(&c, 8 * MIB, 800.0);
    let (big, small) = (pieces_of(&g, 1), pieces_of(&g, 0));
    assert_eq!(small[0].y - big[0].y, ROW_H + ROW_GAP);
    assert_eq!(small[0].x0, PAD);
    // 4 MiB rows: the 6 MiB segment takes a whole row and half the next; every byte once.
    let g = place(&c, 4 * MIB, 400.0);
    let big = pieces_of(&g, 1);
    assert_eq!(big.len(), 2);
    assert_eq!((big[0].byte0, big[0].bytes), (0, 4 * MIB));
    assert_eq!((big[1].byte0, big[1].bytes), (4 * MIB, 2 * MIB));
    assert_eq!(big[1].y - big[0].y, ROW_H + ROW_GAP);
    assert_eq!((big[1].x0, big[1].x1), (PAD, PAD + 200.0));
    // Pieces are sorted by row, then x.
    assert!(g
        .pieces
        .windows(2)
        .all(|w| (w[0].y, w[0].x0) < (w[1].y, w[1].x0)));
}

#[test]
fn fit_takes_the_smallest_power_of_two_that_fits() {
    let c = state();
    let g = fit(&c, 0, 400.0, 2000.0);
    assert_eq!(g.bytes_per_row, MIB, "tall enough for 1 MiB rows");
    assert!(g.height_px <= 2000.0);
    // 200 px: 2 MiB rows need 202 px (the 6 MiB segment on 3 rows), 4 MiB rows 183 px.
    let g = fit(&c, 0, 400.0, 200.0);
    assert_eq!(g.bytes_per_row, 4 * MIB);
    assert!(g.height_px <= 200.0, "{}", g.height_px);
    let half = place(&c, g.bytes_per_row / 2, 400.0);
    assert!(half.height_px > 200.0, "half the row size would not fit");
    // Too short for anything: the placement is taller than asked, with a large row size.
    let g = fit(&c, 0, 400.0, 100.0);
    assert!(g.height_px > 100.0 && g.bytes_per_row >= 8 * MIB);
    // The device's peak sets the scale even when the state is small.
    let g = fit(&c, 1 << 40, 400.0, 2000.0);
    assert!(g.bytes_per_row >= (1 << 40) / 100, "{}", g.bytes_per_row);
}

#[test]
fn a_point_inside_a_block_hits_it() {
    let c = state();
    let g = place(&c, 16 * MIB, 800.0);
    let y = pieces_of(&g, 1)[0].y + ROW_H / 2.0;
    // 50 px a MiB: the 4 MiB block, then the free 2 MiB.
    let h = g.hit(&c, PAD + 75.0, y);
    assert_eq!(
        h,
        Some(Hit {
            seg: 1,
            block: Some(2),
            addr: 0x2000_0000 + MIB + MIB / 2
        })
    );
    let h = g.hit(&c, PAD + 225.0, y);
    assert_eq!(h.map(|h| (h.seg, h.block)), Some((1, Some(3))));
    // The small segment beside it: its first and second block.
    let p = pieces_of(&g, 0)[0];
    let h = g.hit(&c, p.x0 + 1.0, y);
    assert_eq!(h.map(|h| (h.seg, h.block)), Some((0, Some(0))));
    let h = g.hit(&c, p.x1 - 1.0, y);
    assert_eq!(h.map(|h| (h.seg, h.block)), Some((0, Some(1))));
}

#[test]
fn no_hit_outside_or_between_segments() {
    let c = state();
    let g = place(&c, 16 * MIB, 800.0);
    let big = pieces_of(&g, 1)[0];
    let small = pieces_of(&g, 0)[0];
    let y = big.y + ROW_H / 2.0;
    // The gap between the two segments of a row.
    let between = (big.x1 + small.x0) / 2.0;
    assert!(small.x0 - big.x1 > 2.0);
    assert_eq!(g.hit(&c, between, y), None);
    // Left margin, right of the last piece, a group header, the gap under a row, below the map.
    assert_eq!(g.hit(&c, PAD / 2.0, y), None);
    assert_eq!(g.hit(&c, small.x1 + 5.0, y), None);
    assert_eq!(g.hit(&c, PAD + 10.0, g.groups[0].y + 2.0), None);
    assert_eq!(g.hit(&c, PAD + 10.0, big.y + ROW_H + ROW_GAP / 2.0), None);
    assert_eq!(g.hit(&c, PAD + 10.0, g.height_px + 10.0), None);
}

#[test]
fn an_empty_state_places_nothing() {
    let c = StateColumns::default();
    let g = fit(&c, 0, 400.0, 300.0);
    assert!(g.pieces.is_empty() && g.groups.is_empty());
    assert_eq!(g.hit(&c, PAD + 1.0, PAD + 1.0), None);
}

#[test]
fn zoom_keeps_the_point_under_the_cursor() {
    let t = Transform::default().zoom_at(300.0, 8.0);
    assert_eq!(t.k, 8.0);
    assert!((t.to_map(300.0, 0.0).0 - 300.0).abs() < 1e-9);
    let t = t.zoom_at(100.0, 1e9);
    assert_eq!(t.k, Transform::MAX_ZOOM);
    assert_eq!(Transform::default().zoom_at(50.0, 0.1).k, 1.0);
}

#[test]
fn an_allocation_keeps_its_colour() {
    let a = block_colour_index(0x7f00_0000, Some(12), 8);
    assert_eq!(a, block_colour_index(0x7f00_0000, Some(12), 8));
    assert!(a < 8);
    // Not all the same colour over a run of allocations.
    let all: std::collections::HashSet<usize> = (0..64)
        .map(|i| block_colour_index(0x7f00_0000 + i * 512, Some(i as u32), 8))
        .collect();
    assert!(all.len() > 4, "{all:?}");
    assert_eq!(block_colour_index(1, None, 0), 0);
}
