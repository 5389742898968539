//! The model of a pickle's prefix, while the rest of the file is still being read: the trace
//! rows decoded so far as a [`Snapshot`], lent to a closure without copying them (the
//! decoder's columns, strings, frames and stacks are moved into it and back).
//!
//! What a prefix can say: every entry read so far, each device's trace cut after its last one.
//! What it cannot: the segments describe the allocator at the end of the trace, so they say
//! nothing exact about an event in the middle; the prefix has none. Allocations from before
//! the trace are known where the prefix frees them (`replay::Origin::UnmatchedFree`); those
//! still alive after the prefix (`replay::Origin::Untraced`, and the unmatched frees to come)
//! only once the whole file is read.

use super::{DeviceTrace, Snapshot};
use crate::raw::{Arena, Encoding};
use std::ops::Range;

/// Lends `f` the snapshot of the trace rows `devices[d]` of each device `d` (consecutive rows
/// from 0, as [`crate::raw::PickleMachine::trace_so_far`] gives them), with the arena's
/// strings, frames and stacks and no segments; everything goes back into `a` after.
pub fn with_prefix<R>(
    a: &mut Arena,
    devices: &[Range<u32>],
    encoding: Encoding,
    f: impl FnOnce(&Snapshot) -> R,
) -> R {
    let rows = devices.last().map_or(0, |r| r.end);
    let extras = a
        .rows
        .extras
        .iter()
        .filter(|(r, _)| *r < rows)
        .filter_map(|(r, e)| super::normalize::convert_extra(a, e).map(|x| (*r, x)))
        .collect::<Vec<_>>();
    let (mut trace, raw_extras) = std::mem::take(&mut a.rows).swap_extras(extras);
    trace.extras.sort_by_key(|(r, _)| *r);
    let snap = Snapshot {
        strings: std::mem::take(&mut a.strings),
        frames: std::mem::take(&mut a.stack_interner.frames),
        stacks: std::mem::take(&mut a.stack_interner.stacks),
        trace,
        device_traces: devices
            .iter()
            .enumerate()
            .map(|(d, r)| DeviceTrace {
                device: d as u32,
                rows: r.clone(),
            })
            .collect(),
        encoding: Some(encoding),
        ..Snapshot::default()
    };
    let out = f(&snap);
    let Snapshot {
        strings,
        frames,
        stacks,
        trace,
        ..
    } = snap;
    a.strings = strings;
    a.stack_interner.frames = frames;
    a.stack_interner.stacks = stacks;
    a.rows = trace.swap_extras(raw_extras).0;
    out
}
