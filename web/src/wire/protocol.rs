//! Messages between the page and the decoding worker. Headers travel as one JSON string
//! (`msg`); bulk data as core's own result types, packed through
//! [`memlens_core::columns::Columns`] into typed arrays whose buffers are transferred, not
//! copied (`crate::wire::pack`); a file to open travels as the `File` itself.

use memlens_core::analysis::compare::{Between, MomentGroups, PeakGroups};
use memlens_core::analysis::icicle::Icicle;
use memlens_core::analysis::DeviceDiagnosis;
use memlens_core::colour::ColourBy;
use memlens_core::layout::context::ElementContext;
use memlens_core::layout::TimelineKind;
use memlens_core::DeviceStats;
use serde::{Deserialize, Serialize};

/// Which state of the Allocator State History the page wants.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WantedState {
    /// After device-local trace entry `n` (past the end: after the last).
    After(u32),
    /// After the last entry (what the view shows while no entry is selected).
    #[default]
    Last,
}

impl WantedState {
    /// The selected entry's state, else the last one.
    pub fn of(selected: Option<u32>) -> WantedState {
        selected.map_or(WantedState::Last, WantedState::After)
    }
}

/// Page → worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum ToWorker {
    /// Decode, lay out and send back a small generated snapshot once
    /// (`crate::worker::warm_up`), so that V8 has optimized the code before the user's first
    /// file: sent to a worker that has nothing else to do (not to one a file is waiting for,
    /// whose decode would wait behind it).
    WarmUp,
    /// Decode the `file` (a `Blob`: a chosen file, or what the page fetched) sent alongside.
    Open {
        id: u32,
        name: String,
        /// The page shows the Allocator State History (its URL hash says `view=state`): build
        /// the state history before the exact timeline layout.
        #[serde(default)]
        state_first: bool,
        /// Only this part of each device's trace (the page's `#range=`, read by
        /// `memlens_core::range::EventRange::parse`).
        #[serde(default)]
        range: Option<String>,
        /// A pause after each chunk read (the page's `?read_pause_ms=N`), so that a test can
        /// watch a small file load as slowly as a large one.
        #[serde(default)]
        read_pause_ms: Option<u32>,
        /// No pictures of the trace so far while the file is read: the page opens on a view
        /// that does not draw them, or its `?pictures=0` (the benchmark's "before").
        #[serde(default)]
        no_pictures: bool,
        /// The decoder memory (`memlens_core::estimate`'s count) past which a whole file is
        /// not committed to but refused with [`FromWorker::TooLarge`] (`None`: the worker's
        /// own limit; the page's `?limit_mb=` sets another, for tests).
        #[serde(default)]
        limit_bytes: Option<f64>,
    },
    Cancel {
        id: u32,
    },
    Close {
        id: u32,
    },
    Layout {
        id: u32,
        device: u32,
        kind: TimelineKind,
    },
    Context {
        id: u32,
        device: u32,
        kind: TimelineKind,
        elem: u32,
        full: bool,
    },
    /// Allocator State History: the device's trace as list columns (core's `EventList`).
    StateEvents {
        id: u32,
        device: u32,
    },
    /// Allocator State History: the state the page wants of the device.
    StateAt {
        id: u32,
        device: u32,
        event: WantedState,
    },
    /// The device's diagnosis (`memlens_core::analysis`); the worker also sends the default
    /// device's unasked, after the first paint.
    Diagnose {
        id: u32,
        device: u32,
    },
    /// Live memory after `event` as an icicle (`memlens_core::analysis::icicle`).
    Icicle {
        id: u32,
        device: u32,
        event: Option<u32>,
        /// Inverted for this frame (`basename:line:name`): its callers below it.
        callers_of: Option<String>,
        /// Element of the device's Active Memory Timeline (a pinned band) whose allocation's
        /// path through the icicle the reply names.
        #[serde(default)]
        mark: Option<u32>,
    },
    /// What grew between two events (`memlens_core::analysis::compare::between`).
    Between {
        id: u32,
        device: u32,
        from: Option<u32>,
        to: Option<u32>,
    },
    /// One side of a comparison at its timeline peak, grouped
    /// (`memlens_core::analysis::compare::peak_groups`; the page combines two).
    PeakGroups {
        side: CompareSide,
    },
    /// One side after `event`, by user frame, ledger class and stack (the Compare view's cursor;
    /// `memlens_core::analysis::compare::moment_groups`).
    MomentGroups {
        side: CompareSide,
        event: Option<u32>,
    },
    /// Colour a layout's elements by `by` (`memlens_core::colour`).
    Colours {
        id: u32,
        device: u32,
        kind: TimelineKind,
        by: ColourBy,
    },
    /// Search a layout's elements (`memlens_core::layout::search`); `seq` is echoed back.
    Search {
        id: u32,
        device: u32,
        kind: TimelineKind,
        seq: u32,
        address: String,
        frame: String,
        /// `frame` is a regular expression.
        #[serde(default)]
        regex: bool,
    },
    /// Hold (`true`) or resume the work a worker does unasked once a file is loaded (the
    /// diagnosis, the exact layout after a preview, the state history): the page holds it
    /// while another worker is decoding, so that file is not slowed by it. Requests are
    /// answered either way.
    Background {
        hold: bool,
    },
}

