//! `memlens segments`, `memlens memory`, `memlens compare`: the flamegraphs of
//! `python -m torch.cuda._memory_viz`, drawn in-process with inferno instead of a `flamegraph.pl`
//! downloaded at run time, so they work offline. `compare` does what upstream's intends (it
//! crashes in torch 2.15) and adds a per-stack diff of the live bytes at each snapshot's timeline
//! peak. The folded lines come from [`memlens_core::flame`].

use crate::fmt::Bytes;
use crate::load::{load, CliError};
use inferno::flamegraph::color::BasicPalette;
use inferno::flamegraph::{self, Options, Palette};
use memlens_core::flame::{self as core_flame, FoldedLine, PeakLive};
use memlens_core::Snapshot;
use std::collections::BTreeMap;
use std::io::{self, BufWriter, Write};
use std::path::Path;

#[derive(clap::Args)]
pub struct FlameArgs {
    /// Snapshot file (pickle of any protocol, JSON, or _memory_viz HTML); `-` reads stdin.
    file: String,
    /// SVG to write (`-`: stdout). Default: segments.svg / memory.svg, as upstream.
    #[arg(short, long)]
    output: Option<String>,
    /// Print the folded lines (`stack;… bytes`) instead of drawing them.
    #[arg(long)]
    folded: bool,
    /// Only this device's segments (default: all, as upstream).
    #[arg(short, long)]
    device: Option<u32>,
}

#[derive(clap::Args)]
pub struct CompareArgs {
    /// Snapshot taken first.
    before: String,
    /// Snapshot taken later.
    after: String,
    /// SVG of the segments present in one snapshot only (`-`: stdout). Default: compare.svg.
    #[arg(short, long)]
    output: Option<String>,
    /// Print the folded lines of those segments after the summary instead of drawing them.
    #[arg(long)]
    folded: bool,
    /// Only this device (default: all).
    #[arg(short, long)]
    device: Option<u32>,
    /// How many stacks of the live-bytes diff to print.
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// Print the peak comparison as one JSON object {"devices": [...], "only_before", "only_after"} (no flamegraph).
    #[arg(long)]
    json: bool,
    /// CI gate: exit 1 when a device's timeline peak grew by more than this (`5%` or a size, `256MiB`).
    #[arg(long, value_parser = crate::gate::parse_limit)]
    max_peak_growth: Option<crate::gate::Limit>,
}

/// Which of upstream's two segment flamegraphs.
#[derive(Clone, Copy)]
pub enum Kind {
    Segments,
    Memory,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Segments => "segments",
            Kind::Memory => "memory",
        }
    }
}

pub fn run(kind: Kind, a: FlameArgs) -> Result<(), CliError> {
    let snap = load(&a.file)?;
    let lines = match kind {
        Kind::Segments => core_flame::segments_folded(&snap, a.device),
        Kind::Memory => core_flame::memory_folded(&snap, a.device),
    };
    if a.folded {
        return print_folded(&lines);
    }
    if lines.is_empty() {
        let what = match a.device {
            Some(d) => format!("no segments on device {d}"),
            None => "the snapshot holds no segments".to_string(),
        };
        return Err(CliError(format!("nothing to draw: {what}: {}", a.file)));
    }
    let default = format!("{}.svg", kind.name());
    let out = a.output.unwrap_or(default);
    let total: u64 = lines.iter().map(|l| l.size_bytes).sum();
    let title = format!("{} of {}", kind.name(), file_name(&a.file));
    write_svg(&lines, &title, &out)?;
    if out != "-" {
        println!(
            "wrote {out}: {} of segments, {} folded lines",
            Bytes::from(total),
            lines.len()
        );
    }
    Ok(())
}

