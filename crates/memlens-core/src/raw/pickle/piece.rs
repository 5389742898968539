//! One piece of a framed pickle decoded on its own, on any thread, before the pieces ahead of it
//! are done: what it cannot know is either deferred to the join or ends the piece early.
//!
//! - The memo: the piece's MEMOIZEs are numbered from its first key (counted by `split::scan`).
//!   A GET of an earlier key is resolved from the scan: a string by its bytes (exact: interned
//!   here, renumbered by content at the join); a new container becomes a [`Node::Ext`]
//!   standing for it (its frames and stacks too, see `raw::intern`), assumed to be a
//!   container that is not a trace row — the join checks that assumption against the real
//!   value and decodes the piece on one thread where it fails; anything else ends the piece.
//! - The stack: the piece starts on an unknown stack. Its own values and marks sit above it.
//!   APPEND(S)/ADDITEMS that reach below (the list, or the MARK, of a batch begun earlier) are
//!   deferred: the piece's stack and marks go with the opcode to the join, which pushes them
//!   on the real stack and runs the opcode there. Any other opcode reaching below (SETITEMS
//!   of an earlier dict, POP, MEMOIZE of an earlier value, STOP, ...) ends the piece before it.
//! - Changing an earlier container (reached by GET), or a container of this piece already handed
//!   to a deferred opcode, ends the piece too: the join then sees each as it was.
//!
//! Where a piece ends early, the joined machine goes on from there on one thread; nothing
//! the piece did after that point exists.

use super::memo::{Memo, MEMO_INLINE_MAX, MEMO_NODE, MEMO_STR, MEMO_TAG_BITS};
use super::reader::{Halt, Reader};
use super::split::{MemoKind, Scans};
use super::PickleMachine;
use crate::error::DecodeError;
use crate::raw::value::{Node, NodeId, Val};

/// What a piece decoded on its own knows of its place in the file.
#[derive(Debug, Default)]
pub(super) struct PieceState {
    /// Where the piece starts (absolute).
    pub start: u64,
    /// Memo keys below this are earlier pieces'.
    pub key_base: u64,
    /// Opcodes that reached below the piece's stack, in order.
    pub deferred: Vec<Deferred>,
    /// Nodes below this were handed to a deferred opcode: changing one ends the piece.
    pub frozen: u32,
    /// Earlier containers met (memo key, the [`Node::Ext`] standing for it).
    pub ext_nodes: Vec<(u64, u32)>,
}

/// An APPEND, APPENDS or ADDITEMS that reached below the piece's stack, with the piece's stack
/// and marks at that moment (both handed over: the piece goes on with none).
#[derive(Debug)]
pub(super) struct Deferred {
    pub op: u8,
    pub at: u64,
    pub stack: Vec<Val>,
    pub marks: Vec<usize>,
}

/// What to do with the next opcode of a piece.
enum Guard {
    Run,
    Defer,
    End,
}

impl PickleMachine {
    /// A machine for the piece starting at `start` (absolute), whose first memo key is
    /// `key_base`, of an input of `total_len` bytes.
    pub(super) fn for_piece(start: u64, key_base: u64, total_len: u64) -> PickleMachine {
        PickleMachine {
            offset: start,
            total_len: Some(total_len),
            memo: Memo::with_earlier_keys(key_base),
            piece: Some(Box::new(PieceState {
                start,
                key_base,
                ..PieceState::default()
            })),
            ..PickleMachine::default()
        }
    }

    /// Runs the piece `buf` (which starts at [`Self::offset`]) up to its end or to the first
    /// opcode it cannot run alone; [`Self::offset`] is then where the piece ended.
    pub(super) fn feed_piece(&mut self, buf: &[u8], scans: &Scans) -> Result<(), DecodeError> {
        let mut r = Reader::new(buf, self.offset, false, self.total_len);
        loop {
            if let Some(&op) = buf.get(r.pos) {
                match self.guard(op) {
                    Guard::Run => {}
                    Guard::Defer => {
                        let at = r.base + r.pos as u64;
                        r.pos += 1;
                        self.defer(op, at);
                        continue;
                    }
                    Guard::End => break,
                }
            }
            match self.step(&mut r) {
                Ok(()) => {}
                Err(Halt::Ext(key)) => {
                    r.pos = r.start;
                    if !self.resolve_ext(key, scans) {
                        break;
                    }
                }
                Err(Halt::Failed(e)) => return Err(e),
                Err(Halt::NeedMore | Halt::Stop) => {
                    r.pos = r.start;
                    break;
                }
            }
        }
        self.offset = r.base + r.pos as u64;
        Ok(())
    }

