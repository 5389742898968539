//! Raw values of a decoded pickle (or JSON document): a flat arena of containers addressed by
//! [`NodeId`], so a memo reference is a handle (never a deep copy), a cycle is harmless and
//! nothing is dropped recursively.
//!
//! Fast path: a dict that carries an `action` string (a trace entry) is not kept as a dict but
//! written straight into the trace's columns ([`TraceColumns`], which the model adopts as-is); a list of such rows
//! in file order is a [`Node::RowRange`] that costs nothing per entry.

use crate::trace::Action;
use crate::trace::{StrId, StringTable, TraceColumns, TIME_NONE};

/// Index of a container in the [`Arena`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeId(pub u32);

/// Index of a trace entry in the arena's [`TraceColumns`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RowId(pub u32);

/// One raw value: scalars inline, containers by handle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Val {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(StrId),
    Node(NodeId),
    Row(RowId),
}

/// A container (or an integer too large for `i64`).
#[derive(Debug, Clone)]
pub enum Node {
    List(Vec<Val>),
    Tuple(Box<[Val]>),
    Dict(Vec<(Val, Val)>),
    /// Little-endian two's complement, as pickle's LONG1/LONG4 store it.
    BigInt(Box<[u8]>),
    Bytes(Box<[u8]>),
    /// A list whose items are all containers (a fresh `frames` list of memo-shared frame
    /// dicts, mostly): their node ids, 4 bytes an item.
    NodeList(Vec<u32>),
    /// A list whose items are the trace rows `start..end`, in order.
    RowRange {
        start: u32,
        end: u32,
    },
    /// A dict that became trace row `RowId` (see module doc).
    Row(RowId),
    /// A `frames` list, interned (see `raw::intern`).
    Stack(crate::trace::StackId),
    /// A frame dict, interned.
    Frame(crate::trace::FrameId),
    /// A container of an earlier piece, by memo key, while a piece is decoded on its own
    /// (`raw::pickle::piece`); the join replaces it by the value itself, so a finished arena
    /// never holds one. The stack and the frame standing for it (`raw::intern`) are kept here
    /// once made, as a one-thread decode keeps a list's stack in its memo slot.
    Ext {
        key: u64,
        stack: Option<crate::trace::StackId>,
        frame: Option<crate::trace::FrameId>,
    },
}

/// Keys the fast path recognises, interned before decoding starts.
#[derive(Debug, Clone, Copy)]
pub struct Keys {
    pub action: StrId,
    pub addr: StrId,
    pub size: StrId,
    pub stream: StrId,
    pub time_us: StrId,
    pub frames: StrId,
    pub device_free: StrId,
    pub compile_context: StrId,
    pub user_metadata: StrId,
    pub internal_metadata: StrId,
    pub pool_id: StrId,
    pub forward_frames: StrId,
    pub category: StrId,
    pub filename: StrId,
    pub line: StrId,
    pub name: StrId,
}

const KEY_ACTION: u32 = 1;
const KEY_ADDR: u32 = 2;
const KEY_SIZE: u32 = 3;
const KEY_STREAM: u32 = 4;
const KEY_TIME_US: u32 = 5;
const KEY_FRAMES: u32 = 6;
const KEY_DEVICE_FREE: u32 = 7;
const KEY_COMPILE_CONTEXT: u32 = 8;
const KEY_USER_METADATA: u32 = 9;
const KEY_INTERNAL_METADATA: u32 = 10;
const KEY_POOL_ID: u32 = 11;
const KEY_FORWARD_FRAMES: u32 = 12;
const KEY_CATEGORY: u32 = 13;
/// Key ids below this are gathered by id when a row is built.
const KEY_SLOTS: usize = 16;
/// The keys stored sparsely ([`RowExtra`]).
const EXTRA_KEYS: u32 = 1 << KEY_DEVICE_FREE
    | 1 << KEY_INTERNAL_METADATA
    | 1 << KEY_POOL_ID
    | 1 << KEY_FORWARD_FRAMES
    | 1 << KEY_CATEGORY;

impl Keys {
    /// Interns the keys first, in the order of the `KEY_*` ids (checked by a test).
    fn new(s: &mut StringTable) -> Keys {
        Keys {
            action: s.intern("action"),
            addr: s.intern("addr"),
            size: s.intern("size"),
            stream: s.intern("stream"),
            time_us: s.intern("time_us"),
            frames: s.intern("frames"),
            device_free: s.intern("device_free"),
            compile_context: s.intern("compile_context"),
            user_metadata: s.intern("user_metadata"),
            internal_metadata: s.intern("internal_metadata"),
            pool_id: s.intern("pool_id"),
            forward_frames: s.intern("forward_frames"),
            category: s.intern("category"),
            filename: s.intern("filename"),
            line: s.intern("line"),
            name: s.intern("name"),
        }
    }
}

