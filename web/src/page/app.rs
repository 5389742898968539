//! The page: toolbar (file, view, device, open, example), error banner, summary strip, the
//! current view and the stack panel. Side effects live here: the worker bridge, drag-and-drop,
//! `?src=`, and keeping the URL hash and the state in step.

use crate::page::app_state::{Action, AppState, FileStatus, HashState, View};
use crate::page::bridge::Bridge;
use crate::page::diagnosis::DiagnosisView;
use crate::page::panels::{
    EmptyState, LoadProgress, SettingsView, StackPanel, SummaryStrip, Warnings,
};
use crate::page::timeline::TimelineView;
use crate::page::too_large::TooLargePrompt;
use crate::wire::clock::now_ms;
use crate::wire::protocol::FileInfo;
use gloo_events::{EventListener, EventListenerOptions};
use memlens_core::layout::TimelineKind;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{DragEvent, Event, HtmlInputElement, HtmlSelectElement, MouseEvent};
use yew::prelude::*;

/// The built-in example, copied next to `index.html` by Trunk.
const EXAMPLE_URL: &str = "example.pickle";

fn location_hash() -> String {
    web_sys::window()
        .and_then(|w| w.location().hash().ok())
        .unwrap_or_default()
}

/// `?src=<url>` of the page, if any.
fn src_param() -> Option<String> {
    crate::page::url::query_value("src").filter(|s| !s.is_empty())
}

fn open_files(bridge: &Bridge, files: Option<web_sys::FileList>) {
    let Some(files) = files else { return };
    for i in 0..files.length() {
        if let Some(f) = files.get(i) {
            bridge.open_file(f);
        }
    }
}

fn select_value(e: &Event) -> Option<String> {
    e.target()
        .and_then(|t| t.dyn_into::<HtmlSelectElement>().ok())
        .map(|s| s.value())
}

#[function_component(App)]
pub fn app() -> Html {
    let state = use_reducer(AppState::default);
    // Light or dark (`crate::page::theme`): shown before the first paint of anything.
    let dark = use_state(|| {
        let d = crate::page::theme::initial_dark();
        crate::page::theme::apply(d);
        d
    });
    let bridge = {
        let d = state.dispatcher();
        use_state(move || Bridge::new(d).map(Rc::new))
    };
    let bridge: Option<Rc<Bridge>> = (*bridge).as_ref().ok().cloned();
    let bridge_error = use_state(|| None::<String>);
    use_page_listeners(&state, &bridge);
    if bridge.is_none() && bridge_error.is_none() {
        bridge_error.set(Some("the decoding worker could not start".into()));
    }
    use_worker_requests(&state, &bridge);
    use_hash_mirror(&state);
    let h = Handlers::new(&state, &bridge, &dark);
    let info = state.current_info().cloned();
    let device = state
        .device
        .or(info.as_ref().and_then(|i| i.default_device));
    let summary = info
        .as_ref()
        .and_then(|i| i.devices.iter().find(|d| Some(d.device) == device).cloned());
    let paint_ms = |ms: fn(&crate::page::app_state::FileEntry) -> Option<f64>| {
        state
            .current_file()
            .and_then(ms)
            .map(|ms| format!("{ms:.1}"))
    };
    let (first_paint, exact_paint, partial_paint) = (
        paint_ms(|f| f.first_paint_ms),
        paint_ms(|f| f.exact_paint_ms),
        paint_ms(|f| f.partial_paint_ms),
    );
    // "partial" while the timeline is the trace read so far, "preview" while it is drawn from a
    // sampled first layout, "exact" after.
    let layout_state = match state.current_layout() {
        Some(l) if l.0.is_preview() => Some("preview"),
        Some(_) => Some("exact"),
        None => state.partial_picture().map(|_| "partial"),
    };
    // File chosen → its (current device's) diagnosis received, for benchmarks.
    let diagnosis_ms = state
        .current_diagnosis()
        .zip(state.current_file())
        .map(|(d, f)| format!("{:.1}", d.received_ms - f.opened_ms));
    let error = state.error.clone().or((*bridge_error).clone());
    let body = view_body(&state, &bridge, &h);
    html! {
        <div id="memlens" class="app" data-state={if bridge.is_none() { "error" } else { state.page_state() }}
            data-first-paint-ms={first_paint} data-exact-paint-ms={exact_paint} data-partial-paint-ms={partial_paint} data-diagnosis-ms={diagnosis_ms} data-layout={layout_state} data-file={state.current_file().map(|f| f.name.clone())}>
            { toolbar(&state, info.as_deref(), device, &h, *dark) }
            if let Some(e) = error {
                <div class="banner-error" role="alert" data-testid="error">
                    <span>{ format!("Could not open: {e}") }</span>
                    <button class="link" onclick={h.dismiss.clone()}>{ "dismiss" }</button>
                </div>
            }
            if let Some((id, name, offer)) = state.too_large.clone() {
                <TooLargePrompt {name} {offer} on_open={h.open_part.reform(move |n| (id, n))} on_dismiss={h.dismiss_too_large.clone()} />
            }
            if let Some(s) = summary {
                <SummaryStrip summary={s} />
            }
            <main class="content" key={if *dark { "dark" } else { "light" }}>{ body }</main>
        </div>
    }
}

