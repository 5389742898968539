//! Allocator State History: how the caching allocator's segments are split into blocks, and where
//! the free holes are, after any trace entry of a device. It is the model behind the viewer's
//! segment map ("a 1.9 GB segment holding a 300 MB hole while a 2 GB request fails").
//!
//! # How the states are reconstructed
//! Like upstream's MemoryViz, from the file's final `segments` backwards through the device's
//! trace. Upstream does it again on every click (O(events)); here one build does it once:
//! 1. a pre-pass pairs every `free_completed` with its `alloc` (same address, in order) for the
//!    allocation's stack and alloc event, and notes whether a `free_requested` preceded it;
//! 2. a backward pass undoes entries N-1 … 0 on the final state, records per entry a reversible
//!    op holding every decision it made (block size, which neighbours merge, the segment's
//!    stream/pool) in [`Ops`], and stores a checkpoint (the whole state) every `stride` entries.
//!    A block found later in the pass to own an unsplit remainder (below) is grown in the
//!    checkpoints taken while it lived.
//!
//! [`SampledStates`] runs the same pre-pass and backward pass but keeps only the states at events
//! its caller names before the pass (no periodic checkpoints, no seeks): what a reader that
//! knows its few events up front (the diagnosis) needs, at the cost of the pass alone.
//!
//! A seek restores the nearest checkpoint (or keeps the current state when that is closer) and
//! applies ops forward or backward, so showing any event costs at most `stride / 2` op
//! applications plus one restore, and ±1 costs O(blocks changed · log blocks). Both directions
//! use the same primitives with the same recorded arguments, so a state does not depend on the
//! way it was reached ([`AllocatorHistory::replays_consistently`] checks it). The stride starts
//! from the final state's size and doubles, dropping every other checkpoint, whenever all of
//! them together would exceed 1.5 × the model's trace columns minus the ops (at least 4 MiB;
//! at least 32 entries apart).
//!
//! # Rules
//! - States: `alloc` makes a block `active_allocated`, `free_requested` makes it
//!   `active_pending_free`, `free_completed` makes it `inactive` and merges it with inactive
//!   neighbours of the same segment (torch merges free blocks; an inactive block is a hole).
//!   Without any `free_requested` in the trace (`skip_actions`) a block stays allocated until
//!   its `free_completed`; with them, a block freed but never allocated in the trace (history
//!   started mid-stream) was requested before the trace, so it starts pending. Inactive blocks
//!   carry no stack or request (the file may give the last one's frames; they are dropped).
//! - Block sizes: a block in the file keeps its size. A block that lives and dies inside the
//!   trace has only its *requested* size (trace `size` is the request, not the block), so its
//!   size is inferred when its `free_completed` is undone: torch's `round_size` (at least 512, a
//!   multiple of 512; `roundup_power2_divisions` is not modelled) is a lower bound of the real
//!   size and never collides with a neighbour, so the block gets that and the rest of the hole
//!   stays inactive. torch hands out the front of a free block and splits the rest off only if
//!   `should_split` says so (small pool or expandable segments: ≥ 512 bytes left; large pool:
//!   more than 1 MiB left and the block under `max_split_size`). So when the block's `alloc` is
//!   undone, the free block right behind it is the remainder torch decided on; if nothing (a
//!   block, a mapped or unmapped range) lay inside that remainder while the block lived and
//!   torch would not have split it off, the block owned it and is grown by it (its rounding
//!   waste then includes it). The rule is checked against the file's blocks that the trace
//!   allocated ([`Diagnostics::size_rule_checked`]); on the real snapshots and on `memlens
//!   synth` runs (whose shorter runs give the true intermediate states) it matches every block.
//! - Segments: `segment_alloc`/`segment_free` add and remove whole segments (one inactive block).
//!   `segment_map`/`segment_unmap` grow and shrink expandable segments: torch reports one
//!   segment per contiguous mapped range, so a range mapped next to an expandable segment of the
//!   same stream (and pool, when both are known) joins it, and unmapping the middle of one splits
//!   it in two. A segment known only from the trace takes the entry's stream and `pool_id` (torch
//!   ≥ 2.11; otherwise the pool is unknown, `None`) and is small iff it is a 2 MiB
//!   non-expandable segment.
//! - Allocations from before the trace are the file's active blocks that the trace never
//!   allocated (alive from the first state on), and blocks whose `free_completed` has no `alloc`
//!   before it (alive until that free, with the request and stack of the free entries).
//! - A trace that does not match the final state (ring buffer cut it mid-stream, history
//!   stopped, a device mix-up) never fails: an undo that cannot apply is skipped and counted in
//!   [`Diagnostics`]. A freed allocation that no segment can hold (outside every segment, or over a
//!   live block) is kept as *unplaced* ([`State::unplaced`]) so that requested bytes still follow
//!   the trace.
//!
//! `requested_bytes` of a state (active blocks plus unplaced allocations) after event `i` equals
//! `timeline_baseline_bytes` + Σ(alloc − free_completed) up to `i`, and `reserved_bytes` equals
//! the reserved baseline + Σ(segment_alloc + segment_map − segment_free − segment_unmap), as long
//! as no undo was skipped.

