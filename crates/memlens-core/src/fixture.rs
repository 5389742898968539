//! The test-fixture builder: a small line-oriented text form that reads like the data and writes
//! real snapshot bytes (through [`crate::write::PickleWriter`], so pickles look like CPython's),
//! so tests need no binary files and every input form torch produces can be made on demand.
//!
//! ```text
//! # comments run to the end of a line
//! protocol 4                   # 2 | 3 | 4 | 5 (default 4)
//! form snapshot                # snapshot | segments | json | trace_plot | segment_plot
//! stack fwd train.py:10:forward|model.py:5:fwd      # a named stack, innermost frame first
//! segment 0x7f0000000000 20MiB stream=0 pool=0,0 frames=@fwd
//!   block 4MiB allocated requested=4000000 frames=@fwd
//!   block rest inactive        # `rest`: what is left of the segment
//! alloc a 0x7f0000000000 4MiB frames=@fwd
//! free a                       # free_requested + free_completed
//! ```
//!
//! Directives: `protocol N`, `form F`, `legacy` (torch 2.0 shapes: blocks without `address`/
//! `frames` but with `history: [{addr, real_size, frames}]`, segments without `segment_pool_id`/
//! `is_expandable`/`frames`, trace entries without `time_us`), `no_time_us`, `devices N`
//! (length of `device_traces`), `device N` (device of the lines that follow), `clock START
//! [STEP]` (the automatic `time_us`), `stack NAME FRAMES`, `setting KEY VALUE`
//! (`allocator_settings`), `region START|END NAME` (`external_annotations`).
//!
//! Data: `segment ADDR SIZE` with `device= stream= pool=A,B type=large|small expandable
//! frames=`, then indented or not, `block SIZE|rest STATE` with `requested= frames= addr=`
//! (STATE: `allocated`, `pending_free`, `inactive` or a full torch name). Trace lines: `alloc
//! [NAME] ADDR SIZE`, `free NAME|ADDR SIZE`, `free_requested …`, `free_completed …`,
//! `segment_alloc|segment_free|segment_map|segment_unmap ADDR SIZE`, `oom SIZE device_free=N`,
//! `snapshot`, `annotate NAME|ADDR TEXT`, `event ACTION [ADDR [SIZE]]` (any action name); all take
//! `stream= time= frames= ctx= meta= device=`. Frames are `file:line:function` joined by `|`
//! (quote the value when a name has spaces) or `@NAME`; identical frame lists and frames are
//! written once and shared by memo, as torch's `py_symbolize` does.

use crate::write::{MemoId, PickleWriter};
use base64::Engine;
use rustc_hash::FxHashMap;
use std::io;
use thiserror::Error;

/// Why a fixture text could not be turned into bytes. Line numbers count from 1.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FixtureError {
    #[error("line {line}: unknown command `{word}`")]
    UnknownCommand { line: usize, word: String },
    #[error("line {line}: `{command}` needs {what}")]
    Missing {
        line: usize,
        command: String,
        what: &'static str,
    },
    #[error("line {line}: bad {what} `{text}`")]
    Bad {
        line: usize,
        what: &'static str,
        text: String,
    },
    #[error("line {line}: unknown option `{key}=` for `{command}`")]
    UnknownOption {
        line: usize,
        command: String,
        key: String,
    },
    #[error("line {line}: unexpected `{text}` after `{command}`")]
    Extra {
        line: usize,
        command: String,
        text: String,
    },
    #[error("line {line}: unknown allocation `{name}` (no live `alloc {name}` before it)")]
    UnknownName { line: usize, name: String },
    #[error("line {line}: unknown stack `@{name}` (define it with `stack {name} …` first)")]
    UnknownStack { line: usize, name: String },
    #[error("line {line}: `block` before any `segment`")]
    BlockOutsideSegment { line: usize },
    #[error("line {line}: unterminated quote")]
    UnterminatedQuote { line: usize },
    #[error("line {line}: {what}")]
    Invalid { line: usize, what: String },
    #[error("writing the fixture failed: {0}")]
    Write(String),
}

impl From<io::Error> for FixtureError {
    fn from(e: io::Error) -> Self {
        FixtureError::Write(e.to_string())
    }
}

/// What the bytes look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// A pickled snapshot dict (`torch.cuda.memory._dump_snapshot`).
    Snapshot,
    /// A pickled bare list of segments (`torch.cuda.memory_snapshot()`); trace lines are dropped.
    Segments,
    /// The snapshot dict as JSON (tuples as arrays), as `json.dumps` writes it.
    Json,
    /// `python -m torch.cuda._memory_viz trace_plot` HTML ('Active Memory Timeline').
    TracePlot,
    /// `python -m torch.cuda._memory_viz segment_plot` HTML ('Allocator State History').
    SegmentPlot,
}

impl Form {
    /// The usual file extension of this form.
    pub fn extension(self) -> &'static str {
        match self {
            Form::Snapshot | Form::Segments => "pickle",
            Form::Json => "json",
            Form::TracePlot | Form::SegmentPlot => "html",
        }
    }

    fn parse(s: &str) -> Option<Form> {
        Some(match s {
            "snapshot" | "dict" => Form::Snapshot,
            "segments" | "list" => Form::Segments,
            "json" => Form::Json,
            "trace_plot" | "html" => Form::TracePlot,
            "segment_plot" => Form::SegmentPlot,
            _ => return None,
        })
    }
}

/// Output choices; set by directives, changeable afterwards ([`Fixture::options_mut`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Pickle protocol, 2..=5 (also of the pickle inside HTML).
    pub protocol: u8,
    pub form: Form,
    /// torch 2.0 layouts (see the module doc).
    pub legacy: bool,
    /// Whether trace entries carry `time_us`.
    pub time_us: bool,
    /// Length of `device_traces`; by default one more than the highest device used.
    pub devices: Option<u32>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            protocol: 4,
            form: Form::Snapshot,
            legacy: false,
            time_us: true,
            devices: None,
        }
    }
}

