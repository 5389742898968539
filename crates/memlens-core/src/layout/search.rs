//! Search over a timeline's elements, by address (hex) and by stack-frame text (a substring, or
//! a regular expression: `regex-lite`, whose matching is linear in the text, so no pattern can
//! hang the search; a pattern that does not compile is an error), fast enough to
//! run on every keystroke with a million allocations: stacks are interned, so a frame query is
//! matched once per frame and once per stack, never once per allocation; an allocation then
//! costs one lookup. [`Matches`] is what the renderer needs: membership, the count, and where
//! on the x axis a match is alive (for the rug that shows matches too small to draw).

use super::context::frame_shown;
use super::timeline::{Elements, TimelineLayout};
use crate::model::Snapshot;
use crate::trace::StackId;

/// Why a query cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    #[error("not a hex address (digits 0-9, a-f, optionally `_<version>`): {0}")]
    BadAddress(String),
    #[error("not a regular expression: {0}")]
    BadPattern(String),
}

/// Compiled patterns are capped at this many bytes of program (a pattern like `(a{1000}){1000}`
/// is refused instead of taking the worker's memory).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// A frame pattern as a case-insensitive regular expression.
fn frame_regex(pattern: &str) -> Result<regex_lite::Regex, SearchError> {
    regex_lite::RegexBuilder::new(pattern)
        .case_insensitive(true)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| {
            let first = e.to_string();
            let line = first.lines().last().unwrap_or("").trim().to_string();
            SearchError::BadPattern(line)
        })
}

/// A search: an address pattern, a frame pattern, or both (an element must match both).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchQuery {
    /// Lowercase hex digits, possibly with `_<version>`, matched as a substring of the
    /// element's label without prefix (`7f3a00000000_2` for `b'7f3a00000000_2`).
    pub address: Option<String>,
    /// Lowercase text matched as a substring of `file:line:name` of the frames upstream's
    /// filter shows (interpreter and dispatcher frames are not searched).
    pub frame: Option<String>,
    /// `frame` is a regular expression (matched case-insensitively) instead of a substring.
    pub frame_is_regex: bool,
}

impl SearchQuery {
    /// From the two search boxes; empty boxes are ignored. `Ok(None)`: nothing to search.
    pub fn new(address: &str, frame: &str) -> Result<Option<SearchQuery>, SearchError> {
        let mut a = address.trim().to_ascii_lowercase();
        for p in ["b'", "s'", "0x"] {
            if let Some(rest) = a.strip_prefix(p) {
                a = rest.to_string();
            }
        }
        let a = a.trim_end_matches('\'').to_string();
        if !a.chars().all(|c| c.is_ascii_hexdigit() || c == '_') {
            return Err(SearchError::BadAddress(address.trim().to_string()));
        }
        let f = frame.trim().to_lowercase();
        let q = SearchQuery {
            address: (!a.is_empty()).then_some(a),
            frame: (!f.is_empty()).then_some(f),
            frame_is_regex: false,
        };
        Ok((q.address.is_some() || q.frame.is_some()).then_some(q))
    }

    /// As [`Self::new`], with the frame box read as a regular expression (as typed, matched
    /// case-insensitively); a pattern that does not compile is [`SearchError::BadPattern`].
    pub fn with_regex(address: &str, pattern: &str) -> Result<Option<SearchQuery>, SearchError> {
        let Some(mut q) = SearchQuery::new(address, pattern)? else {
            return Ok(None);
        };
        if q.frame.is_some() {
            let p = pattern.trim();
            frame_regex(p)?;
            q.frame = Some(p.to_string());
            q.frame_is_regex = true;
        }
        Ok(Some(q))
    }

    /// An address-only query (`None` if empty or not hex).
    pub fn address(s: &str) -> Option<SearchQuery> {
        SearchQuery::new(s, "").ok().flatten()
    }

    /// A frame-only query (`None` if empty).
    pub fn frame(s: &str) -> Option<SearchQuery> {
        SearchQuery::new("", s).ok().flatten()
    }
}

