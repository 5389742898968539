//! Answers, not only pictures: who holds memory at the peak (`alive`), the memory ledger
//! (`ledger`), steps and leak suspects (`steps`), pending-free stalls (`pending`), fragmentation
//! over time and at every OOM (`fragmentation`), and a verdict with its fixes (`verdict`). Pure
//! functions of the snapshot, its allocation table ([`crate::replay`]) and allocator states
//! ([`crate::state`]): [`diagnose_device`] reconstructs only the states it reads
//! ([`SampledStates`] at the events [`fragmentation::wanted`] lists), [`diagnose_with_history`]
//! seeks them in an Allocator State History already built; both give the same diagnosis.
//! `memlens diagnose` prints a [`Diagnosis`], the page's Diagnosis view receives its serde form.
//!
//! The peak is the timeline peak of [`crate::device_stats`] (the first event where the running
//! total reaches its maximum); what is alive there is read from the allocation table, so the
//! groups sum exactly to its live total.

pub mod alive;
pub mod compare;
pub mod fragmentation;
pub mod frames;
pub mod icicle;
pub mod ledger;
pub mod pending;
pub mod stack_change;
pub mod steps;
pub mod verdict;

use crate::model::Snapshot;
use crate::replay::{replay_device, EventIdx};
use crate::state::{AllocatorHistory, SampledStates};
use alive::{alive_at, Alive};
use fragmentation::{Fragmentation, Oom, Seeked, States};
use ledger::{ClassRow, Classifier};
use pending::PendingFrees;
use serde::{Deserialize, Serialize};
use steps::{LeakSuspect, PrivatePool, Step, StepSource};
use verdict::Verdict;

/// `part / whole`, 0 when `whole` is 0.
pub fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// What the caller asks besides the snapshot.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Diagnose only this device (default: every device).
    pub device: Option<u32>,
    /// Look at this event instead of the timeline peak.
    pub at: Option<EventIdx>,
    /// Parameter count, for the expected model states.
    pub params: Option<u64>,
    /// Bytes per parameter for weights, gradients and optimizer states (default mixed
    /// precision Adam: 2, 2, 12).
    pub bytes_per_param: Option<[u64; 3]>,
    /// Device capacity, to tell how much is held outside the allocator at an OOM.
    pub device_memory_bytes: Option<u64>,
}

/// Which moment [`DeviceDiagnosis::peak`] describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Moment {
    TimelinePeak,
    Event,
}

/// Theoretical model states from a parameter count, beside the measured ones at the peak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expected {
    pub params: u64,
    pub bytes_per_param: [u64; 3],
    pub parameters_bytes: u64,
    pub gradients_bytes: u64,
    pub optimizer_state_bytes: u64,
    /// Σ of the three measured classes at the peak.
    pub measured_bytes: u64,
    /// measured − expected.
    pub difference_bytes: i64,
}

/// The memory ledger at the peak and at the end of the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    pub peak: Vec<ClassRow>,
    pub end: Vec<ClassRow>,
    pub fragmentation_peak: Fragmentation,
    pub fragmentation_end: Fragmentation,
    pub expected: Option<Expected>,
}

/// How the leak suspects were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeakMethod {
    Steps,
    EndOfTrace,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceDiagnosis {
    pub device: u32,
    pub events: u32,
    pub moment: Moment,
    pub peak: Alive,
    pub ledger: Ledger,
    pub steps: Vec<Step>,
    pub step_source: StepSource,
    pub leak_method: LeakMethod,
    pub leaks: Vec<LeakSuspect>,
    pub private_pools: Vec<PrivatePool>,
    pub pending_frees: PendingFrees,
    pub ooms: Vec<Oom>,
    pub fragmentation_over_time: Vec<Fragmentation>,
    /// Where in the training step the peak is reached (from the stacks around the peak event):
    /// e.g. "at the end of forward (backward starts next)", "in autograd's backward".
    pub peak_phase: Option<String>,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    pub devices: Vec<DeviceDiagnosis>,
}

