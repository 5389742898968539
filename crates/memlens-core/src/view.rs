//! The viewer's views, with upstream's names so users find their way, and their keys in the URL
//! hash (`#view=state`): one definition for the page and for `memlens html --view`.

use crate::layout::TimelineKind;

/// The views, with upstream's names so users find their way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum View {
    Timeline,
    Allocated,
    State,
    Segments,
    Settings,
    Diagnosis,
    Overview,
    Compare,
}

impl View {
    /// In upstream's menu order.
    pub const ALL: [View; 8] = [
        View::Timeline,
        View::Allocated,
        View::State,
        View::Segments,
        View::Settings,
        View::Diagnosis,
        View::Overview,
        View::Compare,
    ];

    /// The URL hash value.
    pub fn key(self) -> &'static str {
        match self {
            View::Timeline => "timeline",
            View::Allocated => "allocated",
            View::State => "state",
            View::Segments => "segments",
            View::Settings => "settings",
            View::Diagnosis => "diagnosis",
            View::Overview => "overview",
            View::Compare => "compare",
        }
    }
    pub fn from_key(s: &str) -> Option<View> {
        View::ALL.into_iter().find(|v| v.key() == s)
    }
    pub fn title(self) -> &'static str {
        match self {
            View::Timeline => "Active Memory Timeline",
            View::Allocated => "Allocated Memory (incl. Private Pools)",
            View::State => "Allocator State History",
            View::Segments => "Active Cached Segment Timeline",
            View::Settings => "Allocator Settings",
            View::Diagnosis => "Diagnosis",
            View::Overview => "Files overview (ranks)",
            View::Compare => "Compare two files",
        }
    }
    /// Which stacked layout the view draws, if any.
    pub fn kind(self) -> Option<TimelineKind> {
        match self {
            View::Timeline => Some(TimelineKind::Active),
            View::Allocated => Some(TimelineKind::Allocated),
            View::Segments => Some(TimelineKind::Segments),
            View::State | View::Settings | View::Diagnosis | View::Overview | View::Compare => None,
        }
    }
}
