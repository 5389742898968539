//! The Allocator State History's event list: one device's trace entries as columns, each block
//! entry labelled with its allocation's version read from the allocation table
//! ([`crate::replay`]), segment entries with upstream's segment versions, streams as small
//! ordinals, the `oom` entries and the timeline's peak. Built once in the worker, it travels
//! through [`crate::columns`] as it is; the lookups and upstream's `formatEvent` lines are here
//! so that the page and the native tests read the same.
//!
//! Versions (upstream's `annotate_snapshot`): a block entry's is the number of `free_completed`
//! entries at its address before it, which is its allocation's [`Allocation::version`]; an entry
//! the table holds no allocation for (a repeated or lone `free_requested`) counts the table's
//! frees at its address before it. A segment entry's version counts the `segment_free` /
//! `segment_unmap` entries at its address before it.
//!
//! [`Allocation::version`]: crate::replay::Allocation::version

use crate::columns::value::{decode_each, encode_each};
use crate::columns::Value;
use crate::layout::axis::format_bytes;
use crate::model::Snapshot;
use crate::replay::{EventIdx, Replay};
use crate::trace::{Action, TIME_NONE};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// An `oom` entry of a device's trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OomEvent {
    pub event: EventIdx,
    pub requested_bytes: u64,
    pub device_free_bytes: Option<u64>,
}

/// Small facts about the list (its header when it travels).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventListMeta {
    pub n_events: u32,
    /// `timeline_peak_event` of `device_stats`, if the peak is after an entry.
    pub peak_event: Option<EventIdx>,
    pub ooms: Vec<OomEvent>,
    /// Stream ids by the ordinal the `stream` column holds (in first-seen order).
    pub streams: Vec<u64>,
    /// What the history's reconstruction had to skip or guess.
    pub warnings: Vec<String>,
    /// Time the worker spent building the history (0 when it was built before).
    pub build_ms: f64,
}

/// A device's trace entries as columns (index = [`EventIdx`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventList {
    pub device: u32,
    pub action: Vec<Action>,
    pub addr: Vec<u64>,
    pub size_bytes: Vec<u64>,
    /// Upstream's per-address version (the `_N` of `b'7f…_N`); see the module docs.
    pub version: Vec<u32>,
    /// Stream ordinal (an index into `meta.streams`).
    pub stream: Vec<u32>,
    /// µs since the epoch where the entry has one; read through [`EventList::time_of`] (a
    /// missing time travels as a value no reader compares with).
    time_us: Vec<i64>,
    pub meta: EventListMeta,
}

crate::impl_columns! {
    EventList {
        columns [action, addr, size_bytes, version, stream, time_us];
        header [meta];
        // The receiver knows which device it asked for.
        skip [device];
    }
}

/// `Action as u8`.
impl Value for Action {
    type Prim = u8;
    fn encode(values: &[Self]) -> Cow<'_, [u8]> {
        encode_each(values, |&a| a as u8)
    }
    fn decode(prims: Vec<u8>) -> Option<Vec<Self>> {
        decode_each(prims, |p| Action::ALL.get(usize::from(p)).copied())
    }
}

/// Upstream's `formatSize`: `1.5MiB (1572864 bytes)`.
pub fn format_size(bytes: u64) -> String {
    format!(
        "{} ({bytes} bytes)",
        format_bytes(bytes as f64).replace(' ', "")
    )
}

