//! What a view asks of a timeline layout: the highest total in a window (y fitting), each
//! element's pieces and its bottom at an x, the elements a view draws (through the level of
//! detail index) and the element under a point.

use super::elements::ElementKind;
use super::timeline::TimelineLayout;
use super::tolerance::is_thin;

impl TimelineLayout {
    /// Highest live total over `[x0, x1)` (clamped to the trace), in bytes.
    pub fn max_total(&self, x0: f64, x1: f64) -> u64 {
        self.max_tree.max(&self.total_bytes, x0, x1)
    }

    /// Pieces of element `e` as an index range.
    pub fn pieces_of(&self, e: usize) -> std::ops::Range<usize> {
        let a = self.piece_start.get(e).copied().unwrap_or(0) as usize;
        let b = self.piece_start.get(e + 1).copied().unwrap_or(0) as usize;
        a..b.max(a)
    }

    /// Live bytes on `[x, x + 1)` (0 outside the trace).
    pub fn total_at(&self, x: f64) -> u64 {
        if x.is_nan() || x < 0.0 {
            return 0;
        }
        self.total_bytes.get(x as usize).copied().unwrap_or(0)
    }

    /// Bottom of element `e`'s band at `x` (bytes), if it is alive then.
    pub fn offset_at(&self, e: usize, x: f64) -> Option<f64> {
        let el = &self.elements;
        let (s, en) = (*el.start_x.get(e)? as f64, *el.end_x.get(e)? as f64);
        if x < s || x >= en {
            return None;
        }
        let r = self.pieces_of(e);
        let t0s = self.piece_t0.get(r.clone())?;
        let k = t0s.partition_point(|&t| t as f64 <= x);
        let p = r.start + k.checked_sub(1)?;
        self.piece_y0.get(p).map(|&y| y as f64)
    }

    /// Elements alive somewhere in `[x0, x1)` whose level-of-detail class `keep(size_class,
    /// Elements alive somewhere in `[x0, x1)` whose level-of-detail class `keep(size_class,
    /// len_class)` accepts (sizes in `[2^s, 2^(s+1))`, lifetimes in `[2^k, 2^(k+1))` events).
    /// Within a class, those alive in the window started in `(x0 - 2^(k+1), x1)`: two
    /// bisections, so the cost is what is returned, not what the trace holds.
    pub fn visible<'a>(
        &'a self,
        x0: f64,
        x1: f64,
        keep: impl Fn(usize, usize) -> bool + 'a,
    ) -> impl Iterator<Item = usize> + 'a {
        self.lod.visible(&self.elements, x0, x1, keep)
    }

    /// The element under (`x`, `y_bytes`), if any.
    pub fn hit(&self, x: f64, y_bytes: f64) -> Option<usize> {
        if y_bytes.is_nan() || x.is_nan() || y_bytes < 0.0 || x < 0.0 {
            return None;
        }
        if y_bytes >= self.total_at(x) as f64 {
            return None;
        }
        // Starts are whole events: `start < floor(x) + 1` is `start <= x`. An allocation inside
        // a pool envelope wins over the envelope. A band that can be drawn wins over a thin one,
        // whose recorded place may be off by its (larger) tolerance.
        let (mut envelope, mut thin) = (None, None);
        for e in self.visible(x, x.floor() + 1.0, |_, _| true) {
            let size = self.elements.size_bytes.get(e).copied().unwrap_or(0);
            let Some(y0) = self.offset_at(e, x) else {
                continue;
            };
            if !(y_bytes >= y0 && y_bytes < y0 + size as f64) {
                continue;
            }
            if self.elements.kind.get(e) == Some(&ElementKind::PoolEnvelope) {
                envelope = Some(e);
            } else if is_thin(y0 as u64, size) {
                thin = thin.or(Some(e));
            } else {
                return Some(e);
            }
        }
        thin.or(envelope)
    }
}
