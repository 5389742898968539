//! Native decode time of one snapshot, as the viewer's worker decodes it: the file streamed into
//! `Loader` (its length known) and the model built, nothing else. The native side of the wasm
//! decode comparison (`BENCH_VIEW=decode node bench/browser.mjs`, which runs this once per round
//! between the browser's decodes).
//!
//!   cargo run --release -p memlens-core --example decode_bench -- FILE [ROUNDS] [--stats]
//!
//! `--stats`: each round also computes the per-device summary (`snapshot_stats`), as the worker
//! does before it answers that the file is decoded. Prints `decode_ms N cpu_ms M` for each round (wall, and this process's user + system CPU:
//! on a loaded machine the steadier of the two), then the medians.

use std::time::Instant;

/// User + system CPU milliseconds of this process so far (from /proc/self/stat; 0 elsewhere).
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    // fields 14 and 15 (utime, stime) are the 12th and 13th after the name; 1/100 s ticks
    let tick = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (tick(11) + tick(12)) * 10.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn main() {
    let mut args: Vec<String> = std::env::args().collect();
    let with_stats = args.iter().any(|a| a == "--stats");
    args.retain(|a| a != "--stats");
    let Some(path) = args.get(1) else {
        eprintln!("usage: decode_bench FILE [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(1).max(1);
    let (mut ms, mut cpu) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        let (t0, c0) = (Instant::now(), cpu_ms());
        let loaded = std::fs::File::open(path)
            .and_then(|f| Ok((f.metadata()?.len(), f)))
            .map_err(|e| e.to_string())
            .and_then(|(len, f)| {
                memlens_core::load_reader(f, Some(len)).map_err(|e| e.to_string())
            });
        let stats = match (&loaded, with_stats) {
            (Ok(s), true) => Some(memlens_core::snapshot_stats(s)),
            _ => None,
        };
        let took = t0.elapsed().as_secs_f64() * 1e3;
        let used = cpu_ms() - c0;
        drop(stats);
        match loaded {
            Ok(s) => drop(s),
            Err(e) => {
                eprintln!("decode_bench: {e}: {path}");
                std::process::exit(2);
            }
        }
        println!("decode_ms {took:.1} cpu_ms {used:.0}");
        ms.push(took);
        cpu.push(used);
    }
    println!(
        "median_ms {:.1} median_cpu_ms {:.0}",
        median(ms),
        median(cpu)
    );
}
