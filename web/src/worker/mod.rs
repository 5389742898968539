//! The decoding worker: reads a file in chunks into `memlens_core::Loader` (the resumable pickle
//! machine; JSON and HTML are collected whole), keeps the model here, and answers the page with
//! stats, layout columns and stack text on request. The page never sees pickle or raw values.
//! While a file is read, pictures of its trace so far go out between chunks
//! ([`crate::worker::partial`]), when the page draws them. After a load, the work nobody asked
//! for yet (diagnosis, exact layout, state history) waits while the page holds it
//! (`ToWorker::Background`: another worker is decoding, or the view waits for something else).

pub mod colour;
pub mod compare;
pub mod gunzip;
pub mod history;
pub mod limit;
pub mod partial;
pub mod search;
pub mod warm_up;
mod warming;

use crate::wire::clock::now_ms;
use crate::wire::pack;
use crate::wire::protocol::{FileInfo, FromWorker, ToWorker, TooLarge};
use crate::worker::partial::Partials;
use gloo_events::EventListener;
use js_sys::Uint8Array;
use memlens_core::layout::context::element_context;
use memlens_core::layout::{TimelineKind, TimelineLayout};
use memlens_core::range::{EventRange, PartLoader};
use memlens_core::Snapshot;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Blob, DedicatedWorkerGlobalScope, MessageEvent};

/// Bytes read and decoded between two progress messages (and two chances to cancel): an eighth
/// of the file, between 1 and 16 MiB. Large chunks keep the worker from waiting on reads (a
/// 197 MB file: ~320 ms of waiting with 4 MiB, ~220 ms with 16 MiB); small files keep a small
/// buffer (wasm memory never shrinks: it is part of what the model costs the tab).
fn chunk_bytes(total: f64) -> f64 {
    (total / 8.0)
        .clamp(1024.0 * 1024.0, 16.0 * 1024.0 * 1024.0)
        .floor()
}
/// How often held background work looks whether it may go on.
const HOLD_POLL_MS: u32 = 5;
/// File reads in flight while a chunk is decoded.
const READS_AHEAD: usize = 3;
/// Bytes of a read chunk copied into wasm memory at a time.
const COPY_BYTES: u32 = 1 << 20;

struct Ready {
    snap: Snapshot,
    layouts: HashMap<(u32, TimelineKind), TimelineLayout>,
    /// Allocator State History per device (crate::worker::history).
    state: crate::worker::history::StateCache,
    /// Search indices (crate::worker::search).
    search: crate::worker::search::SearchCache,
}

#[derive(Default)]
struct State {
    files: HashMap<u32, Ready>,
    cancelled: HashSet<u32>,
    /// The Compare view's allocation tables (crate::worker::compare).
    compared: crate::worker::compare::Replays,
    /// The page holds the work done unasked after a load (`ToWorker::Background`).
    background_held: bool,
    /// A file was sent to open: the warm-up ([`crate::worker::warming`]) stops.
    file_opened: bool,
}

type Shared = Rc<RefCell<State>>;

fn scope() -> DedicatedWorkerGlobalScope {
    js_sys::global().unchecked_into()
}

fn post(msg: &FromWorker) {
    pack::reply(msg).post();
}

/// Installs the message handler and tells the page it is ready.
pub fn start() {
    let state: Shared = Rc::new(RefCell::new(State::default()));
    EventListener::new(&scope(), "message", move |ev| {
        if let Some(ev) = ev.dyn_ref::<MessageEvent>() {
            handle(&state, ev.data());
        }
    })
    .forget();
    post(&FromWorker::Ready);
}