mod addr_map;
mod build;
mod columns;
mod event_csv;
pub mod events;
mod live;
pub mod map;
mod sampled;
#[cfg(test)]
mod tests;

pub use event_csv::EVENT_CSV_HEADER;
pub use live::State;
pub use sampled::SampledStates;

use crate::columns::OptU32Column;
use crate::model::{BlockState, Snapshot};
use crate::trace::StackId;
use addr_map::AddrMap;
use live::{Blk, RangeFlags, Seg};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Which pool a segment's blocks come from (`segment_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum SegmentKind {
    /// Blocks ≤ 1 MiB in 2 MiB segments.
    Small,
    Large,
    /// Not in the file and not inferable (expandable segments known only from the trace).
    Unknown,
}

/// What a segment carries besides its extent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentMeta {
    pub stream: u64,
    pub pool_id: Option<(i64, i64)>,
    pub is_expandable: bool,
    pub kind: SegmentKind,
    pub stack: StackId,
}

/// One segment of a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentView {
    pub address: u64,
    pub size_bytes: u64,
    pub stream: u64,
    /// `segment_pool_id`; `(0, 0)` is the default pool. `None`: known only from a trace entry
    /// that does not say (torch < 2.11).
    pub pool_id: Option<(i64, i64)>,
    pub is_expandable: bool,
    pub kind: SegmentKind,
    /// Where the segment was allocated (file `frames`, or its `segment_alloc`/`segment_map`).
    pub stack: StackId,
}

/// One block of a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockView {
    pub address: u64,
    pub size_bytes: u64,
    /// The request (0 for inactive blocks). `size_bytes − requested_size_bytes` is the rounding
    /// waste.
    pub requested_size_bytes: u64,
    pub state: BlockState,
    /// The allocation's stack (its `alloc` entry's, else the file block's, else its free's).
    pub stack: StackId,
    /// Index (within the device's trace) of the `alloc` that made this block, when recorded.
    pub alloc_event: Option<u32>,
}

/// The numbers shown for a state (bytes unless named otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StateNumbers {
    /// Σ size of `active_allocated` blocks.
    pub allocated_bytes: u64,
    /// Σ requested size of active blocks, plus unplaced allocations.
    pub requested_bytes: u64,
    /// Σ size of active (allocated + pending free) blocks.
    pub active_bytes: u64,
    /// Σ size of `active_pending_free` blocks.
    pub pending_free_bytes: u64,
    /// Σ segment size.
    pub reserved_bytes: u64,
    /// Σ size of inactive blocks: free memory inside segments.
    pub inactive_bytes: u64,
    /// Σ size of inactive blocks in segments that hold more than one block.
    pub inactive_split_bytes: u64,
    /// Largest inactive block (0 if none).
    pub largest_free_block_bytes: u64,
    /// 100 · (1 − largest free block / inactive bytes); 0 when nothing is free.
    pub fragmentation_pct: f64,
    /// Σ (size − requested) over active blocks.
    pub rounding_waste_bytes: u64,
    pub segments: u64,
    pub blocks: u64,
    pub unplaced_allocations: u64,
    pub unplaced_requested_bytes: u64,
    /// Set when the event of this state is an `oom`.
    pub oom: Option<OomNumbers>,
}

/// An `oom` entry against the state it happened in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OomNumbers {
    /// The `size` of the `oom` entry.
    pub requested_bytes: u64,
    /// The entry's `device_free` (bytes free on the device), if recorded.
    pub device_free_bytes: Option<u64>,
    pub largest_free_block_bytes: u64,
    pub total_free_bytes: u64,
}

