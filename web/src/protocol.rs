//! Messages between the page and the decoding worker. Headers travel as one JSON string
//! (`msg`); bulk data (the layout columns) as typed arrays whose buffers are transferred, not
//! copied; a file to open travels as the `File` itself.

use memlens_core::layout::context::ElementContext;
use memlens_core::layout::{Marker, Region, TimelineKind};
use serde::{Deserialize, Serialize};

/// Page → worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum ToWorker {
    /// Decode the `file` (a `Blob`: a chosen file, or what the page fetched) sent alongside.
    Open {
        id: u32,
        name: String,
        /// The page shows the Allocator State History (its URL hash says `view=state`): build
        /// the state history before the exact timeline layout.
        #[serde(default)]
        state_first: bool,
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
    /// Allocator State History: the device's trace as list columns (see [`STATE_EVENT_ARRAYS`]).
    StateEvents {
        id: u32,
        device: u32,
    },
    /// Allocator State History: the state after device-local trace entry `event` (`None`:
    /// before the first one; past the end: after the last).
    StateAt {
        id: u32,
        device: u32,
        event: Option<u32>,
    },
    /// Search a layout's elements (`memlens_core::layout::search`); `seq` is echoed back.
    Search {
        id: u32,
        device: u32,
        kind: TimelineKind,
        seq: u32,
        address: String,
        frame: String,
    },
}

/// The numbers of the summary strip (from `memlens_core::device_stats`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub device: u32,
    pub reserved_bytes: u64,
    pub allocated_bytes: u64,
    pub active_bytes: u64,
    pub inactive_split_bytes: u64,
    pub largest_free_block_bytes: u64,
    pub timeline_peak_bytes: i64,
    pub peak_reserved_bytes: i64,
    pub trace_entries: u64,
}

impl Summary {
    /// `(key, value, is_bytes)` in display order; keys are the page contract's `data-metric`s.
    pub fn metrics(&self) -> [(&'static str, i128, bool); 8] {
        [
            ("reserved_bytes", self.reserved_bytes as i128, true),
            ("allocated_bytes", self.allocated_bytes as i128, true),
            ("active_bytes", self.active_bytes as i128, true),
            (
                "inactive_split_bytes",
                self.inactive_split_bytes as i128,
                true,
            ),
            (
                "largest_free_block_bytes",
                self.largest_free_block_bytes as i128,
                true,
            ),
            (
                "timeline_peak_bytes",
                self.timeline_peak_bytes as i128,
                true,
            ),
            (
                "peak_reserved_bytes",
                self.peak_reserved_bytes as i128,
                true,
            ),
            ("trace_entries", self.trace_entries as i128, false),
        ]
    }
}

/// What the page learns about a decoded file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileInfo {
    pub encoding: String,
    pub bytes: u64,
    pub devices: Vec<Summary>,
    /// The device with the longest trace (upstream's default).
    pub default_device: Option<u32>,
    pub warnings: Vec<String>,
    /// `allocator_settings`, pretty JSON.
    pub allocator_settings: Option<String>,
    pub decode_ms: f64,
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

/// Small facts about a layout; the columns travel as typed arrays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayoutMeta {
    pub n_events: u32,
    pub markers: Vec<Marker>,
    pub regions: Vec<Region>,
    pub warnings: Vec<String>,
    pub build_ms: f64,
    /// `segment_pool_id`s the `pool` column refers to.
    #[serde(default)]
    pub pools: Vec<(i64, i64)>,
    /// Every band only moves down (`TimelineLayout::is_monotone`; false is always safe).
    #[serde(default)]
    pub monotone: bool,
    /// A first, sampled layout (`TimelineLayout::build_preview`); the exact one follows.
    #[serde(default)]
    pub preview: bool,
}

