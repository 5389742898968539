//! Where `memlens diagnose`'s time goes on one snapshot: load, the allocation table, the state
//! history, and the analysis over them (median of 5 runs each). Prints numbers; asserts nothing.
//!
//! `cargo run --release -p memlens-core --example diagnose_bench -- FILE [DEVICE]`

mod common;

use memlens_core::analysis::{diagnose_with_history, Options};
use memlens_core::replay::replay_device;
use memlens_core::state::AllocatorHistory;
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<T>(f: impl Fn() -> T) -> Duration {
    median(
        (0..5)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed()
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
    println!(
        "{path} device {device}: load {load:.2?}; device_stats {stats:.2?}, replay {replay:.2?}, state history {history:.2?}, analysis over the history (incl. a replay) {analysis:.2?}"
    );
}
