//! The memo's storage: 4 bytes a key, with the common handles (rows, nodes, strings, stacks)
//! inline under a 3-bit tag. The opcodes that put and get are in `memo_ops`.

use crate::raw::value::{NodeId, RowId, Val};
use crate::trace::StackId;
use crate::trace::StrId;
use rustc_hash::FxHashMap;

/// The dense memo (keys `0..len`), 4 bytes a value: a real snapshot memoizes every trace
/// entry, so a 16-byte [`Val`] per key was a fifth of the memory a decode touches. A row, node,
/// string or stack id below 2^29 is held inline with a 3-bit tag; anything else (scalars, which
/// pickle never memoizes itself, and huge ids) goes to `wide`, named by its index, or past
/// 2^29 - 1 wide values (not possible below a 512 MiB file) to `overflow` by key. A stack
/// slot is a `frames` list whose node was given back (see [`PickleMachine::drop_frames_list`]).
///
/// A piece decoded on its own (`piece`) numbers its keys from `base`: the slots hold keys
/// `base..len`, and the earlier keys in `earlier`: zeroed memory ([`MEMO_EXT`]) that is never
/// grown, so only its pages a piece writes (the keys it resolved) ever cost memory.
#[derive(Default)]
pub(super) struct Memo {
    pub slots: Vec<u32>,
    wide: Vec<Val>,
    overflow: FxHashMap<u64, Val>,
    base: u64,
    earlier: Vec<u32>,
}

/// A key of an earlier piece not looked at yet (parallel decoding only, see `piece`): a
/// zeroed slot, so a piece's memo costs nothing for the keys it never reads.
pub(super) const MEMO_EXT: u32 = 0;
pub(super) const MEMO_ROW: u32 = 6;
pub(super) const MEMO_NODE: u32 = 1;
pub(super) const MEMO_STR: u32 = 2;
pub(super) const MEMO_STACK: u32 = 3;
pub(super) const MEMO_WIDE: u32 = 4;
/// A stack slot whose list was already brought back once (the next GET keeps the node).
pub(super) const MEMO_STACK_AGAIN: u32 = 5;
pub(super) const MEMO_TAG_BITS: u32 = 3;
pub(super) const MEMO_TAG_MASK: u32 = (1 << MEMO_TAG_BITS) - 1;
pub(super) const MEMO_INLINE_MAX: u32 = 1 << (32 - MEMO_TAG_BITS);
pub(super) const MEMO_OVERFLOW: u32 = (MEMO_INLINE_MAX - 1) << MEMO_TAG_BITS | MEMO_WIDE;

impl Memo {
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.base as usize + self.slots.len()
    }

    /// The index of `key` in `slots` (`usize::MAX` for an earlier key).
    #[inline(always)]
    fn index(&self, key: u64) -> usize {
        key.checked_sub(self.base)
            .map_or(usize::MAX, |i| i as usize)
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
    pub(super) fn slot(&self, key: u64) -> u32 {
        match key.checked_sub(self.base) {
            Some(i) => self.slots.get(i as usize).copied().unwrap_or(MEMO_WIDE),
            None => self.earlier.get(key as usize).copied().unwrap_or(MEMO_EXT),
        }
    }

    /// The value of `key`; a stack slot is `Err((stack id, given back before))`.
    pub(super) fn get(&self, key: u64) -> Option<Result<Val, (StackId, bool)>> {
        let x = match self.slots.get(self.index(key)) {
            Some(&x) => x,
            None => *self.earlier.get(key as usize)?,
        };
        let id = x >> MEMO_TAG_BITS;
        Some(Ok(match x & MEMO_TAG_MASK {
            MEMO_STR => Val::Str(StrId(id)),
            MEMO_NODE => Val::Node(NodeId(id)),
            MEMO_ROW => Val::Row(RowId(id)),
            MEMO_STACK => return Some(Err((StackId(id), false))),
            MEMO_STACK_AGAIN => return Some(Err((StackId(id), true))),
            MEMO_EXT => return None,
            _ if x == MEMO_OVERFLOW => return self.overflow.get(&key).copied().map(Ok),
            _ => return self.wide.get(id as usize).copied().map(Ok),
        }))
    }

    /// Whether `key` holds node `id` (the raw slot compared, where the id is inline).
    #[inline]
    pub(super) fn holds_node(&self, key: u64, id: u32) -> bool {
        if id < MEMO_INLINE_MAX {
            self.slots.get(self.index(key)) == Some(&(id << MEMO_TAG_BITS | MEMO_NODE))
        } else {
            self.get(key) == Some(Ok(Val::Node(NodeId(id))))
        }
    }

    /// Makes existing key `key` a stack slot; `false` where the id does not fit inline.
    pub(super) fn set_stack(&mut self, key: u64, s: StackId, again: bool) -> bool {
        let tag = if again { MEMO_STACK_AGAIN } else { MEMO_STACK };
        let i = self.index(key);
        match self.slots.get_mut(i) {
            Some(slot) if s.0 < MEMO_INLINE_MAX => {
                *slot = s.0 << MEMO_TAG_BITS | tag;
                true
            }
            _ => false,
        }
    }

    /// Sets an existing key (`key < len`).
    #[inline]
    pub(super) fn set(&mut self, key: u64, v: Val) {
        let x = self.encode(key, v);
        let i = self.index(key);
        if let Some(slot) = self.slots.get_mut(i) {
            *slot = x;
        }
    }

    /// A memo whose keys `0..n` belong to earlier pieces (read as [`MEMO_EXT`] until set).
    pub(super) fn with_earlier_keys(n: u64) -> Memo {
        Memo {
            base: n,
            earlier: vec![MEMO_EXT; n as usize],
            ..Memo::default()
        }
    }

    /// Sets the raw slot of an earlier key (see [`Self::with_earlier_keys`]).
    pub(super) fn set_earlier(&mut self, key: u64, x: u32) {
        if let Some(slot) = self.earlier.get_mut(key as usize) {
            *slot = x;
        }
    }

    /// Sets key `len` to a `frames` list given back (see [`Self::set_stack`]).
    pub(super) fn push_stack(&mut self, s: StackId, again: bool) {
        self.slots.push(MEMO_EXT);
        let key = self.len() as u64 - 1;
        if !self.set_stack(key, s, again) {
            self.set(key, Val::None);
        }
    }

    /// Sets key `len`.
    #[inline]
    pub(super) fn push(&mut self, v: Val) {
        let x = self.encode(self.len() as u64, v);
        self.slots.push(x);
    }
}
