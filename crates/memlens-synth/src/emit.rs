//! Writes the snapshot pickle the way `pickle.dump(torch.cuda.memory._snapshot(), f)` lays it
//! out: top-level keys in torch's order (segments, device_traces, allocator_settings,
//! external_annotations); dict keys and action/state names shared; frame dicts written once and
//! referred to by memo afterwards; one frames list per captured context, shared by every entry
//! and block that holds that context (torch's `py_symbolize` dedup); fresh strings where torch
//! creates a new Python string each time (`compile_context`, frame text, annotation fields).
//!
//! Segments come first in the file but are the state at the end, so each device is simulated
//! once to reach its final state and count its entries, then again to stream its entries
//! (dropping the oldest past `max_entries`, like torch's ring buffer); the annotations are merged
//! in time order from a third, lock-step run of all devices. Memory stays that of the live
//! allocator state, whatever the number of events.

use crate::alloc::{Ctx, Entry, SegmentInfo, Sink};
use crate::program::Program;
use crate::workload::{DeviceSim, Stop};
use crate::{Summary, SynthError};
use memlens_core::write::{MemoId, PickleWriter};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::io::{self, Write};

/// Counts bytes on their way to the sink.
struct Counted<W: Write> {
    inner: W,
    bytes: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

struct Emitter<'p, W: Write> {
    w: PickleWriter<Counted<W>>,
    prog: &'p Program,
    frame_memo: Vec<Option<MemoId>>,
    /// Frames lists written in `segments`, by (device, context serial): the trace refers back.
    ctx_memo: FxHashMap<(u32, u64), MemoId>,
    /// The last frames list written in the trace (entries sharing a context are adjacent).
    last: Option<(u32, u64, MemoId)>,
}

