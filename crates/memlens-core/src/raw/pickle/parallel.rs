//! Parallel decoding of one pickle held in memory: [`decode_parallel`] gives what
//! [`PickleMachine::decode_all`] gives (the same values, ids and trace rows, or the same error),
//! using up to N threads.
//!
//! The input is cut at frame boundaries into units (`split`) and the units grouped into pieces.
//! This thread decodes piece 0 at once, as the one-thread decoder would. Meanwhile the other
//! threads scan the units before the last piece for their memo keys (`split::scan`: every
//! later piece needs the count of the keys before it and what each holds), then decode pieces
//! 1.. on their own (`piece`); this thread joins them in file order ([`Join`]: the joined
//! machine is always exactly the one-thread decoder's). Since piece 0 waits for no scan, it is
//! made larger than the others, so that all end together ([`plan`]). Where a piece cannot be
//! joined (an assumption failed, it ended early, it failed), the joined machine runs the rest
//! of that piece itself; where anything fails, the whole input is decoded again on one thread,
//! so an error is the one-thread decoder's. The pieces and the join are public so that the
//! page's workers can decode pieces too.

use super::split::{opcode_end, scan, split, PieceScan, Scans};
use super::{PickleMachine, Progress};
use crate::error::DecodeError;
use crate::raw::value::{Arena, Val};
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};

/// Units (the input cut at frames, scanned one at a time) of about this many bytes, or smaller
/// for a small input, so that the threads share the scan evenly.
const UNIT_BYTES: usize = 8 << 20;

/// Inputs smaller than this are decoded on one thread.
const MIN_PARALLEL_BYTES: usize = 16 << 20;

/// What scanning a byte costs, in bytes decoded (`split::scan` against the piece decoder,
/// measured on the 1 GB inputs of docs/BENCHMARKS.md): how much smaller the pieces that wait
/// for the scan are made than piece 0, which does not.
const SCAN_COST: f64 = 0.3;

/// A piece decoded on its own, waiting for its join: its parts, in order (see
/// [`decode_piece`]).
pub struct DecodedPiece(Vec<PickleMachine>);

/// Decodes the bytes `r` (a piece after the first, starting where a unit starts or the scanned
/// units end) on their own. Where it meets an opcode it cannot run alone (the SETITEMS of a
/// dict begun in the piece before, mostly: CPython's framer cuts frames between any two
/// items), that one opcode is left to the join and a new part starts after it, on an unknown
/// stack again.
pub fn decode_piece(scans: &Scans, r: Range<usize>) -> DecodedPiece {
    let bytes = scans.bytes.get(..r.end).unwrap_or(&[]);
    let Some(mut base) = scans.key_base_at(r.start) else {
        return DecodedPiece(Vec::new());
    };
    let (mut start, mut parts) = (r.start, Vec::new());
    while start < r.end {
        let mut m = PickleMachine::for_piece(start as u64, base, bytes.len() as u64);
        if m.feed_piece(&bytes[start..], scans).is_err() {
            break;
        }
        let end = m.offset as usize;
        base = m.memo.len() as u64;
        if end > start {
            parts.push(m);
        }
        let Some(after) = opcode_end(bytes, end) else {
            break;
        };
        base += (bytes[end] == 0x94) as u64;
        start = after;
    }
    DecodedPiece(parts)
}

/// The machine that has run the input up to the pieces joined so far (see the module doc).
pub struct Join {
    m: PickleMachine,
    /// Bytes decoded by pieces on their own and joined.
    pub joined_bytes: u64,
}

impl Join {
    /// Runs `bytes[..first_end]`, the first piece.
    pub fn new(bytes: &[u8], first_end: usize) -> Result<Join, DecodeError> {
        let mut m = PickleMachine::default();
        m.set_total_len(bytes.len() as u64);
        let mut j = Join { m, joined_bytes: 0 };
        j.run_to(bytes, first_end)?;
        Ok(j)
    }

    /// Adds the piece that ends at `end`: joins the parts of `piece` where they fit, and runs
    /// whatever of the piece they did not cover here.
    pub fn add(
        &mut self,
        bytes: &[u8],
        end: usize,
        piece: Option<DecodedPiece>,
    ) -> Result<(), DecodeError> {
        for w in piece.map(|p| p.0).unwrap_or_default() {
            let start = w.piece.as_ref().map_or(0, |p| p.start);
            self.run_to(bytes, start as usize)?;
            if self.m.offset == start && self.m.result.is_none() && self.m.join(w)? {
                self.joined_bytes += self.m.offset - start;
            }
        }
        self.run_to(bytes, end)
    }

