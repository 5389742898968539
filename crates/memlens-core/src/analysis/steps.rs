//! Steps and leaks. Step boundaries come from the trace's markers: `ProfilerStep#N` START
//! annotations, else the END of each `Optimizer.step#…` annotation, else the end of each run of
//! entries allocated inside an optimizer step (the repeating pattern of a training loop). An
//! annotation marks the first entry at or after its time.
//!
//! A leak is live memory rising step over step: the live total at the start of each step after
//! the first (the warm-up, which creates optimizer states) rises at least [`MIN_RISE_BYTES`]
//! overall and in at least two thirds of the intervals. Its suspects are the user frames whose
//! allocations born in a step after the first stay alive to the end of the last step, in at
//! least half of those steps. Without steps, the suspects are the allocations alive at the end
//! that were born after the first 5 % of the trace, less the model states (parameters,
//! gradients and optimizer states by the ledger's rules, which a training run keeps on purpose).
//! Private pools (CUDA graphs) are left out of
//! both and reported on their own ([`PrivatePool`]).

use super::frames::StackFacts;
use super::ledger::{Class, Classifier};
use crate::model::Snapshot;
use crate::replay::{EventIdx, Replay};
use crate::trace::Action;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// Smallest overall rise of the step-start totals that counts as a leak.
pub const MIN_RISE_BYTES: i64 = 1 << 20;

/// One step of the training loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub name: String,
    /// First event of the step.
    pub start_event: EventIdx,
    /// One past its last event.
    pub end_event: EventIdx,
    /// Live bytes before its first event.
    pub live_at_start_bytes: i64,
    /// Largest live total inside the step.
    pub peak_bytes: i64,
}

/// Where the step boundaries came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepSource {
    ProfilerStep,
    OptimizerStepAnnotation,
    OptimizerFrames,
    None,
}

/// A user frame whose allocations outlive their step (or, without steps, the trace).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeakSuspect {
    pub frame: String,
    pub bytes: u64,
    pub allocations: u64,
    /// Steps in which it left allocations alive (0 without steps).
    pub steps: u32,
    pub bytes_per_step: u64,
}

/// Memory of a private pool (CUDA graph capture) in the final segments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrivatePool {
    pub pool_id: (i64, i64),
    pub segments: u64,
    pub reserved_bytes: u64,
    pub allocated_bytes: u64,
}

/// The device's private pools, by pool id.
pub fn private_pools(s: &Snapshot, device: u32) -> Vec<PrivatePool> {
    let mut out: Vec<PrivatePool> = Vec::new();
    for g in s
        .segments
        .iter()
        .filter(|g| g.device == device && g.pool_id != (0, 0))
    {
        let i = match out.iter().position(|p| p.pool_id == g.pool_id) {
            Some(i) => i,
            None => {
                out.push(PrivatePool {
                    pool_id: g.pool_id,
                    segments: 0,
                    reserved_bytes: 0,
                    allocated_bytes: 0,
                });
                out.len() - 1
            }
        };
        out[i].segments += 1;
        out[i].reserved_bytes += g.total_size_bytes;
        out[i].allocated_bytes += g.allocated_size_bytes;
    }
    out.sort_by_key(|p| p.pool_id);
    out
}

/// Address ranges of private-pool segments (sorted), to leave them out of the leak suspects.
fn private_ranges(s: &Snapshot, device: u32) -> Vec<(u64, u64)> {
    let mut r: Vec<(u64, u64)> = s
        .segments
        .iter()
        .filter(|g| g.device == device && g.pool_id != (0, 0))
        .map(|g| (g.address, g.address.saturating_add(g.total_size_bytes)))
        .collect();
    r.sort_unstable();
    r
}

fn in_ranges(r: &[(u64, u64)], addr: u64) -> bool {
    let i = r.partition_point(|&(a, _)| a <= addr);
    i > 0 && addr < r[i - 1].1
}

/// First event whose time is at or after `time_us` (times assumed non-decreasing).
fn event_at_time(s: &Snapshot, start: u32, events: u32, time_us: i64) -> Option<EventIdx> {
    let (mut lo, mut hi) = (0u32, events);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match s.trace.time_of((start + mid) as usize) {
            Some(t) if t < time_us => lo = mid + 1,
            Some(_) => hi = mid,
            None => return None,
        }
    }
    (lo < events).then_some(lo)
}

fn annotation_starts(
    s: &Snapshot,
    device: u32,
    events: u32,
) -> (Vec<(EventIdx, String)>, StepSource) {
    let start = s.device_rows(device).start;
    let pick = |prefix: &str, stage: &str| -> Vec<(EventIdx, String)> {
        let mut v: Vec<(EventIdx, String)> = s
            .external_annotations
            .iter()
            .filter(|a| a.device == device && s.str(a.stage) == stage)
            .filter(|a| s.str(a.name).starts_with(prefix))
            .filter_map(|a| {
                event_at_time(s, start, events, a.time_us).map(|e| (e, s.str(a.name).to_string()))
            })
            .collect();
        v.sort_by_key(|x| x.0);
        v.dedup_by_key(|x| x.0);
        v
    };
    let v = pick("ProfilerStep#", "START");
    if v.len() >= 2 {
        return (v, StepSource::ProfilerStep);
    }
    let v = pick("Optimizer.step#", "END");
    if v.len() >= 2 {
        let mut named = vec![(0, "step 0".to_string())];
        named.extend(
            v.into_iter()
                .enumerate()
                .map(|(i, (e, _))| (e, format!("step {}", i + 1))),
        );
        named.dedup_by_key(|x| x.0);
        return (named, StepSource::OptimizerStepAnnotation);
    }
    (Vec::new(), StepSource::None)
}

