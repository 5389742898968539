//! The page's side of the workers: starts them (from Trunk's loader shim, a relative URL, so
//! the page works under any path prefix; or from the single-file page's `memlensHost`) through
//! `crate::page::worker_pool` (files decoded in parallel, each request sent to its file's
//! worker, a worker that dies replaced), keeps track of what was asked (a layout once, the
//! state history's list once, one state at a time), and dispatches each reply, decoded by
//! `crate::page::reply`, as a reducer action.
//!
//! Every network read happens here, on the page, where the Content-Security-Policy
//! (`connect-src 'self'`) governs it: a URL is fetched by the page and handed to the worker as a
//! `Blob`, so the worker itself never touches the network.
//!
//! The first worker is usually started before the app by the page's bootstrap (web/assets/boot.js,
//! single.js: `window.memlensEarlyWorker`), so that its wasm compiles while the app's does; the
//! messages it sent before the app took it over are replayed here.
//!
//! `window.memlensHost` is the page's bootstrap: in dist/, web/assets/boot.js (`makeWorker()`
//! starts a worker and hands it the worker's wasm compiled once on the page; `fetch(url)` gives
//! the `?src=` file it began fetching before the app started, as a `Promise` of a `Blob` or of
//! `null`); in the single-file page (scripts/single_file.py), `makeWorker()` starts the worker
//! from a Blob URL with the wasm inlined, `fetch(url)` gives the embedded copy of a file (the
//! example), and `preload()` lists the files to open at start (`{name, url}` from `memlens
//! serve`, `{name, blob}` in `memlens html` reports). Without one, the worker starts from
//! Trunk's loader shim.

use crate::page::app_state::{Action, AppState, IcicleKey, LayoutKey};
use crate::page::reply::Reply;
use crate::page::worker_pool::{Death, Hooks, Job, Pool};
use crate::wire::clock::now_ms;
use crate::wire::protocol::{ToWorker, WantedState};
use js_sys::{Function, Promise, Reflect};
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Blob, Response, Worker};
use yew::UseReducerDispatcher;

/// A state request with no answer after this long is considered lost.
const STATE_TIMEOUT_MS: f64 = 10_000.0;

/// Trunk writes this next to `index.html` (`data-loader-shim` on the worker link).
pub const WORKER_URL: &str = "./memlens-worker_loader.js";

/// `window.memlensHost`, if this is the single-file page.
fn host() -> Option<JsValue> {
    let w = web_sys::window()?;
    let h = Reflect::get(&w, &JsValue::from_str("memlensHost")).ok()?;
    h.is_object().then_some(h)
}

/// Calls `memlensHost[name](arg)`; `None` when there is no such host or method.
fn host_call(name: &str, arg: &JsValue) -> Option<Result<JsValue, JsValue>> {
    let h = host()?;
    let f = Reflect::get(&h, &JsValue::from_str(name))
        .ok()?
        .dyn_into::<Function>()
        .ok()?;
    Some(f.call1(&h, arg))
}

fn js_error(e: &JsValue) -> String {
    e.dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"))
}

/// Resolves `url` against the page, so relative paths stay inside the site.
fn absolute_url(url: &str) -> Option<web_sys::Url> {
    let base = web_sys::window()?.document()?.base_uri().ok().flatten()?;
    web_sys::Url::new_with_base(url, &base).ok()
}

/// Fetches a same-origin URL on the page (under its CSP) as a `Blob`.
async fn fetch_blob(url: String) -> Result<Blob, String> {
    let window = web_sys::window().ok_or("no window")?;
    let abs = absolute_url(&url).ok_or_else(|| format!("not a URL: {url}"))?;
    let own = window.location().origin().unwrap_or_default();
    if abs.origin() != own || own == "null" {
        return Err(format!(
            "only files of this site can be opened by URL (drop or choose other files): {}",
            abs.href()
        ));
    }
    let resp = JsFuture::from(window.fetch_with_str(&abs.href()))
        .await
        .map_err(|e| format!("cannot fetch: {}", js_error(&e)))?;
    let resp: Response = resp
        .dyn_into()
        .map_err(|_| "cannot fetch: no response".to_string())?;
    if !resp.ok() {
        return Err(format!(
            "cannot fetch: HTTP {} {}",
            resp.status(),
            resp.status_text()
        ));
    }
    let blob = JsFuture::from(
        resp.blob()
            .map_err(|e| format!("cannot fetch: {}", js_error(&e)))?,
    )
    .await
    .map_err(|e| format!("cannot fetch: {}", js_error(&e)))?;
    blob.dyn_into()
        .map_err(|_| "cannot fetch: not a blob".to_string())
}

