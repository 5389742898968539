//! A timeline's elements (allocations, or segment ranges) as parallel columns in stack order,
//! what each is ([`ElementKind`], embedding the allocation table's [`Origin`]), and the row form
//! the pairing and stacking build them in.

use crate::columns::value::{decode_each, encode_each};
use crate::columns::{OptU32Column, Value};
pub use crate::replay::Origin;
use crate::trace::StackId;
use std::borrow::Cow;

/// What an element is: an allocation of the allocation table (in the Segments view, a segment
/// range) with where its lifetime comes from, or one of the two shapes only layouts make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElementKind {
    /// Allocated in the trace, allocated before it (only its free recorded; its stack is the
    /// free site), or never seen in it (active in the file's `segments`: upstream's "ghost
    /// block"), as [`Origin`] says.
    Allocation(Origin),
    /// Segments view: what is left of a mapped range after part of it was unmapped.
    Remainder,
    /// Allocated view: a private pool's envelope while its height stays the same.
    PoolEnvelope,
}

/// Codes as the column travels, in the order of [`ElementKind::code`].
const KINDS: [ElementKind; 5] = [
    ElementKind::TRACED,
    ElementKind::Allocation(Origin::UnmatchedFree),
    ElementKind::Allocation(Origin::Untraced),
    ElementKind::Remainder,
    ElementKind::PoolEnvelope,
];

impl ElementKind {
    pub const TRACED: ElementKind = ElementKind::Allocation(Origin::Traced);

    /// The kind's code in the `kind` column (`0` traced … `4` pool envelope).
    pub fn code(self) -> u8 {
        KINDS.iter().position(|&k| k == self).unwrap_or(0) as u8
    }

    /// Alive since before the first event of the trace.
    pub fn before_trace(self) -> bool {
        matches!(
            self,
            ElementKind::Allocation(Origin::UnmatchedFree | Origin::Untraced)
        )
    }
}

impl Value for ElementKind {
    type Prim = u8;
    fn encode(values: &[Self]) -> Cow<'_, [u8]> {
        encode_each(values, |k| k.code())
    }
    fn decode(prims: Vec<u8>) -> Option<Vec<Self>> {
        decode_each(prims, |p| KINDS.get(usize::from(p)).copied())
    }
}

/// Elements (allocations, or segment ranges) as parallel columns, in stack order: elements alive
/// before the trace first, then by the event that allocated them. `start_x` is non-decreasing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Elements {
    pub size_bytes: Vec<u64>,
    pub addr: Vec<u64>,
    /// Upstream's `_N` suffix in `b'7f…_N`: the allocation table's version for allocations
    /// (frees at the address before it), the count of earlier ranges at the address for
    /// segment ranges.
    pub version: Vec<u32>,
    pub start_x: Vec<u32>,
    pub end_x: Vec<u32>,
    /// Device-local index of the alloc entry (`None`: not in the trace).
    pub alloc_row: OptU32Column,
    /// Device-local index of the free entry (`None`: never freed in the trace).
    pub free_row: OptU32Column,
    pub stream: Vec<u64>,
    pub kind: Vec<ElementKind>,
    /// The frames shown for the element.
    pub stack: Vec<StackId>,
    /// Index into [`TimelineLayout::pools`] of the element's `segment_pool_id` (`None`:
    /// not known, e.g. its segment was freed before the snapshot and its entry carries none).
    pub pool: OptU32Column,
}

impl Elements {
    pub fn len(&self) -> usize {
        self.size_bytes.len()
    }
    pub fn is_empty(&self) -> bool {
        self.size_bytes.is_empty()
    }
    /// The stack element `e` is grouped by as a live allocation (as the analysis groups the
    /// allocation table: `Some(None)` when it was made before the trace); `None` when it is no
    /// allocation (a remainder or an envelope) or out of range.
    pub fn allocation_stack(&self, e: usize) -> Option<Option<StackId>> {
        match self.kind.get(e)? {
            ElementKind::Allocation(Origin::Traced) => Some(Some(*self.stack.get(e)?)),
            ElementKind::Allocation(_) => Some(None),
            ElementKind::Remainder | ElementKind::PoolEnvelope => None,
        }
    }
    pub(super) fn consistent(&self) -> bool {
        let n = self.len();
        [
            self.addr.len(),
            self.version.len(),
            self.start_x.len(),
            self.end_x.len(),
            self.alloc_row.len(),
            self.free_row.len(),
            self.stream.len(),
            self.kind.len(),
            self.stack.len(),
            self.pool.len(),
        ]
        .iter()
        .all(|&l| l == n)
    }
    /// Empty columns with room for exactly `n` elements (no growth while they fill: in wasm,
    /// where memory never shrinks, every doubling would stay in the worker's footprint).
    pub(super) fn with_capacity(n: usize) -> Elements {
        Elements {
            size_bytes: Vec::with_capacity(n),
            addr: Vec::with_capacity(n),
            version: Vec::with_capacity(n),
            start_x: Vec::with_capacity(n),
            end_x: Vec::with_capacity(n),
            alloc_row: OptU32Column::with_capacity(n),
            free_row: OptU32Column::with_capacity(n),
            stream: Vec::with_capacity(n),
            kind: Vec::with_capacity(n),
            stack: Vec::with_capacity(n),
            pool: OptU32Column::with_capacity(n),
        }
    }

    pub(super) fn push(&mut self, e: Tmp) {
        self.size_bytes.push(e.size);
        self.addr.push(e.addr);
        self.version.push(e.version);
        self.start_x.push(e.start_x);
        self.end_x.push(e.end_x);
        self.alloc_row.push(e.alloc_row);
        self.free_row.push(e.free_row);
        self.stream.push(e.stream);
        self.kind.push(e.kind);
        self.stack.push(e.stack);
        self.pool.push(e.pool);
    }

    /// Element `e` as a row.
    pub(super) fn row(&self, e: usize) -> Option<Tmp> {
        Some(Tmp {
            size: *self.size_bytes.get(e)?,
            addr: *self.addr.get(e)?,
            version: *self.version.get(e)?,
            start_x: *self.start_x.get(e)?,
            end_x: *self.end_x.get(e)?,
            alloc_row: self.alloc_row.get(e),
            free_row: self.free_row.get(e),
            stream: *self.stream.get(e)?,
            kind: *self.kind.get(e)?,
            stack: *self.stack.get(e)?,
            pool: self.pool.get(e),
        })
    }
}

/// One element as a row, while the pairing and the stackings build the columns.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tmp {
    pub(super) size: u64,
    pub(super) addr: u64,
    pub(super) version: u32,
    pub(super) start_x: u32,
    pub(super) end_x: u32,
    pub(super) alloc_row: Option<u32>,
    pub(super) free_row: Option<u32>,
    pub(super) stream: u64,
    pub(super) kind: ElementKind,
    pub(super) stack: StackId,
    pub(super) pool: Option<u32>,
}
