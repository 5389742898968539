//! Parallel decoding of one pickle held in memory: [`decode_parallel`] gives what
//! [`PickleMachine::decode_all`] gives (the same values, ids and trace rows, or the same error),
//! using up to N threads.
//!
//! The input is cut at frame boundaries (`split`), every piece scanned for its memo keys
//! (`split::scan`, in parallel), then pieces 1.. decoded on their own (`piece`, in parallel)
//! while this thread runs piece 0 and joins the others in file order ([`Join`]: the joined
//! machine is always exactly the one-thread decoder's). Where a piece cannot be joined (an
//! assumption failed, it ended early, it failed), the joined machine runs the rest of that piece
//! itself; where anything fails, the whole input is decoded again on one thread, so an error is
//! the one-thread decoder's. The pieces and the join are public so that the page's workers can
//! decode pieces too.

use super::split::{opcode_end, scan, split, Scans};
use super::{PickleMachine, Progress};
use crate::error::DecodeError;
use crate::raw::value::{Arena, Val};

/// Pieces smaller than this are not worth a thread.
const MIN_PIECE_BYTES: usize = 4 << 20;

/// A piece decoded on its own, waiting for its join: its parts, in order (see
/// [`decode_piece`]).
pub struct DecodedPiece(Vec<PickleMachine>);

/// Decodes piece `i` (≥ 1) of `scans` on its own. Where it meets an opcode it cannot run alone
/// (the SETITEMS of a dict begun in the piece before, mostly: CPython's framer cuts frames
/// between any two items), that one opcode is left to the join and a new part starts after
/// it, on an unknown stack again.
pub fn decode_piece(scans: &Scans, i: usize) -> DecodedPiece {
    let r = scans.pieces.get(i).cloned().unwrap_or(0..0);
    let bytes = scans.bytes.get(..r.end).unwrap_or(&[]);
    let mut base = scans.key_base.get(i).copied().unwrap_or(0);
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

/// The machine that has run pieces `0..next` (see the module doc).
pub struct Join {
    m: PickleMachine,
    next: usize,
    /// Bytes decoded by pieces on their own and joined.
    pub joined_bytes: u64,
}

impl Join {
    /// Runs piece 0.
    pub fn new(scans: &Scans) -> Result<Join, DecodeError> {
        let mut m = PickleMachine::default();
        m.set_total_len(scans.bytes.len() as u64);
        let mut j = Join {
            m,
            next: 1,
            joined_bytes: 0,
        };
        j.run_to(scans, scans.pieces.first().map_or(0, |p| p.end))?;
        Ok(j)
    }

    /// Adds the next piece: joins `piece` where it fits, and runs whatever of the piece it did
    /// not cover here.
    pub fn add(&mut self, scans: &Scans, piece: Option<DecodedPiece>) -> Result<(), DecodeError> {
        let Some(r) = scans.pieces.get(self.next).cloned() else {
            return Ok(());
        };
        self.next += 1;
        for w in piece.map(|p| p.0).unwrap_or_default() {
            let start = w.piece.as_ref().map_or(0, |p| p.start);
            self.run_to(scans, start as usize)?;
            if self.m.offset == start && self.m.result.is_none() && self.m.join(w)? {
                self.joined_bytes += self.m.offset - start;
            }
        }
        self.run_to(scans, r.end)
    }

    /// Runs the rest of the input: the decoded values and protocol.
    pub fn finish(&mut self, scans: &Scans) -> Result<(Arena, Val, u8), DecodeError> {
        if self.m.result.is_none() {
            let from = (self.m.offset as usize).min(scans.bytes.len());
            self.m.feed(&scans.bytes[from..], true)?;
        }
        let v = self.m.result.ok_or(DecodeError::NoStop {
            offset: self.m.offset,
        })?;
        Ok((std::mem::take(&mut self.m.arena), v, self.m.protocol))
    }

    /// Runs this machine from where it stands to `end` (an opcode cut there waits).
    fn run_to(&mut self, scans: &Scans, end: usize) -> Result<(), DecodeError> {
        let from = self.m.offset as usize;
        if self.m.result.is_some() || from >= end {
            return Ok(());
        }
        if let Progress::NeedMore(_) = self.m.feed(&scans.bytes[from..end], false)? {}
        Ok(())
    }
}

/// [`PickleMachine::decode_all`] on up to `threads` threads (see the module doc), in pieces of
/// a quarter of a thread's share, at least 4 MiB.
pub fn decode_parallel(bytes: &[u8], threads: usize) -> Result<(Arena, Val, u8), DecodeError> {
    let piece = (bytes.len() / (threads.max(1) * 4)).max(MIN_PIECE_BYTES);
    decode_in_pieces(bytes, threads, piece)
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
    let pieces = split(bytes, piece_bytes);
    if threads < 2 || pieces.len() < 2 || cfg!(target_arch = "wasm32") {
        return (PickleMachine::decode_all(bytes), 0);
    }
    let scanned = on_threads(threads, pieces.len(), |i| scan(&bytes[pieces[i].clone()]));
    let Some(scanned) = scanned.and_then(|s| s.into_iter().collect::<Option<Vec<_>>>()) else {
        return (PickleMachine::decode_all(bytes), 0);
    };
    let scans = Scans::new(bytes, pieces, scanned);
    match decode_scanned(&scans, threads) {
        (Ok(r), joined) => (Ok(r), joined),
        (Err(_), _) => (PickleMachine::decode_all(bytes), 0),
    }
}

/// What a decode gives: the values, their protocol, or the error.
pub type Decoded = Result<(Arena, Val, u8), DecodeError>;

/// Pieces 1.. decoded on `threads` threads while this one joins them in order.
fn decode_scanned(scans: &Scans, threads: usize) -> (Decoded, u64) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let n = scans.pieces.len();
    let next = AtomicUsize::new(1);
    let stop = AtomicUsize::new(n);
    std::thread::scope(|sc| {
        let (tx, rx) = std::sync::mpsc::channel();
        for _ in 0..threads {
            let tx = tx.clone();
            let (next, stop) = (&next, &stop);
            sc.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= stop.load(Ordering::Relaxed) {
                    break;
                }
                if tx.send((i, Some(decode_piece(scans, i)))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut joined_bytes = 0;
        let joined = (|| {
            let mut j = Join::new(scans)?;
            let mut waiting = std::collections::BTreeMap::new();
            for i in 1..n {
                while !waiting.contains_key(&i) {
                    match rx.recv() {
                        Ok((k, piece)) => waiting.insert(k, piece),
                        Err(_) => break,
                    };
                }
                j.add(scans, waiting.remove(&i).flatten())?;
                joined_bytes = j.joined_bytes;
            }
            j.finish(scans)
        })();
        stop.store(0, Ordering::Relaxed);
        (joined, joined_bytes)
    })
}

/// `f(0..n)` on up to `threads` threads, in order (`None` if a thread died).
fn on_threads<T: Send>(threads: usize, n: usize, f: impl Fn(usize) -> T + Sync) -> Option<Vec<T>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let mut out: Vec<(usize, T)> = std::thread::scope(|sc| {
        let workers: Vec<_> = (0..threads.min(n))
            .map(|_| {
                sc.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            break mine;
                        }
                        mine.push((i, f(i)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    });
    out.sort_by_key(|(i, _)| *i);
    (out.len() == n).then(|| out.into_iter().map(|(_, t)| t).collect())
}
