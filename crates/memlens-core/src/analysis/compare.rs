//! A/B at the peaks: two snapshots (a change's before and after), per device, their timeline
//! peaks and what is alive there grouped by user frame and by ledger class, side by side, with
//! the change — "what did my change cost". Devices are those of either snapshot; a device
//! missing on one side counts as empty there. Only the allocation table is read (no state
//! history), so it costs about two `device_stats`.

use super::alive::{alive_at, Alive};
use super::ledger::Classifier;
use crate::model::Snapshot;
use crate::replay::{replay_device, EventIdx};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One side's peak.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PeakSide {
    /// `memlens stats`'s timeline peak (0 for a device the snapshot lacks).
    pub timeline_peak_bytes: i64,
    pub peak_reserved_bytes: i64,
    pub event: Option<EventIdx>,
    /// Σ requested bytes alive at the peak (what the groups sum to).
    pub allocated_bytes: u64,
}

/// One user frame's bytes alive at both peaks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub frame: String,
    pub a_bytes: u64,
    pub b_bytes: u64,
    pub change_bytes: i64,
}

/// One ledger class's bytes alive at both peaks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassChange {
    pub class: String,
    pub a_bytes: u64,
    pub b_bytes: u64,
    pub change_bytes: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceComparison {
    pub device: u32,
    pub a: PeakSide,
    pub b: PeakSide,
    /// b − a of the timeline peaks.
    pub peak_change_bytes: i64,
    /// 100 · change / a (`None` when a's peak is 0).
    pub peak_change_pct: Option<f64>,
    /// Every user frame alive at either peak, by absolute change (then frame).
    pub by_frame: Vec<Change>,
    /// The ledger classes, by absolute change.
    pub by_class: Vec<ClassChange>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub devices: Vec<DeviceComparison>,
}

fn side(s: &Snapshot, device: u32) -> (PeakSide, Option<Alive>) {
    if !s.devices().contains(&device) {
        return (PeakSide::default(), None);
    }
    let st = crate::device_stats(s, device);
    let replay = replay_device(s, device);
    let event = st.timeline_peak_event;
    let alive = alive_at(&replay, &mut Classifier::new(s, device), event);
    let p = PeakSide {
        timeline_peak_bytes: st.timeline_peak_bytes,
        peak_reserved_bytes: st.peak_reserved_bytes,
        event,
        allocated_bytes: alive.allocated_bytes,
    };
    (p, Some(alive))
}

fn changes(a: BTreeMap<String, u64>, b: BTreeMap<String, u64>) -> Vec<Change> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out: Vec<Change> = keys
        .into_iter()
        .map(|k| {
            let (x, y) = (
                a.get(k).copied().unwrap_or(0),
                b.get(k).copied().unwrap_or(0),
            );
            Change {
                frame: k.clone(),
                a_bytes: x,
                b_bytes: y,
                change_bytes: y as i64 - x as i64,
            }
        })
        .collect();
    out.sort_by(|p, q| {
        q.change_bytes
            .unsigned_abs()
            .cmp(&p.change_bytes.unsigned_abs())
            .then_with(|| p.frame.cmp(&q.frame))
    });
    out
}

fn frames(alive: &Option<Alive>) -> BTreeMap<String, u64> {
    alive
        .iter()
        .flat_map(|a| a.top.iter().map(|g| (g.frame.clone(), g.bytes)))
        .collect()
}

fn classes(alive: &Option<Alive>) -> BTreeMap<String, u64> {
    alive
        .iter()
        .flat_map(|a| {
            a.by_class
                .iter()
                .map(|c| (c.class.name().to_string(), c.bytes))
        })
        .collect()
}

/// Compares two snapshots at their timeline peaks (one device, or every device of either).
pub fn compare_peaks(a: &Snapshot, b: &Snapshot, device: Option<u32>) -> Comparison {
    let mut devices: Vec<u32> = a.devices().into_iter().chain(b.devices()).collect();
    devices.sort_unstable();
    devices.dedup();
    let devices = devices
        .into_iter()
        .filter(|d| device.is_none_or(|x| x == *d))
        .map(|d| {
            let (pa, aa) = side(a, d);
            let (pb, ab) = side(b, d);
            let change = pb.timeline_peak_bytes - pa.timeline_peak_bytes;
            DeviceComparison {
                device: d,
                peak_change_pct: (pa.timeline_peak_bytes != 0)
                    .then(|| 100.0 * change as f64 / pa.timeline_peak_bytes as f64),
                peak_change_bytes: change,
                by_frame: changes(frames(&aa), frames(&ab)),
                by_class: changes(classes(&aa), classes(&ab))
                    .into_iter()
                    .map(|c| ClassChange {
                        class: c.frame,
                        a_bytes: c.a_bytes,
                        b_bytes: c.b_bytes,
                        change_bytes: c.change_bytes,
                    })
                    .collect(),
                a: pa,
                b: pb,
            }
        })
        .collect();
    Comparison { devices }
}

/// What grew between two moments of one device: live bytes after `from` and after `to`, and the
/// net change by user frame (allocations born in between and still alive at `to` count up,
/// those alive at `from` and freed in between count down).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Between {
    pub device: u32,
    pub from: Option<EventIdx>,
    pub to: Option<EventIdx>,
    pub from_bytes: u64,
    pub to_bytes: u64,
    /// Frames whose live bytes changed, by absolute change (then frame).
    pub by_frame: Vec<Change>,
}

/// [`Between`] for one device of a snapshot, over its allocation table.
pub fn between(
    s: &Snapshot,
    replay: &crate::replay::Replay,
    from: Option<EventIdx>,
    to: Option<EventIdx>,
) -> Between {
    let mut cx = Classifier::new(s, replay.device);
    let a = alive_at(replay, &mut cx, from);
    let b = alive_at(replay, &mut cx, to);
    let (from_bytes, to_bytes) = (a.allocated_bytes, b.allocated_bytes);
    let mut by_frame = changes(frames(&Some(a)), frames(&Some(b)));
    by_frame.retain(|c| c.change_bytes != 0);
    Between {
        device: replay.device,
        from,
        to,
        from_bytes,
        to_bytes,
        by_frame,
    }
}
