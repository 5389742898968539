//! `memlens stats`: per-device summary, as text or as one JSON object.

use crate::load::{load, CliError};
use memlens_core::snapshot_stats;

#[derive(clap::Args)]
pub struct Args {
    /// Snapshot file (pickle of any protocol, JSON, or _memory_viz HTML); `-` reads stdin.
    file: String,
    /// Print one JSON object {"devices": [...], "warnings": [...]}.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<(), CliError> {
    let snap = load(&a.file)?;
    let st = snapshot_stats(&snap);
    if a.json {
        let s = serde_json::to_string_pretty(&st).map_err(|e| CliError(e.to_string()))?;
        println!("{s}");
        return Ok(());
    }
    println!("{}: {}", a.file, snap.encoding.map(|e| e.to_string()).unwrap_or_default());
    for d in &st.devices {
        println!("{d:?}");
    }
    for w in &st.warnings {
        println!("warning: {w}");
    }
    Ok(())
}