/// `memlens compare`; `Ok(Some(line))` when the `--max-peak-growth` gate fails (exit 1).
pub fn run_compare(a: CompareArgs) -> Result<Option<String>, CliError> {
    let before = load(&a.before)?;
    let after = load(&a.after)?;
    let peaks = memlens_core::analysis::compare::compare_peaks(&before, &after, a.device);
    let gate = a
        .max_peak_growth
        .and_then(|l| crate::gate::peak_growth_violation(&peaks.devices, l));
    let diff = core_flame::compare_segments(&before, &after, a.device);
    if a.json {
        let v = serde_json::json!({
            "devices": peaks.devices,
            "only_before": diff.only_before,
            "only_after": diff.only_after,
        });
        let s = serde_json::to_string_pretty(&v).map_err(|e| CliError(e.to_string()))?;
        println!("{s}");
        return Ok(gate);
    }
    let stdout_svg = !a.folded && a.output.as_deref() == Some("-");
    // Upstream's two lines first (scripts read them), then the peak comparison.
    let mut text = String::new();
    text.push_str(&format!("only_before = {:?}\n", diff.only_before));
    text.push_str(&format!("only_after = {:?}\n", diff.only_after));
    text.push('\n');
    text.push_str(&crate::compare::peaks_text(&peaks.devices));
    text.push_str(&peak_diff_text(&before, &after, a.device, a.top));
    if a.folded {
        print!("{text}");
        return print_folded(&diff.lines).map(|()| gate);
    }
    // With the SVG on stdout the summary goes to stderr, so the SVG stays well-formed.
    if stdout_svg {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
    if diff.lines.is_empty() {
        let msg = "no segment is in one snapshot only: no flamegraph written";
        if stdout_svg {
            eprintln!("{msg}");
        } else {
            println!("{msg}");
        }
        return Ok(gate);
    }
    let out = a.output.unwrap_or_else(|| "compare.svg".to_string());
    let title = format!(
        "segments only in {} or only in {}",
        file_name(&a.before),
        file_name(&a.after)
    );
    write_svg(&diff.lines, &title, &out)?;
    if !stdout_svg {
        println!(
            "wrote {out}: segments present in one snapshot only ({} folded lines)",
            diff.lines.len()
        );
    }
    Ok(gate)
}

/// The per-stack diff of live requested bytes at each snapshot's timeline peak, as text.
fn peak_diff_text(before: &Snapshot, after: &Snapshot, device: Option<u32>, top: usize) -> String {
    let (pb, mb) = peaks(before, device);
    let (pa, ma) = peaks(after, device);
    let mut t = String::from("live bytes per stack at the timeline peak (requested sizes):\n");
    for (side, peaks) in [("before", &pb), ("after", &pa)] {
        if peaks.is_empty() {
            t.push_str(&format!("  {side:<6} no device\n"));
        }
        for p in peaks {
            let at = p.peak_event.map_or_else(
                || "before the first event".to_string(),
                |e| format!("at event {e}"),
            );
            t.push_str(&format!(
                "  {side:<6} device {}: {} live {at}\n",
                p.device,
                Bytes::from(p.live_bytes)
            ));
            if i128::from(p.live_bytes) != i128::from(p.peak_bytes) {
                t.push_str(&format!(
                    "         (the timeline peak is {}: the trace and the final segments disagree)\n",
                    Bytes::from(p.peak_bytes)
                ));
            }
        }
    }
    let deltas = core_flame::stack_diff(&mb, &ma);
    if deltas.is_empty() {
        t.push_str("no stack differs\n");
        return t;
    }
    t.push_str(&format!(
        "{:>11} {:>11} {:>11}  stack (root;…;leaf)\n",
        "delta", "before", "after"
    ));
    for d in deltas.iter().take(top) {
        let delta = d.delta_bytes();
        let sign = if delta > 0 { "+" } else { "-" };
        let abs = u64::try_from(delta.unsigned_abs()).unwrap_or(u64::MAX);
        t.push_str(&format!(
            "{:>11} {:>11} {:>11}  {}\n",
            format!("{sign}{}", Bytes::from(abs)),
            Bytes::from(d.before_bytes).to_string(),
            Bytes::from(d.after_bytes).to_string(),
            short_stack(&d.stack, 4)
        ));
    }
    if deltas.len() > top {
        t.push_str(&format!(
            "… {} more stacks differ (--top N shows more)\n",
            deltas.len() - top
        ));
    }
    t
}

/// Peak of every device (or of one), and their stacks summed.
fn peaks(s: &Snapshot, device: Option<u32>) -> (Vec<PeakLive>, BTreeMap<String, u64>) {
    let devices: Vec<u32> = match device {
        Some(d) => s.devices().into_iter().filter(|&x| x == d).collect(),
        None => s.devices(),
    };
    let peaks: Vec<PeakLive> = devices
        .into_iter()
        .map(|d| core_flame::live_by_stack_at_peak(s, d))
        .collect();
    let mut sum: BTreeMap<String, u64> = BTreeMap::new();
    for p in &peaks {
        for (k, v) in &p.by_stack {
            let e = sum.entry(k.clone()).or_default();
            *e = e.saturating_add(*v);
        }
    }
    (peaks, sum)
}

/// A folded stack cut for one line: the innermost `keep` levels down to the last Python frame
/// (`.py:`), since C++ frames under it (`stacks="all"`) are the same allocator calls everywhere.
fn short_stack(stack: &str, keep: usize) -> String {
    let levels: Vec<&str> = stack.split(';').collect();
    let end = levels
        .iter()
        .rposition(|l| l.contains(".py:"))
        .map_or(levels.len(), |i| i + 1);
    let start = end.saturating_sub(keep);
    let mut out = String::new();
    if start > 0 {
        out.push_str(&format!("…{start} more;"));
    }
    out.push_str(&levels.get(start..end).unwrap_or(&[]).join(";"));
    if end < levels.len() {
        out.push_str(&format!(" [+{} native frames]", levels.len() - end));
    }
    out
}

fn file_name(path: &str) -> &str {
    Path::new(path)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(path)
}

fn print_folded(lines: &[FoldedLine]) -> Result<(), CliError> {
    let mut out = BufWriter::new(io::stdout().lock());
    let r = lines
        .iter()
        .try_for_each(|l| writeln!(out, "{l}"))
        .and_then(|()| out.flush());
    match r {
        // `memlens segments --folded f | head` is normal use.
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(CliError(format!("cannot write output: {e}")))
        }
        _ => Ok(()),
    }
}

