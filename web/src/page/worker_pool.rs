//! The decoding workers. A job is "decode this file" (a `ToWorker::Open` and its `Blob`); jobs
//! wait in one queue and each goes to a worker that is decoding nothing, so files dropped
//! together decode in parallel, one per worker. A worker is started when a job waits and every
//! worker is decoding, up to [`worker_cap`] (`navigator.hardwareConcurrency`, at most
//! [`MAX_WORKERS`], fewer on a device reporting little memory; `?workers=N` in the page's URL
//! sets another limit). The worker that decoded a file keeps its model and answers every later
//! request about it: a message goes to the worker of the file it names (`ToWorker::file`).
//!
//! A worker warms up (`ToWorker::WarmUp`) only when it has nothing else to do: the first when
//! the page has no file to open at start, and the spare; a second worker starts as soon as the
//! first is warm while the page is idle (`Pool::spare`).
//! While a worker decodes, the others hold the work they do unasked after a load (diagnosis,
//! exact layout, state history: `Pool::balance`), so a file opened with others is not slowed
//! by theirs; the page can hold it in every worker too (`Pool::hold_background`: the Compare
//! view, until both its timelines have painted).
//!
//! A worker that dies (an uncaught error: a wasm trap, which is what running out of memory is in
//! wasm, or a bug) is replaced where it stood: the file it was decoding fails (only that one:
//! a worker decodes one file at a time, so the file that killed it is known), the files it had
//! loaded are opened again in the new one (requests about them held until they are), and the
//! other workers go on.
//!
//! A wasm memory never shrinks: a worker whose file failed or was refused keeps at its size
//! whatever that file made it grow to (a hostile file can take GBs before it is refused). So
//! such a worker, when it holds no other file, is replaced by a fresh one at once
//! (`Pool::retire`), and a new file goes to a worker holding no file when there is one.

use crate::page::reply::Reply;
use crate::wire::pack;
use crate::wire::protocol::ToWorker;
use gloo_events::{EventListener, EventListenerOptions};
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet, VecDeque};
use std::rc::{Rc, Weak};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{Blob, MessageEvent, Worker};

/// Workers at most, whatever the machine has: each holds its own wasm memory and warm-up.
pub const MAX_WORKERS: usize = 8;
/// Device memory (`navigator.deviceMemory`, GiB) per worker: a worker that decoded a 200 MB
/// snapshot and built everything for it holds ~0.45 GB more than an idle one
/// (docs/BENCHMARKS.md, "A decoding worker's memory").
const GIB_PER_WORKER: f64 = 0.5;

/// A file to decode: its `Open` message and its bytes (kept, to open it again in a new worker).
#[derive(Clone)]
pub struct Job {
    pub id: u32,
    pub open: ToWorker,
    pub blob: Blob,
}

/// A worker died: the files it was decoding (failed) and those opened again in its successor.
pub struct Death {
    pub why: String,
    pub failed: Vec<u32>,
    pub reopened: Vec<u32>,
}

/// Starts a worker; with the messages it already sent (one started before the app).
pub type Start = fn() -> Result<(Worker, Vec<JsValue>), String>;

/// What the pool tells its owner: each reply (but a reopened file's `Loaded`, which the page had
/// already), and each death.
pub struct Hooks {
    pub reply: Box<dyn Fn(Reply)>,
    pub death: Box<dyn Fn(Death)>,
}

/// One worker (replaced by a fresh one when it dies), the messages waiting for it to be ready,
/// and the files it was handed.
struct Port {
    worker: RefCell<Worker>,
    ready: Cell<bool>,
    queue: RefCell<Vec<JsValue>>,
    /// Files handed to it, and whether each is loaded.
    files: RefCell<HashMap<u32, (Job, bool)>>,
    /// The file it is decoding (opened, not yet loaded or failed), if any.
    decoding: Cell<Option<u32>>,
    /// Files opened again in a new worker, whose `Loaded` the page already had; requests wait
    /// in `held` until they are loaded there.
    reopening: RefCell<HashSet<u32>>,
    held: RefCell<Vec<JsValue>>,
    /// Whether it was last told to hold its background work (`Pool::balance`).
    background_held: Cell<bool>,
    listeners: RefCell<Vec<EventListener>>,
}

impl Port {
    fn new(worker: Worker) -> Port {
        Port {
            worker: RefCell::new(worker),
            ready: Cell::new(false),
            queue: RefCell::default(),
            files: RefCell::default(),
            decoding: Cell::new(None),
            reopening: RefCell::default(),
            held: RefCell::default(),
            background_held: Cell::new(false),
            listeners: RefCell::default(),
        }
    }

