//! The timeline as an SVG document, drawn through the same seam as the canvas: the caller's
//! viewport and `render_timeline` feed an [`SvgPainter`], so an exported picture holds exactly
//! the bands drawn on screen at that zoom, in the caller's colours ([`Paint`] per [`Style`]);
//! the byte axis and the x axis (events or time) come from `axis`, as on the canvas.

use super::axis::bytes_ticks;
use super::paint::{Painter, Style};
use super::render::{render_timeline, RenderOptions, RenderStats, Viewport};
use super::timeline::TimelineLayout;
use std::fmt::Write;

/// How a style is drawn: fill colour, outline (colour, width) and opacity.
#[derive(Debug, Clone, PartialEq)]
pub struct Paint {
    pub fill: Option<String>,
    pub stroke: Option<(String, f64)>,
    pub alpha: f64,
}

/// The class an SVG group of a style carries (`band`, `band-before-trace`, `marker-annotate`,
/// ...): what a reader of the file (or a test) counts.
pub fn style_class(style: Style) -> &'static str {
    match style {
        Style::Band(_) => "band",
        Style::BandBeforeTrace(_) => "band-before-trace",
        Style::Thin => "thin",
        Style::Selected => "selected",
        Style::Match => "match",
        Style::MatchRug => "match-rug",
        Style::PoolEnvelope => "pool-envelope",
        Style::Overview => "overview",
        Style::Region => "region",
        Style::MarkerOom => "marker-oom",
        Style::MarkerSnapshot => "marker-snapshot",
        Style::MarkerAnnotate => "marker-annotate",
        Style::ReservedLine => "reserved-line",
        Style::Capacity => "capacity-line",
    }
}

/// Whether a style draws allocation bands (what "bands drawn" counts).
pub fn is_band(style: Style) -> bool {
    matches!(
        style,
        Style::Band(_) | Style::BandBeforeTrace(_) | Style::PoolEnvelope
    )
}

/// Writes each batch as a `<g class=…>` of `<rect>`s, offset by the plot's margins.
pub struct SvgPainter<'a> {
    out: String,
    ox: f32,
    oy: f32,
    paint: &'a dyn Fn(Style) -> Paint,
    /// Band rectangles written (styles for which [`is_band`] holds).
    pub band_rects: usize,
}

impl<'a> SvgPainter<'a> {
    pub fn new(ox: f32, oy: f32, paint: &'a dyn Fn(Style) -> Paint) -> SvgPainter<'a> {
        SvgPainter {
            out: String::new(),
            ox,
            oy,
            paint,
            band_rects: 0,
        }
    }

    pub fn finish(self) -> String {
        self.out
    }
}

impl Painter for SvgPainter<'_> {
    fn rects(&mut self, style: Style, xywh: &[f32]) {
        if xywh.len() < 4 {
            return;
        }
        let p = (self.paint)(style);
        let fill = p.fill.as_deref().unwrap_or("none");
        let _ = write!(
            self.out,
            "<g class=\"{}\" fill=\"{fill}\" opacity=\"{}\"",
            style_class(style),
            p.alpha
        );
        if let Some((c, w)) = &p.stroke {
            let _ = write!(self.out, " stroke=\"{c}\" stroke-width=\"{w}\"");
        }
        self.out.push_str(">\n");
        for r in xywh.chunks_exact(4) {
            let _ = writeln!(
                self.out,
                "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{:.2}\"/>",
                self.ox + r[0],
                self.oy + r[1],
                r[2],
                r[3]
            );
        }
        if is_band(style) {
            self.band_rects += xywh.len() / 4;
        }
        self.out.push_str("</g>\n");
    }
}

/// Space around the plot, as on the canvas.
#[derive(Debug, Clone, Copy)]
pub struct Margins {
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
}

