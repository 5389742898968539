//! Container and stack opcodes: opening empty containers and MARK, building one from the items
//! above a mark, filling one (APPEND(S), ADDITEMS, SETITEM(S)), and POP, POP_MARK, DUP.
//!
//! EMPTY_DICT is where a trace entry starts: it tries the fast path (`entry`) first, and a dict
//! or list filled here may still become a trace row or stack and give its node back (`fresh`).

use super::fresh::{Fresh, EMPTY_LIST_NODE};
use super::opcodes::opcode_name;
use super::reader::{Reader, Step};
use super::stack::{push_node, push_val};
use super::PickleMachine;
use crate::raw::value::{Node, NodeId, Val};

impl PickleMachine {
    /// EMPTY_DICT: the trace-entry fast path where it applies, else a fresh dict node, memoized
    /// at once by the MEMOIZE or BINPUT that nearly always follows (done here, where the value
    /// is at hand, instead of reading it back from the stack).
    #[inline(always)]
    pub(super) fn empty_dict(&mut self, r: &mut Reader) -> Step {
        let buf = r.buf;
        if self.fast_entries && buf.get(r.pos..r.pos + 2) == Some(&[0x94, b'(']) {
            if let Some(end) = self.entry_fast(buf, r.pos + 2, r.base)? {
                r.pos = end;
                return Ok(());
            }
        }
        let node = self.open_dict();
        push_node(&mut self.stack, node);
        match buf.get(r.pos) {
            Some(0x94) => {
                r.pos += 1;
                let k = self.memo.len() as u64;
                self.memo_put(k, Val::Node(NodeId(node)));
            }
            Some(b'q') if r.pos + 1 < buf.len() => {
                let k = buf[r.pos + 1] as u64;
                r.pos += 2;
                self.memo_put(k, Val::Node(NodeId(node)));
            }
            _ => {}
        }
        Ok(())
    }

    /// EMPTY_LIST (a fresh list), EMPTY_TUPLE, EMPTY_SET (kept as a list) and MARK.
    #[inline(always)]
    pub(super) fn open(&mut self, op: u8) -> Step {
        match op {
            b']' => {
                let node = self.arena.nodes.len() as u32;
                self.arena.nodes.push(EMPTY_LIST_NODE);
                self.fresh_list = Some(Fresh {
                    node,
                    memo_slot: None,
                    again: false,
                });
                push_node(&mut self.stack, node);
            }
            b')' => {
                let v = self.arena.push(Node::Tuple(Box::new([])));
                push_val(&mut self.stack, v);
            }
            0x8f => {
                let v = self.arena.push(Node::List(Vec::new()));
                push_val(&mut self.stack, v);
            }
            _ /* MARK */ => self.marks.push(self.stack.len()),
        }
        Ok(())
    }

    /// LIST, FROZENSET (kept as a list), TUPLE, TUPLE1–3 and DICT: the items above the mark
    /// (or the top 1–3) replaced by one new container.
    #[inline(always)]
    pub(super) fn build(&mut self, op: u8, at: u64) -> Step {
        let v = match op {
            0x91 | b'l' => {
                let m = self.pop_mark(at, op)?;
                let items: Vec<Val> = self.stack.drain(m.min(self.stack.len())..).collect();
                let v = self.arena.push(Node::List(Vec::new()));
                self.arena
                    .list_extend(v, &items)
                    .map_err(|e| self.malformed(at, e))?;
                v
            }
            b't' => {
                let m = self.pop_mark(at, op)?;
                let items: Box<[Val]> = self.stack.drain(m.min(self.stack.len())..).collect();
                self.arena.push(Node::Tuple(items))
            }
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                let floor = self.marks.last().copied().unwrap_or(0);
                if self.stack.len() < floor + n {
                    let what = format!("{} on a short stack", opcode_name(op));
                    return Err(self.malformed(at, what).into());
                }
                let items: Box<[Val]> = self.stack.drain(self.stack.len() - n..).collect();
                self.arena.push(Node::Tuple(items))
            }
            _ /* DICT */ => {
                let m = self.pop_mark(at, op)?;
                let kv: Vec<Val> = self.stack.drain(m.min(self.stack.len())..).collect();
                if kv.len() % 2 != 0 {
                    return Err(self.malformed(at, "DICT with an odd number of items").into());
                }
                let v = self.arena.push(Node::Dict(Vec::new()));
                self.arena
                    .dict_set_items(v, &kv)
                    .map_err(|e| self.malformed(at, e))?;
                v
            }
        };
        push_val(&mut self.stack, v);
        Ok(())
    }

    /// APPEND, APPENDS and ADDITEMS (sets are kept as lists).
    #[inline(always)]
    pub(super) fn append(&mut self, op: u8, at: u64) -> Step {
        if op == b'a' {
            let item = self.pop(at, op)?;
            let list = self.top(at, op)?;
            self.arena
                .list_extend(list, &[item])
                .map_err(|e| self.malformed(at, e))?;
            return Ok(());
        }
        let m = self.pop_mark(at, op)?;
        if m == 0 || m > self.stack.len() {
            let what = if op == b'e' {
                "APPENDS without a list"
            } else {
                "ADDITEMS without a set"
            };
            return Err(self.malformed(at, what).into());
        }
        let list = self.stack[m - 1];
        self.arena
            .list_extend(list, &self.stack[m..])
            .map_err(|e| self.malformed(at, e))?;
        self.stack.truncate(m);
        Ok(())
    }

    /// SETITEM and SETITEMS, after which the dict may have become a trace row.
    #[inline(always)]
    pub(super) fn set_items(&mut self, op: u8, at: u64) -> Step {
        if op == b's' {
            let value = self.pop(at, op)?;
            let key = self.pop(at, op)?;
            let dict = self.top(at, op)?;
            self.arena
                .dict_set_items(dict, &[key, value])
                .map_err(|e| self.malformed(at, e))?;
            let pos = self.stack.len() - 1;
            self.settle_row(dict, pos);
            return Ok(());
        }
        let m = self.pop_mark(at, op)?;
        if m == 0 || m > self.stack.len() {
            return Err(self.malformed(at, "SETITEMS without a dict").into());
        }
        if (self.stack.len() - m) % 2 != 0 {
            return Err(self
                .malformed(at, "SETITEMS with an odd number of items")
                .into());
        }
        let dict = self.stack[m - 1];
        let list = self.frames_list_in(&self.stack[m..]);
        self.arena
            .dict_set_items(dict, &self.stack[m..])
            .map_err(|e| self.malformed(at, e))?;
        self.stack.truncate(m);
        if let Some(f) = list {
            self.drop_frames_list(f);
        }
        self.settle_row(dict, m - 1);
        Ok(())
    }

    /// POP (of the top value, or of a MARK right on top), POP_MARK and DUP.
    #[inline(always)]
    pub(super) fn stack_op(&mut self, op: u8, at: u64) -> Step {
        match op {
            b'0' => {
                if self.marks.last() == Some(&self.stack.len()) {
                    self.marks.pop();
                } else {
                    self.pop(at, op)?;
                }
            }
            b'1' => {
                let m = self.pop_mark(at, op)?;
                self.stack.truncate(m);
            }
            _ /* DUP */ => {
                let v = self.top(at, op)?;
                self.unfresh(v);
                push_val(&mut self.stack, v);
            }
        }
        Ok(())
    }
}