fn handle(state: &Shared, data: JsValue) {
    let msg: ToWorker = match pack::header(&data) {
        Ok(m) => m,
        Err(e) => {
            web_sys::console::error_1(&e.into());
            return;
        }
    };
    match msg {
        ToWorker::WarmUp => {
            wasm_bindgen_futures::spawn_local(crate::worker::warming::warm_up(state.clone()))
        }
        ToWorker::Open {
            id,
            state_first,
            range,
            read_pause_ms,
            no_pictures,
            limit_bytes,
            ..
        } => {
            let file = pack::field(&data, "file");
            state.borrow_mut().file_opened = true;
            let st = state.clone();
            wasm_bindgen_futures::spawn_local(async move {
                let t0 = now_ms();
                let memory_before = wasm_memory_bytes();
                // The page hands over a Blob (a chosen file, or what it fetched). It draws
                // pictures of the trace so far while the file is read, unless it opened on the
                // state history or on a part of the trace (or asked for none).
                let pictures = !state_first && range.is_none() && !no_pictures;
                let partials = Partials::new(id, pictures);
                let limit = limit_bytes.unwrap_or(limit::LIMIT_BYTES);
                let res = match (file.dyn_into::<Blob>(), parse_range(range.as_deref())) {
                    (_, Err(e)) => Err(NotOpened::Failed(e)),
                    (Ok(blob), Ok(part)) => {
                        read_blob(&st, id, &blob, part, partials, read_pause_ms, limit).await
                    }
                    (Err(_), _) => Err(NotOpened::Failed("nothing to open".to_string())),
                };
                if st.borrow_mut().cancelled.remove(&id) {
                    return;
                }
                match res {
                    Ok(read) => {
                        let load = Load {
                            bytes: read.bytes,
                            decode_ms: now_ms() - t0,
                            read_wait_ms: read.wait_ms,
                            memory_before,
                        };
                        let snap = read.snap;
                        loaded(&st, id, snap, load, state_first)
                    }
                    Err(NotOpened::Failed(message)) => post(&FromWorker::Failed { id, message }),
                    Err(NotOpened::TooLarge(offer)) => post(&FromWorker::TooLarge { id, offer }),
                }
            });
        }
        ToWorker::Cancel { id } => {
            state.borrow_mut().cancelled.insert(id);
        }
        ToWorker::Close { id } => {
            let mut s = state.borrow_mut();
            s.files.remove(&id);
            s.compared.forget(id);
        }
        ToWorker::Layout { id, device, kind } => answer_layout(state, id, device, kind),
        ToWorker::StateEvents { id, device } => {
            let mut s = state.borrow_mut();
            let f = s.files.get_mut(&id).map(|f| (&f.snap, &mut f.state));
            crate::worker::history::send_events(f, id, device);
        }
        ToWorker::StateAt { id, device, event } => {
            let mut s = state.borrow_mut();
            let f = s.files.get_mut(&id).map(|f| (&f.snap, &mut f.state));
            crate::worker::history::send_state(f, id, device, event);
        }
        ToWorker::Diagnose { id, device } => send_diagnosis(state, id, device),
        ToWorker::Background { hold } => state.borrow_mut().background_held = hold,
        ToWorker::PeakGroups { side } => {
            let s = state.borrow();
            crate::worker::compare::send_peak(side, s.files.get(&side.file).map(|f| &f.snap));
        }
        ToWorker::MomentGroups { side, event } => {
            let mut s = state.borrow_mut();
            let State {
                files, compared, ..
            } = &mut *s;
            let snap = files.get(&side.file).map(|f| &f.snap);
            crate::worker::compare::send_moment(compared, side, snap, event);
        }
        ToWorker::Between {
            id,
            device,
            from,
            to,
        } => {
            let b = state.borrow().files.get(&id).map(|f| {
                let replay = memlens_core::replay::replay_device(&f.snap, device);
                memlens_core::analysis::compare::between(&f.snap, &replay, from, to)
            });
            if let Some(b) = b {
                post(&FromWorker::Between {
                    id,
                    between: Box::new(b),
                });
            }
        }
        ToWorker::Icicle {
            id,
            device,
            event,
            callers_of,
            mark,
        } => send_icicle(state, id, device, event, callers_of, mark),
        ToWorker::Search {
            id,
            device,
            kind,
            seq,
            address,
            frame,
            regex,
        } => {
            let mut s = state.borrow_mut();
            let f = s.files.get_mut(&id).map(|f| {
                layout_for(f, device, kind);
                (&f.snap, f.layouts.get(&(device, kind)), &mut f.search)
            });
            let q = crate::worker::search::Query {
                address: &address,
                frame: &frame,
                regex,
            };
            crate::worker::search::send_result(f, id, device, kind, seq, q);
        }
        ToWorker::Colours {
            id,
            device,
            kind,
            by,
        } => {
            let mut s = state.borrow_mut();
            let f = s.files.get_mut(&id).map(|f| {
                layout_for(f, device, kind);
                (&f.snap, f.layouts.get(&(device, kind)))
            });
            let f = f.and_then(|(snap, l)| Some((snap, l?)));
            crate::worker::colour::send_colouring(f, id, device, kind, by);
        }
        ToWorker::Context {
            id,
            device,
            kind,
            elem,
            full,
        } => {
            let mut st = state.borrow_mut();
            let ctx = st.files.get_mut(&id).and_then(|f| {
                layout_for(f, device, kind);
                let l = f.layouts.get(&(device, kind))?;
                element_context(&f.snap, device, l, kind, elem as usize, full)
            });
            drop(st);
            post(&FromWorker::Context {
                id,
                device,
                kind,
                elem,
                full,
                ctx,
            });
        }
    }
}

