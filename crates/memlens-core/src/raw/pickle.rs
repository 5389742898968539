//! The streaming pickle machine: reads protocols 0–5 as data only, in chunks of any size, without
//! recursion, keeping memo sharing as handles into the [`Arena`].
//!
//! It never imports or calls anything: GLOBAL, STACK_GLOBAL, REDUCE, BUILD, NEWOBJ(_EX), INST,
//! OBJ, PERSID, BINPERSID, EXT1/2/4 and out-of-band buffers (NEXT_BUFFER, READONLY_BUFFER) are
//! refused with the opcode's name and byte offset. Lengths from the input are checked against
//! the bytes that are really there before anything is allocated.

use super::value::{Arena, Node, Val};
use crate::error::DecodeError;
use rustc_hash::FxHashMap;

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
    memo: Vec<Val>,
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
}

#[derive(Debug, Clone, Copy)]
struct Fresh {
    node: u32,
    memo_slot: Option<u64>,
}

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
            memo: Vec::new(),
            memo_sparse: FxHashMap::default(),
            offset: 0,
            total_len: None,
            protocol: 0,
            result: None,
            fresh: None,
        }
    }

    /// Tells the machine how long the whole input is, so absurd length prefixes fail at once,
    /// and so that the trace columns can be sized for the rows the file holds (see
    /// [`Self::reserve_rows_ahead`]). The memo is sized for one memoized value per 96 bytes.
    pub fn set_total_len(&mut self, n: u64) {
        self.total_len = Some(n);
        self.memo.reserve((n / 96).min(1 << 26) as usize);
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

    #[inline]
    fn memo_get(&mut self, key: u64, at: u64) -> Result<Val, DecodeError> {
        let v = match self.memo.get(key as usize) {
            Some(v) => *v,
            None => self
                .memo_sparse
                .get(&key)
                .copied()
                .ok_or(DecodeError::MissingMemo { key, offset: at })?,
        };
        self.unfresh(v);
        Ok(v)
    }

    /// A second reference to the fresh dict exists: it must keep its node.
    fn unfresh(&mut self, v: Val) {
        if let (Some(f), Val::Node(n)) = (self.fresh, v) {
            if n.0 == f.node {
                self.fresh = None;
            }
        }
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
        self.arena.nodes.pop();
        self.fresh = None;
        if let Some(slot) = self.stack.get_mut(stack_pos) {
            *slot = Val::Row(r);
        }
        if let Some(k) = f.memo_slot {
            match self.memo.get_mut(k as usize) {
                Some(m) => *m = Val::Row(r),
                None => {
                    self.memo_sparse.insert(k, Val::Row(r));
                }
            }
        }
    }

    fn memo_put(&mut self, key: u64, v: Val) {
        if let (Some(f), Val::Node(n)) = (self.fresh.as_mut(), v) {
            if n.0 == f.node {
                if f.memo_slot.is_none() {
                    f.memo_slot = Some(key);
                } else {
                    self.fresh = None;
                }
            }
        }
        let len = self.memo.len() as u64;
        if key < len {
            self.memo[key as usize] = v;
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
                    let v = self.arena.push(Node::Dict(Vec::new()));
                    self.fresh = Some(Fresh {
                        node: self.arena.nodes.len() as u32 - 1,
                        memo_slot: None,
                    });
                    self.stack.push(v);
                }
                b']' => {
                    let v = self.arena.push(Node::List(Vec::new()));
                    self.stack.push(v);
                }
                b')' => {
                    let v = self.arena.push(Node::Tuple(Box::new([])));
                    self.stack.push(v);
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
                    let v = self.memo_get(k, at)?;
                    self.stack.push(v);
                }
                b'j' => {
                    let b = need!(start, 4, op);
                    let k = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64;
                    let v = self.memo_get(k, at)?;
                    self.stack.push(v);
                }
                b'g' => {
                    let l = line!(start, op);
                    let k = parse_dec_u64(l).ok_or_else(|| self.malformed(at, "bad GET key"))?;
                    let v = self.memo_get(k, at)?;
                    self.stack.push(v);
                }
                0x8c => {
                    let n = need!(start, 1, op)[0] as usize;
                    let s = need!(start, n, op);
                    let id = self.arena.strings.intern_bytes(s);
                    self.stack.push(Val::Str(id));
                }
                b'X' => {
                    let b = need!(start, 4, op);
                    let n = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64;
                    let s = need!(start, n, op);
                    let id = self.arena.strings.intern_bytes(s);
                    self.stack.push(Val::Str(id));
                }
                0x8d => {
                    let b = need!(start, 8, op);
                    let n = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                    let s = need!(start, n, op);
                    let id = self.arena.strings.intern_bytes(s);
                    self.stack.push(Val::Str(id));
                }
                b'V' => {
                    let l = line!(start, op);
                    let s = unescape_raw_unicode(l);
                    let id = self.arena.strings.intern(&s);
                    self.stack.push(Val::Str(id));
                }
                // Python 2 byte strings: kept as text (they only ever hold ASCII names here).
                b'U' => {
                    let n = need!(start, 1, op)[0] as usize;
                    let s = need!(start, n, op);
                    let id = self.arena.strings.intern_bytes(s);
                    self.stack.push(Val::Str(id));
                }
                b'T' => {
                    let b = need!(start, 4, op);
                    let n = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64;
                    let s = need!(start, n, op);
                    let id = self.arena.strings.intern_bytes(s);
                    self.stack.push(Val::Str(id));
                }
                b'S' => {
                    let l = line!(start, op);
                    let s = unquote_py_string(l)
                        .ok_or_else(|| self.malformed(at, "bad STRING literal"))?;
                    let id = self.arena.strings.intern_bytes(&s);
                    self.stack.push(Val::Str(id));
                }
                b'C' => {
                    let n = need!(start, 1, op)[0] as usize;
                    let s = need!(start, n, op).to_vec().into_boxed_slice();
                    let v = self.arena.push(Node::Bytes(s));
                    self.stack.push(v);
                }
                b'B' => {
                    let b = need!(start, 4, op);
                    let n = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64;
                    let s = need!(start, n, op).to_vec().into_boxed_slice();
                    let v = self.arena.push(Node::Bytes(s));
                    self.stack.push(v);
                }
                0x8e | 0x96 => {
                    let b = need!(start, 8, op);
                    let n = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                    let s = need!(start, n, op).to_vec().into_boxed_slice();
                    let v = self.arena.push(Node::Bytes(s));
                    self.stack.push(v);
                }
                b'K' => {
                    let b = need!(start, 1, op);
                    self.stack.push(Val::Int(b[0] as i64));
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
                    let v = self.long_bytes(b);
                    self.stack.push(v);
                }
                0x8b => {
                    let b = need!(start, 4, op);
                    let n = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    if n < 0 {
                        return Err(self.malformed(at, "LONG4 with a negative length"));
                    }
                    let b = need!(start, n as u64, op);
                    let v = self.long_bytes(b);
                    self.stack.push(v);
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
                    self.stack.push(v);
                }
                b'L' => {
                    let l = line!(start, op);
                    let l = l.strip_suffix(b"L").unwrap_or(l);
                    let v = self
                        .parse_text_int(l)
                        .ok_or_else(|| self.malformed(at, "bad LONG literal"))?;
                    self.stack.push(v);
                }
                b'F' => {
                    let l = line!(start, op);
                    let f = std::str::from_utf8(l)
                        .ok()
                        .and_then(|s| s.trim().parse::<f64>().ok())
                        .ok_or_else(|| self.malformed(at, "bad FLOAT literal"))?;
                    self.stack.push(Val::Float(f));
                }
                b'G' => {
                    let b = need!(start, 8, op);
                    let f = f64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                    self.stack.push(Val::Float(f));
                }
                b'N' => self.stack.push(Val::None),
                0x88 => self.stack.push(Val::Bool(true)),
                0x89 => self.stack.push(Val::Bool(false)),
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
                    self.stack.push(v);
                }
                0x91 | b'l' => {
                    let m = self.pop_mark(at, op)?;
                    let items: Vec<Val> = self.stack.drain(m.min(self.stack.len())..).collect();
                    let v = self.arena.push(Node::List(Vec::new()));
                    self.arena
                        .list_extend(v, &items)
                        .map_err(|e| self.malformed(at, e))?;
                    self.stack.push(v);
                }
                b't' => {
                    let m = self.pop_mark(at, op)?;
                    let items: Box<[Val]> = self.stack.drain(m.min(self.stack.len())..).collect();
                    let v = self.arena.push(Node::Tuple(items));
                    self.stack.push(v);
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
                    self.stack.push(v);
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
                    self.stack.push(v);
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
                    self.arena
                        .dict_set_items(dict, &self.stack[m..])
                        .map_err(|e| self.malformed(at, e))?;
                    self.stack.truncate(m);
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
                    self.stack.push(v);
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
