//! An address-ordered map for the live state's blocks: sorted runs of at most [`CHUNK`] entries
//! (keys and values in separate arrays) under a sorted list of each run's first key. A lookup is
//! two binary searches over contiguous memory, an insert or remove moves at most one run; a
//! found entry's position ([`Pos`]) reaches its neighbours and edits next to it without another
//! search (the state's carve and release: one search each). For
//! the state's workload (a few thousand blocks, every trace entry a handful of exact and
//! predecessor lookups) it is several times cheaper than `BTreeMap`, whose nodes are searched
//! linearly and scattered in memory (docs/BENCHMARKS.md).

/// Most entries in one run; a run that grows past it is split in two.
const CHUNK: usize = 32;

#[derive(Debug, Clone)]
struct Run<V> {
    keys: Vec<u64>,
    vals: Vec<V>,
}

/// Where an entry sits (run, index): found by one search, then its neighbours and edits around
/// it need none. Valid until the map changes, except as [`AddrMap::insert_after`] and
/// [`AddrMap::remove_at`] say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pos {
    r: usize,
    i: usize,
}

/// A map from `u64` addresses to `V`, iterated in address order.
#[derive(Debug, Clone)]
pub(crate) struct AddrMap<V> {
    runs: Vec<Run<V>>,
    /// First key of each run (no run is empty).
    firsts: Vec<u64>,
    len: usize,
}

impl<V> Default for AddrMap<V> {
    fn default() -> Self {
        AddrMap {
            runs: Vec::new(),
            firsts: Vec::new(),
            len: 0,
        }
    }
}

/// Equal when the entries are (however they are split into runs).
impl<V: Copy + PartialEq> PartialEq for AddrMap<V> {
    fn eq(&self, o: &Self) -> bool {
        self.len == o.len && self.iter().eq(o.iter())
    }
}

