//! Trace rows given up while decoding: when only part of each trace is wanted (the last N
//! entries, or everything from entry K on; see `range`), the rows outside it are removed from
//! the columns between input chunks ([`Arena::keep_rows`]), so a file whose whole trace would
//! not fit in memory still decodes. This is not the pickle machine's business: it reads the
//! arena's row lists (each device's `RowRange`) from outside, between chunks.
//!
//! Row ids stay what the decoder handed out (the memo and the machine's stack hold them): a
//! removed row is a gap in the ids, and `raw::dropped::DroppedRows` maps an id to its place in the
//! columns. [`Arena::settle_dropped_rows`], once the input ended, renumbers the arena's row
//! references to places in the columns, so the model reads the columns as if nothing had been
//! removed (a reference to a removed row reads as `None`).

use super::value::{Arena, Node, RowExtra, RowId, Val};
use crate::trace::{Runs, TraceColumns};
use std::ops::Range;

/// Which rows of each trace list to keep while decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowWindow {
    /// The last `n` rows of each list.
    Last(u32),
    /// Rows from the list's `k`-th on (0-based).
    From(u32),
}

impl RowWindow {
    /// The first row id of `start..end` (a list's rows) the window keeps.
    fn first_kept(self, start: u32, end: u32) -> u32 {
        match self {
            RowWindow::Last(n) => end.saturating_sub(n).max(start),
            RowWindow::From(k) => start.saturating_add(k).min(end),
        }
    }
}

/// Rows read before a removal pass is worth its cost (≈ 2 MB of columns); the default of
/// [`Arena::keep_rows`]'s `every_rows`.
pub const DROP_EVERY_ROWS: usize = 1 << 16;

impl Arena {
    /// The id the next row gets.
    #[inline]
    pub(crate) fn next_row_id(&self) -> u32 {
        self.rows.len() as u32 + self.dropped.total
    }

    /// Room for exactly `n` more rows in the columns, no more than the window's cap allows.
    pub(crate) fn reserve_rows_exact(&mut self, n: usize) {
        let n = match self.rows_cap {
            Some(c) => n.min(c.saturating_sub(self.rows.len())),
            None => n,
        };
        self.rows.reserve_exact(n);
    }

    /// Where row `r` is in the columns (`None`: removed, or never read).
    #[inline]
    pub(crate) fn row_index(&self, r: u32) -> Option<usize> {
        let (below, removed) = self.dropped.below(r);
        let i = (r - below) as usize;
        (!removed && i < self.rows.len()).then_some(i)
    }

    /// Removes the rows of every trace list outside `window` (rows not in a list yet, or in a
    /// list that is not a plain run of rows, stay), once the columns hold `every_rows` and
    /// twice what the last pass left. Call it between input chunks.
    pub fn keep_rows(&mut self, window: RowWindow, every_rows: usize) {
        let every_rows = every_rows.max(1);
        if self.rows_cap.is_none() {
            self.rows_cap = Some(2 * every_rows);
        }
        let held = self.rows.len();
        if held >= every_rows.max(2 * self.dropped.held_after_last) {
            self.remove_outside(window);
            self.rows_cap = Some(2 * self.rows.len().max(every_rows));
        }
    }

    /// Removes the rows of every trace list outside `window` now (see [`Self::keep_rows`]).
    pub fn remove_outside(&mut self, window: RowWindow) {
        let mut gone: Vec<Range<u32>> = Vec::new();
        for &li in &self.row_lists {
            if let Some(&Node::RowRange { start, end }) = self.nodes.get(li as usize) {
                let keep = window.first_kept(start, end);
                if keep > start {
                    gone.extend(self.dropped.missing(start, keep));
                }
            }
        }
        gone.sort_unstable_by_key(|r| r.start);
        // Ids → places in the columns as they are now (before this pass's removals).
        let places: Vec<Range<usize>> = gone
            .iter()
            .map(|r| {
                let s = (r.start - self.dropped.below(r.start).0) as usize;
                s..s + r.len()
            })
            .collect();
        for r in gone {
            self.dropped.insert(r);
        }
        if !places.is_empty() {
            remove_places(&mut self.rows, &places);
            let d = &self.dropped;
            self.rows.extras.retain(|(r, _)| !d.below(*r).1);
        }
        self.dropped.held_after_last = self.rows.len();
    }

    /// Once the input ended: row references become places in the columns (see the module
    /// doc), so nothing after this needs `raw::dropped::DroppedRows`. Returns how many rows were removed.
    pub fn settle_dropped_rows(&mut self) -> u32 {
        self.rows_cap = None;
        if self.dropped.total == 0 {
            return 0;
        }
        let d = std::mem::take(&mut self.dropped);
        let place = |r: u32| -> Option<u32> {
            let (n, removed) = d.below(r);
            (!removed).then_some(r - n)
        };
        let val = |v: &mut Val| {
            if let Val::Row(RowId(r)) = *v {
                *v = place(r).map_or(Val::None, |p| Val::Row(RowId(p)));
            }
        };
        for n in &mut self.nodes {
            match n {
                Node::RowRange { start, end } => {
                    *start -= d.below(*start).0;
                    *end -= d.below(*end).0;
                }
                Node::Row(RowId(r)) => match place(*r) {
                    Some(p) => *r = p,
                    None => *n = Node::Dict(Vec::new()),
                },
                Node::List(v) => v.iter_mut().for_each(val),
                Node::Tuple(v) => v.iter_mut().for_each(val),
                Node::Dict(kv) => kv.iter_mut().for_each(|(k, v)| {
                    val(k);
                    val(v)
                }),
                _ => {}
            }
        }
        for (r, _) in &mut self.rows.extras {
            *r -= d.below(*r).0;
        }
        d.total
    }
}

/// Removes the rows at `places` (disjoint, increasing) from every column.
fn remove_places(rows: &mut TraceColumns<RowExtra>, places: &[Range<usize>]) {
    remove_from(&mut rows.action, places);
    remove_from(&mut rows.addr, places);
    remove_from(&mut rows.size_bytes, places);
    remove_from(&mut rows.time_us, places);
    remove_from(&mut rows.stack, places);
    remove_runs(&mut rows.stream, places);
    remove_runs(&mut rows.compile_context, places);
    remove_runs(&mut rows.user_metadata, places);
}

fn remove_from<T: Copy>(v: &mut Vec<T>, places: &[Range<usize>]) {
    let mut out = 0usize;
    let mut from = 0usize;
    let len = v.len();
    for p in places.iter().chain(std::iter::once(&(len..len))) {
        let (s, e) = (p.start.min(len), p.end.min(len));
        if out != from {
            v.copy_within(from..s.max(from), out);
        }
        out += s.saturating_sub(from);
        from = e.max(from);
    }
    v.truncate(out);
}

fn remove_runs<T: Copy + PartialEq + Default>(c: &mut Runs<T>, places: &[Range<usize>]) {
    let mut kept = Runs::default();
    let mut cur = c.cursor();
    let mut from = 0usize;
    let len = c.len();
    for p in places.iter().chain(std::iter::once(&(len..len))) {
        for r in from..p.start.min(len) {
            kept.push(cur.at(r).unwrap_or_default());
        }
        from = p.end.max(from);
    }
    *c = kept;
}