impl ToWorker {
    /// The file a request is about (the page sends it to that file's worker); `None` for a
    /// message to the worker itself (warm up; hold its unasked work).
    pub fn file(&self) -> Option<u32> {
        let id = match self {
            ToWorker::WarmUp | ToWorker::Background { .. } => return None,
            ToWorker::Open { id, .. }
            | ToWorker::Cancel { id }
            | ToWorker::Close { id }
            | ToWorker::Layout { id, .. }
            | ToWorker::Context { id, .. }
            | ToWorker::StateEvents { id, .. }
            | ToWorker::StateAt { id, .. }
            | ToWorker::Diagnose { id, .. }
            | ToWorker::Icicle { id, .. }
            | ToWorker::Between { id, .. }
            | ToWorker::Colours { id, .. }
            | ToWorker::Search { id, .. } => *id,
            ToWorker::PeakGroups { side } | ToWorker::MomentGroups { side, .. } => side.file,
        };
        Some(id)
    }
}

/// One side of a comparison: a device of an open file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CompareSide {
    pub file: u32,
    pub device: u32,
}

/// What the page learns about a decoded file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileInfo {
    pub encoding: String,
    pub bytes: u64,
    /// Per-device stats (the summary strip shows them as they are).
    pub devices: Vec<DeviceStats>,
    /// The device with the longest trace (upstream's default).
    pub default_device: Option<u32>,
    pub warnings: Vec<String>,
    /// `allocator_settings`, pretty JSON.
    pub allocator_settings: Option<String>,
    /// The allocator configuration string and its variable (`PYTORCH_CUDA_ALLOC_CONF`, a
    /// backend's own, or `PYTORCH_ALLOC_CONF`): core's `Snapshot::alloc_conf`.
    #[serde(default)]
    pub alloc_conf: Option<(String, String)>,
    /// `cuda`, `mlu`, ... (core's `Snapshot::device_type`): devices are named `{type}:{n}`.
    #[serde(default)]
    pub device_type: String,
    pub decode_ms: f64,
    /// Of `decode_ms`, the time the worker waited for the file's reads (not for a gzip file,
    /// whose reads and decompression overlap): the rest is the decode's own.
    #[serde(default)]
    pub read_wait_ms: Option<f64>,
    /// Size of the worker's wasm memory once the model is built (before any layout): what the
    /// loaded snapshot costs the tab, including the decoder's peak (wasm memory never shrinks).
    #[serde(default)]
    pub model_memory_bytes: f64,
    /// The worker's wasm memory when the file was chosen (the code, its static data and what
    /// earlier files and the warm-up left): `model_memory_bytes` minus this is what loading
    /// this file added.
    #[serde(default)]
    pub memory_before_bytes: f64,
    /// The worker sends the default device's Active layout without being asked (not when the
    /// page opened on the Allocator State History, which asks for what it needs in its order).
    #[serde(default)]
    pub layout_follows: bool,
}

/// What the page learns about a file while it is read (core's `Loader::with_prefix`): numbers
/// that are final already, and the device whose trace so far comes beside it as a layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartialInfo {
    /// Bytes read and decoded so far, of `total_bytes`.
    pub done_bytes: f64,
    pub total_bytes: f64,
    /// How the file is encoded (`pickle protocol 4`).
    pub encoding: String,
    /// Trace entries read so far, by device ordinal (`device_traces[d]`).
    pub events: Vec<u32>,
    /// The device drawn (the one with the most entries so far); `None` before the first entry.
    pub device: Option<u32>,
    /// Worker time to build and pack the layout.
    pub build_ms: f64,
}