impl<V: Copy> AddrMap<V> {
    pub fn new() -> Self {
        AddrMap::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn clear(&mut self) {
        self.runs.clear();
        self.firsts.clear();
        self.len = 0;
    }

    /// The run that holds `key` if anything does: the last run starting at or before it.
    fn run_of(&self, key: u64) -> Option<usize> {
        self.firsts.partition_point(|&f| f <= key).checked_sub(1)
    }

    /// (run, index) of `key`.
    fn find(&self, key: u64) -> Option<(usize, usize)> {
        let r = self.run_of(key)?;
        let i = self.runs.get(r)?.keys.binary_search(&key).ok()?;
        Some((r, i))
    }

    pub fn get(&self, key: &u64) -> Option<&V> {
        let (r, i) = self.find(*key)?;
        self.runs.get(r)?.vals.get(i)
    }

    pub fn get_mut(&mut self, key: &u64) -> Option<&mut V> {
        let (r, i) = self.find(*key)?;
        self.runs.get_mut(r)?.vals.get_mut(i)
    }

    /// Inserts `v` at `key`, returning the value it replaces.
    pub fn insert(&mut self, key: u64, v: V) -> Option<V> {
        let r = match self.run_of(key) {
            Some(r) => r,
            None if self.runs.is_empty() => {
                self.runs.push(Run {
                    keys: vec![key],
                    vals: vec![v],
                });
                self.firsts.push(key);
                self.len = 1;
                return None;
            }
            // Before every key: the first run takes it.
            None => 0,
        };
        let run = self.runs.get_mut(r)?;
        let i = match run.keys.binary_search(&key) {
            Ok(i) => return run.vals.get_mut(i).map(|x| std::mem::replace(x, v)),
            Err(i) => i,
        };
        run.keys.insert(i, key);
        run.vals.insert(i, v);
        if let Some(f) = self.firsts.get_mut(r) {
            *f = (*f).min(key);
        }
        self.len += 1;
        self.split_if_full(r);
        None
    }

    /// Splits run `r` in two halves if it grew past [`CHUNK`]; whether it did.
    fn split_if_full(&mut self, r: usize) -> bool {
        let Some(run) = self.runs.get_mut(r).filter(|run| run.keys.len() > CHUNK) else {
            return false;
        };
        let keys = run.keys.split_off(CHUNK / 2);
        let vals = run.vals.split_off(CHUNK / 2);
        if let Some(&f) = keys.first() {
            self.firsts.insert(r + 1, f);
            self.runs.insert(r + 1, Run { keys, vals });
        }
        true
    }

    pub fn remove(&mut self, key: &u64) -> Option<V> {
        let (r, i) = self.find(*key)?;
        self.remove_at(Pos { r, i })
    }

    /// Position of `key`.
    pub fn pos_of(&self, key: u64) -> Option<Pos> {
        let (r, i) = self.find(key)?;
        Some(Pos { r, i })
    }

    /// Position of the entry with the greatest key at or below `key`.
    pub fn pos_at_or_before(&self, key: u64) -> Option<Pos> {
        let (r, i) = self.pred(key, true)?;
        Some(Pos { r, i })
    }

    /// The entry at `p`.
    pub fn at(&self, p: Pos) -> Option<(u64, &V)> {
        let run = self.runs.get(p.r)?;
        Some((*run.keys.get(p.i)?, run.vals.get(p.i)?))
    }

    /// The value at `p`, mutable (its key stays).
    pub fn at_mut(&mut self, p: Pos) -> Option<&mut V> {
        self.runs.get_mut(p.r)?.vals.get_mut(p.i)
    }

    /// The entry after `p`, and its position.
    pub fn next(&self, p: Pos) -> Option<(Pos, u64, &V)> {
        let q = if p.i + 1 < self.runs.get(p.r)?.keys.len() {
            Pos { r: p.r, i: p.i + 1 }
        } else {
            Pos { r: p.r + 1, i: 0 }
        };
        let (k, v) = self.at(q)?;
        Some((q, k, v))
    }

    /// The entry before `p`, and its position.
    pub fn prev(&self, p: Pos) -> Option<(Pos, u64, &V)> {
        let q = match p.i.checked_sub(1) {
            Some(i) => Pos { r: p.r, i },
            None => {
                let r = p.r.checked_sub(1)?;
                Pos {
                    r,
                    i: self.runs.get(r)?.keys.len().checked_sub(1)?,
                }
            }
        };
        let (k, v) = self.at(q)?;
        Some((q, k, v))
    }

    /// Removes the entry at `p`. Positions before `p` stay valid.
    pub fn remove_at(&mut self, p: Pos) -> Option<V> {
        let run = self.runs.get_mut(p.r)?;
        if p.i >= run.keys.len() {
            return None;
        }
        run.keys.remove(p.i);
        let v = run.vals.remove(p.i);
        self.len -= 1;
        match run.keys.first() {
            None => {
                self.runs.remove(p.r);
                self.firsts.remove(p.r);
            }
            Some(&f) => {
                if let Some(x) = self.firsts.get_mut(p.r) {
                    *x = f;
                }
            }
        }
        Some(v)
    }

    /// Inserts `v` at `key`, which must lie strictly between the key at `p` and the next one;
    /// returns its position (every other position may have moved).
    pub fn insert_after(&mut self, p: Pos, key: u64, v: V) -> Option<Pos> {
        let run = self.runs.get_mut(p.r)?;
        let i = p.i + 1;
        if i > run.keys.len() {
            return None;
        }
        run.keys.insert(i, key);
        run.vals.insert(i, v);
        self.len += 1;
        if !self.split_if_full(p.r) {
            return Some(Pos { r: p.r, i });
        }
        Some(match i.checked_sub(CHUNK / 2) {
            Some(j) => Pos { r: p.r + 1, i: j },
            None => Pos { r: p.r, i },
        })
    }

    /// (run, index) of the last entry whose key is below `key` (`inclusive`: at most `key`).
    fn pred(&self, key: u64, inclusive: bool) -> Option<(usize, usize)> {
        let r = if inclusive {
            self.run_of(key)?
        } else {
            self.firsts.partition_point(|&f| f < key).checked_sub(1)?
        };
        let run = self.runs.get(r)?;
        let n = if inclusive {
            run.keys.partition_point(|&k| k <= key)
        } else {
            run.keys.partition_point(|&k| k < key)
        };
        Some((r, n.checked_sub(1)?))
    }

    /// The entry with the greatest key below `key` (`BTreeMap::range(..key).next_back()`).
    pub fn before(&self, key: u64) -> Option<(u64, &V)> {
        let (r, i) = self.pred(key, false)?;
        let run = self.runs.get(r)?;
        Some((*run.keys.get(i)?, run.vals.get(i)?))
    }

    /// The entry with the greatest key at or below `key` (`range(..=key).next_back()`).
    pub fn at_or_before(&self, key: u64) -> Option<(u64, &V)> {
        let (r, i) = self.pred(key, true)?;
        let run = self.runs.get(r)?;
        Some((*run.keys.get(i)?, run.vals.get(i)?))
    }

    /// The same, mutable.
    pub fn at_or_before_mut(&mut self, key: u64) -> Option<(u64, &mut V)> {
        let (r, i) = self.pred(key, true)?;
        let run = self.runs.get_mut(r)?;
        Some((*run.keys.get(i)?, run.vals.get_mut(i)?))
    }

    /// Entries in address order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, &V)> + '_ {
        self.runs
            .iter()
            .flat_map(|r| r.keys.iter().copied().zip(r.vals.iter()))
    }

