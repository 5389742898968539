//! The streaming pickle machine: reads protocols 0–5 as data only, in chunks of any size, without
//! recursion, keeping memo sharing as handles into the [`Arena`].
//!
//! It never imports or calls anything: GLOBAL, STACK_GLOBAL, REDUCE, BUILD, NEWOBJ(_EX), INST,
//! OBJ, PERSID, BINPERSID, EXT1/2/4 and out-of-band buffers (NEXT_BUFFER, READONLY_BUFFER) are
//! refused with the opcode's name and byte offset. Lengths from the input are checked against
//! the bytes that are really there before anything is allocated.

use super::strings::StrId;
use super::value::{Arena, Node, NodeId, RowId, Val};
use crate::error::DecodeError;
use crate::model::StackId;
use rustc_hash::FxHashMap;

mod entry;

/// Result of feeding bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Consumed this many bytes of the buffer; feed the rest again with more data appended.
    NeedMore(usize),
    /// STOP reached after this many bytes of the buffer; the value is in [`PickleMachine::result`].
    Done(usize),
}

/// Resumable pickle virtual machine.
pub struct PickleMachine {
    pub arena: Arena,
    stack: Vec<Val>,
    marks: Vec<usize>,
    memo: Memo,
    memo_sparse: FxHashMap<u64, Val>,
    /// Absolute offset of the next unread byte.
    offset: u64,
    total_len: Option<u64>,
    pub protocol: u8,
    result: Option<Val>,
    /// The dict opened by the last EMPTY_DICT while nothing else may refer to it: if it becomes
    /// a trace row, its node is given back (saves a node per trace entry). Only EMPTY_DICT puts
    /// it on the stack; a second reference can only come from the memo (GET) or DUP, which clear
    /// it. Once stored into a container it has left the stack and can no longer be a SETITEM(S)
    /// target, so no scan of container items is needed.
    fresh: Option<Fresh>,
    /// The list opened by the last EMPTY_LIST, under the same rule as `fresh`: if it becomes
    /// an entry's `frames`, its node is given back too (see [`Self::drop_frames_list`]).
    fresh_list: Option<Fresh>,
    /// Whether trace entries take the fast path ([`Self::entry_fast`]); off only in the test
    /// that compares both paths.
    pub fast_entries: bool,
    fast_toks: Vec<(usize, entry::Tok)>,
    fast_ids: Vec<u32>,
}

/// The dense memo (keys `0..len`), 4 bytes a value: a real snapshot memoizes every trace
/// entry, so a 16-byte [`Val`] per key was a fifth of the memory a decode touches. A row, node,
/// string or stack id below 2^29 is held inline with a 3-bit tag; anything else (scalars, which
/// pickle never memoizes itself, and huge ids) goes to `wide`, named by its index, or past
/// 2^29 - 1 wide values (not possible below a 512 MiB file) to `overflow` by key. A stack
/// slot is a `frames` list whose node was given back (see [`PickleMachine::drop_frames_list`]).
#[derive(Default)]
struct Memo {
    slots: Vec<u32>,
    wide: Vec<Val>,
    overflow: FxHashMap<u64, Val>,
}

const MEMO_ROW: u32 = 0;
const MEMO_NODE: u32 = 1;
const MEMO_STR: u32 = 2;
const MEMO_STACK: u32 = 3;
const MEMO_WIDE: u32 = 4;
/// A stack slot whose list was already brought back once (the next GET keeps the node).
const MEMO_STACK_AGAIN: u32 = 5;
const MEMO_TAG_BITS: u32 = 3;
const MEMO_TAG_MASK: u32 = (1 << MEMO_TAG_BITS) - 1;
const MEMO_INLINE_MAX: u32 = 1 << (32 - MEMO_TAG_BITS);
const MEMO_OVERFLOW: u32 = (MEMO_INLINE_MAX - 1) << MEMO_TAG_BITS | MEMO_WIDE;

impl Memo {
    #[inline]
    fn len(&self) -> usize {
        self.slots.len()
    }

    #[inline]
    fn encode(&mut self, key: u64, v: Val) -> u32 {
        let (tag, id) = match v {
            Val::Row(r) => (MEMO_ROW, r.0),
            Val::Node(n) => (MEMO_NODE, n.0),
            Val::Str(s) => (MEMO_STR, s.0),
            _ => (MEMO_WIDE, MEMO_INLINE_MAX),
        };
        if id < MEMO_INLINE_MAX {
            return id << MEMO_TAG_BITS | tag;
        }
        self.encode_wide(key, v)
    }

    #[cold]
    #[inline(never)]
    fn encode_wide(&mut self, key: u64, v: Val) -> u32 {
        let i = self.wide.len() as u32;
        if i < MEMO_INLINE_MAX - 1 {
            self.wide.push(v);
            i << MEMO_TAG_BITS | MEMO_WIDE
        } else {
            self.overflow.insert(key, v);
            MEMO_OVERFLOW
        }
    }

    /// The raw slot of `key` (`MEMO_WIDE` where there is none: the slow path then looks).
    #[inline(always)]
    fn slot(&self, key: u64) -> u32 {
        self.slots.get(key as usize).copied().unwrap_or(MEMO_WIDE)
    }

