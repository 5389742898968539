//! The page's one state and its reducer: open files, the selected file/device/view, the visible
//! window, the pinned allocation, layouts received from the worker, and the URL hash that
//! mirrors the view (`#file=..&device=..&view=..&x0=..&x1=..`, `&event=..` in the Allocator State
//! History).

use crate::page::compare_state::{CompareAction, CompareState};
use crate::page::view_options::TimelineOptions;
use crate::wire::history::{element_of_event, EventColumns, Shared, StateFrame};
use crate::wire::protocol::CompareSide;
use crate::wire::protocol::{FileInfo, PartialInfo, TooLarge};
use memlens_core::analysis::compare::Between;
use memlens_core::analysis::icicle::Icicle;
use memlens_core::analysis::DeviceDiagnosis;
use memlens_core::colour::{ColourBy, Colouring};
use memlens_core::layout::context::ElementContext;
use memlens_core::layout::{Matches, TimelineKind, TimelineLayout};
pub use memlens_core::view::View;
use std::collections::HashMap;
use std::rc::Rc;
use yew::Reducible;

/// View state as the URL hash holds it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HashState {
    pub file: Option<String>,
    pub device: Option<u32>,
    pub view: Option<View>,
    pub x0: Option<f64>,
    pub x1: Option<f64>,
    /// Allocator State History: the device-local trace entry whose state is shown.
    pub event: Option<u32>,
    /// Timelines: x axis in wall-clock time (`axis=time`) instead of event index.
    pub time_axis: bool,
    /// Compare view: file A (`a=`); B is `file`.
    pub compare_a: Option<String>,
    /// Timelines: colour mode, lines, filters (`crate::page::view_options`).
    pub opts: TimelineOptions,
    /// Files are opened in part (`range=last:1000`, `range=100..900`: `memlens_core::range`).
    pub range: Option<String>,
    /// Compare view: A's device (`adevice=`); B's is `device`.
    pub compare_a_device: Option<u32>,
}

fn decode_component(s: &str) -> String {
    js_sys::decode_uri_component(s)
        .ok()
        .and_then(|v| v.as_string())
        .unwrap_or_else(|| s.to_string())
}

fn encode_component(s: &str) -> String {
    js_sys::encode_uri_component(s)
        .as_string()
        .unwrap_or_default()
}

impl HashState {
    /// Parses `#file=a.pickle&device=0&view=timeline&x0=10&x1=200` (unknown keys ignored).
    pub fn parse(hash: &str) -> HashState {
        let mut h = HashState::default();
        for kv in hash.trim_start_matches('#').split('&') {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            match k {
                "file" if !v.is_empty() => h.file = Some(decode_component(v)),
                "device" => h.device = v.parse().ok(),
                "view" => h.view = View::from_key(v),
                "x0" => h.x0 = v.parse().ok().filter(|x: &f64| x.is_finite()),
                "x1" => h.x1 = v.parse().ok().filter(|x: &f64| x.is_finite()),
                "event" => h.event = v.parse().ok(),
                "axis" => h.time_axis = v == "time",
                "a" if !v.is_empty() => h.compare_a = Some(decode_component(v)),
                "range" if !v.is_empty() => h.range = Some(decode_component(v)),
                "adevice" => h.compare_a_device = v.parse().ok(),
                _ => {
                    h.opts.parse_pair(k, &decode_component(v));
                }
            }
        }
        h
    }

    pub fn format(&self) -> String {
        let mut parts = Vec::new();
        if let Some(f) = &self.file {
            parts.push(format!("file={}", encode_component(f)));
        }
        if let Some(d) = self.device {
            parts.push(format!("device={d}"));
        }
        if let Some(v) = self.view {
            parts.push(format!("view={}", v.key()));
        }
        if let Some(e) = self.event {
            parts.push(format!("event={e}"));
        }
        if let (Some(a), Some(b)) = (self.x0, self.x1) {
            parts.push(format!("x0={}&x1={}", round2(a), round2(b)));
        }
        if self.time_axis {
            parts.push("axis=time".to_string());
        }
        if let Some(a) = &self.compare_a {
            parts.push(format!("a={}", encode_component(a)));
        }
        parts.extend(self.opts.hash_parts());
        if let Some(r) = &self.range {
            parts.push(format!("range={}", encode_component(r)));
        }
        if let Some(d) = self.compare_a_device {
            parts.push(format!("adevice={d}"));
        }
        format!("#{}", parts.join("&"))
    }

