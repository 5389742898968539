//! The painter seam: layouts emit batches of pixel rectangles per style, a canvas painter in
//! `web/` draws them, and [`RecordingPainter`] records them so tests can check what would be
//! drawn without a browser.

/// How a batch of rectangles is drawn. The web painter maps each to a colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Style {
    /// An allocation band, coloured by palette index: `0..CATEGORICAL_LEN` upstream's
    /// tableau10 in its order, then `RAMP_LEN` steps of a dark-to-light ramp.
    Band(u8),
    /// A band of memory allocated before the trace (drawn paler, with the same palette).
    BandBeforeTrace(u8),
    /// The underlay: each pixel column filled up to its highest live total, which is what is
    /// left of the bands too thin or too short-lived to draw one by one.
    Thin,
    /// Outline of the pinned element.
    Selected,
    /// Outline of elements matching a search.
    Match,
    /// Marks along the top of the plot where a search match is alive.
    MatchRug,
    /// A private pool's envelope (Allocated view), drawn under its allocations.
    PoolEnvelope,
    /// Live-total area of the overview (minimap).
    Overview,
    /// Shaded `external_annotations` region.
    Region,
    /// Vertical marker lines.
    MarkerOom,
    MarkerSnapshot,
    MarkerAnnotate,
    /// Reserved memory over time (a step line, drawn over the bands).
    ReservedLine,
    /// The device's capacity (a horizontal line).
    Capacity,
}

/// Categorical palette colours (tableau10); bands cycle through them by default.
pub const CATEGORICAL_LEN: u8 = 10;
/// Steps of the ramp after them (sizes, allocation order).
pub const RAMP_LEN: u8 = 8;
/// Palette indices a band may have.
pub const PALETTE_LEN: u8 = CATEGORICAL_LEN + RAMP_LEN;

/// Something that draws rectangles, given as packed `[x, y, w, h]` quads in CSS pixels.
pub trait Painter {
    fn rects(&mut self, style: Style, xywh: &[f32]);
}

/// Records every batch (for tests).
#[derive(Debug, Default, Clone)]
pub struct RecordingPainter {
    pub batches: Vec<(Style, Vec<[f32; 4]>)>,
}

impl Painter for RecordingPainter {
    fn rects(&mut self, style: Style, xywh: &[f32]) {
        let quads = xywh
            .chunks_exact(4)
            .map(|c| [c[0], c[1], c[2], c[3]])
            .collect();
        self.batches.push((style, quads));
    }
}

impl RecordingPainter {
    /// All rectangles drawn with `style`.
    pub fn of(&self, style: Style) -> Vec<[f32; 4]> {
        self.batches
            .iter()
            .filter(|(s, _)| *s == style)
            .flat_map(|(_, r)| r.iter().copied())
            .collect()
    }
    /// Total number of rectangles (the draw cost).
    pub fn count(&self) -> usize {
        self.batches.iter().map(|(_, r)| r.len()).sum()
    }
    /// Number of `rects` calls.
    pub fn calls(&self) -> usize {
        self.batches.len()
    }
}