    fn post(&self, m: JsValue, opens: bool) {
        if !opens && !self.reopening.borrow().is_empty() {
            self.held.borrow_mut().push(m);
        } else if !self.ready.get() {
            self.queue.borrow_mut().push(m);
        } else {
            let _ = self.worker.borrow().post_message(&m);
        }
    }

    fn send(&self, msg: &ToWorker, extra: &[(&str, JsValue)]) {
        let opens = matches!(msg, ToWorker::Open { .. } | ToWorker::Cancel { .. });
        self.post(pack::message(msg, extra), opens);
    }

    fn open(&self, job: Job) {
        self.send(&job.open, &[("file", job.blob.clone().into())]);
        self.files.borrow_mut().insert(job.id, (job, false));
    }

    fn set_ready(&self) {
        self.ready.set(true);
        let worker = self.worker.borrow();
        for m in self.queue.borrow_mut().drain(..) {
            let _ = worker.post_message(&m);
        }
    }

    /// A file opened again is loaded (or failed) in the new worker: once all are, the requests
    /// held meanwhile go out.
    fn reopened(&self, id: u32) -> bool {
        let was = self.reopening.borrow_mut().remove(&id);
        if was && self.reopening.borrow().is_empty() {
            let held: Vec<JsValue> = self.held.borrow_mut().drain(..).collect();
            for m in held {
                self.post(m, false);
            }
        }
        was
    }

    /// Its decoding of `id` ended (loaded, failed or cancelled); whether it was decoding it.
    fn ended(&self, id: u32) -> bool {
        let was = self.decoding.get() == Some(id);
        if was {
            self.decoding.set(None);
        }
        was
    }
}

pub struct Pool {
    ports: RefCell<Vec<Rc<Port>>>,
    /// The port of each file handed out, by file id.
    of_file: RefCell<HashMap<u32, usize>>,
    jobs: RefCell<VecDeque<Job>>,
    /// Files refused for their size, until the page opens part of one or another is refused.
    refused: RefCell<HashMap<u32, Job>>,
    cap: usize,
    /// The page holds every worker's unasked work ([`Pool::hold_background`]).
    page_holds: Cell<bool>,
    start: Start,
    hooks: Hooks,
    me: Weak<Pool>,
}

/// How many workers: the page's `?workers=N`, else `navigator.hardwareConcurrency`; at most
/// [`MAX_WORKERS`] and one per [`GIB_PER_WORKER`] of `navigator.deviceMemory` (Chromium
/// reports it, at most 8); at least one.
pub fn worker_cap() -> usize {
    let Some(w) = web_sys::window() else {
        return 1;
    };
    let asked = crate::page::url::query_value("workers").and_then(|n| n.parse::<usize>().ok());
    // Read through Reflect: web-sys's `Navigator` feature would rebuild web-sys for two getters.
    let navigator = |key: &str| {
        js_sys::Reflect::get(&w, &JsValue::from_str("navigator"))
            .and_then(|n| js_sys::Reflect::get(&n, &JsValue::from_str(key)))
            .ok()
            .and_then(|v| v.as_f64())
    };
    let cores = navigator("hardwareConcurrency").unwrap_or(1.0) as usize;
    let by_memory = navigator("deviceMemory")
        .map_or(MAX_WORKERS, |gib| (gib / GIB_PER_WORKER).floor() as usize);
    asked
        .unwrap_or_else(|| cores.min(by_memory))
        .clamp(1, MAX_WORKERS)
}

impl Pool {
    /// Starts the first worker (replaying what it said before the app took it over).
    pub fn new(start: Start, hooks: Hooks) -> Result<Rc<Pool>, String> {
        let pool = Rc::new_cyclic(|me| Pool {
            ports: RefCell::default(),
            of_file: RefCell::default(),
            jobs: RefCell::default(),
            refused: RefCell::default(),
            cap: worker_cap(),
            page_holds: Cell::new(false),
            start,
            hooks,
            me: me.clone(),
        });
        pool.spawn()?;
        Ok(pool)
    }

    /// Workers started so far.
    pub fn workers(&self) -> usize {
        self.ports.borrow().len()
    }

    fn port(&self, i: usize) -> Rc<Port> {
        self.ports.borrow()[i].clone()
    }

    fn spawn(&self) -> Result<usize, String> {
        let (worker, early) = (self.start)()?;
        let i = {
            let mut ports = self.ports.borrow_mut();
            ports.push(Rc::new(Port::new(worker.clone())));
            ports.len() - 1
        };
        self.attach(i, &worker);
        for m in early {
            self.on_message(i, &m);
        }
        Ok(i)
    }