/// Rarely present trace-entry fields, stored sparsely, as the decoder met them: `pool_id` and
/// `forward_frames` are still arena values (a parallel decode's join renumbers them; the model
/// reads them into [`crate::trace::EntryExtra`]).
#[derive(Debug, Clone, PartialEq)]
pub enum RowExtra {
    DeviceFree(u64),
    InternalMetadata(StrId),
    PoolId(Val),
    ForwardFrames(Val),
    Category(StrId),
    /// The action as written, where it is none of the known ones ([`Action::Unknown`]).
    ActionName(StrId),
}

/// All raw values of one document plus its string table and trace rows.
#[derive(Debug, Clone)]
pub struct Arena {
    pub nodes: Vec<Node>,
    pub strings: StringTable,
    /// The trace entries in file order ((row, field) extras in row order unless a row was
    /// updated after it was made).
    pub rows: TraceColumns<RowExtra>,
    /// Count of trace-entry fields whose value had the wrong type or sign (a warning).
    pub odd_values: u64,
    /// Whether a row's fields were set after it was made (a repeated key, or SETITEM on a
    /// row's dict again): the parallel join replays rows as pushes only where none was.
    pub(crate) rewritten: bool,
    pub keys: Keys,
    pub(crate) frame_keys: super::intern::FrameKeys,
    pub stack_interner: super::intern::StackInterner,
    /// The [`Action`] of each action string met so far, by string id.
    action_of: Vec<Option<Action>>,
    /// Rows removed while decoding (`raw::window`); row ids are not places in `rows` past one.
    pub(crate) dropped: super::dropped::DroppedRows,
    /// Nodes that became a [`Node::RowRange`] (the trace lists), for `raw::window`.
    pub(crate) row_lists: Vec<u32>,
    /// The most rows the columns reserve room for while rows outside a window are being
    /// removed (`raw::window`; `None`: no limit).
    pub(crate) rows_cap: Option<usize>,
}

impl Default for Arena {
    fn default() -> Self {
        let mut strings = StringTable::default();
        let keys = Keys::new(&mut strings);
        let frame_keys = super::intern::FrameKeys {
            filename: keys.filename,
            line: keys.line,
            name: keys.name,
        };
        Arena {
            nodes: Vec::new(),
            strings,
            rows: TraceColumns::default(),
            odd_values: 0,
            rewritten: false,
            keys,
            frame_keys,
            stack_interner: Default::default(),
            action_of: Vec::new(),
            dropped: Default::default(),
            row_lists: Vec::new(),
            rows_cap: None,
        }
    }
}

impl Arena {
    /// Memory the arena holds, counted from lengths times item sizes (what the size estimate
    /// extrapolates, `crate::estimate`): nodes (not what a container node holds besides),
    /// trace rows, frames, stacks (twice: the table and the interner's index) and strings.
    pub fn held_bytes(&self) -> u64 {
        use crate::trace::{Frame, StackId};
        use std::mem::size_of;
        /// A string's text, `Arc` header, table slot and index entry, on average.
        const STRING_BYTES: usize = 64;
        /// A stack's offset, index key and entry, besides its frame ids.
        const STACK_BYTES: usize = 40;
        let row = size_of::<Action>() + 3 * size_of::<u64>() + size_of::<StackId>();
        let st = &self.stack_interner;
        let bytes = self.nodes.len() * size_of::<Node>()
            + self.rows.len() * row
            + st.frames.len() * 2 * size_of::<Frame>()
            + st.stacks.len() * STACK_BYTES
            + st.stacks.frame_refs() * 2 * size_of::<crate::trace::FrameId>()
            + self.strings.len() * STRING_BYTES;
        bytes as u64
    }

    pub fn push(&mut self, n: Node) -> Val {
        let id = self.nodes.len() as u32;
        self.nodes.push(n);
        Val::Node(NodeId(id))
    }

    pub fn node(&self, v: Val) -> Option<&Node> {
        match v {
            Val::Node(NodeId(i)) => self.nodes.get(i as usize),
            _ => None,
        }
    }

