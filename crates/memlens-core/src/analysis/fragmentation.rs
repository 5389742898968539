//! Fragmentation along the trace and at every `oom`, read from allocator states ([`States`]: a
//! built Allocator State History seeked, or [`SampledStates`] reconstructed at just the events
//! [`wanted`] lists): reserved, allocated, inactive_split, whole free segments and the largest
//! free block per pool, at up to [`MAX_SAMPLES`] evenly spaced events (fewer when the state has
//! many blocks, so the work stays bounded by [`SAMPLE_BLOCK_BUDGET`] block visits).
//!
//! At an `oom` the pool asked is the default pool of the entry's stream, small for requests of
//! at most 1 MiB (as torch picks it), large above; the request "would have fit" when the pool's
//! free total (its inactive blocks) holds it — then it failed for lack of a large enough hole.

use crate::model::Snapshot;
use crate::replay::EventIdx;
use crate::state::{AllocatorHistory, SampledStates, SegmentKind, State, StateNumbers};
use serde::{Deserialize, Serialize};

pub const MAX_SAMPLES: usize = 256;
pub const SAMPLE_BLOCK_BUDGET: usize = 4_000_000;
/// Requests up to this size go to the small pool.
const SMALL_REQUEST_BYTES: u64 = 1 << 20;

/// Where the analysis reads allocator states from.
pub trait States {
    fn device(&self) -> u32;
    /// Number of trace entries of the device.
    fn events(&self) -> usize;
    /// Event indices of the `oom` entries.
    fn oom_events(&self) -> Vec<usize>;
    /// The state after `event` (`None`: before the first entry).
    fn state(&mut self, event: Option<EventIdx>) -> &State;
}

/// A built history and the state it is seeked to.
pub struct Seeked<'h> {
    history: &'h AllocatorHistory,
    state: State,
}

impl<'h> Seeked<'h> {
    pub fn new(history: &'h AllocatorHistory) -> Seeked<'h> {
        Seeked {
            history,
            state: history.state_at(None),
        }
    }
}

impl States for Seeked<'_> {
    fn device(&self) -> u32 {
        self.history.device()
    }
    fn events(&self) -> usize {
        self.history.events()
    }
    fn oom_events(&self) -> Vec<usize> {
        self.history.ooms().collect()
    }
    fn state(&mut self, event: Option<EventIdx>) -> &State {
        self.history
            .seek(&mut self.state, event.map(|e| e as usize));
        &self.state
    }
}

impl States for SampledStates {
    fn device(&self) -> u32 {
        SampledStates::device(self)
    }
    fn events(&self) -> usize {
        SampledStates::events(self)
    }
    fn oom_events(&self) -> Vec<usize> {
        self.ooms().collect()
    }
    fn state(&mut self, event: Option<EventIdx>) -> &State {
        self.state_at(event.map(|e| e as usize))
    }
}

/// The events [`over_time`] samples, given the number of trace entries and the number of
/// blocks of the last state.
fn sample_events(events: usize, blocks: usize) -> Vec<usize> {
    if events == 0 {
        return Vec::new();
    }
    let n = (SAMPLE_BLOCK_BUDGET / blocks.max(1))
        .clamp(16, MAX_SAMPLES)
        .min(events);
    (0..n)
        .map(|i| {
            if n == 1 {
                events - 1
            } else {
                i * (events - 1) / (n - 1)
            }
        })
        .collect()
}

/// Every event the diagnosis reads a state at: `moments` (its peak, the end), the samples of
/// [`over_time`] and every `oom` — for [`SampledStates::new`], given its final state.
pub fn wanted(
    last: &State,
    events: usize,
    ooms: &[usize],
    moments: &[Option<EventIdx>],
) -> Vec<Option<usize>> {
    let mut w: Vec<Option<usize>> = moments.iter().map(|e| e.map(|e| e as usize)).collect();
    w.extend(sample_events(events, last.counts().1).into_iter().map(Some));
    w.extend(ooms.iter().map(|&e| Some(e)));
    w
}

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

/// Which pool a segment belongs to: its private pool, else its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PoolKey {
    Private(i64, i64),
    Kind(SegmentKind),
}

fn pool_key(kind: SegmentKind, pool_id: Option<(i64, i64)>) -> PoolKey {
    match pool_id {
        Some(p) if p != (0, 0) => PoolKey::Private(p.0, p.1),
        _ => PoolKey::Kind(kind),
    }
}

fn pool_name(key: PoolKey) -> String {
    match key {
        PoolKey::Private(a, b) => format!("private {a},{b}"),
        PoolKey::Kind(SegmentKind::Small) => "small".into(),
        PoolKey::Kind(SegmentKind::Large) => "large".into(),
        PoolKey::Kind(SegmentKind::Unknown) => "unknown".into(),
    }
}

/// Free memory per pool of a state; `stream` restricts to one stream. Segments are grouped by
/// [`PoolKey`] and named once per pool (not once per segment: this runs for every sampled state).
fn pools(st: &State, stream: Option<u64>) -> Vec<PoolFree> {
    let mut by_key: Vec<(PoolKey, PoolFree)> = Vec::new();
    for seg in st
        .segments()
        .filter(|g| stream.is_none_or(|s| g.stream == s))
    {
        let key = pool_key(seg.kind, seg.pool_id);
        let i = match by_key.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                by_key.push((
                    key,
                    PoolFree {
                        pool: pool_name(key),
                        reserved_bytes: 0,
                        free_bytes: 0,
                        largest_free_block_bytes: 0,
                    },
                ));
                by_key.len() - 1
            }
        };
        let Some((_, p)) = by_key.get_mut(i) else {
            continue;
        };
        p.reserved_bytes += seg.size_bytes;
        for b in st.segment_blocks(&seg).filter(|b| !b.state.is_active()) {
            p.free_bytes += b.size_bytes;
            p.largest_free_block_bytes = p.largest_free_block_bytes.max(b.size_bytes);
        }
    }
    let mut out: Vec<PoolFree> = by_key.into_iter().map(|(_, p)| p).collect();
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
pub fn at(src: &mut impl States, event: Option<EventIdx>) -> Fragmentation {
    let st = src.state(event);
    from_numbers(&st.numbers(), event, pools(st, None))
}

/// Samples along the trace (see the module docs).
pub fn over_time(src: &mut impl States) -> Vec<Fragmentation> {
    let events = src.events();
    let Some(end) = events.checked_sub(1) else {
        return vec![at(src, None)];
    };
    let blocks = src.state(Some(end as EventIdx)).counts().1;
    sample_events(events, blocks)
        .into_iter()
        .map(|e| at(src, Some(e as EventIdx)))
        .collect()
}

/// Every `oom` of the device.
pub fn ooms(
    s: &Snapshot,
    src: &mut impl States,
    mut frame_of: impl FnMut(u32) -> String,
    capacity_bytes: Option<u64>,
) -> Vec<Oom> {
    let start = s.device_rows(src.device()).start;
    let t = &s.trace;
    src.oom_events()
        .into_iter()
        .map(|e| {
            let st = src.state(Some(e as EventIdx));
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
