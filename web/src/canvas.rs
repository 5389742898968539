//! Canvas 2D drawing: the painter behind `memlens_core::layout::Painter` (one path per style
//! batch), axes with binary-unit ticks, region labels, and the overview strip. Handles
//! `devicePixelRatio` so lines stay sharp.

use memlens_core::layout::axis::{bytes_ticks, count_ticks};
use memlens_core::layout::{
    render_overview, render_timeline, Painter, RenderOptions, Style, TimelineLayout, Viewport,
};
use wasm_bindgen::JsCast;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement};

/// Upstream's tableau10, in its order.
pub const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2c", "#e15759", "#76b7b2", "#59a14f", "#edc949", "#af7aa1", "#ff9da7",
    "#9c755f", "#bab0ab",
];

/// Space around the plot for the axes, in CSS pixels.
pub const MARGIN_LEFT: f64 = 76.0;
pub const MARGIN_RIGHT: f64 = 12.0;
pub const MARGIN_TOP: f64 = 18.0;
pub const MARGIN_BOTTOM: f64 = 24.0;

struct CanvasPainter<'a> {
    ctx: &'a CanvasRenderingContext2d,
    ox: f64,
    oy: f64,
}

impl Painter for CanvasPainter<'_> {
    fn rects(&mut self, style: Style, xywh: &[f32]) {
        let ctx = self.ctx;
        let (fill, stroke, alpha): (Option<&str>, Option<(&str, f64)>, f64) = match style {
            Style::Band(i) => (PALETTE.get(i as usize).copied(), None, 1.0),
            Style::BandBeforeTrace(i) => (PALETTE.get(i as usize).copied(), None, 0.45),
            Style::Thin => (Some("#9ea3ad"), None, 1.0),
            Style::Selected => (None, Some(("#000000", 2.0)), 1.0),
            Style::Match => (None, Some(("#d62728", 1.5)), 1.0),
            Style::Overview => (Some("#4e79a7"), None, 0.8),
            Style::Region => (Some("#6b6bd6"), None, 0.10),
            Style::MarkerOom => (Some("#d62728"), None, 1.0),
            Style::MarkerSnapshot => (Some("#333333"), None, 0.6),
            Style::MarkerAnnotate => (Some("#8e44ad"), None, 0.8),
        };
        ctx.set_global_alpha(alpha);
        ctx.begin_path();
        for r in xywh.chunks_exact(4) {
            ctx.rect(
                self.ox + r[0] as f64,
                self.oy + r[1] as f64,
                r[2] as f64,
                r[3] as f64,
            );
        }
        if let Some(f) = fill {
            ctx.set_fill_style_str(f);
            ctx.fill();
        }
        if let Some((s, w)) = stroke {
            ctx.set_stroke_style_str(s);
            ctx.set_line_width(w);
            ctx.stroke();
        }
        ctx.set_global_alpha(1.0);
    }
}

/// A 2D context sized to the canvas's CSS box times `devicePixelRatio`, cleared, scaled so
/// drawing uses CSS pixels. Returns the CSS size.
fn prepare(canvas: &HtmlCanvasElement) -> Option<(CanvasRenderingContext2d, f64, f64)> {
    let dpr = web_sys::window()
        .map(|w| w.device_pixel_ratio())
        .unwrap_or(1.0)
        .max(1.0);
    let (w, h) = (
        canvas.client_width().max(1) as f64,
        canvas.client_height().max(1) as f64,
    );
    let (pw, ph) = ((w * dpr).round() as u32, (h * dpr).round() as u32);
    if canvas.width() != pw || canvas.height() != ph {
        canvas.set_width(pw);
        canvas.set_height(ph);
    }
    let ctx: CanvasRenderingContext2d = canvas.get_context("2d").ok()??.dyn_into().ok()?;
    let _ = ctx.set_transform(dpr, 0.0, 0.0, dpr, 0.0, 0.0);
    ctx.clear_rect(0.0, 0.0, w, h);
    Some((ctx, w, h))
}

