//! Frame and stack interning while decoding. A `frames` list is turned into a [`StackId`] the
//! moment a trace entry refers to it, and its node then holds only that id: a real snapshot
//! writes a fresh frames list for about a third of its entries (py_symbolize shares frame dicts,
//! not always the lists), and keeping those lists as values would cost ~700 bytes per entry.
//! Memo-shared lists and frame dicts are looked up by node, so sharing costs one lookup. The
//! tables are `raw::intern`'s.

use super::value::{Arena, Node, NodeId, Val};
use crate::trace::{Frame, FrameId, StackId, StrId};

impl Arena {
    /// The frame a frame dict describes; the dict's node then holds only the id.
    pub(crate) fn intern_frame(&mut self, v: Val) -> Option<FrameId> {
        let Val::Node(NodeId(n)) = v else { return None };
        if let Some(Node::Ext { key, frame, .. }) = self.nodes.get_mut(n as usize) {
            let f = frame.unwrap_or_else(|| self.stack_interner.ext_frame(*key));
            *frame = Some(f);
            return Some(f);
        }
        let items = match self.nodes.get(n as usize)? {
            Node::Frame(f) => return Some(*f),
            Node::Dict(items) => items,
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
            Some(Node::Ext { key, stack, .. }) => {
                let s = stack.unwrap_or_else(|| self.stack_interner.ext_stack(*key));
                *stack = Some(s);
                return s;
            }
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
