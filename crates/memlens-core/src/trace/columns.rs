//! The trace as parallel columns, one value per entry ([`TraceColumns`]), and the rare fields of
//! an entry ([`EntryExtra`]). The decoder fills them in file order; the model owns them grouped
//! by device.

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

/// Trace entries of all devices as parallel columns, grouped by device (see [`crate::model::DeviceTrace`]).
#[derive(Debug, Clone, Default)]
pub struct TraceColumns {
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
    pub extras: Vec<(u32, EntryExtra)>,
}

/// `time_us` of an entry that has none (torch ≤ 2.0): what the writers store, private to core.
pub(crate) const TIME_NONE: i64 = i64::MIN;

impl TraceColumns {
    pub fn len(&self) -> usize {
        self.action.len()
    }
    pub fn is_empty(&self) -> bool {
        self.action.is_empty()
    }
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
