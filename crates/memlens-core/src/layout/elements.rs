//! A timeline's elements (allocations, or segment ranges) as parallel columns in stack order,
//! where each comes from ([`Origin`]), and the row form the pairing and stacking build them in.

use crate::columns::OptU32Column;
use crate::trace::StackId;
use serde::{Deserialize, Serialize};

/// Where an element comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum Origin {
    /// Alloc (and free, if any) recorded in the trace.
    Traced = 0,
    /// Freed in the trace but allocated before it starts (history enabled late, or the ring
    /// buffer dropped the alloc). Its stack is the free site.
    FreedUntraced = 1,
    /// Active in the file's `segments` and never seen in the trace (upstream's "ghost block").
    Ghost = 2,
    /// Segments view: what is left of a mapped range after part of it was unmapped.
    Remainder = 3,
    /// Allocated view: a private pool's envelope while its height stays the same.
    PoolEnvelope = 4,
}

impl Origin {
    pub fn from_u8(v: u8) -> Origin {
        match v {
            1 => Origin::FreedUntraced,
            2 => Origin::Ghost,
            3 => Origin::Remainder,
            4 => Origin::PoolEnvelope,
            _ => Origin::Traced,
        }
    }
    /// Alive since before the first event of the trace.
    pub fn before_trace(self) -> bool {
        matches!(self, Origin::FreedUntraced | Origin::Ghost)
    }
}

/// Elements (allocations, or segment ranges) as parallel columns, in stack order: elements alive
/// before the trace first, then by the event that allocated them. `start_x` is non-decreasing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Elements {
    pub size_bytes: Vec<u64>,
    pub addr: Vec<u64>,
    /// How many earlier elements had this address (upstream's `_N` suffix in `b'7f…_N`).
    pub version: Vec<u32>,
    pub start_x: Vec<u32>,
    pub end_x: Vec<u32>,
    /// Device-local index of the alloc entry (`None`: not in the trace).
    pub alloc_row: OptU32Column,
    /// Device-local index of the free entry (`None`: never freed in the trace).
    pub free_row: OptU32Column,
    pub stream: Vec<u64>,
    /// [`Origin`] as `u8`.
    pub origin: Vec<u8>,
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
            self.origin.len(),
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
            origin: Vec::with_capacity(n),
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
        self.origin.push(e.origin as u8);
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
            origin: Origin::from_u8(*self.origin.get(e)?),
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
    pub(super) origin: Origin,
    pub(super) stack: StackId,
    pub(super) pool: Option<u32>,
}
