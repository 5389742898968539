//! The Allocator State History's segment map: where each segment and block of one state goes
//! (a pure placement in "map pixels", hit-testable), and its drawing on a canvas.
//!
//! Segments are grouped by (pool, stream): the default pool first, then private pools, then
//! segments whose pool is unknown. Inside a group they are packed into rows of a fixed number
//! of bytes (a power of two, chosen so the device's peak reserved memory fits the canvas), the
//! largest first as upstream does; a segment longer than a row wraps over several rows, so
//! every byte gets the same area. Blocks are drawn inside their segment: allocated blocks in a
//! colour per allocation, pending-free blocks red, the rounding waste at the end of each block
//! light red, free blocks (holes) white.

use crate::wire::history::StateFrame;
use memlens_core::layout::axis::format_bytes;
use memlens_core::model::BlockState;
use web_sys::HtmlCanvasElement;

/// Space above each group for its header, below each row, and around the map (CSS pixels).
pub const HEADER_H: f64 = 18.0;
pub const ROW_H: f64 = 16.0;
pub const ROW_GAP: f64 = 3.0;
pub const PAD: f64 = 8.0;
pub const GROUP_GAP: f64 = 6.0;

/// Allocation colours: upstream's tableau10 without its reds and pink (red marks pending frees
/// and rounding waste here).
pub const BLOCK_COLOURS: [&str; 8] = [
    "#4e79a7", "#f28e2c", "#76b7b2", "#59a14f", "#edc949", "#af7aa1", "#9c755f", "#bab0ab",
];
pub const PENDING_COLOUR: &str = "#d62728";
pub const WASTE_COLOUR: &str = "#ff9896";

/// One row-slice of a segment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Piece {
    pub seg: u32,
    pub y: f64,
    pub x0: f64,
    pub x1: f64,
    /// Offset in the segment of the slice's first byte.
    pub byte0: u64,
    pub bytes: u64,
}

/// A (pool, stream) group's header.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub y: f64,
    pub label: String,
}

/// Where everything of one state goes, in map pixels (before zoom and pan).
#[derive(Debug, Clone, PartialEq)]
pub struct MapGeometry {
    pub bytes_per_row: u64,
    pub width_px: f64,
    pub height_px: f64,
    pub groups: Vec<Group>,
    /// Sorted by (y, x0).
    pub pieces: Vec<Piece>,
}

fn pool_label(pool: Option<(i64, i64)>) -> String {
    match pool {
        Some((0, 0)) => "default pool".to_string(),
        Some((a, b)) => format!("private pool ({a}, {b})"),
        None => "pool unknown".to_string(),
    }
}

/// A segment's group: (pool rank, pool id, stream).
type GroupKey = (u8, (i64, i64), u64);

/// Segment order: groups by (pool, stream) with the default pool first and unknown pools
/// last, then the largest segment first, then by address.
fn segment_order(f: &StateFrame) -> Vec<(usize, GroupKey)> {
    let mut order: Vec<(usize, GroupKey)> = (0..f.segments())
        .map(|k| {
            let pool = f.columns.segment_pool_id.get(k).copied().flatten();
            let rank = match pool {
                Some((0, 0)) => 0u8,
                Some(_) => 1,
                None => 2,
            };
            let stream = f.columns.segment_stream.get(k).copied().unwrap_or(0);
            (k, (rank, pool.unwrap_or((0, 0)), stream))
        })
        .collect();
    order.sort_by(|(a, ga), (b, gb)| {
        ga.cmp(gb)
            .then_with(|| {
                let sa = f.columns.segment_size_bytes.get(*a).copied().unwrap_or(0);
                let sb = f.columns.segment_size_bytes.get(*b).copied().unwrap_or(0);
                sb.cmp(&sa)
            })
            .then_with(|| a.cmp(b))
    });
    order
}

