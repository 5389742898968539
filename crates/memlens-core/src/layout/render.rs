//! Level of detail: turns a [`TimelineLayout`] and a viewport into pixel rectangles, so drawing
//! cost follows the screen, not the data.
//!
//! - an underlay fills each pixel column up to the highest live total in it ([`Style::Thin`]):
//!   that is every band merged, and all that is left of the bands thinner or shorter-lived than
//!   a pixel, which are not drawn one by one;
//! - bands at least [`THIN_PX`] tall and [`MIN_WIDTH_PX`] wide (or [`BIG_PX`] tall, however
//!   short-lived: a spike stays coloured) are drawn on top; they come from the layout's
//!   level-of-detail index ([`TimelineLayout::visible`]), so the short-lived and the thin are
//!   never visited;
//! - within a band, pieces narrower than a pixel are sampled once per pixel column, and pieces
//!   that move it by less than half a pixel are drawn as one;
//! - search matches: drawn bands that match are outlined, and a rug along the top marks every
//!   column where a match is alive (matches too small to draw at this zoom included);
//! - rectangles are batched per [`Style`], one painter call per style.
//!
//! The x axis is event index or wall-clock time ([`Viewport::with_time`]); the layout stays in
//! event space and only the viewport's mapping changes.

use super::axis::{count_ticks, time_ticks};
use super::paint::{Painter, Style, CATEGORICAL_LEN, PALETTE_LEN};
use super::search::Matches;
use super::timeline::Elements;
use super::timeline::{ElementKind, MarkerKind, TimelineLayout};
use std::sync::Arc;

/// Bands thinner than this many pixels are left to the underlay.
pub const THIN_PX: f64 = 1.0;
/// Bands living for less than this many pixels are left to the underlay...
pub const MIN_WIDTH_PX: f64 = 3.0;
/// ...unless they are at least this tall.
pub const BIG_PX: f64 = 4.0;
/// Height of the search-match rug, in pixels.
pub const RUG_PX: f32 = 4.0;

/// Maps event-space x (`x = event index + 1`) to wall-clock time, for the time axis.
///
/// `u(x)` is µs since the first event: event `i` sits at its `time_us`, positions between
/// events are interpolated, and the memory from before the trace (`x ∈ [0, 1)`) and the end
/// (`[n, n + 1)`) each get one average event spacing.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeMap {
    /// `u` at integer x, for `x` in `0..=n_events + 1`.
    u: Vec<f64>,
    pad_us: f64,
    first_time_us: i64,
}

impl TimeMap {
    /// From the layout's per-event times (non-decreasing); `None` without times.
    pub fn new(time_us: &[i64]) -> Option<TimeMap> {
        let (&first, &last) = (time_us.first()?, time_us.last()?);
        let span = (last.saturating_sub(first)) as f64;
        let pad_us = (span / time_us.len() as f64).max(1.0);
        let mut u = Vec::with_capacity(time_us.len() + 2);
        u.push(-pad_us);
        let mut prev = 0.0f64;
        for &t in time_us {
            prev = prev.max(t.saturating_sub(first) as f64);
            u.push(prev);
        }
        u.push(prev + pad_us);
        Some(TimeMap {
            u,
            pad_us,
            first_time_us: first,
        })
    }

    /// `time_us` of the first event (the origin of the axis).
    pub fn first_time_us(&self) -> i64 {
        self.first_time_us
    }

    /// µs since the first event at event-space `x`.
    pub fn u(&self, x: f64) -> f64 {
        let n = self.u.len().saturating_sub(1);
        let first = self.u.first().copied().unwrap_or(0.0);
        let last = self.u.last().copied().unwrap_or(0.0);
        if x.is_nan() || x <= 0.0 {
            return first + x * self.pad_us;
        }
        if x >= n as f64 {
            return last + (x - n as f64) * self.pad_us;
        }
        let i = x as usize;
        let f = x - i as f64;
        match (self.u.get(i), self.u.get(i + 1)) {
            (Some(&a), Some(&b)) => a + (b - a) * f,
            _ => last,
        }
    }

    /// Event-space x at `u` µs: the smallest x with `u(x) ≥ u` (inverse of [`Self::u`]).
    pub fn x(&self, u: f64) -> f64 {
        let n = self.u.len().saturating_sub(1);
        let first = self.u.first().copied().unwrap_or(0.0);
        let last = self.u.last().copied().unwrap_or(0.0);
        if u.is_nan() || u <= first {
            return (u - first) / self.pad_us;
        }
        if u > last {
            return n as f64 + (u - last) / self.pad_us;
        }
        let i = self.u.partition_point(|&v| v < u).max(1);
        match (self.u.get(i - 1), self.u.get(i)) {
            (Some(&a), Some(&b)) if b > a => (i - 1) as f64 + (u - a) / (b - a),
            _ => i as f64,
        }
    }
}

