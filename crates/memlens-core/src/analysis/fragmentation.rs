//! Fragmentation along the trace and at every `oom`, read from the Allocator State History:
//! reserved, allocated, inactive_split, whole free segments and the largest free block per pool,
//! at up to [`MAX_SAMPLES`] evenly spaced events (fewer when the state has many blocks, so the
//! work stays bounded by [`SAMPLE_BLOCK_BUDGET`] block visits).
//!
//! At an `oom` the pool asked is the default pool of the entry's stream, small for requests of
//! at most 1 MiB (as torch picks it), large above; the request "would have fit" when the pool's
//! free total (its inactive blocks) holds it — then it failed for lack of a large enough hole.

use crate::model::Snapshot;
use crate::replay::EventIdx;
use crate::state::{AllocatorHistory, SegmentKind, State, StateNumbers};
use serde::{Deserialize, Serialize};

pub const MAX_SAMPLES: usize = 256;
pub const SAMPLE_BLOCK_BUDGET: usize = 4_000_000;
/// Requests up to this size go to the small pool.
const SMALL_REQUEST_BYTES: u64 = 1 << 20;

/// Free memory of one pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolFree {
    /// `small`, `large`, `unknown`, or `private a,b`.
    pub pool: String,
    pub reserved_bytes: u64,
    pub free_bytes: u64,
    pub largest_free_block_bytes: u64,
}

/// Reserved memory split as the ledger's last line needs it, at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fragmentation {
    pub event: Option<EventIdx>,
    pub reserved_bytes: u64,
    /// Σ size of allocated blocks (rounded sizes).
    pub allocated_bytes: u64,
    pub requested_bytes: u64,
    /// Σ (block size − request) over active blocks.
    pub rounding_bytes: u64,
    pub pending_free_bytes: u64,
    /// Free blocks inside segments that also hold live blocks.
    pub inactive_split_bytes: u64,
    /// Segments that are wholly free (`empty_cache` would return them).
    pub free_segments_bytes: u64,
    pub largest_free_block_bytes: u64,
    pub pools: Vec<PoolFree>,
}

/// One `oom` entry against the state it happened in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Oom {
    pub event: EventIdx,
    pub requested_bytes: u64,
    pub device_free_bytes: Option<u64>,
    pub reserved_bytes: u64,
    pub allocated_bytes: u64,
    /// The pool asked (see the module docs).
    pub pool: String,
    /// Largest free block of the pool asked.
    pub largest_free_block_bytes: u64,
    /// Free total (inactive blocks) of the pool asked.
    pub free_total_bytes: u64,
    pub fits_in_free_total: bool,
    pub stream: u64,
    /// User frame of the failing request.
    pub frame: String,
    /// Device memory held outside this allocator (capacity − reserved − device_free), when the
    /// capacity is known.
    pub outside_allocator_bytes: Option<u64>,
}

fn pool_name(kind: SegmentKind, pool_id: Option<(i64, i64)>) -> String {
    match pool_id {
        Some(p) if p != (0, 0) => format!("private {},{}", p.0, p.1),
        _ => match kind {
            SegmentKind::Small => "small".into(),
            SegmentKind::Large => "large".into(),
            SegmentKind::Unknown => "unknown".into(),
        },
    }
}

/// Free memory per pool of a state; `stream` restricts to one stream.
fn pools(st: &State, stream: Option<u64>) -> Vec<PoolFree> {
    let mut out: Vec<PoolFree> = Vec::new();
    for seg in st
        .segments()
        .filter(|g| stream.is_none_or(|s| g.stream == s))
    {
        let name = pool_name(seg.kind, seg.pool_id);
        let i = match out.iter().position(|p| p.pool == name) {
            Some(i) => i,
            None => {
                out.push(PoolFree {
                    pool: name,
                    reserved_bytes: 0,
                    free_bytes: 0,
                    largest_free_block_bytes: 0,
                });
                out.len() - 1
            }
        };
        out[i].reserved_bytes += seg.size_bytes;
        for b in st.segment_blocks(&seg).filter(|b| !b.state.is_active()) {
            out[i].free_bytes += b.size_bytes;
            out[i].largest_free_block_bytes = out[i].largest_free_block_bytes.max(b.size_bytes);
        }
    }
    out.sort_by(|a, b| a.pool.cmp(&b.pool));
    out
}

fn from_numbers(n: &StateNumbers, event: Option<EventIdx>, pools: Vec<PoolFree>) -> Fragmentation {
    Fragmentation {
        event,
        reserved_bytes: n.reserved_bytes,
        allocated_bytes: n.allocated_bytes,
        requested_bytes: n.requested_bytes,
        rounding_bytes: n.rounding_waste_bytes,
        pending_free_bytes: n.pending_free_bytes,
        inactive_split_bytes: n.inactive_split_bytes,
        free_segments_bytes: n.inactive_bytes.saturating_sub(n.inactive_split_bytes),
        largest_free_block_bytes: n.largest_free_block_bytes,
        pools,
    }
}

/// The split of reserved memory after `event`.
pub fn at(h: &AllocatorHistory, st: &mut State, event: Option<EventIdx>) -> Fragmentation {
    h.seek(st, event.map(|e| e as usize));
    from_numbers(&st.numbers(), event, pools(st, None))
}

/// Samples along the trace (see the module docs).
pub fn over_time(h: &AllocatorHistory, st: &mut State) -> Vec<Fragmentation> {
    let events = h.events();
    if events == 0 {
        return vec![at(h, st, None)];
    }
    let blocks = st.counts().1.max(1);
    let n = (SAMPLE_BLOCK_BUDGET / blocks)
        .clamp(16, MAX_SAMPLES)
        .min(events);
    (0..n)
        .map(|i| {
            let e = if n == 1 {
                events - 1
            } else {
                i * (events - 1) / (n - 1)
            };
            at(h, st, Some(e as EventIdx))
        })
        .collect()
}

/// Every `oom` of the device.
pub fn ooms(
    s: &Snapshot,
    h: &AllocatorHistory,
    st: &mut State,
    mut frame_of: impl FnMut(u32) -> String,
    capacity_bytes: Option<u64>,
) -> Vec<Oom> {
    let start = s.device_rows(h.device()).start;
    let t = &s.trace;
    let events: Vec<usize> = h.ooms().collect();
    events
        .into_iter()
        .map(|e| {
            h.seek(st, Some(e));
            let n = st.numbers();
            let row = start as usize + e;
            let req = t.size_bytes.get(row).copied().unwrap_or(0);
            let stream = t.stream.get(row).copied().unwrap_or(0);
            let kind = if req <= SMALL_REQUEST_BYTES {
                "small"
            } else {
                "large"
            };
            let p = pools(st, Some(stream)).into_iter().find(|p| p.pool == kind);
            let (largest, free) = p.map_or((0, 0), |p| (p.largest_free_block_bytes, p.free_bytes));
            let device_free = t.device_free(row as u32);
            Oom {
                event: e as EventIdx,
                requested_bytes: req,
                device_free_bytes: device_free,
                reserved_bytes: n.reserved_bytes,
                allocated_bytes: n.allocated_bytes,
                pool: kind.to_string(),
                largest_free_block_bytes: largest,
                free_total_bytes: free,
                fits_in_free_total: req <= free,
                stream,
                frame: frame_of(row as u32),
                outside_allocator_bytes: capacity_bytes.map(|c| {
                    c.saturating_sub(n.reserved_bytes)
                        .saturating_sub(device_free.unwrap_or(0))
                }),
            }
        })
        .collect()
}
