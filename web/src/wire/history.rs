//! Allocator State History data: the device's trace as list columns (for the event list) and
//! one state as core's segment/block columns (for the canvas), built from the model in the
//! worker and shipped through `memlens_core::columns` (`crate::wire::pack`). Also the lookups that
//! link the view with the timeline: which timeline element (band) a block or an event belongs
//! to.

use crate::wire::protocol::{OomEvent, StateEventsMeta};
use memlens_core::layout::axis::format_bytes;
use memlens_core::layout::TimelineLayout;
use memlens_core::model::BlockState;
use memlens_core::state::{State, StateColumns, StateNumbers};
use memlens_core::trace::{Action, TIME_NONE};
use memlens_core::Snapshot;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::{Rc, Weak};

/// Trace actions by the code the `ev_action` column holds (`Action as u8`).
pub const ACTIONS: [Action; 11] = Action::ALL;

/// A value shared with components, compared by identity (the columns are large).
#[derive(Debug)]
pub struct Shared<T>(pub Rc<T>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared(self.0.clone())
    }
}

impl<T> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

impl<T> std::ops::Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// A device's trace entries as columns (index = device-local entry index).
#[derive(Debug, Default, PartialEq)]
pub struct EventColumns {
    pub file: u32,
    pub device: u32,
    pub action: Vec<u8>,
    pub addr: Vec<u64>,
    pub size_bytes: Vec<u64>,
    /// Upstream's per-address version (the `_N` of `b'7f…_N`).
    pub version: Vec<u32>,
    /// Stream ordinal (an index into `meta.streams`).
    pub stream: Vec<u32>,
    /// µs since the epoch; [`TIME_NONE`] where the entry has none (the column travels as it is).
    pub time_us: Vec<i64>,
    pub meta: StateEventsMeta,
}

memlens_core::impl_columns! {
    EventColumns {
        columns [action, addr, size_bytes, version, stream, time_us];
        header [meta];
        // The page knows which file and device it asked for.
        skip [file, device];
    }
}

/// The action name as upstream's list writes it.
pub fn action_name(code: u8) -> &'static str {
    ACTIONS.get(code as usize).map_or("unknown", |a| a.name())
}

pub fn action_of(code: u8) -> Action {
    ACTIONS
        .get(code as usize)
        .copied()
        .unwrap_or(Action::Unknown)
}

/// Upstream's `formatSize`: `1.5MiB (1572864 bytes)`.
pub fn format_size(bytes: u64) -> String {
    format!(
        "{} ({bytes} bytes)",
        format_bytes(bytes as f64).replace(' ', "")
    )
}

