//! Level of detail: turns a [`TimelineLayout`] and a viewport into pixel rectangles, so drawing
//! cost follows the screen, not the data.
//!
//! - elements are culled by time in chunks (see [`TimelineLayout::candidates`]);
//! - within an element, pieces narrower than a pixel are sampled once per pixel column (a band
//!   that slides a thousand times under one column costs one rectangle);
//! - a band only moves down, so pieces that move it by less than half a pixel are drawn as one;
//! - bands thinner than [`THIN_PX`] are not drawn one by one: their heights are summed into a
//!   pixel grid (one row per band, O(1) each through a difference array) and the pixels they
//!   cover well enough ([`THIN_COVER`]) come out as vertical runs, merged across columns, in
//!   one neutral style;
//! - rectangles are batched per [`Style`], one painter call per style.

use super::paint::{Painter, Style, PALETTE_LEN};
use super::timeline::{MarkerKind, Origin, TimelineLayout};

/// Bands thinner than this many pixels are merged into [`Style::Thin`].
pub const THIN_PX: f64 = 1.0;
/// A pixel is drawn as thin memory when the thin bands in it add up to this many pixels.
pub const THIN_COVER: f32 = 0.3;

/// The visible data window and the pixel size it is drawn at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Viewport {
    pub x0: f64,
    pub x1: f64,
    pub y0_bytes: f64,
    pub y1_bytes: f64,
    pub width_px: f64,
    pub height_px: f64,
}

impl Viewport {
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
        Viewport {
            x0,
            x1,
            y0_bytes: 0.0,
            y1_bytes: (max * 1.05).max(1.0),
            width_px,
            height_px,
        }
    }
    pub fn sx(&self) -> f64 {
        self.width_px / (self.x1 - self.x0).max(f64::MIN_POSITIVE)
    }
    pub fn sy(&self) -> f64 {
        self.height_px / (self.y1_bytes - self.y0_bytes).max(f64::MIN_POSITIVE)
    }
    pub fn x_px(&self, x: f64) -> f64 {
        (x - self.x0) * self.sx()
    }
    pub fn y_px(&self, bytes: f64) -> f64 {
        self.height_px - (bytes - self.y0_bytes) * self.sy()
    }
    pub fn x_data(&self, px: f64) -> f64 {
        self.x0 + px / self.sx()
    }
    pub fn y_data(&self, py: f64) -> f64 {
        self.y0_bytes + (self.height_px - py) / self.sy()
    }
}

/// Extra things to draw.
#[derive(Debug, Clone, Copy, Default)]
pub struct RenderOptions<'a> {
    pub selected: Option<usize>,
    /// Elements to outline as search matches (sorted ids).
    pub matches: &'a [u32],
}

/// What a render cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RenderStats {
    pub elements_visited: usize,
    pub rects: usize,
}

const N_BATCH: usize = 2 * PALETTE_LEN as usize + 8;

fn band_batch(origin: Origin, e: usize) -> usize {
    let c = e % PALETTE_LEN as usize;
    if origin.before_trace() {
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
        _ => Style::Selected,
    }
}

const THIN: usize = 2 * PALETTE_LEN as usize;
const REGION: usize = THIN + 1;
const MARK_SNAPSHOT: usize = THIN + 2;
const MARK_ANNOTATE: usize = THIN + 3;
const MARK_OOM: usize = THIN + 4;
const MATCH: usize = THIN + 5;
const SELECTED: usize = THIN + 6;

