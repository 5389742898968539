//! The whole timeline picture, drawn once here through a [`Surface`]: the byte grid and its
//! labels, the x axis's labels and ticks and its caption, the bands with their markers and
//! search outlines (`render_timeline`), the reserved and capacity lines (`lines`), the dashed
//! start of the trace, the capacity's words and the labels above the plot. The canvas
//! (`web/src/page/canvas.rs`) and the SVG export ([`super::svg`]) are two surfaces, so every
//! line and label sits in the same place in both.

use super::axis::bytes_ticks;
use super::lines::render_lines;
use super::paint::Painter;
use super::render::{render_timeline, RenderOptions, RenderStats, Viewport};
use super::timeline::TimelineLayout;

/// Space around the plot for the axes, in CSS pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Margins {
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
}

/// What a line or a word is coloured as; the caller's theme says the colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ink {
    Background,
    Grid,
    Text,
    TextMuted,
    Tick,
    RegionText,
    Capacity,
}

/// Which point of a text its position names, horizontally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

/// ... and vertically (the em box's top, middle or bottom, as the canvas's `textBaseline`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    Top,
    Middle,
    Bottom,
}

/// A text to write, at a point of the whole picture (margins included).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Text<'a> {
    /// What it is (`axis-y`, `axis-x`, `axis-caption`, `capacity-label`, `trace-start-label`,
    /// `region-label`, `no-trace-label`): the SVG's class, what a reader counts.
    pub class: &'static str,
    pub x: f64,
    pub y: f64,
    pub text: &'a str,
    pub ink: Ink,
    pub anchor: Anchor,
    pub baseline: Baseline,
    pub bold: bool,
}

