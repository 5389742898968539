//! model → pickle: a [`Snapshot`] written back in torch's own layout (the dict
//! `torch.cuda.memory._snapshot()` returns, or the bare segment list), so that torch's
//! `_memory_viz` and the upstream page read it. Used by `memlens slice` to write part of a
//! trace. Stacks and frames are written once and shared by memo, as torch's pickles share them.
//!
//! What comes back on reading it is the same model (segments, blocks, every trace entry with
//! its extras, annotations, settings, host data); legacy (torch ≤ 2.0) blocks are written in the
//! current form.

use super::{BlockState, Segment, Snapshot};
use crate::trace::{EntryExtra, FrameId, StackId, TraceColumns};
use crate::write::{MemoId, PickleWriter};
use rustc_hash::FxHashMap;
use std::io::{self, Write};
use std::ops::Range;

/// Writes `s` as a pickle of `protocol` to `out`; returns `out`.
pub fn write_pickle<W: Write>(s: &Snapshot, out: W, protocol: u8) -> io::Result<W> {
    let mut w = Saver {
        s,
        w: PickleWriter::new(out, protocol),
        stacks: FxHashMap::default(),
        frames: FxHashMap::default(),
    };
    if s.segments_only {
        w.segments()?;
    } else {
        w.document()?;
    }
    w.w.finish()
}

struct Saver<'a, W: Write> {
    s: &'a Snapshot,
    w: PickleWriter<W>,
    stacks: FxHashMap<StackId, MemoId>,
    frames: FxHashMap<FrameId, MemoId>,
}