/// `time_us` of the first trace entry unless `clock` says otherwise (2023-11-14, µs since epoch).
pub const DEFAULT_CLOCK_US: i64 = 1_700_000_000_000_000;
/// Automatic `time_us` step between trace entries.
pub const DEFAULT_CLOCK_STEP_US: i64 = 1_000;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FrameDef {
    filename: String,
    line: i64,
    name: String,
}

/// Index into the fixture's stack table; `None` where the key is absent.
type StackRef = Option<u32>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Allocated,
    PendingFree,
    Inactive,
}

impl State {
    fn parse(s: &str) -> Option<State> {
        Some(match s {
            "allocated" | "active_allocated" => State::Allocated,
            "pending_free" | "active_pending_free" => State::PendingFree,
            "inactive" | "free" => State::Inactive,
            _ => return None,
        })
    }
    fn name(self) -> &'static str {
        match self {
            State::Allocated => "active_allocated",
            State::PendingFree => "active_pending_free",
            State::Inactive => "inactive",
        }
    }
    fn is_active(self) -> bool {
        self != State::Inactive
    }
}

#[derive(Debug, Clone)]
struct BlockDef {
    size: u64,
    state: State,
    requested: Option<u64>,
    frames: StackRef,
    address: Option<u64>,
}

#[derive(Debug, Clone)]
struct SegmentDef {
    line: usize,
    device: u32,
    address: u64,
    total: u64,
    stream: u64,
    pool: (i64, i64),
    expandable: bool,
    segment_type: Option<String>,
    frames: StackRef,
    blocks: Vec<BlockDef>,
}

#[derive(Debug, Clone)]
struct EventDef {
    action: String,
    addr: u64,
    size: u64,
    stream: u64,
    time_us: Option<i64>,
    frames: StackRef,
    device_free: Option<u64>,
    compile_context: Option<String>,
    user_metadata: Option<String>,
}

#[derive(Debug, Clone)]
enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

#[derive(Debug, Clone)]
struct Region {
    stage: String,
    name: String,
    device: u32,
    time_us: i64,
}

#[derive(Debug, Clone)]
struct Live {
    addr: u64,
    size: u64,
    stream: u64,
    frames: StackRef,
    device: u32,
}

/// A parsed fixture: [`Fixture::to_bytes`] writes it in the chosen [`Form`].
#[derive(Debug, Clone, Default)]
pub struct Fixture {
    options: Options,
    frames: Vec<FrameDef>,
    frame_index: FxHashMap<FrameDef, u32>,
    stacks: Vec<Vec<u32>>,
    stack_index: FxHashMap<Vec<u32>, u32>,
    segments: Vec<SegmentDef>,
    traces: Vec<Vec<EventDef>>,
    settings: Vec<(String, Scalar)>,
    regions: Vec<Region>,
}

/// Parses `text` and writes it: the one call most tests need.
pub fn build(text: &str) -> Result<Vec<u8>, FixtureError> {
    parse(text)?.to_bytes()
}

/// Parses a fixture text (see the module doc).
pub fn parse(text: &str) -> Result<Fixture, FixtureError> {
    Parser::default().run(text)
}

impl Fixture {
    pub fn options(&self) -> &Options {
        &self.options
    }

    pub fn options_mut(&mut self) -> &mut Options {
        &mut self.options
    }

    /// The same fixture with another pickle protocol.
    pub fn with_protocol(mut self, protocol: u8) -> Self {
        self.options.protocol = protocol;
        self
    }

    /// The same fixture in another form.
    pub fn with_form(mut self, form: Form) -> Self {
        self.options.form = form;
        self
    }

