//! Where `memlens diagnose`'s time goes on one snapshot: load, the allocation table, the states
//! the analysis reads (reconstructed alone, as `memlens diagnose` does, or a whole state
//! history), and the analysis over them (median of 5 runs each, time on a CPU where Linux tells
//! it, else wall time). Prints numbers; asserts nothing.
//!
//! `cargo run --release -p memlens-core --example diagnose_bench -- FILE [DEVICE]`

mod common;

use memlens_core::analysis::{diagnose_device, diagnose_with_history, fragmentation, Options};
use memlens_core::replay::replay_device;
use memlens_core::state::{AllocatorHistory, SampledStates};
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Time this thread has spent on a CPU (Linux `/proc/thread-self/schedstat`), so that waiting
/// for a CPU on a busy machine is not counted; wall time where it cannot be read.
fn on_cpu() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

fn time<T>(f: impl Fn() -> T) -> Duration {
    median(
        (0..5)
            .map(|_| {
                let (t, c) = (Instant::now(), on_cpu());
                std::hint::black_box(f());
                match (c, on_cpu()) {
                    (Some(a), Some(b)) => b - a,
                    _ => t.elapsed(),
                }
            })
            .collect(),
    )
}

fn main() {
    let (path, snap, device, load) = common::open_from_args("diagnose_bench");
    let replay = time(|| replay_device(&snap, device));
    let stats = time(|| memlens_core::device_stats(&snap, device));
    let history = time(|| AllocatorHistory::new(&snap, device));
    let h = AllocatorHistory::new(&snap, device);
    let analysis = time(|| diagnose_with_history(&snap, &h, &Options::default()));
    let r = replay_device(&snap, device);
    let sampled = time(|| {
        SampledStates::new(&snap, &r, |last, events, ooms| {
            fragmentation::wanted(last, events, ooms, &[None, None])
        })
    });
    let diagnose = time(|| diagnose_device(&snap, device, &Options::default()));
    println!(
        "{path} device {device}: load {load:.2?}; device_stats {stats:.2?}, replay {replay:.2?}; \
         diagnose_device (what `memlens diagnose` runs per device) {diagnose:.2?}, of which the \
         states it reads (SampledStates::new) {sampled:.2?}; for comparison: a whole state \
         history {history:.2?}, the analysis over it (incl. a replay) {analysis:.2?}; {} blocks \
         at the end",
        h.state_at(Some(usize::MAX)).counts().1
    );
}
