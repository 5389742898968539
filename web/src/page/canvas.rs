//! Canvas 2D drawing: the surface the timeline picture (`memlens_core::layout::picture`: axes,
//! labels, bands, outlines, lines) is drawn on — one path per style batch, texts and lines in
//! the theme's colours ([`paint_of`], [`ink_of`], shared with the SVG export) — and the
//! overview strip. Handles `devicePixelRatio` so lines stay sharp.

use crate::page::theme;
use crate::wire::clock::now_ms;
use memlens_core::layout::lines::fit_with_lines;
use memlens_core::layout::picture::{
    draw_picture, Anchor, Baseline, Ink, Margins, Picture, Surface, Text,
};
use memlens_core::layout::svg::Paint;
use memlens_core::layout::{
    render_overview, BandFilter, Matches, Painter, RenderOptions, RenderStats, Style, TimeMap,
    TimelineLayout, Viewport,
};
use std::sync::Arc;
use wasm_bindgen::JsCast;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement};

/// Space around the plot for the axes, in CSS pixels.
pub const MARGIN_LEFT: f64 = 76.0;
pub const MARGIN_RIGHT: f64 = 12.0;
pub const MARGIN_TOP: f64 = 18.0;
pub const MARGIN_BOTTOM: f64 = 24.0;
/// The same, as the timeline picture takes them.
pub const MARGINS: Margins = Margins {
    left: MARGIN_LEFT,
    right: MARGIN_RIGHT,
    top: MARGIN_TOP,
    bottom: MARGIN_BOTTOM,
};

/// How each style is drawn: the canvas and the exported SVG (`crate::page::exports`) use this
/// one mapping.
pub fn paint_of(style: Style) -> Paint {
    let c = theme::colours();
    let (fill, stroke, alpha): (Option<String>, Option<(&str, f64)>, f64) = match style {
        Style::Band(i) => (c.bands.get(i as usize).map(|s| s.to_string()), None, 1.0),
        Style::BandBeforeTrace(i) => (
            Some(theme::pale(
                c.bands.get(i as usize).copied().unwrap_or("#808080"),
                c,
            )),
            None,
            1.0,
        ),
        Style::Thin => (Some(c.thin.into()), None, 1.0),
        Style::Selected => (None, Some((c.outline, 2.0)), 1.0),
        Style::Match => (None, Some(("#d62728", 1.5)), 1.0),
        Style::MatchRug => (Some("#d62728".into()), None, 0.9),
        Style::PoolEnvelope => (Some(c.pool_fill.into()), Some((c.pool_stroke, 1.0)), 1.0),
        Style::Overview => (Some("#4e79a7".into()), None, 0.8),
        Style::Region => (Some("#6b6bd6".into()), None, 0.10),
        Style::MarkerOom => (Some("#d62728".into()), None, 1.0),
        Style::MarkerSnapshot => (Some(c.marker_snapshot.into()), None, 0.6),
        Style::MarkerAnnotate => (Some("#8e44ad".into()), None, 0.8),
        Style::ReservedLine => (Some(c.reserved_line.into()), None, 0.85),
        Style::Capacity => (Some(c.capacity_line.into()), None, 1.0),
    };
    Paint {
        fill,
        stroke: stroke.map(|(s, w)| (s.to_string(), w)),
        alpha,
    }
}

/// The colour of each of the timeline picture's inks (the canvas and the exported SVG).
pub fn ink_of(ink: Ink) -> &'static str {
    let c = theme::colours();
    match ink {
        Ink::Background => c.background,
        Ink::Grid => c.grid,
        Ink::Text => c.text,
        Ink::TextMuted => c.text_muted,
        Ink::Tick => c.tick,
        Ink::RegionText => c.region_text,
        Ink::Capacity => c.capacity_line,
    }
}

/// The canvas's fonts: what the picture's texts are written in.
fn font(bold: bool) -> &'static str {
    if bold {
        "bold 11px system-ui, sans-serif"
    } else {
        "11px system-ui, sans-serif"
    }
}