/// Waits for a `Promise<Blob>` from the host.
async fn await_blob(p: Promise) -> Result<Blob, String> {
    JsFuture::from(p)
        .await
        .map_err(|e| format!("cannot read the embedded file: {}", js_error(&e)))?
        .dyn_into()
        .map_err(|_| "cannot read the embedded file: not a blob".to_string())
}

/// The host's copy of `url` (a `Promise` of a `Blob`); when it resolves to `null` (boot.js's
/// early fetch of `?src=` failed), the page fetches `url` itself and reports why it failed.
async fn host_copy(p: Promise, url: String) -> Result<Blob, String> {
    let copy = JsFuture::from(p).await.unwrap_or(JsValue::NULL);
    if copy.is_null() {
        return fetch_blob(url).await;
    }
    copy.dyn_into()
        .map_err(|_| "cannot read the embedded file: not a blob".to_string())
}

pub struct Bridge {
    pool: Rc<Pool>,
    next_id: Cell<u32>,
    requested: Rc<RefCell<HashSet<LayoutKey>>>,
    /// When the state request in flight was sent (one at a time: the latest wanted waits).
    state_sent_ms: Rc<Cell<Option<f64>>>,
    /// State history lists asked for, by (file, device).
    events_asked: RefCell<HashSet<(u32, u32)>>,
    /// (file, device) diagnoses asked for.
    diagnosis_asked: RefCell<HashSet<(u32, u32)>>,
    /// The icicle asked last.
    icicle_asked: RefCell<Option<IcicleKey>>,
    /// What-grew query asked last.
    between_asked: Cell<Option<(u32, u32, u32, u32)>>,
    /// Files cancelled while their bytes were still being fetched.
    cancelled: Rc<RefCell<HashSet<u32>>>,
    dispatch: UseReducerDispatcher<AppState>,
}

/// What the bridge does with the workers' replies and deaths.
struct Replies {
    /// The page's drawing code was warmed up (on the first worker's warm-up layout).
    warmed: Cell<bool>,
    requested: Rc<RefCell<HashSet<LayoutKey>>>,
    state_sent_ms: Rc<Cell<Option<f64>>>,
    dispatch: UseReducerDispatcher<AppState>,
}

impl Replies {
    /// A worker died: the files it was decoding fail with the reason; what was asked about the
    /// files it had loaded (opened again in its successor) is asked again when wanted.
    fn died(&self, death: Death) {
        let message = format!("the decoding worker stopped ({}); most often this file needs more memory than a browser tab can give: write part of it with `memlens slice FILE --last N -o part.pickle` and open that, or use the CLI; the viewer restarted the worker", death.why);
        for &id in &death.failed {
            self.dispatch.dispatch(Action::Failed {
                id,
                message: message.clone(),
            });
        }
        let gone: HashSet<u32> = death
            .failed
            .iter()
            .chain(&death.reopened)
            .copied()
            .collect();
        self.requested
            .borrow_mut()
            .retain(|k| !gone.contains(&k.file));
        self.state_sent_ms.set(None);
    }

    fn on_reply(&self, reply: Reply) {
        match &reply {
            Reply::WarmUpLayout(l) if !self.warmed.replace(true) => crate::page::canvas::warm_up(l),
            Reply::Loaded { id, info } => {
                // The worker sends the default layout unasked (unless the page opened on the
                // state view, which asks for it).
                if let Some(dev) = info.default_device.filter(|_| info.layout_follows) {
                    let key = LayoutKey {
                        file: *id,
                        device: dev,
                        kind: memlens_core::layout::TimelineKind::Active,
                    };
                    self.requested.borrow_mut().insert(key);
                }
            }
            Reply::State(_) => self.state_sent_ms.set(None),
            _ => {}
        }
        if let Some(a) = reply.into_action() {
            self.dispatch.dispatch(a);
        }
    }
}