/// The visible data window and the pixel size it is drawn at. `x0`/`x1` are always event-space
/// (what the URL holds); the mapping to pixels is linear in events, or in time.
#[derive(Debug, Clone)]
pub struct Viewport {
    pub x0: f64,
    pub x1: f64,
    pub y0_bytes: f64,
    pub y1_bytes: f64,
    pub width_px: f64,
    pub height_px: f64,
    time: Option<Arc<TimeMap>>,
    /// `u(x0)` and pixels per unit of u (events or µs).
    u0: f64,
    su: f64,
}

impl PartialEq for Viewport {
    fn eq(&self, o: &Self) -> bool {
        let same_map = match (&self.time, &o.time) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        same_map
            && (
                self.x0,
                self.x1,
                self.y0_bytes,
                self.y1_bytes,
                self.width_px,
                self.height_px,
            ) == (o.x0, o.x1, o.y0_bytes, o.y1_bytes, o.width_px, o.height_px)
    }
}

impl Viewport {
    /// `[x0, x1)` × `[y0_bytes, y1_bytes)` drawn on `width_px` × `height_px`, x linear in events.
    pub fn new(
        x0: f64,
        x1: f64,
        y0_bytes: f64,
        y1_bytes: f64,
        width_px: f64,
        height_px: f64,
    ) -> Viewport {
        let mut v = Viewport {
            x0,
            x1,
            y0_bytes,
            y1_bytes,
            width_px,
            height_px,
            time: None,
            u0: 0.0,
            su: 1.0,
        };
        v.remap();
        v
    }

    /// `[x0, x1)` at the given size, with y from 0 to a little above the highest total there.
    pub fn fit(
        layout: &TimelineLayout,
        x0: f64,
        x1: f64,
        width_px: f64,
        height_px: f64,
    ) -> Viewport {
        let x1 = if x1 > x0 { x1 } else { x0 + 1.0 };
        let max = layout.max_total(x0, x1) as f64;
        Viewport::new(x0, x1, 0.0, (max * 1.05).max(1.0), width_px, height_px)
    }

    /// The same window with x linear in wall-clock time (or in events again, with `None`).
    pub fn with_time(mut self, time: Option<Arc<TimeMap>>) -> Viewport {
        self.time = time;
        self.remap();
        self
    }

    fn remap(&mut self) {
        self.u0 = self.u(self.x0);
        let du = self.u(self.x1) - self.u0;
        self.su = self.width_px / du.max(f64::MIN_POSITIVE);
    }

    /// The time mapping, if the x axis is wall-clock time.
    pub fn time(&self) -> Option<&Arc<TimeMap>> {
        self.time.as_ref()
    }

    /// Axis units at event-space `x`: the event-space x itself, or µs since the first event.
    pub fn u(&self, x: f64) -> f64 {
        match &self.time {
            Some(t) => t.u(x),
            None => x,
        }
    }

    /// Event-space x at axis units `u`.
    pub fn x_of_u(&self, u: f64) -> f64 {
        match &self.time {
            Some(t) => t.x(u),
            None => u,
        }
    }

    /// Axis units shown: `u(x0)..u(x1)`.
    pub fn u_range(&self) -> (f64, f64) {
        (self.u0, self.u0 + self.width_px / self.su)
    }

    /// The x axis labels at about one per 90 px (110 px for clock times): trace event indices
    /// (event i sits at x = i + 1) or time since the first event, each with its x in plot pixels.
    /// The canvas and the SVG export draw the same ticks.
    pub fn x_ticks(&self) -> Vec<(f64, String)> {
        let pw = self.width_px;
        match self.time() {
            None => count_ticks(
                (self.x0 - 1.0).max(0.0),
                self.x1 - 1.0,
                (pw / 90.0).max(2.0) as usize,
            )
            .into_iter()
            .map(|t| (self.x_px(t.value + 1.0), t.label))
            .collect(),
            Some(_) => {
                let (u0, u1) = self.u_range();
                let k = pw / (u1 - u0).max(f64::MIN_POSITIVE);
                time_ticks(u0, u1, (pw / 110.0).max(2.0) as usize)
                    .into_iter()
                    .map(|t| ((t.value - u0) * k, t.label))
                    .collect()
            }
        }
    }