/// Draws the timeline for the data window `[x0, x1)`; returns the viewport used (for hit tests).
pub fn draw_timeline(
    canvas: &HtmlCanvasElement,
    layout: &TimelineLayout,
    x0: f64,
    x1: f64,
    selected: Option<u32>,
) -> Option<Viewport> {
    let (ctx, w, h) = prepare(canvas)?;
    let (pw, ph) = (
        (w - MARGIN_LEFT - MARGIN_RIGHT).max(10.0),
        (h - MARGIN_TOP - MARGIN_BOTTOM).max(10.0),
    );
    let vp = Viewport::fit(layout, x0, x1, pw, ph);
    ctx.set_font("11px system-ui, sans-serif");
    // Grid and y labels.
    ctx.set_text_align("right");
    ctx.set_text_baseline("middle");
    ctx.set_line_width(1.0);
    for t in bytes_ticks(vp.y0_bytes, vp.y1_bytes, (ph / 45.0).max(2.0) as usize) {
        let y = (MARGIN_TOP + vp.y_px(t.value)).round() + 0.5;
        ctx.set_stroke_style_str("#e6e6e6");
        ctx.begin_path();
        ctx.move_to(MARGIN_LEFT, y);
        ctx.line_to(MARGIN_LEFT + pw, y);
        ctx.stroke();
        ctx.set_fill_style_str("#444444");
        let _ = ctx.fill_text(&t.label, MARGIN_LEFT - 6.0, y);
    }
    // x labels: trace event indices (event i sits at x = i + 1).
    ctx.set_text_align("center");
    ctx.set_text_baseline("top");
    for t in count_ticks((x0 - 1.0).max(0.0), x1 - 1.0, (pw / 90.0).max(2.0) as usize) {
        let x = MARGIN_LEFT + vp.x_px(t.value + 1.0);
        if x >= MARGIN_LEFT && x <= MARGIN_LEFT + pw - 18.0 {
            ctx.set_fill_style_str("#444444");
            let _ = ctx.fill_text(&t.label, x, MARGIN_TOP + ph + 5.0);
            ctx.set_fill_style_str("#999999");
            ctx.fill_rect(x.round(), MARGIN_TOP + ph, 1.0, 4.0);
        }
    }
    ctx.set_text_align("right");
    ctx.set_fill_style_str("#777777");
    let _ = ctx.fill_text("event", MARGIN_LEFT - 6.0, MARGIN_TOP + ph + 5.0);
    // Bands, clipped to the plot.
    ctx.save();
    ctx.begin_path();
    ctx.rect(MARGIN_LEFT, MARGIN_TOP, pw, ph);
    ctx.clip();
    let mut p = CanvasPainter {
        ctx: &ctx,
        ox: MARGIN_LEFT,
        oy: MARGIN_TOP,
    };
    render_timeline(
        layout,
        &vp,
        RenderOptions {
            selected: selected.map(|s| s as usize),
            matches: &[],
        },
        &mut p,
    );
    // Memory from before the trace: everything left of x = 1.
    if x0 < 1.0 {
        let xb = MARGIN_LEFT + vp.x_px(1.0);
        ctx.set_stroke_style_str("#555555");
        ctx.set_line_width(1.0);
        let _ = ctx.set_line_dash(&js_sys::Array::of2(&3.into(), &3.into()));
        ctx.begin_path();
        ctx.move_to(xb.round() + 0.5, MARGIN_TOP);
        ctx.line_to(xb.round() + 0.5, MARGIN_TOP + ph);
        ctx.stroke();
        let _ = ctx.set_line_dash(&js_sys::Array::new());
    }
    ctx.restore();
    // Labels above the plot: what is left of the dashed line, and annotation regions.
    ctx.set_text_baseline("bottom");
    ctx.set_text_align("left");
    ctx.set_fill_style_str("#555555");
    if layout.n_events == 0 {
        let _ = ctx.fill_text(
            "no trace events: the snapshot's active blocks, all allocated before any trace",
            MARGIN_LEFT,
            MARGIN_TOP - 3.0,
        );
    } else if x0 < 1.0 {
        // Left of the dashed line: before the first event. Pale bands were allocated before it.
        let xb = MARGIN_LEFT + vp.x_px(1.0);
        let _ = ctx.fill_text(
            "┆ trace starts (pale bands: allocated before it)",
            xb - 3.0,
            MARGIN_TOP - 3.0,
        );
    }
    ctx.set_fill_style_str("#4a4aa8");
    let mut last_end = f64::NEG_INFINITY;
    for r in &layout.regions {
        if r.x1 <= x0 || r.x0 >= x1 {
            continue;
        }
        let a = MARGIN_LEFT + vp.x_px(r.x0.max(x0));
        if a > last_end + 4.0 {
            let _ = ctx.fill_text(&r.label, a + 2.0, MARGIN_TOP - 3.0);
            last_end = a + ctx
                .measure_text(&r.label)
                .map(|m| m.width())
                .unwrap_or(60.0);
        }
    }
    Some(vp)
}

/// Draws the overview strip (highest live total per column) and the visible window on it.
pub fn draw_overview(canvas: &HtmlCanvasElement, layout: &TimelineLayout, x0: f64, x1: f64) {
    let Some((ctx, w, h)) = prepare(canvas) else {
        return;
    };
    let pw = (w - MARGIN_LEFT - MARGIN_RIGHT).max(10.0);
    let mut p = CanvasPainter {
        ctx: &ctx,
        ox: MARGIN_LEFT,
        oy: 0.0,
    };
    render_overview(layout, pw, h, &mut p);
    let x_end = layout.x_end() as f64;
    let a = MARGIN_LEFT + x0 / x_end * pw;
    let b = MARGIN_LEFT + x1 / x_end * pw;
    ctx.set_fill_style_str("rgba(0,0,0,0.08)");
    ctx.fill_rect(MARGIN_LEFT, 0.0, (a - MARGIN_LEFT).max(0.0), h);
    ctx.fill_rect(b, 0.0, (MARGIN_LEFT + pw - b).max(0.0), h);
    ctx.set_stroke_style_str("#333333");
    ctx.set_line_width(1.0);
    ctx.stroke_rect(a.round() + 0.5, 0.5, (b - a).max(2.0).round(), h - 1.0);
}