impl EventColumns {
    /// The device's trace as list columns, with upstream's per-address versions (bumped by
    /// `free_completed` for blocks, by `segment_free`/`segment_unmap` for segments), stream
    /// ordinals, the timeline's peak and the `oom` entries. (Worker side.)
    pub fn build(snap: &Snapshot, device: u32, warnings: Vec<String>) -> EventColumns {
        let rows = snap.device_rows(device);
        let t = &snap.trace;
        let n = rows.len();
        let peak = memlens_core::device_stats(snap, device).timeline_peak_event;
        let mut c = EventColumns {
            file: 0,
            device,
            action: Vec::with_capacity(n),
            addr: Vec::with_capacity(n),
            size_bytes: Vec::with_capacity(n),
            version: Vec::with_capacity(n),
            stream: Vec::with_capacity(n),
            time_us: Vec::with_capacity(n),
            meta: StateEventsMeta {
                n_events: n as u32,
                peak_event: u32::try_from(peak).ok(),
                warnings,
                ..StateEventsMeta::default()
            },
        };
        let mut blk_ver: HashMap<u64, u32> = HashMap::new();
        let mut seg_ver: HashMap<u64, u32> = HashMap::new();
        let mut last_stream: Option<(u64, u32)> = None;
        let mut streams = t.stream.cursor();
        for (i, r) in rows.enumerate() {
            let r = r as usize;
            let a = t.action.get(r).copied().unwrap_or(Action::Unknown);
            let addr = t.addr.get(r).copied().unwrap_or(0);
            let size = t.size_bytes.get(r).copied().unwrap_or(0);
            let s = streams.at(r).unwrap_or(0);
            let (versions, bump) = match a {
                Action::Alloc | Action::FreeRequested => (Some(&mut blk_ver), false),
                Action::FreeCompleted => (Some(&mut blk_ver), true),
                Action::SegmentAlloc | Action::SegmentMap => (Some(&mut seg_ver), false),
                Action::SegmentFree | Action::SegmentUnmap => (Some(&mut seg_ver), true),
                _ => (None, false),
            };
            let v = versions.map_or(0, |m| {
                let e = m.entry(addr).or_insert(0);
                let v = *e;
                if bump {
                    *e += 1;
                }
                v
            });
            if a == Action::Oom {
                c.meta.ooms.push(OomEvent {
                    event: i as u32,
                    requested_bytes: size,
                    device_free_bytes: t.device_free(r as u32),
                });
            }
            let o = match last_stream {
                Some((id, o)) if id == s => o,
                _ => {
                    let streams = &mut c.meta.streams;
                    let o = match streams.iter().position(|&x| x == s) {
                        Some(k) => k as u32,
                        None => {
                            streams.push(s);
                            (streams.len() - 1) as u32
                        }
                    };
                    last_stream = Some((s, o));
                    o
                }
            };
            c.action.push(a as u8);
            c.addr.push(addr);
            c.size_bytes.push(size);
            c.version.push(v);
            c.stream.push(o);
            c.time_us.push(t.time_of(r).unwrap_or(TIME_NONE));
        }
        c
    }

    pub fn len(&self) -> usize {
        self.action.len()
    }

    pub fn is_empty(&self) -> bool {
        self.action.is_empty()
    }

    pub fn action(&self, i: usize) -> Action {
        self.action
            .get(i)
            .map_or(Action::Unknown, |&c| action_of(c))
    }

    /// `b'7f3a00000000_2` for block entries, `s'…_N` for segment entries.
    pub fn addr_label(&self, i: usize) -> String {
        let (Some(&addr), Some(&v)) = (self.addr.get(i), self.version.get(i)) else {
            return String::new();
        };
        let p = match self.action(i) {
            Action::SegmentAlloc
            | Action::SegmentFree
            | Action::SegmentMap
            | Action::SegmentUnmap => 's',
            _ => 'b',
        };
        format!("{p}'{addr:x}_{v}")
    }