    /// Number of segments and of trace entries (all devices), for tests that check counts.
    pub fn counts(&self) -> (usize, usize) {
        (self.segments.len(), self.traces.iter().map(Vec::len).sum())
    }

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

// ---------------------------------------------------------------- sinks

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Shared {
    Stack(u32),
    Frame(u32),
}

/// Where the document goes: a pickle (with memo sharing) or JSON text.
trait Sink {
    fn begin_dict(&mut self) -> io::Result<()>;
    fn begin_list(&mut self) -> io::Result<()>;
    fn end(&mut self) -> io::Result<Option<MemoId>>;
    fn str(&mut self, s: &str) -> io::Result<()>;
    fn int(&mut self, v: i64) -> io::Result<()>;
    fn uint(&mut self, v: u64) -> io::Result<()>;
    fn float(&mut self, v: f64) -> io::Result<()>;
    fn bool(&mut self, v: bool) -> io::Result<()>;
    fn none(&mut self) -> io::Result<()>;
    fn pair(&mut self, a: i64, b: i64) -> io::Result<()>;
    /// Writes a reference to an object written before; false if there is none.
    fn get_shared(&mut self, key: Shared) -> io::Result<bool>;
    fn put_shared(&mut self, key: Shared, memo: Option<MemoId>);
}

struct PickleSink {
    w: PickleWriter<Vec<u8>>,
    shared: FxHashMap<Shared, MemoId>,
}

impl Sink for PickleSink {
    fn begin_dict(&mut self) -> io::Result<()> {
        self.w.begin_dict();
        Ok(())
    }
    fn begin_list(&mut self) -> io::Result<()> {
        self.w.begin_list();
        Ok(())
    }
    fn end(&mut self) -> io::Result<Option<MemoId>> {
        self.w.end().map(Some)
    }
    fn str(&mut self, s: &str) -> io::Result<()> {
        self.w.str(s)
    }
    fn int(&mut self, v: i64) -> io::Result<()> {
        self.w.int(v)
    }
    fn uint(&mut self, v: u64) -> io::Result<()> {
        self.w.uint(v)
    }
    fn float(&mut self, v: f64) -> io::Result<()> {
        self.w.float(v)
    }
    fn bool(&mut self, v: bool) -> io::Result<()> {
        self.w.bool(v)
    }
    fn none(&mut self) -> io::Result<()> {
        self.w.none()
    }
    fn pair(&mut self, a: i64, b: i64) -> io::Result<()> {
        self.w.int_pair(a, b).map(|_| ())
    }
    fn get_shared(&mut self, key: Shared) -> io::Result<bool> {
        match self.shared.get(&key) {
            Some(&m) => self.w.get(m).map(|_| true),
            None => Ok(false),
        }
    }
    fn put_shared(&mut self, key: Shared, memo: Option<MemoId>) {
        if let Some(m) = memo {
            self.shared.insert(key, m);
        }
    }
}

/// JSON as Python's `json.dumps` writes it (`", "` and `": "` separators).
#[derive(Default)]
struct JsonSink {
    out: String,
    /// (is a dict, values written so far; in a dict keys count too)
    open: Vec<(bool, usize)>,
}

impl JsonSink {
    fn value(&mut self, text: &str) {
        self.before();
        self.out.push_str(text);
        self.after();
    }
    fn before(&mut self) {
        if let Some(&(dict, n)) = self.open.last() {
            if n > 0 && (!dict || n % 2 == 0) {
                self.out.push_str(", ");
            }
        }
    }
    fn after(&mut self) {
        if let Some((dict, n)) = self.open.last_mut() {
            if *dict && *n % 2 == 0 {
                self.out.push_str(": ");
            }
            *n += 1;
        }
    }
}

impl Sink for JsonSink {
    fn begin_dict(&mut self) -> io::Result<()> {
        self.before();
        self.out.push('{');
        self.open.push((true, 0));
        Ok(())
    }
    fn begin_list(&mut self) -> io::Result<()> {
        self.before();
        self.out.push('[');
        self.open.push((false, 0));
        Ok(())
    }
    fn end(&mut self) -> io::Result<Option<MemoId>> {
        let Some((dict, _)) = self.open.pop() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "end() without an open container",
            ));
        };
        self.out.push(if dict { '}' } else { ']' });
        self.after();
        Ok(None)
    }
    fn str(&mut self, s: &str) -> io::Result<()> {
        let q = serde_json::to_string(s).map_err(io::Error::other)?;
        self.value(&q);
        Ok(())
    }
    fn int(&mut self, v: i64) -> io::Result<()> {
        self.value(&v.to_string());
        Ok(())
    }
    fn uint(&mut self, v: u64) -> io::Result<()> {
        self.value(&v.to_string());
        Ok(())
    }
    fn float(&mut self, v: f64) -> io::Result<()> {
        let text = if v.is_finite() {
            format!("{v:?}")
        } else {
            "null".to_string()
        };
        self.value(&text);
        Ok(())
    }
    fn bool(&mut self, v: bool) -> io::Result<()> {
        self.value(if v { "true" } else { "false" });
        Ok(())
    }
    fn none(&mut self) -> io::Result<()> {
        self.value("null");
        Ok(())
    }
    fn pair(&mut self, a: i64, b: i64) -> io::Result<()> {
        self.begin_list()?;
        self.int(a)?;
        self.int(b)?;
        self.end().map(|_| ())
    }
    fn get_shared(&mut self, _key: Shared) -> io::Result<bool> {
        Ok(false)
    }
    fn put_shared(&mut self, _key: Shared, _memo: Option<MemoId>) {}
}

// ---------------------------------------------------------------- parsing

/// One word of a line: `value` or `key=value` (either part may be quoted).
#[derive(Debug, Clone)]
struct Tok {
    key: Option<String>,
    val: String,
}

fn tokenize(text: &str, line: usize) -> Result<Vec<Tok>, FixtureError> {
    let mut toks = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        match chars.peek() {
            None | Some('#') => break,
            Some(_) => {}
        }
        let mut word = String::new();
        let mut eq: Option<usize> = None;
        let mut quoted = false;
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                break;
            }
            chars.next();
            match c {
                '"' => {
                    quoted = true;
                    let mut closed = false;
                    while let Some(c) = chars.next() {
                        match c {
                            '"' => {
                                closed = true;
                                break;
                            }
                            '\\' => match chars.next() {
                                Some('n') => word.push('\n'),
                                Some('t') => word.push('\t'),
                                Some(other) => word.push(other),
                                None => return Err(FixtureError::UnterminatedQuote { line }),
                            },
                            other => word.push(other),
                        }
                    }
                    if !closed {
                        return Err(FixtureError::UnterminatedQuote { line });
                    }
                }
                '=' if eq.is_none() && !quoted => {
                    eq = Some(word.len());
                    word.push('=');
                }
                other => word.push(other),
            }
        }
        toks.push(match eq {
            Some(i) => Tok {
                key: Some(word[..i].to_string()),
                val: word[i + 1..].to_string(),
            },
            None => Tok {
                key: None,
                val: word,
            },
        });
    }
    Ok(toks)
}

/// An integer: decimal or `0x` hex, `_` separators allowed, optional `-`.
fn parse_int(s: &str) -> Option<i128> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let body: String = body.chars().filter(|&c| c != '_').collect();
    if body.is_empty() {
        return None;
    }
    let v = match body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        Some(h) => i128::from_str_radix(h, 16).ok()?,
        None => {
            if !body.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            body.parse::<i128>().ok()?
        }
    };
    Some(if neg { -v } else { v })
}

/// A size: an integer, or a number with a unit (`B`, `KiB`, `MiB`, `GiB`, `TiB`, `KB`, `MB`, `GB`);
/// fractions must come to whole bytes (`1.5MiB`).
fn parse_size(s: &str) -> Option<u64> {
    if let Some(v) = parse_int(s) {
        return u64::try_from(v).ok();
    }
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))?;
    let (num, unit) = s.split_at(split);
    let mult: u128 = match unit {
        "B" => 1,
        "KiB" | "K" => 1 << 10,
        "MiB" | "M" => 1 << 20,
        "GiB" | "G" => 1 << 30,
        "TiB" | "T" => 1 << 40,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return None,
    };
    let num: String = num.chars().filter(|&c| c != '_').collect();
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num.as_str(), ""),
    };
    if int.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > 18
    {
        return None;
    }
    let mantissa: u128 = format!("{int}{frac}").parse().ok()?;
    let scale = 10u128.checked_pow(frac.len() as u32)?;
    let bytes = mantissa.checked_mul(mult)?;
    if bytes % scale != 0 {
        return None;
    }
    u64::try_from(bytes / scale).ok()
}

