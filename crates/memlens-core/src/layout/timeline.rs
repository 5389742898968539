//! The stacked timeline (upstream's Active Memory Timeline and Active Cached Segment Timeline):
//! pairing each alloc with its free by (address, version), then stacking the allocations the
//! way upstream does: an alloc goes on top, a free removes its band and the bands above slide
//! down. The result is pure geometry in data space (x = event, y = bytes), computed once.
//!
//! x coordinates: event `i` of the device's trace happens at `x = i + 1`, so `x ∈ [0, 1)` shows
//! the state before the first event and the whole trace spans `[0, n_events + 1)`. An element
//! is alive on `[start_x, end_x)`.
//!
//! Each element's band is a list of *pieces*: maximal time spans with a constant bottom offset.
//! Upstream stores the same thing as polygon vertices. The piece count is the number of
//! (element, free below it) pairs, which real traces keep near 15× the allocation count; a
//! budget stops pathological inputs (see [`PIECE_BUDGET`]).

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
}

impl Origin {
    pub fn from_u8(v: u8) -> Origin {
        match v {
            1 => Origin::FreedUntraced,
            2 => Origin::Ghost,
            3 => Origin::Remainder,
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

/// Most pieces a layout may hold (≈ 12 bytes each). Past it the layout stops stacking
/// further shifts and says so in [`TimelineLayout::warnings`].
pub const PIECE_BUDGET: usize = 48_000_000;

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
}

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
        ]
        .iter()
        .all(|&l| l == n)
    }
    fn push(&mut self, e: Tmp) {
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
    /// Bottom of the band during the piece, in bytes.
    pub piece_y0: Vec<u64>,
    /// Live bytes on `[x, x + 1)`, for `x` in `0..=n_events`.
    pub total_bytes: Vec<u64>,
    pub markers: Vec<Marker>,
    pub regions: Vec<Region>,
    pub warnings: Vec<String>,
    /// Derived: max `end_x` per chunk of [`CHUNK`] elements (culling).
    chunk_max_end: Vec<u32>,
    /// Derived: bottom-up max tree over `total_bytes` (range maxima for y fitting).
    max_tree: Vec<u64>,
}

/// Elements per culling chunk.
pub const CHUNK: usize = 64;

