//! Where a framed pickle can be cut for parallel decoding, and what each piece memoizes, read
//! without decoding.
//!
//! Protocol 4+ writes everything after PROTO as FRAME opcodes, each giving its length, and
//! CPython's framer keeps every opcode whole inside one frame: a frame's start is an opcode's
//! start. [`split`] walks the frame headers only (a jump of ~64 KiB each) and groups them into
//! pieces of about a target size; protocols 2–3 (no frames) stay one piece.
//!
//! [`scan`] walks one piece's opcodes by their operand lengths, decoding nothing: how many
//! MEMOIZEs it holds (so every piece knows its first memo key) and what each memoizes — a
//! string (whose bytes are at hand, so a later piece's GET of it needs no decoding), a new
//! container, or anything else. A piece with an opcode this walk does not know, an explicit
//! PUT (keys not numbered by count), or an opcode running past its end gives `None`: the
//! caller then decodes the file on one thread. Nothing here is trusted by the join without a
//! check (see `join`).

use std::ops::Range;

/// What a MEMOIZE stored, as [`scan`] saw it: bits 30–31 the kind, the low 30 bits (for a
/// string) the offset in its piece of the string's opcode.
const KIND_SHIFT: u32 = 30;
const KIND_STR: u32 = 0;
const KIND_CONTAINER: u32 = 1;
const KIND_OTHER: u32 = 2;
const OFFSET_MASK: u32 = (1 << KIND_SHIFT) - 1;

/// The most bytes a piece may have (offsets in it fit 30 bits).
const MAX_PIECE: usize = 1 << KIND_SHIFT;

/// The pieces of `bytes` (each `start..end`, together the whole input) of about `target` bytes,
/// cut at FRAME opcodes; one piece where the input has no frames.
pub fn split(bytes: &[u8], target: usize) -> Vec<Range<usize>> {
    let whole = std::iter::once(0..bytes.len()).collect();
    if bytes.len() < 2 || bytes[0] != 0x80 || bytes[1] < 4 {
        return whole;
    }
    let target = target.clamp(1, MAX_PIECE / 2);
    let mut cuts = vec![0usize];
    let mut pos = 2usize;
    while let Some(len) = frame_len(bytes, pos) {
        let next = match (pos + 9).checked_add(len) {
            Some(n) if n <= bytes.len() => n,
            _ => break,
        };
        if pos - cuts.last().copied().unwrap_or(0) >= target {
            cuts.push(pos);
        }
        pos = next;
    }
    cuts.push(bytes.len());
    cuts.dedup();
    let pieces: Vec<Range<usize>> = cuts.windows(2).map(|w| w[0]..w[1]).collect();
    if pieces.iter().any(|p| p.len() >= MAX_PIECE) || pieces.is_empty() {
        return whole;
    }
    pieces
}

/// The length a FRAME opcode at `pos` announces.
fn frame_len(bytes: &[u8], pos: usize) -> Option<usize> {
    if *bytes.get(pos)? != 0x95 {
        return None;
    }
    let b: [u8; 8] = bytes.get(pos + 1..pos + 9)?.try_into().ok()?;
    usize::try_from(u64::from_le_bytes(b)).ok()
}

/// What one piece memoizes, in key order.
#[derive(Debug, Clone, Default)]
pub struct PieceScan {
    kinds: Vec<u32>,
}

impl PieceScan {
    /// MEMOIZE opcodes in the piece.
    pub fn memoizes(&self) -> u64 {
        self.kinds.len() as u64
    }
}

/// The memoized values of a piece, as [`scan`] saw them (see the module doc).
pub fn scan(piece: &[u8]) -> Option<PieceScan> {
    let mut kinds = Vec::with_capacity(piece.len() / 64);
    let mut last = KIND_OTHER << KIND_SHIFT;
    let mut p = 0usize;
    while p < piece.len() {
        let at = p;
        let (end, pushed) = opcode(piece, p)?;
        p = end;
        last = match (piece[at], pushed) {
            (0x94, _) => {
                kinds.push(last);
                continue;
            }
            (0x95, _) => continue,
            (b'.', _) => break,
            (_, KIND_STR) => {
                u32::try_from(at).ok().filter(|&a| a <= OFFSET_MASK)? | KIND_STR << KIND_SHIFT
            }
            (_, k) => k << KIND_SHIFT,
        };
    }
    (p <= piece.len()).then_some(PieceScan { kinds })
}

