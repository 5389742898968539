//! Level of detail: elements indexed by (size class, lifetime class), both powers of two, in
//! start order within a class. A view asks only for the classes that can be taller and wider
//! than a pixel, and finds the ones alive in its window by binary search, so a zoomed-out view
//! of a million allocations never walks the short-lived ones.

use super::elements::Elements;

/// Size classes (`floor(log2(size_bytes))`) × lifetime classes (`floor(log2(end_x - start_x))`).
const SIZE_CLASSES: usize = 64;
const LEN_CLASSES: usize = 32;
const N_GROUPS: usize = SIZE_CLASSES * LEN_CLASSES;

/// Level-of-detail class of an element that is alive for at least one event.
fn lod_group(size_bytes: u64, start_x: u32, end_x: u32) -> Option<(usize, usize)> {
    if end_x <= start_x {
        return None;
    }
    let s = 63 - size_bytes.max(1).leading_zeros() as usize;
    let k = 31 - (end_x - start_x).leading_zeros() as usize;
    Some((s, k))
}

/// Element ids grouped by level-of-detail class, by `start_x` within a group.
#[derive(Debug, Clone, Default)]
pub(super) struct LodIndex {
    order: Vec<u32>,
    /// Group `g` is `order[start[g]..start[g + 1]]`.
    start: Vec<u32>,
}

impl LodIndex {
    /// Groups element ids by class (a counting sort, so `start_x` order is kept within a
    /// group). Elements alive for no event are left out: they are never drawn.
    pub(super) fn build(el: &Elements) -> LodIndex {
        let groups = groups(el);
        let mut start = vec![0u32; N_GROUPS + 1];
        for &g in groups.iter().flatten() {
            if let Some(c) = start.get_mut(g as usize + 1) {
                *c += 1;
            }
        }
        for g in 0..N_GROUPS {
            let prev = start.get(g).copied().unwrap_or(0);
            if let Some(c) = start.get_mut(g + 1) {
                *c += prev;
            }
        }
        let mut fill = start.clone();
        let mut order = vec![0u32; start.last().copied().unwrap_or(0) as usize];
        for (e, g) in groups.iter().enumerate() {
            let Some(f) = g.and_then(|g| fill.get_mut(g as usize)) else {
                continue;
            };
            if let Some(slot) = order.get_mut(*f as usize) {
                *slot = e as u32;
            }
            *f += 1;
        }
        LodIndex { order, start }
    }

    /// Elements alive somewhere in `[x0, x1)` whose class `keep(size_class, len_class)` accepts
    /// (sizes in `[2^s, 2^(s+1))`, lifetimes in `[2^k, 2^(k+1))` events). Within a class, those
    /// alive in the window started in `(x0 - 2^(k+1), x1)`: two bisections, so the cost is what
    /// is returned, not what the trace holds.
    pub(super) fn visible<'a>(
        &'a self,
        el: &'a Elements,
        x0: f64,
        x1: f64,
        keep: impl Fn(usize, usize) -> bool + 'a,
    ) -> impl Iterator<Item = usize> + 'a {
        (0..N_GROUPS)
            .filter(move |&g| keep(g / LEN_CLASSES, g % LEN_CLASSES))
            .flat_map(move |g| {
                let a = self.start.get(g).copied().unwrap_or(0) as usize;
                let b = self.start.get(g + 1).copied().unwrap_or(0) as usize;
                let ids = self.order.get(a..b.max(a)).unwrap_or(&[]);
                let max_len = (1u64 << ((g % LEN_CLASSES) + 1)) as f64;
                let start_of = |id: &u32| el.start_x.get(*id as usize).copied().unwrap_or(0) as f64;
                let lo = ids.partition_point(|id| start_of(id) <= x0 - max_len);
                let hi = ids.partition_point(|id| start_of(id) < x1);
                ids.get(lo..hi.max(lo)).unwrap_or(&[]).iter()
            })
            .map(|&id| id as usize)
            .filter(move |&e| el.end_x.get(e).is_some_and(|&en| en as f64 > x0))
    }
}

/// Group of each element (`None`: never drawn); [`N_GROUPS`] fits a u16.
fn groups(el: &Elements) -> Vec<Option<u16>> {
    (0..el.len())
        .map(|e| {
            let (Some(&size), Some(&s), Some(&en)) =
                (el.size_bytes.get(e), el.start_x.get(e), el.end_x.get(e))
            else {
                return None;
            };
            lod_group(size, s, en).map(|(s, k)| (s * LEN_CLASSES + k) as u16)
        })
        .collect()
}