    /// Row behind a value, whether it is held as `Row` or as the node a dict became.
    pub fn row_of(&self, v: Val) -> Option<RowId> {
        match v {
            Val::Row(r) => Some(r),
            Val::Node(NodeId(i)) => match self.nodes.get(i as usize) {
                Some(Node::Row(r)) => Some(*r),
                _ => None,
            },
            _ => None,
        }
    }

    /// APPEND/APPENDS. `Err` with a description when `list` is not a list.
    pub fn list_extend(&mut self, list: Val, items: &[Val]) -> Result<(), &'static str> {
        let Val::Node(NodeId(li)) = list else {
            return Err("APPEND to a value that is not a list");
        };
        let li = li as usize;
        // A list that already holds something other than rows (frames lists, mostly) stays a
        // plain list: no per-item row check. `normalize` still finds rows in it via `row_of`.
        let first_is_row = items.first().is_some_and(|&f| self.row_of(f).is_some());
        match self.nodes.get_mut(li) {
            Some(node @ Node::List(_)) if !first_is_row && !items.is_empty() => {
                if let (Node::List(v), Some(ids)) = (&*node, node_ids(items)) {
                    if v.is_empty() {
                        *node = Node::NodeList(ids);
                        return Ok(());
                    }
                }
            }
            Some(node @ Node::NodeList(_)) => {
                if let Node::NodeList(ids) = node {
                    if let Some(more) = node_ids(items) {
                        ids.extend_from_slice(&more);
                        return Ok(());
                    }
                    let mut v: Vec<Val> = ids.iter().map(|&i| Val::Node(NodeId(i))).collect();
                    v.extend_from_slice(items);
                    *node = Node::List(v);
                }
                return Ok(());
            }
            _ => {}
        }
        if let Some(Node::List(v)) = self.nodes.get_mut(li) {
            let plain = match v.first() {
                Some(f) => !matches!(f, Val::Row(_)),
                None => !first_is_row,
            };
            if plain {
                v.extend_from_slice(items);
                return Ok(());
            }
        }
        for &item in items {
            let row = self.row_of(item);
            let Some(node) = self.nodes.get_mut(li) else {
                return Err("APPEND to a missing list");
            };
            match node {
                Node::List(v) => {
                    if v.is_empty() {
                        if let Some(r) = row {
                            *node = Node::RowRange {
                                start: r.0,
                                end: r.0 + 1,
                            };
                            self.row_lists.push(li as u32);
                            continue;
                        }
                    }
                    v.push(row.map(Val::Row).unwrap_or(item));
                }
                Node::RowRange { start, end } => {
                    if row.map(|r| r.0) == Some(*end) {
                        *end += 1;
                    } else {
                        let mut v: Vec<Val> = (*start..*end).map(|r| Val::Row(RowId(r))).collect();
                        v.push(row.map(Val::Row).unwrap_or(item));
                        *node = Node::List(v);
                    }
                }
                _ => return Err("APPEND to a value that is not a list"),
            }
        }
        Ok(())
    }

    /// SETITEM/SETITEMS with `kv` = key, value, key, value, ...
    pub fn dict_set_items(&mut self, dict: Val, kv: &[Val]) -> Result<(), &'static str> {
        let Val::Node(NodeId(di)) = dict else {
            return Err("SETITEM on a value that is not a dict");
        };
        let di = di as usize;
        match self.nodes.get(di) {
            Some(Node::Dict(items)) => {
                let row = if items.is_empty() {
                    self.new_row(kv)
                } else {
                    None
                };
                match (row, self.nodes.get_mut(di)) {
                    (Some(r), Some(n)) => *n = Node::Row(RowId(r)),
                    (None, Some(Node::Dict(items))) => {
                        items.extend(kv.chunks_exact(2).map(|p| (p[0], p[1])))
                    }
                    _ => {}
                }
                Ok(())
            }
            Some(Node::Row(RowId(r))) => {
                let r = *r;
                self.apply_row(r, kv);
                Ok(())
            }
            _ => Err("SETITEM on a value that is not a dict"),
        }
    }

    /// The items of an empty dict as a new trace row, if they make one (an `action` string
    /// among them). The common case, each known key once, fills every column once from the
    /// values gathered by key id; a repeated key takes the general path, field by field in
    /// file order.
    pub(crate) fn new_row(&mut self, kv: &[Val]) -> Option<u32> {
        // Where each known key's value is in `kv` (its last one; 0 for none: `kv[0]` is a key,
        // never a value), 4 bytes a key rather than a 16-byte copy of each value.
        let mut at = [0u32; KEY_SLOTS];
        let mut present = 0u32;
        let mut known = 0u32;
        for (i, p) in kv.chunks_exact(2).enumerate() {
            if let Val::Str(StrId(k)) = p[0] {
                if (k as usize) < KEY_SLOTS {
                    at[k as usize] = 2 * i as u32 + 1;
                    present |= 1 << k;
                    known += 1;
                }
            }
        }
        let field = |k: u32| match at[k as usize] {
            0 => Val::None,
            i => kv.get(i as usize).copied().unwrap_or(Val::None),
        };
        let Val::Str(action) = field(KEY_ACTION) else {
            // No `action`, or a repeated one whose last value is not a string.
            return self.new_row_general(kv);
        };
        if known != present.count_ones() {
            return self.new_row_general(kv);
        }
        let addr = self.u64_field(field(KEY_ADDR));
        let size = self.u64_field(field(KEY_SIZE));
        let stream = self.int_bits(field(KEY_STREAM));
        let time_us = match field(KEY_TIME_US) {
            Val::Int(t) => t,
            Val::Float(f) => f as i64,
            _ => TIME_NONE,
        };
        // A frames list shared by memo is interned already: looked up here, not in a call.
        let frames = field(KEY_FRAMES);
        let stack = match frames {
            Val::Node(NodeId(n)) => match self.nodes.get(n as usize) {
                Some(&Node::Stack(s)) => s,
                _ => self.intern_stack(frames),
            },
            _ => self.intern_stack(frames),
        };
        let compile_context = self.str_field(field(KEY_COMPILE_CONTEXT));
        let user_metadata = self.str_field(field(KEY_USER_METADATA));
        let r = self.next_row_id();
        let act = self.action_for(action);
        let rows = &mut self.rows;
        rows.action.push(act);
        if act == Action::Unknown {
            rows.extras.push((r, RowExtra::ActionName(action)));
        }
        rows.addr.push(addr);
        rows.size_bytes.push(size);
        rows.stream.push(stream);
        rows.time_us.push(time_us);
        rows.stack.push(stack);
        rows.compile_context.push(compile_context);
        rows.user_metadata.push(user_metadata);
        if present & EXTRA_KEYS != 0 {
            for p in kv.chunks_exact(2) {
                if let Val::Str(StrId(k)) = p[0] {
                    self.apply_extra(r, k, p[1]);
                }
            }
        }
        Some(r)
    }

    fn new_row_general(&mut self, kv: &[Val]) -> Option<u32> {
        let action = self.keys.action;
        let is_entry = kv
            .chunks_exact(2)
            .any(|p| p[0] == Val::Str(action) && matches!(p[1], Val::Str(_)));
        if !is_entry {
            return None;
        }
        let r = self.next_row_id();
        self.rows.push_default();
        self.apply_row(r, kv);
        Some(r)
    }

    fn apply_row(&mut self, r: u32, kv: &[Val]) {
        // (A row removed while decoding: see `raw::window`.)
        let Some(ri) = self.row_index(r) else {
            return;
        };
        self.rewritten = true;
        for p in kv.chunks_exact(2) {
            let (Val::Str(key), v) = (p[0], p[1]) else {
                continue;
            };
            // Known keys were interned first, in `Keys::new` order, so the id names the field.
            match key.0 {
                KEY_ACTION => {
                    if let Val::Str(s) = v {
                        let act = self.action_for(s);
                        self.rows.action[ri] = act;
                        if act == Action::Unknown {
                            self.rows.extras.push((r, RowExtra::ActionName(s)));
                        }
                    }
                }
                KEY_ADDR => self.rows.addr[ri] = self.u64_field(v),
                KEY_SIZE => self.rows.size_bytes[ri] = self.u64_field(v),
                KEY_STREAM => {
                    let x = self.int_bits(v);
                    self.rows.stream.set(ri, x)
                }
                KEY_TIME_US => {
                    self.rows.time_us[ri] = match v {
                        Val::Int(t) => t,
                        Val::Float(f) => f as i64,
                        _ => TIME_NONE,
                    }
                }
                KEY_FRAMES => {
                    let sid = self.intern_stack(v);
                    self.rows.stack[ri] = sid;
                }
                KEY_COMPILE_CONTEXT => {
                    let s = self.str_field(v);
                    self.rows.compile_context.set(ri, s)
                }
                KEY_USER_METADATA => {
                    let s = self.str_field(v);
                    self.rows.user_metadata.set(ri, s)
                }
                k => self.apply_extra(r, k, v),
            }
        }
    }

    /// A sparse field (key id `k`) of row `r`; other keys are ignored.
    fn apply_extra(&mut self, r: u32, k: u32, v: Val) {
        match k {
            KEY_DEVICE_FREE => {
                let f = self.u64_field(v);
                self.rows.extras.push((r, RowExtra::DeviceFree(f)));
            }
            KEY_INTERNAL_METADATA => {
                let s = self.str_field(v);
                self.rows.extras.push((r, RowExtra::InternalMetadata(s)));
            }
            KEY_POOL_ID => self.rows.extras.push((r, RowExtra::PoolId(v))),
            KEY_FORWARD_FRAMES => self.rows.extras.push((r, RowExtra::ForwardFrames(v))),
            KEY_CATEGORY => {
                let s = self.str_field(v);
                self.rows.extras.push((r, RowExtra::Category(s)));
            }
            _ => {}
        }
    }

    /// The action an action string names (a table by string id: no string compare per row).
    #[inline]
    fn action_for(&mut self, s: StrId) -> Action {
        if let Some(Some(a)) = self.action_of.get(s.0 as usize) {
            return *a;
        }
        self.action_for_new(s)
    }

    #[cold]
    fn action_for_new(&mut self, s: StrId) -> Action {
        let a = Action::from_name(self.strings.get(s));
        let i = s.0 as usize;
        if i >= self.action_of.len() {
            self.action_of.resize(i + 1, None);
        }
        if let Some(slot) = self.action_of.get_mut(i) {
            *slot = Some(a);
        }
        a
    }

    #[inline]
    fn str_field(&mut self, v: Val) -> StrId {
        match v {
            Val::Str(s) => s,
            Val::None => StrId::EMPTY,
            _ => {
                self.odd_values += 1;
                StrId::EMPTY
            }
        }
    }

    #[inline]
    fn u64_field(&mut self, v: Val) -> u64 {
        match self.as_u64(v) {
            Some(x) => x,
            None => {
                if v != Val::None {
                    self.odd_values += 1;
                }
                0
            }
        }
    }

    /// An integer's bits (streams are pointers cast to int64; only identity matters).
    fn int_bits(&mut self, v: Val) -> u64 {
        match v {
            Val::Int(i) => i as u64,
            _ => self.u64_field(v),
        }
    }

    /// Non-negative integer (incl. one stored as a big int that fits `u64`).
    pub fn as_u64(&self, v: Val) -> Option<u64> {
        match v {
            Val::Int(i) if i >= 0 => Some(i as u64),
            Val::Bool(b) => Some(b as u64),
            Val::Float(f) if f >= 0.0 && f.fract() == 0.0 && f < 1.8e19 => Some(f as u64),
            Val::Node(_) => match self.node(v) {
                Some(Node::BigInt(b)) => bigint_to_u64(b),
                _ => None,
            },
            _ => None,
        }
    }

    /// Signed integer (`None` when not an integer or out of range).
    pub fn as_i64(&self, v: Val) -> Option<i64> {
        match v {
            Val::Int(i) => Some(i),
            Val::Bool(b) => Some(b as i64),
            Val::Float(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Some(f as i64),
            _ => None,
        }
    }

    pub fn as_str(&self, v: Val) -> Option<&str> {
        match v {
            Val::Str(s) => Some(self.strings.get(s)),
            _ => None,
        }
    }

    /// Value of `key` in a dict (linear: dicts in snapshots are small).
    pub fn get(&self, dict: Val, key: &str) -> Option<Val> {
        let id = self.strings.lookup(key)?;
        match self.node(dict)? {
            Node::Dict(items) => items
                .iter()
                .rev()
                .find(|(k, _)| *k == Val::Str(id))
                .map(|(_, v)| *v),
            _ => None,
        }
    }

    pub fn is_dict(&self, v: Val) -> bool {
        matches!(self.node(v), Some(Node::Dict(_)) | Some(Node::Row(_)))
    }

    /// Items of a list or tuple (rows yielded as `Val::Row`); `None` if `v` is neither.
    pub fn seq(&self, v: Val) -> Option<SeqIter<'_>> {
        match self.node(v)? {
            Node::List(items) => Some(SeqIter::Slice(items.iter())),
            Node::Tuple(items) => Some(SeqIter::Slice(items.iter())),
            Node::NodeList(ids) => Some(SeqIter::Nodes(ids.iter())),
            Node::RowRange { start, end } => Some(SeqIter::Rows(*start..*end)),
            _ => None,
        }
    }

    pub fn seq_len(&self, v: Val) -> Option<usize> {
        match self.node(v)? {
            Node::List(items) => Some(items.len()),
            Node::Tuple(items) => Some(items.len()),
            Node::NodeList(ids) => Some(ids.len()),
            Node::RowRange { start, end } => Some((end - start) as usize),
            _ => None,
        }
    }

    /// Dict items (`None` if `v` is not a plain dict).
    pub fn dict_items(&self, v: Val) -> Option<&[(Val, Val)]> {
        match self.node(v)? {
            Node::Dict(items) => Some(items),
            _ => None,
        }
    }
}