/// Diagnoses every device of the snapshot (or the one asked).
pub fn diagnose(s: &Snapshot, o: &Options) -> Diagnosis {
    let devices = s
        .devices()
        .into_iter()
        .filter(|d| o.device.is_none_or(|x| x == *d))
        .map(|d| diagnose_device(s, d, o))
        .collect();
    Diagnosis { devices }
}

fn expected(o: &Options, rows: &[ClassRow]) -> Option<Expected> {
    let params = o.params?;
    let bpp = o.bytes_per_param.unwrap_or([2, 2, 12]);
    let of = |c| rows.iter().find(|r| r.class == c).map_or(0, |r| r.bytes);
    let measured = of(ledger::Class::Parameters)
        + of(ledger::Class::Gradients)
        + of(ledger::Class::OptimizerState);
    let exp = params * (bpp[0] + bpp[1] + bpp[2]);
    Some(Expected {
        params,
        bytes_per_param: bpp,
        parameters_bytes: params * bpp[0],
        gradients_bytes: params * bpp[1],
        optimizer_state_bytes: params * bpp[2],
        measured_bytes: measured,
        difference_bytes: measured as i64 - exp as i64,
    })
}

fn missing(s: &Snapshot, replay: &crate::replay::Replay, source: StepSource) -> Vec<String> {
    let mut m = Vec::new();
    if replay.events == 0 {
        m.push(
            "no trace: record with torch.cuda.memory._record_memory_history() before the run"
                .into(),
        );
        return m;
    }
    let t = &s.trace;
    let rows = s.device_rows(replay.device);
    if t.stack
        .get(rows.start as usize..rows.end as usize)
        .is_some_and(|st| st.iter().all(|&x| x == crate::trace::StackId::EMPTY))
    {
        m.push("no stacks: record with stacks=\"python\" or \"all\" to see who allocated".into());
    }
    let dropped = replay
        .allocations
        .iter()
        .filter(|a| a.origin == crate::replay::Origin::UnmatchedFree)
        .count();
    if dropped > 0 {
        m.push(format!(
            "the trace starts mid-run ({dropped} frees of allocations it never saw: history started late or the ring buffer dropped the start; raise max_entries)"
        ));
    }
    if source == StepSource::None {
        m.push("no step markers (ProfilerStep#N or optimizer steps): leak suspects are what is alive at the end and born after the first 5% of the trace".into());
    }
    m
}

fn phase_name(p: frames::Phase) -> Option<&'static str> {
    if p.optimizer {
        Some("an optimizer step")
    } else if p.backward {
        Some("autograd's backward")
    } else if p.forward {
        Some("a module's forward")
    } else {
        None
    }
}

/// Phase of the peak event's stack, and whether backward follows a forward peak.
fn peak_phase(
    s: &Snapshot,
    replay: &crate::replay::Replay,
    facts: &mut frames::StackFacts,
    event: Option<EventIdx>,
) -> Option<String> {
    let e = event?;
    let rows = s.device_rows(replay.device);
    let t = &s.trace;
    let stack_at = |i: u32| {
        t.stack
            .get((rows.start + i) as usize)
            .copied()
            .unwrap_or_default()
    };
    let here = phase_name(facts.phase(s, stack_at(e)))?;
    let next = (e + 1..replay.events.min(e.saturating_add(5000)))
        .filter(|&i| t.action.get((rows.start + i) as usize) == Some(&crate::trace::Action::Alloc))
        .find_map(|i| phase_name(facts.phase(s, stack_at(i))).filter(|&n| n != here));
    let prev = (e.saturating_sub(5000)..e)
        .rev()
        .filter(|&i| t.action.get((rows.start + i) as usize) == Some(&crate::trace::Action::Alloc))
        .find_map(|i| phase_name(facts.phase(s, stack_at(i))).filter(|&n| n != here));
    Some(match (prev, here, next) {
        (_, "a module's forward", Some("autograd's backward")) => {
            "at the end of forward (backward starts next)".to_string()
        }
        (Some("a module's forward"), "autograd's backward", _) => {
            "at the start of backward (right after forward)".to_string()
        }
        (_, h, _) => format!("in {h}"),
    })
}