/// Once: restore the hash, open `?src=` and the files a report embeds (or, with none, warm the
/// worker up), and listen for drops and hash changes.
#[hook]
fn use_page_listeners(state: &UseReducerHandle<AppState>, bridge: &Option<Rc<Bridge>>) {
    let (state, bridge) = (state.clone(), bridge.clone());
    use_effect_with((), move |_| {
        let h = HashState::parse(&location_hash());
        if !h.is_empty() {
            state.dispatch(Action::ApplyHash(h));
        }
        if let Some(b) = &bridge {
            let src = src_param();
            if let Some(src) = &src {
                let name = src.rsplit('/').next().unwrap_or(src).to_string();
                b.open_url(src, &name);
            }
            // Files a `memlens html` report embeds or `memlens serve` lists.
            let preloaded = b.open_preloaded();
            if src.is_none() && preloaded == 0 {
                b.warm_up();
            }
        }
        let listeners = web_sys::window()
            .map(|w| window_listeners(&w, &state, bridge))
            .unwrap_or_default();
        move || drop(listeners)
    });
}

/// `hashchange`, and files dropped anywhere on the page.
fn window_listeners(
    w: &web_sys::Window,
    state: &UseReducerHandle<AppState>,
    bridge: Option<Rc<Bridge>>,
) -> Vec<EventListener> {
    let d = state.dispatcher();
    let mut listeners = vec![EventListener::new(w, "hashchange", move |_| {
        d.dispatch(Action::ApplyHash(HashState::parse(&location_hash())))
    })];
    // Both call preventDefault, so neither may be passive.
    let active = EventListenerOptions::enable_prevent_default;
    listeners.push(EventListener::new_with_options(
        w,
        "dragover",
        active(),
        |e| e.prevent_default(),
    ));
    listeners.push(EventListener::new_with_options(
        w,
        "drop",
        active(),
        move |e| {
            e.prevent_default();
            let files = e
                .dyn_ref::<DragEvent>()
                .and_then(|e| e.data_transfer())
                .and_then(|dt| dt.files());
            if let Some(b) = &bridge {
                open_files(b, files);
            }
        },
    ));
    listeners
}

