//! The preview stacking: a first, cheaper layout of a long trace for the first frame. Exact
//! totals, and pieces only for the bands tall enough to be drawn on their own at full zoom-out,
//! their bottoms sampled at [`PREVIEW_COLUMNS`] points across the trace from a Fenwick tree of
//! live sizes by element id.

use super::elements::Elements;
use super::stacking::{end_lists, PieceLog, Stacked};
use super::tolerance::piece_tolerance;

/// Traces longer than this get a [`TimelineLayout::build_preview`](super::TimelineLayout::build_preview) first.
pub const PREVIEW_MIN_EVENTS: u32 = 200_000;
/// Points across the trace where a preview samples its bands' bottoms (a preview is exact to
/// within 1/2 px on a full-trace plot up to 2048 px wide).
pub const PREVIEW_COLUMNS: u32 = 4096;
/// A preview gives pieces to the bands at least 1/`PREVIEW_HEIGHT_PX` of the peak: the ones a
/// full-trace plot up to this tall can draw on their own.
pub const PREVIEW_HEIGHT_PX: u64 = 4096;

/// Sums of live element sizes over element ids: the bytes stacked below an element are the
/// sizes of the live elements with smaller ids. A Fenwick tree over blocks of
/// [`SUM_BLOCK`] ids (small enough to stay in cache) plus each id's own live size, summed
/// within its block when asked.
struct Fenwick {
    blocks: Vec<u64>,
    own: Vec<u64>,
}

/// Ids per leaf of [`Fenwick`]'s tree.
const SUM_BLOCK: usize = 16;

impl Fenwick {
    fn new(n: usize) -> Fenwick {
        Fenwick {
            blocks: vec![0u64; n.div_ceil(SUM_BLOCK) + 1],
            own: vec![0u64; n],
        }
    }
    fn add(&mut self, i: usize, v: u64) {
        if let Some(o) = self.own.get_mut(i) {
            *o = o.wrapping_add(v);
        }
        let mut b = i / SUM_BLOCK + 1;
        while let Some(t) = self.blocks.get_mut(b) {
            *t = t.wrapping_add(v);
            b += b & b.wrapping_neg();
        }
    }
    /// Sum over ids `< i`.
    fn prefix(&self, i: usize) -> u64 {
        let (mut b, mut s) = (i / SUM_BLOCK, 0u64);
        while b > 0 {
            s = s.wrapping_add(self.blocks.get(b).copied().unwrap_or(0));
            b &= b - 1;
        }
        let first = i - i % SUM_BLOCK;
        self.own
            .get(first..i)
            .unwrap_or(&[])
            .iter()
            .fold(s, |a, &v| a.wrapping_add(v))
    }
}

/// The preview's stacking: exact totals, and pieces only for the bands at least
/// 1/[`PREVIEW_HEIGHT_PX`] of the peak, their bottoms sampled at [`PREVIEW_COLUMNS`] evenly spaced
/// x (and exact where they start). Cost: one Fenwick update per event and one query per drawn
/// band per column, instead of a step for every band above every free.
pub(super) fn stack_preview(el: &Elements, n_events: u32) -> Stacked {
    let n_el = el.len();
    let xs = n_events as usize + 1;
    let (end_head, end_next) = end_lists(el, xs);
    let alive =
        |e: usize| matches!((el.start_x.get(e), el.end_x.get(e)), (Some(s), Some(en)) if en > s);
    let size = |e: usize| el.size_bytes.get(e).copied().unwrap_or(0);
    // Exact totals from a difference array.
    let mut total = vec![0u64; xs];
    for e in (0..n_el).filter(|&e| alive(e)) {
        let (s, en) = (el.start_x[e] as usize, el.end_x[e] as usize);
        if let Some(t) = total.get_mut(s) {
            *t = t.wrapping_add(size(e));
        }
        if let Some(t) = total.get_mut(en) {
            *t = t.wrapping_sub(size(e));
        }
    }
    let mut run = 0u64;
    for t in total.iter_mut() {
        run = run.wrapping_add(*t);
        *t = run;
    }
    let peak = total.iter().copied().max().unwrap_or(0);
    let min_size = (peak / PREVIEW_HEIGHT_PX).max(1);
    let drawn = |e: usize| size(e) >= min_size;
    let mut fen = Fenwick::new(n_el);
    let mut rec = PieceLog::with_capacity(n_el.min(1 << 20));
    // Drawn bands alive now: (element, bottom at its last piece); `pos` finds them for removal.
    let mut live: Vec<(u32, u64)> = Vec::new();
    let mut pos = vec![u32::MAX; n_el];
    let columns = PREVIEW_COLUMNS as u64;
    let col_x = |c: u64| (c * xs as u64).div_ceil(columns);
    let (mut next_col, mut next_start) = (1u64, 0usize);
    for x in 0..xs {
        let mut e = end_head.get(x).copied().unwrap_or(u32::MAX);
        while e != u32::MAX {
            let ei = e as usize;
            fen.add(ei, size(ei).wrapping_neg());
            if let Some(p) = pos.get(ei).copied().filter(|&p| p != u32::MAX) {
                live.swap_remove(p as usize);
                if let Some(&(moved, _)) = live.get(p as usize) {
                    pos[moved as usize] = p;
                }
                pos[ei] = u32::MAX;
            }
            e = end_next.get(ei).copied().unwrap_or(u32::MAX);
        }
        let first = next_start;
        while next_start < n_el && el.start_x.get(next_start).is_some_and(|&s| s as usize <= x) {
            if alive(next_start) {
                fen.add(next_start, size(next_start));
            }
            next_start += 1;
        }
        for s in (first..next_start).filter(|&s| alive(s) && drawn(s)) {
            let y = fen.prefix(s);
            rec.push(s as u32, x as u32, y);
            pos[s] = live.len() as u32;
            live.push((s as u32, y));
        }
        let mut sample = false;
        while next_col < columns && col_x(next_col) <= x as u64 {
            next_col += 1;
            sample = true;
        }
        if sample {
            for (e, last) in live.iter_mut() {
                let ei = *e as usize;
                let y = fen.prefix(ei);
                if last.abs_diff(y) > piece_tolerance(y, size(ei)) {
                    *last = y;
                    rec.push(*e, x as u32, y);
                }
            }
        }
    }
    // Bands too thin to draw at full zoom-out get no pieces: no place, no hover, until the
    // exact layout replaces this one.
    let (start, t0, y0) = rec.by_element(n_el);
    Stacked {
        piece_start: start,
        piece_t0: t0,
        piece_y0: y0,
        total_bytes: total,
        warnings: Vec::new(),
    }
}
