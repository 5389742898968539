//! The trace-entry fast path: a whole `EMPTY_DICT MEMOIZE MARK key value ... SETITEMS` read in
//! one go, without the opcode loop's stack and dispatch.
//!
//! A snapshot is millions of trace entries, each about twenty opcodes of a few simple kinds
//! (GET, small ints, short strings, a `frames` list of GETs). [`PickleMachine::entry_fast`] reads
//! them ahead without changing anything: values known at once go straight into the items, the
//! rest become tokens ([`Tok`]). Where it meets anything else (another opcode, the end of the
//! chunk) it gives up and the opcode loop reads the entry as before. Otherwise the tokens are
//! applied in file order with the same calls the opcode loop makes (memo puts, string
//! interning, memo gets, SETITEMS with its row and node hand-back), so the machine ends in the
//! state the opcode loop would leave. A test decodes every fixture and real snapshot both ways
//! and compares.

use super::fresh::Fresh;
use super::memo::{MEMO_EXT, MEMO_NODE, MEMO_ROW, MEMO_STR, MEMO_TAG_BITS, MEMO_TAG_MASK};
use super::scalars::le_i64;
use super::stack::push_val;
use super::PickleMachine;
use crate::error::DecodeError;
use crate::raw::value::{Node, NodeId, RowId, Val};
use crate::trace::StrId;

/// Most tokens (keys and values) an entry may have to take the fast path.
const MAX_TOKS: usize = 32;

/// A key or value of an entry read ahead whose value is known only once it is applied.
/// Positions are in the buffer being fed. (Scalars, and GETs whose slot holds a string or a
/// row, have no side effect: they go straight into the items.)
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Tok {
    /// SHORT_BINUNICODE / BINUNICODE of `buf[start..end]`, memoized after when `memo`.
    Str {
        start: usize,
        end: usize,
        memo: bool,
    },
    /// Any other GET: resolved when applied (it may bring back a frames list).
    Get { key: u64, at: usize },
    /// A fresh list of GETs of containers (a `frames` list): `ids[from..to]`.
    List { from: usize, to: usize, memo: bool },
}

impl PickleMachine {
    /// At `buf[p]`, just past `EMPTY_DICT MEMOIZE MARK`: reads the entry through its SETITEMS and returns the position after it, or `None` (nothing
    /// changed) where the fast path does not apply.
    pub(super) fn entry_fast(
        &mut self,
        buf: &[u8],
        p: usize,
        base: u64,
    ) -> Result<Option<usize>, DecodeError> {
        let mut toks = std::mem::take(&mut self.fast_toks);
        let mut ids = std::mem::take(&mut self.fast_ids);
        toks.clear();
        ids.clear();
        let mut kv = [Val::None; MAX_TOKS];
        let r = match self.scan_entry(buf, p, &mut kv, &mut toks, &mut ids) {
            Some((end, n, setitems_at)) => self
                .apply_entry(buf, &mut kv[..n], &toks, &ids, base, setitems_at)
                .map(|()| Some(end)),
            None => Ok(None),
        };
        self.fast_toks = toks;
        self.fast_ids = ids;
        r
    }

