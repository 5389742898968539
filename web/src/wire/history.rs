//! Allocator State History data on the page: the device's event list (core's
//! [`EventList`], built in the worker from the allocation table) and one state as core's
//! segment/block columns (for the canvas), both shipped through `memlens_core::columns`
//! (`crate::wire::pack`). Also the lookups that link the view with the timeline: which timeline
//! element (band) a block or an event belongs to.

use crate::wire::protocol::WantedState;
use memlens_core::layout::TimelineLayout;
use memlens_core::state::events::EventList;
use memlens_core::state::{State, StateColumns, StateNumbers};
use memlens_core::trace::Action;
use std::cell::RefCell;
use std::rc::{Rc, Weak};

pub use memlens_core::state::events::format_size;

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

/// A device's event list on the page: core's [`EventList`] as it travelled, and the file it
/// belongs to. Reads as the list itself (`Deref`), so views call the list's own lookups.
#[derive(Debug, Default, PartialEq)]
pub struct EventColumns {
    pub file: u32,
    pub list: EventList,
}

impl std::ops::Deref for EventColumns {
    type Target = EventList;
    fn deref(&self) -> &EventList {
        &self.list
    }
}

/// One state on the page: core's [`StateColumns`] as they are, with what the reply says about
/// them. Segment `k`'s blocks are `columns.segment_blocks[k]`.
#[derive(Debug, Default, PartialEq)]
pub struct StateFrame {
    pub file: u32,
    pub device: u32,
    /// The `event` of the request this answers.
    pub requested: WantedState,
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
}

/// Reads as its columns, so views call the columns' own lookups (`blocks_of`, `block_at`, …).
impl std::ops::Deref for StateFrame {
    type Target = StateColumns;
    fn deref(&self) -> &StateColumns {
        &self.columns
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
    events: &EventList,
    event: u32,
) -> Option<u32> {
    match events.action(event as usize) {
        Action::Alloc | Action::FreeRequested | Action::FreeCompleted => {
            element_at(layout, *events.addr.get(event as usize)?, Some(event), true)
        }
        _ => None,
    }
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
