//! The worker's warm-up (`ToWorker::WarmUp`, sent only to a worker no file waits for): the
//! code a file's load runs, run [`ROUNDS`] times on the generated snapshot
//! ([`crate::worker::warm_up`]) while the page waits for a file. A page opened with its file
//! does not ask: there the warm-up would only delay the file's decode.
//!
//! V8 runs wasm first in its baseline tier and compiles a function optimized once it has used
//! its tiering budget (about 1.8 MB of code executed); a call already running stays in baseline
//! code (wasm has no on-stack replacement). The code a file runs once per load (the summary's
//! replay, the layouts) runs over the whole file in whatever tier it is in when the file comes:
//! after one pass over 6k entries much of it was still baseline code (a 100 MB file's first
//! layout took 778 ms in the worker, 290 ms after these rounds; docs/BENCHMARKS.md). The
//! decoder's own hot functions, called once an entry, tier up early in any file.
//!
//! Each step is short, and the event loop gets a turn between steps: a file that arrives stops
//! the warm-up at the next turn, and a worker the page holds (another one is decoding,
//! `ToWorker::Background`) waits there. The first pass runs on a very short snapshot, since
//! first calls also compile their code.

use super::{background_turn, partial, push_js, Shared};
use crate::wire::clock::now_ms;
use crate::wire::pack;
use crate::wire::protocol::FromWorker;
use crate::worker::warm_up::{snapshot_pickle, snapshot_pickle_of};
use js_sys::Uint8Array;
use memlens_core::layout::{TimelineKind, TimelineLayout};
use memlens_core::range::PartLoader;
use memlens_core::Snapshot;

/// Passes over the generated snapshot.
const ROUNDS: u32 = 6;
/// Allocations in the first pass's snapshot: a short one, so that each of its steps, which
/// compile the code they run on first use (V8 compiles wasm lazily), stays short too.
const FIRST_ROUND_ALLOCS: u64 = 100;
/// Bytes handed to the loader in one step.
const STEP_BYTES: u32 = 64 << 10;

/// Runs the rounds, posting the first round's layout (`FromWorker::WarmUpLayout`: the page
/// warms its drawing on it, and the pool starts its spare worker); stops when a file arrives.
pub(super) async fn warm_up(st: Shared) {
    let mut steps = Steps {
        st,
        start_ms: now_ms(),
        resumed_ms: now_ms(),
        busy_ms: 0.0,
        longest_ms: 0.0,
        step: 0,
        longest_step: 0,
    };
    // The first pass runs on the short snapshot; the full one is made in a step of its own.
    let Ok(first) = snapshot_pickle_of(FIRST_ROUND_ALLOCS) else {
        return;
    };
    let mut arr = Uint8Array::from(&first[..]);
    for round in 0..ROUNDS {
        if round == 1 {
            let Ok(full) = snapshot_pickle() else {
                return;
            };
            arr = Uint8Array::from(&full[..]);
        }
        let Some(layout) = one_round(&mut steps, &arr).await else {
            steps.log(&format!("stopped for a file after {round} rounds"));
            return;
        };
        if round == 0 {
            pack::reply_with(&FromWorker::WarmUpLayout, &layout).post();
        }
    }
    steps.end_step();
    steps.log(&format!("warmed up in {ROUNDS} rounds"));
}

/// The warm-up's steps, each run between two turns of the event loop.
struct Steps {
    st: Shared,
    start_ms: f64,
    /// When the current step began.
    resumed_ms: f64,
    busy_ms: f64,
    longest_ms: f64,
    /// Steps ended so far, and which was the longest.
    step: u32,
    longest_step: u32,
}

impl Steps {
    fn end_step(&mut self) {
        let ms = now_ms() - self.resumed_ms;
        self.busy_ms += ms;
        if ms > self.longest_ms {
            self.longest_ms = ms;
            self.longest_step = self.step;
        }
        self.step += 1;
    }

    /// Ends a step; whether the warm-up may go on after a turn of the event loop (no file
    /// arrived meanwhile).
    async fn go_on(&mut self) -> bool {
        self.end_step();
        background_turn(&self.st).await;
        self.resumed_ms = now_ms();
        !self.st.borrow().file_opened
    }

    fn log(&self, what: &str) {
        let ms = now_ms() - self.start_ms;
        web_sys::console::log_1(
            &format!(
                "memlens worker: {what}, {ms:.0} ms ({:.0} ms busy, longest step {:.1} ms: #{} of {})",
                self.busy_ms, self.longest_ms, self.longest_step, self.step
            )
            .into(),
        );
    }
}

/// One pass: read as a file is (with a picture of the trace so far half-way), the summary,
/// the preview layout packed and completed, the exact layout (returned). `None` when a file
/// arrived.
async fn one_round(steps: &mut Steps, arr: &Uint8Array) -> Option<TimelineLayout> {
    let total = arr.length();
    let mut loader = PartLoader::new(Some(u64::from(total)), None);
    let mut buf = Vec::new();
    let mut at = 0;
    let mut pictured = false;
    while at < total {
        if !steps.go_on().await {
            return None;
        }
        let end = total.min(at + STEP_BYTES);
        push_js(&mut loader, &mut buf, &arr.subarray(at, end)).ok()?;
        at = end;
        if !pictured && at < total && at > total / 2 {
            pictured = true;
            let done = f64::from(at);
            let _ = loader.with_prefix(|snap| {
                let (_, layout) = partial::picture(snap, done, f64::from(total), now_ms());
                layout.map(|l| pack::reply_with(&FromWorker::WarmUpLayout, &l))
            });
        }
    }
    if !steps.go_on().await {
        return None;
    }
    let snap = loader.finish().ok()?;
    if !steps.go_on().await {
        return None;
    }
    let _ = memlens_core::snapshot_stats(&snap);
    layouts(steps, &snap).await
}

/// The first view's layouts: the preview (packed, then completed) and the exact one.
async fn layouts(steps: &mut Steps, snap: &Snapshot) -> Option<TimelineLayout> {
    if !steps.go_on().await {
        return None;
    }
    let mut preview = TimelineLayout::build_preview_of_any_length(snap, 0);
    let _ = pack::reply_with(&FromWorker::WarmUpLayout, &preview);
    if !steps.go_on().await {
        return None;
    }
    preview.complete();
    if !steps.go_on().await {
        return None;
    }
    Some(TimelineLayout::build(snap, 0, TimelineKind::Active))
}