    pub fn is_empty(&self) -> bool {
        *self == HashState::default()
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[derive(Debug, Clone, PartialEq)]
pub enum FileStatus {
    Loading { done: f64, total: f64 },
    Ready(Rc<FileInfo>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct FileEntry {
    pub id: u32,
    pub name: String,
    pub status: FileStatus,
    /// `performance.now()` when the user chose the file.
    pub opened_ms: f64,
    /// Milliseconds from choosing the file to its first painted timeline.
    pub first_paint_ms: Option<f64>,
    /// Milliseconds from choosing the file to the first timeline painted from the exact layout
    /// (later than `first_paint_ms` when a preview came first).
    pub exact_paint_ms: Option<f64>,
    /// The latest picture of the trace read so far, until the file's own layout arrives.
    pub partial: Option<PartialPicture>,
    /// Milliseconds from choosing the file to its first painted picture of the trace so far.
    pub partial_paint_ms: Option<f64>,
}

/// What the worker sent about a file while reading it (`crate::worker::partial`).
#[derive(Debug, Clone, PartialEq)]
pub struct PartialPicture {
    pub info: Rc<PartialInfo>,
    /// The layout of `info.device`'s trace so far.
    pub layout: Option<SharedLayout>,
}

/// Identifies a layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LayoutKey {
    /// File id.
    pub file: u32,
    pub device: u32,
    pub kind: TimelineKind,
}

/// A layout shared with the canvas; compared by identity.
#[derive(Debug, Clone)]
pub struct SharedLayout(pub Rc<TimelineLayout>);

impl PartialEq for SharedLayout {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

/// Search matches shared with the canvas; compared by identity.
#[derive(Debug, Clone)]
pub struct SharedMatches(pub Rc<Matches>);

impl PartialEq for SharedMatches {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

/// A device's diagnosis shared with its view; compared by identity.
#[derive(Debug, Clone)]
pub struct SharedDiagnosis {
    pub diagnosis: Rc<DeviceDiagnosis>,
    /// Worker time to compute it.
    pub build_ms: f64,
    /// `performance.now()` when the page received it.
    pub received_ms: f64,
}

impl PartialEq for SharedDiagnosis {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.diagnosis, &other.diagnosis)
    }
}

/// Which icicle: (file, device) after `event`, inverted for `callers_of` if set, with the path
/// of element `mark`'s allocation through it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IcicleKey {
    pub file: u32,
    pub device: u32,
    pub event: Option<u32>,
    pub callers_of: Option<String>,
    pub mark: Option<u32>,
}

/// A band pinned on the Active Memory Timeline of (file, device), whose allocation's stack the
/// Diagnosis view's icicle outlines (the reverse of a frame opening its bands).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlameMark {
    pub file: u32,
    pub device: u32,
    pub element: u32,
}

/// Live memory at a moment as an icicle, for (file, device); compared by identity.
#[derive(Debug, Clone)]
pub struct SharedIcicle {
    pub file: u32,
    pub device: u32,
    /// Inverted for this frame.
    pub callers_of: Option<String>,
    /// The element marked, and its allocation's path through the icicle, root first.
    pub mark: Option<u32>,
    pub mark_path: Option<Rc<Vec<String>>>,
    pub icicle: Rc<Icicle>,
}

impl SharedIcicle {
    /// What it answers.
    pub fn key(&self) -> IcicleKey {
        IcicleKey {
            file: self.file,
            device: self.device,
            event: self.icicle.event,
            callers_of: self.callers_of.clone(),
            mark: self.mark,
        }
    }
}

impl PartialEq for SharedIcicle {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.icicle, &other.icicle)
    }
}

/// The answer to the latest query for a layout.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutcome {
    pub key: LayoutKey,
    pub seq: u32,
    pub count: u32,
    pub error: Option<String>,
    /// `None` with an error (or before the layout arrived).
    pub matches: Option<SharedMatches>,
    pub search_ms: f64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppState {
    pub files: Vec<FileEntry>,
    pub current: Option<u32>,
    pub device: Option<u32>,
    pub view: Option<View>,
    pub window: Option<(f64, f64)>,
    pub selected: Option<u32>,
    pub full_stack: bool,
    pub error: Option<String>,
    pub layouts: HashMap<LayoutKey, SharedLayout>,
    /// Stack panel contents for (layout, element, full).
    pub context: Option<(LayoutKey, u32, bool, Option<ElementContext>)>,
    /// Hash state naming a file that is not open yet.
    pub pending_hash: Option<HashState>,
    /// Allocator State History: the selected trace entry (`None`: the last one).
    pub event: Option<u32>,
    /// Allocator State History: list columns by (file id, device).
    pub state_events: HashMap<(u32, u32), Shared<EventColumns>>,
    /// Allocator State History: the latest state the worker sent (any file or device).
    pub state_frame: Option<Shared<StateFrame>>,
    /// Timelines: the search boxes (address, frame) and the query's sequence number.
    pub search_text: (String, String),
    pub search_seq: u32,
    /// The answer to the latest query (`crate::page::search`).
    pub search: Option<SearchOutcome>,
    /// Timelines: x axis in wall-clock time.
    pub time_axis: bool,
    /// Diagnoses by (file id, device).
    pub diagnoses: HashMap<(u32, u32), SharedDiagnosis>,
    /// Diagnosis: the moment its icicle shows (`None`: the peak).
    pub moment: Option<u32>,
    /// The latest icicle the worker sent.
    pub icicle: Option<SharedIcicle>,
    /// Diagnosis: the icicle inverted for this frame (its callers), if asked.
    pub callers_of: Option<String>,
    /// Diagnosis: the band pinned on the timeline before it opened, outlined in its icicle.
    pub flame_mark: Option<FlameMark>,
    /// Timelines: what grew inside the zoomed window, for (file), latest reply.
    pub between: Option<(u32, Rc<Between>)>,
    /// Compare view: A, the answers, the cursor and the highlight (B is the current file and
    /// device; its window, in shared-axis units, is `window`).
    pub compare: CompareState,
    /// Timelines: colour mode, lines, filters.
    pub opts: TimelineOptions,
    /// The latest colouring the worker sent, for (layout, mode).
    pub colouring: Option<(LayoutKey, ColourBy, Rc<Colouring>)>,
    /// The part of each trace files are opened with (the hash's `range=`).
    pub range: Option<String>,
    /// The last file refused for its size, with its name: the page offers part of it.
    pub too_large: Option<(u32, String, TooLarge)>,
}