/// Draws folded lines with inferno (bytes as the count, memory palette, colours by name so
/// the same stack has the same colour in every file) and writes the SVG whole.
fn write_svg(lines: &[FoldedLine], title: &str, out: &str) -> Result<(), CliError> {
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let mut opt = Options::default();
    opt.title = title.to_string();
    opt.count_name = "bytes".to_string();
    opt.colors = Palette::Basic(BasicPalette::Mem);
    opt.hash = true;
    let mut svg: Vec<u8> = Vec::new();
    flamegraph::from_lines(&mut opt, text.iter().map(String::as_str), &mut svg)
        .map_err(|e| CliError(format!("cannot draw the flamegraph: {e}")))?;
    if out == "-" {
        let mut so = io::stdout().lock();
        return match so.write_all(&svg).and_then(|()| so.flush()) {
            Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
                Err(CliError(format!("cannot write output: {e}")))
            }
            _ => Ok(()),
        };
    }
    std::fs::write(out, &svg).map_err(|e| CliError(format!("cannot write file: {e}: {out}")))
}

#[cfg(test)]
mod tests {
    use super::short_stack;

    #[test]
    fn short_stack_keeps_the_innermost_python_levels() {
        assert_eq!(short_stack("a;b;c", 8), "a;b;c");
        assert_eq!(short_stack("a;b;c;d", 2), "…2 more;c;d");
        assert_eq!(
            short_stack("m.py:1:main;f.py:2:f;alloc;malloc", 1),
            "…1 more;f.py:2:f [+2 native frames]"
        );
        assert_eq!(
            short_stack("m.py:1:main;f.py:2:f;malloc", 4),
            "m.py:1:main;f.py:2:f [+1 native frames]"
        );
    }
}