/// How wide `text` is written on the page (what the SVG export places labels by, as the canvas
/// does).
pub fn text_width(text: &str, bold: bool) -> f64 {
    thread_local! {
        static MEASURE: Option<CanvasRenderingContext2d> = web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.create_element("canvas").ok())
            .and_then(|c| c.dyn_into::<HtmlCanvasElement>().ok())
            .and_then(|c| c.get_context("2d").ok().flatten())
            .and_then(|c| c.dyn_into().ok());
    }
    MEASURE.with(|m| match m {
        Some(ctx) => {
            ctx.set_font(font(bold));
            ctx.measure_text(text).map(|m| m.width()).unwrap_or(0.0)
        }
        None => memlens_core::layout::svg::approx_text_width(text, bold),
    })
}

struct CanvasPainter<'a> {
    ctx: &'a CanvasRenderingContext2d,
    ox: f64,
    oy: f64,
    /// Milliseconds spent in canvas calls.
    paint_ms: f64,
    /// When the plot was clipped (its drawing began), and how long the plot took.
    clipped_at: Option<f64>,
    plot_ms: f64,
}

impl<'a> CanvasPainter<'a> {
    fn new(ctx: &'a CanvasRenderingContext2d, ox: f64, oy: f64) -> CanvasPainter<'a> {
        CanvasPainter {
            ctx,
            ox,
            oy,
            paint_ms: 0.0,
            clipped_at: None,
            plot_ms: 0.0,
        }
    }
}

impl Painter for CanvasPainter<'_> {
    fn rects(&mut self, style: Style, xywh: &[f32]) {
        let t0 = now_ms();
        self.rects_now(style, xywh);
        self.paint_ms += now_ms() - t0;
    }
}

impl Surface for CanvasPainter<'_> {
    fn line(&mut self, _: &'static str, ink: Ink, from: (f64, f64), to: (f64, f64), dashed: bool) {
        let ctx = self.ctx;
        ctx.set_stroke_style_str(ink_of(ink));
        ctx.set_line_width(1.0);
        if dashed {
            let _ = ctx.set_line_dash(&js_sys::Array::of2(&3.into(), &3.into()));
        }
        ctx.begin_path();
        ctx.move_to(from.0, from.1);
        ctx.line_to(to.0, to.1);
        ctx.stroke();
        if dashed {
            let _ = ctx.set_line_dash(&js_sys::Array::new());
        }
    }

    fn fill(&mut self, _: &'static str, ink: Ink, [x, y, w, h]: [f64; 4]) {
        self.ctx.set_fill_style_str(ink_of(ink));
        self.ctx.fill_rect(x, y, w, h);
    }

    fn text(&mut self, t: &Text<'_>) {
        let ctx = self.ctx;
        ctx.set_font(font(t.bold));
        ctx.set_fill_style_str(ink_of(t.ink));
        ctx.set_text_align(match t.anchor {
            Anchor::Start => "left",
            Anchor::Middle => "center",
            Anchor::End => "right",
        });
        ctx.set_text_baseline(match t.baseline {
            Baseline::Top => "top",
            Baseline::Middle => "middle",
            Baseline::Bottom => "bottom",
        });
        let _ = ctx.fill_text(t.text, t.x, t.y);
    }

    fn text_width(&mut self, text: &str, bold: bool) -> f64 {
        self.ctx.set_font(font(bold));
        self.ctx
            .measure_text(text)
            .map(|m| m.width())
            .unwrap_or(text.len() as f64 * 6.0)
    }

    fn clip(&mut self, [x, y, w, h]: [f64; 4]) {
        let ctx = self.ctx;
        ctx.save();
        ctx.begin_path();
        ctx.rect(x, y, w, h);
        ctx.clip();
        (self.ox, self.oy) = (x, y);
        self.clipped_at = Some(now_ms());
    }

    fn unclip(&mut self) {
        self.ctx.restore();
        if let Some(t0) = self.clipped_at.take() {
            self.plot_ms += now_ms() - t0;
        }
    }
}