pub enum Action {
    /// `size_bytes`: 0 when not known yet (a URL).
    Opened {
        id: u32,
        name: String,
        at_ms: f64,
        size_bytes: f64,
    },
    Progress {
        id: u32,
        done: f64,
        total: f64,
    },
    Loaded {
        id: u32,
        info: FileInfo,
    },
    /// A picture of the trace read so far (layout: of `info.device`).
    Partial {
        id: u32,
        info: PartialInfo,
        layout: Option<Rc<TimelineLayout>>,
    },
    /// File `id`'s picture of the trace so far was painted.
    PartialPaint {
        id: u32,
        ms: f64,
    },
    Failed {
        id: u32,
        message: String,
    },
    /// File `id` was refused for its size (`crate::worker::limit`).
    TooLarge {
        id: u32,
        offer: TooLarge,
    },
    /// Files open with this part of each trace from now on (the refused file's part chosen).
    SetRange(String),
    DismissTooLarge,
    Cancelled {
        id: u32,
    },
    Layout {
        key: LayoutKey,
        layout: Rc<TimelineLayout>,
    },
    Context {
        key: LayoutKey,
        elem: u32,
        full: bool,
        ctx: Option<ElementContext>,
    },
    FirstPaint {
        id: u32,
        ms: f64,
    },
    ExactPaint {
        id: u32,
        ms: f64,
    },
    SelectFile(u32),
    SelectDevice(u32),
    SelectView(View),
    SetWindow(f64, f64),
    ResetWindow,
    Pin(Option<u32>),
    ToggleFullStack,
    DismissError,
    ApplyHash(HashState),
    /// Allocator State History: list columns arrived.
    StateEvents(Shared<EventColumns>),
    /// Allocator State History: a state arrived.
    StateFrame(Shared<StateFrame>),
    /// Allocator State History: show the state after this entry (and pin its allocation).
    SelectEvent(u32),
    /// Allocator State History: pin the allocation of the block at this address.
    PinBlock(u64),
    /// Timelines: the search boxes changed.
    SetSearch {
        address: String,
        frame: String,
    },
    /// Timelines: the worker answered a search.
    SearchResult(SearchAnswer),
    /// Timelines: x axis in wall-clock time (true) or event index.
    SetTimeAxis(bool),
    /// A device's diagnosis arrived.
    Diagnosis {
        file: u32,
        device: u32,
        diagnosis: SharedDiagnosis,
    },
    /// Show the Active Memory Timeline with the bands of this frame (`file:line:name`)
    /// highlighted by the frame search.
    ShowFrame(String),
    /// Show the Allocator State History after this trace entry.
    OpenEvent(u32),
    /// Diagnosis: show live memory after this entry (`None`: at the peak).
    PickMoment(Option<u32>),
    /// Open the Diagnosis view with live memory after this entry (the pinned band's stack
    /// outlined in it).
    ShowMoment(u32),
    /// Compare view: pick side A (`true`) or B.
    PickCompare(bool, CompareSide),
    /// Compare view: its own state (answers, cursor, highlight).
    Compare(CompareAction),
    /// Timelines: what grew between the window's ends arrived.
    Between(u32, Rc<Between>),
    /// Overview: open this file and device on the Active Memory Timeline.
    OpenFileDevice(u32, u32),
    /// Diagnosis: invert the icicle for this frame (`None`: back to all frames).
    ShowCallers(Option<String>),
    Icicle(SharedIcicle),
    /// Timelines: the display options changed.
    SetOptions(TimelineOptions),
    /// Timelines: the worker coloured layout `key` by `by` (`None`: the file is gone).
    Colouring {
        key: LayoutKey,
        by: ColourBy,
        colouring: Option<Rc<Colouring>>,
    },
}

