//! `memlens slice`: part of a snapshot (`--last N`, `--range FROM..TO`) written as a smaller
//! pickle in torch's own layout, which torch's `_memory_viz` and the upstream page read
//! (`memlens_core::range` cuts it, `memlens_core::model::save` writes it).

use crate::fmt::Bytes;
use crate::load::{load, part, CliError};
use std::io::{BufWriter, Write};

#[derive(clap::Args)]
pub struct Args {
    /// Snapshot file (pickle of any protocol, JSON, or _memory_viz HTML); `-` reads stdin.
    file: String,
    /// Pickle to write (`-`: stdout).
    #[arg(short, long)]
    output: String,
    /// Pickle protocol of the output (2–5; torch writes 4 or 5).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u8).range(2..=5))]
    protocol: u8,
}

pub fn run(a: Args) -> Result<(), CliError> {
    let Some(range) = part() else {
        return Err(CliError(format!(
            "memlens slice needs --last N or --range FROM..TO: {}",
            a.file
        )));
    };
    let snap = load(&a.file)?;
    let fail = |e: std::io::Error| CliError(format!("cannot write: {e}: {}", a.output));
    let written = if a.output == "-" {
        let out = BufWriter::new(std::io::stdout().lock());
        memlens_core::model::save::write_pickle(&snap, out, a.protocol)
            .and_then(|mut w| w.flush())
            .map_err(fail)?;
        None
    } else {
        let f = std::fs::File::create(&a.output).map_err(fail)?;
        let mut w = memlens_core::model::save::write_pickle(&snap, BufWriter::new(f), a.protocol)
            .map_err(fail)?;
        w.flush().map_err(fail)?;
        std::fs::metadata(&a.output).ok().map(|m| m.len())
    };
    if let Some(bytes) = written {
        let events: Vec<String> = snap
            .device_traces
            .iter()
            .filter(|t| !t.rows.is_empty())
            .map(|t| format!("device {}: {}", t.device, t.rows.len()))
            .collect();
        println!(
            "wrote {} ({}): {range}, events {}",
            a.output,
            Bytes::from(bytes),
            if events.is_empty() {
                "none".to_string()
            } else {
                events.join(", ")
            }
        );
    }
    Ok(())
}