/// Places the state's segments into rows of `bytes_per_row` bytes, `width_px` wide.
pub fn place(f: &StateFrame, bytes_per_row: u64, width_px: f64) -> MapGeometry {
    let bpr = bytes_per_row.max(1);
    let px_per_byte = width_px / bpr as f64;
    let gap = (bpr / 128).max(1);
    let mut groups = Vec::new();
    let mut pieces = Vec::new();
    let mut y = PAD;
    let order = segment_order(f);
    let mut i = 0;
    while i < order.len() {
        let Some(&(_, g)) = order.get(i) else { break };
        let members: Vec<usize> = order
            .iter()
            .skip(i)
            .take_while(|(_, x)| *x == g)
            .map(|(k, _)| *k)
            .collect();
        i += members.len();
        let reserved: u64 = members
            .iter()
            .map(|&k| f.columns.segment_size_bytes.get(k).copied().unwrap_or(0))
            .sum();
        let free: u64 = members
            .iter()
            .flat_map(|&k| f.blocks_of(k))
            .filter(|&b| f.block_state(b) == BlockState::Inactive)
            .map(|b| f.columns.block_size_bytes.get(b).copied().unwrap_or(0))
            .sum();
        let pool = (g.0 != 2).then_some(g.1);
        groups.push(Group {
            y,
            label: format!(
                "{} · stream {} · {} segment{} · {} reserved, {} free",
                pool_label(pool),
                g.2,
                members.len(),
                if members.len() == 1 { "" } else { "s" },
                format_bytes(reserved as f64),
                format_bytes(free as f64)
            ),
        });
        y += HEADER_H;
        let (mut row, mut off) = (0u64, 0u64);
        let mut rows_used = 0u64;
        for &k in &members {
            let size = f.columns.segment_size_bytes.get(k).copied().unwrap_or(0);
            if off > 0 && (off + size > bpr) {
                row += 1;
                off = 0;
            }
            let mut left = size;
            let mut byte0 = 0u64;
            loop {
                let take = left.min(bpr - off);
                pieces.push(Piece {
                    seg: k as u32,
                    y: y + row as f64 * (ROW_H + ROW_GAP),
                    x0: PAD + off as f64 * px_per_byte,
                    x1: PAD + (off + take) as f64 * px_per_byte,
                    byte0,
                    bytes: take,
                });
                rows_used = rows_used.max(row + 1);
                left -= take;
                byte0 += take;
                off += take;
                if left == 0 {
                    break;
                }
                row += 1;
                off = 0;
            }
            off += gap;
            if off >= bpr {
                row += 1;
                off = 0;
            }
        }
        y += rows_used as f64 * (ROW_H + ROW_GAP) + GROUP_GAP;
    }
    pieces.sort_by(|a, b| a.y.total_cmp(&b.y).then(a.x0.total_cmp(&b.x0)));
    MapGeometry {
        bytes_per_row: bpr,
        width_px: width_px + 2.0 * PAD,
        height_px: y + PAD,
        groups,
        pieces,
    }
}

/// The smallest power-of-two row size whose placement fits `height_px`, starting from what
/// `peak_reserved` needs (so the scale stays put while stepping through a trace).
pub fn fit(f: &StateFrame, peak_reserved: u64, width_px: f64, height_px: f64) -> MapGeometry {
    let usable = (height_px - 2.0 * PAD).max(ROW_H);
    let rows = ((usable / (ROW_H + ROW_GAP)).floor() as u64).max(1);
    let reserved: u64 = f.columns.segment_size_bytes.iter().sum();
    let need = peak_reserved.max(reserved).max(1);
    let mut bpr = (need / rows).max(1 << 20).next_power_of_two();
    let mut g = place(f, bpr, width_px);
    let mut tries = 0;
    while g.height_px > height_px && tries < 24 {
        bpr = bpr.saturating_mul(2);
        g = place(f, bpr, width_px);
        tries += 1;
    }
    g
}

/// Zoom and pan: screen x = map x · k + tx, screen y = map y + ty. Only the byte axis zooms
/// (rows keep their height, so every row stays in view while a 512-byte block is widened to
/// pixels); `k` goes up to 2^16.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transform {
    pub k: f64,
    pub tx: f64,
    pub ty: f64,
}

impl Default for Transform {
    fn default() -> Self {
        Transform {
            k: 1.0,
            tx: 0.0,
            ty: 0.0,
        }
    }
}

impl Transform {
    pub const MAX_ZOOM: f64 = 65536.0;

    pub fn to_map(&self, sx: f64, sy: f64) -> (f64, f64) {
        ((sx - self.tx) / self.k, sy - self.ty)
    }

    /// Zooms the byte axis by `factor` keeping the map point under `sx` in place.
    pub fn zoom_at(&self, sx: f64, factor: f64) -> Transform {
        let k = (self.k * factor).clamp(1.0, Transform::MAX_ZOOM);
        let (mx, _) = self.to_map(sx, 0.0);
        Transform {
            k,
            tx: sx - mx * k,
            ty: self.ty,
        }
    }
}