/// `file:line:function`, split at the first `:<digits>:` (C++ names may hold `::`).
fn parse_frame(s: &str) -> Option<FrameDef> {
    let b = s.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c != b':' {
            continue;
        }
        let digits = b[i + 1..]
            .iter()
            .take_while(|d| d.is_ascii_digit() || **d == b'-')
            .count();
        if digits > 0 && b.get(i + 1 + digits) == Some(&b':') {
            let line = s.get(i + 1..i + 1 + digits)?.parse().ok()?;
            return Some(FrameDef {
                filename: s.get(..i)?.to_string(),
                line,
                name: s.get(i + 2 + digits..)?.to_string(),
            });
        }
    }
    None
}

fn parse_scalar(t: &str) -> Scalar {
    match t {
        "true" | "True" => Scalar::Bool(true),
        "false" | "False" => Scalar::Bool(false),
        _ => {
            if let Some(i) = parse_int(t).and_then(|v| i64::try_from(v).ok()) {
                Scalar::Int(i)
            } else if let Ok(f) = t.parse::<f64>() {
                Scalar::Float(f)
            } else {
                Scalar::Str(t.to_string())
            }
        }
    }
}

#[derive(Default)]
struct Parser {
    fx: Fixture,
    line: usize,
    device: u32,
    clock: i64,
    step: i64,
    named_stacks: FxHashMap<String, u32>,
    live: FxHashMap<String, Live>,
}

/// The `key=value` options of one line, checked against what the command accepts.
struct Opts {
    items: Vec<(String, String)>,
}

impl Opts {
    fn take(&mut self, key: &str) -> Option<String> {
        let i = self.items.iter().position(|(k, _)| k == key)?;
        Some(self.items.remove(i).1)
    }
}

impl Parser {
    fn run(mut self, text: &str) -> Result<Fixture, FixtureError> {
        self.clock = DEFAULT_CLOCK_US;
        self.step = DEFAULT_CLOCK_STEP_US;
        // stack 0 is the empty stack
        self.intern_stack(Vec::new());
        for (i, raw) in text.lines().enumerate() {
            self.line = i + 1;
            let toks = tokenize(raw, self.line)?;
            self.command(toks)?;
        }
        Ok(self.fx)
    }

    fn err_bad(&self, what: &'static str, text: &str) -> FixtureError {
        FixtureError::Bad {
            line: self.line,
            what,
            text: text.to_string(),
        }
    }

    fn missing(&self, command: &str, what: &'static str) -> FixtureError {
        FixtureError::Missing {
            line: self.line,
            command: command.to_string(),
            what,
        }
    }

    fn size(&self, t: &str) -> Result<u64, FixtureError> {
        parse_size(t).ok_or_else(|| self.err_bad("size", t))
    }

    fn uint(&self, t: &str, what: &'static str) -> Result<u64, FixtureError> {
        parse_int(t)
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(|| self.err_bad(what, t))
    }

    fn int(&self, t: &str, what: &'static str) -> Result<i64, FixtureError> {
        parse_int(t)
            .and_then(|v| i64::try_from(v).ok())
            .ok_or_else(|| self.err_bad(what, t))
    }

    fn device_num(&self, t: &str) -> Result<u32, FixtureError> {
        parse_int(t)
            .and_then(|v| u32::try_from(v).ok())
            .filter(|&d| d < 4096)
            .ok_or_else(|| self.err_bad("device", t))
    }

    fn intern_stack(&mut self, frames: Vec<u32>) -> u32 {
        if let Some(&id) = self.fx.stack_index.get(&frames) {
            return id;
        }
        let id = self.fx.stacks.len() as u32;
        self.fx.stacks.push(frames.clone());
        self.fx.stack_index.insert(frames, id);
        id
    }

    fn stack(&mut self, t: &str) -> Result<u32, FixtureError> {
        if let Some(name) = t.strip_prefix('@') {
            return self.named_stacks.get(name).copied().ok_or_else(|| {
                FixtureError::UnknownStack {
                    line: self.line,
                    name: name.to_string(),
                }
            });
        }
        let mut ids = Vec::new();
        for part in t.split('|').filter(|p| !p.is_empty()) {
            let f = parse_frame(part)
                .ok_or_else(|| self.err_bad("frame (want file:line:function)", part))?;
            let id = match self.fx.frame_index.get(&f) {
                Some(&id) => id,
                None => {
                    let id = self.fx.frames.len() as u32;
                    self.fx.frames.push(f.clone());
                    self.fx.frame_index.insert(f, id);
                    id
                }
            };
            ids.push(id);
        }
        Ok(self.intern_stack(ids))
    }

    /// Splits a line's words into positional words and options; rejects unknown options.
    fn split(
        &self,
        command: &str,
        toks: Vec<Tok>,
        allowed: &[&str],
    ) -> Result<(Vec<String>, Opts), FixtureError> {
        let mut pos = Vec::new();
        let mut items = Vec::new();
        for t in toks {
            match t.key {
                Some(k) => {
                    if !allowed.contains(&k.as_str()) {
                        return Err(FixtureError::UnknownOption {
                            line: self.line,
                            command: command.to_string(),
                            key: k,
                        });
                    }
                    items.push((k, t.val));
                }
                None => pos.push(t.val),
            }
        }
        Ok((pos, Opts { items }))
    }

    fn no_more(&self, command: &str, pos: &[String], n: usize) -> Result<(), FixtureError> {
        match pos.get(n) {
            Some(extra) => Err(FixtureError::Extra {
                line: self.line,
                command: command.to_string(),
                text: extra.clone(),
            }),
            None => Ok(()),
        }
    }