/// Worker → page.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum FromWorker {
    Ready,
    /// The worker's warm-up layout (web/src/worker.rs `warm_up`), columns as in `Layout`: the
    /// page unpacks and draws it once off screen, so that its own code is compiled and
    /// optimized before the user's first file.
    WarmUpLayout {
        meta: LayoutMeta,
    },
    Progress {
        id: u32,
        done: f64,
        total: f64,
    },
    Loaded {
        id: u32,
        info: FileInfo,
    },
    Failed {
        id: u32,
        message: String,
    },
    Layout {
        id: u32,
        device: u32,
        kind: TimelineKind,
        meta: LayoutMeta,
    },
    Context {
        id: u32,
        device: u32,
        kind: TimelineKind,
        elem: u32,
        full: bool,
        ctx: Option<ElementContext>,
    },
    /// Reply to [`ToWorker::StateEvents`]; the columns travel as typed arrays.
    StateEvents {
        id: u32,
        device: u32,
        meta: StateEventsMeta,
    },
    /// Reply to [`ToWorker::StateAt`] (always sent, `meta.numbers` is `None` when the file is
    /// gone); segments and blocks travel as typed arrays ([`STATE_ARRAYS`]).
    State {
        id: u32,
        device: u32,
        /// The `event` of the request (the state itself is after `meta.event`).
        requested: Option<u32>,
        meta: StateMeta,
    },
    /// Reply to [`ToWorker::Search`]: the matches travel as a `BigUint64Array` bitset `bits`
    /// over the layout's elements (absent when `error` says why the query could not run).
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

/// Names of the typed arrays in a `Layout` message, in a fixed order.
pub const LAYOUT_ARRAYS: [&str; 16] = [
    "size_bytes",
    "addr",
    "version",
    "start_x",
    "end_x",
    "alloc_row",
    "free_row",
    "stream",
    "origin",
    "stack",
    "pool",
    "piece_start",
    "piece_t0",
    "piece_y0",
    "total_bytes",
    "time_us",
];

/// An `oom` entry of a device's trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OomEvent {
    pub event: u32,
    pub requested_bytes: u64,
    pub device_free_bytes: Option<u64>,
}

/// Small facts about a device's trace for the Allocator State History's event list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateEventsMeta {
    pub n_events: u32,
    /// `timeline_peak_event` of `device_stats`, if the peak is after an entry.
    pub peak_event: Option<u32>,
    pub ooms: Vec<OomEvent>,
    /// Stream ids by the ordinal the `stream` column holds (0 stays first when present).
    pub streams: Vec<u64>,
    /// What the reconstruction had to skip or guess.
    pub warnings: Vec<String>,
    /// Time the worker spent building the history (0 when it was built before).
    pub build_ms: f64,
}

/// The per-state numbers (`memlens_core::state::StateNumbers`), bytes unless named otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StateNumbersMsg {
    pub allocated_bytes: u64,
    pub requested_bytes: u64,
    pub active_bytes: u64,
    pub pending_free_bytes: u64,
    pub reserved_bytes: u64,
    pub inactive_bytes: u64,
    pub inactive_split_bytes: u64,
    pub largest_free_block_bytes: u64,
    pub fragmentation_pct: f64,
    pub rounding_waste_bytes: u64,
    pub segments: u64,
    pub blocks: u64,
    pub unplaced_allocations: u64,
    pub unplaced_requested_bytes: u64,
    /// At an `oom` entry: the request, what the device said was free, and the state's
    /// largest free block and total free bytes.
    pub oom: Option<(u64, Option<u64>, u64, u64)>,
}

/// Small facts about one state; segments and blocks travel as typed arrays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateMeta {
    /// The entry the state follows (the request clamped to the trace; `None`: before the first).
    pub event: Option<u32>,
    pub numbers: Option<StateNumbersMsg>,
    /// `segment_pool_id` per segment (`None`: not known).
    pub segment_pool: Vec<Option<(i64, i64)>>,
    /// Worker time to reach the state and pack it.
    pub seek_ms: f64,
    /// Worker time to build the history first (0 when it was built before).
    pub build_ms: f64,
    /// The state was read straight from the file's segments (the last one, shown while the
    /// history is not built yet), not replayed by the history.
    #[serde(default)]
    pub from_file: bool,
}

/// Names of the typed arrays in a `StateEvents` message.
pub const STATE_EVENT_ARRAYS: [&str; 6] = [
    "ev_action",
    "ev_addr",
    "ev_size",
    "ev_version",
    "ev_stream",
    "ev_time",
];

/// Names of the typed arrays in a `State` message.
pub const STATE_ARRAYS: [&str; 11] = [
    "seg_addr",
    "seg_size",
    "seg_stream",
    "seg_flags",
    "seg_first_block",
    "blk_addr",
    "blk_size",
    "blk_requested",
    "blk_state",
    "blk_alloc_event",
    "blk_stack",
];
