//! Packing messages for `postMessage`: a JSON header under `msg`, payloads as extra fields, and
//! layout columns as typed arrays whose buffers are transferred.

use crate::protocol::{LayoutMeta, LAYOUT_ARRAYS};
use js_sys::{
    Array, BigInt64Array, BigUint64Array, Float32Array, Object, Reflect, Uint32Array, Uint8Array,
};
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

/// A `BigUint64Array` copy of `v` (one copy, no zero-filled allocation first).
pub fn u64s(v: &[u64]) -> JsValue {
    BigUint64Array::from(v).into()
}

/// A `BigInt64Array` copy of `v`.
pub fn i64s(v: &[i64]) -> JsValue {
    BigInt64Array::from(v).into()
}

fn f32s(v: &[f32]) -> JsValue {
    Float32Array::from(v).into()
}

/// The buffer of a typed array, for a transfer list.
pub fn buffer_of(v: &JsValue) -> Option<JsValue> {
    Reflect::get(v, &"buffer".into()).ok()
}

/// The layout's columns as named typed arrays, plus the list of their buffers to transfer.
pub fn layout_arrays(l: &TimelineLayout) -> (Vec<(&'static str, JsValue)>, Array) {
    let e = &l.elements;
    let values: [JsValue; 16] = [
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
        u32s(&e.pool),
        u32s(&l.piece_start),
        u32s(&l.piece_t0),
        f32s(&l.piece_y0),
        u64s(&l.total_bytes),
        i64s(&l.time_us),
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

/// A `BigUint64Array` field as a vector.
pub fn get_u64s(data: &JsValue, name: &str) -> Result<Vec<u64>, String> {
    field(data, name)
        .dyn_into::<BigUint64Array>()
        .map(|a| a.to_vec())
        .map_err(|_| format!("layout column {name} missing"))
}

/// Rebuilds a layout on the page from a `Layout` message.
pub fn layout_from_message(data: &JsValue, meta: LayoutMeta) -> Result<TimelineLayout, String> {
    let t_copy = crate::bridge::now_ms();
    let preview = meta.preview;
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
        pool: get_u32s(data, "pool")?,
    };
    let piece_start = get_u32s(data, "piece_start")?;
    let piece_t0 = get_u32s(data, "piece_t0")?;
    let piece_y0 = field(data, "piece_y0")
        .dyn_into::<Float32Array>()
        .map(|a| a.to_vec())
        .map_err(|_| "layout column piece_y0 missing")?;
    let total_bytes = get_u64s(data, "total_bytes")?;
    let time_us = field(data, "time_us")
        .dyn_into::<BigInt64Array>()
        .map(|a| a.to_vec())
        .map_err(|_| "layout column time_us missing")?;
    let t0 = crate::bridge::now_ms();
    let l = TimelineLayout::from_parts(
        meta.n_events,
        elements,
        piece_start,
        piece_t0,
        piece_y0,
        total_bytes,
        time_us,
        meta.markers,
        meta.regions,
        meta.warnings,
        meta.pools,
        meta.monotone,
    )
    .map_err(|e| e.to_string())?
    .with_preview(preview);
    web_sys::console::log_1(
        &format!(
            "memlens: layout columns copied into the page in {:.0} ms, indices (level of detail, maxima) built in {:.0} ms",
            t0 - t_copy,
            crate::bridge::now_ms() - t0
        )
        .into(),
    );
    Ok(l)
}
