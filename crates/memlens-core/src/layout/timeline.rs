//! The stacked timeline (upstream's Active Memory Timeline and Active Cached Segment Timeline):
//! pairing each alloc with its free by (address, version), then stacking the allocations the
//! way upstream does: an alloc goes on top, a free removes its band and the bands above slide
//! down. The result is pure geometry in data space (x = event, y = bytes), computed once.
//!
//! x coordinates: event `i` of the device's trace happens at `x = i + 1`, so `x ∈ [0, 1)` shows
//! the state before the first event and the whole trace spans `[0, n_events + 1)`. An element
//! is alive on `[start_x, end_x)`.
//!
//! Each element's band is a list of *pieces*: time spans with a constant bottom offset.
//! Upstream stores the same thing as polygon vertices. A free moves every band above it down;
//! a piece is recorded only when the band has moved by more than its [`piece_tolerance`] since
//! its last piece: 2^-[`PIECE_TOL_SHIFT`] of its top, or 2^-[`THIN_TOL_SHIFT`] for a band too
//! thin ever to be drawn on its own. The y axis always starts at 0 and reaches at least the top
//! of every band in view, so a drawn band is off by under 0.13 px on any screen while most
//! pieces (the frees of small blocks far below a band, and thin bands riding on them) are never
//! stored; bottoms are kept as `f32` for the same reason. A budget stops pathological inputs
//! (see [`PIECE_BUDGET`]).
//!
//! Level of detail: elements are also indexed by (size class, lifetime class), both powers of
//! two, in start order within a class ([`TimelineLayout::visible`]). A view asks only for the
//! classes that can be taller and wider than a pixel, and finds the ones alive in its window by
//! binary search, so a zoomed-out view of a million allocations never walks the short-lived ones.

use crate::model::{Action, Snapshot};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

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

/// Where an element comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u8)]
pub enum Origin {
    /// Alloc (and free, if any) recorded in the trace.
    Traced = 0,
    /// Freed in the trace but allocated before it starts (history enabled late, or the ring
    /// buffer dropped the alloc). Its stack is the free site.
    FreedUntraced = 1,
    /// Active in the file's `segments` and never seen in the trace (upstream's "ghost block").
    Ghost = 2,
    /// Segments view: what is left of a mapped range after part of it was unmapped.
    Remainder = 3,
    /// Allocated view: a private pool's envelope while its height stays the same.
    PoolEnvelope = 4,
}

impl Origin {
    pub fn from_u8(v: u8) -> Origin {
        match v {
            1 => Origin::FreedUntraced,
            2 => Origin::Ghost,
            3 => Origin::Remainder,
            4 => Origin::PoolEnvelope,
            _ => Origin::Traced,
        }
    }
    /// Alive since before the first event of the trace.
    pub fn before_trace(self) -> bool {
        matches!(self, Origin::FreedUntraced | Origin::Ghost)
    }
}

/// Row value meaning "no such trace entry".
pub const NO_ROW: u32 = u32::MAX;

/// Most pieces a layout may hold (8 bytes each). Past it the layout stops recording further
/// shifts and says so in [`TimelineLayout::warnings`].
pub const PIECE_BUDGET: usize = 48_000_000;

/// A band's drop is recorded as a new piece once it exceeds [`piece_tolerance`]. For a band at
/// least 1/[`THIN_RATIO`] of its top: `top >> PIECE_TOL_SHIFT` bytes (1/16384 of its top: under
/// 0.13 px on a 2048 px tall plot, since the plot's y range always includes the band's top).
pub const PIECE_TOL_SHIFT: u32 = 14;

/// A band thinner than 1/`THIN_RATIO` of its top is under one pixel on any plot up to this many
/// pixels tall (the y range includes its top), so it is never drawn on its own: only the
/// underlay (live totals, exact) shows it, and its own position matters for hover and for the
/// outline of a selected band. Such a band moves only when it is off by
/// `top >> THIN_TOL_SHIFT` (1/256 of its top: ≤ 8 px on a 2048 px plot, ≤ 2 px on the viewer's).
/// On a repeated real trace (bench/data/rep60.pickle, 1.3M events) this takes the layout from
/// 48M pieces (the budget) to 5.4M, since nearly all of a stacked layout's pieces are thin
/// bands riding on frees below them.
pub const THIN_RATIO: u64 = 2048;
pub const THIN_TOL_SHIFT: u32 = 8;

/// How far (in bytes) a band with this bottom and size may sit above its exact place before a
/// new piece is recorded.
#[inline]
pub fn piece_tolerance(bottom: u64, size: u64) -> u64 {
    let top = bottom.saturating_add(size);
    if is_thin(bottom, size) {
        top >> THIN_TOL_SHIFT
    } else {
        top >> PIECE_TOL_SHIFT
    }
}

/// Under one pixel on any plot up to [`THIN_RATIO`] pixels tall.
#[inline]
pub fn is_thin(bottom: u64, size: u64) -> bool {
    size.saturating_mul(THIN_RATIO) < bottom.saturating_add(size)
}

/// Traces longer than this get a [`TimelineLayout::build_preview`] first.
pub const PREVIEW_MIN_EVENTS: u32 = 200_000;
/// Points across the trace where a preview samples its bands' bottoms (a preview is exact to
/// within 1/2 px on a full-trace plot up to 2048 px wide).
pub const PREVIEW_COLUMNS: u32 = 4096;
/// A preview gives pieces to the bands at least 1/`PREVIEW_HEIGHT_PX` of the peak: the ones a
/// full-trace plot up to this tall can draw on their own.
pub const PREVIEW_HEIGHT_PX: u64 = 4096;

/// Events per leaf of the layout's max tree ([`TimelineLayout::max_total`]).
const MAX_BLOCK: usize = 16;