/// Asks the worker for what the view needs: the layout, the pinned element's context, the
/// history's, search's and options' requests, the diagnosis, what grew in the window, the
/// icicle.
#[hook]
fn use_worker_requests(state: &UseReducerHandle<AppState>, bridge: &Option<Rc<Bridge>>) {
    let key = state.layout_key();
    let have_layout = state.current_layout().is_some();
    {
        let bridge = bridge.clone();
        use_effect_with((key, have_layout), move |(key, have)| {
            if let (Some(b), Some(k), false) = (&bridge, key, *have) {
                b.request_layout(*k);
            }
        });
    }
    let want_context = state.selected.map(|s| (s, state.full_stack));
    let have_context = state.context.as_ref().map(|(k, e, f, _)| (*k, *e, *f));
    // The pinned element's layout (the Active one in the Allocator State History).
    let element_key = state.element_key();
    crate::page::history_view::use_state_requests(state, bridge.clone());
    crate::page::search::use_search_requests(state, bridge.clone());
    crate::page::timeline_options::use_option_requests(state, bridge.clone());
    use_diagnosis_request(state, bridge);
    crate::page::compare_view::use_compare_requests(state, bridge.clone());
    // The timeline's zoomed window: what grew between its ends.
    {
        let bridge = bridge.clone();
        let want = state.wanted_between();
        use_effect_with(want, move |want| {
            if let (Some(b), Some(w)) = (&bridge, want) {
                b.request_between(*w);
            }
        });
    }
    // Its icicle: live memory at the picked moment, else at the peak.
    {
        let bridge = bridge.clone();
        let want = state
            .wanted_icicle()
            .filter(|_| state.view() == View::Diagnosis);
        use_effect_with(want, move |want| {
            if let (Some(b), Some(want)) = (&bridge, want) {
                b.request_icicle(want);
            }
        });
    }
    {
        let bridge = bridge.clone();
        use_effect_with(
            (element_key, want_context, have_context),
            move |(key, want, have)| {
                if let (Some(b), Some(k), Some((e, full))) = (&bridge, key, want) {
                    if *have != Some((*k, *e, *full)) {
                        b.request_context(*k, *e, *full);
                    }
                }
            },
        );
    }
}

/// The Diagnosis view asks for its device's diagnosis, unless the worker sends it unasked (the
/// default device of a file opened on a timeline).
#[hook]
fn use_diagnosis_request(state: &UseReducerHandle<AppState>, bridge: &Option<Rc<Bridge>>) {
    let bridge = bridge.clone();
    let want = (state.view() == View::Diagnosis && state.current_diagnosis().is_none())
        .then(|| {
            let info = state.current_info()?;
            let device = state.device.or(info.default_device)?;
            let unasked = Some(device) == info.default_device && info.layout_follows;
            (!unasked).then_some((state.current?, device))
        })
        .flatten();
    use_effect_with(want, move |want| {
        if let (Some(b), Some((id, device))) = (&bridge, want) {
            b.request_diagnosis(*id, *device);
        }
    });
}

/// Mirrors the view in the URL hash (replaceState: no history entry, no hashchange).
#[hook]
fn use_hash_mirror(state: &UseReducerHandle<AppState>) {
    let h = state.hash();
    use_effect_with(h, move |h| {
        if h.is_empty() {
            return;
        }
        let s = h.format();
        if s != location_hash() {
            if let Some(hist) = web_sys::window().and_then(|w| w.history().ok()) {
                let _ = hist.replace_state_with_url(&JsValue::NULL, "", Some(&s));
            }
        }
    });
}

/// The page's callbacks.
struct Handlers {
    file_input: Callback<Event>,
    example: Callback<()>,
    select_file: Callback<Event>,
    select_view: Callback<Event>,
    select_device: Callback<Event>,
    window: Callback<Option<(f64, f64)>>,
    pin: Callback<Option<u32>>,
    painted: Callback<()>,
    theme: Callback<MouseEvent>,
    dismiss: Callback<MouseEvent>,
    /// The refused file `id`'s last N events chosen.
    open_part: Callback<(u32, u64)>,
    dismiss_too_large: Callback<MouseEvent>,
}

