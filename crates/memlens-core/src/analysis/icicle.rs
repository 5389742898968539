//! Live memory as an icicle (a flamegraph hanging from its root): what is alive after an event,
//! by stack, root frames on top. Frames are filtered as the stack panel filters them (upstream's
//! `_frame_filter`) and written `basename:line:name` (a substring of the frame search's
//! `filename:line:name`, so a clicked frame searches its bands). A node's width is its live bytes;
//! children are ordered largest first and laid out from their parent's start. Allocations from
//! before the trace hang under `(allocated before the trace)`, those without frames under
//! `(no stack)`. [`callers_at`] inverts it for one frame (the frame on top, its callers below). Nodes narrower than `total / MIN_SHARE_INV` are left out (their bytes stay in
//! their parent), so the result is bounded whatever the trace. [`allocation_path`] is where one
//! allocation sits in either (the page outlines a pinned band's cells), [`Icicle::path_nodes`]
//! the cells drawn along it.

use super::frames::{BEFORE_TRACE, NO_STACK};
use crate::flame::{format_frame, frame_is_shown};
use crate::model::Snapshot;
use crate::replay::{EventIdx, Replay};
use crate::trace::StackId;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// Nodes below this fraction of the total (1 / 4000: under a pixel at 4000 px) are dropped.
pub const MIN_SHARE_INV: u64 = 4000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IcicleNode {
    /// `basename:line:name`, or a group name in parentheses.
    pub frame: String,
    /// 0: the root's children.
    pub depth: u32,
    /// Start of the node along the width, in bytes from the left.
    pub offset_bytes: u64,
    pub bytes: u64,
    pub allocations: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Icicle {
    pub event: Option<EventIdx>,
    /// Σ live bytes after the event (the root's width).
    pub total_bytes: u64,
    pub nodes: Vec<IcicleNode>,
}

#[derive(Default)]
struct Trie {
    /// (label, bytes, allocations, children by label)
    nodes: Vec<(String, u64, u64, FxHashMap<String, usize>)>,
}

impl Trie {
    fn child(&mut self, parent: usize, label: &str) -> usize {
        if let Some(&c) = self.nodes[parent].3.get(label) {
            return c;
        }
        let c = self.nodes.len();
        self.nodes
            .push((label.to_string(), 0, 0, FxHashMap::default()));
        self.nodes[parent].3.insert(label.to_string(), c);
        c
    }

    fn add(&mut self, path: &[String], bytes: u64, allocations: u64) {
        let mut at = 0;
        self.nodes[0].1 += bytes;
        self.nodes[0].2 += allocations;
        for label in path {
            at = self.child(at, label);
            self.nodes[at].1 += bytes;
            self.nodes[at].2 += allocations;
        }
    }
}

/// Frames of a stack root first, filtered and formatted.
fn path_of(s: &Snapshot, stack: StackId) -> Vec<String> {
    let frames = s.stacks.get(stack);
    let mut out: Vec<String> = frames
        .iter()
        .rev()
        .filter_map(|&f| s.frame(f))
        .filter(|fr| frame_is_shown(s.str(fr.name), s.str(fr.filename)))
        .map(|fr| format_frame(s, fr))
        .collect();
    if out.is_empty() {
        out.push(NO_STACK.to_string());
    }
    out
}

/// Where an allocation with `stack` (`None`: made before the trace) sits in an icicle, root
/// first: in [`icicle_at`]'s, or with `callers_of` in [`callers_at`]'s for that frame (`None`
/// when its stack does not hold the frame). The one rule both layouts use.
pub fn allocation_path(
    s: &Snapshot,
    stack: Option<StackId>,
    callers_of: Option<&str>,
) -> Option<Vec<String>> {
    let Some(frame) = callers_of else {
        return Some(match stack {
            None => vec![BEFORE_TRACE.to_string()],
            Some(st) => path_of(s, st),
        });
    };
    let mut p = path_of(s, stack?);
    // Root first; the innermost occurrence of the frame, then outward.
    let i = p.iter().rposition(|f| f == frame)?;
    p.truncate(i + 1);
    p.reverse();
    Some(p)
}

/// The icicle of what is alive after `event` (`None`: before the first event).
pub fn icicle_at(s: &Snapshot, replay: &Replay, event: Option<EventIdx>) -> Icicle {
    build(replay, event, |stack| allocation_path(s, stack, None))
}

/// The inverted icicle of one frame (`basename:line:name`): the live allocations whose stack
/// holds it, the frame on top and its callers below (outward), as "who calls it". Its width is
/// what the frame holds alive.
pub fn callers_at(s: &Snapshot, replay: &Replay, event: Option<EventIdx>, frame: &str) -> Icicle {
    build(replay, event, |stack| {
        allocation_path(s, stack, Some(frame))
    })
}

impl Icicle {
    /// Indices of the nodes along `path` (root first), as deep as the icicle keeps it (a node
    /// left out for its width ends it).
    pub fn path_nodes(&self, path: &[String]) -> Vec<usize> {
        let mut out = Vec::new();
        let mut from = 0;
        for (depth, label) in (0u32..).zip(path) {
            // Nodes are depth first: the parent's subtree runs until a node is shallower.
            let found = self
                .nodes
                .iter()
                .enumerate()
                .skip(from)
                .take_while(|(_, n)| n.depth >= depth)
                .find(|(_, n)| n.depth == depth && &n.frame == label);
            match found {
                Some((i, _)) => {
                    out.push(i);
                    from = i + 1;
                }
                None => break,
            }
        }
        out
    }
}

fn build(
    replay: &Replay,
    event: Option<EventIdx>,
    path: impl Fn(Option<StackId>) -> Option<Vec<String>>,
) -> Icicle {
    let mut by_stack: FxHashMap<Option<StackId>, (u64, u64)> = FxHashMap::default();
    for a in replay.live_at(event) {
        let key = a.alloc_event.map(|_| a.stack);
        let e = by_stack.entry(key).or_default();
        e.0 += a.size_bytes;
        e.1 += 1;
    }
    let mut trie = Trie::default();
    trie.nodes.push((String::new(), 0, 0, FxHashMap::default()));
    let mut stacks: Vec<(Option<StackId>, (u64, u64))> = by_stack.into_iter().collect();
    stacks.sort_by_key(|x| x.0);
    for (stack, (bytes, n)) in stacks {
        if let Some(p) = path(stack) {
            trie.add(&p, bytes, n);
        }
    }
    let total = trie.nodes[0].1;
    let min = total / MIN_SHARE_INV;
    let mut nodes = Vec::new();
    // Depth-first, children largest first: (node, depth, offset).
    let mut todo: Vec<(usize, u32, u64)> = Vec::new();
    let push_children =
        |todo: &mut Vec<(usize, u32, u64)>, trie: &Trie, n: usize, depth: u32, start: u64| {
            let mut kids: Vec<usize> = trie.nodes[n].3.values().copied().collect();
            kids.sort_by(|&a, &b| {
                trie.nodes[b]
                    .1
                    .cmp(&trie.nodes[a].1)
                    .then_with(|| trie.nodes[a].0.cmp(&trie.nodes[b].0))
            });
            let mut off = start;
            let mut placed = Vec::with_capacity(kids.len());
            for k in kids {
                placed.push((k, depth, off));
                off += trie.nodes[k].1;
            }
            todo.extend(placed.into_iter().rev());
        };
    push_children(&mut todo, &trie, 0, 0, 0);
    while let Some((n, depth, off)) = todo.pop() {
        let (label, bytes, allocations, _) = &trie.nodes[n];
        if *bytes == 0 || *bytes < min {
            continue;
        }
        nodes.push(IcicleNode {
            frame: label.clone(),
            depth,
            offset_bytes: off,
            bytes: *bytes,
            allocations: *allocations,
        });
        push_children(&mut todo, &trie, n, depth + 1, off);
    }
    Icicle {
        event,
        total_bytes: total,
        nodes,
    }
}