/// A state as columns (for drawing), segments and blocks in address order; segment `k`'s blocks
/// are `segment_blocks[k]` (a range into the block columns).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateColumns {
    pub segment_address: Vec<u64>,
    pub segment_size_bytes: Vec<u64>,
    pub segment_stream: Vec<u64>,
    pub segment_pool_id: Vec<Option<(i64, i64)>>,
    pub segment_is_expandable: Vec<bool>,
    pub segment_kind: Vec<SegmentKind>,
    pub segment_stack: Vec<StackId>,
    pub segment_blocks: Vec<std::ops::Range<u32>>,
    pub block_address: Vec<u64>,
    pub block_size_bytes: Vec<u64>,
    pub block_requested_size_bytes: Vec<u64>,
    pub block_state: Vec<BlockState>,
    pub block_stack: Vec<StackId>,
    /// The `alloc` entry that made the block, when recorded.
    pub block_alloc_event: Vec<Option<u32>>,
}

impl StateColumns {
    pub fn segments(&self) -> usize {
        self.segment_address.len()
    }

    /// Size of segment `k` (0 past the end).
    pub fn segment_size(&self, k: usize) -> u64 {
        self.segment_size_bytes.get(k).copied().unwrap_or(0)
    }

    /// Block index range of segment `k`.
    pub fn blocks_of(&self, k: usize) -> std::ops::Range<usize> {
        self.segment_blocks
            .get(k)
            .map_or(0..0, |r| r.start as usize..r.end as usize)
    }

    pub fn block_state(&self, b: usize) -> BlockState {
        self.block_state
            .get(b)
            .copied()
            .unwrap_or(BlockState::Unknown)
    }

    /// The block containing `addr`, if any.
    pub fn block_at(&self, addr: u64) -> Option<usize> {
        let k = self
            .block_address
            .partition_point(|&a| a <= addr)
            .checked_sub(1)?;
        let (a, s) = (*self.block_address.get(k)?, *self.block_size_bytes.get(k)?);
        (addr < a.saturating_add(s)).then_some(k)
    }
}

impl State {
    /// The trace entry this state follows (`None`: before the first one).
    pub fn event(&self) -> Option<usize> {
        self.pos.checked_sub(1)
    }

    /// The per-state numbers. The free-block multiset is kept by states handed out by
    /// [`AllocatorHistory`], so this is O(1).
    pub fn numbers(&self) -> StateNumbers {
        if !self.derived {
            // Only states inside the build lack the derived parts; never handed out.
            let mut full = self.clone();
            full.derived = true;
            full.recompute();
            return full.numbers();
        }
        let s = &self.sums;
        let largest = self.free_sizes.last_key_value().map_or(0, |(&k, _)| k);
        let inactive = s.inactive;
        StateNumbers {
            allocated_bytes: s.allocated,
            requested_bytes: s.requested + s.orphan_requested,
            active_bytes: s.allocated + s.pending,
            pending_free_bytes: s.pending,
            reserved_bytes: s.reserved,
            inactive_bytes: inactive,
            inactive_split_bytes: inactive.saturating_sub(s.whole_free),
            largest_free_block_bytes: largest,
            fragmentation_pct: if inactive == 0 {
                0.0
            } else {
                100.0 * (1.0 - largest as f64 / inactive as f64)
            },
            rounding_waste_bytes: (s.allocated + s.pending).saturating_sub(s.requested),
            segments: self.segs.len() as u64,
            blocks: self.blocks.len() as u64,
            unplaced_allocations: self.orphans.len() as u64,
            unplaced_requested_bytes: s.orphan_requested,
            oom: self.oom.map(|(req, dev)| OomNumbers {
                requested_bytes: req,
                device_free_bytes: dev,
                largest_free_block_bytes: largest,
                total_free_bytes: inactive,
            }),
        }
    }

