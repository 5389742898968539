//! Stage 2, model: one immutable, columnar, interned view of a snapshot. [`normalize`] is the
//! only code that knows legacy layouts; nothing after it checks torch versions.

pub mod glossary;
pub mod normalize;
pub mod prefix;
pub mod save;
pub mod settings;
pub mod stats;

use crate::raw::{Encoding, Val};
use crate::trace::{
    Action, EntryExtra, Frame, FrameId, StackId, StackTable, StrId, StringTable, TraceColumns,
};
use std::ops::Range;

pub use normalize::normalize;

/// One device's slice of [`TraceColumns`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceTrace {
    pub device: u32,
    pub rows: Range<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockState {
    ActiveAllocated,
    ActivePendingFree,
    Inactive,
    Unknown,
}

impl BlockState {
    pub fn name(self) -> &'static str {
        match self {
            BlockState::ActiveAllocated => "active_allocated",
            BlockState::ActivePendingFree => "active_pending_free",
            BlockState::Inactive => "inactive",
            BlockState::Unknown => "unknown",
        }
    }
    pub fn is_active(self) -> bool {
        matches!(
            self,
            BlockState::ActiveAllocated | BlockState::ActivePendingFree
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub address: u64,
    pub size_bytes: u64,
    /// Unrounded request (torch ≤ 2.0: `history[0].real_size`, else `size`).
    pub requested_size_bytes: u64,
    pub state: BlockState,
    pub stack: StackId,
    /// torch ≤ 2.0 block whose frames came from `history`, or which had no `address`.
    pub legacy: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub device: u32,
    pub address: u64,
    pub total_size_bytes: u64,
    pub allocated_size_bytes: u64,
    pub active_size_bytes: u64,
    pub requested_size_bytes: u64,
    pub stream: u64,
    pub segment_type: StrId,
    pub pool_id: (i64, i64),
    pub is_expandable: bool,
    pub stack: StackId,
    pub blocks: Range<u32>,
}

/// `external_annotations` entry (torch ≥ 2.4): a `record_function` region start or end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalAnnotation {
    pub device: u32,
    pub time_us: i64,
    pub name: StrId,
    pub stage: StrId,
}

/// A decoded, normalised snapshot.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub strings: StringTable,
    pub frames: Vec<Frame>,
    pub stacks: StackTable,
    pub segments: Vec<Segment>,
    pub blocks: Vec<Block>,
    pub trace: TraceColumns,
    /// Indexed by device ordinal (the position in `device_traces`).
    pub device_traces: Vec<DeviceTrace>,
    /// `allocator_settings` as JSON (display only).
    pub allocator_settings: Option<serde_json::Value>,
    pub external_annotations: Vec<ExternalAnnotation>,
    /// Pinned host allocator data (torch ≥ 2.11, `record_pinned_host_memory=True`), as JSON.
    pub host_segments: Option<serde_json::Value>,
    pub host_trace: TraceColumns,
    pub encoding: Option<Encoding>,
    /// True when the file was a bare list of segments (`torch.cuda.memory_snapshot()`).
    pub segments_only: bool,
    pub warnings: Vec<String>,
}

impl Snapshot {
    pub fn str(&self, id: StrId) -> &str {
        self.strings.get(id)
    }

    /// The action of trace row `row` as the file wrote it.
    pub fn action_name(&self, row: usize) -> &str {
        match self.trace.action.get(row) {
            Some(Action::Unknown) => {
                let name = self.trace.extras_of(row as u32).fold(None, |n, e| match e {
                    EntryExtra::ActionName(s) => Some(*s),
                    _ => n,
                });
                name.map(|s| self.str(s)).unwrap_or("")
            }
            Some(a) => a.name(),
            None => "",
        }
    }

    pub fn frame(&self, id: FrameId) -> Option<&Frame> {
        self.frames.get(id.0 as usize)
    }

    pub fn segment_blocks(&self, seg: &Segment) -> &[Block] {
        self.blocks
            .get(seg.blocks.start as usize..seg.blocks.end as usize)
            .unwrap_or(&[])
    }

    /// Sorted device ordinals: union of segment devices and `device_traces` indices.
    pub fn devices(&self) -> Vec<u32> {
        let mut d: Vec<u32> = self.segments.iter().map(|s| s.device).collect();
        d.extend(self.device_traces.iter().map(|t| t.device));
        d.sort_unstable();
        d.dedup();
        d
    }

    /// The device a viewer shows first: the longest trace, the lowest ordinal on a tie
    /// (upstream's default). `None` when the snapshot has no device at all.
    pub fn default_device(&self) -> Option<u32> {
        self.devices()
            .into_iter()
            .rev()
            .max_by_key(|&d| self.device_rows(d).len())
    }

    /// Trace rows of a device (empty if it has none).
    pub fn device_rows(&self, device: u32) -> Range<u32> {
        self.device_traces
            .iter()
            .find(|t| t.device == device)
            .map(|t| t.rows.clone())
            .unwrap_or(0..0)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn default_device_is_the_longest_trace_lowest_on_a_tie() {
        let e = r#"{"action":"alloc","addr":1,"size":512}"#;
        let doc = format!(r#"{{"segments":[],"device_traces":[[{e}],[{e},{e}],[{e},{e}]]}}"#);
        let snap = crate::load(doc.as_bytes()).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(snap.default_device(), Some(1));
        let empty = crate::load(br#"{"segments":[],"device_traces":[]}"#)
            .unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(empty.default_device(), None);
    }
}
