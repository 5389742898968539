//! `memlens diagnose`: why memory ran out (too much, fragmentation, a leak), who holds it at the
//! peak, what keeps growing — the verdict first, then its evidence, then the tables; `--json`
//! prints core's [`memlens_core::analysis::Diagnosis`] as one object.

use crate::load::{load, CliError};
use memlens_core::analysis::verdict::human;
use memlens_core::analysis::{diagnose, DeviceDiagnosis, Options};
use std::fmt::Write as _;
use std::io::{self, Write};

/// Rows printed per table in the text form (`--json` has them all).
const ROWS: usize = 10;

#[derive(clap::Args)]
pub struct Args {
    /// Snapshot file (pickle of any protocol, JSON, or _memory_viz HTML); `-` reads stdin.
    /// Several files are read in parallel: one JSON object per line with `--json` (`file` and
    /// `devices`), one verdict line per file and device otherwise.
    #[arg(required = true)]
    files: Vec<String>,
    /// Only this device.
    #[arg(long)]
    device: Option<u32>,
    /// Look at this event (device-local trace index) instead of the timeline peak.
    #[arg(long)]
    at: Option<u32>,
    /// Parameter count of the model, for the expected model states.
    #[arg(long)]
    params: Option<u64>,
    /// Bytes per parameter for weights, gradients and optimizer states (default mixed-precision Adam).
    #[arg(long, value_parser = parse_bpp, default_value = "2,2,12")]
    bytes_per_param: [u64; 3],
    /// Device memory in MiB, to tell how much is held outside the allocator at an OOM.
    #[arg(long)]
    device_memory_mib: Option<u64>,
    /// Instead: what grew between two events (`FROM TO`, device-local), by user frame.
    #[arg(long, num_args = 2, value_names = ["FROM", "TO"])]
    between: Option<Vec<u32>>,
    /// Print one JSON object {"devices": [...]}.
    #[arg(long)]
    json: bool,
}

fn parse_bpp(s: &str) -> Result<[u64; 3], String> {
    let v: Vec<u64> = s
        .split(',')
        .map(|x| x.trim().parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("expected three integers W,G,O (e.g. 2,2,12): {e}"))?;
    <[u64; 3]>::try_from(v).map_err(|_| "expected three integers W,G,O (e.g. 2,2,12)".to_string())
}

pub fn run(a: Args) -> Result<(), CliError> {
    let opts = Options {
        device: a.device,
        at: a.at,
        params: a.params,
        bytes_per_param: Some(a.bytes_per_param),
        device_memory_bytes: a.device_memory_mib.map(|m| m << 20),
    };
    if a.files.len() > 1 {
        return run_many(&a.files, &opts, a.json);
    }
    let file = a.files[0].clone();
    let snap = load(&file)?;
    if let Some(b) = &a.between {
        return between(&snap, a.device, b, a.json);
    }
    if let Some(d) = a.device {
        if !snap.devices().contains(&d) {
            return Err(CliError(format!(
                "no device {d} in the snapshot (devices: {:?}): {file}",
                snap.devices(),
            )));
        }
    }
    let dx = diagnose(&snap, &opts);
    let text = if a.json {
        serde_json::to_string_pretty(&dx).map_err(|e| CliError(e.to_string()))? + "\n"
    } else {
        let mut t = String::new();
        let _ = writeln!(t, "{file}");
        if dx.devices.is_empty() {
            t.push_str("no devices: the snapshot holds no segments and no trace\n");
        }
        for d in &dx.devices {
            device_text(&mut t, d);
        }
        t
    };
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| CliError(format!("cannot write output: {e}")))
}

/// Several files, diagnosed in parallel (`crate::load::map_files`), in the order given; a file
/// that does not load is reported on stderr and makes the exit status 2.
fn run_many(files: &[String], opts: &Options, json: bool) -> Result<(), CliError> {
    let results = crate::load::map_files(files, |_, _, snap| diagnose(&snap, opts));
    crate::load::report_files(files, results, |t, file, dx| {
        if json {
            let v = serde_json::json!({ "file": file, "devices": dx.devices });
            t.push_str(&v.to_string());
            t.push('\n');
            return Ok(());
        }
        for d in &dx.devices {
            let kind = d.verdict.kind.name();
            let _ = writeln!(
                t,
                "{file}: device {}: {kind} — {}",
                d.device, d.verdict.summary
            );
        }
        Ok(())
    })
}

