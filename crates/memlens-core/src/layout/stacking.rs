//! The exact stacking, as upstream draws it: an alloc goes on top, a free removes its band and
//! the bands above slide down. One sweep over x keeps the live bands in stack order
//! ([`super::bands::LiveBands`]) and records each band's pieces (time spans with a constant
//! bottom; upstream stores the same as polygon vertices) within the [`super::tolerance`] rules;
//! a counting sort then lays the pieces out by element.

use super::bands::LiveBands;
use super::elements::Elements;
#[cfg(test)]
use super::tolerance::piece_tolerance;
use super::tolerance::PIECE_BUDGET;

/// A stacking's geometry: the pieces of every element, the live totals and what went wrong.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Stacked {
    /// Pieces of element `e`: `piece_start[e]..piece_start[e + 1]`.
    pub(super) piece_start: Vec<u32>,
    /// Where each piece starts (x).
    pub(super) piece_t0: Vec<u32>,
    /// Bottom of the band during the piece, in bytes.
    pub(super) piece_y0: Vec<f32>,
    /// Live bytes on `[x, x + 1)`, for `x` in `0..=n_events`.
    pub(super) total_bytes: Vec<u64>,
    pub(super) warnings: Vec<String>,
}

/// One live band during [`sweep_walk`]: its element, exact bottom, bottom at its last piece, size.
#[cfg(test)]
#[derive(Clone, Copy)]
struct LiveBand {
    e: u32,
    y: u64,
    last: u64,
    size: u64,
}

/// Sweeps x once, keeping the live elements in stack order ([`super::bands::LiveBands`]), and
/// calls `piece(e, x, y)` each time an element starts or has dropped by more than its tolerance
/// since its last piece. Fills `total` (live bytes per x). Returns whether [`PIECE_BUDGET`]
/// stopped the drops.
pub(super) fn sweep(
    el: &Elements,
    end_head: &[u32],
    end_next: &[u32],
    total: &mut [u64],
    mut piece: impl FnMut(u32, u32, u64),
) -> bool {
    let mut live = LiveBands::default();
    let mut top: u64 = 0;
    let mut next_start = 0usize;
    let mut pieces = 0usize;
    let mut over_budget = false;
    for (x, tot) in total.iter_mut().enumerate() {
        let mut e = end_head.get(x).copied().unwrap_or(u32::MAX);
        while e != u32::MAX {
            let freed = live.remove(e, |be, y| {
                if over_budget {
                    return false;
                }
                piece(be, x as u32, y);
                pieces += 1;
                over_budget = pieces >= PIECE_BUDGET;
                true
            });
            if let Some(size) = freed {
                top = top.saturating_sub(size);
            }
            e = end_next.get(e as usize).copied().unwrap_or(u32::MAX);
        }
        for (s, size) in starts_at(el, &mut next_start, x) {
            piece(s, x as u32, top);
            pieces += 1;
            live.push(s, top, size);
            top = top.saturating_add(size);
        }
        *tot = top;
    }
    over_budget
}

/// The band-by-band sweep that [`sweep`] replaces (every band above a free walked at every
/// free): the reference its pieces are compared with in the tests.
#[cfg(test)]
pub(super) fn sweep_walk(
    el: &Elements,
    end_head: &[u32],
    end_next: &[u32],
    total: &mut [u64],
    mut piece: impl FnMut(u32, u32, u64),
) -> bool {
    let mut live: Vec<LiveBand> = Vec::new();
    let mut top: u64 = 0;
    let mut next_start = 0usize;
    let mut pieces = 0usize;
    let mut over_budget = false;
    for (x, tot) in total.iter_mut().enumerate() {
        let mut e = end_head.get(x).copied().unwrap_or(u32::MAX);
        while e != u32::MAX {
            if let Ok(p) = live.binary_search_by_key(&e, |l| l.e) {
                let size = live.get(p).map(|l| l.size).unwrap_or(0);
                // Slide everything above down, and shift it over the freed band in the same
                // pass (one walk over the memory instead of a walk and a `remove`).
                let tail = live.get_mut(p..).unwrap_or(&mut []);
                for i in 1..tail.len() {
                    let Some(mut l) = tail.get(i).copied() else {
                        break;
                    };
                    l.y = l.y.saturating_sub(size);
                    if l.last - l.y > piece_tolerance(l.y, l.size) && !over_budget {
                        l.last = l.y;
                        piece(l.e, x as u32, l.y);
                        pieces += 1;
                        over_budget = pieces >= PIECE_BUDGET;
                    }
                    if let Some(slot) = tail.get_mut(i - 1) {
                        *slot = l;
                    }
                }
                live.pop();
                top = top.saturating_sub(size);
            }
            e = end_next.get(e as usize).copied().unwrap_or(u32::MAX);
        }
        for (s, size) in starts_at(el, &mut next_start, x) {
            piece(s, x as u32, top);
            pieces += 1;
            live.push(LiveBand {
                e: s,
                y: top,
                last: top,
                size,
            });
            top = top.saturating_add(size);
        }
        *tot = top;
    }
    over_budget
}

