//! The timeline as an SVG document: [`SvgPainter`] is a [`Surface`] the whole picture
//! ([`draw_picture`]: grid, axes, bands, markers, search outlines, reserved and capacity lines,
//! labels) is drawn on, as the canvas is, so an exported picture holds exactly what is drawn on
//! screen at that zoom, in the caller's colours ([`SvgTheme`]).

use super::paint::{Painter, Style};
use super::picture::{draw_picture, Anchor, Baseline, Ink, Picture, Surface, Text};
use super::render::RenderStats;
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

/// The caller's colours and text measure.
pub struct SvgTheme<'a> {
    pub paint: &'a dyn Fn(Style) -> Paint,
    pub ink: &'a dyn Fn(Ink) -> String,
    /// Width of a text in pixels (11 px sans-serif, bold or not); [`approx_text_width`] where
    /// nothing measures.
    pub text_width: &'a dyn Fn(&str, bool) -> f64,
}

/// An 11 px sans-serif text's width without a font at hand (a little wide, so labels placed
/// after it do not overlap).
pub fn approx_text_width(text: &str, bold: bool) -> f64 {
    text.chars().count() as f64 * if bold { 6.6 } else { 6.2 }
}

/// Which part of the document is being written: before the plot, the plot (clipped), after.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    Before,
    Plot,
    After,
}

/// Writes the picture: each rectangle batch as a `<g class=…>` of `<rect>`s inside the clipped
/// plot group, lines, tick marks and texts as elements of their own class around it.
pub struct SvgPainter<'a> {
    parts: [String; 3],
    part: Part,
    plot: [f64; 4],
    theme: &'a SvgTheme<'a>,
    /// Band rectangles written (styles for which [`is_band`] holds).
    pub band_rects: usize,
}

impl<'a> SvgPainter<'a> {
    pub fn new(theme: &'a SvgTheme<'a>) -> SvgPainter<'a> {
        SvgPainter {
            parts: Default::default(),
            part: Part::Before,
            plot: [0.0; 4],
            theme,
            band_rects: 0,
        }
    }

    fn out(&mut self) -> &mut String {
        &mut self.parts[self.part as usize]
    }

    /// The document's body: what was drawn before the plot, the plot group (clipped, carrying
    /// `stats` as data attributes), what was drawn after it.
    pub fn finish(self, stats: &RenderStats) -> String {
        let [before, plot, after] = self.parts;
        let [x, y, w, h] = self.plot;
        format!(
            "{before}<clipPath id=\"plot-area\"><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\"/></clipPath>\n\
             <g class=\"plot\" clip-path=\"url(#plot-area)\" data-bands=\"{}\" data-rects=\"{}\" data-band-rects=\"{}\">\n{plot}</g>\n{after}",
            stats.elements_visited, stats.rects, self.band_rects
        )
    }
}

impl Painter for SvgPainter<'_> {
    fn rects(&mut self, style: Style, xywh: &[f32]) {
        if xywh.len() < 4 {
            return;
        }
        let p = (self.theme.paint)(style);
        let fill = p.fill.as_deref().unwrap_or("none");
        let (ox, oy) = (self.plot[0] as f32, self.plot[1] as f32);
        let out = &mut self.parts[self.part as usize];
        let _ = write!(
            out,
            "<g class=\"{}\" fill=\"{fill}\" opacity=\"{}\"",
            style_class(style),
            p.alpha
        );
        if let Some((c, w)) = &p.stroke {
            let _ = write!(out, " stroke=\"{c}\" stroke-width=\"{w}\"");
        }
        out.push_str(">\n");
        for r in xywh.chunks_exact(4) {
            let _ = writeln!(
                out,
                "<rect x=\"{:.2}\" y=\"{:.2}\" width=\"{:.2}\" height=\"{:.2}\"/>",
                ox + r[0],
                oy + r[1],
                r[2],
                r[3]
            );
        }
        out.push_str("</g>\n");
        if is_band(style) {
            self.band_rects += xywh.len() / 4;
        }
    }
}