/// A timeline picture: the document, what the render cost and the band rectangles it holds.
pub struct TimelineSvg {
    pub svg: String,
    pub stats: RenderStats,
    pub band_rects: usize,
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Draws `layout` in viewport `vp` (the plot; the document is the plot plus `m`) as SVG, with
/// the same render as the canvas and a caption (`title`).
pub fn timeline_svg(
    layout: &TimelineLayout,
    vp: &Viewport,
    opts: RenderOptions<'_>,
    m: Margins,
    title: &str,
    paint: &dyn Fn(Style) -> Paint,
) -> TimelineSvg {
    let (pw, ph) = (vp.width_px, vp.height_px);
    let (w, h) = (pw + m.left + m.right, ph + m.top + m.bottom);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" font-family=\"system-ui, sans-serif\" font-size=\"11\">"
    );
    let _ = writeln!(s, "<title>{}</title>", escape(title));
    let _ = writeln!(s, "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>");
    s.push_str("<g class=\"axis-y\" text-anchor=\"end\" fill=\"#444444\">\n");
    for t in bytes_ticks(vp.y0_bytes, vp.y1_bytes, (ph / 45.0).max(2.0) as usize) {
        let y = (m.top + vp.y_px(t.value)).round() + 0.5;
        let _ = writeln!(
            s,
            "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e6e6e6\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            m.left,
            m.left + pw,
            m.left - 6.0,
            y + 4.0,
            escape(&t.label)
        );
    }
    s.push_str("</g>\n<g class=\"axis-x\" text-anchor=\"middle\" fill=\"#444444\">\n");
    let ticks = vp.x_ticks();
    for (px, label) in ticks {
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            m.left + px,
            m.top + ph + 16.0,
            escape(&label)
        );
    }
    s.push_str("</g>\n");
    let mut p = SvgPainter::new(m.left as f32, m.top as f32, paint);
    let stats = render_timeline(layout, vp, opts, &mut p);
    let band_rects = p.band_rects;
    let body = p.finish();
    // Clipped to the plot, as the canvas is.
    let _ = writeln!(
        s,
        "<clipPath id=\"plot-area\"><rect x=\"{:.1}\" y=\"{:.1}\" width=\"{pw:.1}\" height=\"{ph:.1}\"/></clipPath>",
        m.left, m.top
    );
    let _ = writeln!(
        s,
        "<g class=\"plot\" clip-path=\"url(#plot-area)\" data-bands=\"{}\" data-rects=\"{}\" data-band-rects=\"{band_rects}\">\n{body}</g>\n</svg>",
        stats.elements_visited,
        stats.rects
    );
    TimelineSvg {
        svg: s,
        stats,
        band_rects,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{RecordingPainter, TimelineKind};

    fn paint(s: Style) -> Paint {
        Paint {
            fill: Some(if is_band(s) { "#4e79a7" } else { "#333333" }.to_string()),
            stroke: None,
            alpha: 1.0,
        }
    }

    #[test]
    fn the_svg_holds_the_bands_the_canvas_draws() {
        let text = "stack a \"m.py:1:f\"\nalloc x 0x7f0000000000 4MiB frames=@a\nalloc y 0x7f0000400000 2MiB frames=@a\nfree x\nsnapshot\n";
        let bytes = memlens_fixture::build(text).unwrap_or_else(|e| panic!("{e}"));
        let snap = crate::load(&bytes).unwrap_or_else(|e| panic!("{e}"));
        let l = TimelineLayout::build(&snap, 0, TimelineKind::Active);
        let vp = Viewport::fit(&l, 0.0, l.x_end() as f64, 800.0, 300.0);
        let mut rec = RecordingPainter::default();
        render_timeline(&l, &vp, RenderOptions::default(), &mut rec);
        let want: usize = rec
            .batches
            .iter()
            .filter(|(s, _)| is_band(*s))
            .map(|(_, r)| r.len())
            .sum();
        let m = Margins {
            left: 76.0,
            right: 12.0,
            top: 18.0,
            bottom: 24.0,
        };
        let out = timeline_svg(&l, &vp, RenderOptions::default(), m, "a <title>", &paint);
        assert!(want > 0);
        assert_eq!(out.band_rects, want);
        let rects_in_band_groups: usize = out
            .svg
            .split("<g class=\"")
            .filter(|g| g.starts_with("band"))
            .map(|g| g.matches("<rect").count())
            .sum();
        assert_eq!(rects_in_band_groups, want);
        assert!(out.svg.contains("<title>a &lt;title&gt;</title>"));
        assert!(out.svg.contains("class=\"marker-snapshot\""));
        assert!(out
            .svg
            .starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(out.svg.trim_end().ends_with("</svg>"));
    }
}