/// Size classes (`floor(log2(size_bytes))`) × lifetime classes (`floor(log2(end_x - start_x))`).
const SIZE_CLASSES: usize = 64;
const LEN_CLASSES: usize = 32;
const N_GROUPS: usize = SIZE_CLASSES * LEN_CLASSES;

/// Level-of-detail class of an element that is alive for at least one event.
fn lod_group(size_bytes: u64, start_x: u32, end_x: u32) -> Option<(usize, usize)> {
    if end_x <= start_x {
        return None;
    }
    let s = 63 - size_bytes.max(1).leading_zeros() as usize;
    let k = 31 - (end_x - start_x).leading_zeros() as usize;
    Some((s, k))
}

/// Elements (allocations, or segment ranges) as parallel columns, in stack order: elements alive
/// before the trace first, then by the event that allocated them. `start_x` is non-decreasing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Elements {
    pub size_bytes: Vec<u64>,
    pub addr: Vec<u64>,
    /// How many earlier elements had this address (upstream's `_N` suffix in `b'7f…_N`).
    pub version: Vec<u32>,
    pub start_x: Vec<u32>,
    pub end_x: Vec<u32>,
    /// Device-local index of the alloc entry ([`NO_ROW`] if none).
    pub alloc_row: Vec<u32>,
    /// Device-local index of the free entry ([`NO_ROW`] if never freed).
    pub free_row: Vec<u32>,
    pub stream: Vec<u64>,
    /// [`Origin`] as `u8`.
    pub origin: Vec<u8>,
    /// `StackId.0` of the frames shown for the element.
    pub stack: Vec<u32>,
    /// Index into [`TimelineLayout::pools`] of the element's `segment_pool_id` ([`NO_POOL`]:
    /// not known, e.g. its segment was freed before the snapshot and its entry carries none).
    pub pool: Vec<u32>,
}

/// Pool value meaning "pool not known".
pub const NO_POOL: u32 = u32::MAX;

impl Elements {
    pub fn len(&self) -> usize {
        self.size_bytes.len()
    }
    pub fn is_empty(&self) -> bool {
        self.size_bytes.is_empty()
    }
    fn consistent(&self) -> bool {
        let n = self.len();
        [
            self.addr.len(),
            self.version.len(),
            self.start_x.len(),
            self.end_x.len(),
            self.alloc_row.len(),
            self.free_row.len(),
            self.stream.len(),
            self.origin.len(),
            self.stack.len(),
            self.pool.len(),
        ]
        .iter()
        .all(|&l| l == n)
    }
    /// Empty columns with room for exactly `n` elements (no growth while they fill: in wasm,
    /// where memory never shrinks, every doubling would stay in the worker's footprint).
    pub(super) fn with_capacity(n: usize) -> Elements {
        Elements {
            size_bytes: Vec::with_capacity(n),
            addr: Vec::with_capacity(n),
            version: Vec::with_capacity(n),
            start_x: Vec::with_capacity(n),
            end_x: Vec::with_capacity(n),
            alloc_row: Vec::with_capacity(n),
            free_row: Vec::with_capacity(n),
            stream: Vec::with_capacity(n),
            origin: Vec::with_capacity(n),
            stack: Vec::with_capacity(n),
            pool: Vec::with_capacity(n),
        }
    }

    pub(super) fn push(&mut self, e: Tmp) {
        self.size_bytes.push(e.size);
        self.addr.push(e.addr);
        self.version.push(e.version);
        self.start_x.push(e.start_x);
        self.end_x.push(e.end_x);
        self.alloc_row.push(e.alloc_row);
        self.free_row.push(e.free_row);
        self.stream.push(e.stream);
        self.origin.push(e.origin as u8);
        self.stack.push(e.stack);
        self.pool.push(e.pool);
    }

    /// Element `e` as a row.
    pub(super) fn row(&self, e: usize) -> Option<Tmp> {
        Some(Tmp {
            size: *self.size_bytes.get(e)?,
            addr: *self.addr.get(e)?,
            version: *self.version.get(e)?,
            start_x: *self.start_x.get(e)?,
            end_x: *self.end_x.get(e)?,
            alloc_row: *self.alloc_row.get(e)?,
            free_row: *self.free_row.get(e)?,
            stream: *self.stream.get(e)?,
            origin: Origin::from_u8(*self.origin.get(e)?),
            stack: *self.stack.get(e)?,
            pool: *self.pool.get(e)?,
        })
    }
}

/// What a marker on the time axis stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MarkerKind {
    Oom,
    Snapshot,
    Annotate,
}

/// A point event drawn as a vertical line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Marker {
    pub x: u32,
    pub kind: MarkerKind,
    pub label: String,
}

