//! The memo opcodes: PUT, BINPUT, LONG_BINPUT and MEMOIZE store the top of the stack under a
//! key; GET, BINGET and LONG_BINGET push it back. Keys `0..len` are dense (the [`Memo`]), any
//! others sparse. A GET of the fresh dict or list is its second reference (see `fresh`).

use super::fresh::Fresh;
use super::memo::{MEMO_EXT, MEMO_NODE, MEMO_ROW, MEMO_STR, MEMO_TAG_BITS, MEMO_TAG_MASK};
use super::reader::{Halt, Reader, Step};
use super::stack::push_val;
use super::text::parse_dec_u64;
use super::PickleMachine;
use crate::error::DecodeError;
use crate::raw::value::{Node, NodeId, RowId, Val};
use crate::trace::StrId;

#[cfg(doc)]
use super::memo::Memo;

impl PickleMachine {
    /// MEMOIZE, BINPUT, LONG_BINPUT, PUT.
    #[inline(always)]
    pub(super) fn put_op(&mut self, op: u8, r: &mut Reader) -> Step {
        let k = match op {
            0x94 => self.memo.len() as u64,
            b'q' => r.u8()? as u64,
            b'r' => r.u32_le()? as u64,
            _ => {
                let l = r.line()?;
                parse_dec_u64(l).ok_or_else(|| self.malformed(r.at(), "bad PUT key"))?
            }
        };
        let v = self.top(r.at(), op)?;
        self.memo_put(k, v);
        Ok(())
    }

    /// BINGET, LONG_BINGET, GET.
    #[inline(always)]
    pub(super) fn get_op(&mut self, op: u8, r: &mut Reader) -> Step {
        let k = match op {
            b'h' => r.u8()? as u64,
            b'j' => r.u32_le()? as u64,
            _ => {
                let l = r.line()?;
                parse_dec_u64(l).ok_or_else(|| self.malformed(r.at(), "bad GET key"))?
            }
        };
        self.push_memo(k, r.at())
    }

    /// Pushes memo key `k`: each inline tag pushes its own value, straight from the 4-byte slot
    /// (no `Val` temporary); anything else takes [`Self::memo_get`].
    #[inline(always)]
    fn push_memo(&mut self, k: u64, at: u64) -> Step {
        let x = self.memo.slot(k);
        let id = x >> MEMO_TAG_BITS;
        match x & MEMO_TAG_MASK {
            MEMO_STR => push_val(&mut self.stack, Val::Str(StrId(id))),
            MEMO_NODE => {
                if let Some(f) = self.fresh {
                    if f.node == id {
                        self.fresh = None;
                    }
                }
                if let Some(f) = self.fresh_list {
                    if f.node == id {
                        self.fresh_list = None;
                    }
                }
                push_val(&mut self.stack, Val::Node(NodeId(id)));
            }
            MEMO_ROW => push_val(&mut self.stack, Val::Row(RowId(id))),
            MEMO_EXT if x == MEMO_EXT => return Err(Halt::Ext(k)),
            _ => {
                let v = self.memo_get(k, at)?;
                push_val(&mut self.stack, v);
            }
        }
        Ok(())
    }

    /// GET of a key that is not an inline slot (see the fast path in [`Self::push_memo`]).
    #[inline(never)]
    pub(super) fn memo_get(&mut self, key: u64, at: u64) -> Result<Val, DecodeError> {
        let v = match self.memo.get(key) {
            Some(Ok(v)) => v,
            Some(Err((stack, again))) => {
                // A frames list given back comes back as a node holding its stack. The first
                // time it is fresh like a new list (an entry right after the one that gave it
                // back often shares it, and gives it back again); the second time it stays,
                // as a list shared by many entries is GET once an entry.
                let node = self.arena.nodes.len() as u32;
                let v = self.arena.push(Node::Stack(stack));
                self.memo.set(key, v);
                if !again {
                    self.fresh_list = Some(Fresh {
                        node,
                        memo_slot: Some(key),
                        again: true,
                    });
                }
                return Ok(v);
            }
            None => self
                .memo_sparse
                .get(&key)
                .copied()
                .ok_or(DecodeError::MissingMemo { key, offset: at })?,
        };
        self.unfresh(v);
        Ok(v)
    }

    #[inline]
    pub(super) fn memo_put(&mut self, key: u64, v: Val) {
        if let Val::Node(n) = v {
            for fresh in [&mut self.fresh, &mut self.fresh_list] {
                if let Some(f) = fresh.as_mut() {
                    if n.0 == f.node {
                        if f.memo_slot.is_none() {
                            f.memo_slot = Some(key);
                        } else {
                            *fresh = None;
                        }
                    }
                }
            }
        }
        let len = self.memo.len() as u64;
        if key < len {
            self.memo.set(key, v);
        } else if key == len {
            self.memo.push(v);
            // absorb sparse keys that became dense
            while !self.memo_sparse.is_empty() {
                match self.memo_sparse.remove(&(self.memo.len() as u64)) {
                    Some(n) => self.memo.push(n),
                    None => break,
                }
            }
        } else {
            self.memo_sparse.insert(key, v);
        }
    }
}
