//! The worker's side of the Allocator State History: one `memlens_core::state::AllocatorHistory`
//! per device, built on first use (or in idle time right after load) and kept with the `State`
//! that requests move, so stepping ±1 costs microseconds; and the packing of the device's trace
//! (list columns) and of one state (segment/block columns, built in `crate::state_data`) into
//! transferred typed arrays.

use crate::protocol::{FromWorker, StateMeta, STATE_ARRAYS, STATE_EVENT_ARRAYS};
use crate::state_data::{EventColumns, StateFrame};
use crate::wire::{self, i64s, u64s};
use js_sys::{Array, Reflect, Uint32Array, Uint8Array};
use memlens_core::state::{AllocatorHistory, State};
use memlens_core::Snapshot;
use std::collections::HashMap;
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{DedicatedWorkerGlobalScope, WorkerGlobalScope};

/// Traces up to this many entries get their history and list columns built right after load
/// (so that opening the view costs no build); longer ones build them when the view is first
/// opened, so that a huge file does not hold both in memory unasked.
pub const PREBUILD_MAX_EVENTS: usize = 2_000_000;

struct DeviceHistory {
    history: AllocatorHistory,
    state: State,
    /// The list columns, when built ahead of the page asking (handed over once).
    events: Option<EventColumns>,
    /// Build time not yet reported to the page.
    unreported_build_ms: f64,
}

/// Per-file cache: the histories built so far, by device.
#[derive(Default)]
pub struct StateCache {
    devices: HashMap<u32, DeviceHistory>,
}

fn now_ms() -> f64 {
    js_sys::global()
        .unchecked_into::<WorkerGlobalScope>()
        .performance()
        .map(|p| p.now())
        .unwrap_or(0.0)
}

fn post(msg: &FromWorker, extra: &[(&str, JsValue)], transfer: &Array) {
    let m = wire::message(msg, extra);
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    if let Err(e) = scope.post_message_with_transfer(&m, transfer) {
        web_sys::console::error_2(&"memlens worker: postMessage failed".into(), &e);
    }
}

impl StateCache {
    fn get(&mut self, snap: &Snapshot, device: u32) -> &mut DeviceHistory {
        self.devices.entry(device).or_insert_with(|| {
            let t0 = now_ms();
            let history = AllocatorHistory::new(snap, device);
            let state = history.state_at(history.events().checked_sub(1));
            let build_ms = now_ms() - t0;
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
                events: None,
                unreported_build_ms: build_ms,
            }
        })
    }

    /// Builds the history of `device` and its list columns now unless the trace is long (see
    /// [`PREBUILD_MAX_EVENTS`]) or they exist already.
    pub fn prebuild(&mut self, snap: &Snapshot, device: u32) {
        if snap.device_rows(device).len() > PREBUILD_MAX_EVENTS
            || self.devices.contains_key(&device)
        {
            return;
        }
        let h = self.get(snap, device);
        h.events = Some(EventColumns::build(
            snap,
            device,
            h.history.diagnostics().warnings(),
        ));
    }
}

fn transfer_of(values: &[JsValue]) -> Array {
    let t = Array::new();
    for v in values {
        if let Ok(b) = Reflect::get(v, &"buffer".into()) {
            t.push(&b);
        }
    }
    t
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
        None => EventColumns::build(snap, device, h.history.diagnostics().warnings()),
    };
    c.meta.build_ms = build_ms;
    let values: [JsValue; 6] = [
        Uint8Array::from(c.action.as_slice()).into(),
        u64s(&c.addr),
        u64s(&c.size_bytes),
        Uint32Array::from(c.version.as_slice()).into(),
        Uint32Array::from(c.stream.as_slice()).into(),
        i64s(&c.time_us),
    ];
    let transfer = transfer_of(&values);
    let extra: Vec<(&str, JsValue)> = STATE_EVENT_ARRAYS.iter().copied().zip(values).collect();
    post(
        &FromWorker::StateEvents {
            id,
            device,
            meta: c.meta,
        },
        &extra,
        &transfer,
    );
}

/// Answers `StateAt` (always, so the page never waits forever): the state after `event`.
pub fn send_state(
    file: Option<(&Snapshot, &mut StateCache)>,
    id: u32,
    device: u32,
    event: Option<u32>,
) {
    let empty = || FromWorker::State {
        id,
        device,
        requested: event,
        meta: StateMeta::default(),
    };
    let Some((snap, cache)) = file else {
        let extra: Vec<(&str, JsValue)> = Vec::new();
        post(&empty(), &extra, &Array::new());
        return;
    };
    let n = snap.device_rows(device).len();
    let wants_last = event.is_some_and(|e| e as usize >= n.saturating_sub(1));
    if wants_last && !cache.devices.contains_key(&device) {
        // The view opens on the last state: it is the file's segments, so show it now and build
        // the history when the list (or another state) is asked for.
        let t0 = now_ms();
        let st = AllocatorHistory::last_state(snap, device);
        post_frame(id, device, event, &st, now_ms() - t0, 0.0, true);
        return;
    }
    let h = cache.get(snap, device);
    let build_ms = std::mem::take(&mut h.unreported_build_ms);
    let t0 = now_ms();
    h.history.seek(&mut h.state, event.map(|e| e as usize));
    post_frame(id, device, event, &h.state, now_ms() - t0, build_ms, false);
}

/// Posts one state as a `State` reply.
fn post_frame(
    id: u32,
    device: u32,
    event: Option<u32>,
    state: &State,
    seek_ms: f64,
    build_ms: f64,
    from_file: bool,
) {
    let f = StateFrame::from_state(id, device, event, state);
    let values: [JsValue; 11] = [
        u64s(&f.seg_addr),
        u64s(&f.seg_size),
        u64s(&f.seg_stream),
        Uint8Array::from(f.seg_flags.as_slice()).into(),
        Uint32Array::from(f.seg_first_block.as_slice()).into(),
        u64s(&f.blk_addr),
        u64s(&f.blk_size),
        u64s(&f.blk_requested),
        Uint8Array::from(f.blk_state.as_slice()).into(),
        Uint32Array::from(f.blk_alloc_event.as_slice()).into(),
        Uint32Array::from(f.blk_stack.as_slice()).into(),
    ];
    let meta = StateMeta {
        seek_ms,
        build_ms,
        from_file,
        ..f.meta
    };
    let transfer = transfer_of(&values);
    let extra: Vec<(&str, JsValue)> = STATE_ARRAYS.iter().copied().zip(values).collect();
    post(
        &FromWorker::State {
            id,
            device,
            requested: event,
            meta,
        },
        &extra,
        &transfer,
    );
}