    /// The value of `key`; a stack slot is `Err((stack id, given back before))`.
    fn get(&self, key: u64) -> Option<Result<Val, (StackId, bool)>> {
        let x = *self.slots.get(key as usize)?;
        let id = x >> MEMO_TAG_BITS;
        Some(Ok(match x & MEMO_TAG_MASK {
            MEMO_STR => Val::Str(StrId(id)),
            MEMO_NODE => Val::Node(NodeId(id)),
            MEMO_ROW => Val::Row(RowId(id)),
            MEMO_STACK => return Some(Err((StackId(id), false))),
            MEMO_STACK_AGAIN => return Some(Err((StackId(id), true))),
            _ if x == MEMO_OVERFLOW => return self.overflow.get(&key).copied().map(Ok),
            _ => return self.wide.get(id as usize).copied().map(Ok),
        }))
    }

    /// Whether `key` holds node `id` (the raw slot compared, where the id is inline).
    #[inline]
    fn holds_node(&self, key: u64, id: u32) -> bool {
        if id < MEMO_INLINE_MAX {
            self.slots.get(key as usize) == Some(&(id << MEMO_TAG_BITS | MEMO_NODE))
        } else {
            self.get(key) == Some(Ok(Val::Node(NodeId(id))))
        }
    }

    /// Makes existing key `key` a stack slot; `false` where the id does not fit inline.
    fn set_stack(&mut self, key: u64, s: StackId, again: bool) -> bool {
        let tag = if again { MEMO_STACK_AGAIN } else { MEMO_STACK };
        match self.slots.get_mut(key as usize) {
            Some(slot) if s.0 < MEMO_INLINE_MAX => {
                *slot = s.0 << MEMO_TAG_BITS | tag;
                true
            }
            _ => false,
        }
    }

    /// Sets an existing key (`key < len`).
    #[inline]
    fn set(&mut self, key: u64, v: Val) {
        let x = self.encode(key, v);
        if let Some(slot) = self.slots.get_mut(key as usize) {
            *slot = x;
        }
    }

    /// Sets key `len`.
    #[inline]
    fn push(&mut self, v: Val) {
        let x = self.encode(self.slots.len() as u64, v);
        self.slots.push(x);
    }
}

#[derive(Debug, Clone, Copy)]
struct Fresh {
    node: u32,
    memo_slot: Option<u64>,
    /// A list brought back from a stack slot.
    again: bool,
}

/// `stack.push(v)` with the growth out of line and cold (-1 % instructions on a real trace).
#[inline(always)]
fn push_val(stack: &mut Vec<Val>, v: Val) {
    if stack.len() == stack.capacity() {
        grow_stack(stack);
    }
    stack.push(v);
}

/// `push_val(stack, Val::Node(id))`, out of line: inlined, the compiler assembles the value
/// in a temporary and copies it whole, a store-forwarding stall on every EMPTY_DICT (perf:
/// ~10 % of the opcode loop); here the tag and id are stored straight into the slot.
#[inline(never)]
fn push_node(stack: &mut Vec<Val>, id: u32) {
    push_val(stack, Val::Node(NodeId(id)));
}

#[cold]
#[inline(never)]
fn grow_stack(stack: &mut Vec<Val>) {
    stack.reserve(stack.len().max(64));
}

/// Pushed by EMPTY_DICT (a constant, so the node is not assembled in a temporary first).
const EMPTY_DICT_NODE: Node = Node::Dict(Vec::new());
const EMPTY_LIST_NODE: Node = Node::List(Vec::new());

impl Default for PickleMachine {
    fn default() -> Self {
        Self::new(Arena::default())
    }
}

fn opcode_name(op: u8) -> &'static str {
    match op {
        b'c' => "GLOBAL",
        0x93 => "STACK_GLOBAL",
        b'R' => "REDUCE",
        b'b' => "BUILD",
        0x81 => "NEWOBJ",
        0x92 => "NEWOBJ_EX",
        b'i' => "INST",
        b'o' => "OBJ",
        b'P' => "PERSID",
        b'Q' => "BINPERSID",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        b'(' => "MARK",
        b'.' => "STOP",
        b'0' => "POP",
        b'1' => "POP_MARK",
        b'2' => "DUP",
        b'F' => "FLOAT",
        b'I' => "INT",
        b'J' => "BININT",
        b'K' => "BININT1",
        b'L' => "LONG",
        b'M' => "BININT2",
        b'N' => "NONE",
        b'S' => "STRING",
        b'T' => "BINSTRING",
        b'U' => "SHORT_BINSTRING",
        b'V' => "UNICODE",
        b'X' => "BINUNICODE",
        b'a' => "APPEND",
        b'd' => "DICT",
        b'}' => "EMPTY_DICT",
        b'e' => "APPENDS",
        b'g' => "GET",
        b'h' => "BINGET",
        b'j' => "LONG_BINGET",
        b'l' => "LIST",
        b']' => "EMPTY_LIST",
        b'p' => "PUT",
        b'q' => "BINPUT",
        b'r' => "LONG_BINPUT",
        b's' => "SETITEM",
        b't' => "TUPLE",
        b')' => "EMPTY_TUPLE",
        b'u' => "SETITEMS",
        b'G' => "BINFLOAT",
        0x80 => "PROTO",
        0x85 => "TUPLE1",
        0x86 => "TUPLE2",
        0x87 => "TUPLE3",
        0x88 => "NEWTRUE",
        0x89 => "NEWFALSE",
        0x8a => "LONG1",
        0x8b => "LONG4",
        b'B' => "BINBYTES",
        b'C' => "SHORT_BINBYTES",
        0x8c => "SHORT_BINUNICODE",
        0x8d => "BINUNICODE8",
        0x8e => "BINBYTES8",
        0x8f => "EMPTY_SET",
        0x90 => "ADDITEMS",
        0x91 => "FROZENSET",
        0x94 => "MEMOIZE",
        0x95 => "FRAME",
        0x96 => "BYTEARRAY8",
        _ => "unknown opcode",
    }
}