    /// Events per pixel when x is linear in events (`None` on the time axis, where it varies).
    pub fn events_per_px(&self) -> Option<f64> {
        match self.time {
            None => Some(1.0 / self.su),
            Some(_) => None,
        }
    }

    pub fn sy(&self) -> f64 {
        self.height_px / (self.y1_bytes - self.y0_bytes).max(f64::MIN_POSITIVE)
    }
    pub fn x_px(&self, x: f64) -> f64 {
        (self.u(x) - self.u0) * self.su
    }
    pub fn y_px(&self, bytes: f64) -> f64 {
        self.height_px - (bytes - self.y0_bytes) * self.sy()
    }
    pub fn x_data(&self, px: f64) -> f64 {
        self.x_of_u(self.u0 + px / self.su)
    }
    pub fn y_data(&self, py: f64) -> f64 {
        self.y0_bytes + (self.height_px - py) / self.sy()
    }
}

/// Extra things to draw.
#[derive(Debug, Clone, Copy, Default)]
pub struct RenderOptions<'a> {
    pub selected: Option<usize>,
    /// Search matches to outline, and to mark on the rug.
    pub matches: Option<&'a Matches>,
    /// A palette index per element (`crate::colour`); `None`: element number mod
    /// [`CATEGORICAL_LEN`], as upstream.
    pub colours: Option<&'a [u8]>,
    /// Bands not drawn (their bytes stay in the grey underlay, so the stack keeps its shape).
    pub filter: BandFilter,
}

/// Which bands are left out of the drawing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BandFilter {
    /// Allocated before the trace (pale bands).
    pub hide_before_trace: bool,
    /// Never freed in the trace.
    pub hide_never_freed: bool,
    /// Smaller than this.
    pub min_size_bytes: u64,
}

impl BandFilter {
    pub fn is_empty(&self) -> bool {
        *self == BandFilter::default()
    }
    /// Whether element `e` is left out (a private pool's envelope never is).
    pub fn hides(&self, el: &Elements, e: usize) -> bool {
        let kind = el.kind.get(e).copied().unwrap_or(ElementKind::TRACED);
        if kind == ElementKind::PoolEnvelope {
            return false;
        }
        (self.hide_before_trace && kind.before_trace())
            || (self.hide_never_freed && el.free_row.get(e).is_none())
            || el.size_bytes.get(e).copied().unwrap_or(0) < self.min_size_bytes
    }
}

/// What a render cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RenderStats {
    /// Bands drawn one by one.
    pub elements_visited: usize,
    pub rects: usize,
}

const N_BATCH: usize = 2 * PALETTE_LEN as usize + 10;

fn band_batch(kind: ElementKind, e: usize, colours: Option<&[u8]>) -> usize {
    let c = match colours.and_then(|c| c.get(e)) {
        Some(&c) => c as usize % PALETTE_LEN as usize,
        None => e % CATEGORICAL_LEN as usize,
    };
    if kind == ElementKind::PoolEnvelope {
        POOL
    } else if kind.before_trace() {
        PALETTE_LEN as usize + c
    } else {
        c
    }
}

fn batch_style(i: usize) -> Style {
    let p = PALETTE_LEN as usize;
    match i {
        i if i < p => Style::Band(i as u8),
        i if i < 2 * p => Style::BandBeforeTrace((i - p) as u8),
        i if i == 2 * p => Style::Thin,
        i if i == 2 * p + 1 => Style::Region,
        i if i == 2 * p + 2 => Style::MarkerSnapshot,
        i if i == 2 * p + 3 => Style::MarkerAnnotate,
        i if i == 2 * p + 4 => Style::MarkerOom,
        i if i == 2 * p + 5 => Style::Match,
        i if i == 2 * p + 6 => Style::MatchRug,
        i if i == 2 * p + 8 => Style::PoolEnvelope,
        _ => Style::Selected,
    }
}

const THIN: usize = 2 * PALETTE_LEN as usize;
const REGION: usize = THIN + 1;
const MARK_SNAPSHOT: usize = THIN + 2;
const MARK_ANNOTATE: usize = THIN + 3;
const MARK_OOM: usize = THIN + 4;
const MATCH: usize = THIN + 5;
const MATCH_RUG: usize = THIN + 6;
const SELECTED: usize = THIN + 7;
const POOL: usize = THIN + 8;