/// The worker the page's bootstrap started before the app (`window.memlensEarlyWorker`, from
/// web/assets/boot.js or single.js), with the messages it sent meanwhile; taken once.
fn early_worker() -> Option<(Worker, Vec<JsValue>)> {
    let w = web_sys::window()?;
    let early = Reflect::get(&w, &JsValue::from_str("memlensEarlyWorker")).ok()?;
    if !early.is_object() {
        return None;
    }
    let _ = Reflect::delete_property(w.as_ref(), &JsValue::from_str("memlensEarlyWorker"));
    let worker = Reflect::get(&early, &JsValue::from_str("worker"))
        .ok()?
        .dyn_into::<Worker>()
        .ok()?;
    let take = Reflect::get(&early, &JsValue::from_str("take"))
        .ok()?
        .dyn_into::<Function>()
        .ok()?;
    let msgs = take
        .call0(&early)
        .ok()
        .and_then(|a| a.dyn_into::<js_sys::Array>().ok())
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    Some((worker, msgs))
}

/// The worker started early, else the single-file page's (`memlensHost.makeWorker()`), else
/// Trunk's; with the messages already received.
fn start_worker() -> Result<(Worker, Vec<JsValue>), String> {
    if let Some(early) = early_worker() {
        return Ok(early);
    }
    match host_call("makeWorker", &JsValue::UNDEFINED) {
        Some(Ok(w)) => w
            .dyn_into::<Worker>()
            .map(|w| (w, Vec::new()))
            .map_err(|_| "cannot start the decoding worker: the page gave no Worker".to_string()),
        Some(Err(e)) => Err(format!(
            "cannot start the decoding worker: {}",
            js_error(&e)
        )),
        None => Worker::new(WORKER_URL)
            .map(|w| (w, Vec::new()))
            .map_err(|e| format!("cannot start the decoding worker: {}", js_error(&e))),
    }
}

impl Bridge {
    pub fn new(dispatch: UseReducerDispatcher<AppState>) -> Result<Bridge, String> {
        let requested: Rc<RefCell<HashSet<LayoutKey>>> = Rc::default();
        let state_sent_ms: Rc<Cell<Option<f64>>> = Rc::default();
        let replies = Rc::new(Replies {
            warmed: Cell::new(false),
            requested: requested.clone(),
            state_sent_ms: state_sent_ms.clone(),
            dispatch: dispatch.clone(),
        });
        let r = replies.clone();
        let hooks = Hooks {
            reply: Box::new(move |reply| replies.on_reply(reply)),
            death: Box::new(move |death| r.died(death)),
        };
        let pool = Pool::new(start_worker, hooks)?;
        Ok(Bridge {
            pool,
            next_id: Cell::new(1),
            requested,
            state_sent_ms,
            events_asked: RefCell::default(),
            diagnosis_asked: RefCell::default(),
            icicle_asked: RefCell::default(),
            between_asked: Cell::default(),
            cancelled: Rc::default(),
            dispatch,
        })
    }

    fn send(&self, msg: &ToWorker, extra: &[(&str, JsValue)]) {
        self.pool.send(msg, extra);
    }

    fn new_id(&self) -> u32 {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        id
    }

    pub fn open_file(&self, file: web_sys::File) {
        let id = self.new_id();
        let name = file.name();
        self.dispatch.dispatch(Action::Opened {
            id,
            name: name.clone(),
            at_ms: now_ms(),
            size_bytes: file.size(),
        });
        self.pool.open(job(id, name, file.into()));
    }

    /// Opens part `range` (`last:N`) of file `refused`, which was refused for its size.
    pub fn open_part(&self, refused: u32, range: String) {
        let Some(old) = self.pool.take_refused(refused) else {
            return;
        };
        let id = self.new_id();
        let name = match &old.open {
            ToWorker::Open { name, .. } => name.clone(),
            _ => String::new(),
        };
        self.dispatch.dispatch(Action::Opened {
            id,
            name: name.clone(),
            at_ms: now_ms(),
            size_bytes: old.blob.size(),
        });
        self.pool.open(part_job(id, name, old.blob, Some(range)));
    }