/// A file refused for its size, and the part of it that fits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TooLarge {
    pub file_bytes: f64,
    /// The decoder memory the whole file would hold, and the limit it passes.
    pub estimated_bytes: f64,
    pub limit_bytes: f64,
    /// Trace entries in the whole file (estimated), and how many of the last ones fit.
    pub entries: f64,
    pub last_fits: f64,
}

/// Worker → page: the small facts of a reply, as JSON under `msg`. A reply's bulk data is its
/// payload, a [`memlens_core::columns::Columns`] type packed beside the header (`crate::wire::pack`); each variant names it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum FromWorker {
    Ready,
    /// The worker's warm-up layout (web/src/worker/warm_up.rs), payload a `TimelineLayout`:
    /// the page unpacks and draws it once off screen, so that its own code is compiled and
    /// optimized before the user's first file.
    WarmUpLayout,
    Progress {
        id: u32,
        done: f64,
        total: f64,
    },
    /// While the file is read: what its bytes so far say (`crate::worker::partial`); with
    /// `info.device`, payload the `TimelineLayout` of that device's trace so far.
    Partial {
        id: u32,
        info: PartialInfo,
    },
    Loaded {
        id: u32,
        info: FileInfo,
    },
    Failed {
        id: u32,
        message: String,
    },
    /// The file's first chunks say its whole decode would hold more than the limit: it was not
    /// read further, and the page offers to open its last events instead.
    TooLarge {
        id: u32,
        offer: TooLarge,
    },
    /// Payload: the `TimelineLayout`.
    Layout {
        id: u32,
        device: u32,
        kind: TimelineKind,
        /// Worker time to build it.
        build_ms: f64,
    },
    Context {
        id: u32,
        device: u32,
        kind: TimelineKind,
        elem: u32,
        full: bool,
        ctx: Option<ElementContext>,
    },
    /// Reply to [`ToWorker::StateEvents`]; payload: core's `EventList`.
    StateEvents {
        id: u32,
        device: u32,
    },
    /// Reply to [`ToWorker::StateAt`] (always sent); payload: the `StateFrame` (without numbers
    /// when the file is gone).
    State {
        id: u32,
        device: u32,
        /// The `event` of the request (the state itself is after the frame's `event`).
        requested: WantedState,
    },
    /// Reply to [`ToWorker::Diagnose`] (or sent unasked after load): core's diagnosis as it is.
    Diagnosis {
        id: u32,
        device: u32,
        /// Worker time to compute it.
        build_ms: f64,
        diagnosis: Box<DeviceDiagnosis>,
    },
    /// Reply to [`ToWorker::Icicle`].
    Icicle {
        id: u32,
        device: u32,
        callers_of: Option<String>,
        /// The element asked to mark, and its allocation's path through this icicle
        /// (`memlens_core::analysis::icicle::allocation_path`; `None`: not an allocation, or
        /// inverted for a frame its stack does not hold).
        mark: Option<u32>,
        mark_path: Option<Vec<String>>,
        icicle: Box<Icicle>,
    },
    /// Reply to [`ToWorker::Between`].
    Between {
        id: u32,
        between: Box<Between>,
    },
    /// Reply to [`ToWorker::PeakGroups`] (always sent: `None` when the file is gone).
    PeakGroups {
        side: CompareSide,
        groups: Option<Box<PeakGroups>>,
    },
    /// Reply to [`ToWorker::MomentGroups`], echoing the event (always sent: `None` when the
    /// file is gone).
    MomentGroups {
        side: CompareSide,
        event: Option<u32>,
        groups: Option<Box<MomentGroups>>,
    },
    /// Reply to [`ToWorker::Colours`]; payload: the `memlens_core::colour::Colouring` (none
    /// when the file is gone).
    Colours {
        id: u32,
        device: u32,
        kind: TimelineKind,
        by: ColourBy,
        build_ms: f64,
    },
    /// Reply to [`ToWorker::Search`]; payload: [`SearchHits`] (empty when `error` says why the
    /// query could not run).
    Search {
        id: u32,
        device: u32,
        kind: TimelineKind,
        seq: u32,
        count: u32,
        error: Option<String>,
        search_ms: f64,
    },
}

/// The elements a search matched: a bitset over the layout's elements (bit `e % 64` of word
/// `e / 64`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchHits {
    pub bits: Vec<u64>,
}

memlens_core::impl_columns! {
    SearchHits {
        columns [bits];
    }
}
