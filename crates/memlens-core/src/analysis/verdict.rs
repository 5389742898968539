//! The verdict, following the usual OOM triage, with the numbers that support it and the fixes
//! that match. Order of the tests:
//! 1. nothing to read (no segments, no trace) → `not_enough_data`;
//! 2. step-start live totals rising ([`super::steps::rising`]) → `leak`;
//! 3. an `oom` whose request the pool's free total would hold but no free block does →
//!    `fragmentation`; any other `oom` → `too_much`;
//! 4. without an `oom`: inactive_split at the peak ≥ [`SPLIT_SHARE`] of reserved and at least
//!    [`SPLIT_MIN_BYTES`] → `fragmentation`;
//! 5. no trace (segments only) → `not_enough_data`; else `no_problem_found`.

use super::ledger::{Class, ClassRow};
use super::DeviceDiagnosis;
use crate::model::Snapshot;
use serde::{Deserialize, Serialize};

/// Share of reserved memory in split free blocks that counts as fragmentation without an OOM.
pub const SPLIT_SHARE: f64 = 0.25;
pub const SPLIT_MIN_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    TooMuch,
    Fragmentation,
    Leak,
    NoProblemFound,
    NotEnoughData,
}

impl VerdictKind {
    pub fn name(self) -> &'static str {
        match self {
            VerdictKind::TooMuch => "too_much",
            VerdictKind::Fragmentation => "fragmentation",
            VerdictKind::Leak => "leak",
            VerdictKind::NoProblemFound => "no_problem_found",
            VerdictKind::NotEnoughData => "not_enough_data",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub kind: VerdictKind,
    /// One sentence.
    pub summary: String,
    /// The numbers the verdict rests on, one per line.
    pub evidence: Vec<String>,
    pub fixes: Vec<String>,
    /// What the snapshot lacks for a fuller answer.
    pub missing: Vec<String>,
}

/// Sizes as every view writes them ([`crate::layout::axis::format_bytes`]), for byte counts.
pub fn human(bytes: u64) -> String {
    crate::layout::axis::format_bytes(bytes as f64)
}

fn pct(part: u64, whole: u64) -> String {
    format!("{:.0}%", 100.0 * super::share(part, whole))
}

fn class_bytes(rows: &[ClassRow], c: Class) -> u64 {
    rows.iter().find(|r| r.class == c).map_or(0, |r| r.bytes)
}

/// `max_split_size_mb` from the data: the request to protect (the failing one, else the largest
/// live allocation at the peak) in MiB, rounded down to a power of two, at least 32.
fn max_split_mb(request_bytes: u64) -> u64 {
    let mb = (request_bytes >> 20).max(32);
    1u64 << (63 - mb.leading_zeros())
}

fn expandable_fix(s: &Snapshot, why: &str) -> Option<String> {
    (!s.expandable_segments()).then(|| {
        format!(
            "Set {}=expandable_segments:True: {why}.",
            s.alloc_conf_var()
        )
    })
}

fn too_much_fixes(d: &DeviceDiagnosis, s: &Snapshot) -> Vec<String> {
    let rows = &d.ledger.peak;
    let total = d.peak.allocated_bytes;
    let states = class_bytes(rows, Class::Parameters)
        + class_bytes(rows, Class::Gradients)
        + class_bytes(rows, Class::OptimizerState);
    let act = rows.iter().find(|r| r.class == Class::Activations);
    let mut f = Vec::new();
    if let Some(a) = act.filter(|a| a.bytes > 0) {
        let top: Vec<String> = a
            .frames
            .iter()
            .take(3)
            .map(|fr| format!("{} ({})", fr.frame, human(fr.bytes)))
            .collect();
        f.push(format!(
            "Activation checkpointing for the largest activation stacks: {} (activations hold {}, {} of the peak).",
            top.join(", "),
            human(a.bytes),
            pct(a.bytes, total)
        ));
        f.push(format!(
            "A smaller micro-batch or sequence length: activations scale with it ({} at the peak).",
            human(a.bytes)
        ));
    }
    if states > 0 {
        f.push(format!(
            "Shard the model states (ZeRO/FSDP) or keep optimizer states in lower precision: parameters, gradients and optimizer states hold {} ({} of the peak).",
            human(states),
            pct(states, total)
        ));
    }
    if let Some(x) = expandable_fix(s, "reserved memory then grows in pages instead of whole segments, so less is reserved but unused") {
        f.push(x);
    }
    f
}

fn frag_fixes(s: &Snapshot, request_bytes: u64) -> Vec<String> {
    let mut f = Vec::new();
    if let Some(x) = expandable_fix(s, "segments grow and shrink in pages, so free holes between live tensors can be mapped into one range") {
        f.push(x);
    }
    let n = max_split_mb(request_bytes);
    f.push(format!(
        "Or set {}=max_split_size_mb:{n}: blocks of {n} MiB and more are then never split for smaller requests, so a {} request finds whole free blocks instead of holes between live tensors.",
        s.alloc_conf_var(),
        human(request_bytes)
    ));
    f
}

fn steps_note(d: &DeviceDiagnosis) -> Option<String> {
    let e = d.peak.event?;
    let st = d
        .steps
        .iter()
        .find(|s| s.start_event <= e && e < s.end_event)?;
    let len = (st.end_event - st.start_event).max(1);
    Some(format!(
        "The peak is at event {e}, {:.0}% into {}.",
        100.0 * f64::from(e - st.start_event) / f64::from(len),
        st.name
    ))
}

/// The verdict of one device (see the module docs).
pub fn verdict(d: &DeviceDiagnosis, s: &Snapshot, missing: Vec<String>) -> Verdict {
    let mut v = Verdict {
        kind: VerdictKind::NoProblemFound,
        summary: String::new(),
        evidence: Vec::new(),
        fixes: Vec::new(),
        missing,
    };
    let peak = d.peak.allocated_bytes;
    let fp = &d.ledger.fragmentation_peak;
    v.evidence.push(format!(
        "Peak: {} allocated by {} live allocations{}; {} reserved then.",
        human(peak),
        d.peak.allocations,
        d.peak
            .event
            .map_or(String::new(), |e| format!(" after event {e}")),
        human(fp.reserved_bytes)
    ));
    if let Some(top) = d.peak.top.first() {
        v.evidence.push(format!(
            "Largest holder at the peak: {} with {} ({}).",
            top.frame,
            human(top.bytes),
            pct(top.bytes, peak)
        ));
    }
    v.evidence.extend(steps_note(d));
    if let Some(p) = &d.peak_phase {
        v.evidence.push(format!("The peak is reached {p}."));
    }
    if d.events == 0 && s.segments.iter().all(|g| g.device != d.device) {
        v.kind = VerdictKind::NotEnoughData;
        v.summary =
            "Not enough data: the snapshot holds no segments and no trace for this device.".into();
        return v;
    }
    if super::steps::rising(&d.steps) {
        return leak(v, d);
    }
    if let Some(o) = d.ooms.last() {
        return oom(v, d, s, o);
    }
    if fp.inactive_split_bytes >= SPLIT_MIN_BYTES
        && super::share(fp.inactive_split_bytes, fp.reserved_bytes) >= SPLIT_SHARE
    {
        v.kind = VerdictKind::Fragmentation;
        v.summary = format!(
            "Fragmentation: at the peak {} ({} of the {} reserved) sits in free blocks between live ones, largest free block {}.",
            human(fp.inactive_split_bytes),
            pct(fp.inactive_split_bytes, fp.reserved_bytes),
            human(fp.reserved_bytes),
            human(fp.largest_free_block_bytes)
        );
        let big = d
            .peak
            .top
            .first()
            .map_or(0, |g| g.bytes / g.allocations.max(1));
        v.fixes = frag_fixes(s, big);
        return v;
    }
    if d.events == 0 {
        v.kind = VerdictKind::NotEnoughData;
        v.summary = format!(
            "Not enough data: no trace, only the final segments ({} reserved, {} allocated, no fragmentation to speak of); record with torch.cuda.memory._record_memory_history() to see what happened before.",
            human(fp.reserved_bytes),
            human(fp.allocated_bytes)
        );
        return v;
    }
    v.summary = format!(
        "No problem found: the peak of {} is reached{}, nothing rises step over step{}, and {} of the reserved memory is in split free blocks.",
        human(peak),
        d.peak.event.map_or(String::new(), |e| format!(" after event {e}")),
        if d.steps.is_empty() { " (no steps to compare)" } else { "" },
        pct(fp.inactive_split_bytes, fp.reserved_bytes)
    );
    v
}

fn leak(mut v: Verdict, d: &DeviceDiagnosis) -> Verdict {
    let considered = &d.steps[1..];
    let first = considered[0].live_at_start_bytes;
    let last = considered[considered.len() - 1].live_at_start_bytes;
    let rise = (last - first).max(0) as u64;
    let per = rise / (considered.len() as u64 - 1).max(1);
    v.kind = VerdictKind::Leak;
    v.summary = match d.leaks.first() {
        Some(l) => format!(
            "Leak: live memory at the start of each step rose by {} over {} steps ({} per step); {} keeps {} per step ({} in {} allocations).",
            human(rise), considered.len(), human(per), l.frame, human(l.bytes_per_step), human(l.bytes), l.allocations
        ),
        None => format!(
            "Leak: live memory at the start of each step rose by {} over {} steps ({} per step), from many small sites.",
            human(rise), considered.len(), human(per)
        ),
    };
    v.evidence.push(format!(
        "Live at step starts: {}.",
        considered
            .iter()
            .map(|s| human(s.live_at_start_bytes.max(0) as u64))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    for l in d.leaks.iter().take(3) {
        v.fixes.push(format!(
            "Find what holds the tensors allocated at {}: a list or cache kept across steps, or a tensor kept with its autograd graph (keep .detach() or .item() instead); {} per step.",
            l.frame, human(l.bytes_per_step)
        ));
    }
    if v.fixes.is_empty() {
        v.fixes.push("Compare the allocations alive at two step starts (memlens compare, or the timeline) to find what is kept.".into());
    }
    v
}

fn oom(
    mut v: Verdict,
    d: &DeviceDiagnosis,
    s: &Snapshot,
    o: &super::fragmentation::Oom,
) -> Verdict {
    v.evidence.push(format!(
        "OOM at event {}: {} requested in the {} pool by {}; {} allocated, {} reserved, {} free in that pool (largest block {}), device free {}.",
        o.event,
        human(o.requested_bytes),
        o.pool,
        o.frame,
        human(o.allocated_bytes),
        human(o.reserved_bytes),
        human(o.free_total_bytes),
        human(o.largest_free_block_bytes),
        o.device_free_bytes.map_or("not recorded".into(), human)
    ));
    if let Some(x) = o.outside_allocator_bytes {
        v.evidence.push(format!(
            "{} of the device is held outside this allocator (NCCL buffers, other processes, the CUDA context): snapshots cannot see it.",
            human(x)
        ));
    }
    if o.fits_in_free_total && o.requested_bytes > o.largest_free_block_bytes {
        v.kind = VerdictKind::Fragmentation;
        v.summary = format!(
            "Out of memory from fragmentation: the {} request did not fit any free block of the {} pool (largest {}) although {} were free in it.",
            human(o.requested_bytes), o.pool, human(o.largest_free_block_bytes), human(o.free_total_bytes)
        );
        v.fixes = frag_fixes(s, o.requested_bytes);
    } else {
        v.kind = VerdictKind::TooMuch;
        v.summary = format!(
            "Out of memory because the program needs more than the device gives: {} allocated and {} reserved when {} more were asked, with {} free on the device.",
            human(o.allocated_bytes),
            human(o.reserved_bytes),
            human(o.requested_bytes),
            o.device_free_bytes.map_or("an unrecorded amount".into(), human)
        );
        v.fixes = too_much_fixes(d, s);
    }
    v
}