    /// Listens to port `i`'s worker: its messages, and its death.
    fn attach(&self, i: usize, worker: &Worker) {
        let me = self.me.clone();
        let on_message = EventListener::new(worker, "message", move |ev| {
            if let (Some(p), Some(ev)) = (me.upgrade(), ev.dyn_ref::<MessageEvent>()) {
                p.on_message(i, &ev.data());
            }
        });
        let me = self.me.clone();
        let options = EventListenerOptions::enable_prevent_default();
        let on_error = EventListener::new_with_options(worker, "error", options, move |ev| {
            // Handled here: the page reports it in its banner, not as an uncaught error.
            ev.prevent_default();
            let why = ev
                .dyn_ref::<web_sys::ErrorEvent>()
                .map(|e| e.message())
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "no message".into());
            if let Some(p) = me.upgrade() {
                p.restart(i, &why);
            }
        });
        *self.port(i).listeners.borrow_mut() = vec![on_message, on_error];
    }

    fn on_message(&self, i: usize, data: &JsValue) {
        let reply = match Reply::decode(data) {
            Ok(r) => r,
            Err(e) => {
                web_sys::console::error_1(&e.into());
                return;
            }
        };
        let port = self.port(i);
        match &reply {
            Reply::Ready => port.set_ready(),
            Reply::WarmUpLayout(_) => self.spare(),
            Reply::Loaded { id, .. } => {
                if let Some(f) = port.files.borrow_mut().get_mut(id) {
                    f.1 = true;
                }
                let again = port.reopened(*id);
                if port.ended(*id) {
                    self.pump();
                }
                if again {
                    // Opened again in a new worker: the page has it already.
                    return;
                }
            }
            Reply::TooLarge { id, .. } => {
                // Kept, for the page to open part of it (`Pool::take_refused`).
                if let Some((job, _)) = port.files.borrow_mut().remove(id) {
                    self.refused.borrow_mut().insert(*id, job);
                }
                port.reopened(*id);
                if port.ended(*id) {
                    self.retire(i);
                    self.pump();
                }
            }
            Reply::Failed { id, .. } => {
                port.files.borrow_mut().remove(id);
                port.reopened(*id);
                if port.ended(*id) {
                    self.retire(i);
                    self.pump();
                }
            }
            _ => {}
        }
        (self.hooks.reply)(reply);
    }

    /// Once the first worker is warm and the page idle, a second worker starts (when the cap
    /// allows), so that files chosen together do not wait for a worker's start: its wasm
    /// compile and warm-up, about as long as a small file's whole decode.
    fn spare(&self) {
        let idle = self.jobs.borrow().is_empty()
            && self
                .ports
                .borrow()
                .iter()
                .all(|p| p.decoding.get().is_none());
        if idle && self.workers() == 1 && self.cap > 1 {
            match self.spawn() {
                Ok(i) => self.port(i).send(&ToWorker::WarmUp, &[]),
                Err(e) => web_sys::console::error_1(&e.into()),
            }
        }
    }

    /// Port `i`'s worker died: the file it was decoding fails, a new worker starts in its
    /// place, and the files it had loaded are opened again there.
    fn restart(&self, i: usize, why: &str) {
        web_sys::console::warn_1(&format!("memlens: decoding worker {i} died: {why}").into());
        let port = self.port(i);
        let mut failed = Vec::new();
        port.files.borrow_mut().retain(|&id, (_, loaded)| {
            if !*loaded {
                failed.push(id);
            }
            *loaded
        });
        let reopened = self.replace(i);
        let why = why.to_string();
        (self.hooks.death)(Death {
            why,
            failed,
            reopened,
        });
        self.pump();
    }

    /// Port `i`'s worker ended a file it could not open: when it holds no other file, a fresh
    /// worker takes its place (warming up when no file waits), giving back the memory that file
    /// made it grow to.
    fn retire(&self, i: usize) {
        let port = self.port(i);
        if port.files.borrow().is_empty() && port.decoding.get().is_none() {
            self.replace(i);
            // nothing waits for it: it warms up meanwhile
            if self.jobs.borrow().is_empty() {
                port.send(&ToWorker::WarmUp, &[]);
            }
        }
    }

    /// Terminates port `i`'s worker and starts a new one in its place, opening there again the
    /// files it holds (returned).
    fn replace(&self, i: usize) -> Vec<u32> {
        let port = self.port(i);
        port.worker.borrow().terminate();
        port.listeners.borrow_mut().clear();
        port.decoding.set(None);
        port.ready.set(false);
        // The new worker holds nothing until told (the pump below tells it).
        port.background_held.set(false);
        port.queue.borrow_mut().clear();
        port.held.borrow_mut().clear();
        port.reopening.borrow_mut().clear();
        let mut reopened = Vec::new();
        match (self.start)() {
            Ok((worker, _)) => {
                *port.worker.borrow_mut() = worker.clone();
                self.attach(i, &worker);
                let again: Vec<Job> = port.files.borrow_mut().drain().map(|(_, f)| f.0).collect();
                for job in again {
                    reopened.push(job.id);
                    port.reopening.borrow_mut().insert(job.id);
                    port.open(job);
                }
            }
            Err(e) => web_sys::console::error_1(&e.into()),
        }
        reopened
    }

    /// Hands waiting jobs to workers decoding nothing (one holding no file first), starting
    /// workers up to the cap; then tells each worker whether to hold its background work
    /// ([`Pool::balance`]).
    fn pump(&self) {
        self.assign();
        self.balance();
    }

    /// Whether every worker holds the work it does unasked after a load, whatever the others
    /// do (the page's view waits for something else first).
    pub fn hold_background(&self, hold: bool) {
        self.page_holds.set(hold);
        self.balance();
    }

    /// A worker holds the work it does unasked after a load while another worker is decoding,
    /// or while the page holds it (`ToWorker::Background`): on few cores that work would slow
    /// the other file's decode, and files opened together (the Compare view's two) are shown
    /// when the last is ready.
    fn balance(&self) {
        let ports = self.ports.borrow();
        let decoding = ports.iter().filter(|p| p.decoding.get().is_some()).count();
        for p in ports.iter() {
            let others = decoding - usize::from(p.decoding.get().is_some());
            let hold = others > 0 || self.page_holds.get();
            if p.background_held.replace(hold) != hold {
                p.send(&ToWorker::Background { hold }, &[]);
            }
        }
    }

    fn assign(&self) {
        loop {
            if self.jobs.borrow().is_empty() {
                return;
            }
            let idle = {
                let ports = self.ports.borrow();
                let free = |p: &&Rc<Port>| p.decoding.get().is_none();
                // one holding no file first: a file that fails there takes no other with it
                ports
                    .iter()
                    .position(|p| free(&p) && p.files.borrow().is_empty())
                    .or_else(|| ports.iter().position(|p| free(&p)))
            };
            let i = match idle {
                Some(i) => i,
                None if self.workers() < self.cap => match self.spawn() {
                    Ok(i) => i,
                    Err(e) => {
                        web_sys::console::error_1(&e.into());
                        return;
                    }
                },
                None => return,
            };
            let Some(job) = self.jobs.borrow_mut().pop_front() else {
                return;
            };
            self.of_file.borrow_mut().insert(job.id, i);
            let port = self.port(i);
            port.decoding.set(Some(job.id));
            port.open(job);
        }
    }

    /// The job of a file refused for its size (once; the older ones are let go).
    pub fn take_refused(&self, id: u32) -> Option<Job> {
        let mut refused = self.refused.borrow_mut();
        let job = refused.remove(&id);
        refused.clear();
        job
    }

    /// Queues a file to decode.
    pub fn open(&self, job: Job) {
        self.jobs.borrow_mut().push_back(job);
        self.pump();
    }

    /// Sends a request to the worker of the file it names (the first worker when the file is
    /// unknown: it answers for a file it does not have as for any other).
    pub fn send(&self, msg: &ToWorker, extra: &[(&str, JsValue)]) {
        if let ToWorker::Cancel { id } | ToWorker::Close { id } = msg {
            if self.forget(*id) {
                return;
            }
        }
        let i = msg
            .file()
            .and_then(|f| self.of_file.borrow().get(&f).copied())
            .unwrap_or(0);
        self.port(i).send(msg, extra);
    }

    /// The page has no file to open: the first worker warms up (its `WarmUpLayout` then starts
    /// the spare, [`Pool::spare`]).
    pub fn warm_up(&self) {
        self.port(0).send(&ToWorker::WarmUp, &[]);
    }

    /// Drops a file from the pool; whether it was still waiting for a worker (then no worker
    /// has heard of it).
    fn forget(&self, id: u32) -> bool {
        let mut jobs = self.jobs.borrow_mut();
        let waiting = jobs.len();
        jobs.retain(|j| j.id != id);
        if jobs.len() < waiting {
            return true;
        }
        drop(jobs);
        let Some(&i) = self.of_file.borrow().get(&id) else {
            return false;
        };
        let port = self.port(i);
        port.files.borrow_mut().remove(&id);
        if port.ended(id) {
            self.pump();
        }
        false
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for p in self.ports.borrow().iter() {
            p.listeners.borrow_mut().clear();
            p.worker.borrow().terminate();
        }
    }
}
