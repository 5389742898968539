//! Labelled cases: each workload plants one cause (or none) that a diagnosis must find, checked
//! here on the simulated events and final segments directly.

use memlens_synth::alloc::{Action, BlockState, Entry, SegmentInfo, Sink};
use memlens_synth::program::Program;
use memlens_synth::workload::{DeviceSim, Stop};
use memlens_synth::{Config, Workload};

#[derive(Default)]
struct Rec {
    entries: Vec<Entry>,
    /// (entries recorded before it, name, start)
    marks: Vec<(usize, String, bool)>,
}

impl Sink for Rec {
    fn entry(&mut self, _device: u32, e: &Entry) {
        self.entries.push(*e);
    }
    fn annotation(&mut self, _device: u32, _time_us: i64, name: &str, start: bool) {
        self.marks
            .push((self.entries.len(), name.to_string(), start));
    }
}

struct Run {
    prog: Program,
    rec: Rec,
    segs: Vec<SegmentInfo>,
    stopped: Option<Stop>,
}

fn run(workload: Workload, events: u64, seed: u64, device_memory_mib: u64) -> Run {
    let cfg = Config {
        workload,
        events,
        seed,
        device_memory_mib,
        ..Config::default()
    };
    let prog = Program::new(&cfg);
    let mut rec = Rec::default();
    let (segs, stopped) = {
        let mut sim = DeviceSim::new(&prog, 0);
        sim.run(&mut rec);
        (sim.allocator().snapshot(), sim.stopped())
    };
    Run {
        prog,
        rec,
        segs,
        stopped,
    }
}

/// The innermost frame of the user's own code: a `.py` file with no `torch` path component.
fn user_frame(prog: &Program, stack: u32) -> Option<String> {
    prog.stacks.frames_of(stack).iter().find_map(|&f| {
        let d = prog.stacks.frame_def(f)?;
        let user = d.filename.ends_with(".py") && !d.filename.split('/').any(|c| c == "torch");
        user.then(|| format!("{}:{}:{}", d.filename, d.line, d.name))
    })
}

/// Numbers at the end of a run, from the final segments (as a snapshot reports them).
#[derive(Debug)]
struct Final {
    reserved: u64,
    allocated: u64,
    largest_inactive_large: u64,
    inactive_split: u64,
}

fn final_numbers(segs: &[SegmentInfo]) -> Final {
    let mut f = Final {
        reserved: 0,
        allocated: 0,
        largest_inactive_large: 0,
        inactive_split: 0,
    };
    for s in segs {
        f.reserved += s.total_size_bytes;
        f.allocated += s.allocated_size_bytes;
        for b in &s.blocks {
            if b.state != BlockState::Inactive {
                continue;
            }
            if !s.is_small && s.pool_id == (0, 0) {
                f.largest_inactive_large = f.largest_inactive_large.max(b.size_bytes);
            }
            if s.blocks.len() > 1 {
                f.inactive_split += b.size_bytes;
            }
        }
    }
    f
}