impl Surface for SvgPainter<'_> {
    fn line(
        &mut self,
        class: &'static str,
        ink: Ink,
        from: (f64, f64),
        to: (f64, f64),
        dashed: bool,
    ) {
        let colour = (self.theme.ink)(ink);
        let dash = if dashed {
            " stroke-dasharray=\"3 3\""
        } else {
            ""
        };
        let _ = writeln!(
            self.out(),
            "<line class=\"{class}\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{colour}\" stroke-width=\"1\"{dash}/>",
            from.0, from.1, to.0, to.1
        );
    }

    fn fill(&mut self, class: &'static str, ink: Ink, [x, y, w, h]: [f64; 4]) {
        let colour = (self.theme.ink)(ink);
        let _ = writeln!(
            self.out(),
            "<rect class=\"{class}\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{h:.1}\" fill=\"{colour}\"/>"
        );
    }

    fn text(&mut self, t: &Text<'_>) {
        let colour = (self.theme.ink)(t.ink);
        let anchor = match t.anchor {
            Anchor::Start => "start",
            Anchor::Middle => "middle",
            Anchor::End => "end",
        };
        // The canvas's `textBaseline` top/middle/bottom are the em box's edges and middle.
        let baseline = match t.baseline {
            Baseline::Top => "text-before-edge",
            Baseline::Middle => "central",
            Baseline::Bottom => "text-after-edge",
        };
        let bold = if t.bold { " font-weight=\"bold\"" } else { "" };
        let _ = writeln!(
            self.out(),
            "<text class=\"{}\" x=\"{:.1}\" y=\"{:.1}\" fill=\"{colour}\" text-anchor=\"{anchor}\" dominant-baseline=\"{baseline}\"{bold}>{}</text>",
            t.class,
            t.x,
            t.y,
            escape(t.text)
        );
    }

    fn text_width(&mut self, text: &str, bold: bool) -> f64 {
        (self.theme.text_width)(text, bold)
    }

    fn clip(&mut self, xywh: [f64; 4]) {
        self.plot = xywh;
        self.part = Part::Plot;
    }

    fn unclip(&mut self) {
        self.part = Part::After;
    }
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