impl<W: Write> Emitter<'_, W> {
    /// A string torch creates anew each time (CPython still shares '' and 1-character strings).
    fn fresh(&mut self, s: &str) -> io::Result<()> {
        if s.len() < 2 {
            return self.w.str(s);
        }
        self.w.set_memoize_strings(false);
        let r = self.w.str(s);
        self.w.set_memoize_strings(true);
        r
    }

    fn frame(&mut self, id: u32) -> io::Result<()> {
        if let Some(Some(m)) = self.frame_memo.get(id as usize) {
            return self.w.get(*m);
        }
        let Some(f) = self.prog.stacks.frame_def(id) else {
            return self.w.none();
        };
        self.w.begin_dict();
        self.w.str("name")?;
        self.fresh(&f.name)?;
        self.w.str("filename")?;
        self.fresh(&f.filename)?;
        self.w.str("line")?;
        self.w.int(f.line)?;
        let m = self.w.end()?;
        if let Some(slot) = self.frame_memo.get_mut(id as usize) {
            *slot = Some(m);
        }
        Ok(())
    }

    fn frames_list(&mut self, dev: u32, ctx: Option<Ctx>, remember: bool) -> io::Result<()> {
        let Some(ctx) = ctx else {
            self.w.begin_list();
            self.w.end()?;
            return Ok(());
        };
        if let Some(&m) = self.ctx_memo.get(&(dev, ctx.serial)) {
            return self.w.get(m);
        }
        if let Some((d, s, m)) = self.last {
            if d == dev && s == ctx.serial {
                return self.w.get(m);
            }
        }
        self.w.begin_list();
        let prog = self.prog;
        for &f in prog.stacks.frames_of(ctx.stack) {
            self.frame(f)?;
        }
        let m = self.w.end()?;
        if remember {
            self.ctx_memo.insert((dev, ctx.serial), m);
        } else {
            self.last = Some((dev, ctx.serial, m));
        }
        Ok(())
    }

    fn segment(&mut self, seg: &SegmentInfo) -> io::Result<()> {
        let w = &mut self.w;
        w.begin_dict();
        w.str("device")?;
        w.int(seg.device as i64)?;
        w.str("address")?;
        w.uint(seg.address)?;
        w.str("total_size")?;
        w.uint(seg.total_size_bytes)?;
        w.str("allocated_size")?;
        w.uint(seg.allocated_size_bytes)?;
        w.str("active_size")?;
        w.uint(seg.active_size_bytes)?;
        w.str("requested_size")?;
        w.uint(seg.requested_size_bytes)?;
        w.str("stream")?;
        w.uint(seg.stream)?;
        w.str("segment_type")?;
        w.str(if seg.is_small { "small" } else { "large" })?;
        w.str("segment_pool_id")?;
        w.int_pair(seg.pool_id.0, seg.pool_id.1)?;
        w.str("is_expandable")?;
        w.bool(seg.is_expandable)?;
        // torch sets `frames` to [] at once when there is no context, and adds the symbolized
        // list after `blocks` when there is one.
        if seg.ctx.is_none() {
            self.w.str("frames")?;
            self.frames_list(seg.device, None, true)?;
        }
        self.w.str("blocks")?;
        self.w.begin_list();
        for b in &seg.blocks {
            self.w.begin_dict();
            self.w.str("address")?;
            self.w.uint(b.address)?;
            self.w.str("size")?;
            self.w.uint(b.size_bytes)?;
            self.w.str("requested_size")?;
            self.w.uint(b.requested_size_bytes)?;
            self.w.str("state")?;
            self.w.str(b.state.name())?;
            self.w.str("frames")?;
            self.frames_list(seg.device, b.ctx, true)?;
            self.w.end()?;
        }
        self.w.end()?;
        if seg.ctx.is_some() {
            self.w.str("frames")?;
            self.frames_list(seg.device, seg.ctx, true)?;
        }
        self.w.end()?;
        Ok(())
    }

    fn entry(&mut self, dev: u32, e: &Entry) -> io::Result<()> {
        self.w.begin_dict();
        self.w.str("action")?;
        self.w.str(e.action.name())?;
        self.w.str(if e.action == crate::alloc::Action::Oom {
            "device_free"
        } else {
            "addr"
        })?;
        self.w.uint(e.addr)?;
        self.w.str("size")?;
        self.w.uint(e.size_bytes)?;
        self.w.str("stream")?;
        self.w.uint(e.stream)?;
        self.w.str("time_us")?;
        self.w.int(e.time_us)?;
        self.w.str("compile_context")?;
        self.fresh("N/A")?;
        self.w.str("user_metadata")?;
        self.w.str("")?;
        self.w.str("frames")?;
        self.frames_list(dev, Some(e.ctx), false)?;
        self.w.end()?;
        Ok(())
    }

    fn allocator_settings(&mut self) -> io::Result<()> {
        let a = &self.prog.alloc;
        let mut conf = Vec::new();
        if a.expandable_segments {
            conf.push("expandable_segments:True".to_string());
        }
        if let Some(m) = a.max_split_size_bytes {
            conf.push(format!("max_split_size_mb:{}", m >> 20));
        }
        let conf = conf.join(",");
        self.w.begin_dict();
        self.w.str("PYTORCH_CUDA_ALLOC_CONF")?;
        self.fresh(&conf)?;
        self.w.str("max_split_size")?;
        self.w
            .int(a.max_split_size_bytes.map_or(-1, |m| m as i64))?;
        self.w.str("garbage_collection_threshold")?;
        self.w.float(0.0)?;
        self.w.str("expandable_segments")?;
        self.w.bool(a.expandable_segments)?;
        self.w.str("pinned_num_register_threads")?;
        self.w.int(1)?;
        self.w.str("release_lock_on_cudamalloc")?;
        self.w.bool(false)?;
        self.w.str("pinned_use_cuda_host_register")?;
        self.w.bool(false)?;
        self.w.str("graph_capture_record_stream_reuse")?;
        self.w.bool(false)?;
        self.w.str("roundup_power2_divisions")?;
        self.w.begin_dict();
        for i in 0..16 {
            self.w.str(&(1u32 << i).to_string())?;
            self.w.int(0)?;
        }
        self.w.end()?;
        self.w.end()?;
        Ok(())
    }

    fn annotation(&mut self, device: u32, time_us: i64, name: &str, start: bool) -> io::Result<()> {
        self.w.begin_dict();
        self.fresh("stage")?;
        self.fresh(if start { "START" } else { "END" })?;
        self.fresh("name")?;
        self.fresh(name)?;
        self.w.str("device")?;
        self.w.int(device as i64)?;
        self.w.str("time_us")?;
        self.w.int(time_us)?;
        self.w.end()?;
        Ok(())
    }
}

/// Pass 1: counts entries and keeps nothing else.
struct Null;

impl Sink for Null {
    fn entry(&mut self, _device: u32, _e: &Entry) {}
    fn annotation(&mut self, _device: u32, _time_us: i64, _name: &str, _start: bool) {}
}

/// Pass 2: writes one device's entries after the first `skip`.
struct TraceOut<'e, 'p, W: Write> {
    em: &'e mut Emitter<'p, W>,
    skip: u64,
    seen: u64,
    written: u64,
    err: Option<io::Error>,
}