/// Iterator over a list's items.
pub enum SeqIter<'a> {
    Slice(std::slice::Iter<'a, Val>),
    Nodes(std::slice::Iter<'a, u32>),
    Rows(std::ops::Range<u32>),
}

impl Iterator for SeqIter<'_> {
    type Item = Val;
    fn next(&mut self) -> Option<Val> {
        match self {
            SeqIter::Slice(it) => it.next().copied(),
            SeqIter::Nodes(it) => it.next().map(|&i| Val::Node(NodeId(i))),
            SeqIter::Rows(r) => r.next().map(|i| Val::Row(RowId(i))),
        }
    }
}

/// The node ids of `items`, if every one is a container.
fn node_ids(items: &[Val]) -> Option<Vec<u32>> {
    let mut ids = Vec::with_capacity(items.len());
    for x in items {
        match x {
            Val::Node(NodeId(i)) => ids.push(*i),
            _ => return None,
        }
    }
    Some(ids)
}

/// Little-endian two's complement bytes to `u64`, if non-negative and small enough.
pub fn bigint_to_u64(b: &[u8]) -> Option<u64> {
    if b.last().is_some_and(|&x| x & 0x80 != 0) {
        return None;
    }
    if b.len() > 8 && b[8..].iter().any(|&x| x != 0) {
        return None;
    }
    let mut out = 0u64;
    for (i, &x) in b.iter().take(8).enumerate() {
        out |= (x as u64) << (8 * i);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_containers_keeps_its_items_when_other_values_join() {
        let mut a = Arena::default();
        let d1 = a.push(Node::Dict(Vec::new()));
        let d2 = a.push(Node::Dict(Vec::new()));
        let list = a.push(Node::List(Vec::new()));
        assert_eq!(a.list_extend(list, &[d1, d2]), Ok(()));
        assert!(matches!(a.node(list), Some(Node::NodeList(_))));
        assert_eq!(a.list_extend(list, &[d1]), Ok(()));
        assert!(matches!(a.node(list), Some(Node::NodeList(_))));
        assert_eq!(a.list_extend(list, &[Val::Int(3), d2]), Ok(()));
        let items: Vec<Val> = a.seq(list).map(|i| i.collect()).unwrap_or_default();
        assert_eq!(items, [d1, d2, d1, Val::Int(3), d2]);
        assert_eq!(a.seq_len(list), Some(5));
        // an empty APPENDS leaves an empty list open to becoming a row range
        let empty = a.push(Node::List(Vec::new()));
        assert_eq!(a.list_extend(empty, &[]), Ok(()));
        assert!(matches!(a.node(empty), Some(Node::List(v)) if v.is_empty()));
    }

    #[test]
    fn key_ids_match_their_constants() {
        let a = Arena::default();
        let k = a.keys;
        let pairs = [
            (k.action, KEY_ACTION),
            (k.addr, KEY_ADDR),
            (k.size, KEY_SIZE),
            (k.stream, KEY_STREAM),
            (k.time_us, KEY_TIME_US),
            (k.frames, KEY_FRAMES),
            (k.device_free, KEY_DEVICE_FREE),
            (k.compile_context, KEY_COMPILE_CONTEXT),
            (k.user_metadata, KEY_USER_METADATA),
            (k.internal_metadata, KEY_INTERNAL_METADATA),
            (k.pool_id, KEY_POOL_ID),
            (k.forward_frames, KEY_FORWARD_FRAMES),
            (k.category, KEY_CATEGORY),
        ];
        for (id, c) in pairs {
            assert_eq!(id.0, c);
        }
    }
}
