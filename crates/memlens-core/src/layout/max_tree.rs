//! Range maxima of a timeline's live totals, for fitting the y axis to a view: a bottom-up max
//! tree over the maxima of blocks of [`MAX_BLOCK`] events (1/16 of a tree over every event),
//! with the partial blocks at both ends of a range scanned.

/// Events per leaf of the tree.
const MAX_BLOCK: usize = 16;

#[derive(Debug, Clone, Default)]
pub(super) struct MaxTree {
    tree: Vec<u64>,
}

impl MaxTree {
    pub(super) fn build(total_bytes: &[u64]) -> MaxTree {
        let nb = total_bytes.len().div_ceil(MAX_BLOCK);
        let mut tree = vec![0u64; 2 * nb];
        for (slot, block) in tree[nb..].iter_mut().zip(total_bytes.chunks(MAX_BLOCK)) {
            *slot = block.iter().copied().max().unwrap_or(0);
        }
        for i in (1..nb).rev() {
            tree[i] = tree[2 * i].max(tree[2 * i + 1]);
        }
        MaxTree { tree }
    }

    /// Highest of `total_bytes` (the totals the tree was built from) over `[x0, x1)`, clamped.
    pub(super) fn max(&self, total_bytes: &[u64], x0: f64, x1: f64) -> u64 {
        let n = total_bytes.len();
        if n == 0 {
            return 0;
        }
        let lo = x0.floor().clamp(0.0, n as f64 - 1.0) as usize;
        let hi = (x1.ceil().clamp(0.0, n as f64) as usize).max(lo + 1);
        let scan = |r: std::ops::Range<usize>| {
            total_bytes
                .get(r)
                .and_then(|v| v.iter().copied().max())
                .unwrap_or(0)
        };
        // Whole blocks [bl, bh) from the tree, the partial ones at both ends by a scan.
        let (bl, bh) = (lo.div_ceil(MAX_BLOCK), hi / MAX_BLOCK);
        if bl >= bh {
            return scan(lo..hi);
        }
        let m = scan(lo..bl * MAX_BLOCK).max(scan(bh * MAX_BLOCK..hi));
        let nb = n.div_ceil(MAX_BLOCK);
        m.max(self.blocks(bl + nb, bh + nb))
    }

    /// Maximum over tree nodes `[l, r)` of one level.
    fn blocks(&self, mut l: usize, mut r: usize) -> u64 {
        let mut m = 0;
        while l < r {
            if l & 1 == 1 {
                m = m.max(self.tree.get(l).copied().unwrap_or(0));
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                m = m.max(self.tree.get(r).copied().unwrap_or(0));
            }
            l /= 2;
            r /= 2;
        }
        m
    }
}