/// The worker's answer to search query `seq` for layout `key`.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchAnswer {
    pub key: LayoutKey,
    pub seq: u32,
    pub count: u32,
    pub error: Option<String>,
    /// The matches bitset (`None` with an error).
    pub bits: Option<Vec<u64>>,
    pub search_ms: f64,
}

impl AppState {
    pub fn view(&self) -> View {
        self.view.unwrap_or(View::Timeline)
    }

    pub fn file(&self, id: u32) -> Option<&FileEntry> {
        self.files.iter().find(|f| f.id == id)
    }

    pub fn current_file(&self) -> Option<&FileEntry> {
        self.current.and_then(|id| self.file(id))
    }

    pub fn current_info(&self) -> Option<&Rc<FileInfo>> {
        match &self.current_file()?.status {
            FileStatus::Ready(i) => Some(i),
            _ => None,
        }
    }

    /// The layout the current view draws, if it has arrived.
    pub fn layout_key(&self) -> Option<LayoutKey> {
        let info = self.current_info()?;
        let device = self.device.or(info.default_device)?;
        Some(LayoutKey {
            file: self.current?,
            device,
            kind: self.view().kind()?,
        })
    }

    pub fn current_layout(&self) -> Option<&SharedLayout> {
        self.layouts.get(&self.layout_key()?)
    }

    /// The layout whose elements `selected` and `context` refer to: the view's own, or the
    /// Active Memory Timeline's in the Allocator State History (so a pin survives switching).
    pub fn element_key(&self) -> Option<LayoutKey> {
        if self.view() != View::State {
            return self.layout_key();
        }
        let info = self.current_info()?;
        let device = self.device.or(info.default_device)?;
        Some(LayoutKey {
            file: self.current?,
            device,
            kind: TimelineKind::Active,
        })
    }

    /// The current file and device's diagnosis, if it arrived.
    pub fn current_diagnosis(&self) -> Option<&SharedDiagnosis> {
        let info = self.current_info()?;
        let device = self.device.or(info.default_device)?;
        self.diagnoses.get(&(self.current?, device))
    }

    /// The event the Diagnosis view's icicle should show, once the diagnosis is in: the picked
    /// moment, else the peak (`Some(None)`: before the first event).
    pub fn wanted_icicle(&self) -> Option<IcicleKey> {
        let d = self.current_diagnosis()?;
        let file = self.current?;
        Some(IcicleKey {
            file,
            device: d.diagnosis.device,
            event: self.moment.or(d.diagnosis.peak.event),
            callers_of: self.callers_of.clone(),
            mark: self
                .flame_mark
                .filter(|m| (m.file, m.device) == (file, d.diagnosis.device))
                .map(|m| m.element),
        })
    }

    /// The sides the Compare view compares: B = the current file and device, A = the pick,
    /// else the default device of the ready file opened before B (or after, when B is the
    /// first), else another device of B's file.
    pub fn compare_pair(&self) -> Option<(CompareSide, CompareSide)> {
        let ready: Vec<(u32, &FileInfo)> = self
            .files
            .iter()
            .filter_map(|f| match &f.status {
                FileStatus::Ready(i) => Some((f.id, i.as_ref())),
                _ => None,
            })
            .collect();
        let has = |s: &CompareSide| {
            ready
                .iter()
                .any(|(id, i)| *id == s.file && i.devices.iter().any(|d| d.device == s.device))
        };
        let b_info = ready.iter().find(|(id, _)| Some(*id) == self.current)?.1;
        let b = CompareSide {
            file: self.current?,
            device: self.device.or(b_info.default_device)?,
        };
        let default_side = |(id, i): &(u32, &FileInfo)| {
            i.default_device
                .map(|device| CompareSide { file: *id, device })
        };
        let other_file = ready
            .iter()
            .rev()
            .find(|(id, _)| *id < b.file)
            .or(ready.iter().find(|(id, _)| *id != b.file))
            .and_then(default_side);
        let other_device = b_info
            .devices
            .iter()
            .find(|d| d.device != b.device)
            .map(|d| CompareSide {
                file: b.file,
                device: d.device,
            });
        let a = self
            .compare
            .pick_a
            .filter(|x| has(x) && *x != b)
            .or(other_file)
            .or(other_device)?;
        (a != b).then_some((a, b))
    }

    /// The events the zoomed window spans on an event-index axis, `(file, device, from, to)`.
    pub fn wanted_between(&self) -> Option<(u32, u32, u32, u32)> {
        let (a, b) = self.window?;
        if self.time_axis || self.view() != View::Timeline {
            return None;
        }
        let k = self.layout_key()?;
        let n = self
            .current_info()?
            .devices
            .iter()
            .find(|d| d.device == k.device)?
            .trace_entries;
        let last = n.checked_sub(1)? as f64;
        let (from, to) = (
            a.floor().clamp(0.0, last) as u32,
            b.floor().clamp(0.0, last) as u32,
        );
        (to > from).then_some((k.file, k.device, from, to))
    }