impl Handlers {
    fn new(
        state: &UseReducerHandle<AppState>,
        bridge: &Option<Rc<Bridge>>,
        dark: &UseStateHandle<bool>,
    ) -> Handlers {
        let file_input = {
            let bridge = bridge.clone();
            Callback::from(move |e: Event| {
                let Some(input) = e
                    .target()
                    .and_then(|t| t.dyn_into::<HtmlInputElement>().ok())
                else {
                    return;
                };
                if let Some(b) = &bridge {
                    open_files(b, input.files());
                }
                input.set_value("");
            })
        };
        let example = {
            let bridge = bridge.clone();
            Callback::from(move |_| {
                if let Some(b) = &bridge {
                    b.open_url(EXAMPLE_URL, EXAMPLE_URL);
                }
            })
        };
        let dispatch_on = |f: fn(&str) -> Option<Action>| {
            let s = state.clone();
            Callback::from(move |e: Event| {
                if let Some(a) = select_value(&e).as_deref().and_then(f) {
                    s.dispatch(a);
                }
            })
        };
        let window = {
            let s = state.clone();
            Callback::from(move |w: Option<(f64, f64)>| match w {
                Some((a, b)) => s.dispatch(Action::SetWindow(a, b)),
                None => s.dispatch(Action::ResetWindow),
            })
        };
        let pin = {
            let s = state.clone();
            Callback::from(move |e: Option<u32>| s.dispatch(Action::Pin(e)))
        };
        let theme = {
            let dark = dark.clone();
            Callback::from(move |_: MouseEvent| {
                crate::page::theme::choose(!*dark);
                dark.set(!*dark);
            })
        };
        let dismiss = {
            let s = state.clone();
            Callback::from(move |_| s.dispatch(Action::DismissError))
        };
        let open_part = {
            let (s, bridge) = (state.clone(), bridge.clone());
            Callback::from(move |(id, n): (u32, u64)| {
                let range = format!("last:{n}");
                s.dispatch(Action::SetRange(range.clone()));
                if let Some(b) = &bridge {
                    b.open_part(id, range);
                }
            })
        };
        let dismiss_too_large = {
            let s = state.clone();
            Callback::from(move |_| s.dispatch(Action::DismissTooLarge))
        };
        Handlers {
            file_input,
            example,
            select_file: dispatch_on(|v| v.parse().ok().map(Action::SelectFile)),
            select_view: dispatch_on(|v| View::from_key(v).map(Action::SelectView)),
            select_device: dispatch_on(|v| v.parse().ok().map(Action::SelectDevice)),
            window,
            pin,
            painted: paint_logger(state),
            theme,
            dismiss,
            open_part,
            dismiss_too_large,
        }
    }
}

/// After each paint of the timeline: the file's first paint, its first paint from the exact
/// layout and its first picture of the trace so far are logged and recorded once (the page
/// measures time to first paint with them).
fn paint_logger(state: &UseReducerHandle<AppState>) -> Callback<()> {
    let s = state.clone();
    Callback::from(move |_| {
        let Some(f) = s.current_file() else { return };
        let preview = s.current_layout().map(|l| l.0.is_preview());
        let ms = now_ms() - f.opened_ms;
        if preview.is_none() && f.partial_paint_ms.is_none() && s.partial_picture().is_some() {
            web_sys::console::log_1(
                &format!(
                    "memlens: {} trace so far first painted {ms:.0} ms after it was chosen",
                    f.name
                )
                .into(),
            );
            s.dispatch(Action::PartialPaint { id: f.id, ms });
        }
        if f.first_paint_ms.is_none() && preview.is_some() {
            let how = if preview == Some(true) {
                " (preview layout)"
            } else {
                ""
            };
            web_sys::console::log_1(
                &format!(
                    "memlens: {} first painted {ms:.0} ms after it was chosen{how}",
                    f.name
                )
                .into(),
            );
            s.dispatch(Action::FirstPaint { id: f.id, ms });
        }
        if f.exact_paint_ms.is_none() && preview == Some(false) {
            if f.first_paint_ms.is_some() {
                web_sys::console::log_1(
                    &format!(
                        "memlens: {} painted from the exact layout {ms:.0} ms after it was chosen",
                        f.name
                    )
                    .into(),
                );
            }
            s.dispatch(Action::ExactPaint { id: f.id, ms });
        }
    })
}

