//! Alive at a moment: the allocations live once an event has been applied, grouped by user
//! frame, by full stack and by ledger class. Each grouping sums exactly to the live total.

use super::frames::frame_label;
use super::ledger::{class_rows, ClassRow, Classifier};
use crate::replay::{EventIdx, Replay};
use crate::trace::StackId;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// Stacks listed in [`Alive::by_stack`].
pub const TOP_STACKS: usize = 20;

/// Allocations of one user frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// `filename:line:name`, or `(allocated before the trace)` / `(no stack)`.
    pub frame: String,
    pub bytes: u64,
    pub allocations: u64,
    /// Share of the live total (0 to 1).
    pub share: f64,
}

/// Allocations of one full stack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackGroup {
    /// Its user frame (the group of [`Alive::top`] it belongs to).
    pub frame: String,
    /// Every frame, innermost first, `filename:line:name`.
    pub frames: Vec<String>,
    pub bytes: u64,
    pub allocations: u64,
    pub share: f64,
}

/// What is alive once `event` has been applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alive {
    /// Device-local index of the trace entry after which this holds; `None`: before the first
    /// entry (or no trace).
    pub event: Option<EventIdx>,
    /// Σ requested bytes of the live allocations.
    pub allocated_bytes: u64,
    pub allocations: u64,
    /// Every user-frame group, largest first (ties by frame).
    pub top: Vec<Group>,
    /// The [`TOP_STACKS`] largest stacks.
    pub by_stack: Vec<StackGroup>,
    /// The ledger classes.
    pub by_class: Vec<ClassRow>,
}

/// The allocations alive after `event` (`None`: before the first), grouped.
pub fn alive_at(replay: &Replay, cx: &mut Classifier, event: Option<EventIdx>) -> Alive {
    let mut groups: FxHashMap<u32, (u64, u64)> = FxHashMap::default();
    let mut stacks: FxHashMap<StackId, (u32, u64, u64)> = FxHashMap::default();
    let mut rules = Vec::new();
    let (mut total, mut count) = (0u64, 0u64);
    for a in replay.live_at(event) {
        total += a.size_bytes;
        count += 1;
        let g = cx.facts.allocation_group(cx.s, a);
        let e = groups.entry(g).or_default();
        e.0 += a.size_bytes;
        e.1 += 1;
        if a.alloc_event.is_some() {
            let e = stacks.entry(a.stack).or_insert((g, 0, 0));
            e.1 += a.size_bytes;
            e.2 += 1;
        }
        rules.push((cx.classify(a), a.size_bytes, g));
    }
    let names = &cx.facts.names;
    let mut top: Vec<Group> = groups
        .into_iter()
        .map(|(g, (bytes, allocations))| Group {
            frame: names[g as usize].clone(),
            bytes,
            allocations,
            share: super::share(bytes, total),
        })
        .collect();
    top.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.frame.cmp(&b.frame)));
    let mut st: Vec<(StackId, (u32, u64, u64))> = stacks.into_iter().collect();
    st.sort_by(|a, b| b.1 .1.cmp(&a.1 .1).then(a.0.cmp(&b.0)));
    let by_stack = st
        .into_iter()
        .take(TOP_STACKS)
        .map(|(stack, (g, bytes, allocations))| StackGroup {
            frame: names[g as usize].clone(),
            frames: cx
                .s
                .stacks
                .get(stack)
                .iter()
                .map(|&f| frame_label(cx.s, f))
                .collect(),
            bytes,
            allocations,
            share: super::share(bytes, total),
        })
        .collect();
    Alive {
        event,
        allocated_bytes: total,
        allocations: count,
        top,
        by_stack,
        by_class: class_rows(rules.into_iter(), names, total),
    }
}