#[derive(Debug, Clone, Copy)]
struct Tmp {
    size: u64,
    addr: u64,
    version: u32,
    start_x: u32,
    end_x: u32,
    alloc_row: u32,
    free_row: u32,
    stream: u64,
    origin: Origin,
    stack: u32,
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
        let rows = snap.device_rows(device);
        let n_events = rows.len() as u32;
        let (elements, mut warnings) = match kind {
            TimelineKind::Active => pair_active(snap, device),
            TimelineKind::Segments => pair_segments(snap, device),
        };
        let (piece_start, piece_t0, piece_y0, total_bytes, stack_warn) = stack(&elements, n_events);
        warnings.extend(stack_warn);
        let (markers, regions) = markers(snap, device);
        let mut l = TimelineLayout {
            n_events,
            elements,
            piece_start,
            piece_t0,
            piece_y0,
            total_bytes,
            markers,
            regions,
            warnings,
            chunk_max_end: Vec::new(),
            max_tree: Vec::new(),
        };
        l.derive();
        l
    }

    /// Rebuilds a layout from its columns (as shipped from a worker), checking their lengths.
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts(
        n_events: u32,
        elements: Elements,
        piece_start: Vec<u32>,
        piece_t0: Vec<u32>,
        piece_y0: Vec<u64>,
        total_bytes: Vec<u64>,
        markers: Vec<Marker>,
        regions: Vec<Region>,
        warnings: Vec<String>,
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
        let mut l = TimelineLayout {
            n_events,
            elements,
            piece_start,
            piece_t0,
            piece_y0,
            total_bytes,
            markers,
            regions,
            warnings,
            chunk_max_end: Vec::new(),
            max_tree: Vec::new(),
        };
        l.derive();
        Ok(l)
    }

    fn derive(&mut self) {
        self.chunk_max_end = self
            .elements
            .end_x
            .chunks(CHUNK)
            .map(|c| c.iter().copied().max().unwrap_or(0))
            .collect();
        let n = self.total_bytes.len();
        let mut tree = vec![0u64; 2 * n];
        tree[n..].copy_from_slice(&self.total_bytes);
        for i in (1..n).rev() {
            tree[i] = tree[2 * i].max(tree[2 * i + 1]);
        }
        self.max_tree = tree;
    }

    /// Drops the geometry (pieces, totals, culling and max indices) and keeps the element
    /// columns, which are all that stack lookups need: the worker keeps this after shipping
    /// the geometry to the page. [`Self::has_geometry`] tells the two apart.
    pub fn strip_geometry(&mut self) {
        self.piece_start = Vec::new();
        self.piece_t0 = Vec::new();
        self.piece_y0 = Vec::new();
        self.total_bytes = Vec::new();
        self.chunk_max_end = Vec::new();
        self.max_tree = Vec::new();
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
        let (mut l, mut r) = (lo + n, hi + n);
        let mut m = 0u64;
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

    /// Bottom of element `e`'s band at `x` (bytes), if it is alive then.
    pub fn offset_at(&self, e: usize, x: f64) -> Option<u64> {
        let el = &self.elements;
        let (s, en) = (*el.start_x.get(e)? as f64, *el.end_x.get(e)? as f64);
        if x < s || x >= en {
            return None;
        }
        let r = self.pieces_of(e);
        let t0s = self.piece_t0.get(r.clone())?;
        let k = t0s.partition_point(|&t| t as f64 <= x);
        let p = r.start + k.checked_sub(1)?;
        self.piece_y0.get(p).copied()
    }

    /// Elements that may be alive somewhere in `[x0, x1)`: start before `x1`, skipping chunks
    /// that all end before `x0`. Callers still check each element's own end.
    pub(crate) fn candidates(&self, x0: f64, x1: f64) -> impl Iterator<Item = usize> + '_ {
        let el = &self.elements;
        let upto = el.start_x.partition_point(|&s| (s as f64) < x1);
        let chunks = upto.div_ceil(CHUNK);
        (0..chunks)
            .filter(move |&c| {
                self.chunk_max_end
                    .get(c)
                    .map(|&m| m as f64 > x0)
                    .unwrap_or(false)
            })
            .flat_map(move |c| (c * CHUNK)..((c + 1) * CHUNK).min(upto))
            .filter(move |&e| el.end_x.get(e).map(|&en| en as f64 > x0).unwrap_or(false))
    }

    /// The element under (`x`, `y_bytes`), if any.
    pub fn hit(&self, x: f64, y_bytes: f64) -> Option<usize> {
        if y_bytes < 0.0 {
            return None;
        }
        let xe = x.max(0.0);
        for e in self.candidates(xe, xe + f64::EPSILON.max(xe * 1e-12)) {
            if let Some(y0) = self.offset_at(e, xe) {
                let size = *self.elements.size_bytes.get(e)? as f64;
                if y_bytes >= y0 as f64 && y_bytes < y0 as f64 + size {
                    return Some(e);
                }
            }
        }
        None
    }
}

/// Allocations from the shared [`crate::replay`] (alloc paired with `free_completed` by address,
/// frees of allocations made before the trace, active blocks the trace never saw).
fn pair_active(snap: &Snapshot, device: u32) -> (Elements, Vec<String>) {
    let rp = crate::replay::replay_device(snap, device);
    let n = rp.events;
    let (mut traced, mut before, mut ghosts) = (Vec::new(), Vec::new(), Vec::new());
    let mut versions: FxHashMap<u64, u32> = FxHashMap::default();
    for a in &rp.allocations {
        let v = versions.entry(a.addr).or_insert(0);
        let version = *v;
        *v += 1;
        let origin = match a.origin {
            crate::replay::Origin::Traced => Origin::Traced,
            crate::replay::Origin::UnmatchedFree => Origin::FreedUntraced,
            crate::replay::Origin::Untraced => Origin::Ghost,
        };
        let tmp = Tmp {
            size: a.size_bytes,
            addr: a.addr,
            version,
            start_x: a.alloc_event.map(|i| i + 1).unwrap_or(0),
            end_x: a.free_event.map(|i| i + 1).unwrap_or(n + 1),
            alloc_row: a.alloc_event.unwrap_or(NO_ROW),
            free_row: a.free_event.unwrap_or(NO_ROW),
            stream: a.stream,
            origin,
            stack: a.stack.0,
        };
        match origin {
            Origin::Ghost => ghosts.push(tmp),
            Origin::FreedUntraced => before.push(tmp),
            _ => traced.push(tmp),
        }
    }
    let mut warnings = Vec::new();
    if rp.realloc_without_free > 0 {
        warnings.push(format!(
            "{} allocs at an address that was still live (the earlier allocation stays alive to the end, as upstream draws it)",
            rp.realloc_without_free
        ));
    }
    (order(ghosts, before, traced), warnings)
}