    /// Runs the rest of the input: the decoded values and protocol.
    pub fn finish(&mut self, bytes: &[u8]) -> Result<(Arena, Val, u8), DecodeError> {
        if self.m.result.is_none() {
            let from = (self.m.offset as usize).min(bytes.len());
            self.m.feed(&bytes[from..], true)?;
        }
        let v = self.m.result.ok_or(DecodeError::NoStop {
            offset: self.m.offset,
        })?;
        Ok((std::mem::take(&mut self.m.arena), v, self.m.protocol))
    }

    /// Runs this machine from where it stands to `end` (an opcode cut there waits).
    fn run_to(&mut self, bytes: &[u8], end: usize) -> Result<(), DecodeError> {
        let from = self.m.offset as usize;
        if self.m.result.is_some() || from >= end {
            return Ok(());
        }
        if let Progress::NeedMore(_) = self.m.feed(&bytes[from..end.min(bytes.len())], false)? {}
        Ok(())
    }
}

/// [`PickleMachine::decode_all`] on up to `threads` threads (see the module doc): piece 0 on
/// this thread, one piece for each other thread, sized by [`plan`].
pub fn decode_parallel(bytes: &[u8], threads: usize) -> Result<(Arena, Val, u8), DecodeError> {
    if threads < 2 || bytes.len() < MIN_PARALLEL_BYTES {
        return PickleMachine::decode_all(bytes);
    }
    let unit = (bytes.len() / (threads * 8)).clamp(1 << 20, UNIT_BYTES);
    let units = split(bytes, unit);
    let pieces = plan(&units, threads);
    decode_planned(bytes, threads, &units, &pieces).0
}

/// [`decode_parallel`] in pieces of about `piece_bytes` (whole frames; tests cut small ones).
pub fn decode_in_pieces(
    bytes: &[u8],
    threads: usize,
    piece_bytes: usize,
) -> Result<(Arena, Val, u8), DecodeError> {
    decode_counted(bytes, threads, piece_bytes).0
}

/// [`decode_in_pieces`], and how many bytes were decoded by pieces on their own and joined.
pub fn decode_counted(bytes: &[u8], threads: usize, piece_bytes: usize) -> (Decoded, u64) {
    let units = split(bytes, piece_bytes);
    let pieces: Vec<Range<usize>> = (0..units.len()).map(|i| i..i + 1).collect();
    decode_planned(bytes, threads, &units, &pieces)
}

/// What a decode gives: the values, their protocol, or the error.
pub type Decoded = Result<(Arena, Val, u8), DecodeError>;

/// Pieces (ranges of `units`) for `threads` threads that end together: piece 0, decoded from
/// the start of the input at once, and one piece for each other thread, which first scans its
/// share of the units before the last piece. With `y` the share of the input of each of the
/// `t - 1` later pieces and `c` [`SCAN_COST`]: `1 - (t-1)·y = c·(1 - y)/(t-1) + y`.
fn plan(units: &[Range<usize>], threads: usize) -> Vec<Range<usize>> {
    let len = units.last().map_or(0, |u| u.end) as f64;
    let t = threads.max(2) as f64;
    let c = SCAN_COST / (t - 1.0);
    let y = (1.0 - c) / (t - c);
    let first = 1.0 - (t - 1.0) * y;
    let mut pieces = Vec::with_capacity(threads);
    let mut from = 0;
    for (i, u) in units.iter().enumerate() {
        let k = pieces.len() as f64;
        let target = (first + k * y) * len;
        if u.end as f64 >= target - 0.5 && pieces.len() + 1 < threads {
            pieces.push(from..i + 1);
            from = i + 1;
        }
    }
    if from < units.len() {
        pieces.push(from..units.len());
    }
    pieces
}

/// Decodes `bytes` in `pieces` (ranges of `units`) on `threads` threads: this one runs piece 0
/// and joins the others in order; the others scan the units before the last piece, then
/// decode pieces 1.. Anything failing gives the one-thread decoder's result.
fn decode_planned(
    bytes: &[u8],
    threads: usize,
    units: &[Range<usize>],
    pieces: &[Range<usize>],
) -> (Decoded, u64) {
    if threads < 2 || pieces.len() < 2 || cfg!(target_arch = "wasm32") {
        return (PickleMachine::decode_all(bytes), 0);
    }
    let span = |p: &Range<usize>| units[p.start].start..units[p.end - 1].end;
    let spans: Vec<Range<usize>> = pieces.iter().map(span).collect();
    let scan_n = pieces.last().map_or(0, |p| p.start);
    let work = Work {
        bytes,
        units: &units[..scan_n],
        spans: &spans,
        next_scan: AtomicUsize::new(0),
        done: Mutex::new((0, (0..scan_n).map(|_| None).collect())),
        all_done: Condvar::new(),
        scans: OnceLock::new(),
        next_piece: AtomicUsize::new(1),
        stop: AtomicUsize::new(spans.len()),
    };
    match work.run(threads - 1) {
        (Ok(r), joined) => (Ok(r), joined),
        (Err(_), _) => (PickleMachine::decode_all(bytes), 0),
    }
}