impl<W: Write> Saver<'_, W> {
    fn key(&mut self, k: &str) -> io::Result<()> {
        self.w.str(k)
    }

    fn document(&mut self) -> io::Result<()> {
        let s = self.s;
        self.w.begin_dict();
        self.key("segments")?;
        self.segments()?;
        self.key("device_traces")?;
        self.w.begin_list();
        let ordinals = s.devices().last().map_or(0, |&d| d + 1);
        for d in 0..ordinals {
            self.entries(&s.trace, s.device_rows(d))?;
        }
        self.w.end()?;
        if let Some(v) = &s.allocator_settings {
            self.key("allocator_settings")?;
            self.json(v)?;
        }
        if !s.external_annotations.is_empty() {
            self.key("external_annotations")?;
            self.annotations()?;
        }
        if let Some(v) = &s.host_segments {
            self.key("host_segments")?;
            self.json(v)?;
        }
        if !s.host_trace.is_empty() {
            self.key("host_traces")?;
            self.entries(&s.host_trace, 0..s.host_trace.len() as u32)?;
        }
        self.w.end().map(drop)
    }

    fn segments(&mut self) -> io::Result<()> {
        self.w.begin_list();
        for seg in &self.s.segments {
            self.segment(seg)?;
        }
        self.w.end().map(drop)
    }

    fn segment(&mut self, g: &Segment) -> io::Result<()> {
        let s = self.s;
        self.w.begin_dict();
        self.key("device")?;
        self.w.uint(u64::from(g.device))?;
        for (k, v) in [
            ("address", g.address),
            ("total_size", g.total_size_bytes),
            ("allocated_size", g.allocated_size_bytes),
            ("active_size", g.active_size_bytes),
            ("requested_size", g.requested_size_bytes),
            ("stream", g.stream),
        ] {
            self.key(k)?;
            self.w.uint(v)?;
        }
        self.key("segment_type")?;
        self.w.str(s.str(g.segment_type))?;
        self.key("segment_pool_id")?;
        self.w.int_pair(g.pool_id.0, g.pool_id.1)?;
        self.key("is_expandable")?;
        self.w.bool(g.is_expandable)?;
        self.key("frames")?;
        self.stack(g.stack)?;
        self.key("blocks")?;
        self.w.begin_list();
        for b in s.segment_blocks(g) {
            self.w.begin_dict();
            for (k, v) in [
                ("address", b.address),
                ("size", b.size_bytes),
                ("requested_size", b.requested_size_bytes),
            ] {
                self.key(k)?;
                self.w.uint(v)?;
            }
            self.key("state")?;
            self.w.str(match b.state {
                BlockState::Unknown => BlockState::Inactive.name(),
                st => st.name(),
            })?;
            self.key("frames")?;
            self.stack(b.stack)?;
            self.w.end()?;
        }
        self.w.end()?;
        self.w.end().map(drop)
    }

    /// One list of trace entries: rows `rows` of `t`.
    fn entries(&mut self, t: &TraceColumns, rows: Range<u32>) -> io::Result<()> {
        let s = self.s;
        let (mut streams, mut contexts, mut metadata) = (
            t.stream.cursor(),
            t.compile_context.cursor(),
            t.user_metadata.cursor(),
        );
        self.w.begin_list();
        for r in rows {
            let row = r as usize;
            let (Some(&action), Some(&addr), Some(&size)) =
                (t.action.get(row), t.addr.get(row), t.size_bytes.get(row))
            else {
                continue;
            };
            self.w.begin_dict();
            self.key("action")?;
            let name = match action {
                crate::trace::Action::Unknown => t
                    .extras_of(r)
                    .find_map(|e| match e {
                        EntryExtra::ActionName(n) => Some(s.str(*n)),
                        _ => None,
                    })
                    .unwrap_or(""),
                a => a.name(),
            };
            self.w.str(name)?;
            match t.device_free(r) {
                Some(free) => {
                    self.key("device_free")?;
                    self.w.uint(free)?;
                }
                None => {
                    self.key("addr")?;
                    self.w.uint(addr)?;
                }
            }
            self.key("size")?;
            self.w.uint(size)?;
            self.key("stream")?;
            self.w.uint(streams.at(row).unwrap_or(0))?;
            if let Some(time) = t.time_of(row) {
                self.key("time_us")?;
                self.w.int(time)?;
            }
            for (k, v) in [
                ("compile_context", contexts.at(row)),
                ("user_metadata", metadata.at(row)),
            ] {
                if let Some(v) = v.filter(|v| *v != crate::trace::StrId::EMPTY) {
                    self.key(k)?;
                    self.w.str(s.str(v))?;
                }
            }
            self.extras(t, r)?;
            self.key("frames")?;
            self.stack(t.stack.get(row).copied().unwrap_or(StackId::EMPTY))?;
            self.w.end()?;
        }
        self.w.end().map(drop)
    }

    /// An entry's rare fields (the action name and `device_free` are written by the caller).
    fn extras(&mut self, t: &TraceColumns, row: u32) -> io::Result<()> {
        let s = self.s;
        for e in t.extras_of(row) {
            match e {
                EntryExtra::InternalMetadata(v) => {
                    self.key("internal_metadata")?;
                    self.w.str(s.str(*v))?;
                }
                EntryExtra::Category(v) => {
                    self.key("category")?;
                    self.w.str(s.str(*v))?;
                }
                EntryExtra::PoolId(a, b) => {
                    self.key("pool_id")?;
                    self.w.int_pair(*a, *b)?;
                }
                EntryExtra::ForwardFrames(v) => {
                    self.key("forward_frames")?;
                    self.w.begin_list();
                    for x in v {
                        self.w.str(s.str(*x))?;
                    }
                    self.w.end()?;
                }
                EntryExtra::DeviceFree(_) | EntryExtra::ActionName(_) => {}
            }
        }
        Ok(())
    }

    fn annotations(&mut self) -> io::Result<()> {
        let s = self.s;
        self.w.begin_list();
        for a in &s.external_annotations {
            self.w.begin_dict();
            self.key("device")?;
            self.w.uint(u64::from(a.device))?;
            if a.time_us != crate::trace::TIME_NONE {
                self.key("time_us")?;
                self.w.int(a.time_us)?;
            }
            self.key("name")?;
            self.w.str(s.str(a.name))?;
            self.key("stage")?;
            self.w.str(s.str(a.stage))?;
            self.w.end()?;
        }
        self.w.end().map(drop)
    }

    /// A frames list, written once per stack and referred to by memo after that (the empty
    /// stack is a fresh list each time, as torch writes it).
    fn stack(&mut self, id: StackId) -> io::Result<()> {
        if let Some(&m) = self.stacks.get(&id) {
            return self.w.get(m);
        }
        let s = self.s;
        self.w.begin_list();
        for &f in s.stacks.get(id) {
            if let Some(&m) = self.frames.get(&f) {
                self.w.get(m)?;
                continue;
            }
            let Some(fr) = s.frame(f) else { continue };
            self.w.begin_dict();
            self.key("filename")?;
            self.w.str(s.str(fr.filename))?;
            self.key("line")?;
            self.w.int(fr.line)?;
            self.key("name")?;
            self.w.str(s.str(fr.name))?;
            let m = self.w.end()?;
            self.frames.insert(f, m);
        }
        let m = self.w.end()?;
        if id != StackId::EMPTY {
            self.stacks.insert(id, m);
        }
        Ok(())
    }

    /// A JSON value (settings, host segments) as the Python value it was read from.
    fn json(&mut self, v: &serde_json::Value) -> io::Result<()> {
        use serde_json::Value as J;
        match v {
            J::Null => self.w.none(),
            J::Bool(b) => self.w.bool(*b),
            J::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => self.w.int(i),
                (None, Some(u), _) => self.w.uint(u),
                (_, _, f) => self.w.float(f.unwrap_or(0.0)),
            },
            J::String(x) => self.w.str(x),
            J::Array(items) => {
                self.w.begin_list();
                for x in items {
                    self.json(x)?;
                }
                self.w.end().map(drop)
            }
            J::Object(m) => {
                self.w.begin_dict();
                for (k, x) in m {
                    self.w.str(k)?;
                    self.json(x)?;
                }
                self.w.end().map(drop)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written and read again, the model is the same: writing it again gives the same bytes,
    /// and what the views read (names, numbers, extras) is unchanged.
    #[test]
    fn a_snapshot_written_back_reads_the_same() {
        let doc = br#"{"segments": [{"device": 0, "address": 4096, "total_size": 2048, "allocated_size": 512, "active_size": 512, "requested_size": 500, "stream": 0, "segment_type": "small", "segment_pool_id": [0, 0], "is_expandable": false, "frames": [], "blocks": [{"address": 4096, "size": 512, "requested_size": 500, "state": "active_allocated", "frames": [{"filename": "a.py", "line": 3, "name": "f"}]}, {"address": 4608, "size": 1536, "requested_size": 0, "state": "inactive", "frames": []}]}],
            "device_traces": [[{"action": "alloc", "addr": 4096, "size": 500, "stream": 0, "time_us": 10, "frames": [{"filename": "a.py", "line": 3, "name": "f"}]},
                               {"action": "oom", "device_free": 7, "size": 4096, "stream": 0, "time_us": 11, "frames": []},
                               {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": 12, "frames": [], "user_metadata": "u", "compile_context": "c"},
                               {"action": "segment_map", "addr": 8192, "size": 2097152, "stream": 0, "time_us": 13, "frames": [], "pool_id": [1, 2]}], []],
            "allocator_settings": {"max_split_size": -1, "roundup": [1, 2.5]},
            "external_annotations": [{"device": 0, "time_us": 10, "name": "fwd", "stage": "START"}]}"#;
        let a = crate::load(doc).unwrap_or_else(|e| panic!("{e}"));
        for protocol in [2, 4, 5] {
            let bytes = write_pickle(&a, Vec::new(), protocol).unwrap_or_else(|e| panic!("{e}"));
            let b = crate::load(&bytes).unwrap_or_else(|e| panic!("{e}"));
            let again = write_pickle(&b, Vec::new(), protocol).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(again, bytes, "p{protocol}: written twice");
            assert_eq!(b.str(b.segments[0].segment_type), "small");
            assert_eq!(b.blocks, {
                let mut x = a.blocks.clone();
                x.iter_mut()
                    .zip(&b.blocks)
                    .for_each(|(x, y)| x.stack = y.stack);
                x
            });
            let names: Vec<&str> = (0..b.trace.len()).map(|r| b.action_name(r)).collect();
            assert_eq!(names, ["alloc", "oom", "snapshot", "segment_map"]);
            assert_eq!(b.trace.device_free(1), Some(7));
            assert_eq!(b.trace.time_us, a.trace.time_us);
            assert_eq!(b.device_traces, a.device_traces);
            assert!(b.trace.extras_of(3).any(|e| *e == EntryExtra::PoolId(1, 2)));
            assert_eq!(b.str(b.trace.user_metadata.to_vec(2..3)[0]), "u");
            assert_eq!(b.allocator_settings, a.allocator_settings);
            assert_eq!(b.external_annotations.len(), 1);
            assert_eq!(b.str(b.external_annotations[0].stage), "START");
            assert_eq!(b.warnings, a.warnings);
        }
    }
}
