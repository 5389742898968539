//! Per-device numbers that `memlens stats`, the viewer's summary strip and the conformance tests
//! share. Each is defined exactly (see the field docs) so an independent reading can check it.

use super::{BlockState, Snapshot};
use crate::trace::Action;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DeviceStats {
    pub device: u32,
    /// Segments whose `device` is this one.
    pub segments: u64,
    pub blocks: u64,
    pub trace_entries: u64,
    /// Count per action name, as written in the file.
    pub actions: BTreeMap<String, u64>,
    /// Σ segment `total_size`.
    pub reserved_bytes: u64,
    /// Σ `size` of `active_allocated` blocks.
    pub allocated_bytes: u64,
    /// Σ `size` of `active_allocated` + `active_pending_free` blocks.
    pub active_bytes: u64,
    /// Σ requested size of the active blocks.
    pub requested_bytes: u64,
    /// Σ `size` of `inactive` blocks in segments holding more than one block.
    pub inactive_split_bytes: u64,
    /// Largest `inactive` block (0 if none).
    pub largest_free_block_bytes: u64,
    /// `requested_bytes` − Σ alloc + Σ free_completed: live bytes before the first event.
    pub timeline_baseline_bytes: i64,
    /// Max of the baseline and baseline + running Σ(alloc − free_completed).
    pub timeline_peak_bytes: i64,
    /// Event index (0-based, within the device's trace) after which the timeline peak is first
    /// reached; `None`: before the first event (written `-1` in JSON, as the references read it).
    #[serde(with = "event_or_minus_one")]
    pub timeline_peak_event: Option<u32>,
    /// `reserved_bytes` − Σ(segment_alloc + segment_map) + Σ(segment_free + segment_unmap).
    pub reserved_baseline_bytes: i64,
    /// Max of the reserved baseline and its running sums.
    pub peak_reserved_bytes: i64,
}

