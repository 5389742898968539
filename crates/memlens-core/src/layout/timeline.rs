//! The stacked timeline (upstream's Active Memory Timeline and Active Cached Segment Timeline):
//! the layout type and its build. The trace is paired into elements ([`super::pairing`]),
//! stacked ([`super::stacking`], [`super::preview`], [`super::pools`] for private pools), and
//! indexed for views ([`super::lod`], [`super::max_tree`]; the queries are in
//! [`super::query`]). The result is pure geometry in data space (x = event, y = bytes),
//! computed once.
//!
//! x coordinates: event `i` of the device's trace happens at `x = i + 1`, so `x ∈ [0, 1)` shows
//! the state before the first event and the whole trace spans `[0, n_events + 1)`. An element
//! is alive on `[start_x, end_x)`. Each element's band is a list of *pieces*: time spans with a
//! constant bottom offset, recorded within the [`super::tolerance`] rules; bottoms are kept as
//! `f32` for the same reason.

use super::lod::LodIndex;
use super::markers::{device_times, markers};
use super::max_tree::MaxTree;
use super::pairing::{pair_active, pair_segments};
use super::pools::{stack_allocated, PoolResolver, PoolTable};
pub(super) use super::preview::stack_preview;
use super::stacking::stack;
use crate::model::Snapshot;
use serde::{Deserialize, Serialize};

pub use super::elements::{ElementKind, Elements, Origin};
pub use super::markers::{Marker, MarkerKind, Region};
pub use super::preview::{PREVIEW_COLUMNS, PREVIEW_HEIGHT_PX, PREVIEW_MIN_EVENTS};
pub use super::tolerance::{
    is_thin, piece_tolerance, PIECE_BUDGET, PIECE_TOL_SHIFT, THIN_RATIO, THIN_TOL_SHIFT,
};
// The layout tests reach the sweeps through this module.
#[cfg(test)]
pub(super) use super::stacking::{end_lists, sweep, sweep_walk};

/// Which timeline to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TimelineKind {
    /// Blocks handed to the user: `alloc` … `free_completed`.
    Active,
    /// cudaMalloc'd memory: `segment_alloc` … `segment_free`, plus `segment_map`/`segment_unmap`
    /// ranges of expandable segments (which upstream ignores).
    Segments,
    /// Upstream's "Allocated Memory (incl. Private Pools)": the Active allocations, with each
    /// private pool's allocations stacked inside an envelope as tall as the pool holds (see
    /// [`super::pools`]).
    Allocated,
}

/// The stacked layout of one device's timeline.
#[derive(Debug, Clone, Default)]
pub struct TimelineLayout {
    pub n_events: u32,
    pub elements: Elements,
    /// Pieces of element `e`: `piece_start[e]..piece_start[e + 1]`, in time order. Piece `p`
    /// starts at `piece_t0[p]` and lasts until the next piece of the element or its `end_x`.
    pub piece_start: Vec<u32>,
    pub piece_t0: Vec<u32>,
    /// Bottom of the band during the piece, in bytes (within the tolerance in the module docs).
    pub piece_y0: Vec<f32>,
    /// Live bytes on `[x, x + 1)`, for `x` in `0..=n_events`.
    pub total_bytes: Vec<u64>,
    /// `time_us` of each event (device-local index), made non-decreasing; empty when some event
    /// has none (torch ≤ 2.0), which disables the wall-clock axis.
    pub time_us: Vec<i64>,
    pub markers: Vec<Marker>,
    pub regions: Vec<Region>,
    pub warnings: Vec<String>,
    /// `segment_pool_id`s the elements' `pool` column refers to (`(0, 0)` is the default pool).
    pub pools: Vec<(i64, i64)>,
    /// Derived: element ids by level-of-detail class.
    pub(super) lod: LodIndex,
    /// Derived: every element's pieces only move down (true for upstream's stacking).
    monotone: bool,
    /// Derived: range maxima of `total_bytes`.
    pub(super) max_tree: MaxTree,
    /// A [`Self::build_preview`] layout: only the drawable bands have pieces, sampled.
    preview: bool,
}

/// Why raw columns could not be turned into a layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("layout columns have inconsistent lengths ({0})")]
    Inconsistent(&'static str),
}

impl TimelineLayout {
    /// Builds the timeline of `device` from a snapshot.
    pub fn build(snap: &Snapshot, device: u32, kind: TimelineKind) -> TimelineLayout {
        Self::assemble(snap, device, kind, false)
    }

    /// A first, cheaper layout of a long trace for the first frame: the same elements, exact
    /// totals (so the underlay is exact), and pieces only for the bands tall enough to be drawn
    /// on their own at full zoom-out, sampled at [`PREVIEW_COLUMNS`] points across the trace.
    /// [`Self::complete`] turns it into the exact layout. Only for [`TimelineKind::Active`] with
    /// more than [`PREVIEW_MIN_EVENTS`] events; otherwise this is [`Self::build`].
    pub fn build_preview(snap: &Snapshot, device: u32, kind: TimelineKind) -> TimelineLayout {
        let preview = kind == TimelineKind::Active
            && snap.device_rows(device).len() > PREVIEW_MIN_EVENTS as usize;
        Self::assemble(snap, device, kind, preview)
    }

    /// [`Self::build_preview`] of the Active timeline whatever the trace's length: the web
    /// worker's warm-up runs the preview's code on a short generated trace with it.
    pub fn build_preview_of_any_length(snap: &Snapshot, device: u32) -> TimelineLayout {
        Self::assemble(snap, device, TimelineKind::Active, true)
    }

    /// Marks a layout rebuilt from shipped columns ([`Self::from_parts`]) as a preview.
    pub fn with_preview(mut self, preview: bool) -> Self {
        self.preview = preview;
        self
    }

