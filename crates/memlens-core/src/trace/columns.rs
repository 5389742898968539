//! The trace as parallel columns, one value per entry ([`TraceColumns`]), and the rare fields of
//! an entry ([`EntryExtra`]). The decoder fills them in file order, its rare fields still as its
//! own values (`TraceColumns<raw::value::RowExtra>`: a parallel decode's join renumbers them);
//! the model owns them grouped by device, rare fields read (`TraceColumns<EntryExtra>`).

use super::action::Action;
use super::runs::{Runs, StrRuns};
use super::stacks::StackId;
use super::strings::StrId;

/// Rare per-entry fields, sorted by row.
#[derive(Debug, Clone, PartialEq)]
pub enum EntryExtra {
    /// `oom`: bytes free on the device.
    DeviceFree(u64),
    InternalMetadata(StrId),
    PoolId(i64, i64),
    ForwardFrames(Vec<StrId>),
    Category(StrId),
    /// The action as written, for [`Action::Unknown`] entries.
    ActionName(StrId),
}

/// Trace entries of all devices as parallel columns, grouped by device (see
/// [`crate::model::DeviceTrace`]). `E`: what a rare field is ([`EntryExtra`] but in the
/// decoder).
#[derive(Debug, Clone)]
pub struct TraceColumns<E = EntryExtra> {
    /// An [`Action::Unknown`] entry's name is in its extras ([`EntryExtra::ActionName`];
    /// [`crate::model::Snapshot::action_name`] reads either).
    pub action: Vec<Action>,
    pub addr: Vec<u64>,
    pub size_bytes: Vec<u64>,
    pub stream: Runs<u64>,
    /// µs since the epoch, where the entry has a `time_us` (torch ≤ 2.0 has none); read through
    /// [`TraceColumns::time_of`] (missing times are stored as a value no reader compares with).
    pub time_us: Vec<i64>,
    pub stack: Vec<StackId>,
    pub compile_context: StrRuns,
    pub user_metadata: StrRuns,
    pub extras: Vec<(u32, E)>,
}

impl<E> Default for TraceColumns<E> {
    fn default() -> Self {
        TraceColumns {
            action: Vec::new(),
            addr: Vec::new(),
            size_bytes: Vec::new(),
            stream: Runs::default(),
            time_us: Vec::new(),
            stack: Vec::new(),
            compile_context: StrRuns::default(),
            user_metadata: StrRuns::default(),
            extras: Vec::new(),
        }
    }
}

/// Length and capacity, the same for every kind of rare field.
impl<E> TraceColumns<E> {
    pub fn len(&self) -> usize {
        self.action.len()
    }
    pub fn is_empty(&self) -> bool {
        self.action.is_empty()
    }

    /// Room for `n` more entries in the per-entry columns.
    pub fn reserve(&mut self, n: usize) {
        self.action.reserve(n);
        self.addr.reserve(n);
        self.size_bytes.reserve(n);
        self.time_us.reserve(n);
        self.stack.reserve(n);
    }

    /// Rows the columns hold without growing.
    pub fn capacity(&self) -> usize {
        self.action.capacity()
    }

    /// Room for exactly `n` more rows in the per-entry columns, where memory allows (otherwise
    /// the columns simply grow as rows come).
    pub fn reserve_exact(&mut self, n: usize) {
        let _ = self.action.try_reserve_exact(n).is_ok()
            && self.addr.try_reserve_exact(n).is_ok()
            && self.size_bytes.try_reserve_exact(n).is_ok()
            && self.time_us.try_reserve_exact(n).is_ok()
            && self.stack.try_reserve_exact(n).is_ok();
    }

    /// Gives back the capacity reserved and not used.
    pub fn shrink_to_fit(&mut self) {
        self.action.shrink_to_fit();
        self.addr.shrink_to_fit();
        self.size_bytes.shrink_to_fit();
        self.stream.shrink_to_fit();
        self.time_us.shrink_to_fit();
        self.stack.shrink_to_fit();
        self.compile_context.shrink_to_fit();
        self.user_metadata.shrink_to_fit();
    }