impl EventList {
    /// The device's trace as list columns, versions from `replay` (the device's allocation
    /// table), `warnings` those of its history.
    pub fn build(s: &Snapshot, replay: &Replay, warnings: Vec<String>) -> EventList {
        let device = replay.device;
        let rows = s.device_rows(device);
        let t = &s.trace;
        let n = rows.len();
        let mut list = EventList {
            device,
            action: Vec::with_capacity(n),
            addr: Vec::with_capacity(n),
            size_bytes: Vec::with_capacity(n),
            version: Vec::new(),
            stream: Vec::with_capacity(n),
            time_us: Vec::with_capacity(n),
            meta: EventListMeta {
                n_events: n as u32,
                peak_event: crate::device_stats(s, device).timeline_peak_event,
                warnings,
                ..EventListMeta::default()
            },
        };
        let mut streams = t.stream.cursor();
        let mut ordinals = StreamOrdinals::default();
        for (i, r) in rows.enumerate() {
            let r = r as usize;
            let action = t.action.get(r).copied().unwrap_or(Action::Unknown);
            let size = t.size_bytes.get(r).copied().unwrap_or(0);
            if action == Action::Oom {
                list.meta.ooms.push(OomEvent {
                    event: i as u32,
                    requested_bytes: size,
                    device_free_bytes: t.device_free(r as u32),
                });
            }
            list.action.push(action);
            list.addr.push(t.addr.get(r).copied().unwrap_or(0));
            list.size_bytes.push(size);
            list.stream.push(ordinals.of(streams.at(r).unwrap_or(0)));
            list.time_us.push(t.time_of(r).unwrap_or(TIME_NONE));
        }
        list.meta.streams = ordinals.ids;
        list.version = versions(replay, &list.action, &list.addr);
        list
    }

    pub fn len(&self) -> usize {
        self.action.len()
    }

    pub fn is_empty(&self) -> bool {
        self.action.is_empty()
    }

    pub fn action(&self, i: usize) -> Action {
        self.action.get(i).copied().unwrap_or(Action::Unknown)
    }

    /// `b'7f3a00000000_2` for block entries, `s'…_N` for segment entries.
    pub fn addr_label(&self, i: usize) -> String {
        let (Some(&addr), Some(&v)) = (self.addr.get(i), self.version.get(i)) else {
            return String::new();
        };
        let p = if is_segment_action(self.action(i)) {
            's'
        } else {
            'b'
        };
        format!("{p}'{addr:x}_{v}")
    }

    /// One list line in upstream's `formatEvent` form (a space added between the columns, as
    /// `free_requested` fills its 14): action padded to 14, address label padded to 18, size;
    /// `OOM (requested X, Device has Y memory free)` for `oom`.
    pub fn line(&self, i: usize) -> String {
        let size = self.size_bytes.get(i).copied().unwrap_or(0);
        match self.action(i) {
            Action::Oom => {
                let free = self
                    .meta
                    .ooms
                    .iter()
                    .find(|o| o.event as usize == i)
                    .and_then(|o| o.device_free_bytes)
                    .map_or("?".to_string(), format_size);
                format!(
                    "OOM (requested {}, Device has {free} memory free)",
                    format_size(size)
                )
            }
            Action::Snapshot => "snapshot".to_string(),
            a => format!(
                "{:<14} {:<18} {}",
                a.name(),
                self.addr_label(i),
                format_size(size)
            ),
        }
    }

    /// Stream id of entry `i`.
    pub fn stream_of(&self, i: usize) -> Option<u64> {
        let o = *self.stream.get(i)?;
        self.meta.streams.get(o as usize).copied()
    }

    pub fn time_of(&self, i: usize) -> Option<i64> {
        self.time_us.get(i).copied().filter(|&t| t != TIME_NONE)
    }

    /// The first entry's time, if the trace has times.
    pub fn first_time_us(&self) -> Option<i64> {
        self.time_us.iter().copied().find(|&t| t != TIME_NONE)
    }

    /// The last entry at or before `t_us` (the first entry when `t_us` is earlier than all).
    pub fn event_at_time(&self, t_us: i64) -> Option<EventIdx> {
        if self.is_empty() || self.first_time_us().is_none() {
            return None;
        }
        // Times are non-decreasing within a device in real dumps; entries without a time sort
        // with the ones before them.
        let k = self
            .time_us
            .partition_point(|&t| t == TIME_NONE || t <= t_us);
        Some(k.saturating_sub(1) as u32)
    }
}

fn is_segment_action(a: Action) -> bool {
    matches!(
        a,
        Action::SegmentAlloc | Action::SegmentFree | Action::SegmentMap | Action::SegmentUnmap
    )
}

fn is_block_action(a: Action) -> bool {
    matches!(
        a,
        Action::Alloc | Action::FreeRequested | Action::FreeCompleted
    )
}

/// Stream ids numbered in first-seen order (runs of one stream cost one comparison).
#[derive(Default)]
struct StreamOrdinals {
    ids: Vec<u64>,
    last: Option<(u64, u32)>,
}

