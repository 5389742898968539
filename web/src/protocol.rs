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
    /// Decode the `file` (a `Blob`) or `url` sent alongside.
    Open {
        id: u32,
        name: String,
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
}

/// Small facts about a layout; the columns travel as typed arrays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayoutMeta {
    pub n_events: u32,
    pub markers: Vec<Marker>,
    pub regions: Vec<Region>,
    pub warnings: Vec<String>,
    pub build_ms: f64,
}

/// Worker → page.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum FromWorker {
    Ready,
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
}

/// Names of the typed arrays in a `Layout` message, in a fixed order.
pub const LAYOUT_ARRAYS: [&str; 14] = [
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
    "piece_start",
    "piece_t0",
    "piece_y0",
    "total_bytes",
];