    /// The state as columns.
    pub fn columns(&self) -> StateColumns {
        let mut c = StateColumns::default();
        for (a, s) in self.segs.iter() {
            c.segment_address.push(a);
            c.segment_size_bytes.push(s.size);
            c.segment_stream.push(s.meta.stream);
            c.segment_pool_id.push(s.meta.pool_id);
            c.segment_is_expandable.push(s.meta.is_expandable);
            c.segment_kind.push(s.meta.kind);
            c.segment_stack.push(s.meta.stack);
            let b0 = c.block_address.len() as u32;
            for (ba, b) in self.blocks.range(a, a + s.size) {
                c.block_address.push(ba);
                c.block_size_bytes.push(b.size);
                c.block_requested_size_bytes.push(b.requested);
                c.block_state.push(b.state);
                c.block_stack.push(b.stack);
                c.block_alloc_event.push(b.alloc_event);
            }
            c.segment_blocks.push(b0..c.block_address.len() as u32);
        }
        c
    }
}

/// What the reconstruction had to skip or guess, per kind (see [`IssueKind`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Diagnostics {
    pub alloc_without_block: u64,
    pub free_requested_without_block: u64,
    pub free_outside_segments: u64,
    pub free_over_live_block: u64,
    pub free_clipped: u64,
    pub double_free: u64,
    pub requested_mismatch: u64,
    pub segment_alloc_mismatch: u64,
    pub segment_free_overlap: u64,
    pub segment_map_mismatch: u64,
    pub segment_unmap_overlap: u64,
    pub address_overflow: u64,
    /// File segments dropped or repaired because their blocks did not tile them.
    pub file_fixups: u64,
    /// Blocks inferred to own their unsplit remainder.
    pub inferred_unsplit: u64,
    /// File blocks allocated in the trace whose size the size rule was checked against, and how
    /// many it predicted exactly.
    pub size_rule_checked: u64,
    pub size_rule_agreed: u64,
    /// The first issues with their event (at most 200).
    pub issues: Vec<Issue>,
}

/// One skipped or adjusted trace entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Issue {
    pub event: u32,
    pub kind: IssueKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum IssueKind {
    /// An `alloc` whose block is not live at that point (freed again without a recorded free,
    /// or a second alloc at a live address): skipped.
    AllocWithoutBlock,
    /// A `free_requested` of no live, unrequested block: skipped.
    FreeRequestedWithoutBlock,
    /// A `free_completed` outside every segment of that time: kept as unplaced.
    FreeOutsideSegments,
    /// A `free_completed` inside a block that is live at that time: kept as unplaced.
    FreeOverLiveBlock,
    /// A freed block larger than the hole it must fit: cut to the hole.
    FreeClipped,
    /// A second unplaced free of the same address: skipped.
    DoubleFree,
    /// An `alloc` whose size differs from its block's `requested_size`.
    RequestedMismatch,
    /// A `segment_alloc` of no free segment of that size: skipped.
    SegmentAllocMismatch,
    /// A `segment_free` over an existing segment: skipped.
    SegmentFreeOverlap,
    /// A `segment_map` of a range that is not one free block of a segment: skipped.
    SegmentMapMismatch,
    /// A `segment_unmap` over an existing segment: skipped.
    SegmentUnmapOverlap,
    /// Address + size past 2^64: skipped.
    AddressOverflow,
}

impl Diagnostics {
    fn count(&mut self, k: IssueKind) {
        let c = match k {
            IssueKind::AllocWithoutBlock => &mut self.alloc_without_block,
            IssueKind::FreeRequestedWithoutBlock => &mut self.free_requested_without_block,
            IssueKind::FreeOutsideSegments => &mut self.free_outside_segments,
            IssueKind::FreeOverLiveBlock => &mut self.free_over_live_block,
            IssueKind::FreeClipped => &mut self.free_clipped,
            IssueKind::DoubleFree => &mut self.double_free,
            IssueKind::RequestedMismatch => &mut self.requested_mismatch,
            IssueKind::SegmentAllocMismatch => &mut self.segment_alloc_mismatch,
            IssueKind::SegmentFreeOverlap => &mut self.segment_free_overlap,
            IssueKind::SegmentMapMismatch => &mut self.segment_map_mismatch,
            IssueKind::SegmentUnmapOverlap => &mut self.segment_unmap_overlap,
            IssueKind::AddressOverflow => &mut self.address_overflow,
        };
        *c += 1;
    }

    /// Entries skipped because they did not fit the state (each breaks the requested or
    /// reserved relation before that entry).
    pub fn skipped(&self) -> u64 {
        self.alloc_without_block
            + self.double_free
            + self.segment_alloc_mismatch
            + self.segment_free_overlap
            + self.segment_map_mismatch
            + self.segment_unmap_overlap
            + self.address_overflow
    }

