//! Frame and stack interning while decoding. A `frames` list is turned into a [`StackId`] the
//! moment a trace entry refers to it, and its node then holds only that id: a real snapshot
//! writes a fresh frames list for about a third of its entries (py_symbolize shares frame dicts,
//! not always the lists), and keeping those lists as values would cost ~700 bytes per entry.
//! Memo-shared lists and frame dicts are looked up by node, so sharing costs one lookup.

use super::value::{Arena, Node, NodeId, Val};
use crate::trace::StrId;
use crate::trace::{Frame, FrameId, StackId, StackTable};
use rustc_hash::FxHashMap;

/// The interned frames and stacks of one document.
#[derive(Debug, Clone)]
pub struct StackInterner {
    pub frames: Vec<Frame>,
    frame_index: FxHashMap<Frame, FrameId>,
    pub stacks: StackTable,
    stack_index: FxHashMap<Box<[FrameId]>, StackId>,
    /// Stacks by the frame-dict nodes their list holds: a fresh list of memo-shared frame dicts
    /// (most fresh lists) is found without looking at a single frame.
    stack_by_nodes: FxHashMap<Box<[u32]>, StackId>,
    scratch: Vec<FrameId>,
    scratch_nodes: Vec<u32>,
    /// How many frames there were when each stack was made (by stack id): the order the join
    /// of a parallel decode replays (see `raw::pickle::join`).
    pub(crate) frames_at_stack: Vec<u32>,
    /// Frames and stacks standing for a value of an earlier piece ([`Node::Ext`]), by memo
    /// key, in the order they were made (parallel decoding only).
    pub(crate) ext_frames: Vec<(FrameId, u64)>,
    pub(crate) ext_stacks: Vec<(StackId, u64)>,
    ext_frame_of: FxHashMap<u64, FrameId>,
    ext_stack_of: FxHashMap<u64, StackId>,
}

impl Default for StackInterner {
    fn default() -> Self {
        let mut stack_index = FxHashMap::default();
        stack_index.insert(Box::<[FrameId]>::from([]), StackId::EMPTY);
        StackInterner {
            frames: Vec::new(),
            frame_index: FxHashMap::default(),
            stacks: StackTable::default(),
            stack_index,
            stack_by_nodes: FxHashMap::default(),
            scratch: Vec::new(),
            scratch_nodes: Vec::new(),
            frames_at_stack: vec![0],
            ext_frames: Vec::new(),
            ext_stacks: Vec::new(),
            ext_frame_of: FxHashMap::default(),
            ext_stack_of: FxHashMap::default(),
        }
    }
}

/// Field ids of a frame dict (interned with the other known keys).
#[derive(Debug, Clone, Copy)]
pub struct FrameKeys {
    pub filename: StrId,
    pub line: StrId,
    pub name: StrId,
}

impl Arena {
    /// The frame a frame dict describes; the dict's node then holds only the id.
    pub(crate) fn intern_frame(&mut self, v: Val) -> Option<FrameId> {
        let Val::Node(NodeId(n)) = v else { return None };
        let node = self.nodes.get(n as usize)?;
        let items = match node {
            Node::Frame(f) => return Some(*f),
            Node::Dict(items) => items,
            Node::Ext(key) => return Some(self.stack_interner.ext_frame(*key)),
            _ => return None,
        };
        let k = self.frame_keys;
        let mut fr = Frame {
            filename: StrId::EMPTY,
            line: 0,
            name: StrId::EMPTY,
        };
        for &(key, x) in items {
            let Val::Str(key) = key else { continue };
            if key == k.filename {
                if let Val::Str(s) = x {
                    fr.filename = s;
                }
            } else if key == k.line {
                fr.line = self.as_i64(x).unwrap_or(0);
            } else if key == k.name {
                if let Val::Str(s) = x {
                    fr.name = s;
                }
            }
        }
        let id = self.stack_interner.frame_id(fr);
        if let Some(slot) = self.nodes.get_mut(n as usize) {
            *slot = Node::Frame(id);
        }
        Some(id)
    }

