//! The streaming pickle machine: reads protocols 0–5 as data only, in chunks of any size, without
//! recursion, keeping memo sharing as handles into the [`Arena`].
//!
//! It never imports or calls anything: GLOBAL, STACK_GLOBAL, REDUCE, BUILD, NEWOBJ(_EX), INST,
//! OBJ, PERSID, BINPERSID, EXT1/2/4 and out-of-band buffers (NEXT_BUFFER, READONLY_BUFFER) are
//! refused with the opcode's name and byte offset. Lengths from the input are checked against
//! the bytes that are really there before anything is allocated.
//!
//! [`PickleMachine::feed`] is the opcode loop: one dispatch on the opcode to a method of its
//! group, each group in a file of its own under `pickle/`:
//! - `reader`: the chunk's cursor, which hands out operands and stops the loop ([`Progress`]
//!   `NeedMore`) before an opcode that runs past the chunk;
//! - `scalars` (with `text`, protocol 0's text operands): opcodes that push a constant;
//! - `containers` (with `stack`, the value stack and marks): containers, marks, POP and DUP;
//! - `memo_ops` (with `memo`, its 4-byte storage): PUT and GET;
//! - `entry`: the trace-entry fast path, tried at EMPTY_DICT; `fresh`: nodes given back once
//!   a dict became a trace row or a list its stack;
//! - here: framing, STOP and the refused opcodes; `opcodes`: opcode names for errors;
//! - `prefix`: which trace rows each device has so far, read off the stack mid-file (the
//!   viewer's picture while a file loads);
//! - parallel decoding of one framed pickle (`parallel`): `split` (where to cut, what each
//!   piece memoizes), `piece` (a piece decoded on its own), `join` (a piece brought into the
//!   machine that ran everything before it).

use crate::error::DecodeError;
use crate::raw::value::{Arena, Val};
use fresh::Fresh;
use memo::Memo;
use opcodes::opcode_name;
use reader::{Halt, Reader, Step};
use rustc_hash::FxHashMap;

mod containers;
mod entry;
mod fresh;
mod join;
mod memo;
mod memo_ops;
mod opcodes;
pub mod parallel;
mod piece;
mod prefix;
mod reader;
mod scalars;
pub mod split;
mod stack;
mod text;

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
    /// Set while the machine decodes one piece of a file on its own (`piece`).
    piece: Option<Box<piece::PieceState>>,
}

impl Default for PickleMachine {
    fn default() -> Self {
        Self::new(Arena::default())
    }
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
            piece: None,
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
            self.arena.reserve_rows_exact((want - rows) as usize);
        }
    }

    /// Memory the decoder holds, counted from its tables' lengths (see
    /// [`Arena::held_bytes`]), and the memo slots' part of it.
    pub fn held_bytes(&self) -> (u64, u64) {
        let memo = (self.memo.slots.len() * std::mem::size_of::<u32>()) as u64;
        (self.arena.held_bytes() + memo, memo)
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

    /// Runs opcodes over `buf` (whose first byte is at absolute offset [`Self::offset`]).
    /// With `eof`, an incomplete opcode is an error; otherwise the machine stops before it.
    pub fn feed(&mut self, buf: &[u8], eof: bool) -> Result<Progress, DecodeError> {
        if self.result.is_some() {
            return Ok(Progress::Done(0));
        }
        self.reserve_rows_ahead(buf.len());
        let mut r = Reader::new(buf, self.offset, eof, self.total_len);
        loop {
            match self.step(&mut r) {
                Ok(()) => {}
                Err(Halt::NeedMore) => {
                    self.offset = r.at();
                    return Ok(Progress::NeedMore(r.start));
                }
                Err(Halt::Stop) => {
                    self.offset = r.base + r.pos as u64;
                    return Ok(Progress::Done(r.pos));
                }
                Err(Halt::Failed(e)) => return Err(e),
                // (Only a piece's memo has keys of earlier pieces: see `piece`.)
                Err(Halt::Ext(key)) => {
                    return Err(DecodeError::MissingMemo {
                        key,
                        offset: r.at(),
                    })
                }
            }
        }
    }

    /// Runs the next opcode: the dispatch to its group.
    #[inline(always)]
    fn step(&mut self, r: &mut Reader) -> Step {
        let op = r.next_op()?;
        let at = r.at();
        match op {
            0x80 | 0x95 => self.framing(op, r),
            b'.' => self.stop(at),
            b'}' => self.empty_dict(r),
            b']' | b')' | 0x8f | b'(' => self.open(op),
            0x91 | b'l' | b't' | 0x85..=0x87 | b'd' => self.build(op, at),
            b'a' | b'e' | 0x90 => self.append(op, at),
            b's' | b'u' => self.set_items(op, at),
            b'0' | b'1' | b'2' => self.stack_op(op, at),
            0x94 | b'q' | b'r' | b'p' => self.put_op(op, r),
            b'h' | b'j' | b'g' => self.get_op(op, r),
            b'K' | b'M' | b'J' | 0x8a | 0x8b | b'G' | b'N' | 0x88 | 0x89 => {
                self.push_binary_scalar(op, r)
            }
            0x8c | b'X' | 0x8d | b'U' | b'T' => self.push_binary_string(op, r),
            b'C' | b'B' | 0x8e | 0x96 => self.push_bytes(op, r),
            b'I' | b'L' | b'F' | b'V' | b'S' => self.push_text(op, r),
            _ => Err(refused(op, at).into()),
        }
    }

    /// PROTO (checked) and FRAME (a framing hint: its length is skipped).
    #[inline(always)]
    fn framing(&mut self, op: u8, r: &mut Reader) -> Step {
        if op == 0x95 {
            r.need(8)?;
            return Ok(());
        }
        let p = r.u8()?;
        if p > 5 {
            return Err(DecodeError::UnsupportedProtocol {
                protocol: p,
                offset: r.at(),
            }
            .into());
        }
        self.protocol = p;
        Ok(())
    }

    /// STOP: the top of the stack is the result.
    #[inline(always)]
    fn stop(&mut self, at: u64) -> Step {
        let v = self.pop(at, b'.')?;
        self.result = Some(v);
        Err(Halt::Stop)
    }
}

/// The error for an opcode the machine does not run: those that would import or call code
/// (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, NEWOBJ(_EX), INST, OBJ, PERSID, BINPERSID, EXT1/2/4)
/// or need out-of-band buffers (NEXT_BUFFER, READONLY_BUFFER) are refused by name; anything
/// else is unknown.
#[cold]
fn refused(op: u8, at: u64) -> DecodeError {
    match op {
        b'c' | 0x93 | b'R' | b'b' | 0x81 | 0x92 | b'i' | b'o' | b'P' | b'Q' | 0x82 | 0x83
        | 0x84 | 0x97 | 0x98 => DecodeError::RefusedOpcode {
            name: opcode_name(op),
            opcode: op,
            offset: at,
        },
        _ => DecodeError::UnknownOpcode {
            opcode: op,
            offset: at,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::scalars::le_i64;
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
                crate::trace::Action::from_name(action),
                "{pairs:?}"
            );
            assert_eq!(rows.addr[0], addr, "{pairs:?}");
            assert_eq!(arena.odd_values, odd, "{pairs:?}");
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
                true => crate::trace::StackId::EMPTY,
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
        assert_eq!(arena.odd_values, 0);
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