/// What the threads of one parallel decode share.
struct Work<'a> {
    bytes: &'a [u8],
    /// The units to scan: those before the last piece.
    units: &'a [Range<usize>],
    /// The pieces, as byte ranges.
    spans: &'a [Range<usize>],
    next_scan: AtomicUsize,
    /// Units scanned so far, and each unit's scan (`None` where it could not be scanned);
    /// `all_done` is signalled when they all are.
    done: Mutex<(usize, Vec<Option<PieceScan>>)>,
    all_done: Condvar,
    /// Every scan put together (`None` where a unit could not be scanned).
    scans: OnceLock<Option<Scans<'a>>>,
    next_piece: AtomicUsize,
    /// Pieces from here on are not decoded (the join has stopped).
    stop: AtomicUsize,
}

impl<'a> Work<'a> {
    /// `workers` threads scan and decode pieces 1.. while this one runs piece 0 and joins.
    fn run(&self, workers: usize) -> (Decoded, u64) {
        std::thread::scope(|sc| {
            let (tx, rx) = std::sync::mpsc::channel();
            for _ in 0..workers {
                let tx = tx.clone();
                sc.spawn(move || self.worker(tx));
            }
            drop(tx);
            let mut joined_bytes = 0;
            let joined = (|| {
                let mut j = Join::new(self.bytes, self.spans[0].end)?;
                let mut waiting = std::collections::BTreeMap::new();
                for i in 1..self.spans.len() {
                    while !waiting.contains_key(&i) {
                        match rx.recv() {
                            Ok((k, piece)) => waiting.insert(k, piece),
                            Err(_) => break,
                        };
                    }
                    j.add(self.bytes, self.spans[i].end, waiting.remove(&i).flatten())?;
                    joined_bytes = j.joined_bytes;
                }
                j.finish(self.bytes)
            })();
            self.stop.store(0, Ordering::Relaxed);
            (joined, joined_bytes)
        })
    }

    /// One worker: its share of the scans, then pieces until none is left.
    fn worker(&self, tx: std::sync::mpsc::Sender<(usize, Option<DecodedPiece>)>) {
        let Some(scans) = self.scan_all() else {
            return;
        };
        loop {
            let i = self.next_piece.fetch_add(1, Ordering::Relaxed);
            if i >= self.stop.load(Ordering::Relaxed) {
                break;
            }
            let piece = decode_piece(scans, self.spans[i].clone());
            if tx.send((i, Some(piece))).is_err() {
                break;
            }
        }
    }

    /// Scans units until none is left, waits for the other threads' scans, and gives them all.
    fn scan_all(&self) -> Option<&Scans<'a>> {
        let n = self.units.len();
        loop {
            let i = self.next_scan.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                break;
            }
            // Counted even where the scan panics, so that no thread waits for it forever.
            let counted = Counted(self);
            let s = scan(&self.bytes[self.units[i].clone()]);
            self.lock().1[i] = s;
            drop(counted);
        }
        let mut done = self.lock();
        while done.0 < n {
            done = self.all_done.wait(done).unwrap_or_else(|e| e.into_inner());
        }
        // (Under the lock: the first thread here puts the scans together.)
        let scans = self.scans.get_or_init(|| {
            let all: Option<Vec<PieceScan>> = std::mem::take(&mut done.1).into_iter().collect();
            Some(Scans::new(self.bytes, self.units.to_vec(), all?))
        });
        drop(done);
        scans.as_ref()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, Vec<Option<PieceScan>>)> {
        self.done.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Counts a unit as scanned when dropped (see [`Work::scan_all`]).
struct Counted<'w, 'a>(&'w Work<'a>);

impl Drop for Counted<'_, '_> {
    fn drop(&mut self) {
        let mut done = self.0.lock();
        done.0 += 1;
        if done.0 == self.0.units.len() {
            self.0.all_done.notify_all();
        }
    }
}
