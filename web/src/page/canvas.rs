//! Canvas 2D drawing: the painter behind `memlens_core::layout::Painter` (one path per style
//! batch), axes with binary-unit ticks and event-index or wall-clock x ticks, region labels,
//! and the overview strip. Handles `devicePixelRatio` so lines stay sharp.

use crate::page::theme;
use crate::wire::clock::now_ms;
use memlens_core::layout::axis::bytes_ticks;
use memlens_core::layout::lines::{fit_with_lines, render_lines};
use memlens_core::layout::svg::Paint;
use memlens_core::layout::{
    render_overview, render_timeline, BandFilter, Matches, Painter, RenderOptions, RenderStats,
    Style, TimeMap, TimelineLayout, Viewport,
};
use std::sync::Arc;
use wasm_bindgen::JsCast;
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement};

/// Space around the plot for the axes, in CSS pixels.
pub const MARGIN_LEFT: f64 = 76.0;
pub const MARGIN_RIGHT: f64 = 12.0;
pub const MARGIN_TOP: f64 = 18.0;
pub const MARGIN_BOTTOM: f64 = 24.0;

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

thread_local! {
    /// The viewport and options of the timeline drawn last on screen: what an export redraws.
    static LAST_TIMELINE: std::cell::RefCell<Option<(Viewport, Option<usize>)>> =
        const { std::cell::RefCell::new(None) };
}

/// The viewport (and pinned element) of the timeline drawn last on screen.
pub fn last_timeline() -> Option<(Viewport, Option<usize>)> {
    LAST_TIMELINE.with(|l| l.borrow().clone())
}

struct CanvasPainter<'a> {
    ctx: &'a CanvasRenderingContext2d,
    ox: f64,
    oy: f64,
    /// Milliseconds spent in canvas calls.
    paint_ms: f64,
}