    /// One line per non-zero count, for the UI and the CLI.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        let mut add = |n: u64, what: &str| {
            if n > 0 {
                w.push(format!("{n} {what}"));
            }
        };
        add(
            self.alloc_without_block,
            "alloc entries whose block is not live there (skipped)",
        );
        add(
            self.free_requested_without_block,
            "free_requested entries of no live block (skipped)",
        );
        add(
            self.free_outside_segments,
            "frees outside every segment (shown as unplaced allocations)",
        );
        add(
            self.free_over_live_block,
            "frees over a live block (shown as unplaced allocations)",
        );
        add(
            self.free_clipped,
            "freed blocks cut to the free space that holds them",
        );
        add(
            self.double_free,
            "repeated frees of an unplaced allocation (skipped)",
        );
        add(
            self.requested_mismatch,
            "alloc entries whose size differs from their block's requested_size",
        );
        add(
            self.segment_alloc_mismatch,
            "segment_alloc entries of no free segment of that size (skipped)",
        );
        add(
            self.segment_free_overlap,
            "segment_free entries over an existing segment (skipped)",
        );
        add(
            self.segment_map_mismatch,
            "segment_map entries of memory that is not free in a segment (skipped)",
        );
        add(
            self.segment_unmap_overlap,
            "segment_unmap entries over an existing segment (skipped)",
        );
        add(
            self.address_overflow,
            "entries whose address + size overflows (skipped)",
        );
        add(
            self.file_fixups,
            "segments whose blocks do not tile them (repaired)",
        );
        w
    }
}

/// What one trace entry does to the state, as recorded by the build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum OpKind {
    Noop,
    Alloc,
    FreeRequested,
    FreeCompleted,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
}

/// Per-entry ops as parallel columns (index = event within the device's trace).
#[derive(Debug, Clone)]
pub(crate) struct Ops {
    pub kind: Vec<OpKind>,
    pub flags: Vec<u8>,
    pub addr: Vec<u64>,
    /// Block size (alloc/free), range size (segment ops).
    pub size: Vec<u64>,
    /// The block's requested size (alloc/free); the trace `size` otherwise.
    pub requested: Vec<u64>,
    pub stack: Vec<StackId>,
    /// The block's alloc event, when recorded.
    pub link: OptU32Column,
    /// Segment metadata of segment ops, sorted by event.
    pub meta: Vec<(u32, SegmentMeta)>,
}

impl Ops {
    /// Block: an inactive neighbour on the left (merge on release). Range: the boundary blocks.
    pub const LEFT: u8 = 1;
    pub const RIGHT: u8 = 2;
    /// Range ops: the range joins the segment on the left / right.
    pub const SEG_LEFT: u8 = 4;
    pub const SEG_RIGHT: u8 = 8;
    /// The block is `active_pending_free`.
    pub const PENDING: u8 = 16;
    /// The allocation is unplaced (no block).
    pub const ORPHAN: u8 = 32;

    fn bytes(&self) -> u64 {
        (self.kind.len() * (1 + 1 + 8 + 8 + 8 + 4 + 4)
            + self.meta.len() * std::mem::size_of::<(u32, SegmentMeta)>()) as u64
    }

    fn meta_of(&self, i: usize) -> Option<SegmentMeta> {
        let ev = i as u32;
        self.meta
            .binary_search_by_key(&ev, |(e, _)| *e)
            .ok()
            .and_then(|k| self.meta.get(k))
            .map(|(_, m)| *m)
    }

    fn block(&self, i: usize, f: u8) -> Blk {
        Blk {
            size: self.size.get(i).copied().unwrap_or(0),
            requested: self.requested.get(i).copied().unwrap_or(0),
            stack: self.stack.get(i).copied().unwrap_or(StackId::EMPTY),
            alloc_event: self.link.get(i),
            state: if f & Ops::PENDING != 0 {
                BlockState::ActivePendingFree
            } else {
                BlockState::ActiveAllocated
            },
        }
    }

    fn range_flags_of(f: u8) -> RangeFlags {
        RangeFlags {
            seg_left: f & Ops::SEG_LEFT != 0,
            seg_right: f & Ops::SEG_RIGHT != 0,
            blk_left: f & Ops::LEFT != 0,
            blk_right: f & Ops::RIGHT != 0,
        }
    }