    /// The state view's list columns for the current file and device, if they arrived.
    pub fn current_events(&self) -> Option<&Shared<EventColumns>> {
        let info = self.current_info()?;
        let device = self.device.or(info.default_device)?;
        self.state_events.get(&(self.current?, device))
    }

    /// Shows the state after entry `i` and pins the allocation that entry allocates or frees.
    fn select_event(&mut self, i: u32) {
        self.event = Some(i);
        let layout = self
            .element_key()
            .filter(|k| k.kind == TimelineKind::Active)
            .and_then(|k| self.layouts.get(&k));
        let el = match (layout, self.current_events()) {
            (Some(l), Some(ev)) => element_of_event(&l.0, ev, i),
            _ => return,
        };
        if el != self.selected {
            self.selected = el;
            self.context = None;
        }
    }

    /// `empty | loading | ready | error` for the root's `data-state`.
    pub fn page_state(&self) -> &'static str {
        match self.current_file().map(|f| &f.status) {
            Some(FileStatus::Ready(_)) => "ready",
            Some(FileStatus::Loading { .. }) => "loading",
            None if self.error.is_some() => "error",
            None => "empty",
        }
    }

    /// The hash that describes what is shown.
    pub fn hash(&self) -> HashState {
        let Some(f) = self.current_file() else {
            return HashState::default();
        };
        if !matches!(f.status, FileStatus::Ready(_)) {
            return HashState::default();
        }
        HashState {
            file: Some(f.name.clone()),
            device: self.device,
            view: Some(self.view()),
            x0: self.window.map(|w| w.0),
            x1: self.window.map(|w| w.1),
            event: self.event.filter(|_| self.view() == View::State),
            time_axis: self.time_axis,
            compare_a: self
                .compare_pair()
                .filter(|_| self.view() == View::Compare)
                .and_then(|(a, _)| self.file(a.file))
                .map(|f| f.name.clone()),
            opts: self.opts,
            range: self.range.clone(),
            compare_a_device: self
                .compare_pair()
                .filter(|_| self.view() == View::Compare)
                .map(|(a, _)| a.device),
        }
    }

    /// The colouring to draw the current layout with (`None`: upstream's, or not arrived).
    pub fn current_colouring(&self) -> Option<&Rc<Colouring>> {
        let (k, by, c) = self.colouring.as_ref()?;
        (Some(*k) == self.layout_key() && *by == self.opts.colour_by).then_some(c)
    }

    fn last_ready(&self) -> Option<u32> {
        self.files
            .iter()
            .rev()
            .find(|f| matches!(f.status, FileStatus::Ready(_)))
            .map(|f| f.id)
    }

    fn reset_view_of_file(&mut self) {
        self.moment = None;
        self.callers_of = None;
        self.flame_mark = None;
        self.window = None;
        self.selected = None;
        self.context = None;
        self.event = None;
        self.device = self.current_info().and_then(|i| i.default_device);
    }

    /// Applies a hash: switch to the named file if it is open (else remember it), then device,
    /// view and window.
    fn apply_hash(&mut self, h: HashState) {
        self.range = h.range.clone();
        if let Some(name) = &h.file {
            let found = self
                .files
                .iter()
                .find(|f| &f.name == name && matches!(f.status, FileStatus::Ready(_)))
                .map(|f| f.id);
            match found {
                Some(id) if Some(id) != self.current => {
                    self.current = Some(id);
                    self.reset_view_of_file();
                }
                Some(_) => {}
                None => {
                    self.pending_hash = Some(h);
                    return;
                }
            }
        }
        if let Some(d) = h.device {
            if self
                .current_info()
                .is_some_and(|i| i.devices.iter().any(|x| x.device == d))
                && self.device != Some(d)
            {
                self.device = Some(d);
                self.selected = None;
                self.context = None;
                self.event = None;
            }
        }
        if let Some(v) = h.view {
            self.view = Some(v);
        }
        if let Some(e) = h.event.filter(|_| self.view() == View::State) {
            if self.event != Some(e) {
                self.select_event(e);
            }
        }
        self.window = match (h.x0, h.x1) {
            (Some(a), Some(b)) if b > a => Some((a, b)),
            _ => None,
        };
        self.time_axis = h.time_axis;
        self.opts = h.opts;
        if let Some(a) = &h.compare_a {
            let id = self
                .files
                .iter()
                .find(|f| &f.name == a && matches!(f.status, FileStatus::Ready(_)))
                .map(|f| f.id);
            if let Some(file) = id {
                let device = h
                    .compare_a_device
                    .or(self.file(file).and_then(|f| match &f.status {
                        FileStatus::Ready(i) => i.default_device,
                        _ => None,
                    }));
                self.compare.pick_a = device.map(|device| CompareSide { file, device });
            }
        }
        self.pending_hash = None;
    }
}

impl Reducible for AppState {
    type Action = Action;