/// `--between FROM TO`: core's `analysis::compare::between` per device.
fn between(
    snap: &memlens_core::Snapshot,
    device: Option<u32>,
    b: &[u32],
    json: bool,
) -> Result<(), CliError> {
    use memlens_core::analysis::compare;
    let (from, to) = (b.first().copied(), b.get(1).copied());
    let devices: Vec<compare::Between> = snap
        .devices()
        .into_iter()
        .filter(|d| device.is_none_or(|x| x == *d))
        .map(|d| {
            compare::between(
                snap,
                &memlens_core::replay::replay_device(snap, d),
                from,
                to,
            )
        })
        .collect();
    let text = if json {
        serde_json::to_string_pretty(&serde_json::json!({ "devices": devices }))
            .map_err(|e| CliError(e.to_string()))?
            + "\n"
    } else {
        let mut t = String::new();
        for d in &devices {
            let _ = writeln!(
                t,
                "device {}: live after event {} {} -> after event {} {} ({:+} bytes)",
                d.device,
                from.unwrap_or(0),
                human(d.from_bytes),
                to.unwrap_or(0),
                human(d.to_bytes),
                d.to_bytes as i64 - d.from_bytes as i64
            );
            for c in d.by_frame.iter().take(ROWS) {
                let _ = writeln!(t, "  {}  {}", signed(c.change_bytes), c.frame);
            }
            if !d.by_stack.is_empty() {
                let _ = writeln!(t, "  by stack (innermost frame first):");
            }
            for c in d.by_stack.iter().take(ROWS) {
                let _ = writeln!(t, "  {}  {}", signed(c.change_bytes), c.frame);
                let _ = writeln!(t, "              {}", stack_line(&c.frames));
            }
        }
        t
    };
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| CliError(format!("cannot write output: {e}")))
}

fn device_text(t: &mut String, d: &DeviceDiagnosis) {
    let v = &d.verdict;
    let _ = writeln!(
        t,
        "\ndevice {}: {}\n  {}",
        d.device,
        v.kind.name(),
        v.summary
    );
    for e in &v.evidence {
        let _ = writeln!(t, "  - {e}");
    }
    if !v.fixes.is_empty() {
        t.push_str("fixes:\n");
        for f in &v.fixes {
            let _ = writeln!(t, "  - {f}");
        }
    }
    for m in &v.missing {
        let _ = writeln!(t, "missing: {m}");
    }
    let p = &d.peak;
    let what = match p.event {
        Some(e) => format!("after event {e}"),
        None => "before the first event".into(),
    };
    let _ = writeln!(
        t,
        "\nalive {what}: {} in {} allocations, by user frame:",
        human(p.allocated_bytes),
        p.allocations
    );
    for g in p.top.iter().take(ROWS) {
        let _ = writeln!(
            t,
            "  {:>10} {:>5.1}% {:>7}  {}",
            human(g.bytes),
            100.0 * g.share,
            g.allocations,
            g.frame
        );
    }
    if p.top.len() > ROWS {
        let _ = writeln!(
            t,
            "  ... {} more frames (--json lists all)",
            p.top.len() - ROWS
        );
    }
    ledger_text(t, d);
    leaks_text(t, d);
    for o in &d.ooms {
        let _ = writeln!(
            t,
            "oom after event {}: {} asked in the {} pool by {}; largest free block {}, free in pool {}, reserved {}, allocated {}, device free {}{}",
            o.event,
            human(o.requested_bytes),
            o.pool,
            o.frame,
            human(o.largest_free_block_bytes),
            human(o.free_total_bytes),
            human(o.reserved_bytes),
            human(o.allocated_bytes),
            o.device_free_bytes.map_or("not recorded".into(), human),
            o.outside_allocator_bytes.map_or(String::new(), |x| format!(", outside the allocator {}", human(x)))
        );
    }
    let pf = &d.pending_frees;
    if pf.count > 0 {
        let _ = writeln!(
            t,
            "\npending frees (record_stream): {} blocks, {} in all; longest:",
            pf.count,
            human(pf.bytes)
        );
        for x in pf.largest.iter().take(5) {
            let dur = x
                .duration_us
                .map_or(format!("{} events", x.events), |us| format!("{us} us"));
            let _ = writeln!(t, "  {:>10} {:>12}  {}", human(x.bytes), dur, x.frame);
        }
    }
    for pp in &d.private_pools {
        let _ = writeln!(
            t,
            "private pool {:?} (CUDA graph): {} reserved, {} allocated in {} segments (not a leak)",
            pp.pool_id,
            human(pp.reserved_bytes),
            human(pp.allocated_bytes),
            pp.segments
        );
    }
}