    /// Applies entry `i` to the state before it.
    pub(crate) fn apply_forward(&self, st: &mut State, i: usize) {
        let (Some(&kind), Some(&f), Some(&addr)) =
            (self.kind.get(i), self.flags.get(i), self.addr.get(i))
        else {
            return;
        };
        let orphan = f & Ops::ORPHAN != 0;
        let size = self.size.get(i).copied().unwrap_or(0);
        match kind {
            OpKind::Noop => {}
            OpKind::Alloc if orphan => st.add_orphan(addr, self.block(i, f)),
            OpKind::Alloc => {
                st.carve(addr, self.block(i, f));
            }
            OpKind::FreeRequested => {
                st.set_state(
                    addr,
                    orphan,
                    BlockState::ActiveAllocated,
                    BlockState::ActivePendingFree,
                );
            }
            OpKind::FreeCompleted if orphan => {
                st.del_orphan(addr);
            }
            OpKind::FreeCompleted => {
                st.release(addr, f & Ops::LEFT != 0, f & Ops::RIGHT != 0);
            }
            OpKind::SegmentAlloc => {
                if let Some(m) = self.meta_of(i) {
                    st.add_segment(addr, size, m);
                }
            }
            OpKind::SegmentFree => {
                st.remove_free_segment(addr, size);
            }
            OpKind::SegmentMap => {
                if let Some(m) = self.meta_of(i) {
                    st.add_range(addr, size, Ops::range_flags_of(f), m);
                }
            }
            OpKind::SegmentUnmap => {
                st.remove_range(addr, size, self.meta_of(i));
            }
        }
    }

    /// Undoes entry `i` on the state after it.
    pub(crate) fn apply_backward(&self, st: &mut State, i: usize) {
        let (Some(&kind), Some(&f), Some(&addr)) =
            (self.kind.get(i), self.flags.get(i), self.addr.get(i))
        else {
            return;
        };
        let orphan = f & Ops::ORPHAN != 0;
        let size = self.size.get(i).copied().unwrap_or(0);
        match kind {
            OpKind::Noop => {}
            OpKind::Alloc if orphan => {
                st.del_orphan(addr);
            }
            OpKind::Alloc => {
                st.release(addr, f & Ops::LEFT != 0, f & Ops::RIGHT != 0);
            }
            OpKind::FreeRequested => {
                st.set_state(
                    addr,
                    orphan,
                    BlockState::ActivePendingFree,
                    BlockState::ActiveAllocated,
                );
            }
            OpKind::FreeCompleted if orphan => st.add_orphan(addr, self.block(i, f)),
            OpKind::FreeCompleted => {
                st.carve(addr, self.block(i, f));
            }
            OpKind::SegmentAlloc => {
                st.remove_free_segment(addr, size);
            }
            OpKind::SegmentFree => {
                if let Some(m) = self.meta_of(i) {
                    st.add_segment(addr, size, m);
                }
            }
            OpKind::SegmentMap => {
                st.remove_range(addr, size, self.meta_of(i));
            }
            OpKind::SegmentUnmap => {
                if let Some(m) = self.meta_of(i) {
                    st.add_range(addr, size, Ops::range_flags_of(f), m);
                }
            }
        }
    }
}

/// A stored state: segments and blocks as sorted columns.
#[derive(Debug, Clone)]
pub(crate) struct Checkpoint {
    pos: usize,
    segs: Vec<(u64, Seg)>,
    blocks: Vec<(u64, Blk)>,
    orphans: Vec<(u64, Blk)>,
}

impl Checkpoint {
    fn of(st: &State) -> Checkpoint {
        Checkpoint {
            pos: st.pos,
            segs: st.segs.to_vec(),
            blocks: st.blocks.to_vec(),
            orphans: st.orphans.iter().map(|(&a, b)| (a, *b)).collect(),
        }
    }

    /// Whether `st` holds the same segments, blocks and unplaced allocations.
    fn same_as(&self, st: &State) -> bool {
        self.pos == st.pos
            && self.segs.len() == st.segs.len()
            && self
                .segs
                .iter()
                .zip(st.segs.iter())
                .all(|((a, x), (b, y))| *a == b && x.size == y.size && x.meta == y.meta)
            && self
                .blocks
                .iter()
                .map(|(a, b)| (*a, b))
                .eq(st.blocks.iter())
            && self
                .orphans
                .iter()
                .map(|(a, b)| (a, b))
                .eq(st.orphans.iter())
    }