    /// Whether opcode `op` can run on the piece's own stack (see the module doc).
    fn guard(&self, op: u8) -> Guard {
        let len = self.stack.len();
        let mark = self.marks.last().copied();
        // With a mark of its own, an opcode sees only the piece's values, as it would in the
        // whole file (a short stack is the same error there).
        let has = |n: usize| mark.is_some() || len >= n;
        let ok = |b: bool| if b { Guard::Run } else { Guard::End };
        match op {
            b'a' => match (mark, len) {
                (Some(m), _) if len >= m + 2 => self.target_ok(len - 2),
                (Some(_), _) | (None, 2..) => ok(mark.is_some() || self.open_target(len - 2)),
                (None, 1) => Guard::Defer,
                (None, _) => Guard::End,
            },
            b'e' | 0x90 => match mark {
                Some(0) | None => Guard::Defer,
                Some(m) if m <= len => self.target_ok(m - 1),
                Some(_) => Guard::Run,
            },
            b's' => match mark {
                Some(m) if len >= m + 3 => self.target_ok(len - 3),
                Some(_) => Guard::Run,
                None if len >= 3 => self.target_ok(len - 3),
                None => Guard::End,
            },
            b'u' => match mark {
                Some(m) if m >= 1 && m <= len => self.target_ok(m - 1),
                _ => Guard::End,
            },
            b'd' | b'l' | b't' | 0x91 | b'1' => ok(mark.is_some()),
            0x85..=0x87 => ok(has((op - 0x84) as usize)),
            b'0' => ok(mark == Some(len) || has(1)),
            0x94 | b'2' => ok(has(1)),
            b'q' | b'r' | b'p' | b'.' | 0x80 => Guard::End,
            _ => Guard::Run,
        }
    }

    /// Whether the container at stack position `i` may be changed here: one of this piece's
    /// own, not handed to a deferred opcode.
    fn target_ok(&self, i: usize) -> Guard {
        match self.open_target(i) {
            true => Guard::Run,
            false => Guard::End,
        }
    }

    fn open_target(&self, i: usize) -> bool {
        let frozen = self.piece.as_ref().map_or(0, |p| p.frozen);
        match self.stack.get(i) {
            Some(&Val::Node(NodeId(n))) => {
                n >= frozen && !matches!(self.arena.nodes.get(n as usize), Some(Node::Ext { .. }))
            }
            _ => true,
        }
    }

    /// Hands the piece's stack and marks to a deferred opcode (see [`Deferred`]).
    fn defer(&mut self, op: u8, at: u64) {
        let stack = std::mem::take(&mut self.stack);
        let marks = std::mem::take(&mut self.marks);
        self.fresh = None;
        self.fresh_list = None;
        let frozen = self.arena.nodes.len() as u32;
        if let Some(p) = self.piece.as_mut() {
            p.frozen = frozen;
            p.deferred.push(Deferred {
                op,
                at,
                stack,
                marks,
            });
        }
    }

    /// Gives earlier memo key `key` a value here, from the scan; `false` where it cannot.
    fn resolve_ext(&mut self, key: u64, scans: &Scans) -> bool {
        let (id, tag) = match scans.kind(key) {
            MemoKind::Str(b) => (self.arena.strings.intern_bytes(b).0, MEMO_STR),
            MemoKind::Container => {
                let node = self.arena.nodes.len() as u32;
                self.arena.nodes.push(Node::Ext {
                    key,
                    stack: None,
                    frame: None,
                });
                if let Some(p) = self.piece.as_mut() {
                    p.ext_nodes.push((key, node));
                }
                (node, MEMO_NODE)
            }
            MemoKind::Other => return false,
        };
        if id >= MEMO_INLINE_MAX {
            return false;
        }
        self.memo.set_earlier(key, id << MEMO_TAG_BITS | tag);
        true
    }
}
