//! A whole file is committed to only when its decode fits in the worker: a tab's wasm memory
//! ends at 4 GiB, and a worker that reaches it dies (a trap), after minutes of progress bar.
//! So, once the first chunks of a pickle hold [`HEAD_ENTRIES`] trace entries past the chunk
//! the trace began in, `memlens_core::estimate` foretells what the whole file's decode holds;
//! past the limit, the file is refused with what fits of it ([`TooLarge`]: the page offers its
//! last events, opened with `range::PartLoader`). A gzip file is checked against the
//! decompressed size its first chunks foretell (`crate::worker::gunzip::uncompressed_bytes`). A
//! part and JSON/HTML (read whole, small) are not checked.

use crate::wire::protocol::TooLarge;
use memlens_core::estimate::{estimate, HeadShape};
use memlens_core::raw::DROP_EVERY_ROWS;

/// Decoder memory (`memlens_core::estimate`'s count, which doubles what the head says of the
/// rest: `estimate::MARGIN`) past which a whole file is refused. Measured on synth training
/// files with the check off (docs/BENCHMARKS.md, "Any size"): 4 GB (count 954 MB) painted with
/// 2.0-2.2 GB of worker wasm memory, 6 GB (count 1430 MB) with 2.5 GB, and 8 GB (count 1907
/// MB) killed the worker. So a steady trace is refused from ~1 GB of count (4 GB opens whole,
/// 6 and 8 GB are refused with an offer), which leaves the 4 GiB room for the layouts and the
/// history built after the first paint.
pub const LIMIT_BYTES: f64 = 2.0e9;

/// Entries read past the trace's first chunk before the estimate is trusted.
const HEAD_ENTRIES: u64 = 20_000;

/// What the head says so far.
pub enum Verdict {
    /// Not enough of the trace read yet.
    Undecided,
    Fits,
    TooLarge(TooLarge),
}

/// The verdict on a file of `file_bytes` whose decoder holds `head` (`None`: not a pickle).
pub fn check(file_bytes: f64, head: Option<HeadShape>, limit_bytes: f64) -> Verdict {
    let Some(head) = head else {
        return Verdict::Fits;
    };
    let enough = head
        .trace_start
        .is_some_and(|m| head.entries >= m.entries + HEAD_ENTRIES);
    if head.bytes_read as f64 >= file_bytes {
        // Read already: it fit while it was decoded.
        return Verdict::Fits;
    }
    if !enough {
        return Verdict::Undecided;
    }
    let Some(e) = estimate(file_bytes as u64, &head) else {
        return Verdict::Fits;
    };
    if (e.held_bytes as f64) <= limit_bytes {
        return Verdict::Fits;
    }
    let last_fits = e
        .entries_within(limit_bytes as u64, DROP_EVERY_ROWS as u64)
        .unwrap_or(0);
    Verdict::TooLarge(TooLarge {
        file_bytes,
        estimated_bytes: e.held_bytes as f64,
        limit_bytes,
        entries: e.entries as f64,
        last_fits: last_fits as f64,
    })
}