    /// The stack a `frames` value describes (anything but a list of frame dicts: the empty
    /// stack). A list node is replaced by its stack id, so its items are freed.
    pub fn intern_stack(&mut self, v: Val) -> StackId {
        let Val::Node(NodeId(n)) = v else {
            return StackId::EMPTY;
        };
        let items: Vec<Val> = match self.nodes.get_mut(n as usize) {
            Some(Node::Stack(s)) => return *s,
            Some(Node::NodeList(ids)) => {
                let ids = std::mem::take(ids);
                return self.intern_node_list(n, ids);
            }
            Some(Node::List(items)) => std::mem::take(items),
            Some(Node::Tuple(items)) => items.to_vec(),
            Some(&mut Node::Ext(key)) => return self.stack_interner.ext_stack(key),
            _ => return StackId::EMPTY,
        };
        let mut nodes = std::mem::take(&mut self.stack_interner.scratch_nodes);
        nodes.clear();
        let all_nodes = items.iter().all(|x| match x {
            Val::Node(NodeId(i)) => {
                nodes.push(*i);
                true
            }
            _ => false,
        });
        if all_nodes {
            if let Some(&id) = self.stack_interner.stack_by_nodes.get(nodes.as_slice()) {
                self.stack_interner.scratch_nodes = nodes;
                if let Some(slot) = self.nodes.get_mut(n as usize) {
                    *slot = Node::Stack(id);
                }
                return id;
            }
        }
        let id = self.intern_frames(items.into_iter());
        if all_nodes {
            self.stack_interner
                .stack_by_nodes
                .insert(nodes.clone().into_boxed_slice(), id);
        }
        self.stack_interner.scratch_nodes = nodes;
        if let Some(slot) = self.nodes.get_mut(n as usize) {
            *slot = Node::Stack(id);
        }
        id
    }

    /// [`Self::intern_stack`] of node `n`, a [`Node::NodeList`] of `ids`: looked up by the ids
    /// as they are, no copy.
    fn intern_node_list(&mut self, n: u32, ids: Vec<u32>) -> StackId {
        let id = match self.stack_interner.stack_by_nodes.get(ids.as_slice()) {
            Some(&id) => id,
            None => {
                let id = self.intern_frames(ids.iter().map(|&i| Val::Node(NodeId(i))));
                self.stack_interner
                    .stack_by_nodes
                    .insert(ids.into_boxed_slice(), id);
                id
            }
        };
        if let Some(slot) = self.nodes.get_mut(n as usize) {
            *slot = Node::Stack(id);
        }
        id
    }

    /// The stack of a list whose items are the nodes `ids` (what [`Self::intern_stack`] gives
    /// for a [`Node::NodeList`] of them).
    pub(crate) fn intern_ids(&mut self, ids: &[u32]) -> StackId {
        match self.stack_interner.stack_by_nodes.get(ids) {
            Some(&id) => id,
            None => {
                let id = self.intern_frames(ids.iter().map(|&i| Val::Node(NodeId(i))));
                self.stack_interner.stack_by_nodes.insert(ids.into(), id);
                id
            }
        }
    }

    /// The stack of these frame values (non-frames skipped).
    fn intern_frames(&mut self, items: impl Iterator<Item = Val>) -> StackId {
        let mut scratch = std::mem::take(&mut self.stack_interner.scratch);
        scratch.clear();
        for item in items {
            if let Some(f) = self.intern_frame(item) {
                scratch.push(f);
            }
        }
        let st = &mut self.stack_interner;
        let id = st.stack_id(&scratch);
        st.scratch = scratch;
        id
    }
}

impl StackInterner {
    /// The id of a frame, by content.
    pub(crate) fn frame_id(&mut self, fr: Frame) -> FrameId {
        match self.frame_index.get(&fr) {
            Some(&id) => id,
            None => {
                let id = FrameId(self.frames.len() as u32);
                self.frames.push(fr);
                self.frame_index.insert(fr, id);
                id
            }
        }
    }

    /// The id of a stack, by its frames.
    pub(crate) fn stack_id(&mut self, frames: &[FrameId]) -> StackId {
        match self.stack_index.get(frames) {
            Some(&id) => id,
            None => {
                let id = self.stacks.push(frames);
                self.stack_index.insert(frames.into(), id);
                self.frames_at_stack.push(self.frames.len() as u32);
                id
            }
        }
    }

    /// The frame standing for the frame dict memoized under `key` in an earlier piece.
    fn ext_frame(&mut self, key: u64) -> FrameId {
        if let Some(&f) = self.ext_frame_of.get(&key) {
            return f;
        }
        let id = FrameId(self.frames.len() as u32);
        self.frames.push(Frame {
            filename: StrId::EMPTY,
            line: 0,
            name: StrId::EMPTY,
        });
        self.ext_frames.push((id, key));
        self.ext_frame_of.insert(key, id);
        id
    }

    /// The stack standing for the `frames` list memoized under `key` in an earlier piece.
    fn ext_stack(&mut self, key: u64) -> StackId {
        if let Some(&s) = self.ext_stack_of.get(&key) {
            return s;
        }
        let id = self.stacks.push(&[]);
        self.frames_at_stack.push(self.frames.len() as u32);
        self.ext_stacks.push((id, key));
        self.ext_stack_of.insert(key, id);
        id
    }
}