struct Batches {
    b: Vec<Vec<f32>>,
    narrow: NarrowMask,
}

/// Pixels already painted by one-column (narrow) rectangles, one bit per pixel: a narrow
/// rectangle whose pixels are all painted already is skipped. Short-lived allocations churning
/// at the top of the stack put hundreds of them in one column; the screen shows one.
struct NarrowMask {
    h: usize,
    words: usize,
    bits: Vec<u64>,
}

impl NarrowMask {
    fn new(width_px: f64, height_px: f64) -> Self {
        let w = width_px.clamp(1.0, 16384.0) as usize + 1;
        let h = height_px.clamp(1.0, 16384.0) as usize;
        let words = h.div_ceil(64);
        NarrowMask {
            h,
            words,
            bits: vec![0; w * words],
        }
    }
    /// Whether `r` (one column wide) is already fully painted; marks it painted if not.
    fn covered(&mut self, r: [f32; 4]) -> bool {
        let col = r[0].max(0.0) as usize;
        let r0 = r[1].max(0.0).floor() as usize;
        let r1 = ((r[1] + r[3]).ceil().max(0.0) as usize).min(self.h);
        if r0 >= r1 {
            return true;
        }
        let base = col * self.words;
        let Some(col_bits) = self.bits.get_mut(base..base + self.words) else {
            return false;
        };
        let mut all = true;
        for row in r0..r1 {
            let (w, b) = (row / 64, 1u64 << (row % 64));
            if let Some(word) = col_bits.get_mut(w) {
                if *word & b == 0 {
                    all = false;
                    *word |= b;
                }
            }
        }
        all
    }
}

impl Batches {
    fn new(vp: &Viewport) -> Self {
        Batches {
            b: (0..N_BATCH).map(|_| Vec::new()).collect(),
            narrow: NarrowMask::new(vp.width_px, vp.height_px),
        }
    }
    fn push(&mut self, i: usize, r: [f32; 4]) {
        if let Some(v) = self.b.get_mut(i) {
            v.extend_from_slice(&r);
        }
    }
    fn finish(self, painter: &mut impl Painter) -> usize {
        let mut n = 0;
        // Regions, the underlay, pool envelopes, bands, then lines and outlines on top.
        let order = [REGION, THIN, POOL].into_iter().chain(0..THIN).chain([
            MARK_SNAPSHOT,
            MARK_ANNOTATE,
            MARK_OOM,
            MATCH,
            MATCH_RUG,
            SELECTED,
        ]);
        for i in order {
            if let Some(v) = self.b.get(i) {
                if !v.is_empty() {
                    n += v.len() / 4;
                    painter.rects(batch_style(i), v);
                }
            }
        }
        n
    }
}

/// Pixel columns of the plot, each with its event-space range.
pub(super) fn columns(vp: &Viewport) -> impl Iterator<Item = (usize, f64, f64)> + '_ {
    let w = vp.width_px.clamp(0.0, 16384.0).ceil() as usize;
    let mut a = vp.x_data(0.0);
    (0..w).map(move |c| {
        let b = vp.x_data(c as f64 + 1.0);
        let r = (c, a, b);
        a = b;
        r
    })
}

/// Highest live total in a column: the total at its middle when it is narrower than an event.
pub(super) fn column_top(layout: &TimelineLayout, a: f64, b: f64) -> u64 {
    if b - a < 1.0 {
        layout.total_at(((a + b) / 2.0).floor())
    } else {
        layout.max_total(a, b)
    }
}

/// Every column filled up to its highest live total, equal neighbours merged.
fn underlay(layout: &TimelineLayout, vp: &Viewport, out: &mut Batches) {
    let mut run: Option<(usize, u64)> = None;
    let flush = |run: Option<(usize, u64)>, end: usize, out: &mut Batches| {
        if let Some((c0, top)) = run {
            if top > 0 {
                let y = vp.y_px(top as f64).max(0.0);
                out.push(
                    THIN,
                    [
                        c0 as f32,
                        y as f32,
                        (end - c0) as f32,
                        (vp.height_px - y) as f32,
                    ],
                );
            }
        }
    };
    let mut last = 0;
    for (c, a, b) in columns(vp) {
        let top = column_top(layout, a, b);
        match run {
            Some((_, t)) if t == top => {}
            _ => {
                flush(run, c, out);
                run = Some((c, top));
            }
        }
        last = c + 1;
    }
    flush(run, last, out);
}