/// An `external_annotations` START/END pair (e.g. `ProfilerStep#3`) mapped onto the x axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Region {
    pub x0: f64,
    pub x1: f64,
    pub label: String,
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
    /// Derived: element ids grouped by level-of-detail class, by `start_x` within a group.
    lod_order: Vec<u32>,
    /// Derived: group `g` is `lod_order[lod_start[g]..lod_start[g + 1]]`.
    lod_start: Vec<u32>,
    /// Derived: every element's pieces only move down (true for upstream's stacking).
    monotone: bool,
    /// Derived: bottom-up max tree over the maxima of `total_bytes` in blocks of
    /// [`MAX_BLOCK`] events (range maxima for y fitting; 1/16 of a tree over every event).
    max_tree: Vec<u64>,
    /// A [`Self::build_preview`] layout: only the drawable bands have pieces, sampled.
    preview: bool,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Tmp {
    pub(super) size: u64,
    pub(super) addr: u64,
    pub(super) version: u32,
    pub(super) start_x: u32,
    pub(super) end_x: u32,
    pub(super) alloc_row: u32,
    pub(super) free_row: u32,
    pub(super) stream: u64,
    pub(super) origin: Origin,
    pub(super) stack: u32,
    pub(super) pool: u32,
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
        let (piece_start, piece_t0, piece_y0, total_bytes, warn) =
            stack(&self.elements, self.n_events);
        self.piece_start = piece_start;
        self.piece_t0 = piece_t0;
        self.piece_y0 = piece_y0;
        self.total_bytes = total_bytes;
        self.warnings.extend(warn);
        self.preview = false;
        self.derive(Some(true));
    }

    fn assemble(snap: &Snapshot, device: u32, kind: TimelineKind, preview: bool) -> TimelineLayout {
        let rows = snap.device_rows(device);
        let n_events = rows.len() as u32;
        let resolver = super::pools::PoolResolver::new(snap, device);
        let mut pools = super::pools::PoolTable::default();
        let (elements, mut warnings) = match kind {
            TimelineKind::Active | TimelineKind::Allocated => {
                pair_active(snap, device, &resolver, &mut pools)
            }
            TimelineKind::Segments => pair_segments(snap, device, &resolver, &mut pools),
        };
        let (elements, (piece_start, piece_t0, piece_y0, total_bytes, stack_warn)) = match kind {
            TimelineKind::Allocated => super::pools::stack_allocated(
                snap, device, elements, n_events, &resolver, &mut pools,
            ),
            _ if preview => {
                let st = stack_preview(&elements, n_events);
                (elements, st)
            }
            _ => {
                let st = stack(&elements, n_events);
                (elements, st)
            }
        };
        warnings.extend(stack_warn);
        let (markers, regions) = markers(snap, device);
        let mut l = TimelineLayout {
            n_events,
            elements,
            piece_start,
            piece_t0,
            piece_y0,
            total_bytes,
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
    fn derive(&mut self, monotone: Option<bool>) {
        self.derive_lod();
        self.monotone = monotone.unwrap_or_else(|| {
            (0..self.len()).all(|e| {
                self.piece_y0
                    .get(self.pieces_of(e))
                    .is_none_or(|ys| ys.windows(2).all(|w| w[1] <= w[0]))
            })
        });
        let nb = self.total_bytes.len().div_ceil(MAX_BLOCK);
        let mut tree = vec![0u64; 2 * nb];
        for (slot, block) in tree[nb..]
            .iter_mut()
            .zip(self.total_bytes.chunks(MAX_BLOCK))
        {
            *slot = block.iter().copied().max().unwrap_or(0);
        }
        for i in (1..nb).rev() {
            tree[i] = tree[2 * i].max(tree[2 * i + 1]);
        }
        self.max_tree = tree;
    }

    /// Groups element ids by level-of-detail class (a counting sort, so `start_x` order is kept
    /// within a group). Elements alive for no event are left out: they are never drawn.
    fn derive_lod(&mut self) {
        let el = &self.elements;
        // Group per element (`NO_GROUP`: never drawn); N_GROUPS fits a u16.
        const NO_GROUP: u16 = u16::MAX;
        let groups: Vec<u16> = (0..el.len())
            .map(|e| {
                let (Some(&size), Some(&s), Some(&en)) =
                    (el.size_bytes.get(e), el.start_x.get(e), el.end_x.get(e))
                else {
                    return NO_GROUP;
                };
                lod_group(size, s, en).map_or(NO_GROUP, |(s, k)| (s * LEN_CLASSES + k) as u16)
            })
            .collect();
        let mut start = vec![0u32; N_GROUPS + 1];
        for &g in groups.iter().filter(|&&g| g != NO_GROUP) {
            if let Some(c) = start.get_mut(g as usize + 1) {
                *c += 1;
            }
        }
        for g in 0..N_GROUPS {
            let prev = start.get(g).copied().unwrap_or(0);
            if let Some(c) = start.get_mut(g + 1) {
                *c += prev;
            }
        }
        let mut fill = start.clone();
        let mut order = vec![0u32; start.last().copied().unwrap_or(0) as usize];
        for (e, &g) in groups.iter().enumerate() {
            if g == NO_GROUP {
                continue;
            }
            if let Some(f) = fill.get_mut(g as usize) {
                if let Some(slot) = order.get_mut(*f as usize) {
                    *slot = e as u32;
                }
                *f += 1;
            }
        }
        self.lod_order = order;
        self.lod_start = start;
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
        self.lod_order = Vec::new();
        self.lod_start = Vec::new();
        self.max_tree = Vec::new();
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

    /// Highest live total over `[x0, x1)` (clamped to the trace), in bytes.
    pub fn max_total(&self, x0: f64, x1: f64) -> u64 {
        let n = self.total_bytes.len();
        if n == 0 {
            return 0;
        }
        let lo = x0.floor().clamp(0.0, n as f64 - 1.0) as usize;
        let hi = (x1.ceil().clamp(0.0, n as f64) as usize).max(lo + 1);
        let scan = |r: std::ops::Range<usize>| {
            self.total_bytes
                .get(r)
                .and_then(|v| v.iter().copied().max())
                .unwrap_or(0)
        };
        // Whole blocks [bl, bh) from the tree, the partial ones at both ends by a scan.
        let (bl, bh) = (lo.div_ceil(MAX_BLOCK), hi / MAX_BLOCK);
        if bl >= bh {
            return scan(lo..hi);
        }
        let mut m = scan(lo..bl * MAX_BLOCK).max(scan(bh * MAX_BLOCK..hi));
        let nb = n.div_ceil(MAX_BLOCK);
        let (mut l, mut r) = (bl + nb, bh + nb);
        while l < r {
            if l & 1 == 1 {
                m = m.max(self.max_tree.get(l).copied().unwrap_or(0));
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                m = m.max(self.max_tree.get(r).copied().unwrap_or(0));
            }
            l /= 2;
            r /= 2;
        }
        m
    }

    /// Pieces of element `e` as an index range.
    pub fn pieces_of(&self, e: usize) -> std::ops::Range<usize> {
        let a = self.piece_start.get(e).copied().unwrap_or(0) as usize;
        let b = self.piece_start.get(e + 1).copied().unwrap_or(0) as usize;
        a..b.max(a)
    }

    /// Live bytes on `[x, x + 1)` (0 outside the trace).
    pub fn total_at(&self, x: f64) -> u64 {
        if x.is_nan() || x < 0.0 {
            return 0;
        }
        self.total_bytes.get(x as usize).copied().unwrap_or(0)
    }

    /// Bottom of element `e`'s band at `x` (bytes), if it is alive then.
    pub fn offset_at(&self, e: usize, x: f64) -> Option<f64> {
        let el = &self.elements;
        let (s, en) = (*el.start_x.get(e)? as f64, *el.end_x.get(e)? as f64);
        if x < s || x >= en {
            return None;
        }
        let r = self.pieces_of(e);
        let t0s = self.piece_t0.get(r.clone())?;
        let k = t0s.partition_point(|&t| t as f64 <= x);
        let p = r.start + k.checked_sub(1)?;
        self.piece_y0.get(p).map(|&y| y as f64)
    }

    /// Elements alive somewhere in `[x0, x1)` whose level-of-detail class `keep(size_class,
    /// len_class)` accepts (sizes in `[2^s, 2^(s+1))`, lifetimes in `[2^k, 2^(k+1))` events).
    /// Within a class, those alive in the window started in `(x0 - 2^(k+1), x1)`: two
    /// bisections, so the cost is what is returned, not what the trace holds.
    pub fn visible<'a>(
        &'a self,
        x0: f64,
        x1: f64,
        keep: impl Fn(usize, usize) -> bool + 'a,
    ) -> impl Iterator<Item = usize> + 'a {
        let el = &self.elements;
        (0..N_GROUPS)
            .filter(move |&g| keep(g / LEN_CLASSES, g % LEN_CLASSES))
            .flat_map(move |g| {
                let a = self.lod_start.get(g).copied().unwrap_or(0) as usize;
                let b = self.lod_start.get(g + 1).copied().unwrap_or(0) as usize;
                let ids = self.lod_order.get(a..b.max(a)).unwrap_or(&[]);
                let max_len = (1u64 << ((g % LEN_CLASSES) + 1)) as f64;
                let start_of = |id: &u32| el.start_x.get(*id as usize).copied().unwrap_or(0) as f64;
                let lo = ids.partition_point(|id| start_of(id) <= x0 - max_len);
                let hi = ids.partition_point(|id| start_of(id) < x1);
                ids.get(lo..hi.max(lo)).unwrap_or(&[]).iter()
            })
            .map(|&id| id as usize)
            .filter(move |&e| el.end_x.get(e).is_some_and(|&en| en as f64 > x0))
    }

    /// The element under (`x`, `y_bytes`), if any.
    pub fn hit(&self, x: f64, y_bytes: f64) -> Option<usize> {
        if y_bytes.is_nan() || x.is_nan() || y_bytes < 0.0 || x < 0.0 {
            return None;
        }
        if y_bytes >= self.total_at(x) as f64 {
            return None;
        }
        // Starts are whole events: `start < floor(x) + 1` is `start <= x`. An allocation inside
        // a pool envelope wins over the envelope. A band that can be drawn wins over a thin one,
        // whose recorded place may be off by its (larger) tolerance.
        let (mut envelope, mut thin) = (None, None);
        for e in self.visible(x, x.floor() + 1.0, |_, _| true) {
            let size = self.elements.size_bytes.get(e).copied().unwrap_or(0);
            let Some(y0) = self.offset_at(e, x) else {
                continue;
            };
            if !(y_bytes >= y0 && y_bytes < y0 + size as f64) {
                continue;
            }
            if self.elements.origin.get(e) == Some(&(Origin::PoolEnvelope as u8)) {
                envelope = Some(e);
            } else if is_thin(y0 as u64, size) {
                thin = thin.or(Some(e));
            } else {
                return Some(e);
            }
        }
        thin.or(envelope)
    }
}