    fn command(&mut self, mut toks: Vec<Tok>) -> Result<(), FixtureError> {
        if toks.is_empty() {
            return Ok(());
        }
        let head = toks.remove(0);
        if let Some(k) = head.key {
            return Err(FixtureError::UnknownCommand {
                line: self.line,
                word: format!("{k}={}", head.val),
            });
        }
        let cmd = head.val.as_str();
        match cmd {
            "protocol" => {
                let (pos, _) = self.split(cmd, toks, &[])?;
                let p = pos
                    .first()
                    .ok_or_else(|| self.missing(cmd, "a number 2..5"))?;
                let n = parse_int(p)
                    .filter(|n| (2..=5).contains(n))
                    .ok_or_else(|| self.err_bad("protocol (2..5)", p))?;
                self.fx.options.protocol = n as u8;
                self.no_more(cmd, &pos, 1)
            }
            "form" => {
                let (pos, _) = self.split(cmd, toks, &[])?;
                let f = pos.first().ok_or_else(|| {
                    self.missing(cmd, "snapshot|segments|json|trace_plot|segment_plot")
                })?;
                self.fx.options.form = Form::parse(f).ok_or_else(|| self.err_bad("form", f))?;
                self.no_more(cmd, &pos, 1)
            }
            "legacy" => {
                let (pos, _) = self.split(cmd, toks, &[])?;
                self.fx.options.legacy = true;
                self.fx.options.time_us = false;
                self.no_more(cmd, &pos, 0)
            }
            "no_time_us" => {
                let (pos, _) = self.split(cmd, toks, &[])?;
                self.fx.options.time_us = false;
                self.no_more(cmd, &pos, 0)
            }
            "devices" => {
                let (pos, _) = self.split(cmd, toks, &[])?;
                let n = pos.first().ok_or_else(|| self.missing(cmd, "a count"))?;
                self.fx.options.devices = Some(self.device_num(n)?);
                self.no_more(cmd, &pos, 1)
            }
            "device" => {
                let (pos, _) = self.split(cmd, toks, &[])?;
                let n = pos
                    .first()
                    .ok_or_else(|| self.missing(cmd, "a device number"))?;
                self.device = self.device_num(n)?;
                self.no_more(cmd, &pos, 1)
            }
            "clock" => {
                let (pos, _) = self.split(cmd, toks, &[])?;
                let t = pos
                    .first()
                    .ok_or_else(|| self.missing(cmd, "a start time in µs"))?;
                self.clock = self.int(t, "time")?;
                if let Some(s) = pos.get(1) {
                    self.step = self.int(s, "clock step")?;
                }
                self.no_more(cmd, &pos, 2)
            }
            "stack" => {
                let (pos, _) = self.split(cmd, toks, &[])?;
                let name = pos
                    .first()
                    .ok_or_else(|| self.missing(cmd, "a name"))?
                    .clone();
                let frames = pos
                    .get(1)
                    .ok_or_else(|| self.missing(cmd, "frames"))?
                    .clone();
                let id = self.stack(&frames)?;
                self.named_stacks.insert(name, id);
                self.no_more(cmd, &pos, 2)
            }
            "setting" => {
                let (pos, _) = self.split(cmd, toks, &[])?;
                let k = pos
                    .first()
                    .ok_or_else(|| self.missing(cmd, "a key"))?
                    .clone();
                let v = pos.get(1).ok_or_else(|| self.missing(cmd, "a value"))?;
                self.fx.settings.push((k, parse_scalar(v)));
                self.no_more(cmd, &pos, 2)
            }
            "region" => {
                let (pos, mut o) = self.split(cmd, toks, &["time", "device"])?;
                let stage = pos
                    .first()
                    .ok_or_else(|| self.missing(cmd, "START or END"))?
                    .clone();
                let name = pos
                    .get(1)
                    .ok_or_else(|| self.missing(cmd, "a name"))?
                    .clone();
                let device = match o.take("device") {
                    Some(d) => self.device_num(&d)?,
                    None => self.device,
                };
                let time_us = self.tick(o.take("time"))?;
                self.fx.regions.push(Region {
                    stage,
                    name,
                    device,
                    time_us,
                });
                self.no_more(cmd, &pos, 2)
            }
            "segment" => self.segment(toks),
            "block" => self.block(toks),
            "alloc" => self.alloc(toks),
            "free" | "free_requested" | "free_completed" => self.free(cmd, toks),
            "segment_alloc" | "segment_free" | "segment_map" | "segment_unmap" => {
                let (pos, o) = self.split(cmd, toks, EVENT_OPTS)?;
                let addr = self.uint(
                    pos.first().ok_or_else(|| self.missing(cmd, "an address"))?,
                    "address",
                )?;
                let size = self.size(pos.get(1).ok_or_else(|| self.missing(cmd, "a size"))?)?;
                self.no_more(cmd, &pos, 2)?;
                self.event(cmd, addr, size, None, o)
            }
            "oom" => {
                let (pos, mut o) =
                    self.split(cmd, toks, &[EVENT_OPTS, &["device_free"]].concat())?;
                let size = self.size(pos.first().ok_or_else(|| self.missing(cmd, "a size"))?)?;
                let free = o
                    .take("device_free")
                    .ok_or_else(|| self.missing(cmd, "device_free="))?;
                let free = self.size(&free)?;
                self.no_more(cmd, &pos, 1)?;
                self.event(cmd, 0, size, Some(free), o)
            }
            "snapshot" => {
                let (pos, o) = self.split(cmd, toks, EVENT_OPTS)?;
                self.no_more(cmd, &pos, 0)?;
                self.event(cmd, 0, 0, None, o)
            }
            "annotate" => {
                let (pos, mut o) = self.split(cmd, toks, EVENT_OPTS)?;
                let target = pos
                    .first()
                    .ok_or_else(|| self.missing(cmd, "an allocation name or address"))?;
                let text = pos
                    .get(1)
                    .ok_or_else(|| self.missing(cmd, "the annotation text"))?
                    .clone();
                self.no_more(cmd, &pos, 2)?;
                let (addr, size) = match self.live.get(target.as_str()) {
                    Some(l) => (l.addr, l.size),
                    None => (self.uint(target, "address")?, 0),
                };
                if o.items.iter().all(|(k, _)| k != "meta") {
                    o.items.push(("meta".into(), text));
                }
                self.event(cmd, addr, size, None, o)
            }
            "event" => {
                let (pos, o) = self.split(cmd, toks, EVENT_OPTS)?;
                let action = pos
                    .first()
                    .ok_or_else(|| self.missing(cmd, "an action name"))?
                    .clone();
                let addr = match pos.get(1) {
                    Some(a) => self.uint(a, "address")?,
                    None => 0,
                };
                let size = match pos.get(2) {
                    Some(s) => self.size(s)?,
                    None => 0,
                };
                self.no_more(cmd, &pos, 3)?;
                self.event(&action, addr, size, None, o)
            }
            _ => Err(FixtureError::UnknownCommand {
                line: self.line,
                word: cmd.to_string(),
            }),
        }
    }