/// Sign-extends little-endian two's complement bytes (≤ 8) to i64. Shifts rather than a copy
/// into a buffer: in wasm a variable-length copy is a call to `memcpy`.
#[inline]
fn le_i64(b: &[u8]) -> i64 {
    let n = b.len().min(8);
    let mut v = 0u64;
    for (i, &x) in b.iter().take(8).enumerate() {
        v |= (x as u64) << (8 * i);
    }
    if n > 0 && n < 8 && b[n - 1] & 0x80 != 0 {
        v |= u64::MAX << (8 * n);
    }
    v as i64
}

impl PickleMachine {
    pub fn new(arena: Arena) -> Self {
        PickleMachine {
            arena,
            stack: Vec::with_capacity(1024),
            marks: Vec::with_capacity(64),
            memo: Memo::default(),
            memo_sparse: FxHashMap::default(),
            offset: 0,
            total_len: None,
            protocol: 0,
            result: None,
            fresh: None,
            fresh_list: None,
            fast_entries: true,
            fast_toks: Vec::with_capacity(32),
            fast_ids: Vec::with_capacity(256),
        }
    }

    /// Tells the machine how long the whole input is, so absurd length prefixes fail at once,
    /// and so that the trace columns can be sized for the rows the file holds (see
    /// [`Self::reserve_rows_ahead`]). The memo is sized for one memoized value per 96 bytes.
    pub fn set_total_len(&mut self, n: u64) {
        self.total_len = Some(n);
        self.memo.slots.reserve((n / 96).min(1 << 26) as usize);
    }

    /// Keeps the trace columns' capacity ahead of the rows the rest of the file will bring,
    /// projected from the rows per byte so far (+10 %), so that they grow a few times by exact
    /// amounts instead of doubling: in wasm, where memory never shrinks, a doubling leaves a
    /// peak of up to 3× the columns (measured: 316 MB of worker memory for a 197 MB file).
    /// Checked before each chunk of `chunk_len` bytes, which must fit in what is left.
    fn reserve_rows_ahead(&mut self, chunk_len: usize) {
        let Some(total) = self.total_len else { return };
        let rows = self.arena.rows.len() as u64;
        let done = self.offset.max(1);
        if rows < 1024 {
            return;
        }
        // Rows the coming chunk may bring, with margin, at the density seen so far.
        let next = rows.saturating_mul(chunk_len as u64 * 2) / done + 1024;
        let cap = self.arena.rows.capacity() as u64;
        if cap.saturating_sub(rows) >= next {
            return;
        }
        let projected = rows.saturating_mul(total) / done;
        let want = (projected + projected / 10).max(rows + next).min(1 << 28);
        if want > cap {
            self.arena.rows.reserve_exact((want - rows) as usize);
        }
    }

    pub fn offset(&self) -> u64 {
        self.offset
    }

    pub fn result(&self) -> Option<Val> {
        self.result
    }

    /// Decodes one whole pickle held in memory.
    pub fn decode_all(bytes: &[u8]) -> Result<(Arena, Val, u8), DecodeError> {
        let mut m = PickleMachine::default();
        m.set_total_len(bytes.len() as u64);
        match m.feed(bytes, true)? {
            Progress::Done(_) => {}
            Progress::NeedMore(_) => return Err(DecodeError::NoStop { offset: m.offset }),
        }
        let v = m.result.ok_or(DecodeError::NoStop { offset: m.offset })?;
        Ok((m.arena, v, m.protocol))
    }

    fn malformed(&self, at: u64, what: impl Into<String>) -> DecodeError {
        DecodeError::Malformed {
            offset: at,
            what: what.into(),
        }
    }