    /// Shows `name` as loading at once, then hands the worker the blob once `bytes` gives it
    /// (a fetch, or the single-file page unpacking an embedded file).
    fn open_later(
        &self,
        name: &str,
        bytes: impl std::future::Future<Output = Result<Blob, String>> + 'static,
    ) {
        let id = self.new_id();
        self.dispatch.dispatch(Action::Opened {
            id,
            name: name.to_string(),
            at_ms: now_ms(),
            size_bytes: 0.0,
        });
        let (pool, cancelled, dispatch, name) = (
            self.pool.clone(),
            self.cancelled.clone(),
            self.dispatch.clone(),
            name.to_string(),
        );
        wasm_bindgen_futures::spawn_local(async move {
            let r = bytes.await;
            if cancelled.borrow_mut().remove(&id) {
                return;
            }
            match r {
                Ok(blob) => pool.open(job(id, name, blob)),
                Err(message) => dispatch.dispatch(Action::Failed { id, message }),
            }
        });
    }

    /// Opens a URL: the host's copy when it has one (the single-file page's embedded example,
    /// or the `?src=` file boot.js began fetching before the app started), else a fetch by the
    /// page, restricted to the page's own origin.
    pub fn open_url(&self, url: &str, name: &str) {
        match host_call("fetch", &JsValue::from_str(url)) {
            Some(Ok(p)) if p.is_instance_of::<Promise>() => {
                self.open_later(name, host_copy(p.unchecked_into(), url.to_string()))
            }
            _ => self.open_later(name, fetch_blob(url.to_string())),
        }
    }

    /// Opens what the page was built or served with (`memlensHost.preload()`): files listed by
    /// `memlens serve`, or the snapshots embedded in a `memlens html` report. Call once; how
    /// many it opens.
    pub fn open_preloaded(&self) -> u32 {
        let Some(Ok(list)) = host_call("preload", &JsValue::UNDEFINED) else {
            return 0;
        };
        let Ok(list) = list.dyn_into::<js_sys::Array>() else {
            return 0;
        };
        let mut opened = 0;
        for entry in list.iter() {
            let get = |k: &str| Reflect::get(&entry, &JsValue::from_str(k)).unwrap_or_default();
            let name = get("name").as_string().unwrap_or_else(|| "snapshot".into());
            let blob = get("blob");
            if let Some(url) = get("url").as_string() {
                self.open_url(&url, &name);
            } else if blob.is_instance_of::<Promise>() {
                self.open_later(&name, await_blob(blob.unchecked_into()));
            } else {
                continue;
            }
            opened += 1;
        }
        opened
    }

    /// The page opened with no file: its first worker warms up meanwhile.
    pub fn warm_up(&self) {
        self.pool.warm_up();
    }

    pub fn cancel(&self, id: u32) {
        self.cancelled.borrow_mut().insert(id);
        self.send(&ToWorker::Cancel { id }, &[]);
        self.dispatch.dispatch(Action::Cancelled { id });
    }

    /// Whether every worker holds the work it does unasked after a load (see
    /// `crate::page::worker_pool`): the Compare view holds it until its timelines have painted.
    pub fn hold_background(&self, hold: bool) {
        self.pool.hold_background(hold);
    }

    /// Asks for a layout once.
    pub fn request_layout(&self, key: LayoutKey) {
        if self.requested.borrow_mut().insert(key) {
            self.send(
                &ToWorker::Layout {
                    id: key.file,
                    device: key.device,
                    kind: key.kind,
                },
                &[],
            );
        }
    }

    /// Asks for layout `key`'s elements coloured by `by` (see `crate::page::timeline_options`).
    pub fn request_colours(&self, key: LayoutKey, by: memlens_core::colour::ColourBy) {
        let msg = ToWorker::Colours {
            id: key.file,
            device: key.device,
            kind: key.kind,
            by,
        };
        self.send(&msg, &[]);
    }

    /// Sends a search request (see `crate::page::search`).
    pub fn send_search(&self, msg: &ToWorker) {
        self.send(msg, &[]);
    }