/// Live memory after `event` as an icicle (inverted for `callers_of`), with the path of the
/// allocation of element `mark` of the Active Memory Timeline through it.
fn send_icicle(
    state: &Shared,
    id: u32,
    device: u32,
    event: Option<u32>,
    callers_of: Option<String>,
    mark: Option<u32>,
) {
    use memlens_core::analysis::icicle::{allocation_path, callers_at, icicle_at};
    let mut st = state.borrow_mut();
    let (icicle, mark_path) = match st.files.get_mut(&id) {
        None => (Default::default(), None),
        Some(f) => {
            let replay = memlens_core::replay::replay_device(&f.snap, device);
            let icicle = match &callers_of {
                Some(frame) => callers_at(&f.snap, &replay, event, frame),
                None => icicle_at(&f.snap, &replay, event),
            };
            let mark_path = mark.and_then(|e| {
                let l = layout_for(f, device, TimelineKind::Active);
                let stack = l.elements.allocation_stack(e as usize)?;
                allocation_path(&f.snap, stack, callers_of.as_deref())
            });
            (icicle, mark_path)
        }
    };
    drop(st);
    post(&FromWorker::Icicle {
        id,
        device,
        callers_of,
        mark,
        mark_path,
        icicle: Box::new(icicle),
    });
}

/// The part of each trace the page's `#range=` asks for (`None`: the whole snapshot); read
/// before the file, so that the rows outside it go while decoding ([`PartLoader`]).
fn parse_range(range: Option<&str>) -> Result<Option<EventRange>, String> {
    range
        .map(|r| EventRange::parse(r).map_err(|e| e.to_string()))
        .transpose()
}

fn is_cancelled(st: &Shared, id: u32) -> bool {
    st.borrow().cancelled.contains(&id)
}

/// Why a file was not opened.
enum NotOpened {
    Failed(String),
    /// Refused before committing to it (`crate::worker::limit`).
    TooLarge(TooLarge),
}

impl From<String> for NotOpened {
    fn from(message: String) -> Self {
        NotOpened::Failed(message)
    }
}