    /// Entries in address order, copied into one vector allocated once at its size (collecting
    /// [`AddrMap::iter`] would grow it by reallocation: its run-by-run iterator has no size).
    pub fn to_vec(&self) -> Vec<(u64, V)> {
        let mut v = Vec::with_capacity(self.len);
        for run in &self.runs {
            v.extend(run.keys.iter().copied().zip(run.vals.iter().copied()));
        }
        v
    }

    /// Entries in address order, values mutable.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u64, &mut V)> + '_ {
        self.runs
            .iter_mut()
            .flat_map(|r| r.keys.iter().copied().zip(r.vals.iter_mut()))
    }

    /// Entries with `from <= key < to`, in address order.
    pub fn range(&self, from: u64, to: u64) -> impl Iterator<Item = (u64, &V)> + '_ {
        let r0 = self.run_of(from).unwrap_or(0);
        self.runs
            .get(r0..)
            .unwrap_or_default()
            .iter()
            .flat_map(|r| r.keys.iter().copied().zip(r.vals.iter()))
            .skip_while(move |(k, _)| *k < from)
            .take_while(move |(k, _)| *k < to)
    }

    /// The map of sorted, distinct `(key, value)` pairs.
    pub fn from_sorted(pairs: &[(u64, V)]) -> Self {
        let mut m = AddrMap::new();
        for part in pairs.chunks(CHUNK / 2 + CHUNK / 4) {
            // Collected from the slice, so each run is allocated once at its size.
            let keys: Vec<u64> = part.iter().map(|(k, _)| *k).collect();
            let vals: Vec<V> = part.iter().map(|(_, v)| *v).collect();
            if let Some(&f) = keys.first() {
                m.firsts.push(f);
                m.len += keys.len();
                m.runs.push(Run { keys, vals });
            }
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::AddrMap;
    use std::collections::BTreeMap;

    /// Random inserts, removes and lookups against `BTreeMap`.
    #[test]
    fn agrees_with_btreemap() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut a: AddrMap<u32> = AddrMap::new();
        let mut b: BTreeMap<u64, u32> = BTreeMap::new();
        for step in 0..200_000u32 {
            let k = next() % 3000;
            match next() % 5 {
                0 | 1 => assert_eq!(a.insert(k, step), b.insert(k, step)),
                2 => assert_eq!(a.remove(&k), b.remove(&k)),
                3 => {
                    // Positions: neighbours, and edits next to a found entry.
                    let Some(p) = a.pos_of(k) else {
                        assert!(!b.contains_key(&k));
                        continue;
                    };
                    let after = b.range(k + 1..).next().map(|(&k, &v)| (k, v));
                    let before = b.range(..k).next_back().map(|(&k, &v)| (k, v));
                    assert_eq!(a.next(p).map(|(_, k, v)| (k, *v)), after);
                    assert_eq!(a.prev(p).map(|(_, k, v)| (k, *v)), before);
                    if next() % 2 == 0 {
                        assert_eq!(a.remove_at(p), b.remove(&k));
                    } else if after.is_none_or(|(n, _)| n > k + 1) {
                        let q = a.insert_after(p, k + 1, step);
                        b.insert(k + 1, step);
                        assert_eq!(
                            q.and_then(|q| a.at(q)).map(|(k, v)| (k, *v)),
                            Some((k + 1, step))
                        );
                    }
                }
                _ => {
                    assert_eq!(a.get(&k), b.get(&k));
                    assert_eq!(a.before(k), b.range(..k).next_back().map(|(&k, v)| (k, v)));
                    assert_eq!(
                        a.at_or_before(k),
                        b.range(..=k).next_back().map(|(&k, v)| (k, v))
                    );
                    let hi = k + next() % 200;
                    assert!(a.range(k, hi).eq(b.range(k..hi).map(|(&k, v)| (k, v))));
                }
            }
            assert_eq!(a.len(), b.len());
        }
        assert!(a.iter().eq(b.iter().map(|(&k, v)| (k, v))));
        let pairs: Vec<(u64, u32)> = b.iter().map(|(&k, &v)| (k, v)).collect();
        let c = AddrMap::from_sorted(&pairs);
        assert!(c.iter().eq(a.iter()));
        assert_eq!(c.len(), a.len());
    }
}
