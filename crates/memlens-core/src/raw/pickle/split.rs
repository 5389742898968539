//! Where a framed pickle can be cut for parallel decoding, and what each piece memoizes, read
//! without decoding.
//!
//! Protocol 4+ writes everything after PROTO as FRAME opcodes, each giving its length, and
//! CPython's framer keeps every opcode whole inside one frame: a frame's start is an opcode's
//! start. [`split`] walks the frame headers only (a jump of ~64 KiB each) and groups them into
//! units of about a target size; protocols 2–3 (no frames) stay one unit.
//!
//! [`scan`] walks one unit's opcodes by their operand lengths, decoding nothing: how many
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
    // The opcode before (FRAMEs skipped), whose value a MEMOIZE stores; looked at only then.
    let mut prev = usize::MAX;
    let mut p = 0usize;
    while let Some(&op) = piece.get(p) {
        let c = OPERANDS[op as usize];
        if c < PREFIXED {
            if op == 0x94 {
                kinds.push(memoized(piece, prev)?);
            } else {
                prev = p;
            }
            p += 1 + c as usize;
            continue;
        }
        match c {
            FRAME => p += 9,
            STOP => return Some(PieceScan { kinds }),
            _ => {
                prev = p;
                p = step(piece, p, op)?;
            }
        }
    }
    (p <= piece.len()).then_some(PieceScan { kinds })
}

/// What a MEMOIZE after the opcode at `prev` stores (`KIND_*` with the string's offset).
#[inline(never)]
fn memoized(piece: &[u8], prev: usize) -> Option<u32> {
    let Some(&op) = piece.get(prev) else {
        return Some(KIND_OTHER << KIND_SHIFT);
    };
    Some(match KINDS[op as usize] {
        KIND_STR => {
            u32::try_from(prev).ok().filter(|&a| a <= OFFSET_MASK)? | KIND_STR << KIND_SHIFT
        }
        k => k << KIND_SHIFT,
    })
}

/// Where the opcode at `p` ends (its operands read by their lengths only), for the opcodes a
/// CPython pickler of protocol 2+ writes of plain data; `None` for others (PUTs, protocol 0's
/// text opcodes, those that import) and for one running past the end.
pub fn opcode_end(bytes: &[u8], p: usize) -> Option<usize> {
    step(bytes, p, *bytes.get(p)?).filter(|&e| e <= bytes.len())
}

/// The end of opcode `op` at `p` by [`OPERANDS`] (it may lie past the end of `b`).
#[inline(always)]
fn step(b: &[u8], p: usize, op: u8) -> Option<usize> {
    let c = OPERANDS[op as usize];
    match c {
        _ if c < PREFIXED => Some(p + 1 + c as usize),
        FRAME => Some(p + 9),
        STOP => Some(p + 1),
        UNKNOWN => None,
        _ => {
            let w = (c - PREFIXED) as usize;
            (p + 1 + w).checked_add(len_at(b, p + 1, w)?)
        }
    }
}

/// Operand bytes of each opcode: a fixed count, `PREFIXED + w` for a `w`-byte length and as
/// many bytes, or `UNKNOWN`.
const PREFIXED: u8 = 16;
const FRAME: u8 = 40;
const STOP: u8 = 41;
const UNKNOWN: u8 = 255;
static OPERANDS: [u8; 256] = operands();

const fn operands() -> [u8; 256] {
    let mut t = [UNKNOWN; 256];
    let none = b"\x94(aeu\x90s012N\x88\x89}])\x8ft\x85\x86\x87ld\x91";
    let mut i = 0;
    while i < none.len() {
        t[none[i] as usize] = 0;
        i += 1;
    }
    t[0x95] = FRAME;
    t[b'.' as usize] = STOP;
    t[b'G' as usize] = 8;
    t[b'h' as usize] = 1;
    t[b'K' as usize] = 1;
    t[0x80] = 1;
    t[b'M' as usize] = 2;
    t[b'j' as usize] = 4;
    t[b'J' as usize] = 4;
    t[0x8c] = PREFIXED + 1;
    t[b'U' as usize] = PREFIXED + 1;
    t[b'C' as usize] = PREFIXED + 1;
    t[0x8a] = PREFIXED + 1;
    t[b'X' as usize] = PREFIXED + 4;
    t[b'T' as usize] = PREFIXED + 4;
    t[b'B' as usize] = PREFIXED + 4;
    t[0x8b] = PREFIXED + 4;
    t[0x8d] = PREFIXED + 8;
    t[0x8e] = PREFIXED + 8;
    t[0x96] = PREFIXED + 8;
    t
}

/// What each opcode leaves on top for a MEMOIZE right after it (`KIND_*`).
static KINDS: [u32; 256] = kinds();

const fn kinds() -> [u32; 256] {
    let mut t = [KIND_OTHER; 256];
    let containers = b"}])\x8ft\x85\x86\x87ld\x91";
    let mut i = 0;
    while i < containers.len() {
        t[containers[i] as usize] = KIND_CONTAINER;
        i += 1;
    }
    let strings = b"\x8cUXT\x8d";
    i = 0;
    while i < strings.len() {
        t[strings[i] as usize] = KIND_STR;
        i += 1;
    }
    t
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

/// The scans of the units of the input before its last piece (see `parallel`), with each unit's
/// first memo key: what a piece decoded on its own knows of the keys before it.
pub struct Scans<'a> {
    pub bytes: &'a [u8],
    /// The units scanned, in order from the start of the input.
    pub units: Vec<Range<usize>>,
    /// The first memo key of each unit (MEMOIZEs before it), and one past the last: the first
    /// key of whatever follows the scanned units.
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
    /// `scans[i]` is the scan of `units[i]`.
    pub fn new(bytes: &'a [u8], units: Vec<Range<usize>>, scans: Vec<PieceScan>) -> Self {
        let mut key_base = Vec::with_capacity(scans.len() + 1);
        let mut k = 0u64;
        key_base.push(k);
        for s in &scans {
            k += s.memoizes();
            key_base.push(k);
        }
        Scans {
            bytes,
            units,
            key_base,
            scans,
        }
    }

    /// The first memo key at byte offset `at`, where a unit starts or the scanned units end.
    pub fn key_base_at(&self, at: usize) -> Option<u64> {
        let i = self.units.partition_point(|u| u.start < at);
        let starts_here = match self.units.get(i) {
            Some(u) => u.start == at,
            None => self.units.last().map_or(at == 0, |u| u.end == at),
        };
        starts_here.then(|| self.key_base[i])
    }

    /// What memo key `key` holds, by the scan of the unit that memoized it.
    pub(super) fn kind(&self, key: u64) -> MemoKind<'a> {
        let n = self.scans.len();
        let i = self.key_base[..n].partition_point(|&b| b <= key);
        let Some(i) = i.checked_sub(1) else {
            return MemoKind::Other;
        };
        let x = self.scans[i]
            .kinds
            .get((key - self.key_base[i]) as usize)
            .copied()
            .unwrap_or(KIND_OTHER << KIND_SHIFT);
        match x >> KIND_SHIFT {
            KIND_STR => {
                let at = self.units[i].start + (x & OFFSET_MASK) as usize;
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
