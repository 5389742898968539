//! The Compare view's part of the page's one state (`AppState::compare`): the side picked as
//! A, the workers' answers for each side (at its peak, and at the cursor's moment; the view
//! combines two through core's `analysis::compare`),
//! the cursor in shared-axis units (`memlens_core::layout::shared_axis`), and the frame whose
//! bands are highlighted in both timelines with the matches that frame search found, and
//! whether both timelines have painted once (until then the workers hold their unasked work
//! and the peaks are not asked for: `crate::page::compare_view`). Which
//! sides are compared, the shared window (`AppState::window`) and the axis
//! (`AppState::time_axis`) live in the page's state, which knows the open files.

use crate::wire::protocol::CompareSide;
use memlens_core::analysis::compare::{MomentGroups, PeakGroups};
use memlens_core::layout::Matches;
use std::collections::HashMap;
use std::rc::Rc;

/// Highlight searches are numbered from here, apart from the timeline search's sequence.
const HIGHLIGHT_SEQ_BASE: u32 = 1 << 31;

/// Where the cursor stands: shared-axis units, and the trace entry applied last there on
/// each side (`None`: before the first).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cursor {
    pub a: CompareSide,
    pub b: CompareSide,
    pub at: f64,
    pub a_event: Option<u32>,
    pub b_event: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompareState {
    /// The side picked as A (`None`: the default, see `AppState::compare_pair`).
    pub pick_a: Option<CompareSide>,
    /// Each side asked about at its timeline peak (`None` inside: its file was gone).
    pub peak_sides: HashMap<CompareSide, Option<Rc<PeakGroups>>>,
    /// Each side's latest moment answered: the event, and what was alive after it.
    pub moment_sides: HashMap<CompareSide, (Option<u32>, Option<Rc<MomentGroups>>)>,
    /// The cursor; it stays where the pointer left the timelines.
    pub cursor: Option<Cursor>,
    /// The frame (`file:line:name`) whose bands are outlined in both timelines.
    pub highlight: Option<String>,
    /// The sequence number of the highlight's searches.
    pub highlight_seq: u32,
    /// The highlight's matches, per side (layouts of the Active timeline).
    pub matches: HashMap<CompareSide, Rc<Matches>>,
    /// Both timelines have painted once.
    pub painted: bool,
}

pub enum CompareAction {
    Peak(CompareSide, Option<Rc<PeakGroups>>),
    Moment(CompareSide, Option<u32>, Option<Rc<MomentGroups>>),
    Cursor(Option<Cursor>),
    /// Outline this frame's bands (`None`: none).
    Highlight(Option<String>),
    /// Both timelines have painted.
    Painted,
}

impl CompareState {
    pub fn apply(&mut self, a: CompareAction) {
        match a {
            CompareAction::Peak(side, g) => {
                self.peak_sides.insert(side, g);
            }
            CompareAction::Moment(side, event, g) => {
                self.moment_sides.insert(side, (event, g));
            }
            CompareAction::Cursor(c) => self.cursor = c,
            CompareAction::Painted => self.painted = true,
            CompareAction::Highlight(f) => {
                if f != self.highlight {
                    self.highlight = f;
                    self.highlight_seq = HIGHLIGHT_SEQ_BASE | self.highlight_seq.wrapping_add(1);
                    self.matches.clear();
                }
            }
        }
    }

    /// Whether a search answer with `seq` is the highlight's.
    pub fn is_highlight_search(&self, seq: u32) -> bool {
        seq & HIGHLIGHT_SEQ_BASE != 0
    }

    /// Keeps a highlight search's matches when they answer the current highlight.
    pub fn take_matches(&mut self, side: CompareSide, seq: u32, m: Option<Matches>) {
        if seq == self.highlight_seq && self.highlight.is_some() {
            if let Some(m) = m {
                self.matches.insert(side, Rc::new(m));
            }
        }
    }

    /// Both sides at their peaks, once both answered (`None` inside: a file was gone).
    pub fn peaks_of(
        &self,
        a: CompareSide,
        b: CompareSide,
    ) -> Option<Option<(Rc<PeakGroups>, Rc<PeakGroups>)>> {
        let (x, y) = (self.peak_sides.get(&a)?, self.peak_sides.get(&b)?);
        Some(x.clone().zip(y.clone()))
    }

    /// The moments the cursor stands for, once both sides answered for it.
    pub fn moments_of(&self, c: &Cursor) -> Option<Option<(Rc<MomentGroups>, Rc<MomentGroups>)>> {
        let (x, y) = (self.moment_sides.get(&c.a)?, self.moment_sides.get(&c.b)?);
        ((x.0, y.0) == (c.a_event, c.b_event)).then(|| x.1.clone().zip(y.1.clone()))
    }
}