/// Draws `p` as an SVG document (the plot plus its margins) on the theme's background, with a
/// caption (`title`).
pub fn timeline_svg(p: &Picture<'_>, title: &str, theme: &SvgTheme<'_>) -> TimelineSvg {
    let m = p.margins;
    let w = p.vp.width_px + m.left + m.right;
    let h = p.vp.height_px + m.top + m.bottom;
    let mut painter = SvgPainter::new(theme);
    let stats = draw_picture(p, &mut painter);
    let band_rects = painter.band_rects;
    let body = painter.finish(&stats);
    let svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" font-family=\"system-ui, sans-serif\" font-size=\"11\">\n\
         <title>{}</title>\n<rect class=\"background\" width=\"100%\" height=\"100%\" fill=\"{}\"/>\n{body}</svg>\n",
        escape(title),
        (theme.ink)(Ink::Background)
    );
    TimelineSvg {
        svg,
        stats,
        band_rects,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::lines::fit_with_lines;
    use crate::layout::picture::Margins;
    use crate::layout::render::{render_timeline, RenderOptions, Viewport};
    use crate::layout::{Matches, RecordingPainter, TimelineKind, TimelineLayout};

    const M: Margins = Margins {
        left: 76.0,
        right: 12.0,
        top: 18.0,
        bottom: 24.0,
    };

    fn paint(s: Style) -> Paint {
        Paint {
            fill: Some(if is_band(s) { "#4e79a7" } else { "#333333" }.to_string()),
            stroke: None,
            alpha: 1.0,
        }
    }

    fn ink(i: Ink) -> String {
        format!("{i:?}")
    }

    const THEME: SvgTheme<'static> = SvgTheme {
        paint: &paint,
        ink: &ink,
        text_width: &approx_text_width,
    };

    fn fixture(name: &str) -> crate::Snapshot {
        let path = memlens_fixture::fixtures_dir().join(name);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let bytes = memlens_fixture::build(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        crate::load(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// The bands of `l` in `vp`, nothing else asked for.
    fn bands_only<'a>(l: &'a TimelineLayout, vp: &'a Viewport) -> Picture<'a> {
        Picture {
            layout: l,
            vp,
            margins: M,
            render: RenderOptions::default(),
            reserved: None,
            capacity: None,
        }
    }

    /// The elements of class `class` in `svg` (tag `<tag class="class"`).
    fn count(svg: &str, tag: &str, class: &str) -> usize {
        svg.matches(&format!("<{tag} class=\"{class}\"")).count()
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
        let p = bands_only(&l, &vp);
        let out = timeline_svg(&p, "a <title>", &THEME);
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
        assert!(out.svg.contains("fill=\"Background\""));
    }

    /// Everything the canvas draws besides the bands is in the file, where the canvas puts it:
    /// the surface records the same calls for both.
    #[test]
    fn lines_labels_and_outlines_are_in_the_svg() {
        let s = fixture("oom.txt");
        let active = TimelineLayout::build(&s, 0, TimelineKind::Active);
        let segs = TimelineLayout::build(&s, 0, TimelineKind::Segments);
        let cap = 2u64 << 30;
        let x1 = active.x_end() as f64;
        let vp = fit_with_lines(&active, Some(&segs), Some(cap), (0.0, x1), (600.0, 300.0));
        // The 20 MiB allocation `t` (element 1) is a search match.
        let matches = Matches::new(&active, vec![0b10]);
        let p = Picture {
            layout: &active,
            vp: &vp,
            margins: M,
            render: RenderOptions {
                matches: Some(&matches),
                ..RenderOptions::default()
            },
            reserved: Some(&segs),
            capacity: Some((cap, "A100 · headroom at peak 1004 MiB")),
        };
        let svg = timeline_svg(&p, "oom", &THEME).svg;
        assert_eq!(count(&svg, "g", "reserved-line"), 1, "{svg}");
        assert_eq!(count(&svg, "g", "capacity-line"), 1);
        assert_eq!(count(&svg, "g", "match"), 1);
        assert_eq!(count(&svg, "g", "match-rug"), 1);
        assert_eq!(count(&svg, "text", "capacity-label"), 1);
        assert!(svg.contains("font-weight=\"bold\">A100 · headroom at peak 1004 MiB</text>"));
        assert_eq!(count(&svg, "text", "trace-start-label"), 1);
        assert_eq!(count(&svg, "line", "trace-start"), 1);
        assert!(svg.contains("stroke-dasharray=\"3 3\""));
        assert!(count(&svg, "text", "axis-y") >= 3);
        assert_eq!(count(&svg, "text", "axis-y"), count(&svg, "line", "grid"));
        assert!(count(&svg, "text", "axis-x") >= 2);
        assert_eq!(count(&svg, "text", "axis-x"), count(&svg, "rect", "tick"));
        assert!(svg.contains(">event</text>"));
        // The capacity's words sit 3 px above its line, at the plot's right end.
        let y = M.top + vp.y_px(cap as f64) - 3.0;
        let at = format!(
            "<text class=\"capacity-label\" x=\"{:.1}\" y=\"{y:.1}\"",
            M.left + 600.0 - 4.0
        );
        assert!(svg.contains(&at), "{at} not in {svg}");
        // Lines and outlines are inside the clipped plot, labels outside it (the capacity's
        // words are the first thing drawn after the plot).
        let a = svg.find("<g class=\"plot\"").unwrap_or(0);
        let b = svg.find("<text class=\"capacity-label\"").unwrap_or(0);
        assert!(a < b);
        let plot = &svg[a..b];
        for class in ["capacity-line", "reserved-line", "match", "trace-start"] {
            assert!(plot.contains(&format!("class=\"{class}\"")), "{class}");
        }
        assert!(!plot.contains("<text"));
    }

    #[test]
    fn region_labels_are_written_where_there_is_room() {
        let s = fixture("p5_snapshot.txt");
        let l = TimelineLayout::build(&s, 0, TimelineKind::Active);
        assert!(!l.regions.is_empty());
        let vp = Viewport::fit(&l, 2.0, l.x_end() as f64, 800.0, 300.0);
        let p = bands_only(&l, &vp);
        let svg = timeline_svg(&p, "p5", &THEME).svg;
        assert!(svg.contains(">## prefill ##</text>"), "{svg}");
        assert_eq!(count(&svg, "text", "trace-start-label"), 0);
        assert_eq!(count(&svg, "line", "trace-start"), 0);
    }
}