/// What is under a point of the map.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub seg: usize,
    /// The block under the point, if the point is inside the segment's bytes.
    pub block: Option<usize>,
    pub addr: u64,
}

impl MapGeometry {
    /// The segment slice and block at map point (mx, my).
    pub fn hit(&self, f: &StateFrame, mx: f64, my: f64) -> Option<Hit> {
        let first = self.pieces.partition_point(|p| p.y + ROW_H < my);
        let p = self
            .pieces
            .get(first..)?
            .iter()
            .take_while(|p| p.y <= my)
            .find(|p| my <= p.y + ROW_H && mx >= p.x0 && mx < p.x1.max(p.x0 + 1.0))?;
        let seg = p.seg as usize;
        let w = (p.x1 - p.x0).max(1e-9);
        let frac = ((mx - p.x0) / w).clamp(0.0, 1.0);
        let off = p.byte0 + ((p.bytes as f64 * frac) as u64).min(p.bytes.saturating_sub(1));
        let addr = f.columns.segment_address.get(seg)?.saturating_add(off);
        let block = f.block_at(addr).filter(|b| f.blocks_of(seg).contains(b));
        Some(Hit { seg, block, addr })
    }
}

/// Colour of an allocation (stable for the same block and alloc event).
pub fn block_colour(addr: u64, alloc_event: u32) -> &'static str {
    let mut h = addr ^ (u64::from(alloc_event)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^= h >> 29;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 32;
    BLOCK_COLOURS
        .get((h % BLOCK_COLOURS.len() as u64) as usize)
        .copied()
        .unwrap_or("#4e79a7")
}

/// Size of the canvas's CSS box.
pub fn css_size(canvas: &HtmlCanvasElement) -> (f64, f64) {
    (
        canvas.client_width().max(1) as f64,
        canvas.client_height().max(1) as f64,
    )
}

/// What to outline.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Marks {
    /// The pinned allocation's block address.
    pub pinned: Option<u64>,
    /// The address the selected trace entry acts on.
    pub event_addr: Option<u64>,
    pub hovered: Option<usize>,
}

