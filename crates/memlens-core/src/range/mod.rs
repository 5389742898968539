//! Part of a trace: the last N events, an event range or a time range of every device, as a
//! smaller [`Snapshot`] that every later stage reads as it reads a whole one.
//!
//! The allocator state outside the range stays exact, by the same rules as a file whose ring
//! buffer dropped its oldest entries (`_record_memory_history(max_entries=N)` keeps the last N
//! of each device, which is what [`EventRange::Last`] gives):
//! - allocations made before the range and freed inside it keep their free, and become
//!   allocations from before the trace (`replay::Origin::UnmatchedFree`);
//! - allocations made before the range and alive at its end are active blocks of the segments
//!   (`replay::Origin::Untraced`);
//! - the segments are the file's when the range runs to the device's last event; a range that
//!   ends earlier takes the allocator state after its last event, as the Allocator State
//!   History reconstructs it from the file's segments ([`crate::state`]).
//!
//! Events are counted per device, 0-based ([`crate::replay::EventIdx`]); times are microseconds
//! since the snapshot's first recorded event. Annotations outside a device's selected span are
//! dropped; host (pinned memory) data is kept whole.

mod part;
pub use part::{PartError, PartLoader};

use crate::model::{Block, BlockState, DeviceTrace, Segment, Snapshot};
use crate::state::{AllocatorHistory, SegmentKind};
use crate::trace::TIME_NONE;
use std::fmt;
use std::ops::Range;
use thiserror::Error;

/// Which events of each device to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventRange {
    /// The last `n` events of each device.
    Last(u32),
    /// Events `from..to` of each device (`to` excluded; `None`: to the last one).
    Events { from: u32, to: Option<u32> },
    /// Events whose time lies in `from_us..=to_us`, in µs since the snapshot's first event
    /// (`None`: to the last one).
    Time { from_us: i64, to_us: Option<i64> },
}

/// Why a range cannot be read or applied.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RangeError {
    #[error("bad range {0:?}: want last:N, FROM..TO (events), or FROM..TO with a unit (1.5s..3s, 200ms.., ..900us)")]
    Syntax(String),
    #[error("empty range {0}: FROM is past TO")]
    Backwards(String),
    #[error("a time range needs `time_us` in the trace (torch ≥ 2.1); this one has none: use an event range")]
    NoTimes,
}

impl EventRange {
    /// Reads `last:N`, `FROM..TO` (event indices, either end may be left out) or the same with a
    /// time unit on the numbers (`us`, `ms`, `s`: since the first event).
    pub fn parse(text: &str) -> Result<EventRange, RangeError> {
        let t = text.trim();
        let bad = || RangeError::Syntax(text.to_string());
        if let Some(n) = t.strip_prefix("last:") {
            return n.trim().parse().map(EventRange::Last).map_err(|_| bad());
        }
        let (a, b) = t.split_once("..").ok_or_else(bad)?;
        let (a, b) = (a.trim(), b.trim());
        let timed = [a, b].iter().any(|x| x.ends_with('s'));
        let r = if timed {
            EventRange::Time {
                from_us: if a.is_empty() {
                    0
                } else {
                    micros(a).ok_or_else(bad)?
                },
                to_us: if b.is_empty() {
                    None
                } else {
                    Some(micros(b).ok_or_else(bad)?)
                },
            }
        } else {
            EventRange::Events {
                from: if a.is_empty() {
                    0
                } else {
                    a.parse().map_err(|_| bad())?
                },
                to: if b.is_empty() {
                    None
                } else {
                    Some(b.parse().map_err(|_| bad())?)
                },
            }
        };
        let backwards = match r {
            EventRange::Events { from, to: Some(to) } => from > to,
            EventRange::Time {
                from_us,
                to_us: Some(to),
            } => from_us > to,
            _ => false,
        };
        if backwards {
            return Err(RangeError::Backwards(text.to_string()));
        }
        Ok(r)
    }

    /// Events of `device` that the range selects (`origin_us`: [`time_origin_us`]).
    pub fn device_events(&self, s: &Snapshot, device: u32, origin_us: Option<i64>) -> Range<u32> {
        let rows = s.device_rows(device);
        let n = rows.len() as u32;
        match *self {
            EventRange::Last(k) => n.saturating_sub(k)..n,
            EventRange::Events { from, to } => {
                let end = to.unwrap_or(n).min(n);
                from.min(end)..end
            }
            EventRange::Time { from_us, to_us } => {
                let Some(origin) = origin_us else { return 0..0 };
                let inside = |r: u32| {
                    s.trace.time_of(r as usize).is_some_and(|t| {
                        let since = t.saturating_sub(origin);
                        since >= from_us && to_us.is_none_or(|to| since <= to)
                    })
                };
                let first = rows.clone().position(inside);
                let last = rows.clone().rposition(inside);
                match (first, last) {
                    (Some(a), Some(b)) => a as u32..b as u32 + 1,
                    _ => 0..0,
                }
            }
        }
    }
}

