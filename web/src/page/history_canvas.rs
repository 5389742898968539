//! The Allocator State History's segment map drawn on a canvas: core's placement
//! ([`memlens_core::state::map`]: segments grouped by pool and stream, packed into rows of a
//! power-of-two number of bytes, hit-testable) painted with zoom/pan. Blocks are drawn inside
//! their segment: allocated blocks in a colour per allocation, pending-free blocks red, the
//! rounding waste at the end of each block light red, free blocks (holes) white.

use crate::page::theme::CanvasColours;
use crate::wire::history::StateFrame;
use memlens_core::model::BlockState;
use memlens_core::state::map::{
    block_colour_index, MapGeometry, Piece, Transform, HEADER_H, PAD, ROW_H,
};
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement};

/// Allocation colours: upstream's tableau10 without its reds and pink (red marks pending frees
/// and rounding waste here).
pub const BLOCK_COLOURS: [&str; 8] = [
    "#4e79a7", "#f28e2c", "#76b7b2", "#59a14f", "#edc949", "#af7aa1", "#9c755f", "#bab0ab",
];
pub const PENDING_COLOUR: &str = "#d62728";
pub const WASTE_COLOUR: &str = "#ff9896";

/// Colour of an allocation (stable for the same block and alloc event).
pub fn block_colour(addr: u64, alloc_event: Option<u32>) -> &'static str {
    let i = block_colour_index(addr, alloc_event, BLOCK_COLOURS.len());
    BLOCK_COLOURS.get(i).copied().unwrap_or("#4e79a7")
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
    let screen = Screen { t, w, h };
    let c = crate::page::theme::colours();
    draw_segments(&ctx, f, g, &screen);
    let mut rects = Rects::default();
    for p in g.pieces.iter().filter(|p| screen.visible(p)) {
        piece_blocks(f, p, &screen, marks, c, &mut rects);
    }
    for (colour, rs) in &rects.fills {
        ctx.set_fill_style_str(colour);
        ctx.begin_path();
        for r in rs {
            ctx.rect(r[0], r[1], r[2], r[3]);
        }
        ctx.fill();
    }
    for (r, outline, lw) in &rects.outlines {
        ctx.set_stroke_style_str(outline);
        ctx.set_line_width(*lw);
        ctx.stroke_rect(r[0] - lw / 2.0, r[1] - lw / 2.0, r[2] + lw, r[3] + lw);
    }
    draw_headers(&ctx, g, &screen);
    rects.slices
}

/// The canvas's size and the zoom/pan: map coordinates to CSS pixels.
struct Screen {
    t: Transform,
    w: f64,
    h: f64,
}

impl Screen {
    fn x(&self, x: f64) -> f64 {
        x * self.t.k + self.t.tx
    }

    fn y(&self, y: f64) -> f64 {
        y + self.t.ty
    }

    fn visible(&self, p: &Piece) -> bool {
        let (y0, y1) = (self.y(p.y), self.y(p.y + ROW_H));
        let (x0, x1) = (self.x(p.x0), self.x(p.x1));
        y1 >= 0.0 && y0 <= self.h && x1 >= 0.0 && x0 <= self.w
    }
}