/// Draws the map with zoom/pan `t`. Returns the number of block slices drawn.
pub fn draw(
    canvas: &HtmlCanvasElement,
    f: &StateFrame,
    g: &MapGeometry,
    t: Transform,
    marks: Marks,
) -> usize {
    let Some((ctx, w, h)) = crate::page::canvas::prepare(canvas) else {
        return 0;
    };
    let sx = |x: f64| x * t.k + t.tx;
    let sy = |y: f64| y + t.ty;
    let visible = |p: &Piece| {
        let (y0, y1) = (sy(p.y), sy(p.y + ROW_H));
        let (x0, x1) = (sx(p.x0), sx(p.x1));
        y1 >= 0.0 && y0 <= h && x1 >= 0.0 && x0 <= w
    };
    // Segment slices: the background with an outline (expandable segments dashed).
    let c = crate::page::theme::colours();
    ctx.set_fill_style_str(c.background);
    ctx.set_stroke_style_str(c.text_muted);
    ctx.set_line_width(1.0);
    for p in g.pieces.iter().filter(|p| visible(p)) {
        let (x, y) = (sx(p.x0), sy(p.y));
        let (pw, ph) = (((p.x1 - p.x0) * t.k).max(1.0), ROW_H);
        ctx.fill_rect(x, y, pw, ph);
        let expandable = f
            .columns
            .segment_is_expandable
            .get(p.seg as usize)
            .is_some_and(|&x| x);
        if expandable {
            let _ = ctx.set_line_dash(&js_sys::Array::of2(&4.into(), &2.into()));
        }
        ctx.stroke_rect(
            x.round() - 0.5,
            y.round() - 0.5,
            pw.round() + 1.0,
            ph.round() + 1.0,
        );
        if expandable {
            let _ = ctx.set_line_dash(&js_sys::Array::new());
        }
    }
    // Blocks, batched by colour.
    let mut batches: Vec<(&'static str, Vec<[f64; 4]>)> = Vec::new();
    let mut push =
        |colour: &'static str, r: [f64; 4]| match batches.iter_mut().find(|(c, _)| *c == colour) {
            Some((_, v)) => v.push(r),
            None => batches.push((colour, vec![r])),
        };
    let mut outlines: Vec<([f64; 4], &'static str, f64)> = Vec::new();
    let mut slices = 0usize;
    for p in g.pieces.iter().filter(|p| visible(p)) {
        let seg = p.seg as usize;
        let Some(&seg_addr) = f.columns.segment_address.get(seg) else {
            continue;
        };
        let (a0, a1) = (
            seg_addr.saturating_add(p.byte0),
            seg_addr.saturating_add(p.byte0 + p.bytes),
        );
        let px_per_byte = (p.x1 - p.x0) / p.bytes.max(1) as f64 * t.k;
        let x_of = |a: u64| sx(p.x0) + (a.saturating_sub(a0)) as f64 * px_per_byte;
        let (y, ph) = (sy(p.y), ROW_H);
        let range = f.blocks_of(seg);
        let start = range.start
            + f.columns
                .block_address
                .get(range.clone())
                .unwrap_or(&[])
                .partition_point(|&a| a < a0)
                .saturating_sub(1);
        for b in start..range.end {
            let (Some(&ba), Some(&bs)) = (
                f.columns.block_address.get(b),
                f.columns.block_size_bytes.get(b),
            ) else {
                break;
            };
            if ba >= a1 {
                break;
            }
            let be = ba.saturating_add(bs);
            if be <= a0 {
                continue;
            }
            let state = f.block_state(b);
            let (c0, c1) = (ba.max(a0), be.min(a1));
            let (x0, x1) = (x_of(c0), x_of(c1));
            if x1 < 0.0 || x0 > w {
                continue;
            }
            // A 1px gap at a block's end when there is room, so neighbours stay apart.
            let end_gap = if x1 - x0 > 4.0 && be <= a1 { 1.0 } else { 0.0 };
            let bw = (x1 - x0 - end_gap).max(0.6);
            if state.is_active() {
                slices += 1;
                let colour = if state == BlockState::ActivePendingFree {
                    PENDING_COLOUR
                } else {
                    block_colour(
                        ba,
                        f.columns
                            .block_alloc_event
                            .get(b)
                            .copied()
                            .unwrap_or(u32::MAX),
                    )
                };
                push(colour, [x0, y, bw, ph]);
                // Rounding waste: the bytes past the request, at the block's end.
                let req = f
                    .columns
                    .block_requested_size_bytes
                    .get(b)
                    .copied()
                    .unwrap_or(bs)
                    .min(bs);
                let ws = ba.saturating_add(req).max(a0);
                if req < bs && ws < c1 {
                    let wx = x_of(ws);
                    let ww = (x0 + bw - wx).max(0.0);
                    if ww > 0.0 {
                        push(WASTE_COLOUR, [wx, y, ww.max(0.6), ph]);
                    }
                }
            }
            if marks.pinned == Some(ba) && state.is_active() {
                outlines.push(([x0, y, bw, ph], c.outline, 2.5));
            } else if marks.event_addr == Some(ba) {
                outlines.push(([x0, y, bw, ph], c.marker_snapshot, 1.5));
            }
            if marks.hovered == Some(b) {
                outlines.push(([x0, y, bw, ph], c.outline, 1.0));
            }
        }
    }
    for (colour, rects) in &batches {
        ctx.set_fill_style_str(colour);
        ctx.begin_path();
        for r in rects {
            ctx.rect(r[0], r[1], r[2], r[3]);
        }
        ctx.fill();
    }
    for (r, colour, lw) in &outlines {
        ctx.set_stroke_style_str(colour);
        ctx.set_line_width(*lw);
        ctx.stroke_rect(r[0] - lw / 2.0, r[1] - lw / 2.0, r[2] + lw, r[3] + lw);
    }
    // Group headers.
    ctx.set_font("12px system-ui, sans-serif");
    ctx.set_text_baseline("bottom");
    ctx.set_text_align("left");
    ctx.set_fill_style_str(c.text);
    for gr in &g.groups {
        let y = sy(gr.y + HEADER_H - 3.0);
        if y > 0.0 && y < h + HEADER_H {
            let _ = ctx.fill_text(&gr.label, sx(PAD).max(4.0), y);
        }
    }
    if g.pieces.is_empty() {
        ctx.set_fill_style_str(c.text_muted);
        let _ = ctx.fill_text("no segments in this state", PAD, PAD + HEADER_H);
    }
    slices
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
