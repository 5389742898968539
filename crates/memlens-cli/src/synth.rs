//! `memlens synth`: writes a snapshot pickle from a simulated CUDA caching allocator (see the
//! memlens-synth crate), for tests and benchmarks at sizes no real snapshot at hand has.

use crate::load::CliError;
use memlens_synth::{write_snapshot, Config, Workload};
use std::io::{BufWriter, Write};

#[derive(clap::Args)]
pub struct Args {
    /// What the simulated program does: training, inference, fragmenting, leak, oom or
    /// oom-fragmentation.
    #[arg(long, value_parser = parse_workload)]
    workload: Workload,
    /// Trace entries to simulate over all devices (each device finishes the operation that reaches its share).
    #[arg(long)]
    events: u64,
    /// Seed: the same arguments always give the same bytes.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Simulated devices (1 to 16); devices > 1 adds a communication stream.
    #[arg(long, default_value_t = 1)]
    devices: u32,
    /// Pickle protocol (2 to 5); torch on Python <= 3.13 writes 4.
    #[arg(long, default_value_t = 4)]
    protocol: u8,
    /// Keep only the newest M entries per device, like `_record_memory_history(max_entries=M)`.
    #[arg(long)]
    max_entries: Option<u64>,
    /// Simulate `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`.
    #[arg(long)]
    expandable_segments: bool,
    /// Simulate `PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:N`.
    #[arg(long)]
    max_split_size_mb: Option<u64>,
    /// Memory of each simulated device in MiB (default: an 80 GB H100).
    #[arg(long, default_value_t = 81_559)]
    device_memory_mib: u64,
    /// Output file (`-` writes to stdout).
    #[arg(short = 'o', long = "output")]
    output: String,
    /// Print nothing on success.
    #[arg(short, long)]
    quiet: bool,
}

fn parse_workload(s: &str) -> Result<Workload, String> {
    s.parse::<Workload>().map_err(|e| e.to_string())
}

pub fn run(a: Args) -> Result<(), CliError> {
    let cfg = Config {
        workload: a.workload,
        events: a.events,
        seed: a.seed,
        devices: a.devices,
        protocol: a.protocol,
        max_entries: a.max_entries,
        expandable_segments: a.expandable_segments,
        max_split_size_mb: a.max_split_size_mb,
        device_memory_mib: a.device_memory_mib,
    };
    cfg.validate().map_err(|e| CliError(e.to_string()))?;
    let path = a.output.as_str();
    let summary = if path == "-" {
        let out = BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
        write_snapshot(&cfg, out).map_err(|e| CliError(format!("{e}: {path}")))?
    } else {
        let file = std::fs::File::create(path)
            .map_err(|e| CliError(format!("cannot create file: {e}: {path}")))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let s = write_snapshot(&cfg, &mut out).map_err(|e| CliError(format!("{e}: {path}")))?;
        out.flush()
            .map_err(|e| CliError(format!("cannot write file: {e}: {path}")))?;
        s
    };
    if !a.quiet && path != "-" {
        let kept: u64 = summary.entries_written.iter().sum();
        let simulated: u64 = summary.entries_simulated.iter().sum();
        println!(
            "{path}: {} bytes, {} trace entries ({} simulated) on {} device(s), {} segments, {} annotations{}",
            summary.bytes_written,
            kept,
            simulated,
            summary.entries_written.len(),
            summary.segments,
            summary.annotations,
            if summary.ended_in_oom { ", ends in oom" } else { "" }
        );
    }
    Ok(())
}
