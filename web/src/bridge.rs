//! The page's side of the worker: starts it from Trunk's loader shim (a relative URL, so the
//! page works under any path prefix), queues messages until the worker's wasm is up, and turns
//! replies into reducer actions.

use crate::protocol::{FromWorker, ToWorker};
use crate::state::{Action, AppState, LayoutKey};
use crate::wire;
use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{MessageEvent, Worker};
use yew::UseReducerDispatcher;

/// Trunk writes this next to `index.html` (`data-loader-shim` on the worker link).
pub const WORKER_URL: &str = "./memlens-worker_loader.js";

pub struct Bridge {
    worker: Worker,
    ready: Rc<Cell<bool>>,
    queue: Rc<RefCell<Vec<JsValue>>>,
    next_id: Cell<u32>,
    requested: Rc<RefCell<HashSet<LayoutKey>>>,
    dispatch: UseReducerDispatcher<AppState>,
    _onmessage: Closure<dyn FnMut(MessageEvent)>,
}

pub fn now_ms() -> f64 {
    web_sys::window()
        .and_then(|w| w.performance())
        .map(|p| p.now())
        .unwrap_or(0.0)
}

impl Bridge {
    pub fn new(dispatch: UseReducerDispatcher<AppState>) -> Result<Bridge, String> {
        let worker = Worker::new(WORKER_URL)
            .map_err(|e| format!("cannot start the decoding worker: {e:?}"))?;
        let ready = Rc::new(Cell::new(false));
        let queue: Rc<RefCell<Vec<JsValue>>> = Rc::new(RefCell::new(Vec::new()));
        let requested: Rc<RefCell<HashSet<LayoutKey>>> = Rc::default();
        let (r, q, w, d, req) = (
            ready.clone(),
            queue.clone(),
            worker.clone(),
            dispatch.clone(),
            requested.clone(),
        );
        let onmessage = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            let data = ev.data();
            let msg: FromWorker = match wire::header(&data) {
                Ok(m) => m,
                Err(e) => {
                    web_sys::console::error_1(&e.into());
                    return;
                }
            };
            match msg {
                FromWorker::Ready => {
                    r.set(true);
                    for m in q.borrow_mut().drain(..) {
                        let _ = w.post_message(&m);
                    }
                }
                FromWorker::Progress { id, done, total } => {
                    d.dispatch(Action::Progress { id, done, total })
                }
                FromWorker::Loaded { id, info } => {
                    // The worker sends the default layout unasked.
                    if let Some(dev) = info.default_device {
                        req.borrow_mut().insert((
                            id,
                            dev,
                            memlens_core::layout::TimelineKind::Active,
                        ));
                    }
                    d.dispatch(Action::Loaded { id, info })
                }
                FromWorker::Failed { id, message } => d.dispatch(Action::Failed { id, message }),
                FromWorker::Layout {
                    id,
                    device,
                    kind,
                    meta,
                } => {
                    let (t0, build_ms) = (now_ms(), meta.build_ms);
                    match wire::layout_from_message(&data, meta) {
                        Ok(l) => {
                            web_sys::console::log_1(
                                &format!(
                                    "memlens: layout of device {device} ({kind:?}): {} elements, {} pieces; built in {build_ms:.0} ms (worker), unpacked in {:.0} ms",
                                    l.len(),
                                    l.piece_count(),
                                    now_ms() - t0
                                )
                                .into(),
                            );
                            d.dispatch(Action::Layout {
                                key: (id, device, kind),
                                layout: Rc::new(l),
                            })
                        }
                        Err(e) => d.dispatch(Action::Failed {
                            id,
                            message: format!("bad layout from the worker: {e}"),
                        }),
                    }
                }
                FromWorker::Context {
                    id,
                    device,
                    kind,
                    elem,
                    full,
                    ctx,
                } => d.dispatch(Action::Context {
                    key: (id, device, kind),
                    elem,
                    full,
                    ctx,
                }),
            }
        });
        worker.set_onmessage(Some(onmessage.as_ref().unchecked_ref()));
        Ok(Bridge {
            worker,
            ready,
            queue,
            next_id: Cell::new(1),
            requested,
            dispatch,
            _onmessage: onmessage,
        })
    }

    fn send(&self, msg: &ToWorker, extra: &[(&str, JsValue)]) {
        let m = wire::message(msg, extra);
        if self.ready.get() {
            let _ = self.worker.post_message(&m);
        } else {
            self.queue.borrow_mut().push(m);
        }
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
        self.send(&ToWorker::Open { id, name }, &[("file", file.into())]);
    }

    /// Opens a URL (resolved against the page, so relative paths stay inside the site).
    pub fn open_url(&self, url: &str, name: &str) {
        let abs = web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.base_uri().ok().flatten())
            .and_then(|base| web_sys::Url::new_with_base(url, &base).ok())
            .map(|u| u.href())
            .unwrap_or_else(|| url.to_string());
        let id = self.new_id();
        self.dispatch.dispatch(Action::Opened {
            id,
            name: name.to_string(),
            at_ms: now_ms(),
            size_bytes: 0.0,
        });
        self.send(
            &ToWorker::Open {
                id,
                name: name.to_string(),
            },
            &[("url", JsValue::from_str(&abs))],
        );
    }

    pub fn cancel(&self, id: u32) {
        self.send(&ToWorker::Cancel { id }, &[]);
        self.dispatch.dispatch(Action::Cancelled { id });
    }

    /// Asks for a layout once.
    pub fn request_layout(&self, key: LayoutKey) {
        if self.requested.borrow_mut().insert(key) {
            self.send(
                &ToWorker::Layout {
                    id: key.0,
                    device: key.1,
                    kind: key.2,
                },
                &[],
            );
        }
    }

    pub fn request_context(&self, key: LayoutKey, elem: u32, full: bool) {
        self.send(
            &ToWorker::Context {
                id: key.0,
                device: key.1,
                kind: key.2,
                elem,
                full,
            },
            &[],
        );
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.worker.terminate();
    }
}