    fn reduce(self: Rc<Self>, action: Action) -> Rc<Self> {
        let mut s = (*self).clone();
        if s.apply(action) {
            Rc::new(s)
        } else {
            self
        }
    }
}

impl AppState {
    /// Applies `action`; false when it changes nothing (the page keeps the same state and does
    /// not render again).
    fn apply(&mut self, action: Action) -> bool {
        match action {
            Action::Opened {
                id,
                name,
                at_ms,
                size_bytes,
            } => self.opened(id, name, at_ms, size_bytes),
            Action::Progress { id, done, total } => self.progress(id, done, total),
            Action::Loaded { id, info } => return self.loaded(id, info),
            Action::Partial { id, info, layout } => return self.partial(id, info, layout),
            Action::PartialPaint { id, ms } => return self.partial_painted(id, ms),
            Action::Failed { id, message } => self.failed(id, message),
            Action::TooLarge { id, offer } => self.refused(id, offer),
            Action::SetRange(r) => {
                self.range = Some(r);
                self.too_large = None;
            }
            Action::DismissTooLarge => self.too_large = None,
            Action::Cancelled { id } => self.cancelled(id),
            Action::Layout { key, layout } => {
                self.layouts.insert(key, SharedLayout(layout));
                // The file's own layout replaces the picture of its trace so far.
                if let Some(f) = self.files.iter_mut().find(|f| f.id == key.file) {
                    f.partial = None;
                }
            }
            Action::Context {
                key,
                elem,
                full,
                ctx,
            } => {
                if self.element_key() == Some(key) && self.selected == Some(elem) {
                    self.context = Some((key, elem, full, ctx));
                }
            }
            Action::FirstPaint { id, ms } => return self.painted(id, ms, false),
            Action::ExactPaint { id, ms } => return self.painted(id, ms, true),
            Action::SelectFile(id) => self.switch_file(id),
            Action::SelectDevice(d) => self.select_device(d),
            Action::SelectView(v) => self.select_view(v),
            Action::SetWindow(a, b) => {
                if b > a && a.is_finite() && b.is_finite() {
                    self.window = Some((a, b));
                }
            }
            Action::ResetWindow => self.window = None,
            Action::Pin(e) => {
                self.selected = e;
                self.context = None;
            }
            Action::ToggleFullStack => {
                self.full_stack = !self.full_stack;
                self.context = None;
            }
            Action::DismissError => self.error = None,
            Action::StateEvents(ev) => self.state_events_arrived(ev),
            Action::StateFrame(f) => self.state_frame = Some(f),
            Action::SelectEvent(i) => self.select_event(i),
            Action::PinBlock(addr) => self.pin_block(addr),
            Action::ApplyHash(h) => {
                if h != self.hash() {
                    self.apply_hash(h);
                }
            }
            Action::SetSearch { address, frame } => self.set_search(address, frame),
            Action::SearchResult(a) => return self.search_result(a),
            Action::SetTimeAxis(t) => self.time_axis = t,
            Action::Diagnosis {
                file,
                device,
                diagnosis,
            } => {
                self.diagnoses.insert((file, device), diagnosis);
            }
            Action::ShowFrame(frame) => self.show_frame(frame),
            Action::PickMoment(e) => self.moment = e,
            Action::ShowCallers(f) => self.callers_of = f,
            Action::Between(f, b) => self.between = Some((f, b)),
            Action::PickCompare(a_side, side) => self.pick_compare(a_side, side),
            Action::Compare(a) => self.compare.apply(a),
            Action::OpenFileDevice(f, d) => {
                self.switch_file(f);
                self.device = Some(d);
                self.open_view(View::Timeline);
            }
            Action::ShowMoment(e) => {
                self.mark_pinned_band();
                self.view = Some(View::Diagnosis);
                self.window = None;
                self.moment = Some(e);
            }
            Action::Icicle(i) => self.icicle = Some(i),
            Action::SetOptions(o) => {
                if o.regex != self.opts.regex {
                    self.search_seq = self.search_seq.wrapping_add(1);
                }
                self.opts = o;
            }
            Action::Colouring { key, by, colouring } => {
                self.colouring = colouring.map(|c| (key, by, c));
            }
            Action::OpenEvent(e) => {
                self.open_view(View::State);
                self.select_event(e);
            }
        }
        true
    }

    /// Shows `view` from its start, nothing pinned.
    fn open_view(&mut self, view: View) {
        self.view = Some(view);
        self.whole_and_unpinned();
    }

    /// The whole trace in the window, nothing pinned.
    fn whole_and_unpinned(&mut self) {
        self.window = None;
        self.selected = None;
        self.context = None;
    }

    /// Makes file `id` the current one (its view starts over) unless it is already.
    fn switch_file(&mut self, id: u32) {
        if self.current != Some(id) {
            self.current = Some(id);
            self.reset_view_of_file();
        }
    }