    /// The time of the next trace entry: `time=` if given, else the clock; the clock moves on.
    fn tick(&mut self, given: Option<String>) -> Result<i64, FixtureError> {
        let t = match given {
            Some(t) => self.int(&t, "time")?,
            None => self.clock,
        };
        self.clock = t.saturating_add(self.step);
        Ok(t)
    }

    fn segment(&mut self, toks: Vec<Tok>) -> Result<(), FixtureError> {
        let cmd = "segment";
        let (pos, mut o) =
            self.split(cmd, toks, &["device", "stream", "pool", "type", "frames"])?;
        let address = self.uint(
            pos.first().ok_or_else(|| self.missing(cmd, "an address"))?,
            "address",
        )?;
        let total = self.size(pos.get(1).ok_or_else(|| self.missing(cmd, "a size"))?)?;
        let mut expandable = false;
        for flag in pos.iter().skip(2) {
            match flag.as_str() {
                "expandable" => expandable = true,
                other => {
                    return Err(FixtureError::Extra {
                        line: self.line,
                        command: cmd.into(),
                        text: other.into(),
                    })
                }
            }
        }
        let device = match o.take("device") {
            Some(d) => self.device_num(&d)?,
            None => self.device,
        };
        let stream = match o.take("stream") {
            Some(s) => self.uint(&s, "stream")?,
            None => 0,
        };
        let pool = match o.take("pool") {
            Some(p) => {
                let (a, b) = p
                    .split_once(',')
                    .ok_or_else(|| self.err_bad("pool (want A,B)", &p))?;
                (self.int(a, "pool")?, self.int(b, "pool")?)
            }
            None => (0, 0),
        };
        let segment_type = o.take("type");
        let frames = match o.take("frames") {
            Some(f) => Some(self.stack(&f)?),
            None => None,
        };
        self.fx.segments.push(SegmentDef {
            line: self.line,
            device,
            address,
            total,
            stream,
            pool,
            expandable,
            segment_type,
            frames,
            blocks: Vec::new(),
        });
        Ok(())
    }

    fn block(&mut self, toks: Vec<Tok>) -> Result<(), FixtureError> {
        let cmd = "block";
        let line = self.line;
        let (pos, mut o) = self.split(cmd, toks, &["requested", "frames", "addr"])?;
        let size_t = pos
            .first()
            .ok_or_else(|| self.missing(cmd, "a size (or `rest`)"))?
            .clone();
        let state_t = pos
            .get(1)
            .ok_or_else(|| self.missing(cmd, "a state (allocated|pending_free|inactive)"))?;
        let state = State::parse(state_t).ok_or_else(|| self.err_bad("block state", state_t))?;
        self.no_more(cmd, &pos, 2)?;
        let requested = match o.take("requested") {
            Some(r) => Some(self.size(&r)?),
            None => None,
        };
        let frames = match o.take("frames") {
            Some(f) => Some(self.stack(&f)?),
            None => None,
        };
        let address = match o.take("addr") {
            Some(a) => Some(self.uint(&a, "address")?),
            None => None,
        };
        let size = if size_t == "rest" {
            None
        } else {
            Some(self.size(&size_t)?)
        };
        let seg = self
            .fx
            .segments
            .last_mut()
            .ok_or(FixtureError::BlockOutsideSegment { line })?;
        let size = match size {
            Some(s) => s,
            None => {
                let used = seg
                    .blocks
                    .iter()
                    .fold(0u64, |a, b| a.saturating_add(b.size));
                seg.total
                    .checked_sub(used)
                    .filter(|&r| r > 0)
                    .ok_or_else(|| FixtureError::Invalid {
                        line,
                        what: format!(
                            "`block rest`: the blocks above already fill the segment of line {}",
                            seg.line
                        ),
                    })?
            }
        };
        seg.blocks.push(BlockDef {
            size,
            state,
            requested,
            frames,
            address,
        });
        Ok(())
    }

    fn alloc(&mut self, toks: Vec<Tok>) -> Result<(), FixtureError> {
        let cmd = "alloc";
        let (pos, mut o) = self.split(cmd, toks, EVENT_OPTS)?;
        let first = pos
            .first()
            .ok_or_else(|| self.missing(cmd, "[NAME] ADDR SIZE"))?;
        let named = parse_int(first).is_none();
        let skip = usize::from(named);
        let addr = self.uint(
            pos.get(skip)
                .ok_or_else(|| self.missing(cmd, "an address"))?,
            "address",
        )?;
        let size = self.size(
            pos.get(skip + 1)
                .ok_or_else(|| self.missing(cmd, "a size"))?,
        )?;
        self.no_more(cmd, &pos, skip + 2)?;
        let frames = match o.items.iter().find(|(k, _)| k == "frames") {
            Some((_, f)) => Some(self.stack(&f.clone())?),
            None => None,
        };
        let device = match o.take("device") {
            Some(d) => self.device_num(&d)?,
            None => self.device,
        };
        let stream = match o.items.iter().find(|(k, _)| k == "stream") {
            Some((_, s)) => self.uint(&s.clone(), "stream")?,
            None => 0,
        };
        o.items.push(("device".into(), device.to_string()));
        if named {
            self.live.insert(
                first.clone(),
                Live {
                    addr,
                    size,
                    stream,
                    frames,
                    device,
                },
            );
        }
        self.event(cmd, addr, size, None, o)
    }

