//! What grew by full stack: live bytes of one device after two events (or of two snapshots,
//! each after an event) grouped by the whole stack of each allocation (its frames, innermost
//! first, and its user frame), and the change from the first moment to the second — the finer grain under [`super::compare::between`]'s
//! user frames (one user frame often allocates from several call paths). Allocations from
//! before the trace have no stack: they group as no frames under their user frame
//! (`(allocated before the trace)`), so the groups sum exactly to the change of the live total.

use super::frames::{frame_label, StackFacts};
use crate::model::Snapshot;
use crate::replay::{EventIdx, Replay};
use crate::trace::StackId;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Stacks listed in [`super::compare::Between::by_stack`].
pub const TOP_STACK_CHANGES: usize = 20;

/// One full stack's live bytes at two moments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackChange {
    /// Its user frame (the group of `by_frame` it belongs to).
    pub frame: String,
    /// Every frame, innermost first, `filename:line:name`; empty for allocations from before
    /// the trace.
    pub frames: Vec<String>,
    pub a_bytes: u64,
    pub b_bytes: u64,
    pub change_bytes: i64,
}

/// (frames, user frame) → bytes.
type ByStack = BTreeMap<(Vec<String>, String), u64>;

/// Live bytes after `event` by (stack, user frame), labelled.
fn by_stack_at(
    s: &Snapshot,
    replay: &Replay,
    facts: &mut StackFacts,
    event: Option<EventIdx>,
) -> ByStack {
    let mut raw: FxHashMap<(Option<StackId>, u32), u64> = FxHashMap::default();
    for a in replay.live_at(event) {
        let g = facts.allocation_group(s, a);
        let stack = a.alloc_event.map(|_| a.stack);
        *raw.entry((stack, g)).or_default() += a.size_bytes;
    }
    let mut out = ByStack::new();
    for ((stack, g), bytes) in raw {
        let frames = stack.map_or_else(Vec::new, |st| {
            s.stacks
                .get(st)
                .iter()
                .map(|&f| frame_label(s, f))
                .collect()
        });
        *out.entry((frames, facts.names[g as usize].clone()))
            .or_default() += bytes;
    }
    out
}

/// One side of a stack comparison: a device's allocation table of a snapshot, after an event.
pub type Moment<'a> = (&'a Snapshot, &'a Replay, Option<EventIdx>);

/// The stacks whose live bytes differ between moment `a` and moment `b` (two events of one
/// device, or two snapshots, e.g. at their peaks: stacks are matched by their frames), by
/// absolute change (then frames, then user frame); all of them (`limit` = `None`) or the first
/// `limit`.
pub fn stack_changes(a: Moment, b: Moment, limit: Option<usize>) -> Vec<StackChange> {
    let a = by_stack_at(a.0, a.1, &mut StackFacts::default(), a.2);
    let b = by_stack_at(b.0, b.1, &mut StackFacts::default(), b.2);
    let mut keys: Vec<&(Vec<String>, String)> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out: Vec<StackChange> = keys
        .into_iter()
        .filter_map(|k| {
            let (x, y) = (
                a.get(k).copied().unwrap_or(0),
                b.get(k).copied().unwrap_or(0),
            );
            (x != y).then(|| StackChange {
                frame: k.1.clone(),
                frames: k.0.clone(),
                a_bytes: x,
                b_bytes: y,
                change_bytes: y as i64 - x as i64,
            })
        })
        .collect();
    // `keys` is sorted by (frames, frame); a stable sort keeps that order among equal changes.
    out.sort_by_key(|c| std::cmp::Reverse(c.change_bytes.unsigned_abs()));
    if let Some(n) = limit {
        out.truncate(n);
    }
    out
}