/// The event the diagnosis looks at (`--at` or the timeline peak).
fn moment(s: &Snapshot, replay: &crate::replay::Replay, o: &Options) -> (Moment, Option<EventIdx>) {
    match o.at {
        Some(e) => (Moment::Event, Some(e.min(replay.events.saturating_sub(1)))),
        None => {
            let stats = crate::device_stats(s, replay.device);
            (Moment::TimelinePeak, stats.timeline_peak_event)
        }
    }
}

/// Diagnoses one device, reconstructing only the allocator states it reads.
pub fn diagnose_device(s: &Snapshot, device: u32, o: &Options) -> DeviceDiagnosis {
    let replay = replay_device(s, device);
    let (moment, event) = moment(s, &replay, o);
    let end_event = replay.events.checked_sub(1);
    let mut states = SampledStates::new(s, &replay, |last, events, ooms| {
        fragmentation::wanted(last, events, ooms, &[event, end_event])
    });
    diagnose_parts(s, &mut states, &replay, (moment, event), o)
}

/// Diagnoses the device of an Allocator State History already built (the viewer's worker keeps
/// one per device); equal to [`diagnose_device`].
pub fn diagnose_with_history(
    s: &Snapshot,
    history: &AllocatorHistory,
    o: &Options,
) -> DeviceDiagnosis {
    let replay = replay_device(s, history.device());
    let at = moment(s, &replay, o);
    diagnose_parts(s, &mut Seeked::new(history), &replay, at, o)
}

fn diagnose_parts(
    s: &Snapshot,
    states: &mut impl States,
    replay: &crate::replay::Replay,
    (moment, event): (Moment, Option<EventIdx>),
    o: &Options,
) -> DeviceDiagnosis {
    let device = states.device();
    let mut cx = Classifier::new(s, device);
    let peak = alive_at(replay, &mut cx, event);
    let end_event = replay.events.checked_sub(1);
    let end = alive_at(replay, &mut cx, end_event);
    let fragmentation_peak = fragmentation::at(states, event);
    let fragmentation_end = fragmentation::at(states, end_event);
    let fragmentation_over_time = fragmentation::over_time(states);
    let ooms = {
        let facts = &mut cx.facts;
        let frame_of = |row: u32| {
            let stack = s.trace.stack.get(row as usize).copied().unwrap_or_default();
            let g = facts.group(s, stack);
            facts.names[g as usize].clone()
        };
        fragmentation::ooms(s, states, frame_of, o.device_memory_bytes)
    };
    let (steps, step_source) = steps::steps(s, replay, &mut cx.facts);
    let leaks = steps::suspects(s, replay, &steps, &mut cx);
    let pending_frees = pending::pending_frees(s, replay, &mut cx.facts);
    let ledger = Ledger {
        expected: expected(o, &peak.by_class),
        peak: peak.by_class.clone(),
        end: end.by_class,
        fragmentation_peak,
        fragmentation_end,
    };
    let peak_phase = peak_phase(s, replay, &mut cx.facts, event);
    let mut d = DeviceDiagnosis {
        device,
        events: replay.events,
        moment,
        peak,
        ledger,
        leak_method: if steps.len() >= 3 {
            LeakMethod::Steps
        } else {
            LeakMethod::EndOfTrace
        },
        steps,
        step_source,
        leaks,
        private_pools: steps::private_pools(s, device),
        pending_frees,
        ooms,
        fragmentation_over_time,
        peak_phase,
        verdict: verdict::Verdict {
            kind: verdict::VerdictKind::NotEnoughData,
            summary: String::new(),
            evidence: Vec::new(),
            fixes: Vec::new(),
            missing: Vec::new(),
        },
    };
    d.verdict = verdict::verdict(&d, s, missing(s, replay, d.step_source));
    d
}

#[cfg(test)]
mod tests;