    /// The block at `addr` takes the `tail` bytes of the inactive block behind it (an unsplit
    /// remainder decided after this checkpoint was stored).
    fn grow_block(&mut self, addr: u64, tail: u64) {
        let Ok(i) = self.blocks.binary_search_by_key(&addr, |(a, _)| *a) else {
            return;
        };
        let Some(end) = self.blocks.get(i).map(|(a, b)| a + b.size) else {
            return;
        };
        let hole = match self.blocks.get_mut(i + 1) {
            Some((ha, hb)) if *ha == end && hb.state == BlockState::Inactive && hb.size >= tail => {
                if hb.size > tail {
                    *ha += tail;
                    hb.size -= tail;
                    false
                } else {
                    true
                }
            }
            _ => return,
        };
        if hole {
            self.blocks.remove(i + 1);
        }
        if let Some((_, b)) = self.blocks.get_mut(i) {
            b.size += tail;
        }
    }

    fn bytes(&self) -> u64 {
        self.blocks.len() as u64 * build::CHECKPOINT_BLOCK_BYTES
            + self.orphans.len() as u64 * build::CHECKPOINT_BLOCK_BYTES
            + self.segs.len() as u64 * build::CHECKPOINT_SEGMENT_BYTES
    }

    fn restore(&self, st: &mut State) {
        st.pos = self.pos;
        st.segs = AddrMap::from_sorted(&self.segs);
        st.blocks = AddrMap::from_sorted(&self.blocks);
        st.orphans = self.orphans.iter().copied().collect::<BTreeMap<_, _>>();
        st.recompute();
    }
}

/// Cost of restoring a checkpoint, in op applications per block restored (measured: a restore
/// costs about as much as replaying one entry per this many blocks).
const RESTORE_BLOCKS_PER_OP: usize = 8;

/// The allocator state history of one device: build once with [`AllocatorHistory::new`], then
/// [`seek`](AllocatorHistory::seek) states to any event. Immutable after the build and
/// independent of the snapshot (share it in an `Rc`/`Arc`); the mutable part is the [`State`]
/// the caller owns.
#[derive(Debug, Clone)]
pub struct AllocatorHistory {
    id: u64,
    device: u32,
    events: usize,
    ops: Ops,
    checkpoints: Vec<Checkpoint>,
    stride: usize,
    /// (event, requested bytes, device_free) of every `oom` entry.
    ooms: Vec<(u32, u64, Option<u64>)>,
    diag: Diagnostics,
}

impl AllocatorHistory {
    /// Reconstructs the states of `device` from the snapshot's final segments and its trace.
    pub fn new(s: &Snapshot, device: u32) -> AllocatorHistory {
        build::build(s, &crate::replay::replay_device(s, device))
    }

    /// The same, over the device's allocation table when the caller has it already.
    pub fn with_replay(s: &Snapshot, replay: &crate::replay::Replay) -> AllocatorHistory {
        build::build(s, replay)
    }

    pub fn device(&self) -> u32 {
        self.device
    }

    /// Number of trace entries of the device (states: `None` and `Some(0..events)`).
    pub fn events(&self) -> usize {
        self.events
    }

    /// Entries between checkpoints.
    pub fn stride(&self) -> usize {
        self.stride
    }

    pub fn diagnostics(&self) -> &Diagnostics {
        &self.diag
    }

    /// Bytes held by the ops and the checkpoints.
    pub fn memory_bytes(&self) -> u64 {
        self.ops.bytes() + self.checkpoints.iter().map(Checkpoint::bytes).sum::<u64>()
    }

    /// Bytes of the checkpoints alone.
    pub fn checkpoint_bytes(&self) -> u64 {
        self.checkpoints.iter().map(Checkpoint::bytes).sum()
    }

