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

/// The whole decode of a file of `file_bytes` bytes from its head: `None` until entries were
/// read after [`HeadShape::trace_start`] (nothing yet says what the rest costs), unless the
/// whole file was read.
pub fn estimate(file_bytes: u64, head: &HeadShape) -> Option<SizeEstimate> {
    let rest_bytes = file_bytes.saturating_sub(head.bytes_read);
    let now = Mark {
        bytes_read: head.bytes_read,
        entries: head.entries,
        held_bytes: head.held_bytes,
        memo_bytes: head.memo_bytes,
    };
    let from = head.rate_from.or(head.trace_start);
    let m = match from {
        Some(m) if head.entries > m.entries && head.bytes_read > m.bytes_read => m,
        _ if rest_bytes == 0 => now,
        _ => return None,
    };
    let n = (head.entries - m.entries).max(1) as f64;
    let per_entry = head.held_bytes.saturating_sub(m.held_bytes) as f64 / n;
    let memo_per_entry = (head.memo_bytes.saturating_sub(m.memo_bytes) as f64 / n).min(per_entry);
    let trace_bytes = head.bytes_read.saturating_sub(m.bytes_read).max(1) as f64;
    let rest_entries = (rest_bytes as f64 * n / trace_bytes).ceil();
    // What came before the trace: the held bytes less the entries' share.
    let before = (m.held_bytes as f64 - m.entries as f64 * per_entry).max(0.0);
    Some(SizeEstimate {
        entries: head.entries + rest_entries as u64,
        held_bytes: head.held_bytes + (rest_entries * per_entry).ceil() as u64,
        per_entry_bytes: per_entry,
        memo_per_entry_bytes: memo_per_entry,
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
        assert_eq!(e.held_bytes, 2_050_000 + 99_000 * 50);
        // a part: 2 MB before, 10 B of memo for each of the 100 000, 2 x 40 B a kept row
        assert_eq!(e.part_bytes(1000, 0), 2_000_000 + 1_000_000 + 80_000);
        assert_eq!(e.entries_within(3_080_000, 0), Some(1000));
        assert_eq!(e.entries_within(2_500_000, 0), None);
        // more room than entries: all of them
        assert_eq!(e.entries_within(100_000_000_000, 0), Some(100_000));
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
