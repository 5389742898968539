//! gzip-compressed files (`snap.pickle.gz`, or any gzip file: recognised by its magic bytes)
//! decompressed by the browser's own `DecompressionStream` as they are read: compressed chunks
//! (`Blob.slice`) are written into it by one task while the decompressed side is read here and
//! handed on chunk by chunk, so neither the compressed nor the decompressed file is ever held
//! whole, and progress counts compressed bytes (the file the user chose).
//!
//! The size check of `crate::worker::limit` needs the decompressed file's size, which a gzip
//! file does not say reliably (its trailer keeps it modulo 2^32, of its last member only):
//! [`uncompressed_bytes`] foretells it from the bytes decompressed so far against the
//! compressed bytes that gave them. The compressed side is written in pieces of
//! [`PIECE_BYTES`], each after the decompressor took the one before, so the bytes written are
//! at most a few pieces ahead of those decompressed.

use js_sys::{Reflect, Uint8Array};
use std::cell::Cell;
use std::rc::Rc;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    Blob, ReadableStream, ReadableStreamDefaultReader, WritableStream, WritableStreamDefaultWriter,
};

/// The first two bytes of every gzip member (RFC 1952).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Compressed bytes written into the decompressor at a time.
pub const PIECE_BYTES: f64 = 16.0 * 1024.0;
/// Pieces written that may not have given their bytes yet: one queued, one being decompressed,
/// one whose output waits to be read.
const PIECES_AHEAD: f64 = 3.0;
/// The size is foretold once the compressed bytes taken as decompressed are at least this many
/// times the pieces ahead (so the ratio errs high by at most a quarter).
const AHEAD_SHARE: f64 = 4.0;

/// Whether `blob` starts with gzip's magic bytes.
pub async fn is_gzip(blob: &Blob) -> bool {
    let Ok(head) = blob.slice_with_f64_and_f64(0.0, 2.0) else {
        return false;
    };
    match JsFuture::from(head.array_buffer()).await {
        Ok(ab) => Uint8Array::new(&ab).to_vec() == GZIP_MAGIC,
        Err(_) => false,
    }
}

/// The trailer's ISIZE: the (last member's) decompressed size modulo 2^32.
pub async fn trailer_bytes(blob: &Blob) -> Option<f64> {
    let total = blob.size();
    let tail = blob.slice_with_f64_and_f64(total - 4.0, total).ok()?;
    let ab = JsFuture::from(tail.array_buffer()).await.ok()?;
    let b: [u8; 4] = Uint8Array::new(&ab).to_vec().try_into().ok()?;
    Some(f64::from(u32::from_le_bytes(b)))
}

/// The whole file's decompressed size, foretold once `out_bytes` came from `written` of its
/// `total` compressed bytes, erring high: the compressed bytes that gave them are taken as
/// [`PIECES_AHEAD`] pieces fewer than those written, and it is at least the trailer's ISIZE
/// (exact below 4 GiB in a one-member file). `None` until those are [`AHEAD_SHARE`] times the
/// pieces ahead, unless the whole file was written.
pub fn uncompressed_bytes(
    out_bytes: f64,
    written: f64,
    total: f64,
    trailer: Option<f64>,
) -> Option<f64> {
    let ahead = PIECES_AHEAD * PIECE_BYTES;
    let consumed = written.min(total) - ahead;
    if written < total && consumed < AHEAD_SHARE * ahead {
        return None;
    }
    let by_ratio = if written >= total {
        out_bytes
    } else {
        out_bytes * total / consumed
    };
    Some(by_ratio.max(trailer.unwrap_or(0.0)))
}

fn js_text(e: &JsValue) -> String {
    e.dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"))
}