/// An optional event index in JSON: the index, or `-1` for none (upstream's and the python
/// references' convention for "before the first event").
mod event_or_minus_one {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<u32>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i64(v.map_or(-1, i64::from))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        Ok(u32::try_from(i64::deserialize(d)?).ok())
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SnapshotStats {
    pub devices: Vec<DeviceStats>,
    pub warnings: Vec<String>,
}

/// Stats of every device (see [`Snapshot::devices`]), plus the snapshot's warnings.
pub fn snapshot_stats(s: &Snapshot) -> SnapshotStats {
    let mut warnings = s.warnings.clone();
    let devices: Vec<DeviceStats> = s
        .devices()
        .into_iter()
        .map(|d| device_stats(s, d))
        .collect();
    for d in &devices {
        if d.timeline_baseline_bytes < 0 {
            warnings.push(format!(
                "device {}: the trace allocates, net, {} bytes more than the snapshot holds as active (negative baseline: allocations it records were freed or lost without a trace entry)",
                d.device, -d.timeline_baseline_bytes
            ));
        }
    }
    SnapshotStats { devices, warnings }
}

pub fn device_stats(s: &Snapshot, device: u32) -> DeviceStats {
    let mut st = DeviceStats {
        device,
        segments: 0,
        blocks: 0,
        trace_entries: 0,
        actions: BTreeMap::new(),
        reserved_bytes: 0,
        allocated_bytes: 0,
        active_bytes: 0,
        requested_bytes: 0,
        inactive_split_bytes: 0,
        largest_free_block_bytes: 0,
        timeline_baseline_bytes: 0,
        timeline_peak_bytes: 0,
        timeline_peak_event: None,
        reserved_baseline_bytes: 0,
        peak_reserved_bytes: 0,
    };
    add_final_state(s, device, &mut st);
    let rows = s.device_rows(device);
    st.trace_entries = rows.len() as u64;
    let TraceSums {
        net,
        max_net,
        max_at,
        net_seg,
        max_seg,
    } = trace_sums(s, rows, &mut st.actions);
    let base = st.requested_bytes as i128 - net;
    let seg_base = st.reserved_bytes as i128 - net_seg;
    let peak = base + max_net;
    let peak_s = seg_base + max_seg;
    let clamp = |x: i128| x.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
    st.timeline_baseline_bytes = clamp(base);
    st.timeline_peak_bytes = clamp(peak);
    st.timeline_peak_event = max_at;
    st.reserved_baseline_bytes = clamp(seg_base);
    st.peak_reserved_bytes = clamp(peak_s);
    st
}

/// The final segments' numbers: segments, blocks, reserved, allocated, active, requested,
/// inactive split and the largest free block.
fn add_final_state(s: &Snapshot, device: u32, st: &mut DeviceStats) {
    for seg in s.segments.iter().filter(|g| g.device == device) {
        st.segments += 1;
        st.reserved_bytes += seg.total_size_bytes;
        let blocks = s.segment_blocks(seg);
        st.blocks += blocks.len() as u64;
        for b in blocks {
            match b.state {
                BlockState::ActiveAllocated => {
                    st.allocated_bytes += b.size_bytes;
                    st.active_bytes += b.size_bytes;
                    st.requested_bytes += b.requested_size_bytes;
                }
                BlockState::ActivePendingFree => {
                    st.active_bytes += b.size_bytes;
                    st.requested_bytes += b.requested_size_bytes;
                }
                BlockState::Inactive => {
                    if blocks.len() > 1 {
                        st.inactive_split_bytes += b.size_bytes;
                    }
                    st.largest_free_block_bytes = st.largest_free_block_bytes.max(b.size_bytes);
                }
                BlockState::Unknown => {}
            }
        }
    }
}

/// Running sums over a device's trace from 0: live bytes (alloc − free_completed) and segment
/// bytes (map − unmap), with their first maxima.
struct TraceSums {
    net: i128,
    max_net: i128,
    /// Device-local event of `max_net` (`None`: none above 0).
    max_at: Option<u32>,
    net_seg: i128,
    max_seg: i128,
}

/// One pass over `rows`: the running sums and the count of each action (into `actions`).
fn trace_sums(
    s: &Snapshot,
    rows: std::ops::Range<u32>,
    actions_count: &mut BTreeMap<String, u64>,
) -> TraceSums {
    let t = &s.trace;
    // `max_at` stays an `i64` in the loop (-1: none yet) so the update is a select, not a branch.
    let (mut net, mut max_net, mut max_at) = (0i128, 0i128, -1i64);
    let (mut net_seg, mut max_seg) = (0i128, 0i128);
    // Known actions counted by kind; unknown ones (rare) by the name the file wrote. The sums
    // take each row's size times its action's sign from a table: actions follow no pattern a
    // branch predictor could learn.
    let mut counts = [0u64; Action::Unknown as usize + 1];
    let mut live_sign = [0i128; Action::Unknown as usize + 1];
    let mut seg_sign = live_sign;
    live_sign[Action::Alloc as usize] = 1;
    live_sign[Action::FreeCompleted as usize] = -1;
    seg_sign[Action::SegmentAlloc as usize] = 1;
    seg_sign[Action::SegmentMap as usize] = 1;
    seg_sign[Action::SegmentFree as usize] = -1;
    seg_sign[Action::SegmentUnmap as usize] = -1;
    let (actions, sizes) = (
        t.action
            .get(rows.start as usize..rows.end as usize)
            .unwrap_or(&[]),
        t.size_bytes
            .get(rows.start as usize..rows.end as usize)
            .unwrap_or(&[]),
    );
    for (i, (&action, &size)) in actions.iter().zip(sizes).enumerate() {
        let a = action as usize;
        counts[a] += 1;
        if action == Action::Unknown {
            let r = rows.start as usize + i;
            *actions_count
                .entry(s.action_name(r).to_string())
                .or_default() += 1;
        }
        let size = size as i128;
        net += size * live_sign[a];
        net_seg += size * seg_sign[a];
        // (first maxima: a later equal value does not move `max_at`)
        let up = net > max_net;
        max_at = if up { i as i64 } else { max_at };
        max_net = max_net.max(net);
        max_seg = max_seg.max(net_seg);
    }
    for a in Action::ALL {
        if a != Action::Unknown && counts[a as usize] > 0 {
            *actions_count.entry(a.name().to_string()).or_default() += counts[a as usize];
        }
    }
    TraceSums {
        net,
        max_net,
        max_at: u32::try_from(max_at).ok(),
        net_seg,
        max_seg,
    }
}