/// Segment slices: the background with an outline (expandable segments dashed).
fn draw_segments(ctx: &CanvasRenderingContext2d, f: &StateFrame, g: &MapGeometry, s: &Screen) {
    let c = crate::page::theme::colours();
    ctx.set_fill_style_str(c.background);
    ctx.set_stroke_style_str(c.text_muted);
    ctx.set_line_width(1.0);
    for p in g.pieces.iter().filter(|p| s.visible(p)) {
        let (x, y) = (s.x(p.x0), s.y(p.y));
        let (pw, ph) = (((p.x1 - p.x0) * s.t.k).max(1.0), ROW_H);
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
}

/// What the blocks are drawn as: rectangles batched by fill colour, outlines, and the number
/// of block slices.
#[derive(Default)]
struct Rects {
    fills: Vec<(&'static str, Vec<[f64; 4]>)>,
    /// (rectangle, colour, line width)
    outlines: Vec<([f64; 4], &'static str, f64)>,
    slices: usize,
}

impl Rects {
    fn fill(&mut self, colour: &'static str, r: [f64; 4]) {
        match self.fills.iter_mut().find(|(c, _)| *c == colour) {
            Some((_, v)) => v.push(r),
            None => self.fills.push((colour, vec![r])),
        }
    }
}

/// The blocks inside one visible piece of a segment: active ones filled (pending frees red,
/// the rounding waste at their end light red), the marked ones outlined.
fn piece_blocks(
    f: &StateFrame,
    p: &Piece,
    s: &Screen,
    marks: Marks,
    c: &CanvasColours,
    out: &mut Rects,
) {
    let seg = p.seg as usize;
    let Some(&seg_addr) = f.columns.segment_address.get(seg) else {
        return;
    };
    let (a0, a1) = (
        seg_addr.saturating_add(p.byte0),
        seg_addr.saturating_add(p.byte0 + p.bytes),
    );
    let px_per_byte = (p.x1 - p.x0) / p.bytes.max(1) as f64 * s.t.k;
    let x_of = |a: u64| s.x(p.x0) + (a.saturating_sub(a0)) as f64 * px_per_byte;
    let (y, ph) = (s.y(p.y), ROW_H);
    for b in blocks_from(f, seg, a0) {
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
        if x1 < 0.0 || x0 > s.w {
            continue;
        }
        // A 1px gap at a block's end when there is room, so neighbours stay apart.
        let end_gap = if x1 - x0 > 4.0 && be <= a1 { 1.0 } else { 0.0 };
        let bw = (x1 - x0 - end_gap).max(0.6);
        if state.is_active() {
            out.slices += 1;
            let colour = if state == BlockState::ActivePendingFree {
                PENDING_COLOUR
            } else {
                block_colour(ba, f.columns.block_alloc_event.get(b).copied().flatten())
            };
            out.fill(colour, [x0, y, bw, ph]);
            // Rounding waste: the bytes past the request, at the block's end.
            let req = requested_bytes(f, b, bs);
            let ws = ba.saturating_add(req).max(a0);
            if req < bs && ws < c1 {
                let wx = x_of(ws);
                let ww = (x0 + bw - wx).max(0.0);
                if ww > 0.0 {
                    out.fill(WASTE_COLOUR, [wx, y, ww.max(0.6), ph]);
                }
            }
        }
        let r = [x0, y, bw, ph];
        if marks.pinned == Some(ba) && state.is_active() {
            out.outlines.push((r, c.outline, 2.5));
        } else if marks.event_addr == Some(ba) {
            out.outlines.push((r, c.marker_snapshot, 1.5));
        }
        if marks.hovered == Some(b) {
            out.outlines.push((r, c.outline, 1.0));
        }
    }
}

/// Segment `seg`'s blocks from the last one starting before address `a0` on.
fn blocks_from(f: &StateFrame, seg: usize, a0: u64) -> std::ops::Range<usize> {
    let range = f.blocks_of(seg);
    let before = f
        .columns
        .block_address
        .get(range.clone())
        .unwrap_or(&[])
        .partition_point(|&a| a < a0);
    range.start + before.saturating_sub(1)..range.end
}

/// Block `b`'s requested bytes (at most its size `bs`).
fn requested_bytes(f: &StateFrame, b: usize, bs: u64) -> u64 {
    f.columns
        .block_requested_size_bytes
        .get(b)
        .copied()
        .unwrap_or(bs)
        .min(bs)
}

/// The group headers above their rows, or a note when the state has no segment.
fn draw_headers(ctx: &CanvasRenderingContext2d, g: &MapGeometry, s: &Screen) {
    let c = crate::page::theme::colours();
    ctx.set_font("12px system-ui, sans-serif");
    ctx.set_text_baseline("bottom");
    ctx.set_text_align("left");
    ctx.set_fill_style_str(c.text);
    for gr in &g.groups {
        let y = s.y(gr.y + HEADER_H - 3.0);
        if y > 0.0 && y < s.h + HEADER_H {
            let _ = ctx.fill_text(&gr.label, s.x(PAD).max(4.0), y);
        }
    }
    if g.pieces.is_empty() {
        ctx.set_fill_style_str(c.text_muted);
        let _ = ctx.fill_text("no segments in this state", PAD, PAD + HEADER_H);
    }
}
