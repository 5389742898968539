//! The picture of a file while it is read. Between chunks, every [`INTERVAL_MS`] or more,
//! core's model of the bytes so far (`Loader::with_prefix`: each device's trace up to its
//! last entry read, lent without a copy; no segments, so allocations from before the trace
//! appear only where the prefix frees them) is laid out for the device with the most entries
//! so far and sent as a [`FromWorker::Partial`]; the page draws it as the timeline until the
//! file's own layout arrives. A layout costs time in proportion to the prefix, so the next one
//! waits at least [`COST_FACTOR`] times as long as the last one took: pictures take at most
//! about 1/[`COST_FACTOR`] of the worker's time while it reads.

use crate::wire::clock::now_ms;
use crate::wire::pack;
use crate::wire::protocol::{FromWorker, PartialInfo};
use memlens_core::layout::{TimelineKind, TimelineLayout};
use memlens_core::range::PartLoader;
use memlens_core::Snapshot;

/// Shortest time between two pictures.
const INTERVAL_MS: f64 = 400.0;
/// The time to the next picture is at least this many times what the last one cost.
const COST_FACTOR: f64 = 10.0;

/// When the next picture of file `id` is due.
pub struct Partials {
    id: u32,
    /// When the read began.
    start_ms: f64,
    next_ms: f64,
    on: bool,
}

impl Partials {
    /// `on`: the page draws them (its first view is a timeline of the whole trace).
    pub fn new(id: u32, on: bool) -> Partials {
        Partials {
            id,
            start_ms: now_ms(),
            next_ms: 0.0,
            on,
        }
    }

    /// After a chunk (`done` of `total` bytes read): the picture of the bytes so far, when due
    /// and when the rest of the file, read at the pace so far, would take [`INTERVAL_MS`] or
    /// more (a small file's whole layout comes sooner than a picture would help).
    pub fn after_chunk(&mut self, loader: &mut PartLoader, done: f64, total: f64) {
        let t0 = now_ms();
        if !self.on || t0 < self.next_ms || done <= 0.0 {
            return;
        }
        let rest_ms = (t0 - self.start_ms) * (total - done) / done;
        if rest_ms < INTERVAL_MS {
            return;
        }
        let id = self.id;
        let out = loader.with_prefix(|snap| {
            let (info, layout) = picture(snap, done, total, t0);
            let msg = FromWorker::Partial { id, info };
            match &layout {
                Some(l) => pack::reply_with(&msg, l),
                None => pack::reply(&msg),
            }
        });
        if let Some(out) = out {
            out.post();
        }
        let end = now_ms();
        self.next_ms = end + INTERVAL_MS.max(COST_FACTOR * (end - t0));
    }
}

/// The facts and the layout of the device with the most entries in `snap` (a prefix).
pub(crate) fn picture(
    snap: &Snapshot,
    done: f64,
    total: f64,
    t0: f64,
) -> (PartialInfo, Option<TimelineLayout>) {
    let device = snap
        .default_device()
        .filter(|&d| !snap.device_rows(d).is_empty());
    let layout = device.map(|d| TimelineLayout::build_preview(snap, d, TimelineKind::Active));
    let info = PartialInfo {
        done_bytes: done,
        total_bytes: total,
        encoding: snap.encoding.map(|e| e.to_string()).unwrap_or_default(),
        events: snap
            .device_traces
            .iter()
            .map(|t| t.rows.len() as u32)
            .collect(),
        device,
        build_ms: now_ms() - t0,
    };
    (info, layout)
}
