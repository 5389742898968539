//! A large snapshot made of a real one: its longest device trace repeated until the pickle
//! reaches a target size (each repetition shifted in time), written by `model::save` (stacks
//! and frames once, shared by memo, as torch writes them). What bench/make_repeated.py does,
//! without Python's memory (~4.4 GB for 1 GB): this holds the repeated model, ~45 bytes an
//! entry, so it reaches the 4-8 GB inputs of docs/BENCHMARKS.md's "Any size".
//!
//! Usage: cargo run --release -p memlens-core --example repeat_snapshot -- SOURCE TARGET_MB OUT

use memlens_core::model::DeviceTrace;
use std::io::{BufWriter, Write};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [src, target_mb, out] = args.as_slice() else {
        return Err("usage: repeat_snapshot SOURCE TARGET_MB OUT".into());
    };
    let target_bytes = target_mb.parse::<f64>()? * 1e6;
    let mut s = memlens_core::load(&std::fs::read(src)?)?;
    let dt = s
        .device_traces
        .iter()
        .max_by_key(|d| d.rows.len())
        .cloned()
        .ok_or("no trace")?;
    let rows = dt.rows.start as usize..dt.rows.end as usize;
    // One repetition's bytes, from a pickle of the source with only that trace.
    s.trace = s.trace.select(std::slice::from_ref(&rows));
    s.device_traces = vec![DeviceTrace {
        device: dt.device,
        rows: 0..rows.len() as u32,
    }];
    let one = memlens_core::model::save::write_pickle(&s, Vec::new(), 4)?.len() as f64;
    let reps = (target_bytes / one).round().max(1.0) as usize;
    let n = rows.len();
    let times: Vec<i64> = (0..n).filter_map(|r| s.trace.time_of(r)).collect();
    let span = times
        .iter()
        .max()
        .zip(times.iter().min())
        .map_or(1, |(a, b)| a - b + 1);
    s.trace = s.trace.select(&vec![0..n; reps]);
    let known: Vec<bool> = (0..s.trace.len())
        .map(|r| s.trace.time_of(r).is_some())
        .collect();
    for ((i, t), k) in s.trace.time_us.iter_mut().enumerate().zip(known) {
        if k {
            *t += (i / n.max(1)) as i64 * span;
        }
    }
    s.device_traces = vec![DeviceTrace {
        device: dt.device,
        rows: 0..(n * reps) as u32,
    }];
    let f = std::fs::File::create(out)?;
    let mut w = memlens_core::model::save::write_pickle(&s, BufWriter::new(f), 4)?;
    w.flush()?;
    eprintln!("{reps} repetitions of {n} entries: {out}");
    Ok(())
}
