//! The stacking sweep's live bands, in stack order, in chunks that take the drops lazily.
//!
//! When a band is freed, every band above it drops by its size and gets a new piece once it is
//! off its last piece by more than its tolerance ([`piece_tolerance`]). Walking every band above
//! every free made the exact layout cost O(frees × live bands): 12 s natively and ~35 s in the
//! browser for a repeated real trace of 13M events. Here the bands sit in chunks of at most
//! [`CHUNK`]; a chunk keeps the drop not yet applied to its bands (`pending`) and a lower bound
//! of the smallest drop at which one of them could pass its tolerance (`fire_at`, see
//! [`drop_bound`]). A free walks its own chunk and adds its size to the chunks above; a chunk is
//! walked only once its pending drop reaches `fire_at`. Since no band can pass its tolerance
//! before that, the pieces (and their order) are exactly those of the band-by-band walk; the
//! layout tests compare the two on fixtures and real snapshots.

use super::tolerance::{is_thin, piece_tolerance, PIECE_TOL_SHIFT, THIN_RATIO, THIN_TOL_SHIFT};

/// Most bands in a chunk.
const CHUNK: usize = 16;

/// One live band: its element, bottom (plus its chunk's `pending`), bottom at its last piece,
/// size.
#[derive(Clone, Copy, Debug)]
struct Band {
    e: u32,
    y: u64,
    last: u64,
    size: u64,
}

#[derive(Debug, Default)]
struct Chunk {
    bands: Vec<Band>,
    /// Drop not yet subtracted from `bands[..].y`.
    pending: u64,
    /// No band passes its tolerance while `pending < fire_at`.
    fire_at: u64,
}

/// A lower bound of the smallest further drop `p` with `last - (y - p) > tolerance(y - p)`
/// for a band at `y` whose last piece is at `last`.
///
/// With `top = y + size`, `d = last - y` and a tolerance `(top - p) >> k`, passing needs
/// `d + p > (top - p) >> k >= (top - p) / 2^k - 1`, so `p (2^k + 1) > top - 2^k (1 + d)`.
/// A thick band (`k` = [`PIECE_TOL_SHIFT`]) stays thick as it drops. A thin one
/// (`k` = [`THIN_TOL_SHIFT`]) either passes while thin or first becomes thick, which takes a
/// drop of at least `top - size * THIN_RATIO`.
fn drop_bound(y: u64, last: u64, size: u64) -> u64 {
    let d = last.saturating_sub(y);
    let top = y.saturating_add(size);
    let bound = |k: u32| {
        let m = 1u64 << k;
        top.saturating_sub(m.saturating_mul(d.saturating_add(1))) / (m + 1)
    };
    let thick = bound(PIECE_TOL_SHIFT);
    if !is_thin(y, size) {
        return thick;
    }
    let becomes_thick = top.saturating_sub(size.saturating_mul(THIN_RATIO));
    bound(THIN_TOL_SHIFT).min(becomes_thick.max(thick))
}

impl Chunk {
    /// Applies the pending drop; `piece(e, y)` for every band that passes its tolerance (it
    /// returns whether the piece was recorded; an unrecorded one leaves the band as it was).
    fn flush(&mut self, piece: &mut impl FnMut(u32, u64) -> bool) {
        let p = std::mem::take(&mut self.pending);
        for b in &mut self.bands {
            b.y = b.y.saturating_sub(p);
            if b.last - b.y > piece_tolerance(b.y, b.size) && piece(b.e, b.y) {
                b.last = b.y;
            }
        }
        self.refresh();
    }

    /// Applies a pending drop below `fire_at` (no band can pass its tolerance); the caller
    /// changes the bands next and then calls [`Chunk::refresh`].
    fn settle(&mut self) {
        let p = std::mem::take(&mut self.pending);
        if p > 0 {
            for b in &mut self.bands {
                b.y = b.y.saturating_sub(p);
            }
        }
    }

    /// Recomputes `fire_at` (no pending drop).
    fn refresh(&mut self) {
        self.fire_at = self
            .bands
            .iter()
            .map(|b| drop_bound(b.y, b.last, b.size))
            .min()
            .unwrap_or(u64::MAX);
    }
}

