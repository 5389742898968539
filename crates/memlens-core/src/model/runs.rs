//! A per-entry string column stored as runs of equal values.
//!
//! `compile_context` and `user_metadata` hold one value for nearly every entry of a trace
//! (`""`, or `"N/A"` on every entry torch ≥ 2.4 writes): as plain columns they were 8 of the 48
//! bytes an entry costs, written and paged in for nothing. As runs they cost 8 bytes per change
//! of value. A column whose earlier rows are rewritten (a pickle may SETITEM an entry's dict
//! again, long after) turns into a plain column at that moment, so no input makes it slow.

use crate::raw::strings::StrId;

#[derive(Debug, Clone, PartialEq)]
enum Repr {
    /// `values[i]` holds for rows `starts[i]..starts[i + 1]` (the last run up to `len`).
    Runs {
        starts: Vec<u32>,
        values: Vec<StrId>,
        len: u32,
    },
    Dense(Vec<StrId>),
}

/// A column of [`StrId`]s, one per trace entry, stored as runs (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct StrRuns(Repr);

impl Default for StrRuns {
    fn default() -> Self {
        StrRuns(Repr::Runs {
            starts: Vec::new(),
            values: Vec::new(),
            len: 0,
        })
    }
}

impl StrRuns {
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
    pub fn get(&self, row: usize) -> Option<&StrId> {
        match &self.0 {
            Repr::Runs {
                starts,
                values,
                len,
            } => {
                if row >= *len as usize {
                    return None;
                }
                let i = starts.partition_point(|&s| s as usize <= row);
                values.get(i.checked_sub(1)?)
            }
            Repr::Dense(v) => v.get(row),
        }
    }

    #[inline]
    pub fn push(&mut self, v: StrId) {
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

    /// Sets an existing row (`row < len`; others are ignored).
    pub fn set(&mut self, row: usize, v: StrId) {
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
            let dense: Vec<StrId> = (0..*len as usize)
                .map(|r| {
                    let i = starts.partition_point(|&s| s as usize <= r);
                    values
                        .get(i.wrapping_sub(1))
                        .copied()
                        .unwrap_or(StrId::EMPTY)
                })
                .collect();
            self.0 = Repr::Dense(dense);
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_read_back_like_a_plain_column() {
        let mut rng = 0x2545_f491u64;
        for round in 0..200 {
            let mut runs = StrRuns::default();
            let mut plain: Vec<StrId> = Vec::new();
            for _ in 0..(round % 40) {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let v = StrId((rng % 3) as u32);
                match rng % 7 {
                    // rewrite the last row, or an earlier one
                    0 if !plain.is_empty() => {
                        let r = plain.len() - 1;
                        plain[r] = v;
                        runs.set(r, v);
                    }
                    1 if !plain.is_empty() => {
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
                for r in 0..plain.len() + 2 {
                    assert_eq!(runs.get(r), plain.get(r), "round {round} row {r}");
                }
            }
        }
    }
}