fn ledger_text(t: &mut String, d: &DeviceDiagnosis) {
    for (name, rows, f) in [
        ("at the peak", &d.ledger.peak, &d.ledger.fragmentation_peak),
        ("at the end", &d.ledger.end, &d.ledger.fragmentation_end),
    ] {
        let _ = writeln!(t, "\nledger {name} (reserved {}):", human(f.reserved_bytes));
        for r in rows {
            let _ = writeln!(
                t,
                "  {:<16} {:>10} {:>5.1}%  {}",
                r.class.name(),
                human(r.bytes),
                100.0 * r.share,
                r.rule
            );
        }
        let _ = writeln!(
            t,
            "  {:<16} {:>10}  rounding {}, pending free {}, inactive_split {}, free segments {}; largest free block {}",
            "fragmentation",
            human(f.reserved_bytes.saturating_sub(f.requested_bytes)),
            human(f.rounding_bytes),
            human(f.pending_free_bytes),
            human(f.inactive_split_bytes),
            human(f.free_segments_bytes),
            human(f.largest_free_block_bytes)
        );
    }
    if let Some(e) = &d.ledger.expected {
        let _ = writeln!(
            t,
            "  expected model states for {} parameters ({}+{}+{} bytes each): {}; measured {} ({:+} bytes)",
            e.params,
            e.bytes_per_param[0],
            e.bytes_per_param[1],
            e.bytes_per_param[2],
            human(e.parameters_bytes + e.gradients_bytes + e.optimizer_state_bytes),
            human(e.measured_bytes),
            e.difference_bytes
        );
    }
}

fn leaks_text(t: &mut String, d: &DeviceDiagnosis) {
    if !d.steps.is_empty() {
        let live: Vec<String> = d
            .steps
            .iter()
            .take(12)
            .map(|s| human(s.live_at_start_bytes.max(0) as u64))
            .collect();
        let _ = writeln!(
            t,
            "\n{} steps ({:?}); live at step start: {}{}",
            d.steps.len(),
            d.step_source,
            live.join(", "),
            if d.steps.len() > 12 { ", ..." } else { "" }
        );
    }
    if d.leaks.is_empty() {
        return;
    }
    let _ = writeln!(
        t,
        "\nleak suspects ({}):",
        match d.leak_method {
            memlens_core::analysis::LeakMethod::Steps => "kept across steps",
            memlens_core::analysis::LeakMethod::EndOfTrace =>
                "alive at the end, born after the first 5% of the trace",
        }
    );
    for l in d.leaks.iter().take(ROWS) {
        let per = if l.steps > 0 {
            format!(", {}/step over {} steps", human(l.bytes_per_step), l.steps)
        } else {
            String::new()
        };
        let _ = writeln!(
            t,
            "  {:>10} {:>7} allocations{per}  {}",
            human(l.bytes),
            l.allocations,
            l.frame
        );
    }
}

/// A change of bytes as `+   1.2 MiB` / `-   1.2 MiB`.
fn signed(change_bytes: i64) -> String {
    let sign = if change_bytes < 0 { "-" } else { "+" };
    format!("{sign}{:>10}", human(change_bytes.unsigned_abs()))
}

/// Frames shown of a stack in `--between`'s text (the JSON has all).
const STACK_FRAMES: usize = 4;

/// A stack on one line: its first [`STACK_FRAMES`] frames, and how many more.
fn stack_line(frames: &[String]) -> String {
    if frames.is_empty() {
        return "(no stack)".into();
    }
    let shown = frames[..frames.len().min(STACK_FRAMES)].join(" < ");
    match frames.len().saturating_sub(STACK_FRAMES) {
        0 => shown,
        more => format!("{shown} < … {more} more"),
    }
}