impl<W: Write> Sink for TraceOut<'_, '_, W> {
    fn entry(&mut self, device: u32, e: &Entry) {
        self.seen += 1;
        if self.seen <= self.skip || self.err.is_some() {
            return;
        }
        if let Err(err) = self.em.entry(device, e) {
            self.err = Some(err);
        }
        self.written += 1;
    }
    fn annotation(&mut self, _device: u32, _time_us: i64, _name: &str, _start: bool) {}
}

/// Pass 3: buffers one device's annotations until the merge takes them.
#[derive(Default)]
struct Annotations {
    q: VecDeque<(i64, String, bool)>,
}

impl Sink for Annotations {
    fn entry(&mut self, _device: u32, _e: &Entry) {}
    fn annotation(&mut self, _device: u32, time_us: i64, name: &str, start: bool) {
        self.q.push_back((time_us, name.to_string(), start));
    }
}

pub fn write<W: Write>(prog: &Program, out: W) -> Result<Summary, SynthError> {
    let ndev = prog.devices.len() as u32;
    // Pass 1: the final state of each device and how many entries it records.
    let mut simulated = Vec::new();
    let mut segments: Vec<SegmentInfo> = Vec::new();
    let mut oom = false;
    for d in 0..ndev {
        let mut sim = DeviceSim::new(prog, d);
        sim.run(&mut Null);
        simulated.push(sim.emitted());
        oom |= sim.stopped() == Some(Stop::Oom);
        segments.extend(sim.allocator().snapshot());
    }
    let mut em = Emitter {
        w: PickleWriter::new(
            Counted {
                inner: out,
                bytes: 0,
            },
            prog.cfg.protocol,
        ),
        prog,
        frame_memo: vec![None; prog.stacks.frame_count()],
        ctx_memo: FxHashMap::default(),
        last: None,
    };
    em.w.begin_dict();
    em.w.str("segments")?;
    em.w.begin_list();
    for seg in &segments {
        em.segment(seg)?;
    }
    em.w.end()?;
    let segment_count = segments.len() as u64;
    drop(segments);
    // Pass 2: each device's entries, the newest `max_entries` of them.
    em.w.str("device_traces")?;
    em.w.begin_list();
    let mut written = Vec::new();
    for d in 0..ndev {
        let total = simulated.get(d as usize).copied().unwrap_or(0);
        let keep = prog.cfg.max_entries.unwrap_or(u64::MAX);
        em.w.begin_list();
        let mut sink = TraceOut {
            em: &mut em,
            skip: total.saturating_sub(keep),
            seen: 0,
            written: 0,
            err: None,
        };
        let mut sim = DeviceSim::new(prog, d);
        sim.run(&mut sink);
        if let Some(e) = sink.err.take() {
            return Err(e.into());
        }
        written.push(sink.written);
        em.ctx_memo.retain(|k, _| k.0 != d);
        em.last = None;
        em.w.end()?;
    }
    em.w.end()?;
    em.w.str("allocator_settings")?;
    em.allocator_settings()?;
    // Pass 3: annotations of all devices, merged by time.
    em.w.str("external_annotations")?;
    em.w.begin_list();
    let mut sims: Vec<(DeviceSim, Annotations)> = (0..ndev)
        .map(|d| (DeviceSim::new(prog, d), Annotations::default()))
        .collect();
    let mut annotations = 0u64;
    loop {
        let mut best: Option<(i64, usize)> = None;
        for (i, (sim, buf)) in sims.iter_mut().enumerate() {
            while buf.q.is_empty() && sim.step(buf) {}
            if let Some(&(t, _, _)) = buf.q.front() {
                if best.is_none_or(|(bt, _)| t < bt) {
                    best = Some((t, i));
                }
            }
        }
        let Some((_, i)) = best else { break };
        let Some((t, name, start)) = sims.get_mut(i).and_then(|(_, b)| b.q.pop_front()) else {
            break;
        };
        em.annotation(i as u32, t, &name, start)?;
        annotations += 1;
    }
    em.w.end()?;
    em.w.end()?;
    let out = em.w.finish()?;
    Ok(Summary {
        bytes_written: out.bytes,
        entries_simulated: simulated,
        entries_written: written,
        segments: segment_count,
        annotations,
        ended_in_oom: oom,
        distinct_stacks: prog.stacks.stack_count() as u64,
    })
}