    /// One list line in upstream's `formatEvent` form (a space added between the columns, as
    /// `free_requested` fills its 14): action padded to 14, address label
    /// padded to 18, size; `OOM (requested X, Device has Y memory free)` for `oom`.
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
    pub fn event_at_time(&self, t_us: i64) -> Option<u32> {
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

/// One state on the page: core's [`StateColumns`] as they are, with what the reply says about
/// them. Segment `k`'s blocks are `columns.segment_blocks[k]`.
#[derive(Debug, Default, PartialEq)]
pub struct StateFrame {
    pub file: u32,
    pub device: u32,
    /// The `event` of the request this answers.
    pub requested: Option<u32>,
    /// The entry the state follows (the request clamped to the trace; `None`: before the first).
    pub event: Option<u32>,
    /// `None` when the file was gone.
    pub numbers: Option<StateNumbers>,
    pub columns: StateColumns,
    /// Worker time to reach the state.
    pub seek_ms: f64,
    /// Worker time to build the history first (0 when it was built before).
    pub build_ms: f64,
    /// The state was read straight from the file's segments (the last one, shown while the
    /// history is not built yet), not replayed by the history.
    pub from_file: bool,
    /// `performance.now()` when the page received it.
    pub received_ms: f64,
}

memlens_core::impl_columns! {
    StateFrame {
        header [event, numbers, seek_ms, build_ms, from_file];
        nested [columns];
        // The page knows what it asked for and when the answer came.
        skip [file, device, requested, received_ms];
    }
}

impl StateFrame {
    /// A state as columns and numbers. (Worker side; the timings are left 0.)
    pub fn from_state(st: &State) -> StateFrame {
        StateFrame {
            event: st.event().map(|e| e as u32),
            numbers: Some(st.numbers()),
            columns: st.columns(),
            ..StateFrame::default()
        }
    }

    pub fn segments(&self) -> usize {
        self.columns.segment_address.len()
    }

    /// Block index range of segment `k`.
    pub fn blocks_of(&self, k: usize) -> std::ops::Range<usize> {
        self.columns
            .segment_blocks
            .get(k)
            .map_or(0..0, |r| r.start as usize..r.end as usize)
    }

    pub fn block_state(&self, b: usize) -> BlockState {
        self.columns
            .block_state
            .get(b)
            .copied()
            .unwrap_or(BlockState::Unknown)
    }

    /// The block containing `addr`, if any.
    pub fn block_at(&self, addr: u64) -> Option<usize> {
        let c = &self.columns;
        let k = c
            .block_address
            .partition_point(|&a| a <= addr)
            .checked_sub(1)?;
        let (a, s) = (*c.block_address.get(k)?, *c.block_size_bytes.get(k)?);
        (addr < a.saturating_add(s)).then_some(k)
    }
}

/// The elements of an Active layout ordered by (address, alloc row), built once per layout.
struct AddrIndex {
    layout: Weak<TimelineLayout>,
    order: Rc<Vec<u32>>,
}

thread_local! {
    static INDEX: RefCell<Option<AddrIndex>> = const { RefCell::new(None) };
}

fn addr_order(layout: &Rc<TimelineLayout>) -> Rc<Vec<u32>> {
    INDEX.with(|ix| {
        let mut ix = ix.borrow_mut();
        if let Some(i) = ix.as_ref() {
            if i.layout.upgrade().is_some_and(|l| Rc::ptr_eq(&l, layout)) {
                return i.order.clone();
            }
        }
        let el = &layout.elements;
        let mut order: Vec<u32> = (0..el.len() as u32).collect();
        // By address, then alloc entry (elements from before the trace last).
        order.sort_by_key(|&e| {
            let a = el.alloc_row.get(e as usize);
            (
                el.addr.get(e as usize).copied().unwrap_or(0),
                a.is_none(),
                a,
            )
        });
        let order = Rc::new(order);
        *ix = Some(AddrIndex {
            layout: Rc::downgrade(layout),
            order: order.clone(),
        });
        order
    })
}

/// The element (band) of `layout` at `addr` that `event` touches or that is alive after it.
/// `touch`: alive at some point of entry `event` (allocated there, freed there, or alive
/// across it); otherwise alive in the state after `event` (`None`: before the first entry).
pub fn element_at(
    layout: &Rc<TimelineLayout>,
    addr: u64,
    event: Option<u32>,
    touch: bool,
) -> Option<u32> {
    let order = addr_order(layout);
    let el = &layout.elements;
    let addr_of = |e: u32| el.addr.get(e as usize).copied().unwrap_or(0);
    let start = order.partition_point(|&e| addr_of(e) < addr);
    order
        .get(start..)?
        .iter()
        .take_while(|&&e| addr_of(e) == addr)
        .copied()
        .find(|&e| {
            let a = el.alloc_row.get(e as usize);
            let f = el.free_row.get(e as usize);
            match event {
                None => a.is_none(),
                Some(i) => {
                    let born = a.is_none_or(|a| a <= i);
                    let alive = f.is_none_or(|f| if touch { f >= i } else { f > i });
                    born && alive
                }
            }
        })
}

/// The band that entry `event` of the device allocates or frees (none for other entries).
pub fn element_of_event(
    layout: &Rc<TimelineLayout>,
    events: &EventColumns,
    event: u32,
) -> Option<u32> {
    match events.action(event as usize) {
        Action::Alloc | Action::FreeRequested | Action::FreeCompleted => {
            element_at(layout, *events.addr.get(event as usize)?, Some(event), true)
        }
        _ => None,
    }
}