    /// A file the user chose begins loading; it becomes the current one.
    fn opened(&mut self, id: u32, name: String, at_ms: f64, size_bytes: f64) {
        self.files.push(FileEntry {
            id,
            name,
            status: FileStatus::Loading {
                done: 0.0,
                total: size_bytes,
            },
            opened_ms: at_ms,
            first_paint_ms: None,
            exact_paint_ms: None,
            partial: None,
            partial_paint_ms: None,
        });
        self.current = Some(id);
        self.error = None;
        // The window and device set while it loads are this file's (its picture so far).
        self.window = None;
        self.device = None;
        self.too_large = None;
        self.selected = None;
        self.context = None;
    }

    /// A picture of file `id`'s trace so far, while it loads (false: not loading any more).
    fn partial(&mut self, id: u32, info: PartialInfo, layout: Option<Rc<TimelineLayout>>) -> bool {
        let Some(f) = self.files.iter_mut().find(|f| f.id == id) else {
            return false;
        };
        if !matches!(f.status, FileStatus::Loading { .. }) {
            return false;
        }
        f.partial = Some(PartialPicture {
            info: Rc::new(info),
            layout: layout.map(SharedLayout),
        });
        true
    }

    /// Records the first paint of file `id`'s picture so far, once.
    fn partial_painted(&mut self, id: u32, ms: f64) -> bool {
        match self.files.iter_mut().find(|f| f.id == id) {
            Some(f) if f.partial_paint_ms.is_none() => {
                f.partial_paint_ms = Some(ms);
                true
            }
            _ => false,
        }
    }

    /// The picture of the current file's trace so far that the timeline draws while the file
    /// loads, and after, until the file's own layout arrives (the Active Memory Timeline of
    /// the device it shows).
    pub fn partial_picture(&self) -> Option<(SharedLayout, Rc<PartialInfo>)> {
        if self.view() != View::Timeline || self.current_layout().is_some() {
            return None;
        }
        let p = self.current_file()?.partial.as_ref()?;
        let device = p.info.device?;
        let shown = self
            .device
            .or(self.current_info().and_then(|i| i.default_device));
        if shown.is_some_and(|d| d != device) {
            return None;
        }
        Some((p.layout.clone()?, p.info.clone()))
    }

    fn progress(&mut self, id: u32, done: f64, total: f64) {
        if let Some(f) = self.files.iter_mut().find(|f| f.id == id) {
            if matches!(f.status, FileStatus::Loading { .. }) {
                f.status = FileStatus::Loading { done, total };
            }
        }
    }

    /// File `id` is read: its view starts, and a hash waiting for it applies.
    fn loaded(&mut self, id: u32, info: FileInfo) -> bool {
        let Some(f) = self.files.iter_mut().find(|f| f.id == id) else {
            return false;
        };
        // A window chosen on the picture of the trace so far stays (x is the same event index
        // in both), if the file opens on the device that picture showed.
        let drawn = f.partial.as_ref().and_then(|p| p.info.device);
        let keep = drawn.is_some() && drawn == info.default_device;
        f.status = FileStatus::Ready(Rc::new(info));
        let name = f.name.clone();
        let window = self.window.filter(|_| keep && self.current == Some(id));
        if self.current == Some(id) {
            self.reset_view_of_file();
        }
        if let Some(h) = self.pending_hash.clone() {
            if h.file.as_deref().is_none_or(|n| n == name) {
                self.apply_hash(h);
            }
        }
        if self.window.is_none() {
            self.window = window;
        }
        true
    }

    /// File `id` could not be read: it goes, and the error names it.
    fn failed(&mut self, id: u32, message: String) {
        let name = self.file(id).map(|f| f.name.clone()).unwrap_or_default();
        self.files.retain(|f| f.id != id);
        self.error = Some(format!("{message}: {name}"));
        if self.current == Some(id) {
            self.current = self.last_ready();
            self.reset_view_of_file();
        }
    }

    /// File `id` was refused for its size: it goes, and the page offers part of it.
    fn refused(&mut self, id: u32, offer: TooLarge) {
        let name = self.file(id).map(|f| f.name.clone()).unwrap_or_default();
        self.cancelled(id);
        self.too_large = Some((id, name, offer));
    }

    fn cancelled(&mut self, id: u32) {
        self.files.retain(|f| f.id != id);
        self.layouts.retain(|k, _| k.file != id);
        if self.current == Some(id) {
            self.current = self.last_ready();
            self.reset_view_of_file();
        }
    }

    /// Records file `id`'s first paint (`exact`: its first from the exact layout) once; false
    /// when it was recorded already.
    fn painted(&mut self, id: u32, ms: f64, exact: bool) -> bool {
        if let Some(f) = self.files.iter_mut().find(|f| f.id == id) {
            let at = if exact {
                &mut f.exact_paint_ms
            } else {
                &mut f.first_paint_ms
            };
            if at.is_some() {
                return false;
            }
            *at = Some(ms);
        }
        true
    }