/// Longest-lived first at the bottom, then the trace in alloc order.
fn order(ghosts: Vec<Tmp>, mut before: Vec<Tmp>, traced: Vec<Tmp>) -> Elements {
    // Freed last sits lowest, so a free of memory from before the trace moves as little as possible.
    before.sort_by_key(|e| std::cmp::Reverse(e.end_x));
    let mut el = Elements::default();
    for e in ghosts.into_iter().chain(before).chain(traced) {
        el.push(e);
    }
    el
}

/// Segments: `segment_alloc`/`segment_free` paired by address; `segment_map` adds a range and
/// `segment_unmap` removes bytes from whatever mapped ranges it covers (expandable segments).
fn pair_segments(snap: &Snapshot, device: u32) -> (Elements, Vec<String>) {
    let rows = snap.device_rows(device);
    let n = rows.len() as u32;
    let t = &snap.trace;
    let mut traced: Vec<Tmp> = Vec::new();
    let mut before: Vec<Tmp> = Vec::new();
    // Live ranges by start address: (end address, element index in `traced`).
    let mut live: std::collections::BTreeMap<u64, (u64, usize)> = Default::default();
    let mut versions: FxHashMap<u64, u32> = FxHashMap::default();
    let mut untraced_unmaps = 0u64;
    for (i, r) in rows.clone().enumerate() {
        let r = r as usize;
        let (Some(&action), Some(&addr), Some(&size)) =
            (t.action.get(r), t.addr.get(r), t.size_bytes.get(r))
        else {
            continue;
        };
        let i = i as u32;
        let stream = t.stream.get(r).copied().unwrap_or(0);
        let stack = t.stack.get(r).map(|s| s.0).unwrap_or(0);
        let end = addr.saturating_add(size);
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

type Stacked = (Vec<u32>, Vec<u32>, Vec<u64>, Vec<u64>, Vec<String>);

/// Sweeps x once, keeping the live elements in stack order, and records a piece each time an
/// element starts or something below it is freed.
fn stack(el: &Elements, n_events: u32) -> Stacked {
    let n_el = el.len();
    let xs = n_events as usize + 1;
    // Elements ending at each x (at most a few per x).
    let mut end_head = vec![u32::MAX; xs + 1];
    let mut end_next = vec![u32::MAX; n_el];
    for e in (0..n_el).rev() {
        let x = el.end_x[e] as usize;
        if x < xs && el.end_x[e] > el.start_x[e] {
            end_next[e] = end_head[x];
            end_head[x] = e as u32;
        }
    }
    let mut live: Vec<u32> = Vec::new();
    let mut cur_y = vec![0u64; n_el];
    let mut top: u64 = 0;
    let mut pe: Vec<u32> = Vec::with_capacity(n_el * 2);
    let mut pt: Vec<u32> = Vec::with_capacity(n_el * 2);
    let mut py: Vec<u64> = Vec::with_capacity(n_el * 2);
    let mut total = vec![0u64; xs];
    let mut next_start = 0usize;
    let mut over_budget = false;
    for x in 0..xs {
        let mut e = end_head[x];
        while e != u32::MAX {
            let eu = e as usize;
            if let Ok(p) = live.binary_search(&e) {
                let size = el.size_bytes[eu];
                let above = live.len() - p - 1;
                if !over_budget && pt.len() + above > PIECE_BUDGET {
                    over_budget = true;
                }
                for &f in &live[p + 1..] {
                    let fu = f as usize;
                    cur_y[fu] = cur_y[fu].saturating_sub(size);
                    if !over_budget {
                        pe.push(f);
                        pt.push(x as u32);
                        py.push(cur_y[fu]);
                    }
                }
                live.remove(p);
                top = top.saturating_sub(size);
            }
            e = end_next[eu];
        }
        while next_start < n_el && el.start_x[next_start] as usize <= x {
            let s = next_start;
            next_start += 1;
            if el.end_x[s] <= el.start_x[s] {
                continue;
            }
            cur_y[s] = top;
            top = top.saturating_add(el.size_bytes[s]);
            live.push(s as u32);
            pe.push(s as u32);
            pt.push(x as u32);
            py.push(cur_y[s]);
        }
        total[x] = top;
    }
    // Group pieces by element (counting sort keeps time order within an element).
    let mut start = vec![0u32; n_el + 1];
    for &e in &pe {
        start[e as usize + 1] += 1;
    }
    for i in 0..n_el {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut t0 = vec![0u32; pt.len()];
    let mut y0 = vec![0u64; py.len()];
    for k in 0..pe.len() {
        let e = pe[k] as usize;
        let d = fill[e] as usize;
        fill[e] += 1;
        t0[d] = pt[k];
        y0[d] = py[k];
    }
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