/// Per-file search data: every frame's `file:line:name`, lowercased, built once.
#[derive(Debug, Clone, Default)]
pub struct SearchIndex {
    text: String,
    /// Frame `f` is `text[offsets[f]..offsets[f + 1]]`.
    offsets: Vec<usize>,
    shown: Vec<bool>,
}

impl SearchIndex {
    pub fn new(snap: &Snapshot) -> SearchIndex {
        let mut text = String::new();
        let mut offsets = Vec::with_capacity(snap.frames.len() + 1);
        let mut shown = Vec::with_capacity(snap.frames.len());
        offsets.push(0);
        for f in &snap.frames {
            let (file, name) = (snap.str(f.filename), snap.str(f.name));
            text.push_str(&format!("{file}:{}:{name}", f.line).to_lowercase());
            offsets.push(text.len());
            shown.push(frame_shown(file, name));
        }
        SearchIndex {
            text,
            offsets,
            shown,
        }
    }

    /// Which stacks have a shown frame containing `needle` (lowercase), indexed by `StackId`.
    pub fn stacks_matching(&self, snap: &Snapshot, needle: &str) -> Vec<bool> {
        self.stacks_where(snap, |t| t.contains(needle))
    }

    /// Which stacks have a shown frame `hit` says yes to, indexed by `StackId`.
    fn stacks_where(&self, snap: &Snapshot, hit: impl Fn(&str) -> bool) -> Vec<bool> {
        let frame_hit: Vec<bool> = (0..self.shown.len())
            .map(|f| {
                let (Some(&a), Some(&b)) = (self.offsets.get(f), self.offsets.get(f + 1)) else {
                    return false;
                };
                self.shown.get(f).copied().unwrap_or(false) && self.text.get(a..b).is_some_and(&hit)
            })
            .collect();
        (0..snap.stacks.len())
            .map(|s| {
                snap.stacks
                    .get(StackId(s as u32))
                    .iter()
                    .any(|fr| frame_hit.get(fr.0 as usize).copied().unwrap_or(false))
            })
            .collect()
    }

    /// The elements of `layout` matching `q`, as a bitset (bit `e % 64` of word `e / 64`).
    /// `labels` must be [`AddressLabels::new`] of the same elements (needed for address queries).
    pub fn search(
        &self,
        snap: &Snapshot,
        el: &Elements,
        labels: &AddressLabels,
        q: &SearchQuery,
    ) -> Vec<u64> {
        let words = el.len().div_ceil(64);
        let mut bits = match &q.address {
            Some(a) => labels.matching(a),
            None => {
                let mut all = vec![u64::MAX; words];
                if el.len() % 64 != 0 {
                    if let Some(last) = all.last_mut() {
                        *last = (1u64 << (el.len() % 64)) - 1;
                    }
                }
                all
            }
        };
        bits.resize(words, 0);
        if let Some(f) = q.frame.as_deref() {
            let stacks = match q.frame_is_regex.then(|| frame_regex(f)) {
                // A query built by `with_regex` has compiled once already.
                Some(Err(_)) => Vec::new(),
                Some(Ok(re)) => self.stacks_where(snap, |t| re.is_match(t)),
                None => self.stacks_matching(snap, f),
            };
            for (w, word) in bits.iter_mut().enumerate() {
                let mut m = *word;
                while m != 0 {
                    let b = m.trailing_zeros() as usize;
                    m &= m - 1;
                    let s = el.stack.get(w * 64 + b).map_or(0, |s| s.0 as usize);
                    if !stacks.get(s).copied().unwrap_or(false) {
                        *word &= !(1u64 << b);
                    }
                }
            }
        }
        bits
    }
}

/// Every element's address label (`{addr:x}_{version}`), one per line in one text, so an
/// address query is one substring scan of the whole text (std's two-way search) instead of a
/// comparison per element. Built once per layout (about 20 bytes per element).
#[derive(Debug, Clone, Default)]
pub struct AddressLabels {
    text: String,
    /// Label `e` starts at `starts[e]`.
    starts: Vec<u32>,
}