    fn free(&mut self, cmd: &str, toks: Vec<Tok>) -> Result<(), FixtureError> {
        let (pos, mut o) = self.split(cmd, toks, EVENT_OPTS)?;
        let first = pos
            .first()
            .ok_or_else(|| self.missing(cmd, "an allocation name, or ADDR SIZE"))?
            .clone();
        let live = if parse_int(&first).is_some() {
            let addr = self.uint(&first, "address")?;
            let size = self.size(
                pos.get(1)
                    .ok_or_else(|| self.missing(cmd, "a size after the address"))?,
            )?;
            self.no_more(cmd, &pos, 2)?;
            Live {
                addr,
                size,
                stream: 0,
                frames: None,
                device: self.device,
            }
        } else {
            self.no_more(cmd, &pos, 1)?;
            self.live
                .get(&first)
                .cloned()
                .ok_or_else(|| FixtureError::UnknownName {
                    line: self.line,
                    name: first.clone(),
                })?
        };
        // Free entries carry the allocation's stream, device and frames unless told otherwise.
        if o.items.iter().all(|(k, _)| k != "stream") {
            o.items.push(("stream".into(), live.stream.to_string()));
        }
        if o.items.iter().all(|(k, _)| k != "device") {
            o.items.push(("device".into(), live.device.to_string()));
        }
        let frames_given = o.items.iter().any(|(k, _)| k == "frames");
        let steps: &[&str] = match cmd {
            "free" => &["free_requested", "free_completed"],
            "free_requested" => &["free_requested"],
            _ => &["free_completed"],
        };
        for (i, action) in steps.iter().enumerate() {
            let mut oi = Opts {
                items: o.items.clone(),
            };
            if i > 0 {
                // `time=` applies to the first entry; the second follows on the clock.
                oi.items.retain(|(k, _)| k != "time");
            }
            let frames = if frames_given { None } else { live.frames };
            self.event_with_frames(action, live.addr, live.size, None, oi, frames)?;
        }
        if cmd != "free_requested" {
            self.live.remove(&first);
        }
        Ok(())
    }

    fn event(
        &mut self,
        action: &str,
        addr: u64,
        size: u64,
        device_free: Option<u64>,
        o: Opts,
    ) -> Result<(), FixtureError> {
        self.event_with_frames(action, addr, size, device_free, o, None)
    }

    fn event_with_frames(
        &mut self,
        action: &str,
        addr: u64,
        size: u64,
        device_free: Option<u64>,
        mut o: Opts,
        default_frames: StackRef,
    ) -> Result<(), FixtureError> {
        let stream = match o.take("stream") {
            Some(s) => self.uint(&s, "stream")?,
            None => 0,
        };
        let device = match o.take("device") {
            Some(d) => self.device_num(&d)?,
            None => self.device,
        };
        let time_us = Some(self.tick(o.take("time"))?);
        let frames = match o.take("frames") {
            Some(f) => Some(self.stack(&f)?),
            None => default_frames,
        };
        let compile_context = o.take("ctx");
        let user_metadata = o.take("meta");
        if let Some((k, _)) = o.items.first() {
            return Err(FixtureError::UnknownOption {
                line: self.line,
                command: action.to_string(),
                key: k.clone(),
            });
        }
        let d = device as usize;
        if self.fx.traces.len() <= d {
            self.fx.traces.resize_with(d + 1, Vec::new);
        }
        if let Some(t) = self.fx.traces.get_mut(d) {
            t.push(EventDef {
                action: action.to_string(),
                addr,
                size,
                stream,
                time_us,
                frames,
                device_free,
                compile_context,
                user_metadata,
            });
        }
        Ok(())
    }
}