/// Boundaries from runs of entries allocated inside an optimizer step.
fn optimizer_runs(s: &Snapshot, device: u32, facts: &mut StackFacts) -> Vec<(EventIdx, String)> {
    let rows = s.device_rows(device);
    let t = &s.trace;
    let mut out = vec![(0u32, "step 0".to_string())];
    let mut inside = false;
    for (i, r) in rows.enumerate() {
        let r = r as usize;
        if t.action.get(r) != Some(&Action::Alloc) {
            continue;
        }
        let stack = t.stack.get(r).copied().unwrap_or_default();
        let opt = facts.phase(s, stack).optimizer;
        if inside && !opt {
            let n = out.len();
            out.push((i as u32, format!("step {n}")));
        }
        inside = opt;
    }
    out
}

/// The steps of a device with their live totals.
pub fn steps(s: &Snapshot, replay: &Replay, facts: &mut StackFacts) -> (Vec<Step>, StepSource) {
    let device = replay.device;
    let events = replay.events;
    let (mut starts, mut source) = annotation_starts(s, device, events);
    if starts.is_empty() {
        starts = optimizer_runs(s, device, facts);
        source = StepSource::OptimizerFrames;
    }
    if starts.len() < 2 {
        return (Vec::new(), StepSource::None);
    }
    let rows = s.device_rows(device);
    let t = &s.trace;
    let mut live = replay.live_bytes_at(None) as i64;
    let mut out: Vec<Step> = Vec::with_capacity(starts.len());
    let mut next = 0usize;
    for (i, r) in rows.enumerate() {
        let i = i as u32;
        while next < starts.len() && starts[next].0 == i {
            if let Some(prev) = out.last_mut() {
                prev.end_event = i;
            }
            out.push(Step {
                name: starts[next].1.clone(),
                start_event: i,
                end_event: events,
                live_at_start_bytes: live,
                peak_bytes: live,
            });
            next += 1;
        }
        let r = r as usize;
        let size = t.size_bytes.get(r).copied().unwrap_or(0) as i64;
        match t.action.get(r) {
            Some(Action::Alloc) => live += size,
            Some(Action::FreeCompleted) => live -= size,
            _ => {}
        }
        if let Some(st) = out.last_mut() {
            st.peak_bytes = st.peak_bytes.max(live);
        }
    }
    (out, source)
}

/// Whether the step-start totals rise as a leak does (see the module docs).
pub fn rising(steps: &[Step]) -> bool {
    let v: Vec<i64> = steps
        .iter()
        .skip(1)
        .map(|s| s.live_at_start_bytes)
        .collect();
    if v.len() < 3 {
        return false;
    }
    let rises = v.windows(2).filter(|w| w[1] > w[0]).count();
    let overall = v[v.len() - 1] - v[0];
    overall >= MIN_RISE_BYTES && rises * 3 >= (v.len() - 1) * 2
}

fn sorted(groups: FxHashMap<u32, (u64, u64, Vec<u32>)>, names: &[String]) -> Vec<LeakSuspect> {
    let mut out: Vec<LeakSuspect> = groups
        .into_iter()
        .map(|(g, (bytes, allocations, mut steps))| {
            steps.dedup();
            let n = steps.len() as u32;
            LeakSuspect {
                frame: names[g as usize].clone(),
                bytes,
                allocations,
                steps: n,
                bytes_per_step: if n == 0 { bytes } else { bytes / u64::from(n) },
            }
        })
        .collect();
    out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.frame.cmp(&b.frame)));
    out
}

/// Leak suspects: with steps, user frames that keep allocations across steps; without, what is
/// alive at the end and was born after the first 5 % of the trace.
pub fn suspects(
    s: &Snapshot,
    replay: &Replay,
    steps: &[Step],
    cx: &mut Classifier,
) -> Vec<LeakSuspect> {
    let private = private_ranges(s, replay.device);
    let mut groups: FxHashMap<u32, (u64, u64, Vec<u32>)> = FxHashMap::default();
    if steps.len() >= 3 {
        let last_end = steps[steps.len() - 1].end_event;
        let considered = &steps[1..];
        for a in &replay.allocations {
            let Some(born) = a.alloc_event else { continue };
            if a.free_event.is_some_and(|f| f < last_end) || in_ranges(&private, a.addr) {
                continue;
            }
            let Some(k) = considered
                .iter()
                .position(|st| st.start_event <= born && born < st.end_event)
            else {
                continue;
            };
            let e = groups.entry(cx.facts.group(s, a.stack)).or_default();
            e.0 += a.size_bytes;
            e.1 += 1;
            e.2.push(k as u32);
        }
        let need = considered.len().div_ceil(2).max(2);
        groups.retain(|_, v| {
            v.2.dedup();
            v.2.len() >= need
        });
    } else {
        let after = replay.events / 20;
        for a in &replay.allocations {
            let Some(born) = a.alloc_event else { continue };
            if born < after || a.free_event.is_some() || in_ranges(&private, a.addr) {
                continue;
            }
            if matches!(
                cx.classify(a).class(),
                Class::Parameters | Class::Gradients | Class::OptimizerState
            ) {
                continue;
            }
            let e = groups.entry(cx.facts.group(s, a.stack)).or_default();
            e.0 += a.size_bytes;
            e.1 += 1;
        }
    }
    sorted(groups, &cx.facts.names)
}