impl fmt::Display for EventRange {
    /// The form [`EventRange::parse`] reads (times in µs).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let end = |x: Option<String>| x.unwrap_or_default();
        match *self {
            EventRange::Last(n) => write!(f, "last:{n}"),
            EventRange::Events { from, to } => {
                write!(f, "{from}..{}", end(to.map(|t| t.to_string())))
            }
            EventRange::Time { from_us, to_us } => {
                write!(f, "{from_us}us..{}", end(to_us.map(|t| format!("{t}us"))))
            }
        }
    }
}

/// `1.5s`, `200ms`, `900us` as microseconds.
fn micros(x: &str) -> Option<i64> {
    let (num, scale) = if let Some(n) = x.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = x.strip_suffix("ms") {
        (n, 1e3)
    } else {
        (x.strip_suffix('s')?, 1e6)
    };
    let v: f64 = num.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| (v * scale).round() as i64)
}

/// The time of the snapshot's first recorded event (µs since the epoch); `None` without times.
pub fn time_origin_us(s: &Snapshot) -> Option<i64> {
    (0..s.trace.len()).filter_map(|r| s.trace.time_of(r)).min()
}

/// The snapshot with only the events `range` selects on each device (see the module docs).
pub fn slice(mut s: Snapshot, range: &EventRange) -> Result<Snapshot, RangeError> {
    let origin = time_origin_us(&s);
    if matches!(range, EventRange::Time { .. }) && origin.is_none() && !s.trace.is_empty() {
        return Err(RangeError::NoTimes);
    }
    let mut rows = Vec::with_capacity(s.device_traces.len());
    let mut traces: Vec<DeviceTrace> = Vec::with_capacity(s.device_traces.len());
    let mut cut_short = Vec::new();
    for dt in &s.device_traces {
        let ev = range.device_events(&s, dt.device, origin);
        let start = traces.last().map_or(0, |t| t.rows.end);
        traces.push(DeviceTrace {
            device: dt.device,
            rows: start..start + ev.len() as u32,
        });
        if (ev.end as usize) < dt.rows.len() {
            cut_short.push((dt.device, ev.end));
        }
        rows.push((dt.rows.start + ev.start) as usize..(dt.rows.start + ev.end) as usize);
    }
    // Segments after a range's end come from the whole trace, so before it is cut.
    let parts: Vec<_> = cut_short
        .iter()
        .map(|&(device, end)| segments_at(&mut s, device, end))
        .collect();
    for (device, (segments, blocks)) in cut_short.iter().map(|c| c.0).zip(parts) {
        replace_device_segments(&mut s, device, segments, blocks);
    }
    // An annotation is kept when its device's part spans its time (or either has no time).
    let spans: Vec<Span> = traces
        .iter()
        .zip(&rows)
        .map(|(t, r)| Span {
            device: t.device,
            empty: r.is_empty(),
            times: time_span(&s, r.clone()),
        })
        .collect();
    s.external_annotations.retain(|a| {
        let t = a.time_us;
        match spans.iter().find(|x| x.device == a.device) {
            None => true,
            Some(Span {
                times: Some((lo, hi)),
                ..
            }) => t == TIME_NONE || (*lo..=*hi).contains(&t),
            Some(x) => !x.empty,
        }
    });
    // The warnings about the trace are the part's (it has more frees from before it).
    let whole_trace_warnings = crate::model::normalize::trace_warnings(&s);
    s.warnings.retain(|w| !whole_trace_warnings.contains(w));
    s.trace = s.trace.select(&rows);
    s.device_traces = traces;
    let part_warnings = crate::model::normalize::trace_warnings(&s);
    s.warnings.extend(part_warnings);
    Ok(s)
}

/// A device's selected rows: whether there are none, and their first and last time.
struct Span {
    device: u32,
    empty: bool,
    times: Option<(i64, i64)>,
}

