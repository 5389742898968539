//! The worker's side of search: frames and stacks live here (the page has only element
//! columns), so a query is answered here and the page gets a bitset over the layout's elements.
//! The frame index (per file) and the address labels (per layout) are built on first use.

use crate::protocol::FromWorker;
use crate::wire;
use js_sys::Array;
use memlens_core::layout::{AddressLabels, SearchIndex, SearchQuery, TimelineKind, TimelineLayout};
use memlens_core::Snapshot;
use std::collections::HashMap;
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{DedicatedWorkerGlobalScope, WorkerGlobalScope};

/// What searching a file needs, kept with the file in the worker.
#[derive(Default)]
pub struct SearchCache {
    index: Option<SearchIndex>,
    labels: HashMap<(u32, TimelineKind), AddressLabels>,
}

fn now_ms() -> f64 {
    js_sys::global()
        .unchecked_into::<WorkerGlobalScope>()
        .performance()
        .map(|p| p.now())
        .unwrap_or(0.0)
}

/// Answers a `Search` request (`file`: the snapshot, the layout searched, the cache; `None`
/// when the file is gone, which is answered with an error).
#[allow(clippy::too_many_arguments)]
pub fn send_result(
    file: Option<(&Snapshot, Option<&TimelineLayout>, &mut SearchCache)>,
    id: u32,
    device: u32,
    kind: TimelineKind,
    seq: u32,
    address: &str,
    frame: &str,
) {
    let t0 = now_ms();
    let mut extra: Vec<(&str, JsValue)> = Vec::new();
    let transfer = Array::new();
    let (count, error) = match (file, SearchQuery::new(address, frame)) {
        (_, Err(e)) => (0, Some(e.to_string())),
        (_, Ok(None)) => (0, None),
        (None, _) | (Some((_, None, _)), _) => (0, Some("this file is no longer open".into())),
        (Some((snap, Some(layout), cache)), Ok(Some(q))) => {
            let index = cache.index.get_or_insert_with(|| SearchIndex::new(snap));
            let labels = cache
                .labels
                .entry((device, kind))
                .or_insert_with(|| AddressLabels::new(&layout.elements));
            let bits = index.search(snap, &layout.elements, labels, &q);
            let count: u32 = bits.iter().map(|w| w.count_ones()).sum();
            let arr = wire::u64s(&bits);
            if let Some(b) = wire::buffer_of(&arr) {
                transfer.push(&b);
            }
            extra.push(("bits", arr));
            (count, None)
        }
    };
    let msg = FromWorker::Search {
        id,
        device,
        kind,
        seq,
        count,
        error,
        search_ms: now_ms() - t0,
    };
    let m = wire::message(&msg, &extra);
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    if let Err(e) = scope.post_message_with_transfer(&m, &transfer) {
        web_sys::console::error_2(&"memlens worker: postMessage failed".into(), &e);
    }
}