impl CanvasPainter<'_> {
    fn rects_now(&mut self, style: Style, xywh: &[f32]) {
        let ctx = self.ctx;
        let Paint {
            fill,
            stroke,
            alpha,
        } = paint_of(style);
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
        if let Some(f) = &fill {
            ctx.set_fill_style_str(f);
            ctx.fill();
        }
        if let Some((s, w)) = &stroke {
            ctx.set_stroke_style_str(s);
            ctx.set_line_width(*w);
            ctx.stroke();
        }
        ctx.set_global_alpha(1.0);
    }
}

/// A 2D context sized to the canvas's CSS box times `devicePixelRatio`, cleared, scaled so
/// drawing uses CSS pixels. Returns the CSS size. (Both canvases of the page use it.)
pub(crate) fn prepare(canvas: &HtmlCanvasElement) -> Option<(CanvasRenderingContext2d, f64, f64)> {
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

/// Draws `layout` once on a canvas out of view, then removes it: run on the worker's warm-up
/// layout while the page waits for a file, so that the drawing code is compiled (wasm is compiled
/// lazily, function by function) and optimized before the user's first timeline.
pub fn warm_up(layout: &TimelineLayout) {
    let Some(doc) = web_sys::window().and_then(|w| w.document()) else {
        return;
    };
    let (Some(body), Ok(el)) = (doc.body(), doc.create_element("canvas")) else {
        return;
    };
    let Ok(c) = el.dyn_into::<HtmlCanvasElement>() else {
        return;
    };
    let _ = c.set_attribute(
        "style",
        "position:fixed;left:-20000px;top:0;width:1200px;height:420px;visibility:hidden",
    );
    if body.append_child(&c).is_err() {
        return;
    }
    let x1 = layout.x_end() as f64;
    let _ = draw_timeline(&c, layout, 0.0, x1, DrawOptions::default());
    let _ = draw_timeline(&c, layout, x1 * 0.25, x1 * 0.5, DrawOptions::default());
    draw_overview(&c, layout, 0.0, x1, None);
    c.remove();
    // The text styles a loaded file shows first (the summary strip's bold tabular numbers, the
    // frames' monospace), laid out once out of view: the fonts are looked up and shaped now.
    if let Ok(d) = doc.create_element("div") {
        let _ = d.set_attribute(
            "style",
            "position:fixed;left:-20000px;top:0;width:1200px;visibility:hidden",
        );
        d.set_inner_html(
            "<div class=\"summary\"><div class=\"metric\"><span class=\"metric-name\">reserved</span>\
             <span class=\"metric-value\">0123456789.5 KiB MiB GiB</span></div></div>\
             <pre class=\"frames\">model.py:42:forward 0x7f00 b'7f_1</pre><b>memlens</b>\
             <div class=\"view-controls\"><select><option>Active Memory Timeline</option></select>\
             <input class=\"search\" type=\"search\" placeholder=\"address\"><button>reset</button>\
             <label><input type=\"checkbox\">full</label></div>",
        );
        if body.append_child(&d).is_ok() {
            let _ = d
                .dyn_ref::<web_sys::HtmlElement>()
                .map(|h| h.offset_width());
            d.remove();
        }
    }
}

/// What to draw besides the bands.
#[derive(Default)]
pub struct DrawOptions<'a> {
    pub selected: Option<u32>,
    pub matches: Option<&'a Matches>,
    /// Wall-clock x axis (`None`: event index).
    pub time: Option<Arc<TimeMap>>,
    /// A palette index per element (`memlens_core::colour`); `None`: upstream's.
    pub colours: Option<&'a [u8]>,
    pub filter: BandFilter,
    /// The Segments layout of the device, whose live total is drawn as the reserved line.
    pub reserved: Option<&'a TimelineLayout>,
    /// The capacity line: bytes and the words written at its right end.
    pub capacity: Option<(u64, String)>,
}