/// The toolbar: file, view and device pickers, open, example, theme, exports, how the file
/// was read, the part of the trace shown.
fn toolbar(
    state: &AppState,
    info: Option<&FileInfo>,
    device: Option<u32>,
    h: &Handlers,
    dark: bool,
) -> Html {
    let view = state.view();
    html! {
        <header class="toolbar">
            <span class="brand">{ "memlens" }</span>
            if state.files.len() > 1 {
                <label>{ "File " }
                    <select data-testid="file-select" onchange={h.select_file.clone()}>
                        { for state.files.iter().map(|f| html! {
                            <option value={f.id.to_string()} selected={Some(f.id) == state.current}>{ &f.name }</option>
                        }) }
                    </select>
                </label>
            }
            <label>{ "View " }
                <select data-testid="view-select" onchange={h.select_view.clone()}>
                    { for View::ALL.iter().map(|v| html! {
                        <option value={v.key()} selected={*v == view}>{ v.title() }</option>
                    }) }
                </select>
            </label>
            if let Some(info) = info {
                <label>{ "Device " }
                    <select data-testid="device-select" onchange={h.select_device.clone()}>
                        { for info.devices.iter().map(|d| html! {
                            <option value={d.device.to_string()} selected={Some(d.device) == device}>
                                { format!("{}:{} ({} trace entries)", info.device_type, d.device, d.trace_entries) }
                            </option>
                        }) }
                    </select>
                </label>
            }
            <label class="button">{ "Open snapshot…" }
                <input type="file" multiple=true class="hidden-input" data-testid="file-input" onchange={h.file_input.clone()} />
            </label>
            <button onclick={h.example.reform(|_: MouseEvent| ())} data-testid="example-button">{ "Example" }</button>
            <button class="theme-toggle" data-testid="theme-toggle" onclick={h.theme.clone()}
                title="light or dark (remembered)">{ if dark { "☀ light" } else { "☾ dark" } }</button>
            if let (Some(_), Some(f)) = (info, state.current_file()) {
                <crate::page::exports::ExportBar file={f.name.clone()} view={view.key().to_string()} layout={state.current_layout().cloned()} />
            }
            if let Some(i) = info {
                <span class="muted small" data-model-memory-bytes={format!("{:.0}", i.model_memory_bytes)} data-memory-before-bytes={format!("{:.0}", i.memory_before_bytes)} data-read-wait-ms={i.read_wait_ms.map(|w| format!("{w:.0}"))}>{ format!("{} · decoded in {:.0} ms", i.encoding, i.decode_ms) }</span>
            }
            if let Some(r) = &state.range {
                <span class="muted small" data-testid="range" title="files open with this part of each device's trace (#range= in the URL)">{ format!("part: {r}") }</span>
            }
        </header>
    }
}

/// The current file as the current view shows it (or how far its loading is).
fn view_body(
    state: &UseReducerHandle<AppState>,
    bridge: &Option<Rc<Bridge>>,
    h: &Handlers,
) -> Html {
    let Some(f) = state.current_file() else {
        return html! { <EmptyState on_example={h.example.clone()} /> };
    };
    match &f.status {
        FileStatus::Loading { done, total } => {
            let (b, id) = (bridge.clone(), f.id);
            let on_cancel = Callback::from(move |_| {
                if let Some(b) = &b {
                    b.cancel(id)
                }
            });
            let progress = html! { <LoadProgress name={f.name.clone()} done={*done} total={*total} {on_cancel} /> };
            // The trace so far in the place (and the same component) the timeline will take.
            match state.partial_picture() {
                Some(_) => html! {
                    <>
                        { progress }
                        { timeline_body(state, TimelineKind::Active, h) }
                    </>
                },
                None => progress,
            }
        }
        FileStatus::Ready(info) => html! {
            <>
                <Warnings info={info.clone()} />
                { view_content(state, info, h) }
            </>
        },
    }
}

/// The current view of a file that is read.
fn view_content(state: &UseReducerHandle<AppState>, info: &Rc<FileInfo>, h: &Handlers) -> Html {
    let view = state.view();
    match (view, view.kind()) {
        (View::Settings, _) => html! { <SettingsView info={info.clone()} /> },
        (View::Compare, _) => {
            let s1 = state.clone();
            html! {
                <crate::page::compare_view::CompareView state={std::rc::Rc::new((**state).clone())}
                    act={Callback::from(move |a: Action| s1.dispatch(a))} />
            }
        }
        (View::Overview, _) => {
            let s1 = state.clone();
            html! {
                <crate::page::overview::OverviewView state={std::rc::Rc::new((**state).clone())}
                    on_open={Callback::from(move |(f, d): (u32, u32)| s1.dispatch(Action::OpenFileDevice(f, d)))} />
            }
        }
        (View::State, _) => crate::page::history_view::state_body(state),
        (View::Diagnosis, _) => diagnosis_body(state),
        (_, Some(kind)) => timeline_body(state, kind, h),
        _ => html! {},
    }
}

