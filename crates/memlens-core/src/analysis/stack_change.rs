//! What grew by full stack: live bytes of one device after two events (or of two snapshots,
//! each after an event) grouped by the whole stack of each allocation (its frames, innermost
//! first, and its user frame), and the change from the first moment to the second — the finer grain under [`super::compare::between`]'s
//! user frames (one user frame often allocates from several call paths). Allocations from
//! before the trace have no stack: they group as no frames under their user frame
//! (`(allocated before the trace)`), so the groups sum exactly to the change of the live total.
//! Each side is grouped apart ([`stack_groups`], frame labels interned) and two are combined
//! ([`combine_stacks`]), so the two sides need not sit in one process (the page's Compare view).

use super::frames::{frame_label, StackFacts};
use crate::model::Snapshot;
use crate::replay::{EventIdx, Replay};
use crate::trace::{FrameId, StackId};
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

/// Live bytes of one side by full stack, frames interned: what [`combine_stacks`] compares.
/// Computed where the snapshot is (the page's workers each hold theirs), combined anywhere;
/// frame labels are sent once, however many stacks share them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StackGroups {
    /// Every frame label the stacks name (`filename:line:name`), each once.
    pub labels: Vec<String>,
    /// Each (stack, user frame) with live bytes, once.
    pub stacks: Vec<StackBytes>,
}

/// One (stack, user frame)'s live bytes in [`StackGroups`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackBytes {
    /// Its user frame.
    pub frame: String,
    /// Indices into [`StackGroups::labels`], innermost first; empty for allocations from
    /// before the trace.
    pub frames: Vec<u32>,
    pub bytes: u64,
}

/// Live bytes after `event` of the replayed device, by (stack, user frame); `facts` is any
/// [`StackFacts`] of the same snapshot (reused across calls, it caches user frames).
pub fn stack_groups(
    s: &Snapshot,
    replay: &Replay,
    facts: &mut StackFacts,
    event: Option<EventIdx>,
) -> StackGroups {
    let mut raw: FxHashMap<(Option<StackId>, u32), u64> = FxHashMap::default();
    for a in replay.live_at(event) {
        let g = facts.allocation_group(s, a);
        let stack = a.alloc_event.map(|_| a.stack);
        *raw.entry((stack, g)).or_default() += a.size_bytes;
    }
    let mut labels: Vec<String> = Vec::new();
    let mut label_ids: FxHashMap<String, u32> = FxHashMap::default();
    let mut frame_ids: FxHashMap<FrameId, u32> = FxHashMap::default();
    let mut merged: BTreeMap<(Vec<u32>, u32), u64> = BTreeMap::new();
    for ((stack, g), bytes) in raw {
        let frames = stack.map_or_else(Vec::new, |st| {
            s.stacks
                .get(st)
                .iter()
                .map(|&f| {
                    *frame_ids.entry(f).or_insert_with(|| {
                        *label_ids.entry(frame_label(s, f)).or_insert_with_key(|l| {
                            labels.push(l.clone());
                            labels.len() as u32 - 1
                        })
                    })
                })
                .collect()
        });
        // Frames with equal labels are one frame here, as they are to a reader.
        *merged.entry((frames, g)).or_default() += bytes;
    }
    let stacks = merged
        .into_iter()
        .map(|((frames, g), bytes)| StackBytes {
            frame: facts.names[g as usize].clone(),
            frames,
            bytes,
        })
        .collect();
    StackGroups { labels, stacks }
}

/// (frames, user frame) → bytes, labels resolved (an index out of range reads as `?`).
fn resolved(g: &StackGroups) -> BTreeMap<(Vec<&str>, &str), u64> {
    let mut out = BTreeMap::new();
    for st in &g.stacks {
        let frames = st
            .frames
            .iter()
            .map(|&i| g.labels.get(i as usize).map_or("?", String::as_str))
            .collect();
        *out.entry((frames, st.frame.as_str())).or_default() += st.bytes;
    }
    out
}

/// The stacks whose live bytes differ from side `a` to side `b` (matched by their frames), by
/// absolute change (then frames, then user frame); all of them (`limit` = `None`) or the first
/// `limit`.
pub fn combine_stacks(a: &StackGroups, b: &StackGroups, limit: Option<usize>) -> Vec<StackChange> {
    let (a, b) = (resolved(a), resolved(b));
    let mut keys: Vec<&(Vec<&str>, &str)> = a.keys().chain(b.keys()).collect();
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
                frame: k.1.to_string(),
                frames: k.0.iter().map(|f| f.to_string()).collect(),
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

/// One side of a stack comparison: a device's allocation table of a snapshot, after an event.
pub type Moment<'a> = (&'a Snapshot, &'a Replay, Option<EventIdx>);

/// The stacks whose live bytes differ between moment `a` and moment `b` (two events of one
/// device, or two snapshots, e.g. at their peaks: stacks are matched by their frames), by
/// absolute change (then frames, then user frame); all of them (`limit` = `None`) or the first
/// `limit`.
pub fn stack_changes(a: Moment, b: Moment, limit: Option<usize>) -> Vec<StackChange> {
    let a = stack_groups(a.0, a.1, &mut StackFacts::default(), a.2);
    let b = stack_groups(b.0, b.1, &mut StackFacts::default(), b.2);
    combine_stacks(&a, &b, limit)
}