/// `time_us` of the device's events, made non-decreasing; empty if any event lacks one.
fn device_times(snap: &Snapshot, device: u32) -> Vec<i64> {
    let rows = snap.device_rows(device);
    let mut out = Vec::with_capacity(rows.len());
    let mut last = i64::MIN;
    for r in rows {
        match snap.trace.time_us.get(r as usize) {
            Some(&t) if t != crate::model::TIME_NONE => {
                last = last.max(t);
                out.push(last);
            }
            _ => return Vec::new(),
        }
    }
    out
}

/// Allocations from the shared [`crate::replay`] (alloc paired with `free_completed` by address,
/// frees of allocations made before the trace, active blocks the trace never saw).
fn pair_active(
    snap: &Snapshot,
    device: u32,
    res: &super::pools::PoolResolver,
    pools: &mut super::pools::PoolTable,
) -> (Elements, Vec<String>) {
    let rp = crate::replay::replay_device(snap, device);
    let n = rp.events;
    let origin_of = |a: &crate::replay::Allocation| match a.origin {
        crate::replay::Origin::Traced => Origin::Traced,
        crate::replay::Origin::UnmatchedFree => Origin::FreedUntraced,
        crate::replay::Origin::Untraced => Origin::Ghost,
    };
    let tmp_of = |a: &crate::replay::Allocation, version: u32, pool: u32| Tmp {
        size: a.size_bytes,
        addr: a.addr,
        version,
        start_x: a.alloc_event.map(|i| i + 1).unwrap_or(0),
        end_x: a.free_event.map(|i| i + 1).unwrap_or(n + 1),
        alloc_row: a.alloc_event.unwrap_or(NO_ROW),
        free_row: a.free_event.unwrap_or(NO_ROW),
        stream: a.stream,
        origin: origin_of(a),
        stack: a.stack.0,
        pool,
    };
    // In allocation order: pools (numbered in order of appearance); the allocations from before
    // the trace, which sit at the bottom, are set aside.
    let mut version_pool: Vec<(u32, u32)> = Vec::with_capacity(rp.allocations.len());
    let (mut before, mut ghosts) = (Vec::new(), Vec::new());
    for a in &rp.allocations {
        let version = a.version;
        let pool = pools.index(res.pool_of(a.addr, a.alloc_event.or(a.free_event)));
        version_pool.push((version, pool));
        match origin_of(a) {
            Origin::Ghost => ghosts.push(tmp_of(a, version, pool)),
            Origin::FreedUntraced => before.push(tmp_of(a, version, pool)),
            _ => {}
        }
    }
    // Longest-lived first at the bottom (as `order`), then the trace's own allocations written
    // straight into the columns.
    before.sort_by_key(|e| std::cmp::Reverse(e.end_x));
    let mut el = Elements::with_capacity(rp.allocations.len());
    for t in ghosts.into_iter().chain(before) {
        el.push(t);
    }
    for (a, &(version, pool)) in rp.allocations.iter().zip(&version_pool) {
        if origin_of(a) == Origin::Traced {
            el.push(tmp_of(a, version, pool));
        }
    }
    let mut warnings = Vec::new();
    if rp.realloc_without_free > 0 {
        warnings.push(format!(
            "{} allocs at an address that was still live (the earlier allocation stays alive to the end, as upstream draws it)",
            rp.realloc_without_free
        ));
    }
    (el, warnings)
}