    /// Reads items up to SETITEMS without side effects: each into `kv`, where its value is
    /// known now, else into `toks` (with its index). `Some((position after SETITEMS, item
    /// count, position of SETITEMS))`, or `None` to leave the entry to the opcode loop.
    fn scan_entry(
        &self,
        buf: &[u8],
        mut q: usize,
        kv: &mut [Val; MAX_TOKS],
        toks: &mut Vec<(usize, Tok)>,
        ids: &mut Vec<u32>,
    ) -> Option<(usize, usize, usize)> {
        let mut n = 0usize;
        loop {
            let at = q;
            let op = *buf.get(q)?;
            q += 1;
            // GETs are most items (every key, most values): tested first, ahead of the jump
            // table the other opcodes take.
            let key = if op == b'j' {
                q += 4;
                Some(u32_at(buf, q - 4)? as u64)
            } else if op == b'h' {
                q += 1;
                Some(*buf.get(q - 1)? as u64)
            } else {
                None
            };
            if let Some(k) = key {
                if n == MAX_TOKS {
                    return None;
                }
                let x = self.memo.slot(k);
                let id = x >> MEMO_TAG_BITS;
                match x & MEMO_TAG_MASK {
                    MEMO_STR => kv[n] = Val::Str(StrId(id)),
                    MEMO_ROW => kv[n] = Val::Row(RowId(id)),
                    // A key of an earlier piece: the opcode loop resolves it.
                    MEMO_EXT if x == MEMO_EXT => return None,
                    // A container GET has a side effect only on the fresh list (the fresh dict
                    // is created after every node a slot names), so any other is read now.
                    MEMO_NODE if self.fresh_list.is_none_or(|f| f.node != id) => {
                        kv[n] = Val::Node(NodeId(id))
                    }
                    _ => toks.push((n, Tok::Get { key: k, at })),
                }
                n += 1;
                continue;
            }
            let tok = match op {
                b'u' => break,
                b'K' => {
                    let b = *buf.get(q)?;
                    q += 1;
                    Ok(Val::Int(b as i64))
                }
                b'M' => {
                    let b = buf.get(q..q + 2)?;
                    q += 2;
                    Ok(Val::Int(u16::from_le_bytes([b[0], b[1]]) as i64))
                }
                b'J' => {
                    let v = u32_at(buf, q)? as i32;
                    q += 4;
                    Ok(Val::Int(v as i64))
                }
                0x8a => {
                    let n = *buf.get(q)? as usize;
                    if n > 8 {
                        return None;
                    }
                    let b = buf.get(q + 1..q + 1 + n)?;
                    q += 1 + n;
                    Ok(Val::Int(le_i64(b)))
                }
                b'N' => Ok(Val::None),
                0x88 => Ok(Val::Bool(true)),
                0x89 => Ok(Val::Bool(false)),
                b'G' => {
                    let b = buf.get(q..q + 8)?;
                    q += 8;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(b);
                    Ok(Val::Float(f64::from_be_bytes(a)))
                }
                0x8c | b'X' => {
                    let (n, head) = match op {
                        0x8c => (*buf.get(q)? as usize, 1),
                        _ => (u32_at(buf, q)? as usize, 4),
                    };
                    let start = q + head;
                    let end = start.checked_add(n)?;
                    if end > buf.len() {
                        return None;
                    }
                    q = end;
                    let memo = buf.get(q) == Some(&0x94);
                    q += memo as usize;
                    Err(Tok::Str { start, end, memo })
                }
                b']' => {
                    let memo = buf.get(q) == Some(&0x94);
                    q += memo as usize;
                    if buf.get(q) != Some(&b'(') {
                        return None;
                    }
                    q += 1;
                    let from = ids.len();
                    loop {
                        let k = match *buf.get(q)? {
                            b'h' => {
                                q += 2;
                                *buf.get(q - 1)? as u64
                            }
                            b'j' => {
                                q += 5;
                                u32_at(buf, q - 4)? as u64
                            }
                            b'e' => {
                                q += 1;
                                break;
                            }
                            _ => return None,
                        };
                        let x = self.memo.slot(k);
                        if x & MEMO_TAG_MASK != MEMO_NODE {
                            return None;
                        }
                        ids.push(x >> MEMO_TAG_BITS);
                    }
                    // An empty list stays a plain list; a list starting with a row becomes a
                    // row range (see `Arena::list_extend`): both left to the opcode loop.
                    let first = *ids.get(from)?;
                    if matches!(self.arena.nodes.get(first as usize), Some(Node::Row(_))) {
                        return None;
                    }
                    Err(Tok::List {
                        from,
                        to: ids.len(),
                        memo,
                    })
                }
                // FRAME: a framing hint between any two opcodes, nothing to do.
                0x95 => {
                    buf.get(q..q + 8)?;
                    q += 8;
                    continue;
                }
                _ => return None,
            };
            if n == MAX_TOKS {
                return None;
            }
            match tok {
                Ok(v) => kv[n] = v,
                Err(t) => toks.push((n, t)),
            }
            n += 1;
        }
        // (An odd count is an error the opcode loop reports.)
        (n % 2 == 0).then_some((q, n, q - 1))
    }

