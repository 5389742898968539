//! Giving nodes back: the dict of a trace entry that became a row, and the `frames` list that
//! became its interned stack, need no arena node once nothing else can refer to them.
//!
//! A fresh dict or list is one just opened (EMPTY_DICT, EMPTY_LIST) with no second reference
//! yet: only its memo slot and its place on the stack. A GET or DUP of it makes it ordinary.

use super::PickleMachine;
use crate::raw::value::{Node, NodeId, Val};

#[derive(Debug, Clone, Copy)]
pub(super) struct Fresh {
    pub node: u32,
    pub memo_slot: Option<u64>,
    /// A list brought back from a stack slot.
    pub again: bool,
}

/// Pushed by EMPTY_DICT (a constant, so the node is not assembled in a temporary first).
pub(super) const EMPTY_DICT_NODE: Node = Node::Dict(Vec::new());
pub(super) const EMPTY_LIST_NODE: Node = Node::List(Vec::new());

impl PickleMachine {
    /// A second reference to the fresh dict or list exists: it must keep its node.
    pub(super) fn unfresh(&mut self, v: Val) {
        if let (Some(f), Val::Node(n)) = (self.fresh, v) {
            if n.0 == f.node {
                self.fresh = None;
            }
        }
        if let (Some(f), Val::Node(n)) = (self.fresh_list, v) {
            if n.0 == f.node {
                self.fresh_list = None;
            }
        }
    }

    /// Before SETITEMS with `kv`: the fresh list, if it is the newest node and one of the
    /// values (so, with no second reference, it is referred to only by `kv` and its memo slot).
    pub(super) fn frames_list_in(&self, kv: &[Val]) -> Option<Fresh> {
        let f = self.fresh_list?;
        if self.arena.nodes.len() != f.node as usize + 1 {
            return None;
        }
        let v = Val::Node(NodeId(f.node));
        kv.chunks_exact(2).any(|p| p[1] == v).then_some(f)
    }

    /// After SETITEMS: if the list `f` found by [`Self::frames_list_in`] became the entry's
    /// interned stack, nothing holds its node any more but its memo slot, which now names the
    /// stack; the node is given back, so the entry's dict node can be given back too (a fresh
    /// frames list per entry otherwise keeps two 32-byte nodes an entry alive).
    pub(super) fn drop_frames_list(&mut self, f: Fresh) {
        self.fresh_list = None;
        if self.arena.nodes.len() != f.node as usize + 1 {
            return;
        }
        let Some(&Node::Stack(s)) = self.arena.nodes.last() else {
            return;
        };
        let v = Val::Node(NodeId(f.node));
        // (A slot since overwritten by another PUT no longer refers to the list.)
        if let Some(k) = f.memo_slot {
            let dense = self.memo.holds_node(k, f.node);
            let can_drop = match dense {
                true => self.memo.set_stack(k, s, f.again),
                false => self.memo_sparse.get(&k) != Some(&v),
            };
            if !can_drop {
                return;
            }
        }
        self.arena.nodes.truncate(f.node as usize);
    }

    /// After SETITEM(S) on `dict` held at `stack_pos`: if it became a trace row and nothing else
    /// refers to its node, drop the node and hold the row directly.
    pub(super) fn settle_row(&mut self, dict: Val, stack_pos: usize) {
        let Some(f) = self.fresh else { return };
        let Val::Node(n) = dict else { return };
        if n.0 != f.node || self.arena.nodes.len() != f.node as usize + 1 {
            return;
        }
        let Some(&Node::Row(r)) = self.arena.nodes.last() else {
            return;
        };
        // (truncate, not pop: pop would read the whole node back right after SETITEMS wrote
        // part of it, a store-forwarding stall that was half of this function's samples)
        self.arena.nodes.truncate(f.node as usize);
        self.fresh = None;
        if let Some(slot) = self.stack.get_mut(stack_pos) {
            *slot = Val::Row(r);
        }
        if let Some(k) = f.memo_slot {
            // (A slot since overwritten by another PUT no longer refers to the dict.)
            let v = Val::Node(n);
            if self.memo.holds_node(k, n.0) {
                self.memo.set(k, Val::Row(r));
            } else if let Some(m) = self.memo_sparse.get_mut(&k).filter(|m| **m == v) {
                *m = Val::Row(r);
            }
        }
    }

    /// EMPTY_DICT: a new dict node, fresh (see [`Self::fresh`]).
    #[inline]
    pub(super) fn open_dict(&mut self) -> u32 {
        let node = self.arena.nodes.len() as u32;
        self.arena.nodes.push(EMPTY_DICT_NODE);
        self.fresh = Some(Fresh {
            node,
            memo_slot: None,
            again: false,
        });
        node
    }
}