/// Something the picture is drawn on. Its [`Painter`] draws the plot's rectangles relative to
/// the plot's corner; everything else is in picture coordinates.
pub trait Surface: Painter {
    /// A one-pixel line (`class` as in [`Text::class`]: `grid`, `trace-start`).
    fn line(
        &mut self,
        class: &'static str,
        ink: Ink,
        from: (f64, f64),
        to: (f64, f64),
        dashed: bool,
    );
    /// A filled rectangle (the x axis's tick marks: `class` `tick`).
    fn fill(&mut self, class: &'static str, ink: Ink, xywh: [f64; 4]);
    fn text(&mut self, t: &Text<'_>);
    /// How wide `text` is written, in pixels (11 px sans-serif, bold or not).
    fn text_width(&mut self, text: &str, bold: bool) -> f64;
    /// Until [`Surface::unclip`], drawing is clipped to the plot `xywh`.
    fn clip(&mut self, xywh: [f64; 4]);
    fn unclip(&mut self);
}

/// What one timeline picture shows.
#[derive(Debug, Clone, Copy)]
pub struct Picture<'a> {
    pub layout: &'a TimelineLayout,
    /// The plot (without margins) and the data window it shows.
    pub vp: &'a Viewport,
    pub margins: Margins,
    pub render: RenderOptions<'a>,
    /// The device's Segments layout, whose live total is the reserved line.
    pub reserved: Option<&'a TimelineLayout>,
    /// The capacity line: bytes, and the words at its right end (name, headroom at the peak).
    pub capacity: Option<(u64, &'a str)>,
}

/// The byte axis's ticks for a plot `height_px` tall: one every 45 px or so.
fn y_tick_count(height_px: f64) -> usize {
    (height_px / 45.0).max(2.0) as usize
}

/// Draws `p` on `s`; returns what drawing the bands cost.
pub fn draw_picture(p: &Picture<'_>, s: &mut impl Surface) -> RenderStats {
    let (m, vp) = (p.margins, p.vp);
    y_axis(p, s);
    x_axis(p, s);
    s.clip([m.left, m.top, vp.width_px, vp.height_px]);
    let stats = render_timeline(p.layout, vp, p.render, s);
    render_lines(p.reserved, p.capacity.map(|c| c.0), vp, s);
    // Memory from before the trace: everything left of x = 1.
    if vp.x0 < 1.0 {
        let x = (m.left + vp.x_px(1.0)).round() + 0.5;
        let (top, bottom) = (m.top, m.top + vp.height_px);
        s.line("trace-start", Ink::TextMuted, (x, top), (x, bottom), true);
    }
    s.unclip();
    if let Some((bytes, words)) = p.capacity {
        capacity_label(p, bytes, words, s);
    }
    labels_above(p, s);
    stats
}

/// Grid lines and binary-unit labels of the byte axis.
fn y_axis(p: &Picture<'_>, s: &mut impl Surface) {
    let (m, vp) = (p.margins, p.vp);
    for t in bytes_ticks(vp.y0_bytes, vp.y1_bytes, y_tick_count(vp.height_px)) {
        let y = (m.top + vp.y_px(t.value)).round() + 0.5;
        s.line(
            "grid",
            Ink::Grid,
            (m.left, y),
            (m.left + vp.width_px, y),
            false,
        );
        s.text(&Text {
            class: "axis-y",
            x: m.left - 6.0,
            y,
            text: &t.label,
            ink: Ink::Text,
            anchor: Anchor::End,
            baseline: Baseline::Middle,
            bold: false,
        });
    }
}

/// x labels and tick marks (trace event indices, event i at x = i + 1, or time since the first
/// event), and the axis's caption at its left end.
fn x_axis(p: &Picture<'_>, s: &mut impl Surface) {
    let (m, vp) = (p.margins, p.vp);
    let below = m.top + vp.height_px;
    for (px, label) in vp.x_ticks() {
        let x = m.left + px;
        // Not under the axis caption at the left edge, nor past the right edge.
        if x < m.left + 12.0 || x > m.left + vp.width_px - 18.0 {
            continue;
        }
        s.text(&Text {
            class: "axis-x",
            x,
            y: below + 5.0,
            text: &label,
            ink: Ink::Text,
            anchor: Anchor::Middle,
            baseline: Baseline::Top,
            bold: false,
        });
        s.fill("tick", Ink::Tick, [x.round(), below, 1.0, 4.0]);
    }
    s.text(&Text {
        class: "axis-caption",
        x: m.left - 6.0,
        y: below + 5.0,
        text: if vp.time().is_some() { "time" } else { "event" },
        ink: Ink::TextMuted,
        anchor: Anchor::End,
        baseline: Baseline::Top,
        bold: false,
    });
}

/// The capacity line's words, at its right end just above it (below it when at the top).
fn capacity_label(p: &Picture<'_>, bytes: u64, words: &str, s: &mut impl Surface) {
    let (m, vp) = (p.margins, p.vp);
    let y = m.top + vp.y_px(bytes as f64);
    let (baseline, dy) = if y < m.top + 14.0 {
        (Baseline::Top, 3.0)
    } else {
        (Baseline::Bottom, -3.0)
    };
    s.text(&Text {
        class: "capacity-label",
        x: m.left + vp.width_px - 4.0,
        y: y + dy,
        text: words,
        ink: Ink::Capacity,
        anchor: Anchor::End,
        baseline,
        bold: true,
    });
}

/// Above the plot: what is left of the dashed line (or that there is no trace), then the
/// labels of the annotation regions in view, each where there is room.
fn labels_above(p: &Picture<'_>, s: &mut impl Surface) {
    let (m, vp, layout) = (p.margins, p.vp, p.layout);
    let y = m.top - 3.0;
    let above = |class, x, text, ink| Text {
        class,
        x,
        y,
        text,
        ink,
        anchor: Anchor::Start,
        baseline: Baseline::Bottom,
        bold: false,
    };
    // Region labels start after whatever is written here.
    let mut last_end = f64::NEG_INFINITY;
    if layout.n_events == 0 {
        let text = "no trace events: the snapshot's active blocks, all allocated before any trace";
        s.text(&above("no-trace-label", m.left, text, Ink::TextMuted));
    } else if vp.x0 < 1.0 {
        // Left of the dashed line: before the first event. Pale bands were allocated before it.
        let x = m.left + vp.x_px(1.0) - 3.0;
        let text = "┆ trace starts (pale bands: allocated before it)";
        s.text(&above("trace-start-label", x, text, Ink::TextMuted));
        last_end = x + s.text_width(text, false);
    }
    for r in &layout.regions {
        if r.x1 <= vp.x0 || r.x0 >= vp.x1 {
            continue;
        }
        let a = m.left + vp.x_px(r.x0.max(vp.x0));
        if a > last_end + 4.0 && a < m.left + vp.width_px - 40.0 {
            s.text(&above("region-label", a + 2.0, &r.label, Ink::RegionText));
            last_end = a + s.text_width(&r.label, false);
        }
    }
}
