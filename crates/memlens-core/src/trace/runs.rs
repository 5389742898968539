//! Per-entry columns stored as runs of equal values.
//!
//! `compile_context`, `user_metadata` and `stream` hold one value for nearly every entry of a
//! trace (`""`; `"N/A"` on every entry torch ≥ 2.4 writes; stream 0): as plain columns they
//! were 16 of the 48 bytes an entry cost, written and paged in for nothing. As runs they cost a
//! few bytes per change of value. A column whose values change more often than every other row
//! (streams used in turn) becomes a plain column, and so does one whose earlier rows are
//! rewritten (a pickle may SETITEM an entry's dict again, long after): no input makes it slower
//! or larger than a plain column by more than a constant.

use super::strings::StrId;

#[derive(Debug, Clone, PartialEq)]
enum Repr<T> {
    /// `values[i]` holds for rows `starts[i]..starts[i + 1]` (the last run up to `len`).
    Runs {
        starts: Vec<u32>,
        values: Vec<T>,
        len: u32,
    },
    Dense(Vec<T>),
}

/// A column of values, one per trace entry, stored as runs (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct Runs<T>(Repr<T>);

/// Per-entry strings.
pub type StrRuns = Runs<StrId>;

/// Runs past this many stay runs only while there are fewer than half as many as rows.
const FEW_RUNS: usize = 64;

impl<T> Default for Runs<T> {
    fn default() -> Self {
        Runs(Repr::Runs {
            starts: Vec::new(),
            values: Vec::new(),
            len: 0,
        })
    }
}

impl<T: Copy + PartialEq + Default> Runs<T> {
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Runs { len, .. } => *len as usize,
            Repr::Dense(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The value of `row`, as `Vec::get` gives it.
    pub fn get(&self, row: usize) -> Option<&T> {
        match &self.0 {
            Repr::Runs {
                starts,
                values,
                len,
            } => {
                if row >= *len as usize {
                    return None;
                }
                values.get(run_of(starts, row)?)
            }
            Repr::Dense(v) => v.get(row),
        }
    }

    /// Appends a row. The common case (the value of the row before) only counts it.
    #[inline(always)]
    pub fn push(&mut self, v: T) {
        if let Repr::Runs { values, len, .. } = &mut self.0 {
            if values.last() == Some(&v) {
                *len += 1;
                return;
            }
        }
        self.push_new(v);
    }

    /// [`Self::push`] of a value that starts a run, or of any value to a plain column.
    #[inline(never)]
    fn push_new(&mut self, v: T) {
        if let Repr::Runs { values, len, .. } = &self.0 {
            if values.len() >= FEW_RUNS && values.len() * 2 > *len as usize {
                self.make_dense();
            }
        }
        match &mut self.0 {
            Repr::Runs {
                starts,
                values,
                len,
            } => {
                if values.last() != Some(&v) {
                    starts.push(*len);
                    values.push(v);
                }
                *len += 1;
            }
            Repr::Dense(d) => d.push(v),
        }
    }

    /// The values of `rows` (clipped to the column), as a plain vector.
    pub fn to_vec(&self, rows: std::ops::Range<usize>) -> Vec<T> {
        let end = rows.end.min(self.len());
        let mut c = self.cursor();
        (rows.start.min(end)..end)
            .map(|r| c.at(r).unwrap_or_default())
            .collect()
    }

    /// A reader for rows visited mostly in increasing order: O(1) a row where [`Self::get`]
    /// searches the runs each time.
    pub fn cursor(&self) -> Cursor<'_, T> {
        Cursor { runs: self, i: 0 }
    }

    #[cold]
    fn make_dense(&mut self) {
        if let Repr::Runs {
            starts,
            values,
            len,
        } = &self.0
        {
            let mut dense = Vec::with_capacity(*len as usize);
            for (i, &v) in values.iter().enumerate() {
                let end = starts.get(i + 1).copied().unwrap_or(*len);
                let start = starts.get(i).copied().unwrap_or(end);
                dense.extend(std::iter::repeat_n(v, end.saturating_sub(start) as usize));
            }
            self.0 = Repr::Dense(dense);
        }
    }

