//! Writes a parsed [`Fixture`] in its [`Form`]: the snapshot dict (or bare segment list) in
//! torch's key order, as a pickle, as JSON, or inside the HTML page `_memory_viz` writes.

use crate::document::{EventDef, Fixture, Form, Scalar, StackRef, State};
use crate::error::FixtureError;
use crate::sink::{JsonSink, PickleSink, Shared, Sink};
use base64::Engine;
use memlens_core::write::PickleWriter;
use rustc_hash::FxHashMap;
use std::io;

impl Fixture {
    /// Writes the snapshot in [`Options::form`].
    pub fn to_bytes(&self) -> Result<Vec<u8>, FixtureError> {
        if !(2..=5).contains(&self.options.protocol) {
            return Err(FixtureError::Write(format!(
                "protocol {} is not 2..=5",
                self.options.protocol
            )));
        }
        match self.options.form {
            Form::Snapshot | Form::Segments => self.to_pickle(),
            Form::Json => {
                let mut s = JsonSink::default();
                self.write_doc(&mut s)?;
                s.out.push('\n');
                Ok(s.out.into_bytes())
            }
            Form::TracePlot => {
                Ok(html_page(&self.to_pickle()?, "Active Memory Timeline").into_bytes())
            }
            Form::SegmentPlot => {
                Ok(html_page(&self.to_pickle()?, "Allocator State History").into_bytes())
            }
        }
    }

    fn to_pickle(&self) -> Result<Vec<u8>, FixtureError> {
        let mut s = PickleSink {
            w: PickleWriter::new(Vec::new(), self.options.protocol),
            shared: FxHashMap::default(),
        };
        self.write_doc(&mut s)?;
        Ok(s.w.finish()?)
    }

    fn device_count(&self) -> usize {
        match self.options.devices {
            Some(n) => n as usize,
            None => {
                let seg_max = self
                    .segments
                    .iter()
                    .map(|s| s.device as usize + 1)
                    .max()
                    .unwrap_or(0);
                self.traces.len().max(seg_max).max(1)
            }
        }
    }

    fn write_doc<S: Sink>(&self, s: &mut S) -> io::Result<()> {
        if self.options.form == Form::Segments {
            return self.write_segments(s);
        }
        s.begin_dict()?;
        s.str("segments")?;
        self.write_segments(s)?;
        s.str("device_traces")?;
        s.begin_list()?;
        for d in 0..self.device_count() {
            s.begin_list()?;
            for e in self.traces.get(d).map(Vec::as_slice).unwrap_or(&[]) {
                self.write_event(s, e)?;
            }
            s.end()?;
        }
        s.end()?;
        if !self.settings.is_empty() {
            s.str("allocator_settings")?;
            s.begin_dict()?;
            for (k, v) in &self.settings {
                s.str(k)?;
                match v {
                    Scalar::Bool(b) => s.bool(*b)?,
                    Scalar::Int(i) => s.int(*i)?,
                    Scalar::Float(f) => s.float(*f)?,
                    Scalar::Str(x) => s.str(x)?,
                }
            }
            s.end()?;
        }
        if !self.regions.is_empty() {
            s.str("external_annotations")?;
            s.begin_list()?;
            for r in &self.regions {
                s.begin_dict()?;
                s.str("stage")?;
                s.str(&r.stage)?;
                s.str("name")?;
                s.str(&r.name)?;
                s.str("device")?;
                s.uint(r.device as u64)?;
                s.str("time_us")?;
                s.int(r.time_us)?;
                s.end()?;
            }
            s.end()?;
        }
        s.end()?;
        Ok(())
    }

