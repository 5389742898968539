//! Measures the Allocator State History on one snapshot: build time, memory, and the cost of
//! random seeks, fresh states and ±1 steps. Prints numbers; asserts nothing.
//!
//! `cargo run --release -p memlens-core --example state_bench -- FILE [DEVICE]`

mod common;

use memlens_core::state::AllocatorHistory;
use std::time::{Duration, Instant};

fn main() {
    let (path, snap, device, load) = common::open_from_args("state_bench");
    let t1 = Instant::now();
    let h = AllocatorHistory::new(&snap, device);
    let build = t1.elapsed();
    let n = h.events();
    let trace_bytes = n as u64 * 49;
    println!("{path} device {device}: {n} events, load {load:.2?}, build {build:.2?}");
    println!(
        "stride {}, memory {:.1} MiB (checkpoints {:.1} MiB), model trace columns ~{:.1} MiB, ratio {:.2}",
        h.stride(),
        h.memory_bytes() as f64 / 1048576.0,
        h.checkpoint_bytes() as f64 / 1048576.0,
        trace_bytes as f64 / 1048576.0,
        h.memory_bytes() as f64 / trace_bytes.max(1) as f64
    );
    println!("diagnostics: {:?}", h.diagnostics().warnings());
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let report = |what: &str, mut v: Vec<Duration>| {
        v.sort();
        let sum: Duration = v.iter().sum();
        let pick = |q: f64| {
            v.get(((v.len() as f64 - 1.0) * q) as usize)
                .copied()
                .unwrap_or_default()
        };
        println!(
            "{what}: n={} mean {:.1?} p50 {:.1?} p99 {:.1?} max {:.1?}",
            v.len(),
            sum / v.len().max(1) as u32,
            pick(0.5),
            pick(0.99),
            pick(1.0)
        );
    };
    let mut st = h.state_at(None);
    let mut seeks = Vec::new();
    for _ in 0..2000 {
        let e = (rnd() % (n as u64).max(1)) as usize;
        let t = Instant::now();
        h.seek(&mut st, Some(e));
        let _ = st.numbers();
        seeks.push(t.elapsed());
    }
    report("random seek (reused state)", seeks);
    let mut fresh = Vec::new();
    for _ in 0..200 {
        let e = (rnd() % (n as u64).max(1)) as usize;
        let t = Instant::now();
        let s = h.state_at(Some(e));
        let _ = s.numbers();
        fresh.push(t.elapsed());
    }
    report("fresh state_at", fresh);
    let mut steps = Vec::new();
    h.seek(&mut st, Some(n / 2));
    for k in 0..100_000 {
        let d = if (k / 1000) % 2 == 0 { 1 } else { -1 };
        let t = Instant::now();
        h.step(&mut st, d);
        let _ = st.numbers();
        steps.push(t.elapsed());
    }
    report("step ±1", steps);
    let t = Instant::now();
    let c = st.columns();
    println!(
        "columns() of {} blocks: {:.1?}",
        c.block_address.len(),
        t.elapsed()
    );
    let peak = (0..n).step_by((n / 1000).max(1)).map(|e| {
        h.seek(&mut st, Some(e));
        st.counts().1
    });
    println!(
        "max blocks over 1000 sampled states: {}",
        peak.max().unwrap_or(0)
    );
}
