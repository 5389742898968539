//! Packing messages for `postMessage`. Every message is an object with a JSON header under
//! `msg`. A reply's payload, any [`Columns`] type, travels beside it: its header fields as one
//! JSON object under `head`, its columns as typed arrays under `cols`, whose buffers are
//! transferred, not copied. Other payloads (the file to open) are extra fields.

use crate::wire::clock::now_ms;
use crate::wire::protocol::FromWorker;
use js_sys::{
    Array, BigInt64Array, BigUint64Array, Float32Array, Float64Array, Object, Reflect, Uint32Array,
    Uint8Array,
};
use memlens_core::columns::{ColumnData, ColumnError, ColumnSink, ColumnSource, Columns, Kind};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value as Json};
use wasm_bindgen::{JsCast, JsValue};
use web_sys::DedicatedWorkerGlobalScope;

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
    let msg = field(data, "msg")
        .as_string()
        .ok_or("message without a header")?;
    serde_json::from_str(&msg).map_err(|e| format!("bad message header: {e}"))
}

/// A payload field of a message.
pub fn field(data: &JsValue, name: &str) -> JsValue {
    Reflect::get(data, &JsValue::from_str(name)).unwrap_or(JsValue::UNDEFINED)
}

/// A worker reply ready for `postMessage`: the message and the buffers it transfers.
pub struct Outgoing {
    message: JsValue,
    transfer: Array,
}

/// A reply without payload.
pub fn reply(msg: &FromWorker) -> Outgoing {
    Outgoing {
        message: message(msg, &[]),
        transfer: Array::new(),
    }
}

/// A reply with `payload` packed beside its header (copied out of wasm memory now, so the
/// payload may be dropped or changed before [`Outgoing::post`]).
pub fn reply_with(msg: &FromWorker, payload: &impl Columns) -> Outgoing {
    let mut sink = JsSink {
        head: Map::new(),
        cols: Object::new(),
        transfer: Array::new(),
    };
    payload.pack(&mut sink);
    let head = Json::Object(sink.head).to_string();
    let m = message(
        msg,
        &[
            ("head", JsValue::from_str(&head)),
            ("cols", sink.cols.into()),
        ],
    );
    Outgoing {
        message: m,
        transfer: sink.transfer,
    }
}

impl Outgoing {
    /// Posts the reply to the page (worker side).
    pub fn post(self) {
        let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
        if let Err(e) = scope.post_message_with_transfer(&self.message, &self.transfer) {
            web_sys::console::error_2(&"memlens worker: postMessage failed".into(), &e);
        }
    }
}

/// Packs into a message: header fields into a JSON object, columns into typed arrays.
struct JsSink {
    head: Map<String, Json>,
    cols: Object,
    transfer: Array,
}

impl ColumnSink for JsSink {
    fn column(&mut self, name: &'static str, data: ColumnData<'_>) {
        let arr: JsValue = match &data {
            ColumnData::U8(v) => Uint8Array::from(&v[..]).into(),
            ColumnData::U32(v) => Uint32Array::from(&v[..]).into(),
            ColumnData::U64(v) => BigUint64Array::from(&v[..]).into(),
            ColumnData::I64(v) => BigInt64Array::from(&v[..]).into(),
            ColumnData::F32(v) => Float32Array::from(&v[..]).into(),
            ColumnData::F64(v) => Float64Array::from(&v[..]).into(),
        };
        if let Ok(b) = Reflect::get(&arr, &"buffer".into()) {
            self.transfer.push(&b);
        }
        let _ = Reflect::set(&self.cols, &JsValue::from_str(name), &arr);
    }

    fn head<T: Serialize + ?Sized>(&mut self, name: &'static str, value: &T) {
        match serde_json::to_value(value) {
            Ok(v) => {
                self.head.insert(name.to_string(), v);
            }
            // Left out: the page's unpack reports the field as missing.
            Err(e) => web_sys::console::error_1(
                &format!("memlens worker: cannot pack {name}: {e}").into(),
            ),
        }
    }
}

/// Unpacks from a message (page side); counts the time spent copying columns out of JS.
struct JsSource {
    head: Map<String, Json>,
    cols: JsValue,
    copy_ms: f64,
}

fn typed<A: JsCast>(
    v: JsValue,
    to_vec: impl Fn(&A) -> ColumnData<'static>,
) -> Option<ColumnData<'static>> {
    v.dyn_into::<A>().ok().map(|a| to_vec(&a))
}

impl ColumnSource for JsSource {
    fn take_column(
        &mut self,
        name: &'static str,
        kind: Kind,
    ) -> Result<ColumnData<'static>, ColumnError> {
        let t0 = now_ms();
        let v = Reflect::get(&self.cols, &JsValue::from_str(name)).unwrap_or(JsValue::UNDEFINED);
        let data = match kind {
            Kind::U8 => typed(v, |a: &Uint8Array| ColumnData::U8(a.to_vec().into())),
            Kind::U32 => typed(v, |a: &Uint32Array| ColumnData::U32(a.to_vec().into())),
            Kind::U64 => typed(v, |a: &BigUint64Array| ColumnData::U64(a.to_vec().into())),
            Kind::I64 => typed(v, |a: &BigInt64Array| ColumnData::I64(a.to_vec().into())),
            Kind::F32 => typed(v, |a: &Float32Array| ColumnData::F32(a.to_vec().into())),
            Kind::F64 => typed(v, |a: &Float64Array| ColumnData::F64(a.to_vec().into())),
        };
        self.copy_ms += now_ms() - t0;
        data.ok_or(ColumnError::Missing(name))
    }

    fn take_head<T: DeserializeOwned>(&mut self, name: &'static str) -> Result<T, ColumnError> {
        let header = |message: String| ColumnError::Header { name, message };
        let v = self
            .head
            .remove(name)
            .ok_or_else(|| header("missing".into()))?;
        serde_json::from_value(v).map_err(|e| header(e.to_string()))
    }
}

/// A payload unpacked on the page, with the milliseconds its columns took to copy out of JS.
pub struct Unpacked<T> {
    pub value: T,
    pub copy_ms: f64,
}

/// The payload of a reply (page side).
pub fn unpack<T: Columns>(data: &JsValue) -> Result<Unpacked<T>, String> {
    let head = field(data, "head")
        .as_string()
        .ok_or("message without a payload")?;
    let head: Map<String, Json> =
        serde_json::from_str(&head).map_err(|e| format!("bad payload header: {e}"))?;
    let mut src = JsSource {
        head,
        cols: field(data, "cols"),
        copy_ms: 0.0,
    };
    let value = T::unpack(&mut src).map_err(|e| e.to_string())?;
    Ok(Unpacked {
        value,
        copy_ms: src.copy_ms,
    })
}