/// The live bands of a sweep, bottom to top (element ids increase upwards).
#[derive(Debug, Default)]
pub(super) struct LiveBands {
    chunks: Vec<Chunk>,
}

impl LiveBands {
    /// Puts band `e` (above every live one) at bottom `y` with its first piece there.
    pub(super) fn push(&mut self, e: u32, y: u64, size: u64) {
        if self.chunks.last().is_none_or(|c| c.bands.len() >= CHUNK) {
            self.chunks.push(Chunk {
                bands: Vec::with_capacity(CHUNK),
                pending: 0,
                fire_at: u64::MAX,
            });
        }
        if let Some(c) = self.chunks.last_mut() {
            c.bands.push(Band {
                e,
                y: y.saturating_add(c.pending),
                last: y,
                size,
            });
            c.fire_at = c
                .fire_at
                .min(c.pending.saturating_add(drop_bound(y, y, size)));
        }
    }

    /// Frees band `e`: every band above it drops by its size, and `piece(e, y)` is called, in
    /// stack order, for each that passes its tolerance (see [`Chunk::flush`]). Returns the
    /// freed size (`None`: `e` is not live).
    pub(super) fn remove(
        &mut self,
        e: u32,
        mut piece: impl FnMut(u32, u64) -> bool,
    ) -> Option<u64> {
        let ci = self
            .chunks
            .partition_point(|c| c.bands.first().is_some_and(|b| b.e <= e))
            .checked_sub(1)?;
        let c = self.chunks.get_mut(ci)?;
        let i = c.bands.binary_search_by_key(&e, |b| b.e).ok()?;
        c.settle();
        let size = c.bands.remove(i).size;
        // The bands above it in its own chunk are walked now.
        for b in c.bands.iter_mut().skip(i) {
            b.y = b.y.saturating_sub(size);
            if b.last - b.y > piece_tolerance(b.y, b.size) && piece(b.e, b.y) {
                b.last = b.y;
            }
        }
        c.refresh();
        for c in self.chunks.iter_mut().skip(ci + 1) {
            c.pending = c.pending.saturating_add(size);
            if c.pending >= c.fire_at {
                c.flush(&mut piece);
            }
        }
        self.tidy(ci);
        Some(size)
    }

    /// Drops chunk `ci` once empty, and merges it with a neighbour once small.
    fn tidy(&mut self, ci: usize) {
        let Some(len) = self.chunks.get(ci).map(|c| c.bands.len()) else {
            return;
        };
        if len == 0 {
            self.chunks.remove(ci);
            return;
        }
        if len >= CHUNK / 4 {
            return;
        }
        let fits = |j: usize, chunks: &[Chunk]| {
            chunks.get(j).is_some_and(|c| c.bands.len() + len <= CHUNK)
        };
        let (lo, hi) = if ci > 0 && fits(ci - 1, &self.chunks) {
            (ci - 1, ci)
        } else if fits(ci + 1, &self.chunks) {
            (ci, ci + 1)
        } else {
            return;
        };
        let mut upper = self.chunks.remove(hi);
        upper.settle();
        if let Some(lower) = self.chunks.get_mut(lo) {
            lower.settle();
            lower.bands.append(&mut upper.bands);
            lower.refresh();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bound never exceeds the smallest drop that passes the tolerance (found by search).
    #[test]
    fn drop_bound_is_a_lower_bound() {
        let passes = |y: u64, last: u64, size: u64, p: u64| {
            let ny = y - p;
            last - ny > piece_tolerance(ny, size)
        };
        let mut rng = 99u64;
        let mut next = |m: u64| {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (rng >> 33) % m
        };
        for _ in 0..20000 {
            let k = next(40);
            let size = 1 + next(1 << (1 + k));
            let k = next(50);
            let y = next(1 << (1 + k));
            let k = next(20);
            let last = y + next(1 + (y >> k));
            let b = drop_bound(y, last, size);
            // Smallest passing drop by bisection (passing is monotone in the drop).
            if !passes(y, last, size, y) {
                continue;
            }
            let (mut lo, mut hi) = (0u64, y);
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if passes(y, last, size, mid) {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            assert!(
                b <= lo,
                "bound {b} > first passing drop {lo} (y {y}, last {last}, size {size})"
            );
        }
    }
}