impl StreamOrdinals {
    fn of(&mut self, id: u64) -> u32 {
        if let Some((last, o)) = self.last {
            if last == id {
                return o;
            }
        }
        let o = match self.ids.iter().position(|&x| x == id) {
            Some(k) => k as u32,
            None => {
                self.ids.push(id);
                (self.ids.len() - 1) as u32
            }
        };
        self.last = Some((id, o));
        o
    }
}

/// The version of every entry (see the module docs; 0 for entries of neither kind).
fn versions(replay: &Replay, action: &[Action], addr: &[u64]) -> Vec<u32> {
    let of = replay.allocation_of_events();
    let mut version: Vec<u32> = of
        .iter()
        .map(|x| {
            x.and_then(|x| replay.allocations.get(x as usize))
                .map_or(0, |a| a.version)
        })
        .collect();
    version.resize(action.len(), 0);
    let strays: Vec<usize> = (0..action.len())
        .filter(|&i| of.get(i).is_none_or(|x| x.is_none()) && is_block_action(action[i]))
        .collect();
    if !strays.is_empty() {
        stray_versions(replay, &strays, addr, &mut version);
    }
    segment_versions(action, addr, &mut version);
    version
}

/// Block entries no allocation kept: the table's frees at their address before them.
fn stray_versions(replay: &Replay, strays: &[usize], addr: &[u64], version: &mut [u32]) {
    let at: FxHashSet<u64> = strays.iter().map(|&i| addr[i]).collect();
    let mut frees: FxHashMap<u64, Vec<EventIdx>> = FxHashMap::default();
    for a in replay.allocations.iter().filter(|a| at.contains(&a.addr)) {
        if let Some(f) = a.free_event {
            frees.entry(a.addr).or_default().push(f);
        }
    }
    for f in frees.values_mut() {
        f.sort_unstable();
    }
    for &i in strays {
        version[i] = frees
            .get(&addr[i])
            .map_or(0, |f| f.partition_point(|&e| (e as usize) < i) as u32);
    }
}

