//! Opening part of a snapshot without holding the rest: [`PartLoader`] gives what
//! [`super::slice`] gives of the whole snapshot, but removes the trace rows before the part
//! while decoding (`raw::window`), so a file whose whole trace does not fit in memory (a tab's
//! 4 GiB of wasm memory) still opens with `#range=` or `--last`.
//!
//! What can go while decoding: for the last N events, every row of a device but its last N
//! (so far); for `FROM..`, the rows before FROM. A range that ends early (`FROM..TO`) takes
//! its segments from the Allocator State History rebuilt backward over the rows after it,
//! and a segment's stack from its `segment_alloc` event, which may lie before FROM: it
//! decodes everything first, and so does a time range (measured from the first event of the
//! whole snapshot, not known before the end).

use super::{slice, EventRange, RangeError};
use crate::error::DecodeError;
use crate::loader::{feed_reader, LoadError, Loader};
use crate::model::Snapshot;
use crate::raw::{RowWindow, DROP_EVERY_ROWS};
use thiserror::Error;

/// Why a part could not be opened.
#[derive(Debug, Error)]
pub enum PartError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Range(#[from] RangeError),
}

/// A [`Loader`] that keeps only the part `range` selects (the whole snapshot without one).
pub struct PartLoader {
    loader: Loader,
    range: Option<EventRange>,
}

impl PartLoader {
    pub fn new(total_len: Option<u64>, range: Option<EventRange>) -> PartLoader {
        PartLoader::removing_every(total_len, range, DROP_EVERY_ROWS)
    }

    /// [`PartLoader::new`] with rows removed in passes once `every_rows` are held (tests use
    /// small files).
    pub fn removing_every(
        total_len: Option<u64>,
        range: Option<EventRange>,
        every_rows: usize,
    ) -> PartLoader {
        let mut loader = Loader::new(total_len);
        if let Some(w) = range.as_ref().and_then(window) {
            loader.keep_rows(w, every_rows);
        }
        PartLoader { loader, range }
    }

    /// Reads `r` to its end and gives the part ([`crate::load_reader`] of a part).
    pub fn read_all(mut self, r: impl std::io::Read) -> Result<Snapshot, PartError> {
        feed_reader(r, |c| self.push(c))?;
        self.finish()
    }

    /// Trace rows held now (see [`Loader::rows_held`]).
    pub fn rows_held(&self) -> usize {
        self.loader.rows_held()
    }

    pub fn push(&mut self, chunk: &[u8]) -> Result<(), DecodeError> {
        self.loader.push(chunk)
    }

    /// [`Loader::with_prefix`] of a whole snapshot; `None` for a part (its rows so far are not
    /// yet the part's).
    pub fn with_prefix<R>(&mut self, f: impl FnOnce(&Snapshot) -> R) -> Option<R> {
        match self.range {
            Some(_) => None,
            None => self.loader.with_prefix(f),
        }
    }

    /// What the decoder has read and holds so far (see [`Loader::head_shape`]).
    pub fn head_shape(&self) -> Option<crate::estimate::HeadShape> {
        self.loader.head_shape()
    }

    /// Bytes pushed so far.
    pub fn bytes_in(&self) -> u64 {
        self.loader.bytes_in()
    }

    /// The part (equal to [`slice`] of the whole snapshot by the same range).
    pub fn finish(self) -> Result<Snapshot, PartError> {
        let (s, windowed) = self.loader.finish_windowed()?;
        Ok(match self.range {
            // What is left to cut: event indices count from the window's first row.
            Some(r) if windowed => slice(s, &shifted(r))?,
            Some(r) => slice(s, &r)?,
            None => s,
        })
    }
}

/// The rows that may go while decoding for `range` (`None`: all must be read).
fn window(range: &EventRange) -> Option<RowWindow> {
    match *range {
        EventRange::Last(n) => Some(RowWindow::Last(n)),
        EventRange::Events { from, to: None } if from > 0 => Some(RowWindow::From(from)),
        _ => None,
    }
}

/// `range` over a trace whose rows before the window's first are gone.
fn shifted(range: EventRange) -> EventRange {
    match range {
        EventRange::Events { from, to } => EventRange::Events {
            from: 0,
            to: to.map(|t| t.saturating_sub(from)),
        },
        r => r,
    }
}
