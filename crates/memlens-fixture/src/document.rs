//! What a fixture text says, parsed: the output [`Options`] and [`Form`], and the segments,
//! blocks, trace entries, stacks, settings and regions that [`crate::write`] turns into bytes.

use rustc_hash::FxHashMap;

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

    pub(crate) fn parse(s: &str) -> Option<Form> {
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
pub(crate) struct FrameDef {
    pub(crate) filename: String,
    pub(crate) line: i64,
    pub(crate) name: String,
}

/// Index into the fixture's stack table; `None` where the key is absent.
pub(crate) type StackRef = Option<u32>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Allocated,
    PendingFree,
    Inactive,
}

impl State {
    pub(crate) fn parse(s: &str) -> Option<State> {
        Some(match s {
            "allocated" | "active_allocated" => State::Allocated,
            "pending_free" | "active_pending_free" => State::PendingFree,
            "inactive" | "free" => State::Inactive,
            _ => return None,
        })
    }
    pub(crate) fn name(self) -> &'static str {
        match self {
            State::Allocated => "active_allocated",
            State::PendingFree => "active_pending_free",
            State::Inactive => "inactive",
        }
    }
    pub(crate) fn is_active(self) -> bool {
        self != State::Inactive
    }
}

#[derive(Debug, Clone)]
pub(crate) struct BlockDef {
    pub(crate) size: u64,
    pub(crate) state: State,
    pub(crate) requested: Option<u64>,
    pub(crate) frames: StackRef,
    pub(crate) address: Option<u64>,
}

#[derive(Debug, Clone)]
pub(crate) struct SegmentDef {
    pub(crate) line: usize,
    pub(crate) device: u32,
    pub(crate) address: u64,
    pub(crate) total: u64,
    pub(crate) stream: u64,
    pub(crate) pool: (i64, i64),
    pub(crate) expandable: bool,
    pub(crate) segment_type: Option<String>,
    pub(crate) frames: StackRef,
    pub(crate) blocks: Vec<BlockDef>,
}

#[derive(Debug, Clone)]
pub(crate) struct EventDef {
    pub(crate) action: String,
    pub(crate) addr: u64,
    pub(crate) size: u64,
    pub(crate) stream: u64,
    pub(crate) time_us: Option<i64>,
    pub(crate) frames: StackRef,
    pub(crate) device_free: Option<u64>,
    pub(crate) compile_context: Option<String>,
    pub(crate) user_metadata: Option<String>,
}

#[derive(Debug, Clone)]
pub(crate) enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

#[derive(Debug, Clone)]
pub(crate) struct Region {
    pub(crate) stage: String,
    pub(crate) name: String,
    pub(crate) device: u32,
    pub(crate) time_us: i64,
}

/// A parsed fixture: [`Fixture::to_bytes`] writes it in the chosen [`Form`].
#[derive(Debug, Clone, Default)]
pub struct Fixture {
    pub(crate) options: Options,
    pub(crate) frames: Vec<FrameDef>,
    pub(crate) frame_index: FxHashMap<FrameDef, u32>,
    pub(crate) stacks: Vec<Vec<u32>>,
    pub(crate) stack_index: FxHashMap<Vec<u32>, u32>,
    pub(crate) segments: Vec<SegmentDef>,
    pub(crate) traces: Vec<Vec<EventDef>>,
    pub(crate) settings: Vec<(String, Scalar)>,
    pub(crate) regions: Vec<Region>,
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
}