    /// Whether this is a [`Self::build_preview`] layout still waiting for [`Self::complete`].
    pub fn is_preview(&self) -> bool {
        self.preview
    }

    /// Replaces a preview's pieces by the exact stacking of the same elements.
    pub fn complete(&mut self) {
        if !self.preview {
            return;
        }
        let st = stack(&self.elements, self.n_events);
        self.piece_start = st.piece_start;
        self.piece_t0 = st.piece_t0;
        self.piece_y0 = st.piece_y0;
        self.total_bytes = st.total_bytes;
        self.warnings.extend(st.warnings);
        self.preview = false;
        self.derive(Some(true));
    }

    fn assemble(snap: &Snapshot, device: u32, kind: TimelineKind, preview: bool) -> TimelineLayout {
        let n_events = snap.device_rows(device).len() as u32;
        let resolver = PoolResolver::new(snap, device);
        let mut pools = PoolTable::default();
        let (elements, mut warnings) = match kind {
            TimelineKind::Active | TimelineKind::Allocated => {
                pair_active(snap, device, &resolver, &mut pools)
            }
            TimelineKind::Segments => pair_segments(snap, device, &resolver, &mut pools),
        };
        let (elements, st) = match kind {
            TimelineKind::Allocated => {
                stack_allocated(snap, device, elements, n_events, &resolver, &mut pools)
            }
            _ if preview => {
                let st = stack_preview(&elements, n_events);
                (elements, st)
            }
            _ => {
                let st = stack(&elements, n_events);
                (elements, st)
            }
        };
        warnings.extend(st.warnings);
        let (markers, regions) = markers(snap, device);
        let mut l = TimelineLayout {
            n_events,
            elements,
            piece_start: st.piece_start,
            piece_t0: st.piece_t0,
            piece_y0: st.piece_y0,
            total_bytes: st.total_bytes,
            time_us: device_times(snap, device),
            markers,
            regions,
            warnings,
            pools: pools.ids,
            preview,
            ..TimelineLayout::default()
        };
        // Upstream's stacking only moves bands down; pool envelopes move them both ways.
        l.derive((kind != TimelineKind::Allocated).then_some(true));
        l
    }

    /// Rebuilds a layout from its columns (as shipped from a worker), checking their lengths.
    /// `monotone` is [`Self::is_monotone`] of the layout shipped (the renderer bisects runs
    /// when it is true; false is always safe).
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts(
        n_events: u32,
        elements: Elements,
        piece_start: Vec<u32>,
        piece_t0: Vec<u32>,
        piece_y0: Vec<f32>,
        total_bytes: Vec<u64>,
        time_us: Vec<i64>,
        markers: Vec<Marker>,
        regions: Vec<Region>,
        warnings: Vec<String>,
        pools: Vec<(i64, i64)>,
        monotone: bool,
    ) -> Result<TimelineLayout, LayoutError> {
        if !elements.consistent() {
            return Err(LayoutError::Inconsistent("elements"));
        }
        if piece_start.len() != elements.len() + 1 || piece_t0.len() != piece_y0.len() {
            return Err(LayoutError::Inconsistent("pieces"));
        }
        if piece_start.windows(2).any(|w| w[0] > w[1])
            || piece_start.last().map(|&l| l as usize) != Some(piece_t0.len())
        {
            return Err(LayoutError::Inconsistent("piece offsets"));
        }
        if total_bytes.len() != n_events as usize + 1 {
            return Err(LayoutError::Inconsistent("totals"));
        }
        if !time_us.is_empty() && time_us.len() != n_events as usize {
            return Err(LayoutError::Inconsistent("times"));
        }
        let mut l = TimelineLayout {
            n_events,
            elements,
            piece_start,
            piece_t0,
            piece_y0,
            total_bytes,
            time_us,
            markers,
            regions,
            warnings,
            pools,
            ..TimelineLayout::default()
        };
        l.derive(Some(monotone));
        Ok(l)
    }

    /// Builds the derived indices; `monotone: None` checks every element's pieces.
    /// Builds the derived indices; `monotone: None` checks every element's pieces.
    fn derive(&mut self, monotone: Option<bool>) {
        self.lod = LodIndex::build(&self.elements);
        self.monotone = monotone.unwrap_or_else(|| {
            (0..self.len()).all(|e| {
                self.piece_y0
                    .get(self.pieces_of(e))
                    .is_none_or(|ys| ys.windows(2).all(|w| w[1] <= w[0]))
            })
        });
        self.max_tree = MaxTree::build(&self.total_bytes);
    }

    /// Drops the geometry (pieces, totals, level-of-detail and max indices) and keeps the
    /// element columns, which are all that stack lookups and searches need: the worker keeps
    /// this after shipping the geometry to the page. [`Self::has_geometry`] tells the two apart.
    pub fn strip_geometry(&mut self) {
        self.piece_start = Vec::new();
        self.piece_t0 = Vec::new();
        self.piece_y0 = Vec::new();
        self.total_bytes = Vec::new();
        self.time_us = Vec::new();
        self.lod = LodIndex::default();
        self.max_tree = MaxTree::default();
    }

    /// Whether every band only ever moves down (the renderer then finds runs by bisection).
    pub fn is_monotone(&self) -> bool {
        self.monotone
    }

    pub fn has_geometry(&self) -> bool {
        self.piece_start.len() == self.elements.len() + 1
    }

    /// Right edge of the x range: `n_events + 1`.
    pub fn x_end(&self) -> u32 {
        self.n_events + 1
    }

    pub fn len(&self) -> usize {
        self.elements.len()
    }

    pub fn is_empty(&self) -> bool {
        self.elements.is_empty()
    }

    pub fn piece_count(&self) -> usize {
        self.piece_t0.len()
    }
}