/// The rug: columns where a match is alive, merged.
fn rug(matches: &Matches, vp: &Viewport, out: &mut Batches) {
    let mut open: Option<usize> = None;
    let mut last = 0;
    for (c, a, b) in columns(vp) {
        let on = matches.any_alive(a, b.max(a + f64::EPSILON));
        match (on, open) {
            (true, None) => open = Some(c),
            (false, Some(c0)) => {
                out.push(MATCH_RUG, [c0 as f32, 0.0, (c - c0) as f32, RUG_PX]);
                open = None;
            }
            _ => {}
        }
        last = c + 1;
    }
    if let Some(c0) = open {
        out.push(MATCH_RUG, [c0 as f32, 0.0, (last - c0) as f32, RUG_PX]);
    }
}

/// Draws the bands of `layout` visible in `vp`, plus markers, regions and outlines.
pub fn render_timeline(
    layout: &TimelineLayout,
    vp: &Viewport,
    opts: RenderOptions<'_>,
    painter: &mut impl Painter,
) -> RenderStats {
    let mut out = Batches::new(vp);
    let mut stats = RenderStats::default();
    let h_px = vp.height_px as f32;
    for r in &layout.regions {
        if r.x1 > vp.x0 && r.x0 < vp.x1 {
            let a = vp.x_px(r.x0.max(vp.x0));
            let b = vp.x_px(r.x1.min(vp.x1));
            out.push(REGION, [a as f32, 0.0, (b - a).max(1.0) as f32, h_px]);
        }
    }
    underlay(layout, vp, &mut out);
    let sy = vp.sy();
    let thin_bytes = THIN_PX / sy;
    let big_bytes = BIG_PX / sy;
    // Lifetimes (events) under which a class cannot reach MIN_WIDTH_PX; none on the time axis.
    let min_len = vp.events_per_px().map(|e| e * MIN_WIDTH_PX).unwrap_or(0.0);
    let monotone = layout.is_monotone();
    let keep = move |s: usize, k: usize| {
        let max_size = 2f64.powi(s as i32 + 1);
        let max_len = 2f64.powi(k as i32 + 1);
        max_size > thin_bytes && (max_size > big_bytes || max_len > min_len)
    };
    let el = &layout.elements;
    for e in layout.visible(vp.x0, vp.x1, keep) {
        let (Some(&size), Some(&start), Some(&end)) =
            (el.size_bytes.get(e), el.start_x.get(e), el.end_x.get(e))
        else {
            continue;
        };
        let size = size as f64;
        if size < thin_bytes
            || (size < big_bytes && vp.x_px(end as f64) - vp.x_px(start as f64) < MIN_WIDTH_PX)
        {
            continue;
        }
        if opts.filter.hides(el, e) {
            continue;
        }
        stats.elements_visited += 1;
        let kind = el.kind.get(e).copied().unwrap_or(ElementKind::TRACED);
        let batch = band_batch(kind, e, opts.colours);
        let matched = opts.matches.is_some_and(|m| m.contains(e));
        emit_element(layout, vp, e, monotone, &mut |r, narrow| {
            if narrow && out.narrow.covered(r) {
                return;
            }
            out.push(batch, r);
            if matched {
                out.push(MATCH, r);
            }
        });
    }
    for m in &layout.markers {
        let x = m.x as f64;
        if x >= vp.x0 && x < vp.x1 {
            let b = match m.kind {
                MarkerKind::Oom => MARK_OOM,
                MarkerKind::Snapshot => MARK_SNAPSHOT,
                MarkerKind::Annotate => MARK_ANNOTATE,
            };
            out.push(b, [vp.x_px(x).floor() as f32, 0.0, 1.0, h_px]);
        }
    }
    if let Some(m) = opts.matches {
        if m.count() > 0 {
            rug(m, vp, &mut out);
        }
    }
    if let Some(s) = opts.selected {
        emit_element(layout, vp, s, monotone, &mut |r, _| out.push(SELECTED, r));
    }
    stats.rects = out.finish(painter);
    stats
}

/// First index after `from` where `pred` stops holding (`pred` true from `from` on, then
/// false): an exponential probe then a bisection, so the memory touched stays near `from`
/// (pieces are walked left to right, and most answers are a few pieces away).
fn gallop<T>(v: &[T], from: usize, pred: impl Fn(&T) -> bool) -> usize {
    let mut lo = from;
    let mut step = 1;
    loop {
        let probe = lo + step;
        match v.get(probe) {
            Some(x) if pred(x) => {
                lo = probe;
                step *= 2;
            }
            _ => {
                let hi = probe.min(v.len());
                let a = (lo + 1).min(hi);
                return a + v.get(a..hi).map(|s| s.partition_point(&pred)).unwrap_or(0);
            }
        }
    }
}

