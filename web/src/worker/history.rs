//! The worker's side of the Allocator State History: one `memlens_core::state::AllocatorHistory`
//! per device, built on first use (or in idle time right after load) and kept with the `State`
//! that requests move, so stepping ±1 costs microseconds, together with the device's event list
//! (`memlens_core::state::events::EventList`), both from one allocation table; and the replies:
//! the list and one state as core's columns (`crate::wire::history`), shipped through
//! `crate::wire::pack`.

use crate::wire::clock::now_ms;
use crate::wire::history::StateFrame;
use crate::wire::pack;
use crate::wire::protocol::{FromWorker, WantedState};
use memlens_core::replay::replay_device;
use memlens_core::state::events::EventList;
use memlens_core::state::{AllocatorHistory, State};
use memlens_core::Snapshot;
use std::collections::HashMap;

/// Traces up to this many entries get their history and list columns built right after load
/// (so that opening the view costs no build); longer ones build them when the view is first
/// opened, so that a huge file does not hold both in memory unasked.
pub const PREBUILD_MAX_EVENTS: usize = 2_000_000;

struct DeviceHistory {
    history: AllocatorHistory,
    state: State,
    /// The event list, built with the history (handed over once).
    events: Option<EventList>,
    /// Build time not yet reported to the page.
    unreported_build_ms: f64,
}

/// Per-file cache: the histories built so far, by device.
#[derive(Default)]
pub struct StateCache {
    devices: HashMap<u32, DeviceHistory>,
}

impl StateCache {
    fn get(&mut self, snap: &Snapshot, device: u32) -> &mut DeviceHistory {
        self.devices.entry(device).or_insert_with(|| {
            let t0 = now_ms();
            let replay = replay_device(snap, device);
            let history = AllocatorHistory::with_replay(snap, &replay);
            let state = history.state_at(history.events().checked_sub(1));
            let build_ms = now_ms() - t0;
            let events = EventList::build(snap, &replay, history.diagnostics().warnings());
            web_sys::console::log_1(
                &format!(
                    "memlens: allocator state history of device {device}: {} events, built in {build_ms:.1} ms (worker), {:.1} MiB",
                    history.events(),
                    history.memory_bytes() as f64 / 1048576.0
                )
                .into(),
            );
            DeviceHistory {
                history,
                state,
                events: Some(events),
                unreported_build_ms: build_ms,
            }
        })
    }

    /// The device's history if it is built already.
    pub fn built(&self, device: u32) -> Option<&AllocatorHistory> {
        self.devices.get(&device).map(|h| &h.history)
    }

    /// Builds the history of `device` and its list columns now unless the trace is long (see
    /// [`PREBUILD_MAX_EVENTS`]) or they exist already.
    pub fn prebuild(&mut self, snap: &Snapshot, device: u32) {
        if snap.device_rows(device).len() > PREBUILD_MAX_EVENTS
            || self.devices.contains_key(&device)
        {
            return;
        }
        self.get(snap, device);
    }
}

/// Answers `StateEvents` with the list columns (built before, in idle time, when they were).
pub fn send_events(file: Option<(&Snapshot, &mut StateCache)>, id: u32, device: u32) {
    let Some((snap, cache)) = file else {
        return;
    };
    let h = cache.get(snap, device);
    let build_ms = std::mem::take(&mut h.unreported_build_ms);
    let mut c = match h.events.take() {
        Some(c) => c,
        None => EventList::build(
            snap,
            &replay_device(snap, device),
            h.history.diagnostics().warnings(),
        ),
    };
    c.meta.build_ms = build_ms;
    pack::reply_with(&FromWorker::StateEvents { id, device }, &c).post();
}

/// Answers `StateAt` (always, so the page never waits forever): the state after `event`.
pub fn send_state(
    file: Option<(&Snapshot, &mut StateCache)>,
    id: u32,
    device: u32,
    event: WantedState,
) {
    let reply = FromWorker::State {
        id,
        device,
        requested: event,
    };
    let Some((snap, cache)) = file else {
        pack::reply_with(&reply, &StateFrame::default()).post();
        return;
    };
    let last = snap.device_rows(device).len().saturating_sub(1);
    let event = match event {
        WantedState::After(e) => (e as usize).min(last),
        WantedState::Last => last,
    };
    let wants_last = event == last;
    let frame = if wants_last && !cache.devices.contains_key(&device) {
        // The view opens on the last state: it is the file's segments, so show it now and build
        // the history when the list (or another state) is asked for.
        let t0 = now_ms();
        let st = AllocatorHistory::last_state(snap, device);
        let seek_ms = now_ms() - t0;
        StateFrame {
            seek_ms,
            from_file: true,
            ..StateFrame::from_state(&st)
        }
    } else {
        let h = cache.get(snap, device);
        let build_ms = std::mem::take(&mut h.unreported_build_ms);
        let t0 = now_ms();
        h.history.seek(&mut h.state, Some(event));
        let seek_ms = now_ms() - t0;
        StateFrame {
            seek_ms,
            build_ms,
            ..StateFrame::from_state(&h.state)
        }
    };
    pack::reply_with(&reply, &frame).post();
}