impl AddressLabels {
    pub fn new(el: &Elements) -> AddressLabels {
        let mut text = Vec::with_capacity(el.len() * 20);
        let mut starts = Vec::with_capacity(el.len());
        for e in 0..el.len() {
            starts.push(text.len() as u32);
            write_label(
                &mut text,
                el.addr.get(e).copied().unwrap_or(0),
                el.version.get(e).copied().unwrap_or(0),
            );
            text.push(b'\n');
        }
        AddressLabels {
            text: String::from_utf8(text).unwrap_or_default(),
            starts,
        }
    }

    /// Elements whose label contains `needle` (lowercase hex, `_`), as a bitset.
    pub fn matching(&self, needle: &str) -> Vec<u64> {
        let mut bits = vec![0u64; self.starts.len().div_ceil(64)];
        if needle.is_empty() || needle.contains('\n') {
            return bits;
        }
        for (pos, _) in self.text.match_indices(needle) {
            let e = self
                .starts
                .partition_point(|&s| s as usize <= pos)
                .saturating_sub(1);
            if let Some(w) = bits.get_mut(e / 64) {
                *w |= 1 << (e % 64);
            }
        }
        bits
    }
}

/// `{addr:x}_{version}` into `out`, without allocating.
fn write_label(out: &mut Vec<u8>, addr: u64, version: u32) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digits = (64 - addr.leading_zeros()).div_ceil(4).max(1);
    for i in (0..digits).rev() {
        out.push(HEX[((addr >> (i * 4)) & 0xf) as usize]);
    }
    out.push(b'_');
    let mut v = [0u8; 10];
    let mut n = 0;
    let mut x = version;
    loop {
        v[n] = b'0' + (x % 10) as u8;
        n += 1;
        x /= 10;
        if x == 0 {
            break;
        }
    }
    out.extend(v[..n].iter().rev());
}

/// Search results as the renderer uses them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Matches {
    bits: Vec<u64>,
    count: usize,
    /// `alive[x]`: how many of the x positions before `x` have a match alive.
    alive: Vec<u32>,
}

impl Matches {
    /// From a bitset over `layout`'s elements (as [`SearchIndex::search`] returns).
    pub fn new(layout: &TimelineLayout, bits: Vec<u64>) -> Matches {
        let el = &layout.elements;
        let xs = layout.n_events as usize + 1;
        let mut diff = vec![0i64; xs + 1];
        let mut count = 0;
        for (w, &word) in bits.iter().enumerate() {
            let mut m = word;
            while m != 0 {
                let e = w * 64 + m.trailing_zeros() as usize;
                m &= m - 1;
                let (Some(&s), Some(&en)) = (el.start_x.get(e), el.end_x.get(e)) else {
                    continue;
                };
                count += 1;
                if en > s {
                    if let Some(d) = diff.get_mut(s as usize) {
                        *d += 1;
                    }
                    if let Some(d) = diff.get_mut((en as usize).min(xs)) {
                        *d -= 1;
                    }
                }
            }
        }
        let mut alive = Vec::with_capacity(xs + 1);
        alive.push(0u32);
        let (mut live, mut acc) = (0i64, 0u32);
        for d in diff.iter().take(xs) {
            live += d;
            acc += u32::from(live > 0);
            alive.push(acc);
        }
        Matches { bits, count, alive }
    }

    /// Number of matching elements.
    pub fn count(&self) -> usize {
        self.count
    }

    pub fn contains(&self, e: usize) -> bool {
        self.bits
            .get(e / 64)
            .is_some_and(|w| w & (1 << (e % 64)) != 0)
    }

    /// Matching element ids, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.bits.iter().enumerate().flat_map(|(w, &word)| {
            let mut m = word;
            std::iter::from_fn(move || {
                (m != 0).then(|| {
                    let e = w * 64 + m.trailing_zeros() as usize;
                    m &= m - 1;
                    e
                })
            })
        })
    }

    /// Whether a match is alive somewhere in `[x0, x1)`.
    pub fn any_alive(&self, x0: f64, x1: f64) -> bool {
        let n = self.alive.len().saturating_sub(1);
        let lo = x0.floor().clamp(0.0, n as f64) as usize;
        let hi = x1.ceil().clamp(0.0, n as f64) as usize;
        hi > lo && self.alive.get(hi) > self.alive.get(lo)
    }
}