    /// Sets an existing row (`row < len`; others are ignored).
    pub fn set(&mut self, row: usize, v: T) {
        if row >= self.len() || self.get(row) == Some(&v) {
            return;
        }
        if let Repr::Runs {
            starts,
            values,
            len,
        } = &mut self.0
        {
            // The last row, alone in its run or not: the common rewrite (an entry whose fields
            // are set one by one) stays a run.
            if row + 1 == *len as usize {
                if starts.last() == Some(&(row as u32)) {
                    starts.pop();
                    values.pop();
                }
                *len -= 1;
                self.push(v);
                return;
            }
        }
        self.make_dense();
        if let Repr::Dense(d) = &mut self.0 {
            if let Some(x) = d.get_mut(row) {
                *x = v;
            }
        }
    }

    /// Gives back unused capacity.
    pub fn shrink_to_fit(&mut self) {
        match &mut self.0 {
            Repr::Runs { starts, values, .. } => {
                starts.shrink_to_fit();
                values.shrink_to_fit();
            }
            Repr::Dense(d) => d.shrink_to_fit(),
        }
    }
}

/// The run holding `row`, given the runs' first rows.
fn run_of(starts: &[u32], row: usize) -> Option<usize> {
    starts
        .partition_point(|&s| s as usize <= row)
        .checked_sub(1)
}

/// See [`Runs::cursor`].
pub struct Cursor<'a, T> {
    runs: &'a Runs<T>,
    /// The run the last row read was in.
    i: usize,
}

impl<T: Copy + PartialEq + Default> Cursor<'_, T> {
    /// The value of `row` (`None` past the end).
    pub fn at(&mut self, row: usize) -> Option<T> {
        match &self.runs.0 {
            Repr::Dense(d) => d.get(row).copied(),
            Repr::Runs {
                starts,
                values,
                len,
            } => {
                if row >= *len as usize {
                    return None;
                }
                let holds = |i: usize| {
                    starts.get(i).is_some_and(|&s| s as usize <= row)
                        && starts.get(i + 1).is_none_or(|&e| row < e as usize)
                };
                if !holds(self.i) {
                    self.i = if holds(self.i + 1) {
                        self.i + 1
                    } else {
                        run_of(starts, row)?
                    };
                }
                values.get(self.i).copied()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_read_back_like_a_plain_column() {
        let mut rng = 0x2545_f491u64;
        for round in 0..200 {
            let mut runs = StrRuns::default();
            let mut plain: Vec<StrId> = Vec::new();
            for _ in 0..(round * 7 % 600) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                // changes on most rows (becomes plain past FEW_RUNS), or rarely
                let v = match round % 2 {
                    0 => StrId((rng % 3) as u32),
                    _ => StrId((rng % 97 == 0) as u32),
                };
                match rng % 7 {
                    // rewrite the last row, or an earlier one
                    0 if !plain.is_empty() => {
                        let r = plain.len() - 1;
                        plain[r] = v;
                        runs.set(r, v);
                    }
                    1 if !plain.is_empty() && rng % 5 == 0 => {
                        let r = (rng >> 20) as usize % plain.len();
                        plain[r] = v;
                        runs.set(r, v);
                    }
                    _ => {
                        plain.push(v);
                        runs.push(v);
                    }
                }
                assert_eq!(runs.len(), plain.len());
            }
            let mut c = runs.cursor();
            for r in 0..plain.len() + 2 {
                assert_eq!(runs.get(r), plain.get(r), "round {round} row {r}");
                assert_eq!(
                    c.at(r),
                    plain.get(r).copied(),
                    "round {round} row {r}: cursor"
                );
            }
            // back and forth
            for r in (0..plain.len()).rev().step_by(3) {
                assert_eq!(
                    c.at(r),
                    plain.get(r).copied(),
                    "round {round} row {r}: backward"
                );
            }
            assert_eq!(
                runs.to_vec(3..plain.len() + 5),
                plain.get(3..).unwrap_or(&[])
            );
            if round % 2 == 0 && plain.len() > 300 {
                assert!(
                    matches!(runs.0, Repr::Dense(_)),
                    "round {round}: still runs"
                );
            }
        }
    }
}
