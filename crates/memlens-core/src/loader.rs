//! Incremental loading: bytes arrive in chunks of any size (a file read natively, `Blob.slice`
//! in the browser's worker) and only the pickle machine's state is kept, never the whole file.
//! JSON and HTML inputs are collected whole (they are not streamable with serde_json).
//! With a [`RowWindow`] ([`Loader::keep_rows`]), a pickle's trace rows outside it are removed
//! between chunks, so only that part of each trace is ever held (`crate::range::PartLoader`).

use crate::error::DecodeError;
use crate::estimate::{HeadShape, Mark};
use crate::model::{normalize, Snapshot};
use crate::raw::{self, Encoding, PickleMachine, Progress, RowWindow, Sniff};
use std::io::Read;

enum State {
    /// Not enough bytes yet to tell the input form.
    Start(Vec<u8>),
    Pickle {
        m: Box<PickleMachine>,
        tail: Vec<u8>,
        done: bool,
    },
    Whole(Vec<u8>),
}

/// Feeds chunks in, then [`Loader::finish`] gives the snapshot.
pub struct Loader {
    state: State,
    bytes_in: u64,
    total_len: Option<u64>,
    /// Rows outside it go while decoding, in passes of at least this many rows.
    window: Option<(RowWindow, usize)>,
    /// The counts after the chunk that held the first trace entry, and each time the entries
    /// had doubled since the last such mark (see [`Loader::head_shape`]).
    marks: Vec<Mark>,
}

const SNIFF_BYTES: usize = 64;

impl Loader {
    /// `total_len`, when known, lets absurd length prefixes fail at once.
    pub fn new(total_len: Option<u64>) -> Self {
        Loader {
            state: State::Start(Vec::new()),
            bytes_in: 0,
            total_len,
            window: None,
            marks: Vec::new(),
        }
    }

    /// Keeps only the rows of each trace list inside `window` while decoding a pickle (the
    /// model's device traces then hold exactly those), removing the others in passes once the
    /// columns hold `every_rows` ([`raw::DROP_EVERY_ROWS`] unless testing). JSON and HTML
    /// inputs are read whole and ignore it.
    pub fn keep_rows(&mut self, window: RowWindow, every_rows: usize) {
        self.window = Some((window, every_rows));
    }

    /// Trace rows the decoder holds now (a pickle's; 0 before it is known to be one).
    pub fn rows_held(&self) -> usize {
        match &self.state {
            State::Pickle { m, .. } => m.arena.rows.len(),
            _ => 0,
        }
    }

    /// Bytes pushed so far.
    pub fn bytes_in(&self) -> u64 {
        self.bytes_in
    }

    /// What a pickle's decoder has read and holds so far, for [`crate::estimate::estimate`]
    /// (`None` before the input is known to be a pickle: JSON and HTML are read whole).
    pub fn head_shape(&self) -> Option<HeadShape> {
        let State::Pickle { m, .. } = &self.state else {
            return None;
        };
        let now = mark(m, self.bytes_in);
        let half = self
            .marks
            .iter()
            .rev()
            .find(|k| 2 * k.entries <= now.entries);
        Some(HeadShape {
            bytes_read: now.bytes_read,
            entries: now.entries,
            held_bytes: now.held_bytes,
            memo_bytes: now.memo_bytes,
            trace_start: self.marks.first().copied(),
            rate_from: half.copied(),
        })
    }

    pub fn push(&mut self, chunk: &[u8]) -> Result<(), DecodeError> {
        self.bytes_in += chunk.len() as u64;
        match &mut self.state {
            State::Start(head) => {
                head.extend_from_slice(chunk);
                // Leading whitespace says nothing (JSON may start with it): wait for a real byte.
                if head.len() >= SNIFF_BYTES && head.iter().any(|b| !b.is_ascii_whitespace()) {
                    let head = std::mem::take(head);
                    self.begin(head, false)?;
                }
                Ok(())
            }
            State::Pickle { m, tail, done } => {
                feed(m, tail, done, chunk, false)?;
                if let Some((w, every)) = self.window {
                    m.arena.keep_rows(w, every);
                }
                let entries = u64::from(m.arena.next_row_id());
                let last = self.marks.last().map_or(0, |k| k.entries);
                if entries > 0 && entries >= 2 * last {
                    self.marks.push(mark(m, self.bytes_in));
                }
                Ok(())
            }
            State::Whole(all) => {
                all.extend_from_slice(chunk);
                Ok(())
            }
        }
    }

    /// Lends `f` the model of what the bytes so far hold ([`crate::model::prefix`]: each
    /// device's trace up to its last entry read, no segments). `None` for JSON and HTML (read
    /// whole), before the form is known, and where the rows so far are not in device order
    /// ([`crate::raw::PickleMachine::trace_so_far`]).
    pub fn with_prefix<R>(&mut self, f: impl FnOnce(&Snapshot) -> R) -> Option<R> {
        let State::Pickle { m, .. } = &mut self.state else {
            return None;
        };
        let devices = m.trace_so_far()?;
        let encoding = Encoding::Pickle {
            protocol: m.protocol,
        };
        Some(crate::model::prefix::with_prefix(
            &mut m.arena,
            &devices,
            encoding,
            f,
        ))
    }