/// Longest-lived first at the bottom, then the trace in alloc order.
fn order(ghosts: Vec<Tmp>, mut before: Vec<Tmp>, traced: Vec<Tmp>) -> Elements {
    // Freed last sits lowest, so a free of memory from before the trace moves as little as possible.
    before.sort_by_key(|e| std::cmp::Reverse(e.end_x));
    let mut el = Elements::with_capacity(ghosts.len() + before.len() + traced.len());
    for e in ghosts.into_iter().chain(before).chain(traced) {
        el.push(e);
    }
    el
}

/// Segments: `segment_alloc`/`segment_free` paired by address; `segment_map` adds a range and
/// `segment_unmap` removes bytes from whatever mapped ranges it covers (expandable segments).
fn pair_segments(
    snap: &Snapshot,
    device: u32,
    res: &super::pools::PoolResolver,
    pools: &mut super::pools::PoolTable,
) -> (Elements, Vec<String>) {
    let rows = snap.device_rows(device);
    let n = rows.len() as u32;
    let t = &snap.trace;
    let mut traced: Vec<Tmp> = Vec::new();
    let mut before: Vec<Tmp> = Vec::new();
    // Live ranges by start address: (end address, element index in `traced`).
    let mut live: std::collections::BTreeMap<u64, (u64, usize)> = Default::default();
    let mut versions: FxHashMap<u64, u32> = FxHashMap::default();
    let mut untraced_unmaps = 0u64;
    let mut streams = t.stream.cursor();
    for (i, r) in rows.clone().enumerate() {
        let r = r as usize;
        let (Some(&action), Some(&addr), Some(&size)) =
            (t.action.get(r), t.addr.get(r), t.size_bytes.get(r))
        else {
            continue;
        };
        let i = i as u32;
        let stream = streams.at(r).unwrap_or(0);
        let stack = t.stack.get(r).map(|s| s.0).unwrap_or(0);
        let end = addr.saturating_add(size);
        let pool = pools.index(res.pool_of(addr, Some(i)));
        match action {
            Action::SegmentAlloc | Action::SegmentMap => {
                let version = *versions.get(&addr).unwrap_or(&0);
                *versions.entry(addr).or_insert(0) += 1;
                live.insert(addr, (end, traced.len()));
                traced.push(Tmp {
                    size,
                    addr,
                    version,
                    start_x: i + 1,
                    end_x: n + 1,
                    alloc_row: i,
                    free_row: NO_ROW,
                    stream,
                    origin: Origin::Traced,
                    stack,
                    pool,
                });
            }
            Action::SegmentFree | Action::SegmentUnmap => {
                // Every live range overlapping [addr, end) ends here; the parts outside it live on.
                let overlapping: Vec<(u64, u64, usize)> = live
                    .range(..end)
                    .rev()
                    .take_while(|(_, (e_end, _))| *e_end > addr)
                    .map(|(&s, &(e_end, idx))| (s, e_end, idx))
                    .collect();
                let mut covered = 0u64;
                for (s, e_end, idx) in overlapping {
                    live.remove(&s);
                    covered += e_end.min(end) - s.max(addr);
                    let Some(old) = traced.get_mut(idx) else {
                        continue;
                    };
                    old.end_x = i + 1;
                    old.free_row = i;
                    let old = *old;
                    for (rs, re) in [(s, addr.min(e_end)), (end.max(s), e_end)] {
                        if re > rs {
                            live.insert(rs, (re, traced.len()));
                            traced.push(Tmp {
                                size: re - rs,
                                addr: rs,
                                version: *versions.get(&rs).unwrap_or(&0),
                                start_x: i + 1,
                                end_x: n + 1,
                                alloc_row: old.alloc_row,
                                free_row: NO_ROW,
                                stream: old.stream,
                                origin: Origin::Remainder,
                                stack: old.stack,
                                pool: old.pool,
                            });
                        }
                    }
                }
                *versions.entry(addr).or_insert(0) += 1;
                if covered < size {
                    untraced_unmaps += 1;
                    before.push(Tmp {
                        size: size - covered,
                        addr,
                        version: 0,
                        start_x: 0,
                        end_x: i + 1,
                        alloc_row: NO_ROW,
                        free_row: i,
                        stream,
                        origin: Origin::FreedUntraced,
                        stack,
                        pool,
                    });
                }
            }
            _ => {}
        }
    }
    // Segments of the file not live at the end of the trace existed before it.
    let mut ghosts = Vec::new();
    for seg in snap.segments.iter().filter(|s| s.device == device) {
        let (s, e) = (
            seg.address,
            seg.address.saturating_add(seg.total_size_bytes),
        );
        let covered: u64 = live
            .range(..e)
            .rev()
            .take_while(|(_, (r_end, _))| *r_end > s)
            .map(|(&rs, &(re, _))| re.min(e) - rs.max(s))
            .sum();
        if covered < seg.total_size_bytes {
            ghosts.push(Tmp {
                size: seg.total_size_bytes - covered,
                addr: seg.address,
                version: *versions.get(&seg.address).unwrap_or(&0),
                start_x: 0,
                end_x: n + 1,
                alloc_row: NO_ROW,
                free_row: NO_ROW,
                stream: seg.stream,
                origin: Origin::Ghost,
                stack: seg.stack.0,
                pool: pools.index(Some(seg.pool_id)),
            });
        }
    }
    // Remainders were appended after later allocs: restore start order (stable).
    traced.sort_by_key(|e| e.start_x);
    let mut warnings = Vec::new();
    if untraced_unmaps > 0 {
        warnings.push(format!(
            "{untraced_unmaps} segment frees/unmaps of memory mapped before the trace"
        ));
    }
    (order(ghosts, before, traced), warnings)
}

