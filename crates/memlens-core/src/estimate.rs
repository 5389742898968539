//! How much memory a whole file's decode will hold, told from the file's size and its first
//! chunks, before the rest is read: the page's worker (whose wasm memory ends at 4 GiB) asks
//! this before committing to a file, and offers part of a larger one (`range::PartLoader`).
//!
//! A snapshot's segments come first and its trace after, and the trace is what grows with the
//! file. Once the decoder has read some entries, the input bytes per entry since the first one
//! say how many entries the rest of the file holds, and the decoder's memory per entry since
//! the first one (columns, memo slots, new stacks and strings; [`HeadShape::held_bytes`]) what
//! they will take. Both are taken as constant over the rest: stacks and strings repeat, so
//! their growth slows and the estimate errs high, which is the safe side.

/// What the decoder had read and held when asked, in its own count of held bytes (lengths of
/// its tables times their item sizes: `Loader::head_shape`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HeadShape {
    /// Input bytes decoded so far.
    pub bytes_read: u64,
    /// Trace entries decoded so far.
    pub entries: u64,
    /// Decoder memory held now.
    pub held_bytes: u64,
    /// The part of `held_bytes` that is memo slots (kept for every entry, even those a part
    /// leaves out).
    pub memo_bytes: u64,
    /// The same counts once the first trace entries were read (after the chunk that held the
    /// first one; `None`: no entry read yet).
    pub trace_start: Option<Mark>,
    /// Counts at a later moment with at most half the entries read now: the rates are taken
    /// from there on (the first entries of a trace bring their stacks and strings with them,
    /// later ones refer to them: the latest half is the better guide). `None`: from
    /// `trace_start`.
    pub rate_from: Option<Mark>,
}

/// [`HeadShape`]'s counts at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mark {
    pub bytes_read: u64,
    pub entries: u64,
    pub held_bytes: u64,
    pub memo_bytes: u64,
}

/// The whole file's decode, as the head foretells it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeEstimate {
    /// Trace entries in the whole file.
    pub entries: u64,
    /// Decoder memory held once the whole file is read (in [`HeadShape::held_bytes`]'s count).
    pub held_bytes: u64,
    /// Memory per entry since the first one: all of it, and the memo slots' part.
    per_entry_bytes: f64,
    memo_per_entry_bytes: f64,
    /// Held before the first entry.
    before_bytes: u64,
}

impl SizeEstimate {
    /// Decoder memory held once a part keeping the last `kept` entries of `window_slack` more
    /// is read: what came before the trace, every entry's memo slots, and the kept entries'
    /// rows, up to twice over (rows outside the part go in passes, `raw::window`).
    pub fn part_bytes(&self, kept: u64, window_slack: u64) -> u64 {
        let rows = self.per_entry_bytes - self.memo_per_entry_bytes;
        self.before_bytes
            + (self.entries as f64 * self.memo_per_entry_bytes).ceil() as u64
            + (2.0 * (kept + window_slack) as f64 * rows).ceil() as u64
    }

    /// The most last entries a part may keep within `budget_bytes` ([`Self::part_bytes`]),
    /// at most all of them: `None` when not even one fits.
    pub fn entries_within(&self, budget_bytes: u64, window_slack: u64) -> Option<u64> {
        let fixed = self.part_bytes(0, window_slack);
        let room = budget_bytes.checked_sub(fixed)?;
        let rows = (self.per_entry_bytes - self.memo_per_entry_bytes).max(1.0);
        let n = (room as f64 / (2.0 * rows))
            .floor()
            .min(self.entries as f64) as u64;
        (n > 0).then_some(n)
    }
}

/// What the estimate's memory for the rest of the file is multiplied by. Made from the first
/// half of each real snapshot with the costlier half's rates, the estimate is 0.50-1.46 of the
/// whole decode's count (crates/memlens-core/tests/estimate.rs: a trace's later entries can
/// bring new, deeper stacks the head never saw); twice that is never under it.
pub const MARGIN: f64 = 2.0;

/// One stretch of the head: its entries and what they took per entry.
#[derive(Clone, Copy)]
struct Rates {
    /// Input bytes per entry.
    bytes: f64,
    /// Decoder memory per entry, and the memo slots' part of it.
    held: f64,
    memo: f64,
}

impl Rates {
    fn zero() -> Rates {
        Rates {
            bytes: 1.0,
            held: 0.0,
            memo: 0.0,
        }
    }

    /// Between two marks (`None` when no entry or byte came between them).
    fn between(a: &Mark, b: &Mark) -> Option<Rates> {
        if b.entries <= a.entries || b.bytes_read <= a.bytes_read {
            return None;
        }
        let n = (b.entries - a.entries) as f64;
        let held = b.held_bytes.saturating_sub(a.held_bytes) as f64 / n;
        Some(Rates {
            bytes: (b.bytes_read - a.bytes_read) as f64 / n,
            held,
            memo: (b.memo_bytes.saturating_sub(a.memo_bytes) as f64 / n).min(held),
        })
    }

    /// The costlier reading of two stretches: the fewer input bytes an entry (more entries
    /// in the rest of the file) and the more memory an entry.
    fn worst(self, o: Rates) -> Rates {
        Rates {
            bytes: self.bytes.min(o.bytes),
            held: self.held.max(o.held),
            memo: self.memo.max(o.memo),
        }
    }
}