/// Reads a file (`part` of it, if given); a whole one whose first chunks foretell a decode
/// past `limit_bytes` is refused there.
async fn read_blob(
    st: &Shared,
    id: u32,
    blob: &Blob,
    part: Option<EventRange>,
    mut partials: Partials,
    pause_ms: Option<u32>,
    limit_bytes: f64,
) -> Result<Read, NotOpened> {
    let total = blob.size();
    if crate::worker::gunzip::is_gzip(blob).await {
        let (snap, bytes) = read_gzip(st, id, blob, part, partials, limit_bytes).await?;
        return Ok(Read {
            snap,
            bytes,
            wait_ms: None,
        });
    }
    let mut checking = part.is_none();
    let mut loader = PartLoader::new(Some(total as u64), part);
    let mut buf: Vec<u8> = Vec::new();
    // The browser reads the next chunks while this one is decoded (READS_AHEAD in flight), so the
    // reads' latency no longer adds up chunk after chunk. A read still in flight when the load
    // stops (cancelled, or a bad chunk) may fail later (the file went away): no error of the
    // page's, so every read gets a handler that ignores it (one closure per file, leaked: it must
    // outlive reads that settle after this returns).
    let ignore: &'static Closure<dyn FnMut(JsValue)> =
        Box::leak(Box::new(Closure::<dyn FnMut(JsValue)>::new(
            |_: JsValue| {},
        )));
    let read = |off: f64| -> Result<(js_sys::Promise, f64), String> {
        let end = (off + chunk_bytes(total)).min(total);
        let part = blob
            .slice_with_f64_and_f64(off, end)
            .map_err(|e| format!("cannot read the file: {}", js_message(&e)))?;
        let p = part.array_buffer();
        let _ = p.catch(ignore);
        Ok((p, end))
    };
    let mut queued = 0.0;
    let mut waited_ms = 0.0;
    let mut pending = std::collections::VecDeque::new();
    loop {
        while pending.len() < READS_AHEAD && queued < total {
            let (p, end) = read(queued)?;
            queued = end;
            pending.push_back((p, end));
        }
        let Some((promise, end)) = pending.pop_front() else {
            break;
        };
        if is_cancelled(st, id) {
            return Err(NotOpened::Failed("cancelled".into()));
        }
        let w0 = now_ms();
        let ab = JsFuture::from(promise)
            .await
            .map_err(|e| format!("cannot read the file: {}", js_message(&e)))?;
        waited_ms += now_ms() - w0;
        push_js(&mut loader, &mut buf, &Uint8Array::new(&ab))?;
        if checking {
            match limit::check(total, loader.head_shape(), limit_bytes) {
                limit::Verdict::Undecided => {}
                limit::Verdict::Fits => checking = false,
                limit::Verdict::TooLarge(offer) => return Err(NotOpened::TooLarge(offer)),
            }
        }
        post(&FromWorker::Progress {
            id,
            done: end,
            total,
        });
        if end < total {
            partials.after_chunk(&mut loader, end, total);
        }
        if let Some(ms) = pause_ms {
            let w0 = now_ms();
            gloo_timers::future::TimeoutFuture::new(ms).await;
            waited_ms += now_ms() - w0;
        }
    }
    Ok(Read {
        snap: loader.finish().map_err(|e| e.to_string())?,
        bytes: total as u64,
        wait_ms: Some(waited_ms),
    })
}

/// A file read and decoded.
struct Read {
    snap: Snapshot,
    bytes: u64,
    /// Of the time it took, how long the worker waited for the file's reads (`None` for a
    /// gzip file, whose reads and decompression overlap).
    wait_ms: Option<f64>,
}

/// [`read_blob`] for a gzip file: decompressed as it is read (`crate::worker::gunzip`), the
/// progress in compressed bytes; the size check made on the decompressed size it foretells.
async fn read_gzip(
    st: &Shared,
    id: u32,
    blob: &Blob,
    part: Option<EventRange>,
    mut partials: Partials,
    limit_bytes: f64,
) -> Result<(Snapshot, u64), NotOpened> {
    use crate::worker::gunzip::{gunzip_blob, trailer_bytes, uncompressed_bytes};
    let total = blob.size();
    let trailer = trailer_bytes(blob).await;
    let mut checking = part.is_none();
    let mut refused = None;
    let mut loader = PartLoader::new(None, part);
    let mut buf: Vec<u8> = Vec::new();
    let mut posted = 0.0;
    gunzip_blob(blob, chunk_bytes(total), |arr, done| {
        if is_cancelled(st, id) {
            return Ok(false);
        }
        push_js(&mut loader, &mut buf, arr)?;
        let out = loader.bytes_in() as f64;
        if let (true, Some(whole)) = (checking, uncompressed_bytes(out, done, total, trailer)) {
            match limit::check(whole, loader.head_shape(), limit_bytes) {
                limit::Verdict::Undecided => {}
                limit::Verdict::Fits => checking = false,
                limit::Verdict::TooLarge(offer) => {
                    refused = Some(TooLarge {
                        file_bytes: total,
                        ..offer
                    });
                    return Ok(false);
                }
            }
        }
        if done >= (posted + chunk_bytes(total)).min(total) && done > posted {
            posted = done;
            post(&FromWorker::Progress { id, done, total });
            partials.after_chunk(&mut loader, done, total);
        }
        Ok(true)
    })
    .await?;
    if let Some(offer) = refused {
        return Err(NotOpened::TooLarge(offer));
    }
    if is_cancelled(st, id) {
        return Err(NotOpened::Failed("cancelled".into()));
    }
    Ok((loader.finish().map_err(|e| e.to_string())?, total as u64))
}

/// The message of a JS error (`NotReadableError: ...` when the file went away), without Rust's
/// debug wrapping.
fn js_message(e: &JsValue) -> String {
    e.dyn_ref::<js_sys::Error>()
        .map(|e| format!("{}: {}", String::from(e.name()), String::from(e.message())))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"))
}