    /// Replays every op forward from the first checkpoint and backward from the last, checking
    /// that each checkpoint is met exactly. O(events); for tests and diagnostics.
    pub fn replays_consistently(&self) -> bool {
        let (Some(first), Some(last)) = (self.checkpoints.first(), self.checkpoints.last()) else {
            return false;
        };
        let mut st = State::empty(self.id);
        first.restore(&mut st);
        let mut ck = self.checkpoints.iter().peekable();
        while st.pos <= self.events {
            while ck.peek().is_some_and(|c| c.pos < st.pos) {
                ck.next();
            }
            if let Some(c) = ck.peek().filter(|c| c.pos == st.pos) {
                if !c.same_as(&st) {
                    return false;
                }
            }
            if st.pos == self.events {
                break;
            }
            let p = st.pos;
            self.ops.apply_forward(&mut st, p);
            st.pos += 1;
        }
        last.restore(&mut st);
        let mut ck = self.checkpoints.iter().rev().peekable();
        loop {
            while ck.peek().is_some_and(|c| c.pos > st.pos) {
                ck.next();
            }
            if let Some(c) = ck.peek().filter(|c| c.pos == st.pos) {
                if !c.same_as(&st) {
                    return false;
                }
            }
            if st.pos == 0 {
                return true;
            }
            st.pos -= 1;
            let p = st.pos;
            self.ops.apply_backward(&mut st, p);
        }
    }

    /// Event indices of the `oom` entries.
    pub fn ooms(&self) -> impl Iterator<Item = usize> + '_ {
        self.ooms.iter().map(|(e, _, _)| *e as usize)
    }

    /// The state after the device's last trace entry, straight from the file's segments: what
    /// `AllocatorHistory::new(s, device).state_at(Some(usize::MAX))` shows, without building the
    /// history (one partial backward scan of the trace). A viewer shows it while the history
    /// is built; seeking it with a history later restores that history's checkpoint.
    pub fn last_state(s: &Snapshot, device: u32) -> State {
        build::last_state(s, device)
    }

    /// A fresh state after `event` (`None`: before the first entry; past the end: the last).
    pub fn state_at(&self, event: Option<usize>) -> State {
        let mut st = State::empty(self.id);
        st.derived = true;
        st.history_id = None;
        self.seek(&mut st, event);
        st
    }

    /// Moves `st` to the state after `event` (`None`: before the first entry; past the end: the
    /// last), stepping from where it is or from the nearest checkpoint, whichever is cheaper.
    pub fn seek(&self, st: &mut State, event: Option<usize>) {
        let target = event.map_or(0, |e| e.saturating_add(1)).min(self.events);
        let ours = st.history_id == Some(self.id) && st.pos <= self.events;
        if !ours {
            st.history_id = Some(self.id);
            st.derived = true;
            st.watch.clear();
        }
        let walk = if ours {
            target.abs_diff(st.pos)
        } else {
            usize::MAX
        };
        match self.nearest_checkpoint(target) {
            Some(ck)
                if ck.pos.abs_diff(target) + ck.blocks.len() / RESTORE_BLOCKS_PER_OP < walk =>
            {
                ck.restore(st)
            }
            Some(_) => {}
            None if !ours => {
                // Never expected (the build always stores the first state); start empty.
                let keep = st.derived;
                *st = State::empty(self.id);
                st.derived = keep;
            }
            None => {}
        }
        while st.pos < target {
            self.ops.apply_forward(st, st.pos);
            st.pos += 1;
        }
        while st.pos > target {
            st.pos -= 1;
            self.ops.apply_backward(st, st.pos);
        }
        st.oom = target
            .checked_sub(1)
            .and_then(|e| {
                self.ooms
                    .binary_search_by_key(&(e as u32), |(x, _, _)| *x)
                    .ok()
            })
            .and_then(|k| self.ooms.get(k))
            .map(|&(_, req, dev)| (req, dev));
    }

    /// One entry forward (`+1`) or back (`-1`), or any distance; clamped to the trace.
    pub fn step(&self, st: &mut State, delta: isize) {
        let target = st.pos.saturating_add_signed(delta).min(self.events);
        self.seek(st, target.checked_sub(1));
    }

    fn nearest_checkpoint(&self, pos: usize) -> Option<&Checkpoint> {
        let k = self.checkpoints.partition_point(|c| c.pos <= pos);
        let below = k.checked_sub(1).and_then(|i| self.checkpoints.get(i));
        let above = self.checkpoints.get(k);
        match (below, above) {
            (Some(b), Some(a)) => Some(if pos - b.pos <= a.pos - pos { b } else { a }),
            (b, a) => b.or(a),
        }
    }
}