    /// Appends an entry with no field set (unknown action, no time, empty stack); its row.
    pub(crate) fn push_default(&mut self) -> u32 {
        let r = self.action.len() as u32;
        self.action.push(Action::Unknown);
        self.addr.push(0);
        self.size_bytes.push(0);
        self.stream.push(0);
        self.time_us.push(TIME_NONE);
        self.stack.push(StackId::EMPTY);
        self.compile_context.push(StrId::EMPTY);
        self.user_metadata.push(StrId::EMPTY);
        r
    }

    /// The same entries with each rare field turned by `f` (dropped where it gives `None`),
    /// sorted by row.
    pub fn map_extras<F>(self, f: impl Fn(E) -> Option<F>) -> TraceColumns<F> {
        let (mut c, old) = self.swap_extras(Vec::new());
        c.extras = old
            .into_iter()
            .filter_map(|(r, e)| f(e).map(|x| (r, x)))
            .collect();
        c.extras.sort_by_key(|(r, _)| *r);
        c
    }

    /// The same columns (moved, not copied) with `extras` as their rare fields, and the rare
    /// fields they had.
    pub fn swap_extras<F>(self, extras: Vec<(u32, F)>) -> (TraceColumns<F>, Vec<(u32, E)>) {
        let c = TraceColumns {
            action: self.action,
            addr: self.addr,
            size_bytes: self.size_bytes,
            stream: self.stream,
            time_us: self.time_us,
            stack: self.stack,
            compile_context: self.compile_context,
            user_metadata: self.user_metadata,
            extras,
        };
        (c, self.extras)
    }
}

/// `time_us` of an entry that has none (torch ≤ 2.0): what the writers store, private to core.
pub(crate) const TIME_NONE: i64 = i64::MIN;

impl TraceColumns {
    /// Extras of one entry.
    pub fn extras_of(&self, row: u32) -> impl Iterator<Item = &EntryExtra> {
        let start = self.extras.partition_point(|(r, _)| *r < row);
        self.extras[start..]
            .iter()
            .take_while(move |(r, _)| *r == row)
            .map(|(_, e)| e)
    }
    /// `time_us` of entry `row`; `None` where it has none (torch ≤ 2.0) or is out of range.
    pub fn time_of(&self, row: usize) -> Option<i64> {
        self.time_us.get(row).copied().filter(|&t| t != TIME_NONE)
    }
    /// Sets (or, with `None`, removes) the time of entry `row`, if it exists.
    pub fn set_time(&mut self, row: usize, t: Option<i64>) {
        if let Some(slot) = self.time_us.get_mut(row) {
            *slot = t.unwrap_or(TIME_NONE);
        }
    }
    pub fn device_free(&self, row: u32) -> Option<u64> {
        self.extras_of(row).find_map(|e| match e {
            EntryExtra::DeviceFree(f) => Some(*f),
            _ => None,
        })
    }
}

impl TraceColumns {
    /// The entries of `ranges` (rows, in the order given; clipped to the columns) as new
    /// columns, their extras renumbered.
    pub fn select(&self, ranges: &[std::ops::Range<usize>]) -> TraceColumns {
        let mut c = TraceColumns::default();
        let (mut streams, mut contexts, mut metadata) = (
            self.stream.cursor(),
            self.compile_context.cursor(),
            self.user_metadata.cursor(),
        );
        for r in ranges {
            let (start, end) = (r.start.min(self.len()), r.end.min(self.len()));
            let first_out = c.len() as u32;
            for row in start..end.max(start) {
                c.action.push(self.action[row]);
                c.addr.push(self.addr[row]);
                c.size_bytes.push(self.size_bytes[row]);
                c.stream.push(streams.at(row).unwrap_or(0));
                c.time_us.push(self.time_us[row]);
                c.stack.push(self.stack[row]);
                c.compile_context
                    .push(contexts.at(row).unwrap_or(StrId::EMPTY));
                c.user_metadata
                    .push(metadata.at(row).unwrap_or(StrId::EMPTY));
            }
            let from = self.extras.partition_point(|(x, _)| (*x as usize) < start);
            for (x, e) in self.extras[from..]
                .iter()
                .take_while(|(x, _)| (*x as usize) < end)
            {
                c.extras.push((first_out + (*x - start as u32), e.clone()));
            }
        }
        c
    }
}