struct Batches {
    b: Vec<Vec<f32>>,
    thin: ThinRaster,
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

/// Sum of thin-band heights per pixel, kept as per-row difference arrays over columns.
struct ThinRaster {
    w: usize,
    h: usize,
    diff: Vec<f32>,
    any: bool,
}

impl ThinRaster {
    fn new(width_px: f64, height_px: f64) -> Self {
        let w = width_px.clamp(1.0, 16384.0) as usize;
        let h = height_px.clamp(1.0, 16384.0) as usize;
        ThinRaster {
            w,
            h,
            diff: Vec::new(),
            any: false,
        }
    }
    fn add(&mut self, r: [f32; 4]) {
        if !self.any {
            self.diff = vec![0.0; (self.w + 1) * self.h];
            self.any = true;
        }
        let row = (r[1] + r[3] / 2.0).floor();
        if row < 0.0 || row >= self.h as f32 {
            return;
        }
        let c0 = r[0].floor().clamp(0.0, self.w as f32) as usize;
        let c1 = ((r[0] + r[2]).ceil().clamp(0.0, self.w as f32) as usize)
            .max(c0 + 1)
            .min(self.w);
        if c0 >= c1 {
            return;
        }
        let base = row as usize * (self.w + 1);
        if let Some(v) = self.diff.get_mut(base + c0) {
            *v += r[3];
        }
        if let Some(v) = self.diff.get_mut(base + c1) {
            *v -= r[3];
        }
    }
    /// Covered pixels as rectangles: vertical runs per column, merged with identical runs of
    /// the previous columns.
    fn rects(&self, out: &mut Vec<f32>) {
        if !self.any {
            return;
        }
        let (w, h) = (self.w, self.h);
        // Prefix sums along each row give the coverage of every pixel.
        let mut cover = vec![0f32; w * h];
        for row in 0..h {
            let mut acc = 0f32;
            let d = &self.diff[row * (w + 1)..row * (w + 1) + w];
            let c = &mut cover[row * w..row * w + w];
            for (ci, dv) in c.iter_mut().zip(d) {
                acc += dv;
                *ci = acc;
            }
        }
        // Open runs: (top, bottom, first column).
        let mut open: Vec<(usize, usize, usize)> = Vec::new();
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for col in 0..=w {
            runs.clear();
            if col < w {
                let mut row = 0;
                while row < h {
                    if cover[row * w + col] >= THIN_COVER {
                        let top = row;
                        while row < h && cover[row * w + col] >= THIN_COVER {
                            row += 1;
                        }
                        runs.push((top, row));
                    } else {
                        row += 1;
                    }
                }
            }
            open.retain(|&(t, b, c0)| {
                let keep = runs.contains(&(t, b));
                if !keep {
                    out.extend_from_slice(&[
                        c0 as f32,
                        t as f32,
                        (col - c0) as f32,
                        (b - t) as f32,
                    ]);
                }
                keep
            });
            for &(t, b) in &runs {
                if !open.iter().any(|&(ot, ob, _)| ot == t && ob == b) {
                    open.push((t, b, col));
                }
            }
        }
    }
}

impl Batches {
    fn new(vp: &Viewport) -> Self {
        Batches {
            b: (0..N_BATCH).map(|_| Vec::new()).collect(),
            thin: ThinRaster::new(vp.width_px, vp.height_px),
            narrow: NarrowMask::new(vp.width_px, vp.height_px),
        }
    }
    fn push(&mut self, i: usize, r: [f32; 4]) {
        if let Some(v) = self.b.get_mut(i) {
            v.extend_from_slice(&r);
        }
    }
    fn finish(mut self, painter: &mut impl Painter) -> usize {
        let mut thin = Vec::new();
        self.thin.rects(&mut thin);
        if let Some(v) = self.b.get_mut(THIN) {
            *v = thin;
        }
        let mut n = 0;
        // Regions underneath, bands, then lines and outlines on top.
        let order = std::iter::once(REGION).chain(0..THIN).chain([
            THIN,
            MARK_SNAPSHOT,
            MARK_ANNOTATE,
            MARK_OOM,
            MATCH,
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
    for e in layout.candidates(vp.x0, vp.x1) {
        stats.elements_visited += 1;
        let batch = band_batch(
            Origin::from_u8(layout.elements.origin.get(e).copied().unwrap_or(0)),
            e,
        );
        emit_element(layout, vp, e, &mut |r, thin, narrow| {
            if narrow && !thin && out.narrow.covered(r) {
                return;
            }
            if thin {
                out.thin.add(r)
            } else {
                out.push(batch, r)
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
    for &m in opts.matches {
        emit_element(layout, vp, m as usize, &mut |r, _, _| out.push(MATCH, r));
    }
    if let Some(s) = opts.selected {
        emit_element(layout, vp, s, &mut |r, _, _| out.push(SELECTED, r));
    }
    stats.rects = out.finish(painter);
    stats
}

/// Emits the rectangles of one element inside the viewport: `(rect, thin, narrow)`; a narrow
/// rectangle is one pixel column standing for pieces narrower than a pixel.
fn emit_element(
    layout: &TimelineLayout,
    vp: &Viewport,
    e: usize,
    sink: &mut impl FnMut([f32; 4], bool, bool),
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
    let sx = vp.sx();
    let h = size as f64 * vp.sy();
    let thin = h < THIN_PX;
    let range = layout.pieces_of(e);
    let Some(t0s) = layout.piece_t0.get(range.clone()) else {
        return;
    };
    if t0s.is_empty() {
        return;
    }
    let stop = end.min(vp.x1);
    let Some(y0s) = layout.piece_y0.get(range.clone()) else {
        return;
    };
    // A band only ever moves down (things below it are freed, never inserted). Pieces that
    // move it by less than half a pixel are drawn as one rectangle at the first height.
    let half_px_bytes = 0.5 / vp.sy();
    let mut x = start.max(vp.x0);
    let mut k = if start >= vp.x0 {
        0
    } else {
        t0s.partition_point(|&t| t as f64 <= x).saturating_sub(1)
    };
    if (stop - x) * sx < 1.0 {
        // Its whole visible life fits in one pixel column: one rectangle, no piece walk.
        let y0 = y0s.get(k).copied().unwrap_or(0) as f64;
        let col = ((x - vp.x0) * sx).floor();
        sink(
            [col as f32, vp.y_px(y0 + size as f64) as f32, 1.0, h as f32],
            thin,
            true,
        );
        return;
    }
    // Next free pixel column: rounding in `x_data(col + 1)` must never send us back a column.
    let mut col_min = f64::NEG_INFINITY;
    while x < stop && k < t0s.len() {
        let y0_bytes = y0s.get(k).copied().unwrap_or(0);
        let y0 = y0_bytes as f64;
        let rest = y0s.get(k + 1..).unwrap_or(&[]);
        // First later piece at least half a pixel lower (integer compare: this is the hot loop).
        let limit = y0_bytes.saturating_sub(half_px_bytes.ceil() as u64);
        let q = k + 1 + rest.partition_point(|&y| y > limit);
        let run_end = t0s.get(q).map(|&t| t as f64).unwrap_or(end).min(stop);
        let top = vp.y_px(y0 + size as f64);
        let px0 = (x - vp.x0) * sx;
        let px1 = (run_end - vp.x0) * sx;
        if px1 - px0 >= 1.0 {
            sink(
                [px0 as f32, top as f32, (px1 - px0) as f32, h as f32],
                thin,
                false,
            );
            x = run_end;
            col_min = px1.floor();
            k = q;
        } else {
            // Narrower than a pixel: one rectangle for this column, then jump to the next one.
            let col = px0.floor().max(col_min);
            col_min = col + 1.0;
            sink([col as f32, top as f32, 1.0, h as f32], thin, true);
            let next_x = vp.x0 + (col + 1.0) / sx;
            if next_x >= stop {
                break;
            }
            x = next_x;
            k = t0s.partition_point(|&t| t as f64 <= x).saturating_sub(1);
        }
    }
}

/// The overview strip (minimap): the highest live total per pixel column over the whole trace.
pub fn render_overview(
    layout: &TimelineLayout,
    width_px: f64,
    height_px: f64,
    painter: &mut impl Painter,
) {
    let x_end = layout.x_end() as f64;
    let max = layout.max_total(0.0, x_end).max(1) as f64;
    let cols = width_px.max(1.0).floor() as usize;
    let mut v = Vec::with_capacity(cols * 4);
    for c in 0..cols {
        let a = x_end * c as f64 / cols as f64;
        let b = x_end * (c + 1) as f64 / cols as f64;
        let m = layout.max_total(a, b) as f64;
        let h = m / max * height_px;
        if h > 0.0 {
            v.extend_from_slice(&[c as f32, (height_px - h) as f32, 1.0, h as f32]);
        }
    }
    painter.rects(Style::Overview, &v);
}