    fn begin(&mut self, head: Vec<u8>, eof: bool) -> Result<(), DecodeError> {
        match raw::sniff(&head)? {
            Sniff::Pickle => {
                let mut m = Box::new(PickleMachine::default());
                if let Some(t) = self.total_len {
                    m.set_total_len(t);
                }
                let (mut tail, mut done) = (Vec::new(), false);
                feed(&mut m, &mut tail, &mut done, &head, eof)?;
                self.state = State::Pickle { m, tail, done };
            }
            _ => self.state = State::Whole(head),
        }
        Ok(())
    }

    pub fn finish(self) -> Result<Snapshot, DecodeError> {
        self.finish_windowed().map(|(s, _)| s)
    }

    /// [`Self::finish`], and whether the window of [`Self::keep_rows`] was applied (a pickle's
    /// trace lists; JSON and HTML are read whole).
    pub fn finish_windowed(mut self) -> Result<(Snapshot, bool), DecodeError> {
        if let State::Start(head) = &mut self.state {
            let head = std::mem::take(head);
            self.begin(head, true)?;
        }
        match self.state {
            State::Start(_) => Err(DecodeError::Empty),
            State::Whole(all) => Ok((crate::load(&all)?, false)),
            State::Pickle {
                mut m,
                mut tail,
                mut done,
            } => {
                if !done {
                    feed(&mut m, &mut tail, &mut done, &[], true)?;
                }
                let top = m
                    .result()
                    .ok_or(DecodeError::NoStop { offset: m.offset() })?;
                let protocol = m.protocol;
                // The memo and the stack go before the model is built, so that (in wasm, where
                // memory never shrinks) the model's allocations reuse their space.
                let mut arena = std::mem::take(&mut m.arena);
                drop(m);
                // The last pass makes every list exactly its window (`range` counts on it).
                if let Some((w, _)) = self.window {
                    arena.remove_outside(w);
                }
                let removed = arena.settle_dropped_rows();
                let mut s = normalize(arena, top, Encoding::Pickle { protocol })?;
                if removed > 0 && !s.host_trace.is_empty() {
                    s.warnings.push(
                        "host_traces: only its part was kept while decoding, as each device's (the window of the range)"
                            .into(),
                    );
                }
                Ok((s, self.window.is_some()))
            }
        }
    }
}

fn feed(
    m: &mut PickleMachine,
    tail: &mut Vec<u8>,
    done: &mut bool,
    chunk: &[u8],
    eof: bool,
) -> Result<(), DecodeError> {
    if *done {
        return Ok(());
    }
    // Common case: no leftover, run straight over the chunk and keep only its unread end.
    if tail.is_empty() {
        return feed_direct(m, tail, done, chunk, eof);
    }
    // An opcode was cut at the chunk boundary: finish it with as little of the new chunk as
    // possible (doubling), then go on straight over the rest of the chunk instead of copying all
    // of it behind the leftover.
    let mut from_chunk = 0usize;
    let mut take = chunk.len().min(STITCH_BYTES);
    loop {
        tail.extend_from_slice(chunk.get(from_chunk..take).unwrap_or(&[]));
        let before = tail.len() - take; // leftover bytes in front of chunk[0]
        from_chunk = take;
        let last = take == chunk.len();
        match m.feed(tail, eof && last)? {
            Progress::Done(_) => {
                finished(done, tail);
                return Ok(());
            }
            Progress::NeedMore(c) if c >= before => {
                // Past the leftover: what is unread starts inside the chunk.
                tail.clear();
                return feed_direct(m, tail, done, chunk.get(c - before..).unwrap_or(&[]), eof);
            }
            Progress::NeedMore(c) => {
                tail.drain(..c.min(tail.len()));
                if last {
                    return Ok(());
                }
                take = (take * 2).min(chunk.len());
            }
        }
    }
}

/// The pickle ended: what follows is ignored and the leftover buffer is given back.
fn finished(done: &mut bool, tail: &mut Vec<u8>) {
    *done = true;
    tail.clear();
    tail.shrink_to_fit();
}

/// Bytes of a new chunk first put behind a leftover to finish a cut opcode.
const STITCH_BYTES: usize = 4096;

fn feed_direct(
    m: &mut PickleMachine,
    tail: &mut Vec<u8>,
    done: &mut bool,
    chunk: &[u8],
    eof: bool,
) -> Result<(), DecodeError> {
    match m.feed(chunk, eof)? {
        Progress::NeedMore(c) => tail.extend_from_slice(chunk.get(c..).unwrap_or(&[])),
        Progress::Done(_) => finished(done, tail),
    }
    Ok(())
}

/// Error of [`load_reader`]: reading failed, or the bytes are not a snapshot.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// Loads from a reader in 1 MiB chunks (memory: the model, not the file).
pub fn load_reader<R: Read>(r: R, total_len: Option<u64>) -> Result<Snapshot, LoadError> {
    let mut l = Loader::new(total_len);
    feed_reader(r, |c| l.push(c))?;
    Ok(l.finish()?)
}

/// Reads `r` to its end in 1 MiB chunks, handing each to `push`.
pub fn feed_reader<R: Read>(
    mut r: R,
    mut push: impl FnMut(&[u8]) -> Result<(), DecodeError>,
) -> Result<(), LoadError> {
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        push(buf.get(..n).unwrap_or(&[]))?;
    }
}

/// The decoder's counts after `bytes_read` bytes.
fn mark(m: &PickleMachine, bytes_read: u64) -> Mark {
    let (held_bytes, memo_bytes) = m.held_bytes();
    Mark {
        bytes_read,
        entries: u64::from(m.arena.next_row_id()),
        held_bytes,
        memo_bytes,
    }
}
