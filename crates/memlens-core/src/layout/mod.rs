//! Stage 3, layout: pure geometry in data space (x = trace event, y = bytes) for the viewer's
//! timelines, with level of detail and hit testing, drawn through the [`paint::Painter`] seam.
//! No pixels are stored and nothing here knows about canvases; tests use
//! [`paint::RecordingPainter`].

pub mod axis;
mod bands;
mod columns;
pub mod context;
mod elements;
pub mod lines;
mod lod;
mod markers;
mod max_tree;
pub mod paint;
mod pairing;
pub mod picture;
mod pools;
mod preview;
mod query;
pub mod render;
pub mod ruler;
pub mod search;
pub mod shared_axis;
mod stacking;
pub mod svg;
pub mod timeline;
mod tolerance;

pub use paint::{Painter, RecordingPainter, Style};
pub use pools::PoolResolver;
pub use render::{
    render_overview, render_timeline, BandFilter, RenderOptions, RenderStats, TimeMap, Viewport,
};
pub use search::{AddressLabels, Matches, SearchIndex, SearchQuery};
pub use timeline::{
    ElementKind, Elements, Marker, MarkerKind, Origin, Region, TimelineKind, TimelineLayout,
};

#[cfg(test)]
mod tests;
