//! The page: toolbar (file, view, device, open, example), error banner, summary strip, the
//! current view and the stack panel. Side effects live here: the worker bridge, drag-and-drop,
//! `?src=`, and keeping the URL hash and the state in step.

use crate::page::app_state::{Action, AppState, FileStatus, HashState, IcicleKey, View};
use crate::page::bridge::Bridge;
use crate::page::diagnosis::DiagnosisView;
use crate::page::panels::{
    EmptyState, LoadProgress, SettingsView, StackPanel, SummaryStrip, Warnings,
};
use crate::page::timeline::TimelineView;
use crate::wire::clock::now_ms;
use gloo_events::{EventListener, EventListenerOptions};
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
    let search = web_sys::window()?.location().search().ok()?;
    let params = web_sys::UrlSearchParams::new_with_str(&search).ok()?;
    params.get("src").filter(|s| !s.is_empty())
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

    // Once: restore the hash, open `?src=`, and listen for drops and hash changes.
    {
        let (state, bridge) = (state.clone(), bridge.clone());
        use_effect_with((), move |_| {
            let h = HashState::parse(&location_hash());
            if !h.is_empty() {
                state.dispatch(Action::ApplyHash(h));
            }
            if let (Some(b), Some(src)) = (&bridge, src_param()) {
                let name = src.rsplit('/').next().unwrap_or(&src).to_string();
                b.open_url(&src, &name);
            }
            // Files a `memlens html` report embeds or `memlens serve` lists.
            if let Some(b) = &bridge {
                b.open_preloaded();
            }
            let mut listeners: Vec<EventListener> = Vec::new();
            if let Some(w) = web_sys::window() {
                let d = state.dispatcher();
                listeners.push(EventListener::new(&w, "hashchange", move |_| {
                    d.dispatch(Action::ApplyHash(HashState::parse(&location_hash())))
                }));
                // Both call preventDefault, so neither may be passive.
                let active = EventListenerOptions::enable_prevent_default;
                listeners.push(EventListener::new_with_options(
                    &w,
                    "dragover",
                    active(),
                    |e| e.prevent_default(),
                ));
                let b = bridge.clone();
                listeners.push(EventListener::new_with_options(
                    &w,
                    "drop",
                    active(),
                    move |e| {
                        e.prevent_default();
                        let files = e
                            .dyn_ref::<DragEvent>()
                            .and_then(|e| e.data_transfer())
                            .and_then(|dt| dt.files());
                        if let Some(b) = &b {
                            open_files(b, files);
                        }
                    },
                ));
            }
            move || drop(listeners)
        });
    }
    if bridge.is_none() && bridge_error.is_none() {
        bridge_error.set(Some("the decoding worker could not start".into()));
    }

    // Ask the worker for what the view needs.
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
    crate::page::history_view::use_state_requests(&state, bridge.clone());
    crate::page::search::use_search_requests(&state, bridge.clone());
    crate::page::timeline_options::use_option_requests(&state, bridge.clone());
    // The Diagnosis view asks for its device's diagnosis, unless the worker sends it unasked
    // (the default device of a file opened on a timeline).
    {
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
    crate::page::compare_view::use_compare_requests(&state, bridge.clone());
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
    // Mirror the view in the URL hash (replaceState: no history entry, no hashchange).
    {
        let h = state.hash();
        use_effect_with(h, move |h| {
            if !h.is_empty() {
                let s = h.format();
                if s != location_hash() {
                    if let Some(hist) = web_sys::window().and_then(|w| w.history().ok()) {
                        let _ = hist.replace_state_with_url(&JsValue::NULL, "", Some(&s));
                    }
                }
            }
        });
    }

    let on_file_input = {
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
    let on_example = {
        let bridge = bridge.clone();
        Callback::from(move |_| {
            if let Some(b) = &bridge {
                b.open_url(EXAMPLE_URL, EXAMPLE_URL);
            }
        })
    };
    let on_select_file = {
        let s = state.clone();
        Callback::from(move |e: Event| {
            if let Some(id) = select_value(&e).and_then(|v| v.parse().ok()) {
                s.dispatch(Action::SelectFile(id));
            }
        })
    };
    let on_select_view = {
        let s = state.clone();
        Callback::from(move |e: Event| {
            if let Some(v) = select_value(&e).and_then(|v| View::from_key(&v)) {
                s.dispatch(Action::SelectView(v));
            }
        })
    };
    let on_select_device = {
        let s = state.clone();
        Callback::from(move |e: Event| {
            if let Some(d) = select_value(&e).and_then(|v| v.parse().ok()) {
                s.dispatch(Action::SelectDevice(d));
            }
        })
    };
    let on_window = {
        let s = state.clone();
        Callback::from(move |w: Option<(f64, f64)>| match w {
            Some((a, b)) => s.dispatch(Action::SetWindow(a, b)),
            None => s.dispatch(Action::ResetWindow),
        })
    };
    let on_pin = {
        let s = state.clone();
        Callback::from(move |e: Option<u32>| s.dispatch(Action::Pin(e)))
    };
    let on_painted = {
        let s = state.clone();
        Callback::from(move |_| {
            if let Some(f) = s.current_file() {
                let preview = s.current_layout().map(|l| l.0.is_preview());
                let ms = now_ms() - f.opened_ms;
                if f.first_paint_ms.is_none() && preview.is_some() {
                    web_sys::console::log_1(
                        &format!(
                            "memlens: {} first painted {ms:.0} ms after it was chosen{}",
                            f.name,
                            if preview == Some(true) {
                                " (preview layout)"
                            } else {
                                ""
                            }
                        )
                        .into(),
                    );
                    s.dispatch(Action::FirstPaint { id: f.id, ms });
                }
                if f.exact_paint_ms.is_none() && preview == Some(false) {
                    if f.first_paint_ms.is_some() {
                        web_sys::console::log_1(
                            &format!("memlens: {} painted from the exact layout {ms:.0} ms after it was chosen", f.name).into(),
                        );
                    }
                    s.dispatch(Action::ExactPaint { id: f.id, ms });
                }
            }
        })
    };
    let on_theme = {
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

    let view = state.view();
    let info = state.current_info().cloned();
    let device = state
        .device
        .or(info.as_ref().and_then(|i| i.default_device));
    let summary = info
        .as_ref()
        .and_then(|i| i.devices.iter().find(|d| Some(d.device) == device).cloned());
    let first_paint = state
        .current_file()
        .and_then(|f| f.first_paint_ms)
        .map(|ms| format!("{ms:.1}"));
    let exact_paint = state
        .current_file()
        .and_then(|f| f.exact_paint_ms)
        .map(|ms| format!("{ms:.1}"));
    // "preview" while the timeline is drawn from a sampled first layout, "exact" after.
    let layout_state =
        state
            .current_layout()
            .map(|l| if l.0.is_preview() { "preview" } else { "exact" });

    let body = match state.current_file() {
        None => html! { <EmptyState on_example={on_example.clone()} /> },
        Some(f) => match &f.status {
            FileStatus::Loading { done, total } => {
                let (b, id) = (bridge.clone(), f.id);
                let on_cancel = Callback::from(move |_| {
                    if let Some(b) = &b {
                        b.cancel(id)
                    }
                });
                html! { <LoadProgress name={f.name.clone()} done={*done} total={*total} {on_cancel} /> }
            }
            FileStatus::Ready(info) => {
                let content = match (view, view.kind()) {
                    (View::Settings, _) => html! { <SettingsView info={info.clone()} /> },
                    (View::Compare, _) => {
                        let s1 = state.clone();
                        html! {
                            <crate::page::compare_view::CompareView state={std::rc::Rc::new((*state).clone())}
                                act={Callback::from(move |a: Action| s1.dispatch(a))} />
                        }
                    }
                    (View::Overview, _) => {
                        let s1 = state.clone();
                        html! {
                            <crate::page::overview::OverviewView state={std::rc::Rc::new((*state).clone())}
                                on_open={Callback::from(move |(f, d): (u32, u32)| s1.dispatch(Action::OpenFileDevice(f, d)))} />
                        }
                    }
                    (View::State, _) => crate::page::history_view::state_body(&state),
                    (View::Diagnosis, _) => {
                        let (s1, s2, s3) = (state.clone(), state.clone(), state.clone());
                        let s4 = state.clone();
                        let icicle = state.icicle.clone().filter(|i| {
                            state.wanted_icicle()
                                == Some(IcicleKey {
                                    file: i.file,
                                    device: i.device,
                                    event: i.icicle.event,
                                    callers_of: i.callers_of.clone(),
                                })
                        });
                        html! {
                            <DiagnosisView diagnosis={state.current_diagnosis().cloned()} {icicle}
                                on_frame={Callback::from(move |f: String| s1.dispatch(Action::ShowFrame(f)))}
                                on_event={Callback::from(move |e: u32| s2.dispatch(Action::OpenEvent(e)))}
                                on_moment={Callback::from(move |e: Option<u32>| s3.dispatch(Action::PickMoment(e)))}
                                on_callers={Callback::from(move |f: Option<String>| s4.dispatch(Action::ShowCallers(f)))} />
                        }
                    }
                    (_, Some(kind)) => match state.current_layout() {
                        Some(l) => {
                            let l = l.clone();
                            let warn = l.0.warnings.join("; ");
                            let ctx = state
                                .context
                                .as_ref()
                                .filter(|(k, e, _, _)| {
                                    Some(*k) == key && Some(*e) == state.selected
                                })
                                .and_then(|c| c.3.clone());
                            let s2 = state.clone();
                            let s3 = state.clone();
                            // The pinned band's alloc event, for "live memory here".
                            let pinned_alloc = state
                                .selected
                                .and_then(|e| l.0.elements.alloc_row.get(e as usize));
                            let s4 = state.clone();
                            let on_live_memory = pinned_alloc.map(|a| {
                                Callback::from(move |_: ()| s4.dispatch(Action::ShowMoment(a)))
                            });
                            html! {
                                <div class="view-body">
                                    if view == View::Allocated {
                                        <p class="note small">{ "Each private pool (CUDA graphs, MemPool) is a gray envelope as tall as the larger of its reserved segments and its live allocations, with its allocations stacked inside; unlike upstream's, it shrinks when the pool's segments are freed." }</p>
                                    }
                                    { crate::page::search::controls(&state) }
                                    { crate::page::timeline_options::controls(&state) }
                                    { crate::page::timeline_options::legend_row(&state) }
                                    <div class="plot-and-stack">
                                        <TimelineView layout={l} {kind} window={state.window} selected={state.selected}
                                            matches={state.search.as_ref().filter(|o| Some(o.key) == key && o.seq == state.search_seq).and_then(|o| o.matches.clone())}
                                            time_axis={state.time_axis}
                                            colours={state.current_colouring().cloned()} filter={state.opts.filter}
                                            reserved={state.opts.reserved_line.then(|| crate::page::timeline_options::reserved_layout(&state)).flatten()}
                                            capacity={crate::page::timeline_options::capacity_line(&state)}
                                            on_window={on_window.clone()} on_pin={on_pin.clone()} on_painted={on_painted.clone()} />
                                        <StackPanel selected={state.selected} context={ctx} loading={true} full={state.full_stack} {on_live_memory}
                                            on_toggle_full={Callback::from(move |_| s2.dispatch(Action::ToggleFullStack))}
                                            on_unpin={Callback::from(move |_| s3.dispatch(Action::Pin(None)))} />
                                    </div>
                                    if !warn.is_empty() { <p class="muted small">{ warn }</p> }
                                    { crate::page::grew::panel(&state) }
                                </div>
                            }
                        }
                        None => html! { <p class="muted">{ "Laying out…" }</p> },
                    },
                    _ => html! {},
                };
                html! {
                    <>
                        <Warnings info={info.clone()} />
                        { content }
                    </>
                }
            }
        },
    };

    // File chosen → its (current device's) diagnosis received, for benchmarks.
    let diagnosis_ms = state
        .current_diagnosis()
        .zip(state.current_file())
        .map(|(d, f)| format!("{:.1}", d.received_ms - f.opened_ms));
    let error = state.error.clone().or((*bridge_error).clone());
    html! {
        <div id="memlens" class="app" data-state={if bridge.is_none() { "error" } else { state.page_state() }}
            data-first-paint-ms={first_paint} data-exact-paint-ms={exact_paint} data-diagnosis-ms={diagnosis_ms} data-layout={layout_state} data-file={state.current_file().map(|f| f.name.clone())}>
            <header class="toolbar">
                <span class="brand">{ "memlens" }</span>
                if state.files.len() > 1 {
                    <label>{ "File " }
                        <select data-testid="file-select" onchange={on_select_file}>
                            { for state.files.iter().map(|f| html! {
                                <option value={f.id.to_string()} selected={Some(f.id) == state.current}>{ &f.name }</option>
                            }) }
                        </select>
                    </label>
                }
                <label>{ "View " }
                    <select data-testid="view-select" onchange={on_select_view}>
                        { for View::ALL.iter().map(|v| html! {
                            <option value={v.key()} selected={*v == view}>{ v.title() }</option>
                        }) }
                    </select>
                </label>
                if let Some(info) = &info {
                    <label>{ "Device " }
                        <select data-testid="device-select" onchange={on_select_device}>
                            { for info.devices.iter().map(|d| html! {
                                <option value={d.device.to_string()} selected={Some(d.device) == device}>
                                    { format!("{}:{} ({} trace entries)", info.device_type, d.device, d.trace_entries) }
                                </option>
                            }) }
                        </select>
                    </label>
                }
                <label class="button">{ "Open snapshot…" }
                    <input type="file" multiple=true class="hidden-input" data-testid="file-input" onchange={on_file_input} />
                </label>
                <button onclick={on_example.reform(|_: MouseEvent| ())} data-testid="example-button">{ "Example" }</button>
                <button class="theme-toggle" data-testid="theme-toggle" onclick={on_theme}
                    title="light or dark (remembered)">{ if *dark { "☀ light" } else { "☾ dark" } }</button>
                if let (Some(_), Some(f)) = (&info, state.current_file()) {
                    <crate::page::exports::ExportBar file={f.name.clone()} view={view.key().to_string()} layout={state.current_layout().cloned()}
                        colours={state.current_colouring().cloned()} filter={state.opts.filter} />
                }
                if let Some(i) = &info {
                    <span class="muted small" data-model-memory-bytes={format!("{:.0}", i.model_memory_bytes)} data-memory-before-bytes={format!("{:.0}", i.memory_before_bytes)}>{ format!("{} · decoded in {:.0} ms", i.encoding, i.decode_ms) }</span>
                }
                if let Some(r) = &state.range {
                    <span class="muted small" data-testid="range" title="files open with this part of each device's trace (#range= in the URL)">{ format!("part: {r}") }</span>
                }
            </header>
            if let Some(e) = error {
                <div class="banner-error" role="alert" data-testid="error">
                    <span>{ format!("Could not open: {e}") }</span>
                    <button class="link" onclick={dismiss}>{ "dismiss" }</button>
                </div>
            }
            if let Some(s) = summary {
                <SummaryStrip summary={s} />
            }
            <main class="content" key={if *dark { "dark" } else { "light" }}>{ body }</main>
        </div>
    }
}
