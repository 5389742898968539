//! `memlens`: the same answers as the viewer, in a terminal and in CI. Exit status 0 on success,
//! 2 on bad input (one line naming what is wrong, the file last).

mod compare;
mod diagnose;
mod export;
mod flamegraph;
mod fmt;
mod gate;
mod html;
mod load;
mod serve;
mod slice;
mod stats;
mod synth;
mod trace;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "memlens",
    version,
    about = "Inspect PyTorch CUDA memory snapshots (offline replacement for torch.cuda._memory_viz)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    #[command(flatten)]
    part: load::Part,
}

#[derive(Subcommand)]
enum Cmd {
    /// Per-device summary: reserved, allocated, active, fragmentation, timeline peaks.
    Stats(stats::Args),
    /// Why memory ran out, who holds it at the peak, what keeps growing: a verdict with evidence and fixes.
    Diagnose(diagnose::Args),
    /// The trace of each device replayed as Python-like lines (like `_memory_viz trace`).
    Trace(trace::Args),
    /// Flamegraph SVG of what each segment holds, by allocation stack (like `_memory_viz segments`).
    Segments(flamegraph::FlameArgs),
    /// Flamegraph SVG of what the allocator holds, by stream and stack (like `_memory_viz memory`).
    Memory(flamegraph::FlameArgs),
    /// Segments only in one of two snapshots, and live bytes per stack at each timeline peak.
    Compare(flamegraph::CompareArgs),
    /// CI gate: exit 1 when a snapshot's timeline peak or peak reserved memory exceeds a limit.
    Check(gate::CheckArgs),
    /// Write snapshots as columnar tables (Parquet: trace, allocations, segments, blocks, frames, stacks, stats) for DuckDB, Polars or Spark.
    Export(export::Args),
    /// Write part of a snapshot (`--last N` or `--range FROM..TO`) as a smaller pickle that torch's `_memory_viz` reads.
    Slice(slice::Args),
    /// Write a snapshot pickle from a simulated CUDA caching allocator (any size, seeded).
    Synth(synth::Args),
    /// The viewer as one HTML file that opens from disk, or a report with snapshots embedded (like `_memory_viz trace_plot`, offline).
    Html(html::Args),
    /// Serve the viewer with snapshots open on 127.0.0.1, for an SSH port forward from a GPU node.
    Serve(serve::Args),
}

/// `memlens trace big.pickle | head`: when the reader goes away, stop quietly like other Unix
/// tools instead of panicking in `println!` (Rust ignores SIGPIPE, so the write fails instead).
fn quiet_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let p = info.payload();
        let msg = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied());
        if msg.is_some_and(|m| m.contains("failed printing to stdout") && m.contains("Broken pipe"))
        {
            std::process::exit(0);
        }
        default(info);
    }));
}

/// A gate's verdict: the line of a failed gate is printed and the exit status is 1.
fn gated(r: Result<Option<String>, load::CliError>) -> Result<(), load::CliError> {
    match r? {
        None => Ok(()),
        Some(line) => {
            use std::io::Write;
            let _ = std::io::stdout().flush();
            eprintln!("memlens: {line}");
            std::process::exit(1);
        }
    }
}

fn main() -> ExitCode {
    quiet_broken_pipe();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    // The viewer commands embed or serve files as they are; a part of one is `memlens slice`'s.
    if cli.part.range().is_some() && matches!(cli.cmd, Cmd::Synth(_) | Cmd::Html(_) | Cmd::Serve(_))
    {
        eprintln!("memlens: --last/--range apply to the commands that read snapshots (write a part first: memlens slice FILE --last N -o PART.pickle)");
        return ExitCode::from(2);
    }
    load::set_part(cli.part.range());
    load::set_threads(cli.part.threads());
    let r = match cli.cmd {
        Cmd::Stats(a) => stats::run(a),
        Cmd::Diagnose(a) => diagnose::run(a),
        Cmd::Trace(a) => trace::run(a),
        Cmd::Segments(a) => flamegraph::run(flamegraph::Kind::Segments, a),
        Cmd::Memory(a) => flamegraph::run(flamegraph::Kind::Memory, a),
        Cmd::Compare(a) => gated(flamegraph::run_compare(a)),
        Cmd::Check(a) => gated(gate::run_check(a)),
        Cmd::Export(a) => export::run(a),
        Cmd::Slice(a) => slice::run(a),
        Cmd::Synth(a) => synth::run(a),
        Cmd::Html(a) => html::run(a),
        Cmd::Serve(a) => serve::run(a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memlens: {e}");
            ExitCode::from(2)
        }
    }
}