/// The Diagnosis view, with the icicle when it is the one asked for.
fn diagnosis_body(state: &UseReducerHandle<AppState>) -> Html {
    let (s1, s2, s3) = (state.clone(), state.clone(), state.clone());
    let s4 = state.clone();
    let icicle = state
        .icicle
        .clone()
        .filter(|i| state.wanted_icicle() == Some(i.key()));
    html! {
        <DiagnosisView diagnosis={state.current_diagnosis().cloned()} {icicle}
            on_frame={Callback::from(move |f: String| s1.dispatch(Action::ShowFrame(f)))}
            on_event={Callback::from(move |e: u32| s2.dispatch(Action::OpenEvent(e)))}
            on_moment={Callback::from(move |e: Option<u32>| s3.dispatch(Action::PickMoment(e)))}
            on_callers={Callback::from(move |f: Option<String>| s4.dispatch(Action::ShowCallers(f)))} />
    }
}

/// A timeline view: its search and option bars, the timeline and the stack panel, warnings,
/// what grew in the window.
fn timeline_body(state: &UseReducerHandle<AppState>, kind: TimelineKind, h: &Handlers) -> Html {
    let partial = state.partial_picture();
    let Some(l) = state
        .current_layout()
        .cloned()
        .or(partial.as_ref().map(|p| p.0.clone()))
    else {
        return html! { <p class="muted">{ "Laying out…" }</p> };
    };
    // The trace so far: no pin (its element ids are not the file's), no search or options (the
    // worker answers them once the file is read).
    let partial = partial.map(|p| p.1);
    let on_pin = match partial {
        Some(_) => Callback::noop(),
        None => h.pin.clone(),
    };
    let key = state.layout_key();
    let warn = l.0.warnings.join("; ");
    let ctx = state
        .context
        .as_ref()
        .filter(|(k, e, _, _)| Some(*k) == key && Some(*e) == state.selected)
        .and_then(|c| c.3.clone());
    let (s2, s3) = (state.clone(), state.clone());
    // The pinned band's alloc event, for "live memory here".
    let pinned_alloc = state
        .selected
        .and_then(|e| l.0.elements.alloc_row.get(e as usize));
    let s4 = state.clone();
    let on_live_memory =
        pinned_alloc.map(|a| Callback::from(move |_: ()| s4.dispatch(Action::ShowMoment(a))));
    let matches = state
        .search
        .as_ref()
        .filter(|o| Some(o.key) == key && o.seq == state.search_seq)
        .and_then(|o| o.matches.clone());
    let reserved = state
        .opts
        .reserved_line
        .then(|| crate::page::timeline_options::reserved_layout(state))
        .flatten();
    html! {
        <div class="view-body">
            if state.view() == View::Allocated {
                <p class="note small">{ "Each private pool (CUDA graphs, MemPool) is a gray envelope as tall as the larger of its reserved segments and its live allocations, with its allocations stacked inside; unlike upstream's, it shrinks when the pool's segments are freed." }</p>
            }
            if let Some(info) = &partial {
                { crate::page::panels::partial_note(info) }
            } else {
                { crate::page::search::controls(state) }
                { crate::page::timeline_options::controls(state) }
                { crate::page::timeline_options::legend_row(state) }
            }
            <div class="plot-and-stack">
                <TimelineView layout={l} {kind} window={state.window} selected={state.selected}
                    {matches} time_axis={state.time_axis}
                    colours={state.current_colouring().cloned()} filter={state.opts.filter}
                    {reserved} capacity={crate::page::timeline_options::capacity_line(state)}
                    on_window={h.window.clone()} {on_pin} on_painted={h.painted.clone()} />
                <StackPanel selected={state.selected} context={ctx} loading={true} full={state.full_stack} {on_live_memory}
                    on_toggle_full={Callback::from(move |_| s2.dispatch(Action::ToggleFullStack))}
                    on_unpin={Callback::from(move |_| s3.dispatch(Action::Pin(None)))} />
            </div>
            if !warn.is_empty() { <p class="muted small">{ warn }</p> }
            { crate::page::grew::panel(state) }
        </div>
    }
}
