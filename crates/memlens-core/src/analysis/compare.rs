//! A/B at the peaks: two snapshots (a change's before and after), per device, their timeline
//! peaks and what is alive there grouped by user frame, by ledger class and by full stack
//! ([`super::stack_change`]), side by side, with the change — "what did my change cost".
//! Devices are those of either snapshot; a device missing on one side counts as empty there;
//! two devices of one snapshot compare the same way ([`compare_device_peaks`]). Only the
//! allocation table is read (no state history), so it costs about two `device_stats`. The
//! same at any two moments: of two snapshots ([`compare_moments`], the Compare view's cursor)
//! or of one device ([`between`]).
//! Each side's groups ([`peak_groups`], [`moment_groups`]) are computed apart and combined
//! ([`combine_peaks`], [`combine_moments`]), so two snapshots need not sit in one process (the
//! page decodes files in several workers).

use super::alive::{alive_at, Alive};
use super::ledger::Classifier;
pub use super::stack_change::{
    combine_stacks, stack_changes, stack_groups, StackChange, StackGroups, TOP_STACK_CHANGES,
};
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
    /// The [`TOP_STACK_CHANGES`] stacks alive at either peak whose bytes differ (matched by
    /// their frames), by absolute change (see [`combine_stacks`]).
    pub by_stack: Vec<StackChange>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub devices: Vec<DeviceComparison>,
}

/// One side at its timeline peak, grouped: what [`combine_peaks`] compares. Computed where
/// the snapshot is (the page's workers each hold theirs), combined anywhere.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PeakGroups {
    pub peak: PeakSide,
    /// Bytes alive at the peak by user frame.
    pub frames: BTreeMap<String, u64>,
    /// Bytes alive at the peak by ledger class.
    pub classes: BTreeMap<String, u64>,
    /// Bytes alive at the peak by full stack.
    pub stacks: StackGroups,
}

/// Device `device` of `s` at its timeline peak (empty when the snapshot lacks the device).
pub fn peak_groups(s: &Snapshot, device: u32) -> PeakGroups {
    if !s.devices().contains(&device) {
        return PeakGroups::default();
    }
    let st = crate::device_stats(s, device);
    let replay = replay_device(s, device);
    let event = st.timeline_peak_event;
    let mut cx = Classifier::new(s, device);
    let alive = alive_at(&replay, &mut cx, event);
    PeakGroups {
        peak: PeakSide {
            timeline_peak_bytes: st.timeline_peak_bytes,
            peak_reserved_bytes: st.peak_reserved_bytes,
            event,
            allocated_bytes: alive.allocated_bytes,
        },
        frames: frames(&alive),
        classes: classes(&alive),
        stacks: stack_groups(s, &replay, &mut cx.facts, event),
    }
}