    fn write_segments<S: Sink>(&self, s: &mut S) -> io::Result<()> {
        let legacy = self.options.legacy;
        s.begin_list()?;
        for g in &self.segments {
            let (mut allocated, mut active, mut requested) = (0u64, 0u64, 0u64);
            for b in &g.blocks {
                if b.state == State::Allocated {
                    allocated = allocated.saturating_add(b.size);
                }
                if b.state.is_active() {
                    active = active.saturating_add(b.size);
                    requested = requested.saturating_add(b.requested.unwrap_or(b.size));
                }
            }
            s.begin_dict()?;
            s.str("device")?;
            s.uint(g.device as u64)?;
            s.str("address")?;
            s.uint(g.address)?;
            s.str("total_size")?;
            s.uint(g.total)?;
            s.str("allocated_size")?;
            s.uint(allocated)?;
            s.str("active_size")?;
            s.uint(active)?;
            s.str("requested_size")?;
            s.uint(requested)?;
            s.str("stream")?;
            s.uint(g.stream)?;
            s.str("segment_type")?;
            let small = g.total <= 2 * 1024 * 1024;
            s.str(
                g.segment_type
                    .as_deref()
                    .unwrap_or(if small { "small" } else { "large" }),
            )?;
            if !legacy {
                s.str("segment_pool_id")?;
                s.pair(g.pool.0, g.pool.1)?;
                s.str("is_expandable")?;
                s.bool(g.expandable)?;
                s.str("frames")?;
                self.write_stack(s, g.frames.or(Some(EMPTY_STACK)))?;
            }
            s.str("blocks")?;
            s.begin_list()?;
            let mut cursor = g.address;
            for b in &g.blocks {
                let addr = b.address.unwrap_or(cursor);
                cursor = addr.wrapping_add(b.size);
                s.begin_dict()?;
                if legacy {
                    // torch 2.0: the request lives only in `history[0].real_size`.
                    s.str("size")?;
                    s.uint(b.size)?;
                    s.str("state")?;
                    s.str(b.state.name())?;
                    if b.state.is_active() || b.frames.is_some() {
                        s.str("history")?;
                        s.begin_list()?;
                        s.begin_dict()?;
                        s.str("addr")?;
                        s.uint(addr)?;
                        s.str("real_size")?;
                        s.uint(b.requested.unwrap_or(b.size))?;
                        s.str("frames")?;
                        self.write_stack(s, b.frames.or(Some(EMPTY_STACK)))?;
                        s.end()?;
                        s.end()?;
                    }
                } else {
                    s.str("address")?;
                    s.uint(addr)?;
                    s.str("size")?;
                    s.uint(b.size)?;
                    s.str("requested_size")?;
                    s.uint(
                        b.requested
                            .unwrap_or(if b.state.is_active() { b.size } else { 0 }),
                    )?;
                    s.str("state")?;
                    s.str(b.state.name())?;
                    s.str("frames")?;
                    self.write_stack(s, b.frames.or(Some(EMPTY_STACK)))?;
                }
                s.end()?;
            }
            s.end()?;
            s.end()?;
        }
        s.end()?;
        Ok(())
    }

    fn write_event<S: Sink>(&self, s: &mut S, e: &EventDef) -> io::Result<()> {
        s.begin_dict()?;
        s.str("action")?;
        s.str(&e.action)?;
        match e.device_free {
            Some(free) => {
                s.str("device_free")?;
                s.uint(free)?;
            }
            None => {
                s.str("addr")?;
                s.uint(e.addr)?;
            }
        }
        s.str("size")?;
        s.uint(e.size)?;
        s.str("stream")?;
        s.uint(e.stream)?;
        if let (Some(t), true, false) = (e.time_us, self.options.time_us, self.options.legacy) {
            s.str("time_us")?;
            s.int(t)?;
        }
        if let Some(c) = &e.compile_context {
            s.str("compile_context")?;
            s.str(c)?;
        }
        if let Some(m) = &e.user_metadata {
            s.str("user_metadata")?;
            s.str(m)?;
        }
        if e.frames.is_some() {
            s.str("frames")?;
            self.write_stack(s, e.frames)?;
        }
        s.end()?;
        Ok(())
    }

    fn write_stack<S: Sink>(&self, s: &mut S, stack: StackRef) -> io::Result<()> {
        let Some(id) = stack else { return s.none() };
        // Each empty list is its own object in torch (no context captured): never shared.
        if id != EMPTY_STACK && s.get_shared(Shared::Stack(id))? {
            return Ok(());
        }
        s.begin_list()?;
        for &f in self
            .stacks
            .get(id as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[])
        {
            if s.get_shared(Shared::Frame(f))? {
                continue;
            }
            let Some(fr) = self.frames.get(f as usize) else {
                continue;
            };
            s.begin_dict()?;
            if self.options.legacy {
                s.str("filename")?;
                s.str(&fr.filename)?;
                s.str("name")?;
                s.str(&fr.name)?;
            } else {
                s.str("name")?;
                s.str(&fr.name)?;
                s.str("filename")?;
                s.str(&fr.filename)?;
            }
            s.str("line")?;
            s.int(fr.line)?;
            let m = s.end()?;
            s.put_shared(Shared::Frame(f), m);
        }
        let m = s.end()?;
        if id != EMPTY_STACK {
            s.put_shared(Shared::Stack(id), m);
        }
        Ok(())
    }
}

/// The empty stack is always stack 0.
const EMPTY_STACK: u32 = 0;

/// The page `_memory_viz trace_plot`/`segment_plot` writes (torch ≥ 2.1 `_format_viz`): the
/// pickle padded with `3 - len % 3` NUL bytes (so the base64 has no `=`), base64-encoded, in
/// `const local_files = [...]`, byte for byte the upstream template.
pub fn html_page(pickle: &[u8], viz_kind: &str) -> String {
    let mut buf = pickle.to_vec();
    buf.extend(std::iter::repeat_n(0u8, 3 - buf.len() % 3));
    let b64 = base64::engine::general_purpose::STANDARD.encode(&buf);
    let files = format!("[{{\"name\": \"snapshot.pickle\", \"base64\": \"{b64}\"}}]");
    let kind = format!("'{}'", viz_kind.replace('\\', "\\\\").replace('\'', "\\'"));
    format!(
        "\n<!DOCTYPE html>\n<html>\n<head>\n</head>\n<body>\n<script type=\"module\">\nimport {{add_local_files}} from \"https://cdn.jsdelivr.net/gh/pytorch/pytorch@main/torch/utils/viz/MemoryViz.js\"\nconst local_files = {files}\nadd_local_files(local_files, {kind})\n</script>\n</body>\n"
    )
}