/// First and last time of the rows `r` (`None` when it has no time).
fn time_span(s: &Snapshot, r: Range<usize>) -> Option<(i64, i64)> {
    let first = r.clone().find_map(|x| s.trace.time_of(x))?;
    let last = r.rev().find_map(|x| s.trace.time_of(x))?;
    Some((first, last))
}

/// `device`'s segments and blocks after its event `end - 1` (before its first event when `end`
/// is 0), as the Allocator State History reconstructs them over the whole trace of `s`.
fn segments_at(s: &mut Snapshot, device: u32, end: u32) -> (Vec<Segment>, Vec<Block>) {
    let history = AllocatorHistory::new(s, device);
    let state = history.state_at((end as usize).checked_sub(1));
    let (small, large) = (s.strings.intern("small"), s.strings.intern("large"));
    let mut segments = Vec::new();
    let mut blocks = Vec::new();
    for seg in state.segments() {
        let b0 = blocks.len() as u32;
        let (mut allocated, mut active, mut requested) = (0u64, 0u64, 0u64);
        for b in state.segment_blocks(&seg) {
            if b.state == BlockState::ActiveAllocated {
                allocated += b.size_bytes;
                requested += b.requested_size_bytes;
            }
            if b.state.is_active() {
                active += b.size_bytes;
            }
            blocks.push(Block {
                address: b.address,
                size_bytes: b.size_bytes,
                requested_size_bytes: b.requested_size_bytes,
                state: b.state,
                stack: b.stack,
                legacy: false,
            });
        }
        segments.push(Segment {
            device,
            address: seg.address,
            total_size_bytes: seg.size_bytes,
            allocated_size_bytes: allocated,
            active_size_bytes: active,
            requested_size_bytes: requested,
            stream: seg.stream,
            segment_type: if seg.kind == SegmentKind::Small {
                small
            } else {
                large
            },
            pool_id: seg.pool_id.unwrap_or((0, 0)),
            is_expandable: seg.is_expandable,
            stack: seg.stack,
            blocks: b0..blocks.len() as u32,
        });
    }
    let unplaced = state.unplaced().count();
    if unplaced > 0 {
        s.warnings.push(format!(
            "device {device}: {unplaced} allocations live at the range's end lie in no reconstructed segment; the part leaves them out"
        ));
    }
    (segments, blocks)
}

/// Puts `segments` (block ranges into `blocks`) in place of `device`'s, keeping the others.
fn replace_device_segments(
    s: &mut Snapshot,
    device: u32,
    segments: Vec<Segment>,
    blocks: Vec<Block>,
) {
    let mut all_segments = Vec::with_capacity(s.segments.len());
    let mut all_blocks = Vec::with_capacity(s.blocks.len());
    let others = s.segments.iter().filter(|g| g.device != device);
    for seg in others {
        let b0 = all_blocks.len() as u32;
        all_blocks.extend_from_slice(s.segment_blocks(seg));
        all_segments.push(Segment {
            blocks: b0..all_blocks.len() as u32,
            ..seg.clone()
        });
    }
    let shift = all_blocks.len() as u32;
    all_blocks.extend(blocks);
    all_segments.extend(segments.into_iter().map(|g| Segment {
        blocks: g.blocks.start + shift..g.blocks.end + shift,
        ..g
    }));
    s.segments = all_segments;
    s.blocks = all_blocks;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_read_and_print_back() {
        for (text, want) in [
            ("last:500", EventRange::Last(500)),
            (
                "10..20",
                EventRange::Events {
                    from: 10,
                    to: Some(20),
                },
            ),
            ("10..", EventRange::Events { from: 10, to: None }),
            (
                "..20",
                EventRange::Events {
                    from: 0,
                    to: Some(20),
                },
            ),
            (
                "1.5s..3s",
                EventRange::Time {
                    from_us: 1_500_000,
                    to_us: Some(3_000_000),
                },
            ),
            (
                "200ms..",
                EventRange::Time {
                    from_us: 200_000,
                    to_us: None,
                },
            ),
            (
                "..900us",
                EventRange::Time {
                    from_us: 0,
                    to_us: Some(900),
                },
            ),
        ] {
            assert_eq!(EventRange::parse(text), Ok(want), "{text}");
            assert_eq!(EventRange::parse(&want.to_string()), Ok(want), "{want}");
        }
        for bad in [
            "", "last:", "last:-1", "5", "a..b", "1s..x", "-1s..2s", "1..2..3",
        ] {
            assert!(
                matches!(EventRange::parse(bad), Err(RangeError::Syntax(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            EventRange::parse("20..10"),
            Err(RangeError::Backwards(_))
        ));
    }
}