pub(super) type Stacked = (Vec<u32>, Vec<u32>, Vec<f32>, Vec<u64>, Vec<String>);

/// One live band during [`sweep_walk`]: its element, exact bottom, bottom at its last piece, size.
#[cfg(test)]
#[derive(Clone, Copy)]
struct LiveBand {
    e: u32,
    y: u64,
    last: u64,
    size: u64,
}

/// Sweeps x once, keeping the live elements in stack order ([`super::bands::LiveBands`]), and
/// calls `piece(e, x, y)` each time an element starts or has dropped by more than its tolerance
/// since its last piece. Fills `total` (live bytes per x). Returns whether [`PIECE_BUDGET`]
/// stopped the drops.
pub(super) fn sweep(
    el: &Elements,
    end_head: &[u32],
    end_next: &[u32],
    total: &mut [u64],
    mut piece: impl FnMut(u32, u32, u64),
) -> bool {
    let mut live = super::bands::LiveBands::default();
    let mut top: u64 = 0;
    let mut next_start = 0usize;
    let mut pieces = 0usize;
    let mut over_budget = false;
    for (x, tot) in total.iter_mut().enumerate() {
        let mut e = end_head.get(x).copied().unwrap_or(u32::MAX);
        while e != u32::MAX {
            let freed = live.remove(e, |be, y| {
                if over_budget {
                    return false;
                }
                piece(be, x as u32, y);
                pieces += 1;
                over_budget = pieces >= PIECE_BUDGET;
                true
            });
            if let Some(size) = freed {
                top = top.saturating_sub(size);
            }
            e = end_next.get(e as usize).copied().unwrap_or(u32::MAX);
        }
        for (s, size) in starts_at(el, &mut next_start, x) {
            piece(s, x as u32, top);
            pieces += 1;
            live.push(s, top, size);
            top = top.saturating_add(size);
        }
        *tot = top;
    }
    over_budget
}

/// The band-by-band sweep that [`sweep`] replaces (every band above a free walked at every
/// free): the reference its pieces are compared with in the tests.
#[cfg(test)]
pub(super) fn sweep_walk(
    el: &Elements,
    end_head: &[u32],
    end_next: &[u32],
    total: &mut [u64],
    mut piece: impl FnMut(u32, u32, u64),
) -> bool {
    let mut live: Vec<LiveBand> = Vec::new();
    let mut top: u64 = 0;
    let mut next_start = 0usize;
    let mut pieces = 0usize;
    let mut over_budget = false;
    for (x, tot) in total.iter_mut().enumerate() {
        let mut e = end_head.get(x).copied().unwrap_or(u32::MAX);
        while e != u32::MAX {
            if let Ok(p) = live.binary_search_by_key(&e, |l| l.e) {
                let size = live.get(p).map(|l| l.size).unwrap_or(0);
                // Slide everything above down, and shift it over the freed band in the same
                // pass (one walk over the memory instead of a walk and a `remove`).
                let tail = live.get_mut(p..).unwrap_or(&mut []);
                for i in 1..tail.len() {
                    let Some(mut l) = tail.get(i).copied() else {
                        break;
                    };
                    l.y = l.y.saturating_sub(size);
                    if l.last - l.y > piece_tolerance(l.y, l.size) && !over_budget {
                        l.last = l.y;
                        piece(l.e, x as u32, l.y);
                        pieces += 1;
                        over_budget = pieces >= PIECE_BUDGET;
                    }
                    if let Some(slot) = tail.get_mut(i - 1) {
                        *slot = l;
                    }
                }
                live.pop();
                top = top.saturating_sub(size);
            }
            e = end_next.get(e as usize).copied().unwrap_or(u32::MAX);
        }
        for (s, size) in starts_at(el, &mut next_start, x) {
            piece(s, x as u32, top);
            pieces += 1;
            live.push(LiveBand {
                e: s,
                y: top,
                last: top,
                size,
            });
            top = top.saturating_add(size);
        }
        *tot = top;
    }
    over_budget
}

/// The elements (id, size) starting at `x` and alive for at least one event, taken from
/// `next` on (elements are in start order).
fn starts_at<'a>(
    el: &'a Elements,
    next: &'a mut usize,
    x: usize,
) -> impl Iterator<Item = (u32, u64)> + 'a {
    std::iter::from_fn(move || {
        while *next < el.len() && el.start_x.get(*next).is_some_and(|&s| s as usize <= x) {
            let s = *next;
            *next += 1;
            if let (Some(&start), Some(&end), Some(&size)) =
                (el.start_x.get(s), el.end_x.get(s), el.size_bytes.get(s))
            {
                if end > start {
                    return Some((s as u32, size));
                }
            }
        }
        None
    })
}