const EVENT_OPTS: &[&str] = &["stream", "time", "frames", "ctx", "meta", "device"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BlockState;
    use crate::trace::Action;

    fn load(text: &str) -> crate::Snapshot {
        let bytes = build(text).unwrap_or_else(|e| panic!("{e}"));
        crate::load(&bytes).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn sizes_and_numbers() {
        assert_eq!(parse_size("4MiB"), Some(4 << 20));
        assert_eq!(parse_size("1.5MiB"), Some(3 << 19));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("0x200000"), Some(2 << 20));
        assert_eq!(parse_size("2KB"), Some(2000));
        assert_eq!(parse_size("1.0000001KiB"), None);
        assert_eq!(parse_size("-1"), None);
        assert_eq!(parse_size("4 MiB"), None);
        assert_eq!(parse_int("-0x10"), Some(-16));
        assert_eq!(parse_int("1_000"), Some(1000));
    }

    #[test]
    fn frames_split_at_the_line_number() {
        let f = parse_frame("a.cpp:0:c10::foo(int, long)").unwrap_or_else(|| panic!("no frame"));
        assert_eq!(
            (f.filename.as_str(), f.line, f.name.as_str()),
            ("a.cpp", 0, "c10::foo(int, long)")
        );
        let f = parse_frame("C:/x.py:12:<module>").unwrap_or_else(|| panic!("no frame"));
        assert_eq!((f.filename.as_str(), f.line), ("C:/x.py", 12));
        assert!(parse_frame("train.py:forward").is_none());
    }

    #[test]
    fn every_form_and_protocol_loads_the_same() {
        let text = "stack s train.py:10:forward|model.py:5:fwd\n\
                    segment 0x7f0000000000 20MiB stream=0 frames=@s\n\
                    block 4MiB allocated requested=4000000 frames=@s\n\
                    block rest inactive\n\
                    alloc a 0x7f0000000000 4000000 frames=@s\n\
                    alloc b 0x7f0000400000 1MiB frames=@s\n\
                    free b\n";
        let fx = parse(text).unwrap_or_else(|e| panic!("{e}"));
        for form in [
            Form::Snapshot,
            Form::Json,
            Form::TracePlot,
            Form::SegmentPlot,
        ] {
            for p in 2..=5 {
                let bytes = fx
                    .clone()
                    .with_protocol(p)
                    .with_form(form)
                    .to_bytes()
                    .unwrap_or_else(|e| panic!("{e}"));
                let s = crate::load(&bytes).unwrap_or_else(|e| panic!("{form:?} p{p}: {e}"));
                assert_eq!(s.segments.len(), 1);
                assert_eq!(s.blocks.len(), 2);
                assert_eq!(s.blocks[1].size_bytes, 16 << 20);
                assert_eq!(s.blocks[0].requested_size_bytes, 4_000_000);
                assert_eq!(s.trace.len(), 4);
                assert_eq!(s.trace.action[3], Action::FreeCompleted);
                assert_eq!(s.trace.time_us[1], DEFAULT_CLOCK_US + DEFAULT_CLOCK_STEP_US);
                assert_eq!(s.stacks.get(s.blocks[0].stack).len(), 2);
                assert!(s.warnings.is_empty(), "{:?}", s.warnings);
            }
        }
    }

    #[test]
    fn shared_frame_lists_are_written_once() {
        let one = "stack s train.py:10:forward|model.py:5:fwd\nalloc a 0x1000 512 frames=@s\n";
        let two = format!("{one}alloc b 0x2000 512 frames=@s\nalloc c 0x3000 512 frames=train.py:10:forward|model.py:5:fwd\n");
        let a = build(one).unwrap_or_default();
        let b = build(&two).unwrap_or_default();
        // two more entries, each a dict of small ints and memo references: far less than the frames
        assert!(b.len() < a.len() + 2 * 60, "{} vs {}", b.len(), a.len());
        let s = load(&two);
        assert_eq!(s.trace.stack[0], s.trace.stack[2]);
        assert_eq!(s.stacks.get(s.trace.stack[0]).len(), 2);
    }

    #[test]
    fn legacy_blocks_have_history_and_no_address() {
        let s = load("legacy\nsegment 0x7f0000000000 2MiB\nblock 1MiB allocated requested=1000000 frames=a.py:1:f\nblock rest inactive\nalloc 0x7f0000000000 1000000\n");
        assert!(s.blocks[0].legacy);
        assert_eq!(s.blocks[0].address, 0x7f00_0000_0000);
        assert_eq!(s.blocks[1].address, 0x7f00_0010_0000);
        assert_eq!(s.blocks[0].requested_size_bytes, 1_000_000);
        assert_eq!(s.trace.time_us[0], crate::trace::TIME_NONE);
        assert_eq!(s.blocks[0].state, BlockState::ActiveAllocated);
    }

    #[test]
    fn errors_name_the_line() {
        let cases: &[(&str, FixtureError)] = &[
            (
                "\n\nfrobnicate",
                FixtureError::UnknownCommand {
                    line: 3,
                    word: "frobnicate".into(),
                },
            ),
            (
                "block 1MiB inactive",
                FixtureError::BlockOutsideSegment { line: 1 },
            ),
            (
                "free x",
                FixtureError::UnknownName {
                    line: 1,
                    name: "x".into(),
                },
            ),
            (
                "alloc a 0x10 4XiB",
                FixtureError::Bad {
                    line: 1,
                    what: "size",
                    text: "4XiB".into(),
                },
            ),
            (
                "alloc a 0x10 4 colour=red",
                FixtureError::UnknownOption {
                    line: 1,
                    command: "alloc".into(),
                    key: "colour".into(),
                },
            ),
            (
                "alloc a 0x10 4 frames=@nope",
                FixtureError::UnknownStack {
                    line: 1,
                    name: "nope".into(),
                },
            ),
            (
                "annotate a \"open",
                FixtureError::UnterminatedQuote { line: 1 },
            ),
            (
                "protocol 7",
                FixtureError::Bad {
                    line: 1,
                    what: "protocol (2..5)",
                    text: "7".into(),
                },
            ),
            (
                "segment 0x0 1MiB\nblock 1MiB inactive\nblock rest inactive",
                FixtureError::Invalid {
                    line: 3,
                    what: "`block rest`: the blocks above already fill the segment of line 1"
                        .into(),
                },
            ),
            (
                "oom 1MiB",
                FixtureError::Missing {
                    line: 1,
                    command: "oom".into(),
                    what: "device_free=",
                },
            ),
            (
                "snapshot 12",
                FixtureError::Extra {
                    line: 1,
                    command: "snapshot".into(),
                    text: "12".into(),
                },
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text).err().as_ref(), Some(want), "{text}");
        }
    }

    #[test]
    fn random_text_gives_errors_not_panics() {
        let words = [
            "segment",
            "block",
            "alloc",
            "free",
            "free_requested",
            "free_completed",
            "segment_map",
            "oom",
            "snapshot",
            "annotate",
            "event",
            "stack",
            "setting",
            "region",
            "device",
            "devices",
            "clock",
            "protocol",
            "form",
            "legacy",
            "a",
            "b",
            "rest",
            "allocated",
            "inactive",
            "pending_free",
            "0x7f00",
            "18446744073709551615",
            "1.5MiB",
            "-1",
            "99999999999999999999999",
            "9223372036854775807GiB",
            "frames=x.py:1:f|y.py:2:g",
            "frames=@s",
            "frames=",
            "device_free=1",
            "pool=1,-2",
            "stream=",
            "time=-5",
            "\"q",
            "#",
            "=",
            "==",
            "é",
            "expandable",
        ];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..3000 {
            let mut text = String::new();
            for _ in 0..(next() % 6) {
                for _ in 0..(next() % 7) {
                    text.push_str(words[(next() % words.len() as u64) as usize]);
                    text.push(if next() % 5 == 0 { '"' } else { ' ' });
                }
                text.push('\n');
            }
            if let Ok(fx) = parse(&text) {
                for form in [Form::Snapshot, Form::Json, Form::Segments] {
                    let bytes = fx
                        .clone()
                        .with_form(form)
                        .to_bytes()
                        .unwrap_or_else(|e| panic!("{text:?}: {e}"));
                    // whatever the text, the bytes are well-formed (a snapshot or a clean refusal)
                    let _ = crate::load(&bytes);
                    assert!(
                        crate::raw::decode(&bytes).is_ok(),
                        "{text:?} wrote undecodable {form:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn html_is_padded_like_upstream() {
        for n in 0..6usize {
            let page = html_page(&vec![b'.'; n], "Active Memory Timeline");
            let inner = crate::raw::html::extract_pickle(page.as_bytes()).unwrap_or_default();
            assert_eq!(inner.len() % 3, 0);
            assert!(inner.len() > n && inner.len() <= n + 3);
            let b64 = page
                .split("\"base64\": \"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .unwrap_or("=");
            assert!(!b64.contains('='), "{b64}");
            assert!(page.contains("add_local_files(local_files, 'Active Memory Timeline')"));
        }
    }
}