fn changes(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> Vec<Change> {
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

fn frames(alive: &Alive) -> BTreeMap<String, u64> {
    alive
        .top
        .iter()
        .map(|g| (g.frame.clone(), g.bytes))
        .collect()
}

fn classes(alive: &Alive) -> BTreeMap<String, u64> {
    alive
        .by_class
        .iter()
        .map(|c| (c.class.name().to_string(), c.bytes))
        .collect()
}

fn class_changes(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> Vec<ClassChange> {
    changes(a, b)
        .into_iter()
        .map(|c| ClassChange {
            class: c.frame,
            a_bytes: c.a_bytes,
            b_bytes: c.b_bytes,
            change_bytes: c.change_bytes,
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
        .map(|d| compare_device_peaks(a, d, b, d))
        .collect();
    Comparison { devices }
}

/// Device `a_device` of `a` against device `b_device` of `b` at their timeline peaks (two
/// devices of one snapshot when `a` and `b` are the same). `device` is `b_device`.
pub fn compare_device_peaks(
    a: &Snapshot,
    a_device: u32,
    b: &Snapshot,
    b_device: u32,
) -> DeviceComparison {
    combine_peaks(
        b_device,
        &peak_groups(a, a_device),
        &peak_groups(b, b_device),
    )
}

/// A against B at their peaks, from each side's groups; `device` names the comparison.
pub fn combine_peaks(device: u32, a: &PeakGroups, b: &PeakGroups) -> DeviceComparison {
    let (pa, pb) = (&a.peak, &b.peak);
    let change = pb.timeline_peak_bytes - pa.timeline_peak_bytes;
    DeviceComparison {
        device,
        peak_change_pct: (pa.timeline_peak_bytes != 0)
            .then(|| 100.0 * change as f64 / pa.timeline_peak_bytes as f64),
        peak_change_bytes: change,
        by_frame: changes(&a.frames, &b.frames),
        by_class: class_changes(&a.classes, &b.classes),
        by_stack: combine_stacks(&a.stacks, &b.stacks, Some(TOP_STACK_CHANGES)),
        a: pa.clone(),
        b: pb.clone(),
    }
}

/// One side of [`Moments`]: live bytes once `event` of `device` has been applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MomentSide {
    pub device: u32,
    pub event: Option<EventIdx>,
    /// Σ requested bytes alive (what the frames sum to).
    pub allocated_bytes: u64,
}

/// One side after an event, by user frame, ledger class and full stack: what
/// [`combine_moments`] compares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MomentGroups {
    pub side: MomentSide,
    pub frames: BTreeMap<String, u64>,
    pub classes: BTreeMap<String, u64>,
    pub stacks: StackGroups,
}

/// Two moments (of two snapshots, or two devices): B minus A.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Moments {
    pub a: MomentSide,
    pub b: MomentSide,
    /// Frames alive at either moment whose bytes differ, by absolute change (then frame).
    pub by_frame: Vec<Change>,
    /// Ledger classes whose bytes differ, by absolute change (then class).
    pub by_class: Vec<ClassChange>,
    /// The [`TOP_STACK_CHANGES`] stacks whose bytes changed most (see [`combine_stacks`]).
    pub by_stack: Vec<StackChange>,
}

/// What is alive after `event` of the replayed device, by user frame, ledger class and stack.
pub fn moment_groups(
    s: &Snapshot,
    replay: &crate::replay::Replay,
    event: Option<EventIdx>,
) -> MomentGroups {
    let mut cx = Classifier::new(s, replay.device);
    let al = alive_at(replay, &mut cx, event);
    MomentGroups {
        side: MomentSide {
            device: replay.device,
            event: al.event,
            allocated_bytes: al.allocated_bytes,
        },
        frames: frames(&al),
        classes: classes(&al),
        stacks: stack_groups(s, replay, &mut cx.facts, event),
    }
}

/// A's moment against B's.
pub fn combine_moments(a: &MomentGroups, b: &MomentGroups) -> Moments {
    let mut by_frame = changes(&a.frames, &b.frames);
    by_frame.retain(|c| c.change_bytes != 0);
    let mut by_class = class_changes(&a.classes, &b.classes);
    by_class.retain(|c| c.change_bytes != 0);
    Moments {
        a: a.side.clone(),
        b: b.side.clone(),
        by_frame,
        by_class,
        by_stack: combine_stacks(&a.stacks, &b.stacks, Some(TOP_STACK_CHANGES)),
    }
}

/// What is alive after `a.2` in `a` against after `b.2` in `b` (the Compare view's cursor: the
/// same moment of two traces).
pub fn compare_moments(
    a: (&Snapshot, &crate::replay::Replay, Option<EventIdx>),
    b: (&Snapshot, &crate::replay::Replay, Option<EventIdx>),
) -> Moments {
    combine_moments(&moment_groups(a.0, a.1, a.2), &moment_groups(b.0, b.1, b.2))
}

/// What grew between two moments of one device: live bytes after `from` and after `to`, and the
/// net change by user frame and by full stack (allocations born in between and still alive at
/// `to` count up, those alive at `from` and freed in between count down).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Between {
    pub device: u32,
    pub from: Option<EventIdx>,
    pub to: Option<EventIdx>,
    pub from_bytes: u64,
    pub to_bytes: u64,
    /// Frames whose live bytes changed, by absolute change (then frame).
    pub by_frame: Vec<Change>,
    /// The [`TOP_STACK_CHANGES`] stacks whose live bytes changed most, by absolute change
    /// (then frames, then user frame).
    pub by_stack: Vec<StackChange>,
}

/// [`Between`] for one device of a snapshot, over its allocation table.
pub fn between(
    s: &Snapshot,
    replay: &crate::replay::Replay,
    from: Option<EventIdx>,
    to: Option<EventIdx>,
) -> Between {
    let m = compare_moments((s, replay, from), (s, replay, to));
    Between {
        device: replay.device,
        from,
        to,
        from_bytes: m.a.allocated_bytes,
        to_bytes: m.b.allocated_bytes,
        by_frame: m.by_frame,
        by_stack: m.by_stack,
    }
}