impl Painter for CanvasPainter<'_> {
    fn rects(&mut self, style: Style, xywh: &[f32]) {
        let t0 = now_ms();
        self.rects_now(style, xywh);
        self.paint_ms += now_ms() - t0;
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
    let c = theme::colours();
    let (pw, ph) = plot_size(w, h);
    let cap_bytes = opts.capacity.as_ref().map(|c| c.0);
    let vp = fit_with_lines(layout, opts.reserved, cap_bytes, (x0, x1), (pw, ph))
        .with_time(opts.time.clone());
    ctx.set_font("11px system-ui, sans-serif");
    // Grid and y labels.
    ctx.set_text_align("right");
    ctx.set_text_baseline("middle");
    ctx.set_line_width(1.0);
    for t in bytes_ticks(vp.y0_bytes, vp.y1_bytes, (ph / 45.0).max(2.0) as usize) {
        let y = (MARGIN_TOP + vp.y_px(t.value)).round() + 0.5;
        ctx.set_stroke_style_str(c.grid);
        ctx.begin_path();
        ctx.move_to(MARGIN_LEFT, y);
        ctx.line_to(MARGIN_LEFT + pw, y);
        ctx.stroke();
        ctx.set_fill_style_str(c.text);
        let _ = ctx.fill_text(&t.label, MARGIN_LEFT - 6.0, y);
    }
    // x labels: trace event indices (event i sits at x = i + 1), or time since the first event.
    ctx.set_text_align("center");
    ctx.set_text_baseline("top");
    let x_ticks = vp.x_ticks();
    for (px, label) in x_ticks {
        let x = MARGIN_LEFT + px;
        // Not under the axis caption at the left edge, nor past the right edge.
        if x >= MARGIN_LEFT + 12.0 && x <= MARGIN_LEFT + pw - 18.0 {
            ctx.set_fill_style_str(c.text);
            let _ = ctx.fill_text(&label, x, MARGIN_TOP + ph + 5.0);
            ctx.set_fill_style_str(c.tick);
            ctx.fill_rect(x.round(), MARGIN_TOP + ph, 1.0, 4.0);
        }
    }
    ctx.set_text_align("right");
    ctx.set_fill_style_str(c.text_muted);
    // (What time 0 is, on the time axis, is said above the plot: `crate::page::search::controls`.)
    let caption = if vp.time().is_some() { "time" } else { "event" };
    let _ = ctx.fill_text(caption, MARGIN_LEFT - 6.0, MARGIN_TOP + ph + 5.0);
    // Bands, clipped to the plot.
    ctx.save();
    ctx.begin_path();
    ctx.rect(MARGIN_LEFT, MARGIN_TOP, pw, ph);
    ctx.clip();
    let mut p = CanvasPainter {
        ctx: &ctx,
        ox: MARGIN_LEFT,
        oy: MARGIN_TOP,
        paint_ms: 0.0,
    };
    let t_render = now_ms();
    let stats = render_timeline(
        layout,
        &vp,
        RenderOptions {
            selected: opts.selected.map(|s| s as usize),
            matches: opts.matches,
            colours: opts.colours,
            filter: opts.filter,
        },
        &mut p,
    );
    render_lines(opts.reserved, cap_bytes, &vp, &mut p);
    let timing = DrawTiming {
        render_ms: now_ms() - t_render,
        paint_ms: p.paint_ms,
    };
    if canvas.is_connected() {
        LAST_TIMELINE
            .with(|l| *l.borrow_mut() = Some((vp.clone(), opts.selected.map(|s| s as usize))));
    }
    if canvas.is_connected() {
        LAST_TIMELINE
            .with(|l| *l.borrow_mut() = Some((vp.clone(), opts.selected.map(|s| s as usize))));
    }
    // Memory from before the trace: everything left of x = 1.
    if x0 < 1.0 {
        let xb = MARGIN_LEFT + vp.x_px(1.0);
        ctx.set_stroke_style_str(c.text_muted);
        ctx.set_line_width(1.0);
        let _ = ctx.set_line_dash(&js_sys::Array::of2(&3.into(), &3.into()));
        ctx.begin_path();
        ctx.move_to(xb.round() + 0.5, MARGIN_TOP);
        ctx.line_to(xb.round() + 0.5, MARGIN_TOP + ph);
        ctx.stroke();
        let _ = ctx.set_line_dash(&js_sys::Array::new());
    }
    ctx.restore();
    if let Some((bytes, label)) = &opts.capacity {
        capacity_label(&ctx, &vp, *bytes, label, c);
    }
    // Labels above the plot: what is left of the dashed line, and annotation regions.
    ctx.set_text_baseline("bottom");
    ctx.set_text_align("left");
    ctx.set_fill_style_str(c.text_muted);
    // Region labels start after whatever is written here.
    let mut last_end = f64::NEG_INFINITY;
    if layout.n_events == 0 {
        let _ = ctx.fill_text(
            "no trace events: the snapshot's active blocks, all allocated before any trace",
            MARGIN_LEFT,
            MARGIN_TOP - 3.0,
        );
    } else if x0 < 1.0 {
        // Left of the dashed line: before the first event. Pale bands were allocated before it.
        let xb = MARGIN_LEFT + vp.x_px(1.0);
        let text = "┆ trace starts (pale bands: allocated before it)";
        let _ = ctx.fill_text(text, xb - 3.0, MARGIN_TOP - 3.0);
        last_end = xb - 3.0 + ctx.measure_text(text).map(|m| m.width()).unwrap_or(260.0);
    }
    ctx.set_fill_style_str(c.region_text);
    ctx.set_text_align("left");
    for r in &layout.regions {
        if r.x1 <= x0 || r.x0 >= x1 {
            continue;
        }
        let a = MARGIN_LEFT + vp.x_px(r.x0.max(x0));
        if a > last_end + 4.0 && a < MARGIN_LEFT + pw - 40.0 {
            let _ = ctx.fill_text(&r.label, a + 2.0, MARGIN_TOP - 3.0);
            last_end = a + ctx
                .measure_text(&r.label)
                .map(|m| m.width())
                .unwrap_or(60.0);
        }
    }
    Some((vp, stats, timing))
}

/// The capacity line's words, at its right end just above it (below it when at the top).
fn capacity_label(
    ctx: &CanvasRenderingContext2d,
    vp: &Viewport,
    bytes: u64,
    label: &str,
    c: &theme::CanvasColours,
) {
    let y = MARGIN_TOP + vp.y_px(bytes as f64);
    ctx.set_text_align("right");
    let (baseline, dy) = if y < MARGIN_TOP + 14.0 {
        ("top", 3.0)
    } else {
        ("bottom", -3.0)
    };
    ctx.set_text_baseline(baseline);
    ctx.set_font("bold 11px system-ui, sans-serif");
    ctx.set_fill_style_str(c.capacity_line);
    let _ = ctx.fill_text(label, MARGIN_LEFT + vp.width_px - 4.0, y + dy);
    ctx.set_font("11px system-ui, sans-serif");
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
    let mut p = CanvasPainter {
        ctx: &ctx,
        ox: MARGIN_LEFT,
        oy: 0.0,
        paint_ms: 0.0,
    };
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
