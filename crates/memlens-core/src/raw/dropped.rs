//! The trace row ids removed while decoding (`raw::window`): disjoint ranges, so that an id
//! still maps to its place in the columns.

use std::ops::Range;

/// Row ids removed so far: disjoint ranges in increasing order, and how many ids they hold.
#[derive(Debug, Clone, Default)]
pub struct DroppedRows {
    ranges: Vec<(u32, u32)>,
    pub(super) total: u32,
    /// Rows held after the last `Arena::keep_rows` that removed any (the next one waits
    /// until the columns have doubled past it, so the work stays linear in the rows read).
    pub(super) held_after_last: usize,
}

impl DroppedRows {
    /// How many removed ids lie below `r`, and whether `r` itself was removed.
    #[inline]
    pub(super) fn below(&self, r: u32) -> (u32, bool) {
        match self.ranges.last() {
            None => (0, false),
            Some(&(_, e)) if r >= e => (self.total, false),
            _ => {
                let i = self.ranges.partition_point(|&(s, _)| s <= r);
                let mut n = 0;
                for &(s, e) in self.ranges.get(..i).unwrap_or(&[]) {
                    n += e.min(r) - s;
                }
                let inside = i > 0 && self.ranges.get(i - 1).is_some_and(|&(_, e)| r < e);
                (n, inside)
            }
        }
    }

    /// The ids of `s..e` not removed yet.
    pub(super) fn missing(&self, s: u32, e: u32) -> Vec<Range<u32>> {
        let mut out = Vec::new();
        let mut at = s;
        for &(a, b) in &self.ranges {
            if b <= at || a >= e {
                continue;
            }
            if a > at {
                out.push(at..a);
            }
            at = at.max(b);
        }
        if at < e {
            out.push(at..e);
        }
        out
    }

    /// Records the ids `r` (none of them removed before) as removed.
    pub(super) fn insert(&mut self, r: Range<u32>) {
        let i = self.ranges.partition_point(|&(s, _)| s < r.start);
        self.ranges.insert(i, (r.start, r.end));
        self.total += r.end - r.start;
        // Merge with the neighbours it touches.
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(self.ranges.len());
        for &(a, b) in &self.ranges {
            match merged.last_mut() {
                Some(last) if last.1 >= a => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        self.ranges = merged;
    }
}