/// Emits the rectangles of one element inside the viewport: `(rect, narrow)`; a narrow
/// rectangle is one pixel column standing for pieces narrower than a pixel.
fn emit_element(
    layout: &TimelineLayout,
    vp: &Viewport,
    e: usize,
    monotone: bool,
    sink: &mut impl FnMut([f32; 4], bool),
) {
    let el = &layout.elements;
    let (Some(&size), Some(&start), Some(&end)) =
        (el.size_bytes.get(e), el.start_x.get(e), el.end_x.get(e))
    else {
        return;
    };
    let (start, end) = (start as f64, end as f64);
    if end <= vp.x0 || start >= vp.x1 || end <= start {
        return;
    }
    let size = size as f64;
    let h = (size * vp.sy()) as f32;
    let range = layout.pieces_of(e);
    let (Some(t0s), Some(y0s)) = (
        layout.piece_t0.get(range.clone()),
        layout.piece_y0.get(range.clone()),
    ) else {
        return;
    };
    if t0s.is_empty() {
        return;
    }
    let stop = end.min(vp.x1);
    let half_px_bytes = 0.5 / vp.sy();
    let mut x = start.max(vp.x0);
    let piece_at = |x: f64| t0s.partition_point(|&t| t as f64 <= x).saturating_sub(1);
    let mut k = if start >= vp.x0 { 0 } else { piece_at(x) };
    let top_px = |k: usize| vp.y_px(y0s.get(k).copied().unwrap_or(0.0) as f64 + size) as f32;
    let px_stop = vp.x_px(stop);
    if px_stop - vp.x_px(x) < 1.0 {
        // Its whole visible life fits in one pixel column: one rectangle, no piece walk.
        let col = vp.x_px(x).floor();
        sink([col as f32, top_px(k), 1.0, h], true);
        return;
    }
    // Next free pixel column: rounding in `x_data(col + 1)` must never send us back a column.
    let mut col_min = f64::NEG_INFINITY;
    while x < stop && k < t0s.len() {
        let y0 = y0s.get(k).copied().unwrap_or(0.0) as f64;
        // First later piece at least half a pixel away.
        let q = if monotone {
            let limit = y0 - half_px_bytes;
            gallop(y0s, k, |&y| y as f64 > limit)
        } else {
            k + 1
                + y0s
                    .get(k + 1..)
                    .unwrap_or(&[])
                    .iter()
                    .position(|&y| (y as f64 - y0).abs() >= half_px_bytes)
                    .unwrap_or(y0s.len() - k - 1)
        };
        let run_end = t0s.get(q).map(|&t| t as f64).unwrap_or(end).min(stop);
        let top = top_px(k);
        let px0 = vp.x_px(x);
        let px1 = vp.x_px(run_end);
        if px1 - px0 >= 1.0 {
            sink([px0 as f32, top, (px1 - px0) as f32, h], false);
            x = run_end;
            col_min = px1.floor();
            k = q;
        } else {
            // Narrower than a pixel: one rectangle for this column, then jump to the next one.
            let col = px0.floor().max(col_min);
            col_min = col + 1.0;
            sink([col as f32, top, 1.0, h], true);
            let next_x = vp.x_data(col + 1.0);
            if next_x >= stop || next_x <= x {
                break;
            }
            x = next_x;
            // The piece at x: at or after k, usually close by.
            k = gallop(t0s, k, |&t| t as f64 <= x) - 1;
        }
    }
}

/// The overview strip (minimap): the highest live total per pixel column over the whole trace.
/// `full` spans the whole trace (`0..x_end`) at the strip's size.
pub fn render_overview(layout: &TimelineLayout, full: &Viewport, painter: &mut impl Painter) {
    let max = layout.max_total(0.0, layout.x_end() as f64).max(1) as f64;
    let h_px = full.height_px;
    let mut v = Vec::new();
    for (c, a, b) in columns(full) {
        let m = column_top(layout, a, b) as f64;
        let h = m / max * h_px;
        if h > 0.0 {
            v.extend_from_slice(&[c as f32, (h_px - h) as f32, 1.0, h as f32]);
        }
    }
    painter.rects(Style::Overview, &v);
}