/// Feeds bytes held by JS to the loader, copying them into wasm memory a slice at a time: the
/// chunk stays in the JS heap, and wasm memory (which never shrinks) holds one slice of at most
/// [`COPY_BYTES`] in `buf`.
fn push_js(loader: &mut PartLoader, buf: &mut Vec<u8>, arr: &Uint8Array) -> Result<(), String> {
    let len = arr.length();
    let mut at = 0u32;
    while at < len {
        let next = len.min(at.saturating_add(COPY_BYTES));
        buf.resize((next - at) as usize, 0);
        arr.subarray(at, next).copy_to(buf);
        loader.push(buf).map_err(|e| e.to_string())?;
        at = next;
    }
    Ok(())
}

/// Current size of this worker's wasm memory, in bytes.
fn wasm_memory_bytes() -> f64 {
    wasm_bindgen::memory()
        .dyn_into::<js_sys::WebAssembly::Memory>()
        .map(|m| {
            m.buffer()
                .unchecked_into::<js_sys::ArrayBuffer>()
                .byte_length() as f64
        })
        .unwrap_or(0.0)
}

/// Gives the event loop a turn (a zero-delay timeout), so a pending cancel is seen between chunks.
async fn yield_now() {
    gloo_timers::future::TimeoutFuture::new(0).await;
}

/// Facts about one file's read and decode.
struct Load {
    bytes: u64,
    decode_ms: f64,
    read_wait_ms: Option<f64>,
    /// Wasm memory when the read started.
    memory_before: f64,
}

fn loaded(st: &Shared, id: u32, snap: Snapshot, load: Load, state_first: bool) {
    let Load {
        bytes,
        decode_ms,
        read_wait_ms,
        memory_before,
    } = load;
    let stats = memlens_core::snapshot_stats(&snap);
    let default_device = snap.default_device();
    let info = FileInfo {
        encoding: snap.encoding.map(|e| e.to_string()).unwrap_or_default(),
        bytes,
        devices: stats.devices,
        default_device,
        warnings: stats.warnings,
        allocator_settings: snap
            .allocator_settings
            .as_ref()
            .and_then(|v| serde_json::to_string_pretty(v).ok()),
        alloc_conf: snap
            .alloc_conf()
            .map(|c| (c.var.to_string(), c.text.to_string())),
        device_type: snap.device_type(),
        decode_ms,
        read_wait_ms,
        model_memory_bytes: wasm_memory_bytes(),
        memory_before_bytes: memory_before,
        layout_follows: !state_first,
    };
    st.borrow_mut().files.insert(
        id,
        Ready {
            snap,
            layouts: HashMap::new(),
            state: Default::default(),
            search: Default::default(),
        },
    );
    post(&FromWorker::Loaded { id, info });
    let Some(d) = default_device else {
        return;
    };
    if state_first {
        // The page shows the Allocator State History: its requests (the last state first, read
        // from the file's segments; then the timeline layout for the stack panel, then the list,
        // which builds the history) come in the order it wants them.
        return;
    }
    // The first view needs this layout anyway: send it without waiting to be asked, a preview
    // first when the trace is long; then, each once the messages queued meanwhile are answered,
    // the diagnosis (it reconstructs only the few allocator states it reads, so it waits
    // neither for the exact layout nor for the whole history), the exact layout, and the
    // allocator state history.
    send_layout_as(st, id, d, TimelineKind::Active, true);
    let st = st.clone();
    wasm_bindgen_futures::spawn_local(async move {
        background_turn(&st).await;
        send_diagnosis(&st, id, d);
        background_turn(&st).await;
        complete_layout(&st, id, d, TimelineKind::Active);
        background_turn(&st).await;
        prebuild_state(&st, id, d);
    });
}

/// Gives the event loop a turn, then waits while the page holds background work (another
/// worker is decoding; see `ToWorker::Background`).
async fn background_turn(st: &Shared) {
    yield_now().await;
    while st.borrow().background_held {
        gloo_timers::future::TimeoutFuture::new(HOLD_POLL_MS).await;
    }
}