    /// Applies the tokens of an entry in file order, as the opcode loop would.
    fn apply_entry(
        &mut self,
        buf: &[u8],
        kv: &mut [Val],
        toks: &[(usize, Tok)],
        ids: &[u32],
        base: u64,
        setitems_at: usize,
    ) -> Result<(), DecodeError> {
        // The common entry: every item a scalar, a known string or container, or a new string.
        // If it becomes a row, the steps below come to this: its dict node pushed, memoized,
        // turned into the row and given back, the row memoized in its place and on the stack,
        // the strings interned and memoized in order (`new_row` does not touch the memo or
        // the fresh list, and with no list or container GET among the items, nothing else
        // does). Where it does not become a row, `new_row` changed nothing.
        if toks.iter().all(|(_, t)| matches!(t, Tok::Str { .. })) {
            for &(i, t) in toks {
                if let Tok::Str { start, end, .. } = t {
                    kv[i] = Val::Str(self.arena.strings.intern_bytes(&buf[start..end]));
                }
            }
            if let Some(r) = self.arena.new_row(kv) {
                self.fresh = None;
                let row = Val::Row(RowId(r));
                let k = self.memo.len() as u64;
                self.memo_put(k, row);
                for &(i, t) in toks {
                    if let Tok::Str { memo: true, .. } = t {
                        let k = self.memo.len() as u64;
                        self.memo_put(k, kv[i]);
                    }
                }
                push_val(&mut self.stack, row);
                return Ok(());
            }
        }
        // EMPTY_DICT MEMOIZE
        let node = self.open_dict();
        let dict = Val::Node(NodeId(node));
        let k = self.memo.len() as u64;
        self.memo_put(k, dict);
        let frames = Val::Str(self.arena.keys.frames);
        for &(i, t) in toks {
            kv[i] = match t {
                Tok::Str { start, end, memo } => {
                    let v = Val::Str(self.arena.strings.intern_bytes(&buf[start..end]));
                    if memo {
                        let k = self.memo.len() as u64;
                        self.memo_put(k, v);
                    }
                    v
                }
                Tok::Get { key, at } => self.get_val(key, base + at as u64)?,
                Tok::List { from, to, memo } => {
                    let items = &ids[from..to];
                    let list = self.arena.nodes.len() as u32;
                    // The `frames` list of an entry that becomes a row is interned by SETITEMS
                    // right after; interning it here saves building the list.
                    let n = if i % 2 == 1 && kv[i - 1] == frames && self.becomes_row(kv, toks) {
                        Node::Stack(self.arena.intern_ids(items))
                    } else {
                        Node::NodeList(items.to_vec())
                    };
                    self.arena.nodes.push(n);
                    self.fresh_list = Some(Fresh {
                        node: list,
                        memo_slot: None,
                        again: false,
                    });
                    let v = Val::Node(NodeId(list));
                    if memo {
                        let k = self.memo.len() as u64;
                        self.memo_put(k, v);
                    }
                    v
                }
            };
        }
        // SETITEMS
        let kv = &*kv;
        let list = self.frames_list_in(kv);
        self.arena
            .dict_set_items(dict, kv)
            .map_err(|e| self.malformed(base + setitems_at as u64, e))?;
        if let Some(f) = list {
            self.drop_frames_list(f);
        }
        push_val(&mut self.stack, dict);
        let pos = self.stack.len() - 1;
        self.settle_row(dict, pos);
        Ok(())
    }

    /// Whether the entry surely becomes a trace row: an `action` key already known, with a
    /// string value.
    fn becomes_row(&self, kv: &[Val], toks: &[(usize, Tok)]) -> bool {
        let action = Val::Str(self.arena.keys.action);
        kv.chunks_exact(2).enumerate().any(|(j, p)| {
            p[0] == action
                && (matches!(p[1], Val::Str(_))
                    || toks
                        .iter()
                        .any(|(i, t)| *i == 2 * j + 1 && matches!(t, Tok::Str { .. })))
        })
    }

    /// GET of `key` as a value (what the opcode loop's `push_memo` pushes).
    fn get_val(&mut self, key: u64, at: u64) -> Result<Val, DecodeError> {
        let x = self.memo.slot(key);
        let id = x >> MEMO_TAG_BITS;
        match x & MEMO_TAG_MASK {
            MEMO_STR => Ok(Val::Str(StrId(id))),
            MEMO_ROW => Ok(Val::Row(RowId(id))),
            MEMO_NODE => {
                let v = Val::Node(NodeId(id));
                self.unfresh(v);
                Ok(v)
            }
            _ => self.memo_get(key, at),
        }
    }
}

fn u32_at(buf: &[u8], q: usize) -> Option<u32> {
    match buf.get(q..q + 4)? {
        &[a, b, c, d] => Some(u32::from_le_bytes([a, b, c, d])),
        _ => None,
    }
}