/// Segment entries: the `segment_free`/`segment_unmap` entries at the address before them.
fn segment_versions(action: &[Action], addr: &[u64], version: &mut [u32]) {
    let mut freed: FxHashMap<u64, u32> = FxHashMap::default();
    for (i, (&a, &at)) in action.iter().zip(addr).enumerate() {
        if !is_segment_action(a) {
            continue;
        }
        let v = freed.entry(at).or_insert(0);
        version[i] = *v;
        if matches!(a, Action::SegmentFree | Action::SegmentUnmap) {
            *v += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::columns::round_trip;
    use crate::replay::replay_device;

    fn load(json: &str) -> Snapshot {
        match crate::load(json.as_bytes()) {
            Ok(s) => s,
            Err(e) => panic!("test snapshot does not load: {e}"),
        }
    }

    fn list_of(json: &str) -> EventList {
        let s = load(json);
        EventList::build(&s, &replay_device(&s, 0), Vec::new())
    }

    /// An alloc over a live address (its free never recorded), a repeated `free_requested`, a
    /// lone `free_requested` before an alloc, an unmatched free, segment reuse.
    const REALLOC_WITHOUT_FREE: &str = r#"{"segments": [], "device_traces": [[
        {"action": "alloc", "addr": 4096, "size": 100, "stream": 0},
        {"action": "alloc", "addr": 4096, "size": 200, "stream": 0},
        {"action": "free_requested", "addr": 4096, "size": 200, "stream": 0},
        {"action": "free_requested", "addr": 4096, "size": 200, "stream": 0},
        {"action": "free_completed", "addr": 4096, "size": 200, "stream": 0},
        {"action": "annotate", "addr": 4096, "size": 0, "stream": 0, "user_metadata": "pinned"},
        {"action": "alloc", "addr": 4096, "size": 300, "stream": 0},
        {"action": "free_requested", "addr": 8192, "size": 50, "stream": 0},
        {"action": "alloc", "addr": 8192, "size": 50, "stream": 0},
        {"action": "free_completed", "addr": 4096, "size": 300, "stream": 0},
        {"action": "free_completed", "addr": 8192, "size": 50, "stream": 0},
        {"action": "free_completed", "addr": 12288, "size": 10, "stream": 7}]]}"#;

    #[test]
    fn realloc_without_free_labels_are_upstreams() {
        let ev = list_of(REALLOC_WITHOUT_FREE);
        let labels: Vec<String> = (0..ev.len()).map(|i| ev.addr_label(i)).collect();
        // Upstream bumps a block's version on `free_completed` only: the alloc over the live
        // address keeps `_0`.
        assert_eq!(
            labels,
            [
                "b'1000_0", "b'1000_0", "b'1000_0", "b'1000_0", "b'1000_0", "b'1000_0", "b'1000_1",
                "b'2000_0", "b'2000_0", "b'1000_1", "b'2000_0", "b'3000_0"
            ]
        );
        assert_eq!(ev.meta.streams, [0, 7]);
        assert_eq!(ev.stream_of(11), Some(7));
        assert_eq!(round_trip(&ev), Ok(ev));
    }

    /// The timeline labels an allocation as the list labels its entries (upstream's tooltip
    /// shows the alloc entry's version): 0x1000's three allocations are `_0`, `_0`, `_1`.
    #[test]
    fn the_timeline_labels_allocations_as_the_list_does() {
        use crate::layout::{TimelineKind, TimelineLayout};
        let s = load(REALLOC_WITHOUT_FREE);
        let ev = EventList::build(&s, &replay_device(&s, 0), Vec::new());
        let layout = TimelineLayout::build(&s, 0, TimelineKind::Active);
        let el = &layout.elements;
        let mut got: Vec<(u64, u64, u32)> = (0..el.len())
            .map(|e| (el.addr[e], el.size_bytes[e], el.version[e]))
            .collect();
        got.sort_unstable();
        assert_eq!(
            got,
            [
                (4096, 100, 0),
                (4096, 200, 0),
                (4096, 300, 1),
                (8192, 50, 0),
                (12288, 10, 0)
            ]
        );
        for e in 0..el.len() {
            if let Some(a) = el.alloc_row.get(e) {
                assert_eq!(ev.version[a as usize], el.version[e], "element {e}");
            }
        }
    }

    #[test]
    fn segment_versions_bump_on_free_and_unmap() {
        let ev = list_of(
            r#"{"segments": [], "device_traces": [[
            {"action": "segment_alloc", "addr": 4096, "size": 100, "stream": 0},
            {"action": "segment_free", "addr": 4096, "size": 100, "stream": 0},
            {"action": "segment_map", "addr": 4096, "size": 100, "stream": 0},
            {"action": "segment_unmap", "addr": 4096, "size": 100, "stream": 0},
            {"action": "alloc", "addr": 4096, "size": 10, "stream": 0},
            {"action": "oom", "device_free": 5, "size": 1024, "stream": 0}]]}"#,
        );
        let labels: Vec<String> = (0..ev.len()).map(|i| ev.addr_label(i)).collect();
        assert_eq!(
            labels,
            ["s'1000_0", "s'1000_0", "s'1000_1", "s'1000_1", "b'1000_0", "b'0_0"]
        );
        assert_eq!(
            ev.line(5),
            "OOM (requested 1KiB (1024 bytes), Device has 5B (5 bytes) memory free)"
        );
        assert_eq!(
            ev.line(4),
            "alloc          b'1000_0           10B (10 bytes)"
        );
    }

    #[test]
    fn event_at_time_takes_the_last_entry_at_or_before() {
        let ev = EventList {
            action: vec![Action::Alloc; 5],
            time_us: vec![100, 100, 250, 400, 400],
            ..EventList::default()
        };
        assert_eq!(ev.event_at_time(50), Some(0));
        assert_eq!(ev.event_at_time(100), Some(1));
        assert_eq!(ev.event_at_time(300), Some(2));
        assert_eq!(ev.event_at_time(1000), Some(4));
        let none = EventList {
            action: vec![Action::Alloc; 2],
            time_us: vec![TIME_NONE; 2],
            ..EventList::default()
        };
        assert_eq!(none.event_at_time(5), None);
    }

    #[test]
    fn format_size_is_upstreams() {
        assert_eq!(format_size(1_572_864), "1.5MiB (1572864 bytes)");
        assert_eq!(format_size(512), "512B (512 bytes)");
    }
}
