//! Pending-free stalls: memory a tensor no longer uses but the allocator cannot reuse yet,
//! between its `free_requested` and its `free_completed` (`record_stream`: the block waits for
//! another stream's work). A block still pending at the end of the trace stalls until then.
//! Largest first by time held (µs where the trace has times, else
//! events), then bytes.

use super::frames::{StackFacts, BEFORE_TRACE};
use crate::model::Snapshot;
use crate::replay::{EventIdx, Replay};
use serde::{Deserialize, Serialize};

/// Stalls listed.
pub const TOP_PENDING: usize = 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingFree {
    pub frame: String,
    pub bytes: u64,
    pub free_requested_event: EventIdx,
    /// `None`: still pending after the last event (measured to the last event).
    pub free_event: Option<EventIdx>,
    /// Time between the two entries, when both have a time.
    pub duration_us: Option<i64>,
    pub events: u32,
}

/// Summary plus the largest stalls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PendingFrees {
    pub count: u64,
    pub bytes: u64,
    pub largest: Vec<PendingFree>,
}

pub fn pending_frees(s: &Snapshot, replay: &Replay, facts: &mut StackFacts) -> PendingFrees {
    let start = s.device_rows(replay.device).start as usize;
    let mut all: Vec<PendingFree> = Vec::new();
    let mut out = PendingFrees::default();
    for a in &replay.allocations {
        let Some(req) = a.free_requested_event else {
            continue;
        };
        let last = replay.events.saturating_sub(1);
        let free = a.free_event.unwrap_or(last);
        if a.free_event.is_some_and(|f| f <= req + 1) || free < req {
            continue;
        }
        out.count += 1;
        out.bytes += a.size_bytes;
        let time = |e: EventIdx| s.trace.time_of(start + e as usize);
        let frame = match a.alloc_event {
            None => BEFORE_TRACE.to_string(),
            Some(_) => {
                let g = facts.group(s, a.stack);
                facts.names[g as usize].clone()
            }
        };
        all.push(PendingFree {
            frame,
            bytes: a.size_bytes,
            free_requested_event: req,
            free_event: a.free_event,
            duration_us: time(free).zip(time(req)).map(|(f, r)| f - r),
            events: free - req,
        });
    }
    all.sort_by_key(|a| std::cmp::Reverse((a.duration_us, a.events, a.bytes)));
    all.truncate(TOP_PENDING);
    out.largest = all;
    out
}