    /// Asks for the state after `event` of a device's Allocator State History, unless a state
    /// request is in flight (the caller asks again once its reply is in; a request unanswered
    /// for [`STATE_TIMEOUT_MS`] counts as lost).
    pub fn request_state(&self, id: u32, device: u32, event: WantedState) {
        let now = now_ms();
        let busy = self
            .state_sent_ms
            .get()
            .is_some_and(|t| now - t < STATE_TIMEOUT_MS);
        if !busy {
            self.state_sent_ms.set(Some(now));
            self.send(&ToWorker::StateAt { id, device, event }, &[]);
        }
    }

    /// Asks once for a device's diagnosis (the worker sends the default device's unasked).
    pub fn request_diagnosis(&self, id: u32, device: u32) {
        if self.diagnosis_asked.borrow_mut().insert((id, device)) {
            self.send(&ToWorker::Diagnose { id, device }, &[]);
        }
    }

    /// Asks for the icicle of (file, device) after `event`, unless that is the last one asked.
    pub fn request_icicle(&self, want: &IcicleKey) {
        if self.icicle_asked.replace(Some(want.clone())).as_ref() != Some(want) {
            self.send(
                &ToWorker::Icicle {
                    id: want.file,
                    device: want.device,
                    event: want.event,
                    callers_of: want.callers_of.clone(),
                    mark: want.mark,
                },
                &[],
            );
        }
    }

    /// Sends a Compare view request (`crate::page::compare_view` decides what and when).
    pub fn send_compare(&self, msg: &ToWorker) {
        self.send(msg, &[]);
    }

    /// Asks what grew between two events, unless that was the last asked.
    pub fn request_between(&self, want: (u32, u32, u32, u32)) {
        if self.between_asked.replace(Some(want)) != Some(want) {
            let (id, device, from, to) = want;
            self.send(
                &ToWorker::Between {
                    id,
                    device,
                    from: Some(from),
                    to: Some(to),
                },
                &[],
            );
        }
    }

    /// Asks once for a device's Allocator State History list columns.
    pub fn request_state_events(&self, id: u32, device: u32) {
        if self.events_asked.borrow_mut().insert((id, device)) {
            self.send(&ToWorker::StateEvents { id, device }, &[]);
        }
    }

    pub fn request_context(&self, key: LayoutKey, elem: u32, full: bool) {
        self.send(
            &ToWorker::Context {
                id: key.file,
                device: key.device,
                kind: key.kind,
                elem,
                full,
            },
            &[],
        );
    }
}

/// The job of decoding file `id` (with the page's `#range=` and whether it shows the state view).
fn job(id: u32, name: String, blob: Blob) -> Job {
    part_job(id, name, blob, hash_value("range"))
}

/// [`job`] with the part `range` (`None`: the whole file).
fn part_job(id: u32, name: String, blob: Blob, range: Option<String>) -> Job {
    let open = ToWorker::Open {
        id,
        name,
        state_first: state_view_shown(),
        range,
        read_pause_ms: crate::page::url::query_value("read_pause_ms").and_then(|v| v.parse().ok()),
        no_pictures: crate::page::url::query_value("pictures").as_deref() == Some("0")
            || !timeline_view_shown(),
        limit_bytes: limit_param(),
    };
    Job { id, open, blob }
}

/// `?limit_mb=N` of the page: the decoder memory past which a whole file is refused, instead
/// of the worker's own limit (tests use a small one).
fn limit_param() -> Option<f64> {
    let mb = crate::page::url::query_value("limit_mb")?
        .parse::<f64>()
        .ok()?;
    (mb.is_finite() && mb > 0.0).then_some(mb * 1e6)
}

/// Whether the page shows the Allocator State History (the URL hash holds the view).
fn state_view_shown() -> bool {
    hash_value("view").as_deref() == Some("state")
}

/// Whether the page shows the Active Memory Timeline (the default view), the only view that
/// draws the pictures of a trace so far (`AppState::partial_picture`).
fn timeline_view_shown() -> bool {
    matches!(hash_value("view").as_deref(), None | Some("timeline"))
}

/// The value of `key` in the URL hash (`#view=state&range=last:1000`), decoded.
fn hash_value(key: &str) -> Option<String> {
    let h = web_sys::window()?.location().hash().ok()?;
    let v = h
        .trim_start_matches('#')
        .split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))?;
    js_sys::decode_uri_component(v).ok()?.as_string()
}
