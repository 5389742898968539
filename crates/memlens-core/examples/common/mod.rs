//! What the benchmark examples share: reading `FILE [DEVICE]` from the command line and
//! decoding the file, exiting with a one-line error (status 2) when that fails.

use memlens_core::Snapshot;
use std::time::{Duration, Instant};

/// The decoded snapshot of the first argument, the device (second argument, else the
/// snapshot's default), the path and the decode time. `tool` names the example in messages.
pub fn open_from_args(tool: &str) -> (String, Snapshot, u32, Duration) {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: {tool} FILE [DEVICE]");
        std::process::exit(2);
    };
    let t0 = Instant::now();
    let snap = match std::fs::File::open(&path)
        .map_err(|e| e.to_string())
        .and_then(|f| memlens_core::load_reader(f, None).map_err(|e| e.to_string()))
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{tool}: {e}: {path}");
            std::process::exit(2);
        }
    };
    let load = t0.elapsed();
    let device = match args.next().and_then(|d| d.parse().ok()) {
        Some(d) => d,
        None => snap.default_device().unwrap_or(0),
    };
    (path, snap, device, load)
}