/// `new DecompressionStream("gzip")`'s two sides (looked up on the global scope: web-sys has
/// the class only behind its unstable-API flag).
fn decompression_stream() -> Result<(ReadableStream, WritableStream), JsValue> {
    let ctor = Reflect::get(&js_sys::global(), &"DecompressionStream".into())?;
    let ctor: js_sys::Function = ctor
        .dyn_into()
        .map_err(|_| JsValue::from_str("no DecompressionStream"))?;
    let ds = Reflect::construct(&ctor, &js_sys::Array::of1(&"gzip".into()))?;
    let readable = Reflect::get(&ds, &"readable".into())?.dyn_into::<ReadableStream>()?;
    let writable = Reflect::get(&ds, &"writable".into())?.dyn_into::<WritableStream>()?;
    Ok((readable, writable))
}

/// Decompresses `blob`, calling `on_data(decompressed, compressed bytes written so far)` for
/// each decompressed chunk in order; `on_data` returning `Ok(false)` stops (cancelled) and
/// `Err` stops with that error. Compressed chunks are `chunk_bytes` long.
pub async fn gunzip_blob(
    blob: &Blob,
    chunk_bytes: f64,
    mut on_data: impl FnMut(&Uint8Array, f64) -> Result<bool, String>,
) -> Result<(), String> {
    let (readable, writable) = decompression_stream()
        .map_err(|e| format!("this browser cannot decompress gzip: {}", js_text(&e)))?;
    let writer = writable
        .get_writer()
        .map_err(|e| format!("cannot decompress: {}", js_text(&e)))?;
    let reader: ReadableStreamDefaultReader = readable.get_reader().unchecked_into();
    let written = Rc::new(Cell::new(0.0));
    wasm_bindgen_futures::spawn_local(write_all(
        blob.clone(),
        writer,
        chunk_bytes,
        written.clone(),
    ));
    loop {
        let r = JsFuture::from(reader.read())
            .await
            .map_err(|e| format!("the gzip data is damaged or cut short: {}", js_text(&e)))?;
        if Reflect::get(&r, &"done".into())
            .ok()
            .and_then(|d| d.as_bool())
            == Some(true)
        {
            return Ok(());
        }
        let value: Uint8Array = Reflect::get(&r, &"value".into())
            .map_err(|e| js_text(&e))?
            .unchecked_into();
        match on_data(&value, written.get()) {
            Ok(true) => {}
            stop => {
                // The writing task sees its next write fail and ends.
                let _ = reader.cancel();
                return stop.map(|_| ());
            }
        }
    }
}

/// Writes `blob`'s bytes into the decompressor a chunk at a time, waiting while it is full; a
/// failed read aborts the stream (the reading side then fails with the reason).
async fn write_all(
    blob: Blob,
    writer: WritableStreamDefaultWriter,
    chunk_bytes: f64,
    written: Rc<Cell<f64>>,
) {
    let total = blob.size();
    let mut at = 0.0;
    while at < total {
        let end = (at + chunk_bytes).min(total);
        let part = match blob.slice_with_f64_and_f64(at, end) {
            Ok(p) => p,
            Err(e) => {
                let _ = writer.abort_with_reason(&e);
                return;
            }
        };
        let ab = match JsFuture::from(part.array_buffer()).await {
            Ok(ab) => ab,
            Err(e) => {
                let _ = writer.abort_with_reason(&e);
                return;
            }
        };
        let bytes = Uint8Array::new(&ab);
        let mut from = 0u32;
        while from < bytes.length() {
            let to = bytes.length().min(from + PIECE_BYTES as u32);
            if JsFuture::from(writer.ready()).await.is_err() {
                return; // the reading side stopped
            }
            let w = writer.write_with_chunk(&bytes.subarray(from, to));
            // Settles once the bytes are taken; a rejection only repeats the reading side's
            // error.
            IGNORE.with(|i| drop(w.catch(i)));
            from = to;
            written.set(at + f64::from(to));
        }
        at = end;
    }
    let c = writer.close();
    IGNORE.with(|i| drop(c.catch(i)));
}

thread_local! {
    /// One handler for the promises whose rejection is reported elsewhere (leaked: promises
    /// may settle after a load ends).
    static IGNORE: &'static Closure<dyn FnMut(JsValue)> =
        Box::leak(Box::new(Closure::<dyn FnMut(JsValue)>::new(|_: JsValue| {})));
}
