//! Packing messages for `postMessage`: a JSON header under `msg`, payloads as extra fields, and
//! layout columns as typed arrays whose buffers are transferred.

use crate::protocol::{LayoutMeta, LAYOUT_ARRAYS};
use js_sys::{Array, BigUint64Array, Object, Reflect, Uint32Array, Uint8Array};
use memlens_core::layout::{Elements, TimelineLayout};
use serde::de::DeserializeOwned;
use serde::Serialize;
use wasm_bindgen::{JsCast, JsValue};

/// `{msg: <json>, ...extra}`.
pub fn message(header: &impl Serialize, extra: &[(&str, JsValue)]) -> JsValue {
    let o = Object::new();
    let json = serde_json::to_string(header)
        .unwrap_or_else(|e| format!("{{\"type\":\"Invalid\",\"error\":\"{e}\"}}"));
    let _ = Reflect::set(&o, &"msg".into(), &JsValue::from_str(&json));
    for (k, v) in extra {
        let _ = Reflect::set(&o, &JsValue::from_str(k), v);
    }
    o.into()
}

/// The header of a message, if it parses.
pub fn header<T: DeserializeOwned>(data: &JsValue) -> Result<T, String> {
    let msg = Reflect::get(data, &"msg".into())
        .ok()
        .and_then(|v| v.as_string())
        .ok_or("message without a header")?;
    serde_json::from_str(&msg).map_err(|e| format!("bad message header: {e}"))
}

/// A payload field of a message.
pub fn field(data: &JsValue, name: &str) -> JsValue {
    Reflect::get(data, &JsValue::from_str(name)).unwrap_or(JsValue::UNDEFINED)
}

fn u32s(v: &[u32]) -> JsValue {
    Uint32Array::from(v).into()
}

fn u64s(v: &[u64]) -> JsValue {
    let a = BigUint64Array::new_with_length(v.len() as u32);
    a.copy_from(v);
    a.into()
}

/// The layout's columns as named typed arrays, plus the list of their buffers to transfer.
pub fn layout_arrays(l: &TimelineLayout) -> (Vec<(&'static str, JsValue)>, Array) {
    let e = &l.elements;
    let values: [JsValue; 14] = [
        u64s(&e.size_bytes),
        u64s(&e.addr),
        u32s(&e.version),
        u32s(&e.start_x),
        u32s(&e.end_x),
        u32s(&e.alloc_row),
        u32s(&e.free_row),
        u64s(&e.stream),
        Uint8Array::from(e.origin.as_slice()).into(),
        u32s(&e.stack),
        u32s(&l.piece_start),
        u32s(&l.piece_t0),
        u64s(&l.piece_y0),
        u64s(&l.total_bytes),
    ];
    let transfer = Array::new();
    for v in &values {
        if let Ok(b) = Reflect::get(v, &"buffer".into()) {
            transfer.push(&b);
        }
    }
    (
        LAYOUT_ARRAYS.iter().copied().zip(values).collect(),
        transfer,
    )
}

fn get_u32s(data: &JsValue, name: &str) -> Result<Vec<u32>, String> {
    field(data, name)
        .dyn_into::<Uint32Array>()
        .map(|a| a.to_vec())
        .map_err(|_| format!("layout column {name} missing"))
}

fn get_u64s(data: &JsValue, name: &str) -> Result<Vec<u64>, String> {
    field(data, name)
        .dyn_into::<BigUint64Array>()
        .map(|a| a.to_vec())
        .map_err(|_| format!("layout column {name} missing"))
}

/// Rebuilds a layout on the page from a `Layout` message.
pub fn layout_from_message(data: &JsValue, meta: LayoutMeta) -> Result<TimelineLayout, String> {
    let elements = Elements {
        size_bytes: get_u64s(data, "size_bytes")?,
        addr: get_u64s(data, "addr")?,
        version: get_u32s(data, "version")?,
        start_x: get_u32s(data, "start_x")?,
        end_x: get_u32s(data, "end_x")?,
        alloc_row: get_u32s(data, "alloc_row")?,
        free_row: get_u32s(data, "free_row")?,
        stream: get_u64s(data, "stream")?,
        origin: field(data, "origin")
            .dyn_into::<Uint8Array>()
            .map(|a| a.to_vec())
            .map_err(|_| "layout column origin missing")?,
        stack: get_u32s(data, "stack")?,
    };
    TimelineLayout::from_parts(
        meta.n_events,
        elements,
        get_u32s(data, "piece_start")?,
        get_u32s(data, "piece_t0")?,
        get_u64s(data, "piece_y0")?,
        get_u64s(data, "total_bytes")?,
        meta.markers,
        meta.regions,
        meta.warnings,
    )
    .map_err(|e| e.to_string())
}