/// Elements ending at each x, as linked lists (`end_head[x]`, then `end_next[e]`).
pub(super) fn end_lists(el: &Elements, xs: usize) -> (Vec<u32>, Vec<u32>) {
    let n_el = el.len();
    let mut end_head = vec![u32::MAX; xs + 1];
    let mut end_next = vec![u32::MAX; n_el];
    for e in (0..n_el).rev() {
        let (Some(&s), Some(&en)) = (el.start_x.get(e), el.end_x.get(e)) else {
            continue;
        };
        let x = en as usize;
        if x < xs && en > s {
            if let (Some(h), Some(n)) = (end_head.get_mut(x), end_next.get_mut(e)) {
                *n = *h;
                *h = e as u32;
            }
        }
    }
    (end_head, end_next)
}

/// Pieces as a sweep finds them (x order), laid out by element afterwards.
struct PieceLog {
    e: Vec<u32>,
    x: Vec<u32>,
    y: Vec<f32>,
}

impl PieceLog {
    fn with_capacity(n: usize) -> Self {
        PieceLog {
            e: Vec::with_capacity(n),
            x: Vec::with_capacity(n),
            y: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, e: u32, x: u32, y: u64) {
        self.e.push(e);
        self.x.push(x);
        self.y.push(y as f32);
    }

    /// A counting sort by element (x order kept within one): `(piece_start, piece_t0, piece_y0)`.
    fn by_element(self, n_el: usize) -> (Vec<u32>, Vec<u32>, Vec<f32>) {
        let mut start = vec![0u32; n_el + 1];
        for &e in &self.e {
            if let Some(c) = start.get_mut(e as usize + 1) {
                *c += 1;
            }
        }
        for i in 0..n_el {
            let prev = start.get(i).copied().unwrap_or(0);
            if let Some(c) = start.get_mut(i + 1) {
                *c += prev;
            }
        }
        let n_pieces = self.e.len();
        let mut fill = start.clone();
        let mut t0 = vec![0u32; n_pieces];
        let mut y0 = vec![0f32; n_pieces];
        for ((&e, &x), &y) in self.e.iter().zip(&self.x).zip(&self.y) {
            if let Some(f) = fill.get_mut(e as usize) {
                let d = *f as usize;
                *f += 1;
                if let (Some(t), Some(v)) = (t0.get_mut(d), y0.get_mut(d)) {
                    *t = x;
                    *v = y;
                }
            }
        }
        (start, t0, y0)
    }
}

/// Sums of live element sizes over element ids: the bytes stacked below an element are the
/// sizes of the live elements with smaller ids. A Fenwick tree over blocks of
/// [`SUM_BLOCK`] ids (small enough to stay in cache) plus each id's own live size, summed
/// within its block when asked.
struct Fenwick {
    blocks: Vec<u64>,
    own: Vec<u64>,
}

/// Ids per leaf of [`Fenwick`]'s tree.
const SUM_BLOCK: usize = 16;

impl Fenwick {
    fn new(n: usize) -> Fenwick {
        Fenwick {
            blocks: vec![0u64; n.div_ceil(SUM_BLOCK) + 1],
            own: vec![0u64; n],
        }
    }
    fn add(&mut self, i: usize, v: u64) {
        if let Some(o) = self.own.get_mut(i) {
            *o = o.wrapping_add(v);
        }
        let mut b = i / SUM_BLOCK + 1;
        while let Some(t) = self.blocks.get_mut(b) {
            *t = t.wrapping_add(v);
            b += b & b.wrapping_neg();
        }
    }
    /// Sum over ids `< i`.
    fn prefix(&self, i: usize) -> u64 {
        let (mut b, mut s) = (i / SUM_BLOCK, 0u64);
        while b > 0 {
            s = s.wrapping_add(self.blocks.get(b).copied().unwrap_or(0));
            b &= b - 1;
        }
        let first = i - i % SUM_BLOCK;
        self.own
            .get(first..i)
            .unwrap_or(&[])
            .iter()
            .fold(s, |a, &v| a.wrapping_add(v))
    }
}

/// The preview's stacking: exact totals, and pieces only for the bands at least
/// 1/[`PREVIEW_HEIGHT_PX`] of the peak, their bottoms sampled at [`PREVIEW_COLUMNS`] evenly spaced
/// x (and exact where they start). Cost: one Fenwick update per event and one query per drawn
/// band per column, instead of a step for every band above every free.
pub(super) fn stack_preview(el: &Elements, n_events: u32) -> Stacked {
    let n_el = el.len();
    let xs = n_events as usize + 1;
    let (end_head, end_next) = end_lists(el, xs);
    let alive =
        |e: usize| matches!((el.start_x.get(e), el.end_x.get(e)), (Some(s), Some(en)) if en > s);
    let size = |e: usize| el.size_bytes.get(e).copied().unwrap_or(0);
    // Exact totals from a difference array.
    let mut total = vec![0u64; xs];
    for e in (0..n_el).filter(|&e| alive(e)) {
        let (s, en) = (el.start_x[e] as usize, el.end_x[e] as usize);
        if let Some(t) = total.get_mut(s) {
            *t = t.wrapping_add(size(e));
        }
        if let Some(t) = total.get_mut(en) {
            *t = t.wrapping_sub(size(e));
        }
    }
    let mut run = 0u64;
    for t in total.iter_mut() {
        run = run.wrapping_add(*t);
        *t = run;
    }
    let peak = total.iter().copied().max().unwrap_or(0);
    let min_size = (peak / PREVIEW_HEIGHT_PX).max(1);
    let drawn = |e: usize| size(e) >= min_size;
    let mut fen = Fenwick::new(n_el);
    let mut rec = PieceLog::with_capacity(n_el.min(1 << 20));
    // Drawn bands alive now: (element, bottom at its last piece); `pos` finds them for removal.
    let mut live: Vec<(u32, u64)> = Vec::new();
    let mut pos = vec![u32::MAX; n_el];
    let columns = PREVIEW_COLUMNS as u64;
    let col_x = |c: u64| (c * xs as u64).div_ceil(columns);
    let (mut next_col, mut next_start) = (1u64, 0usize);
    for x in 0..xs {
        let mut e = end_head.get(x).copied().unwrap_or(u32::MAX);
        while e != u32::MAX {
            let ei = e as usize;
            fen.add(ei, size(ei).wrapping_neg());
            if let Some(p) = pos.get(ei).copied().filter(|&p| p != u32::MAX) {
                live.swap_remove(p as usize);
                if let Some(&(moved, _)) = live.get(p as usize) {
                    pos[moved as usize] = p;
                }
                pos[ei] = u32::MAX;
            }
            e = end_next.get(ei).copied().unwrap_or(u32::MAX);
        }
        let first = next_start;
        while next_start < n_el && el.start_x.get(next_start).is_some_and(|&s| s as usize <= x) {
            if alive(next_start) {
                fen.add(next_start, size(next_start));
            }
            next_start += 1;
        }
        for s in (first..next_start).filter(|&s| alive(s) && drawn(s)) {
            let y = fen.prefix(s);
            rec.push(s as u32, x as u32, y);
            pos[s] = live.len() as u32;
            live.push((s as u32, y));
        }
        let mut sample = false;
        while next_col < columns && col_x(next_col) <= x as u64 {
            next_col += 1;
            sample = true;
        }
        if sample {
            for (e, last) in live.iter_mut() {
                let ei = *e as usize;
                let y = fen.prefix(ei);
                if last.abs_diff(y) > piece_tolerance(y, size(ei)) {
                    *last = y;
                    rec.push(*e, x as u32, y);
                }
            }
        }
    }
    // Bands too thin to draw at full zoom-out get no pieces: no place, no hover, until the
    // exact layout replaces this one.
    let (start, t0, y0) = rec.by_element(n_el);
    (start, t0, y0, total, Vec::new())
}

/// Stacks the elements: one sweep records every piece in x order, then a counting sort by
/// element lays them out. (Two sweeps, one counting and one writing in place, took 1.5× as
/// long once the sweep itself dominated; one sweep into per-element chunk chains was slower
/// still, from the chains' memory traffic.)
pub(super) fn stack(el: &Elements, n_events: u32) -> Stacked {
    let n_el = el.len();
    let xs = n_events as usize + 1;
    let (end_head, end_next) = end_lists(el, xs);
    let mut total = vec![0u64; xs];
    // One sweep records the pieces in x order; a counting sort by element then lays each
    // element's pieces out together (x order kept within an element).
    let mut rec = PieceLog::with_capacity(n_el * 2);
    let over_budget = sweep(el, &end_head, &end_next, &mut total, |e, x, y| {
        rec.push(e, x, y)
    });
    let (start, t0, y0) = rec.by_element(n_el);
    let mut warnings = Vec::new();
    if over_budget {
        warnings.push(format!(
            "the stacked layout needs more than {PIECE_BUDGET} pieces; bands stop sliding down after that point"
        ));
    }
    (start, t0, y0, total, warnings)
}

/// `oom`, `snapshot` and `annotate` events, and `external_annotations` regions.
fn markers(snap: &Snapshot, device: u32) -> (Vec<Marker>, Vec<Region>) {
    let rows = snap.device_rows(device);
    let t = &snap.trace;
    let mut out = Vec::new();
    for (i, r) in rows.clone().enumerate() {
        let Some(&action) = t.action.get(r as usize) else {
            continue;
        };
        let x = i as u32 + 1;
        let size = t.size_bytes.get(r as usize).copied().unwrap_or(0);
        match action {
            Action::Oom => {
                let free = t
                    .device_free(r)
                    .map(|f| format!(", device has {} free", super::axis::format_bytes(f as f64)))
                    .unwrap_or_default();
                out.push(Marker {
                    x,
                    kind: MarkerKind::Oom,
                    label: format!(
                        "OOM at event {i}: requested {}{free}",
                        super::axis::format_bytes(size as f64)
                    ),
                });
            }
            Action::Snapshot => out.push(Marker {
                x,
                kind: MarkerKind::Snapshot,
                label: format!("snapshot at event {i}"),
            }),
            Action::Annotate => {
                let text = t
                    .user_metadata
                    .get(r as usize)
                    .map(|s| snap.str(*s))
                    .unwrap_or("");
                out.push(Marker {
                    x,
                    kind: MarkerKind::Annotate,
                    label: format!("annotate at event {i}: {text}"),
                });
            }
            _ => {}
        }
    }
    // external_annotations are timed in µs: place them between the events around them.
    let times: Vec<i64> = rows
        .clone()
        .map(|r| {
            t.time_us
                .get(r as usize)
                .copied()
                .unwrap_or(crate::model::TIME_NONE)
        })
        .collect();
    let timed = !times.is_empty()
        && times.iter().all(|&v| v != crate::model::TIME_NONE)
        && times.windows(2).all(|w| w[0] <= w[1]);
    let mut regions = Vec::new();
    if timed {
        let x_of = |time_us: i64| times.partition_point(|&v| v <= time_us) as f64;
        let mut open: FxHashMap<u32, Vec<(f64, u32)>> = FxHashMap::default();
        for a in snap
            .external_annotations
            .iter()
            .filter(|a| a.device == device)
        {
            let stage = snap.str(a.stage);
            let x = x_of(a.time_us);
            if stage.eq_ignore_ascii_case("START") {
                open.entry(a.name.0).or_default().push((x, a.name.0));
            } else if let Some((x0, name)) = open.get_mut(&a.name.0).and_then(|v| v.pop()) {
                regions.push(Region {
                    x0,
                    x1: x,
                    label: snap.str(crate::raw::StrId(name)).to_string(),
                });
            }
        }
        regions.sort_by(|a, b| a.x0.total_cmp(&b.x0));
    }
    (out, regions)
}