/// Where the opcode at `p` ends (its operands read by their lengths only), for the opcodes a
/// CPython pickler of protocol 2+ writes of plain data; `None` for others (PUTs, protocol 0's
/// text opcodes, those that import) and for one running past the end.
pub fn opcode_end(bytes: &[u8], p: usize) -> Option<usize> {
    opcode(bytes, p)
        .map(|(end, _)| end)
        .filter(|&e| e <= bytes.len())
}

/// [`opcode_end`] and the kind of value the opcode pushes (`KIND_*`).
#[inline(always)]
fn opcode(b: &[u8], p: usize) -> Option<(usize, u32)> {
    let q = p + 1;
    let (operand, pushed) = match *b.get(p)? {
        0x94 | b'(' | b'a' | b'e' | 0x90 | b's' | b'u' | b'0' | b'1' | b'2' | b'N' | 0x88
        | 0x89 | b'.' => (0, KIND_OTHER),
        0x95 | b'G' => (8, KIND_OTHER),
        b'h' | b'K' | 0x80 => (1, KIND_OTHER),
        b'M' => (2, KIND_OTHER),
        b'j' | b'J' => (4, KIND_OTHER),
        0x8c | b'U' => (1 + len_at(b, q, 1)?, KIND_STR),
        b'X' | b'T' => (4 + len_at(b, q, 4)?, KIND_STR),
        0x8d => (8 + len_at(b, q, 8)?, KIND_STR),
        b'C' | 0x8a => (1 + len_at(b, q, 1)?, KIND_OTHER),
        b'B' | 0x8b => (4 + len_at(b, q, 4)?, KIND_OTHER),
        0x8e | 0x96 => (8 + len_at(b, q, 8)?, KIND_OTHER),
        b'}' | b']' | b')' | 0x8f | b't' | 0x85..=0x87 | b'l' | b'd' | 0x91 => (0, KIND_CONTAINER),
        _ => return None,
    };
    Some((q.checked_add(operand)?, pushed))
}

/// A little-endian length of `n` bytes at `p`.
fn len_at(piece: &[u8], p: usize, n: usize) -> Option<usize> {
    let b = piece.get(p..p + n)?;
    let mut x = 0u64;
    for (i, &v) in b.iter().enumerate() {
        x |= (v as u64) << (8 * i);
    }
    usize::try_from(x).ok()
}

/// The scans of all pieces, with each piece's first memo key: what a piece decoded on its own
/// knows of the keys before it.
pub struct Scans<'a> {
    pub bytes: &'a [u8],
    pub pieces: Vec<Range<usize>>,
    /// The first memo key of each piece (MEMOIZEs before it).
    pub key_base: Vec<u64>,
    scans: Vec<PieceScan>,
}

/// A memoized value of an earlier piece, as [`Scans::kind`] gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MemoKind<'a> {
    /// A string, by its UTF-8 bytes.
    Str(&'a [u8]),
    /// A new container (dict, list, tuple), not looked at.
    Container,
    /// Anything else: the piece cannot go on without the value.
    Other,
}

impl<'a> Scans<'a> {
    pub fn new(bytes: &'a [u8], pieces: Vec<Range<usize>>, scans: Vec<PieceScan>) -> Self {
        let mut key_base = Vec::with_capacity(scans.len());
        let mut k = 0u64;
        for s in &scans {
            key_base.push(k);
            k += s.memoizes();
        }
        Scans {
            bytes,
            pieces,
            key_base,
            scans,
        }
    }

    /// What memo key `key` holds, by the scan of the piece that memoized it.
    pub(super) fn kind(&self, key: u64) -> MemoKind<'a> {
        let Some(i) = self.key_base.partition_point(|&b| b <= key).checked_sub(1) else {
            return MemoKind::Other;
        };
        let x = self.scans[i]
            .kinds
            .get((key - self.key_base[i]) as usize)
            .copied()
            .unwrap_or(KIND_OTHER << KIND_SHIFT);
        match x >> KIND_SHIFT {
            KIND_STR => {
                let at = self.pieces[i].start + (x & OFFSET_MASK) as usize;
                string_at(self.bytes, at).map_or(MemoKind::Other, MemoKind::Str)
            }
            KIND_CONTAINER => MemoKind::Container,
            _ => MemoKind::Other,
        }
    }
}

/// The bytes of the string opcode at `at`.
fn string_at(bytes: &[u8], at: usize) -> Option<&[u8]> {
    let head = match *bytes.get(at)? {
        0x8c | b'U' => 1,
        b'X' | b'T' => 4,
        0x8d => 8,
        _ => return None,
    };
    let n = len_at(bytes, at + 1, head)?;
    let start = at + 1 + head;
    bytes.get(start..start.checked_add(n)?)
}