    fn pop(&mut self, at: u64, op: u8) -> Result<Val, DecodeError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.malformed(at, format!("{} on an empty stack", opcode_name(op))));
        }
        self.stack
            .pop()
            .ok_or_else(|| self.malformed(at, "stack underflow"))
    }

    fn pop_mark(&mut self, at: u64, op: u8) -> Result<usize, DecodeError> {
        self.marks
            .pop()
            .ok_or_else(|| self.malformed(at, format!("{} without a MARK", opcode_name(op))))
    }

    /// GET of a key that is not an inline slot (see the `get!` fast path in [`Self::feed`]).
    #[inline(never)]
    fn memo_get(&mut self, key: u64, at: u64) -> Result<Val, DecodeError> {
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

    /// A second reference to the fresh dict or list exists: it must keep its node.
    fn unfresh(&mut self, v: Val) {
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
    fn frames_list_in(&self, kv: &[Val]) -> Option<Fresh> {
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
    fn drop_frames_list(&mut self, f: Fresh) {
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
    fn settle_row(&mut self, dict: Val, stack_pos: usize) {
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
    fn open_dict(&mut self) -> u32 {
        let node = self.arena.nodes.len() as u32;
        self.arena.nodes.push(EMPTY_DICT_NODE);
        self.fresh = Some(Fresh {
            node,
            memo_slot: None,
            again: false,
        });
        node
    }

    #[inline]
    fn memo_put(&mut self, key: u64, v: Val) {
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

    fn top(&self, at: u64, op: u8) -> Result<Val, DecodeError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.malformed(at, format!("{} on an empty stack", opcode_name(op))));
        }
        self.stack
            .last()
            .copied()
            .ok_or_else(|| self.malformed(at, "empty stack"))
    }

    /// Runs opcodes over `buf` (whose first byte is at absolute offset [`Self::offset`]).
    /// With `eof`, an incomplete opcode is an error; otherwise the machine stops before it.
    pub fn feed(&mut self, buf: &[u8], eof: bool) -> Result<Progress, DecodeError> {
        if self.result.is_some() {
            return Ok(Progress::Done(0));
        }
        self.reserve_rows_ahead(buf.len());
        let base = self.offset;
        let mut pos = 0usize;
        macro_rules! need {
            ($start:expr, $n:expr, $op:expr) => {{
                let n: u64 = $n as u64;
                if (buf.len() - pos) as u64 >= n {
                    let s = &buf[pos..pos + n as usize];
                    pos += n as usize;
                    s
                } else {
                    if let Some(total) = self.total_len {
                        if (base + pos as u64).saturating_add(n) > total {
                            if n > 8 {
                                return Err(DecodeError::AbsurdLength {
                                    len: n,
                                    offset: base + $start as u64,
                                });
                            }
                            return Err(DecodeError::Truncated {
                                offset: base + buf.len() as u64,
                                opcode: opcode_name($op),
                            });
                        }
                    }
                    if eof {
                        return Err(DecodeError::Truncated {
                            offset: base + buf.len() as u64,
                            opcode: opcode_name($op),
                        });
                    }
                    self.offset = base + $start as u64;
                    return Ok(Progress::NeedMore($start));
                }
            }};
        }
        macro_rules! line {
            ($start:expr, $op:expr) => {{
                match buf[pos..].iter().position(|&c| c == b'\n') {
                    Some(i) => {
                        let s = &buf[pos..pos + i];
                        pos += i + 1;
                        s
                    }
                    None => {
                        if eof {
                            return Err(DecodeError::Truncated {
                                offset: base + buf.len() as u64,
                                opcode: opcode_name($op),
                            });
                        }
                        self.offset = base + $start as u64;
                        return Ok(Progress::NeedMore($start));
                    }
                }
            }};
        }
        // GET: each tag pushes its own value, straight from the 4-byte slot (no `Val` temporary).
        macro_rules! get {
            ($k:expr, $at:expr) => {{
                let k: u64 = $k;
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
                    _ => {
                        let v = self.memo_get(k, $at)?;
                        push_val(&mut self.stack, v);
                    }
                }
            }};
        }
        loop {
            let start = pos;
            let at = base + start as u64;
            if pos >= buf.len() {
                self.offset = base + pos as u64;
                if eof {
                    return Err(DecodeError::NoStop { offset: at });
                }
                return Ok(Progress::NeedMore(pos));
            }
            let op = buf[pos];
            pos += 1;
            match op {
                0x80 => {
                    let p = need!(start, 1, op)[0];
                    if p > 5 {
                        return Err(DecodeError::UnsupportedProtocol {
                            protocol: p,
                            offset: at,
                        });
                    }
                    self.protocol = p;
                }
                0x95 => {
                    need!(start, 8, op);
                }
                b'(' => self.marks.push(self.stack.len()),
                b'.' => {
                    let v = self.pop(at, op)?;
                    self.result = Some(v);
                    self.offset = base + pos as u64;
                    return Ok(Progress::Done(pos));
                }
                b'}' => {
                    if self.fast_entries && buf.get(pos..pos + 2) == Some(&[0x94, b'(']) {
                        if let Some(end) = self.entry_fast(buf, pos + 2, base)? {
                            pos = end;
                            continue;
                        }
                    }
                    let node = self.open_dict();
                    push_node(&mut self.stack, node);
                    // Nearly every dict is memoized at once: done here, where the value is at
                    // hand, instead of reading it back from the stack.
                    match buf.get(pos) {
                        Some(0x94) => {
                            pos += 1;
                            let k = self.memo.len() as u64;
                            self.memo_put(k, Val::Node(NodeId(node)));
                        }
                        Some(b'q') if pos + 1 < buf.len() => {
                            let k = buf[pos + 1] as u64;
                            pos += 2;
                            self.memo_put(k, Val::Node(NodeId(node)));
                        }
                        _ => {}
                    }
                }
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
                0x94 => {
                    let v = self.top(at, op)?;
                    let k = self.memo.len() as u64;
                    self.memo_put(k, v);
                }
                b'q' => {
                    let k = need!(start, 1, op)[0] as u64;
                    let v = self.top(at, op)?;
                    self.memo_put(k, v);
                }
                b'r' => {
                    let b = need!(start, 4, op);
                    let k = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64;
                    let v = self.top(at, op)?;
                    self.memo_put(k, v);
                }
                b'p' => {
                    let l = line!(start, op);
                    let k = parse_dec_u64(l).ok_or_else(|| self.malformed(at, "bad PUT key"))?;
                    let v = self.top(at, op)?;
                    self.memo_put(k, v);
                }
                b'h' => {
                    let k = need!(start, 1, op)[0] as u64;
                    get!(k, at);
                }
                b'j' => {
                    let b = need!(start, 4, op);
                    let k = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64;
                    get!(k, at);
                }
                b'g' => {
                    let l = line!(start, op);
                    let k = parse_dec_u64(l).ok_or_else(|| self.malformed(at, "bad GET key"))?;
                    get!(k, at);
                }
                0x8c => {
                    let n = need!(start, 1, op)[0] as usize;
                    let s = need!(start, n, op);
                    let id = self.arena.strings.intern_bytes(s);
                    push_val(&mut self.stack, Val::Str(id));
                }
                b'X' => {
                    let b = need!(start, 4, op);
                    let n = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64;
                    let s = need!(start, n, op);
                    let id = self.arena.strings.intern_bytes(s);
                    push_val(&mut self.stack, Val::Str(id));
                }
                0x8d => {
                    let b = need!(start, 8, op);
                    let n = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                    let s = need!(start, n, op);
                    let id = self.arena.strings.intern_bytes(s);
                    push_val(&mut self.stack, Val::Str(id));
                }
                b'V' => {
                    let l = line!(start, op);
                    let s = unescape_raw_unicode(l);
                    let id = self.arena.strings.intern(&s);
                    push_val(&mut self.stack, Val::Str(id));
                }
                // Python 2 byte strings: kept as text (they only ever hold ASCII names here).
                b'U' => {
                    let n = need!(start, 1, op)[0] as usize;
                    let s = need!(start, n, op);
                    let id = self.arena.strings.intern_bytes(s);
                    push_val(&mut self.stack, Val::Str(id));
                }
                b'T' => {
                    let b = need!(start, 4, op);
                    let n = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64;
                    let s = need!(start, n, op);
                    let id = self.arena.strings.intern_bytes(s);
                    push_val(&mut self.stack, Val::Str(id));
                }
                b'S' => {
                    let l = line!(start, op);
                    let s = unquote_py_string(l)
                        .ok_or_else(|| self.malformed(at, "bad STRING literal"))?;
                    let id = self.arena.strings.intern_bytes(&s);
                    push_val(&mut self.stack, Val::Str(id));
                }
                b'C' => {
                    let n = need!(start, 1, op)[0] as usize;
                    let s = need!(start, n, op).to_vec().into_boxed_slice();
                    let v = self.arena.push(Node::Bytes(s));
                    push_val(&mut self.stack, v);
                }
                b'B' => {
                    let b = need!(start, 4, op);
                    let n = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64;
                    let s = need!(start, n, op).to_vec().into_boxed_slice();
                    let v = self.arena.push(Node::Bytes(s));
                    push_val(&mut self.stack, v);
                }
                0x8e | 0x96 => {
                    let b = need!(start, 8, op);
                    let n = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                    let s = need!(start, n, op).to_vec().into_boxed_slice();
                    let v = self.arena.push(Node::Bytes(s));
                    push_val(&mut self.stack, v);
                }
                b'K' => {
                    let b = need!(start, 1, op);
                    push_val(&mut self.stack, Val::Int(b[0] as i64));
                }
                b'M' => {
                    let b = need!(start, 2, op);
                    self.stack
                        .push(Val::Int(u16::from_le_bytes([b[0], b[1]]) as i64));
                }
                b'J' => {
                    let b = need!(start, 4, op);
                    self.stack
                        .push(Val::Int(i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64));
                }
                0x8a => {
                    let n = need!(start, 1, op)[0] as usize;
                    let b = need!(start, n, op);
                    // Two push sites, so the common one stores the int straight from registers.
                    if b.len() <= 8 {
                        push_val(&mut self.stack, Val::Int(le_i64(b)));
                    } else {
                        let v = self.long_bytes_big(b);
                        push_val(&mut self.stack, v);
                    }
                }
                0x8b => {
                    let b = need!(start, 4, op);
                    let n = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    if n < 0 {
                        return Err(self.malformed(at, "LONG4 with a negative length"));
                    }
                    let b = need!(start, n as u64, op);
                    let v = self.long_bytes(b);
                    push_val(&mut self.stack, v);
                }
                b'I' => {
                    let l = line!(start, op);
                    let v = match l {
                        b"01" => Val::Bool(true),
                        b"00" => Val::Bool(false),
                        _ => self
                            .parse_text_int(l)
                            .ok_or_else(|| self.malformed(at, "bad INT literal"))?,
                    };
                    push_val(&mut self.stack, v);
                }
                b'L' => {
                    let l = line!(start, op);
                    let l = l.strip_suffix(b"L").unwrap_or(l);
                    let v = self
                        .parse_text_int(l)
                        .ok_or_else(|| self.malformed(at, "bad LONG literal"))?;
                    push_val(&mut self.stack, v);
                }
                b'F' => {
                    let l = line!(start, op);
                    let f = std::str::from_utf8(l)
                        .ok()
                        .and_then(|s| s.trim().parse::<f64>().ok())
                        .ok_or_else(|| self.malformed(at, "bad FLOAT literal"))?;
                    push_val(&mut self.stack, Val::Float(f));
                }
                b'G' => {
                    let b = need!(start, 8, op);
                    let f = f64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                    push_val(&mut self.stack, Val::Float(f));
                }
                b'N' => push_val(&mut self.stack, Val::None),
                0x88 => push_val(&mut self.stack, Val::Bool(true)),
                0x89 => push_val(&mut self.stack, Val::Bool(false)),
                b'a' => {
                    let item = self.pop(at, op)?;
                    let list = self.top(at, op)?;
                    self.arena
                        .list_extend(list, &[item])
                        .map_err(|e| self.malformed(at, e))?;
                }
                b'e' => {
                    let m = self.pop_mark(at, op)?;
                    if m == 0 || m > self.stack.len() {
                        return Err(self.malformed(at, "APPENDS without a list"));
                    }
                    let list = self.stack[m - 1];
                    self.arena
                        .list_extend(list, &self.stack[m..])
                        .map_err(|e| self.malformed(at, e))?;
                    self.stack.truncate(m);
                }
                0x90 => {
                    // ADDITEMS: sets are kept as lists
                    let m = self.pop_mark(at, op)?;
                    if m == 0 || m > self.stack.len() {
                        return Err(self.malformed(at, "ADDITEMS without a set"));
                    }
                    let set = self.stack[m - 1];
                    self.arena
                        .list_extend(set, &self.stack[m..])
                        .map_err(|e| self.malformed(at, e))?;
                    self.stack.truncate(m);
                }
                0x8f => {
                    let v = self.arena.push(Node::List(Vec::new()));
                    push_val(&mut self.stack, v);
                }
                0x91 | b'l' => {
                    let m = self.pop_mark(at, op)?;
                    let items: Vec<Val> = self.stack.drain(m.min(self.stack.len())..).collect();
                    let v = self.arena.push(Node::List(Vec::new()));
                    self.arena
                        .list_extend(v, &items)
                        .map_err(|e| self.malformed(at, e))?;
                    push_val(&mut self.stack, v);
                }
                b't' => {
                    let m = self.pop_mark(at, op)?;
                    let items: Box<[Val]> = self.stack.drain(m.min(self.stack.len())..).collect();
                    let v = self.arena.push(Node::Tuple(items));
                    push_val(&mut self.stack, v);
                }
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    let floor = self.marks.last().copied().unwrap_or(0);
                    if self.stack.len() < floor + n {
                        return Err(
                            self.malformed(at, format!("{} on a short stack", opcode_name(op)))
                        );
                    }
                    let items: Box<[Val]> = self.stack.drain(self.stack.len() - n..).collect();
                    let v = self.arena.push(Node::Tuple(items));
                    push_val(&mut self.stack, v);
                }
                b'd' => {
                    let m = self.pop_mark(at, op)?;
                    let kv: Vec<Val> = self.stack.drain(m.min(self.stack.len())..).collect();
                    if kv.len() % 2 != 0 {
                        return Err(self.malformed(at, "DICT with an odd number of items"));
                    }
                    let v = self.arena.push(Node::Dict(Vec::new()));
                    self.arena
                        .dict_set_items(v, &kv)
                        .map_err(|e| self.malformed(at, e))?;
                    push_val(&mut self.stack, v);
                }
                b's' => {
                    let value = self.pop(at, op)?;
                    let key = self.pop(at, op)?;
                    let dict = self.top(at, op)?;
                    self.arena
                        .dict_set_items(dict, &[key, value])
                        .map_err(|e| self.malformed(at, e))?;
                    let pos = self.stack.len() - 1;
                    self.settle_row(dict, pos);
                }
                b'u' => {
                    let m = self.pop_mark(at, op)?;
                    if m == 0 || m > self.stack.len() {
                        return Err(self.malformed(at, "SETITEMS without a dict"));
                    }
                    if (self.stack.len() - m) % 2 != 0 {
                        return Err(self.malformed(at, "SETITEMS with an odd number of items"));
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
                }
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
                b'2' => {
                    let v = self.top(at, op)?;
                    self.unfresh(v);
                    push_val(&mut self.stack, v);
                }
                b'c' | 0x93 | b'R' | b'b' | 0x81 | 0x92 | b'i' | b'o' | b'P' | b'Q' | 0x82
                | 0x83 | 0x84 | 0x97 | 0x98 => {
                    return Err(DecodeError::RefusedOpcode {
                        name: opcode_name(op),
                        opcode: op,
                        offset: at,
                    });
                }
                _ => {
                    return Err(DecodeError::UnknownOpcode {
                        opcode: op,
                        offset: at,
                    })
                }
            }
        }
    }

    #[inline]
    fn long_bytes(&mut self, b: &[u8]) -> Val {
        if b.len() <= 8 {
            Val::Int(le_i64(b))
        } else {
            self.long_bytes_big(b)
        }
    }

    /// LONG1/LONG4 payload of more than 8 bytes.
    #[inline(never)]
    fn long_bytes_big(&mut self, b: &[u8]) -> Val {
        // Shrink redundant sign bytes so small values stay inline.
        let neg = b.last().is_some_and(|&x| x & 0x80 != 0);
        let mut n = b.len();
        let fill = if neg { 0xff } else { 0 };
        while n > 8 && b[n - 1] == fill && (b[n - 2] & 0x80 != 0) == neg {
            n -= 1;
        }
        if n <= 8 {
            Val::Int(le_i64(&b[..n]))
        } else {
            self.arena.push(Node::BigInt(b.to_vec().into_boxed_slice()))
        }
    }

    fn parse_text_int(&mut self, l: &[u8]) -> Option<Val> {
        let s = std::str::from_utf8(l).ok()?.trim();
        if let Ok(i) = s.parse::<i64>() {
            return Some(Val::Int(i));
        }
        let i = s.parse::<i128>().ok()?;
        Some(
            self.arena
                .push(Node::BigInt(i.to_le_bytes().to_vec().into_boxed_slice())),
        )
    }
}

fn parse_dec_u64(l: &[u8]) -> Option<u64> {
    std::str::from_utf8(l).ok()?.trim().parse().ok()
}

/// Protocol 0 UNICODE: raw-unicode-escape (only `\uXXXX` and `\UXXXXXXXX` are escapes).
fn unescape_raw_unicode(l: &[u8]) -> String {
    let mut out = String::with_capacity(l.len());
    let mut i = 0;
    while i < l.len() {
        if l[i] == b'\\' && i + 1 < l.len() && (l[i + 1] == b'u' || l[i + 1] == b'U') {
            let w = if l[i + 1] == b'u' { 4 } else { 8 };
            if let Some(hex) = l.get(i + 2..i + 2 + w) {
                if let Some(c) = std::str::from_utf8(hex)
                    .ok()
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .and_then(char::from_u32)
                {
                    out.push(c);
                    i += 2 + w;
                    continue;
                }
            }
        }
        out.push(l[i] as char);
        i += 1;
    }
    out
}

/// Protocol 0 STRING: a quoted Python literal with backslash escapes.
fn unquote_py_string(l: &[u8]) -> Option<Vec<u8>> {
    let q = *l.first()?;
    if !(q == b'\'' || q == b'"') || l.len() < 2 || *l.last()? != q {
        return None;
    }
    let body = &l[1..l.len() - 1];
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        let c = body[i];
        if c == b'\\' && i + 1 < body.len() {
            let e = body[i + 1];
            i += 2;
            match e {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'\\' => out.push(b'\\'),
                b'\'' => out.push(b'\''),
                b'"' => out.push(b'"'),
                b'x' => {
                    let h = body.get(i..i + 2)?;
                    out.push(u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?);
                    i += 2;
                }
                _ => {
                    out.push(b'\\');
                    out.push(e);
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::le_i64;
    use super::{PickleMachine, Val};
    use crate::raw::value::Node;

    /// Protocol-2 pickle of `body` (opcodes after PROTO, before STOP).
    fn p2(body: &[u8]) -> Vec<u8> {
        let mut v = vec![0x80, 2];
        v.extend_from_slice(body);
        v.push(b'.');
        v
    }

    fn short_str(s: &str) -> Vec<u8> {
        let mut v = vec![0x8c, s.len() as u8];
        v.extend_from_slice(s.as_bytes());
        v
    }

    #[test]
    fn memoized_scalars_and_overwritten_keys_come_back() {
        // [5, 5.5, None, 5, 5.5, None, "x", "x"] with each scalar PUT and then GET, and key 0
        // overwritten from a list to a string.
        let mut b = vec![b']', b'q', 0, b'('];
        b.extend_from_slice(&[b'K', 5, b'q', 1]);
        b.extend_from_slice(&[b'G', 0x40, 0x16, 0, 0, 0, 0, 0, 0, b'q', 2]);
        b.extend_from_slice(&[b'N', b'q', 3]);
        b.extend_from_slice(&[b'h', 1, b'h', 2, b'h', 3]);
        b.extend_from_slice(&short_str("x"));
        b.extend_from_slice(&[b'q', 0, b'h', 0, b'e']);
        let (arena, top, _) = PickleMachine::decode_all(&p2(&b)).unwrap_or_else(|e| panic!("{e}"));
        let items: Vec<Val> = arena.seq(top).map(|i| i.collect()).unwrap_or_default();
        let x = arena.strings.lookup("x").map(Val::Str);
        assert_eq!(
            items,
            [
                Val::Int(5),
                Val::Float(5.5),
                Val::None,
                Val::Int(5),
                Val::Float(5.5),
                Val::None,
                x.unwrap_or(Val::None),
                x.unwrap_or(Val::None),
            ]
        );
    }

    /// `{keys[i]: values[i]}` as EMPTY_DICT MEMOIZE MARK ... SETITEMS, in a list.
    fn entry_list(pairs: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = vec![b']', 0x94, b'}', 0x94, b'('];
        for (k, v) in pairs {
            b.extend_from_slice(&short_str(k));
            b.extend_from_slice(v);
        }
        b.extend_from_slice(b"ua");
        p2(&b)
    }

    #[test]
    fn entries_with_repeated_keys_read_like_a_python_dict_write() {
        let alloc = short_str("alloc");
        let free = short_str("free_completed");
        let q = short_str("?");
        type Case<'a> = (Vec<(&'a str, &'a [u8])>, &'a str, u64, u64);
        let cases: Vec<Case> = vec![
            // plain
            (
                vec![
                    ("action", &alloc),
                    ("addr", &[b'K', 7]),
                    ("size", &[b'K', 9]),
                ],
                "alloc",
                7,
                0,
            ),
            // a repeated field: the last value wins, odd values are counted where they occur
            (
                vec![
                    ("action", &alloc),
                    ("addr", &[b'K', 7]),
                    ("addr", &[0x88]),
                    ("addr", &[b'K', 8]),
                ],
                "alloc",
                8,
                0,
            ),
            (
                vec![("addr", b"N"), ("action", &alloc), ("addr", &q)],
                "alloc",
                0,
                1,
            ),
            // a repeated action whose last value is not a string keeps the string
            (
                vec![("action", &free), ("action", &[b'K', 1])],
                "free_completed",
                0,
                0,
            ),
        ];
        for (pairs, action, addr, odd) in cases {
            let (arena, top, _) =
                PickleMachine::decode_all(&entry_list(&pairs)).unwrap_or_else(|e| panic!("{e}"));
            let rows = &arena.rows;
            assert_eq!(rows.len(), 1, "{pairs:?}");
            assert_eq!(
                rows.action[0],
                crate::model::Action::from_name(action),
                "{pairs:?}"
            );
            assert_eq!(rows.addr[0], addr, "{pairs:?}");
            assert_eq!(rows.odd_values, odd, "{pairs:?}");
            assert!(matches!(
                arena.node(top),
                Some(Node::RowRange { start: 0, end: 1 })
            ));
        }
    }

    #[test]
    fn entry_extras_are_kept_in_file_order() {
        let b = entry_list(&[
            ("category", &short_str("c")),
            ("action", &short_str("oom")),
            ("device_free", &[b'K', 3]),
            ("time_us", &[b'K', 4]),
        ]);
        let (arena, _, _) = PickleMachine::decode_all(&b).unwrap_or_else(|e| panic!("{e}"));
        let c = arena.strings.lookup("c").unwrap_or_default();
        assert_eq!(
            arena.rows.extras,
            [
                (0, crate::raw::RowExtra::Category(c)),
                (0, crate::raw::RowExtra::DeviceFree(3)),
            ]
        );
        assert_eq!(arena.rows.time_us[0], 4);
    }

    /// `[{action: "alloc", frames: [frame]} x entries]` as torch writes it, where `frames` is a
    /// fresh list (`fresh`), or a GET of the first entry's list.
    fn entries_with_frames(fresh: &[bool], reuse_key: bool) -> Vec<u8> {
        let mut b = vec![b']', b'q', 0];
        // memo 1: the frame dict, 2: "action", 3: "alloc", 4: "frames", 5: the first list
        b.extend_from_slice(&[b'}', b'q', 1, b'(']);
        for (k, v) in [("filename", "f.py"), ("name", "g")] {
            b.extend_from_slice(&short_str(k));
            b.extend_from_slice(&short_str(v));
        }
        b.extend_from_slice(b"u0");
        for (i, &new_list) in fresh.iter().enumerate() {
            b.extend_from_slice(&[b'}', 0x94, b'(']);
            if i == 0 {
                b.extend_from_slice(&short_str("action"));
                b.extend_from_slice(&[b'q', 2]);
                b.extend_from_slice(&short_str("alloc"));
                b.extend_from_slice(&[b'q', 3]);
                b.extend_from_slice(&short_str("frames"));
                b.extend_from_slice(&[b'q', 4]);
            } else {
                b.extend_from_slice(&[b'h', 2, b'h', 3, b'h', 4]);
            }
            if new_list {
                let key = if i == 0 { 5 } else { 6 };
                b.extend_from_slice(&[b']', b'q', key, b'h', 1, b'a']);
                if i == 0 && reuse_key {
                    // key 5 now names something else: the list must not take it back
                    b.extend_from_slice(&[b'N', b'q', 5, b'0']);
                }
            } else {
                b.extend_from_slice(&[b'h', 5]);
            }
            b.extend_from_slice(b"ua");
        }
        p2(&b)
    }

    #[test]
    fn frames_lists_given_back_are_found_again_by_memo() {
        // (entries with a fresh list or not, key of the first list reused, nodes left)
        for (fresh, reuse, nodes) in [
            // the third GET of a list keeps its node, and so its entry's dict node
            (&[true, false, false][..], false, 4),
            (&[true, true, false, true][..], false, 2),
            (&[true, false][..], true, 2),
        ] {
            let b = entries_with_frames(fresh, reuse);
            let (arena, top, _) = PickleMachine::decode_all(&b).unwrap_or_else(|e| panic!("{e}"));
            let rows = &arena.rows.stack;
            assert_eq!(rows.len(), fresh.len());
            assert_eq!(arena.stack_interner.stacks.get(rows[0]).len(), 1);
            let want = |i: usize| match reuse && i > 0 {
                true => crate::model::StackId::EMPTY,
                false => rows[0],
            };
            assert!(
                rows.iter().enumerate().all(|(i, &s)| s == want(i)),
                "{fresh:?}: {rows:?}"
            );
            assert!(matches!(arena.node(top), Some(Node::RowRange { .. })));
            assert_eq!(arena.nodes.len(), nodes, "{fresh:?}: {:?}", arena.nodes);
        }
    }

    #[test]
    fn a_dict_without_an_action_string_stays_a_dict() {
        let b = entry_list(&[("action", &[b'K', 1]), ("addr", &short_str("x"))]);
        let (arena, top, _) = PickleMachine::decode_all(&b).unwrap_or_else(|e| panic!("{e}"));
        assert!(arena.rows.is_empty());
        assert_eq!(arena.rows.odd_values, 0);
        let d = arena
            .seq(top)
            .and_then(|mut i| i.next())
            .unwrap_or(Val::None);
        assert_eq!(arena.dict_items(d).map(|i| i.len()), Some(2));
    }

    #[test]
    fn little_endian_ints_sign_extend_like_python() {
        // int.from_bytes(b, 'little', signed=True), as pickle's LONG1 means it.
        let cases: &[(&[u8], i64)] = &[
            (&[], 0),
            (&[0x7f], 127),
            (&[0x80], -128),
            (&[0xff], -1),
            (&[0x00, 0x80], -32768),
            (&[0xff, 0x00], 255),
            (
                &[0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x87],
                -0x0078_f9fa_fbfc_fdff,
            ),
            (&[0xff; 8], -1),
            (&[0, 0, 0, 0, 0, 0, 0, 0x80], i64::MIN),
            (&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f], i64::MAX),
        ];
        for &(b, want) in cases {
            assert_eq!(le_i64(b), want, "{b:02x?}");
        }
    }
}