/// The whole decode of a file of `file_bytes` bytes from its head: `None` until entries were
/// read after [`HeadShape::trace_start`] (nothing yet says what the rest costs), unless the
/// whole file was read.
///
/// It errs high, the safe side for a limit: the rest of the file is taken to cost what the
/// costlier half of the trace read so far did (from [`HeadShape::trace_start`] to
/// [`HeadShape::rate_from`], and from there on; each the worse of input bytes and memory per
/// entry), and its held bytes are multiplied by [`MARGIN`].
pub fn estimate(file_bytes: u64, head: &HeadShape) -> Option<SizeEstimate> {
    let rest_bytes = file_bytes.saturating_sub(head.bytes_read);
    let now = Mark {
        bytes_read: head.bytes_read,
        entries: head.entries,
        held_bytes: head.held_bytes,
        memo_bytes: head.memo_bytes,
    };
    let from = head.rate_from.or(head.trace_start);
    let (m, rates) = match from.and_then(|m| Some((m, Rates::between(&m, &now)?))) {
        Some((m, late)) => {
            let early = head
                .trace_start
                .zip(head.rate_from)
                .and_then(|(a, b)| Rates::between(&a, &b));
            (m, early.map_or(late, |e| e.worst(late)))
        }
        None if rest_bytes == 0 => (now, Rates::zero()),
        None => return None,
    };
    let rest_entries = (rest_bytes as f64 / rates.bytes.max(1.0)).ceil();
    // What came before the trace: the held bytes less the entries' share.
    let before = (m.held_bytes as f64 - m.entries as f64 * rates.held).max(0.0);
    Some(SizeEstimate {
        entries: head.entries + rest_entries as u64,
        held_bytes: head.held_bytes + (rest_entries * rates.held * MARGIN).ceil() as u64,
        per_entry_bytes: rates.held * MARGIN,
        memo_per_entry_bytes: rates.memo * MARGIN,
        before_bytes: before as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trace_so_far_is_extrapolated_over_the_rest_of_the_file() {
        // 1 MB of segments holding 2 MB, then entries of 100 B in the file holding 50 B each
        // (10 B of it memo slots): 100 of them in the chunk the trace began in, 900 after
        let h = HeadShape {
            bytes_read: 1_100_000,
            entries: 1000,
            held_bytes: 2_050_000,
            memo_bytes: 10_000,
            trace_start: Some(Mark {
                bytes_read: 1_010_000,
                entries: 100,
                held_bytes: 2_005_000,
                memo_bytes: 1_000,
            }),
            rate_from: None,
        };
        // the same rates from a later mark give the same estimate
        let later = HeadShape {
            rate_from: Some(Mark {
                bytes_read: 1_050_000,
                entries: 500,
                held_bytes: 2_025_000,
                memo_bytes: 5_000,
            }),
            ..h
        };
        assert_eq!(estimate(11_000_000, &later), estimate(11_000_000, &h));
        let Some(e) = estimate(11_000_000, &h) else {
            panic!("no estimate")
        };
        // 9.9 MB left at 100 B an entry: 99 000 more entries
        assert_eq!(e.entries, 100_000);
        assert_eq!(e.held_bytes, 2_050_000 + 99_000 * 50 * 2);
        // a part: 2 MB before, 2 x 10 B of memo for each of the 100 000, 2 x 2 x 40 B a kept row
        assert_eq!(e.part_bytes(1000, 0), 2_000_000 + 2_000_000 + 160_000);
        assert_eq!(e.entries_within(4_160_000, 0), Some(1000));
        assert_eq!(e.entries_within(3_500_000, 0), None);
        // more room than entries: all of them
        assert_eq!(e.entries_within(100_000_000_000, 0), Some(100_000));
    }

    #[test]
    fn the_costlier_half_of_the_head_is_taken_for_the_rest() {
        // the trace's first 500 entries: 200 B of input and 80 B held each; the next 500:
        // 100 B of input and 50 B held each
        let start = Mark {
            bytes_read: 1_000_000,
            entries: 0,
            held_bytes: 2_000_000,
            memo_bytes: 0,
        };
        let half = Mark {
            bytes_read: 1_100_000,
            entries: 500,
            held_bytes: 2_040_000,
            memo_bytes: 0,
        };
        let h = HeadShape {
            bytes_read: 1_150_000,
            entries: 1000,
            held_bytes: 2_065_000,
            memo_bytes: 0,
            trace_start: Some(start),
            rate_from: Some(half),
        };
        let Some(e) = estimate(11_150_000, &h) else {
            panic!("no estimate")
        };
        // the rest at the later half's 100 B an entry (more entries), each holding the first
        // half's 80 B, twice over
        assert_eq!(e.entries, 1000 + 100_000);
        assert_eq!(e.held_bytes, 2_065_000 + 100_000 * 80 * 2);
    }

    #[test]
    fn no_entry_yet_tells_nothing_unless_the_file_is_read() {
        let h = HeadShape {
            bytes_read: 5_000,
            held_bytes: 700,
            ..HeadShape::default()
        };
        assert_eq!(estimate(10_000, &h), None);
        let Some(whole) = estimate(5_000, &h) else {
            panic!("no estimate")
        };
        assert_eq!((whole.entries, whole.held_bytes), (0, 700));
    }
}