/// The elements (id, size) starting at `x` and alive for at least one event, taken from
/// `next` on (elements are in start order).
pub(super) fn starts_at<'a>(
    el: &'a Elements,
    next: &'a mut usize,
    x: usize,
) -> impl Iterator<Item = (u32, u64)> + 'a {
    std::iter::from_fn(move || {
        while *next < el.len() && el.start_x.get(*next).is_some_and(|&s| s as usize <= x) {
            let s = *next;
            *next += 1;
            if let (Some(&start), Some(&end), Some(&size)) =
                (el.start_x.get(s), el.end_x.get(s), el.size_bytes.get(s))
            {
                if end > start {
                    return Some((s as u32, size));
                }
            }
        }
        None
    })
}

/// Elements ending at each x, as linked lists (`end_head[x]`, then `end_next[e]`).
pub(super) fn end_lists(el: &Elements, xs: usize) -> (Vec<u32>, Vec<u32>) {
    let n_el = el.len();
    let mut end_head = vec![u32::MAX; xs + 1];
    let mut end_next = vec![u32::MAX; n_el];
    for e in (0..n_el).rev() {
        let (Some(&s), Some(&en)) = (el.start_x.get(e), el.end_x.get(e)) else {
            continue;
        };
        let x = en as usize;
        if x < xs && en > s {
            if let (Some(h), Some(n)) = (end_head.get_mut(x), end_next.get_mut(e)) {
                *n = *h;
                *h = e as u32;
            }
        }
    }
    (end_head, end_next)
}

/// Pieces as a sweep finds them (x order), laid out by element afterwards.
pub(super) struct PieceLog {
    e: Vec<u32>,
    x: Vec<u32>,
    y: Vec<f32>,
}

impl PieceLog {
    pub(super) fn with_capacity(n: usize) -> Self {
        PieceLog {
            e: Vec::with_capacity(n),
            x: Vec::with_capacity(n),
            y: Vec::with_capacity(n),
        }
    }

    pub(super) fn push(&mut self, e: u32, x: u32, y: u64) {
        self.e.push(e);
        self.x.push(x);
        self.y.push(y as f32);
    }

    pub(super) fn len(&self) -> usize {
        self.e.len()
    }

    /// Gives every piece of element `e` to element `new_id[e]` (after the elements are
    /// reordered); a piece of an element `new_id` does not name is dropped.
    pub(super) fn renumber(self, new_id: &[u32]) -> PieceLog {
        let mut out = PieceLog::with_capacity(self.len());
        for ((&e, &x), &y) in self.e.iter().zip(&self.x).zip(&self.y) {
            if let Some(&n) = new_id.get(e as usize) {
                out.e.push(n);
                out.x.push(x);
                out.y.push(y);
            }
        }
        out
    }

    /// A counting sort by element (x order kept within one): `(piece_start, piece_t0, piece_y0)`.
    pub(super) fn by_element(self, n_el: usize) -> (Vec<u32>, Vec<u32>, Vec<f32>) {
        let mut start = vec![0u32; n_el + 1];
        for &e in &self.e {
            if let Some(c) = start.get_mut(e as usize + 1) {
                *c += 1;
            }
        }
        for i in 0..n_el {
            let prev = start.get(i).copied().unwrap_or(0);
            if let Some(c) = start.get_mut(i + 1) {
                *c += prev;
            }
        }
        let n_pieces = self.e.len();
        let mut fill = start.clone();
        let mut t0 = vec![0u32; n_pieces];
        let mut y0 = vec![0f32; n_pieces];
        for ((&e, &x), &y) in self.e.iter().zip(&self.x).zip(&self.y) {
            if let Some(f) = fill.get_mut(e as usize) {
                let d = *f as usize;
                *f += 1;
                if let (Some(t), Some(v)) = (t0.get_mut(d), y0.get_mut(d)) {
                    *t = x;
                    *v = y;
                }
            }
        }
        (start, t0, y0)
    }
}

/// Stacks the elements: one sweep records every piece in x order, then a counting sort by
/// element lays them out. (Two sweeps, one counting and one writing in place, took 1.5× as
/// long once the sweep itself dominated; one sweep into per-element chunk chains was slower
/// still, from the chains' memory traffic.)
pub(super) fn stack(el: &Elements, n_events: u32) -> Stacked {
    let n_el = el.len();
    let xs = n_events as usize + 1;
    let (end_head, end_next) = end_lists(el, xs);
    let mut total = vec![0u64; xs];
    // One sweep records the pieces in x order; a counting sort by element then lays each
    // element's pieces out together (x order kept within an element).
    let mut rec = PieceLog::with_capacity(n_el * 2);
    let over_budget = sweep(el, &end_head, &end_next, &mut total, |e, x, y| {
        rec.push(e, x, y)
    });
    let (start, t0, y0) = rec.by_element(n_el);
    let mut warnings = Vec::new();
    if over_budget {
        warnings.push(format!(
            "the stacked layout needs more than {PIECE_BUDGET} pieces; bands stop sliding down after that point"
        ));
    }
    Stacked {
        piece_start: start,
        piece_t0: t0,
        piece_y0: y0,
        total_bytes: total,
        warnings,
    }
}
