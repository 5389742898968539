//! The trace read so far, while a pickle is still being decoded: which trace rows each
//! `device_traces[d]` holds at this point of the input, read off the machine's stack without
//! changing anything.
//!
//! CPython's pickler leaves the top-level dict's keys and values on the stack until one
//! SETITEMS at the end, the device lists of `device_traces` on the stack above its MARK until
//! their APPENDS, and a device list's entries in batches of up to 1000 above its own MARK. The
//! rows of a device are those already appended to its list plus the batch waiting above it; an
//! entry still being read (a dict, its items above a further MARK) is not one yet. Protocol 0
//! appends item by item, so there nothing waits.

use super::PickleMachine;
use crate::raw::value::{Node, Val};
use std::ops::Range;

impl PickleMachine {
    /// Trace rows of each `device_traces[d]` read so far (index `d`), in file order one after
    /// the other from row 0: empty before `device_traces` is met. `None` where the rows are not
    /// laid out that way (a device list holding something other than entries, rows out of
    /// order or shared): only the model, at the end, sorts that out.
    pub fn trace_so_far(&self) -> Option<Vec<Range<u32>>> {
        let Some(key) = self.arena.strings.lookup("device_traces") else {
            return Some(Vec::new());
        };
        let (outer, pos) = match self.stack.iter().position(|v| *v == Val::Str(key)) {
            // The key waits with its value above it (none yet: nothing read of it).
            Some(i) => match self.stack.get(i + 1) {
                Some(&v) => (v, Some(i + 1)),
                None => return Some(Vec::new()),
            },
            // Already set in the top-level dict (protocol 0 sets each item), or finished.
            None => {
                let top = self.result.or_else(|| self.stack.first().copied());
                match top.and_then(|t| self.arena.get(t, "device_traces")) {
                    Some(v) => (v, None),
                    None => return Some(Vec::new()),
                }
            }
        };
        let Some(done) = self.arena.seq(outer) else {
            return Some(Vec::new());
        };
        let mut lists: Vec<(Val, &[Val])> = done.map(|v| (v, &[][..])).collect();
        if let Some(p) = pos {
            let waiting = self.waiting(p);
            // Only the last list can still be read: the others' batches were appended.
            for (i, &v) in waiting.iter().enumerate() {
                let last = i + 1 == waiting.len();
                lists.push((v, if last { self.waiting(p + 1 + i) } else { &[] }));
            }
        }
        let mut next = 0u32;
        let mut out = Vec::with_capacity(lists.len());
        for (i, (list, batch)) in lists.iter().enumerate() {
            let last = i + 1 == lists.len();
            let r = self.rows_of(*list, batch, next, last)?;
            next = r.end;
            out.push(r);
        }
        Some(out)
    }

    /// The values waiting on the stack to go into the container at stack position `pos`: those
    /// above a MARK right over it, up to the next MARK; without that MARK, a container right
    /// over it (a list of one item is written as the item and APPEND, and protocol 0 appends
    /// every item so). A scalar there (the top-level dict's next key) says the container is
    /// complete.
    fn waiting(&self, pos: usize) -> &[Val] {
        let end = match self.marks.iter().position(|&m| m == pos + 1) {
            Some(i) => self.marks.get(i + 1).copied().unwrap_or(self.stack.len()),
            None if matches!(self.stack.get(pos + 1), Some(Val::Node(_) | Val::Row(_))) => pos + 2,
            None => pos + 1,
        };
        self.stack
            .get(pos + 1..end.min(self.stack.len()))
            .unwrap_or(&[])
    }

    /// The rows of a device list and the batch waiting above it, which must be rows `next..`;
    /// in the `last` list (the one being read) a last item that is no row yet (an entry still
    /// being read) is left out.
    fn rows_of(&self, list: Val, batch: &[Val], next: u32, last: bool) -> Option<Range<u32>> {
        let mut end = next;
        match self.arena.node(list) {
            Some(Node::RowRange { start, end: e }) => {
                if *start != next {
                    return None;
                }
                end = *e;
            }
            Some(Node::List(_)) | Some(Node::NodeList(_)) => {
                for v in self.arena.seq(list)? {
                    if self.arena.row_of(v)?.0 != end {
                        return None;
                    }
                    end += 1;
                }
            }
            // Not a list: the model warns and reads no rows from it.
            _ => return batch.is_empty().then_some(next..next),
        }
        for (i, &v) in batch.iter().enumerate() {
            match self.arena.row_of(v) {
                Some(r) if r.0 == end => end += 1,
                None if last && i + 1 == batch.len() => {}
                _ => return None,
            }
        }
        Some(next..end)
    }
}