/// Live bytes (allocated, not yet `free_completed`) at each `ProfilerStep#N` start, in total and
/// for the allocations whose user frame is `frame`.
fn live_at_step_starts(r: &Run, frame: Option<&str>) -> Vec<(u64, u64)> {
    let mut live = std::collections::HashMap::new();
    let mut out = Vec::new();
    let mut marks = r.rec.marks.iter().filter(|m| m.2).peekable();
    let (mut total, mut of_frame) = (0u64, 0u64);
    for (i, e) in r.rec.entries.iter().enumerate() {
        while let Some(m) = marks.peek() {
            if m.0 > i {
                break;
            }
            out.push((total, of_frame));
            marks.next();
        }
        let mine = frame.is_some() && user_frame(&r.prog, e.ctx.stack).as_deref() == frame;
        match e.action {
            Action::Alloc => {
                live.insert(e.addr, (e.size_bytes, mine));
                total += e.size_bytes;
                if mine {
                    of_frame += e.size_bytes;
                }
            }
            Action::FreeCompleted => {
                if let Some((n, m)) = live.remove(&e.addr) {
                    total -= n;
                    if m {
                        of_frame -= n;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The labelled cases, as `memlens synth --workload W --events 20000 --seed S
/// --device-memory-mib 81559` writes them (S = 4 for `oom`, else 0; docs/SYNTH.md).
fn labelled(w: Workload) -> Run {
    let seed = if w == Workload::Oom { 4 } else { 0 };
    run(w, 20_000, seed, 81_559)
}

/// The OOM at the end of a run: (request, device_free), after checking that the trace ends
/// with the retry's frees and the `oom` entry.
fn the_oom(r: &Run) -> (u64, u64) {
    assert_eq!(r.stopped, Some(Stop::Oom));
    let e = &r.rec.entries;
    let last = e[e.len() - 1];
    assert_eq!(last.action, Action::Oom);
    let retry = e[..e.len() - 1]
        .iter()
        .rev()
        .take_while(|x| matches!(x.action, Action::FreeCompleted | Action::SegmentFree));
    assert!(
        retry.filter(|x| x.action == Action::SegmentFree).count() > 0,
        "the retry released cached segments"
    );
    (last.size_bytes, last.addr)
}

#[test]
fn oom_asks_for_more_than_the_cache_and_the_device_hold() {
    let r = labelled(Workload::Oom);
    let (request, device_free) = the_oom(&r);
    let f = final_numbers(&r.segs);
    let cached_free = f.reserved - f.allocated;
    assert!(request > cached_free, "{request} {f:?}");
    assert!(
        request > cached_free + device_free,
        "{request} {device_free} {f:?}"
    );
    assert!(request > f.largest_inactive_large);
    let capacity = r.prog.alloc.device_total_bytes - r.prog.alloc.device_overhead_bytes;
    assert!(f.allocated + request > capacity);
    // little is cached beside what is allocated: nothing that looks like fragmentation
    assert!(cached_free * 100 < f.allocated, "{f:?}");
    let frame = user_frame(&r.prog, r.rec.entries[r.rec.entries.len() - 1].ctx.stack);
    assert!(frame.is_some_and(|f| f.contains("/train.py:")));
}

#[test]
fn oom_fragmentation_fails_where_the_free_blocks_together_would_hold_it() {
    let r = labelled(Workload::OomFragmentation);
    let (request, device_free) = the_oom(&r);
    let f = final_numbers(&r.segs);
    let cached_free = f.reserved - f.allocated;
    // larger than every free block (of any pool and stream) ...
    let largest_any = r
        .segs
        .iter()
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state == BlockState::Inactive)
        .map(|b| b.size_bytes)
        .max()
        .unwrap_or(0);
    assert!(request > largest_any, "{request} {largest_any}");
    assert!(request > f.largest_inactive_large);
    // ... while the cached free memory would hold it, with room to spare, and the device has
    // no room for a segment of that size
    assert!(cached_free > request + request / 2, "{request} {f:?}");
    assert!(device_free < memlens_synth::alloc::allocation_size(request));
    // the free memory lies between live blocks, not in whole free segments
    assert!(f.inactive_split * 10 >= cached_free * 9, "{f:?}");
    // not a program that simply needs more than the device has
    let capacity = r.prog.alloc.device_total_bytes - r.prog.alloc.device_overhead_bytes;
    assert!(
        f.allocated + request < capacity,
        "{f:?} {request} {capacity}"
    );
    let last = r.rec.entries[r.rec.entries.len() - 1];
    let frame = user_frame(&r.prog, last.ctx.stack).unwrap_or_default();
    assert!(
        frame.contains("/train.py:") && frame.ends_with(":evaluate"),
        "{frame}"
    );
    // training before it: steps without a leak
    let steps = live_at_step_starts(&r, None);
    assert!(steps.len() >= 3 && steps[1..].windows(2).all(|w| w[0].0 == w[1].0));
}

#[test]
fn oom_fragmentation_ends_in_oom_under_every_allocator_setting() {
    for (expandable, max_split, mib) in [
        (true, None, 81_559),
        (false, Some(64), 8192),
        (false, None, 4096),
    ] {
        let cfg = Config {
            workload: Workload::OomFragmentation,
            events: 5_000,
            seed: 3,
            expandable_segments: expandable,
            max_split_size_mb: max_split,
            device_memory_mib: mib,
            ..Config::default()
        };
        let prog = Program::new(&cfg);
        let mut rec = Rec::default();
        let mut sim = DeviceSim::new(&prog, 0);
        sim.run(&mut rec);
        assert_eq!(sim.stopped(), Some(Stop::Oom), "{cfg:?}");
        assert_eq!(rec.entries.last().map(|e| e.action), Some(Action::Oom));
        sim.allocator()
            .check_invariants()
            .unwrap_or_else(|e| panic!("{cfg:?}: {e}"));
    }
}

#[test]
fn leak_keeps_one_tensor_per_step_from_its_own_frame() {
    let r = labelled(Workload::Leak);
    let leak = user_frame(&r.prog, r.prog.sites.leak_clone).unwrap_or_default();
    assert!(
        leak.contains("/train.py:") && leak.ends_with(":train_step"),
        "{leak}"
    );
    // no other allocation has that user frame
    let mut leaked = 0;
    for e in r.rec.entries.iter().filter(|e| e.action == Action::Alloc) {
        if e.ctx.stack == r.prog.sites.leak_clone {
            leaked += 1;
        } else {
            assert_ne!(
                user_frame(&r.prog, e.ctx.stack).as_deref(),
                Some(leak.as_str())
            );
        }
    }
    let steps = live_at_step_starts(&r, Some(&leak));
    assert!(steps.len() >= 10, "{}", steps.len());
    assert!(leaked >= steps.len() - 1);
    // the leak frame's live bytes rise by the same amount every step, and so does the total
    let per = steps[1].1 - steps[0].1;
    assert!(per >= 64 << 20, "{per}");
    for w in steps.windows(2) {
        assert_eq!(w[1].1 - w[0].1, per);
    }
    for w in steps[1..].windows(2) {
        assert_eq!(w[1].0 - w[0].0, per, "nothing else grows");
    }
    // and every leaked tensor is alive at the end
    let alive: usize = r
        .segs
        .iter()
        .flat_map(|s| &s.blocks)
        .filter(|b| b.state == BlockState::ActiveAllocated)
        .filter(|b| b.ctx.is_some_and(|c| c.stack == r.prog.sites.leak_clone))
        .count();
    assert_eq!(alive, leaked);
}

#[test]
fn training_live_memory_is_flat_at_step_starts() {
    let r = labelled(Workload::Training);
    let steps = live_at_step_starts(&r, None);
    assert!(steps.len() >= 10, "{}", steps.len());
    assert!(
        steps[1].0 > steps[0].0,
        "the first step adds the optimizer states"
    );
    assert!(steps[1..].windows(2).all(|w| w[0].0 == w[1].0), "{steps:?}");
    assert!(r.rec.marks.iter().all(|m| m.1.starts_with("ProfilerStep#")));
}

#[test]
fn inference_holds_memory_in_private_pools() {
    let r = labelled(Workload::Inference);
    let private: Vec<&SegmentInfo> = r.segs.iter().filter(|s| s.pool_id != (0, 0)).collect();
    assert!(!private.is_empty());
    assert!(private.iter().map(|s| s.allocated_size_bytes).sum::<u64>() > 0);
}

/// Prints the numbers of the labelled cases (`cargo test -p memlens-synth --test labelled --
/// --ignored --nocapture`).
#[test]
#[ignore]
fn print_labelled_numbers() {
    for w in Workload::ALL {
        let r = labelled(w);
        let f = final_numbers(&r.segs);
        let last = r.rec.entries[r.rec.entries.len() - 1];
        println!(
            "{w}: {:?}, {} entries, {f:?}, capacity {}",
            r.stopped,
            r.rec.entries.len(),
            r.prog.alloc.device_total_bytes - r.prog.alloc.device_overhead_bytes
        );
        if last.action == Action::Oom {
            println!(
                "  oom: request {} device_free {} frame {:?}",
                last.size_bytes,
                last.addr,
                user_frame(&r.prog, last.ctx.stack)
            );
        }
        let leak = user_frame(&r.prog, r.prog.sites.leak_clone);
        let steps = live_at_step_starts(&r, leak.as_deref());
        println!(
            "  leak frame {leak:?}; opt_init frame {:?}",
            user_frame(&r.prog, r.prog.sites.opt_init)
        );
        println!("  step starts (total, leak frame): {steps:?}");
        let leaks = r
            .rec
            .entries
            .iter()
            .filter(|e| e.action == Action::Alloc && e.ctx.stack == r.prog.sites.leak_clone)
            .count();
        let ends = r.rec.marks.iter().filter(|m| !m.2).count();
        println!("  leak allocations {leaks}, step ends {ends}");
        let private: Vec<_> = r
            .segs
            .iter()
            .filter(|s| s.pool_id != (0, 0))
            .map(|s| (s.pool_id, s.total_size_bytes, s.allocated_size_bytes))
            .collect();
        println!("  private pools {private:?}");
    }
}
