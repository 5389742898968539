//! Decode time of one pickle on one thread (`PickleMachine::decode_all`) and in pieces on N
//! threads (`raw::pickle::parallel::decode_parallel`), the file already in memory: what the
//! parallel decoder gains or costs apart from reading the file.
//!
//!   cargo run --release -p memlens-core --example parallel_bench -- FILE ROUNDS THREADS...
//!
//! Rounds alternate the variants; medians of wall and of the process's CPU time per variant.

use memlens_core::raw::pickle::parallel::decode_parallel;
use memlens_core::raw::PickleMachine;
use std::time::Instant;

/// User + system CPU seconds of this process so far (from /proc/self/stat).
fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    // fields 14 and 15 (utime, stime) are the 12th and 13th after the name; 1/100 s ticks
    let tick = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) / 100.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(path), Some(rounds)) = (args.get(1), args.get(2).and_then(|r| r.parse().ok())) else {
        eprintln!("usage: parallel_bench FILE ROUNDS THREADS...");
        std::process::exit(2);
    };
    let threads: Vec<usize> = args[3..].iter().filter_map(|t| t.parse().ok()).collect();
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut variants = vec![0usize];
    variants.extend(threads);
    let mut times: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); variants.len()];
    for r in 0..rounds {
        for k in 0..variants.len() {
            let i = (k + r) % variants.len();
            let (t0, c0) = (Instant::now(), cpu_s());
            let rows = match variants[i] {
                0 => PickleMachine::decode_all(&bytes).map(|(a, _, _)| a.rows.len()),
                n => decode_parallel(&bytes, n).map(|(a, _, _)| a.rows.len()),
            };
            times[i].0.push(t0.elapsed().as_secs_f64());
            times[i].1.push(cpu_s() - c0);
            if let Err(e) = rows {
                eprintln!("{path}: {e}");
                std::process::exit(2);
            }
        }
    }
    let mb = bytes.len() as f64 / 1e6;
    println!(
        "{:<14} {:>8} {:>8} {:>8}",
        "decode", "wall_s", "cpu_s", "MB/s"
    );
    for (v, (w, c)) in variants.iter().zip(times) {
        let name = match v {
            0 => "one thread".to_string(),
            n => format!("{n} threads"),
        };
        let w = median(w);
        println!("{name:<14} {w:>8.2} {:>8.2} {:>8.0}", median(c), mb / w);
    }
}