    fn select_device(&mut self, d: u32) {
        self.device = Some(d);
        self.moment = None;
        self.callers_of = None;
        self.flame_mark = None;
        self.event = None;
        self.whole_and_unpinned();
    }

    /// A pin survives switching between the views that draw the Active timeline's elements
    /// and the Allocator State History; in the latter it opens the state at the pinned
    /// allocation's alloc.
    fn select_view(&mut self, v: View) {
        if self.view() == v {
            return;
        }
        let linked = |w: View| w == View::State || w.kind() == Some(TimelineKind::Active);
        if v == View::Diagnosis && linked(self.view()) {
            self.mark_pinned_band();
        }
        let keep = linked(self.view()) && linked(v);
        let from_key = self.element_key();
        self.view = Some(v);
        self.window = None;
        if !keep {
            self.selected = None;
            self.context = None;
        } else if v == View::State {
            let el = from_key
                .and_then(|k| self.layouts.get(&k))
                .zip(self.selected);
            if let Some((l, e)) = el {
                let el = &l.0.elements;
                let (a, f) = (el.alloc_row.get(e as usize), el.free_row.get(e as usize));
                match (a, f) {
                    (Some(a), _) => self.event = Some(a),
                    (_, Some(f)) => self.event = f.checked_sub(1),
                    _ => {}
                }
            }
        }
    }

    /// The Diagnosis view, opened from a view showing the Active Memory Timeline's elements,
    /// outlines the pinned band's stack in its icicle (nothing when none is pinned).
    fn mark_pinned_band(&mut self) {
        let key = self
            .element_key()
            .filter(|k| k.kind == TimelineKind::Active);
        self.flame_mark = key.zip(self.selected).map(|(k, element)| FlameMark {
            file: k.file,
            device: k.device,
            element,
        });
    }

    /// The history's list columns arrived: the wanted entry's allocation gets pinned.
    fn state_events_arrived(&mut self, ev: Shared<EventColumns>) {
        let key = (ev.file, ev.device);
        self.state_events.insert(key, ev);
        if self.view() == View::State && self.selected.is_none() {
            if let Some(e) = self.event {
                self.select_event(e);
            }
        }
    }

    /// Pins the allocation of the block at `addr` in the state shown.
    fn pin_block(&mut self, addr: u64) {
        let layout = self.element_key().and_then(|k| self.layouts.get(&k));
        let at = self
            .state_frame
            .as_ref()
            .filter(|f| Some((f.file, f.device)) == self.element_key().map(|k| (k.file, k.device)))
            .map(|f| f.event);
        let el = match (layout, at) {
            (Some(l), Some(at)) => crate::wire::history::element_at(&l.0, addr, at, false),
            _ => None,
        };
        self.selected = el;
        self.context = None;
    }

    fn set_search(&mut self, address: String, frame: String) {
        self.search_seq = self.search_seq.wrapping_add(1);
        self.search_text = (address, frame);
        if self.search_text.0.trim().is_empty() && self.search_text.1.trim().is_empty() {
            self.search = None;
        }
    }

    /// The worker answered search `seq` for layout `key`: the Compare view's highlight, or
    /// the timeline's search unless a newer one was asked for (false: stale).
    fn search_result(&mut self, a: SearchAnswer) -> bool {
        let SearchAnswer {
            key,
            seq,
            count,
            error,
            bits,
            search_ms,
        } = a;
        if self.compare.is_highlight_search(seq) {
            let m = bits
                .zip(self.layouts.get(&key))
                .map(|(b, l)| Matches::new(&l.0, b));
            let side = CompareSide {
                file: key.file,
                device: key.device,
            };
            self.compare.take_matches(side, seq, m);
            return true;
        }
        if self.layout_key() != Some(key) || self.search_seq != seq {
            return false;
        }
        let matches = match (bits, self.layouts.get(&key)) {
            (Some(b), Some(l)) => Some(SharedMatches(Rc::new(Matches::new(&l.0, b)))),
            _ => None,
        };
        self.search = Some(SearchOutcome {
            key,
            seq,
            count,
            error,
            matches,
            search_ms,
        });
        true
    }

    /// The Active Memory Timeline with the bands of `frame` searched.
    fn show_frame(&mut self, frame: String) {
        self.open_view(View::Timeline);
        self.search_seq = self.search_seq.wrapping_add(1);
        self.search_text = (String::new(), frame);
        self.search = None;
    }

    /// Picks the Compare view's side A (`a_side`) or B. B is the current file and device (the
    /// summary strip and the hash's `file` and `device`); A stays what it was.
    fn pick_compare(&mut self, a_side: bool, side: CompareSide) {
        if a_side {
            self.compare.pick_a = Some(side);
            return;
        }
        let a = self.compare_pair().map(|p| p.0);
        self.switch_file(side.file);
        self.device = Some(side.device);
        self.compare.pick_a = a.filter(|&x| x != side).or(self.compare.pick_a);
    }
}