/// Diagnoses a device (`memlens_core::analysis`) and posts the result: over its state history
/// when that is built already, else over the states the analysis reads alone (the same answer).
fn send_diagnosis(st: &Shared, id: u32, device: u32) {
    let s = st.borrow();
    let Some(f) = s.files.get(&id) else {
        return;
    };
    let t0 = now_ms();
    let opts = memlens_core::analysis::Options::default();
    let diagnosis = match f.state.built(device) {
        Some(h) => memlens_core::analysis::diagnose_with_history(&f.snap, h, &opts),
        None => memlens_core::analysis::diagnose_device(&f.snap, device, &opts),
    };
    let build_ms = now_ms() - t0;
    drop(s);
    web_sys::console::log_1(
        &format!(
            "memlens: diagnosis of device {device}: {} in {build_ms:.0} ms (worker)",
            diagnosis.verdict.kind.name()
        )
        .into(),
    );
    post(&FromWorker::Diagnosis {
        id,
        device,
        build_ms,
        diagnosis: Box::new(diagnosis),
    });
}

/// Answers a page's layout request: a preview first when the layout is not built yet and the
/// trace is long, then (once the messages queued meanwhile are answered) the exact layout.
fn answer_layout(st: &Shared, id: u32, device: u32, kind: TimelineKind) {
    let built = st
        .borrow()
        .files
        .get(&id)
        .is_some_and(|f| f.layouts.contains_key(&(device, kind)));
    send_layout_as(st, id, device, kind, !built);
    let st = st.clone();
    wasm_bindgen_futures::spawn_local(async move {
        yield_now().await;
        complete_layout(&st, id, device, kind);
    });
}

/// Ships the exact layout in place of a preview, if one was sent.
fn complete_layout(st: &Shared, id: u32, device: u32, kind: TimelineKind) {
    let pending = st
        .borrow()
        .files
        .get(&id)
        .and_then(|f| f.layouts.get(&(device, kind)))
        .is_some_and(|l| l.is_preview());
    if pending {
        send_layout(st, id, device, kind);
    }
}

/// Builds the device's allocator state history and event list, so that opening the Allocator
/// State History costs no build.
fn prebuild_state(st: &Shared, id: u32, device: u32) {
    if let Some(f) = st.borrow_mut().files.get_mut(&id) {
        f.state.prebuild(&f.snap, device);
    }
}

/// The layout whose elements searches and stack lookups use (a preview's are the same).
fn layout_for(f: &mut Ready, device: u32, kind: TimelineKind) -> &TimelineLayout {
    layout_entry(f, device, kind, false)
}

/// The file's layout for (device, kind), built on first use: the exact one, or with `preview`
/// a `TimelineLayout::build_preview`.
fn layout_entry(
    f: &mut Ready,
    device: u32,
    kind: TimelineKind,
    preview: bool,
) -> &mut TimelineLayout {
    let snap = &f.snap;
    f.layouts.entry((device, kind)).or_insert_with(|| {
        if preview {
            TimelineLayout::build_preview(snap, device, kind)
        } else {
            TimelineLayout::build(snap, device, kind)
        }
    })
}

fn send_layout(st: &Shared, id: u32, device: u32, kind: TimelineKind) {
    send_layout_as(st, id, device, kind, false);
}

/// Ships a layout. With `preview`, a long trace's first layout is the cheap
/// `TimelineLayout::build_preview` (kept here until [`complete_layout`] ships the exact one);
/// otherwise the exact layout, whose geometry is then dropped here.
fn send_layout_as(st: &Shared, id: u32, device: u32, kind: TimelineKind, preview: bool) {
    let mut s = st.borrow_mut();
    let Some(f) = s.files.get_mut(&id) else {
        return;
    };
    // A layout shipped before kept only its elements: build it again to ship it again.
    if f.layouts
        .get(&(device, kind))
        .is_some_and(|l| !l.has_geometry())
    {
        f.layouts.remove(&(device, kind));
    }
    let t0 = now_ms();
    let l = layout_entry(f, device, kind, preview);
    if !preview {
        l.complete();
    }
    let build_ms = now_ms() - t0;
    let msg = FromWorker::Layout {
        id,
        device,
        kind,
        build_ms,
    };
    let out = pack::reply_with(&msg, &*l);
    // The page draws from its own copy; stack lookups here need only the element columns.
    if !l.is_preview() {
        l.strip_geometry();
    }
    drop(s);
    out.post();
}