/// Plot size (without margins) of a canvas of CSS size `w` × `h`.
pub fn plot_size(w: f64, h: f64) -> (f64, f64) {
    (
        (w - MARGIN_LEFT - MARGIN_RIGHT).max(10.0),
        (h - MARGIN_TOP - MARGIN_BOTTOM).max(10.0),
    )
}

/// Draws the timeline for the data window `[x0, x1)`; returns the viewport used (for hit tests
/// and pointer mapping) and what drawing the bands cost.
pub fn draw_timeline(
    canvas: &HtmlCanvasElement,
    layout: &TimelineLayout,
    x0: f64,
    x1: f64,
    opts: DrawOptions<'_>,
) -> Option<(Viewport, RenderStats, DrawTiming)> {
    let (ctx, w, h) = prepare(canvas)?;
    let (pw, ph) = plot_size(w, h);
    let capacity = opts
        .capacity
        .as_ref()
        .map(|(b, words)| (*b, words.as_str()));
    let vp = fit_with_lines(
        layout,
        opts.reserved,
        capacity.map(|c| c.0),
        (x0, x1),
        (pw, ph),
    )
    .with_time(opts.time.clone());
    let render = RenderOptions {
        selected: opts.selected.map(|s| s as usize),
        matches: opts.matches,
        colours: opts.colours,
        filter: opts.filter,
    };
    let picture = Picture {
        layout,
        vp: &vp,
        margins: MARGINS,
        render,
        reserved: opts.reserved,
        capacity,
    };
    let mut p = CanvasPainter::new(&ctx, MARGIN_LEFT, MARGIN_TOP);
    let stats = draw_picture(&picture, &mut p);
    let timing = DrawTiming {
        render_ms: p.plot_ms,
        paint_ms: p.paint_ms,
    };
    Some((vp, stats, timing))
}

/// Where a draw's time went (ms): the bands (level of detail and canvas calls together), and
/// the canvas calls alone.
#[derive(Debug, Clone, Copy, Default)]
pub struct DrawTiming {
    pub render_ms: f64,
    pub paint_ms: f64,
}

/// The whole trace at the overview strip's width (what its pixels mean).
pub fn overview_viewport(
    layout: &TimelineLayout,
    width_px: f64,
    height_px: f64,
    time: Option<Arc<TimeMap>>,
) -> Viewport {
    let pw = (width_px - MARGIN_LEFT - MARGIN_RIGHT).max(10.0);
    let x_end = layout.x_end() as f64;
    Viewport::new(0.0, x_end, 0.0, 1.0, pw, height_px).with_time(time)
}

/// Draws the overview strip (highest live total per column) and the visible window on it.
pub fn draw_overview(
    canvas: &HtmlCanvasElement,
    layout: &TimelineLayout,
    x0: f64,
    x1: f64,
    time: Option<Arc<TimeMap>>,
) {
    let Some((ctx, w, h)) = prepare(canvas) else {
        return;
    };
    let full = overview_viewport(layout, w, h, time);
    let pw = full.width_px;
    let mut p = CanvasPainter::new(&ctx, MARGIN_LEFT, 0.0);
    render_overview(layout, &full, &mut p);
    let a = MARGIN_LEFT + full.x_px(x0);
    let b = MARGIN_LEFT + full.x_px(x1);
    let c = theme::colours();
    ctx.set_fill_style_str(c.shade);
    ctx.fill_rect(MARGIN_LEFT, 0.0, (a - MARGIN_LEFT).max(0.0), h);
    ctx.fill_rect(b, 0.0, (MARGIN_LEFT + pw - b).max(0.0), h);
    ctx.set_stroke_style_str(c.outline);
    ctx.set_line_width(1.0);
    ctx.stroke_rect(a.round() + 0.5, 0.5, (b - a).max(2.0).round(), h - 1.0);
}
