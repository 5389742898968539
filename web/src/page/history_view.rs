//! The Allocator State History view: the event list, the segment map of the state after the
//! selected entry, the per-state numbers, and the stack panel shared with the timeline. It asks
//! the worker for the device's list columns once and for one state at a time (the latest wins:
//! while a request is in flight, newer selections wait and only the last one is sent), and
//! links with the timeline through the pinned element (`AppState::selected`).

use crate::page::app_state::{Action, AppState, View};
use crate::page::bridge::Bridge;
use crate::page::event_csv::EventCsv;
use crate::page::event_list::{EventList, ROW_PX};
use crate::page::history_canvas::{self, Marks};
use crate::page::panels::{metric_title, StackPanel};
use crate::page::pointer::{
    set_hover, use_canvas_listeners, use_press, wheel_zoom, DragAxes, PressCell,
};
use crate::wire::clock::now_ms;
use crate::wire::history::{format_size, EventColumns, Shared, StateFrame};
use crate::wire::protocol::WantedState;
use memlens_core::layout::axis::format_bytes;
use memlens_core::model::glossary::{definition, RESERVED_MINUS_ALLOCATED};
use memlens_core::model::BlockState;
use memlens_core::state::map::{self, Hit, MapGeometry, Transform};
use memlens_core::state::{OomNumbers, StateNumbers};
use memlens_core::trace::Action as TraceAction;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{
    Element, HtmlCanvasElement, HtmlInputElement, KeyboardEvent, MouseEvent, WheelEvent,
};
use yew::prelude::*;

/// What the page asked the worker for: (file, device, state wanted).
type StateKey = (u32, u32, WantedState);

thread_local! {
    /// The latest wanted state, when it was first wanted, and whether its first paint was
    /// timed (the seek time).
    static WANTED_SINCE: Cell<Option<(StateKey, f64, bool)>> = const { Cell::new(None) };
}

/// The state the page wants shown: the selected entry, else the last one.
fn wanted_key(state: &AppState) -> Option<StateKey> {
    if state.view() != View::State {
        return None;
    }
    let k = state.element_key()?;
    Some((k.file, k.device, WantedState::of(state.event)))
}

/// Asks the worker for what the Allocator State History needs: the Active layout (for the
/// stack panel and the link with the timeline), the list columns, and the wanted state.
#[hook]
pub fn use_state_requests(state: &UseReducerHandle<AppState>, bridge: Option<Rc<Bridge>>) {
    let wanted = wanted_key(state);
    let layout_key = state.element_key().filter(|_| wanted.is_some());
    let have_layout = layout_key.is_some_and(|k| state.layouts.contains_key(&k));
    let have_events = state.current_events().is_some();
    let frame = state.state_frame.clone();
    use_effect_with(
        (wanted, layout_key, have_layout, have_events, frame),
        move |(wanted, layout_key, have_layout, have_events, frame)| {
            let (Some(b), Some(w), Some(k)) = (&bridge, wanted, layout_key) else {
                return;
            };
            // The state first (the last one is read from the file's segments at once), then
            // the layout for the stack panel, then the list (whose reply waits for the history).
            let now = now_ms();
            if WANTED_SINCE.with(|c| c.get()).map(|(k, _, _)| k) != Some(*w) {
                WANTED_SINCE.with(|c| c.set(Some((*w, now, false))));
            }
            let have = frame.as_ref().map(|f| (f.file, f.device, f.requested));
            if have != Some(*w) {
                b.request_state(w.0, w.1, w.2);
            }
            if !*have_layout {
                b.request_layout(*k);
            }
            if !*have_events {
                b.request_state_events(w.0, w.1);
            }
        },
    );
}

/// The body of the Allocator State History: the view and the stack panel beside it.
pub fn state_body(state: &UseReducerHandle<AppState>) -> Html {
    let Some(key) = state.element_key() else {
        return html! { <p class="muted">{ "No device to show." }</p> };
    };
    let (file, device) = (key.file, key.device);
    let events = state.current_events().cloned();
    let file_name = state
        .current_file()
        .map(|f| f.name.clone())
        .unwrap_or_default();
    let frame = state
        .state_frame
        .clone()
        .filter(|f| f.file == file && f.device == device);
    let layout = state.layouts.get(&key).cloned();
    let pinned = layout.as_ref().zip(state.selected).and_then(|(l, e)| {
        let el = &l.0.elements;
        Some((*el.addr.get(e as usize)?, el.alloc_row.get(e as usize)))
    });
    let peak_reserved = state
        .current_info()
        .and_then(|i| i.devices.iter().find(|d| d.device == device))
        .map_or(0, |d| d.peak_reserved_bytes.max(0) as u64);
    let ctx = state
        .context
        .as_ref()
        .filter(|(k, e, _, _)| *k == key && Some(*e) == state.selected)
        .and_then(|c| c.3.clone());
    let (s1, s2, s3, s4) = (state.clone(), state.clone(), state.clone(), state.clone());
    let s5 = state.clone();
    html! {
        <div class="view-body state-body">
            <div class="plot-and-stack">
                <StateView {file} {file_name} {device} {events} {frame} event={state.event}
                    pinned_addr={pinned.map(|p| p.0)} {peak_reserved}
                    on_event={Callback::from(move |i: u32| s1.dispatch(Action::SelectEvent(i)))}
                    on_pin_block={Callback::from(move |a: Option<u64>| match a {
                        Some(a) => s2.dispatch(Action::PinBlock(a)),
                        None => s2.dispatch(Action::Pin(None)),
                    })}
                    on_live_memory={Callback::from(move |i: u32| s5.dispatch(Action::ShowMoment(i)))} />
                <StackPanel selected={state.selected} context={ctx} loading={layout.is_some()} full={state.full_stack}
                    on_toggle_full={Callback::from(move |_| s3.dispatch(Action::ToggleFullStack))}
                    on_unpin={Callback::from(move |_| s4.dispatch(Action::Pin(None)))} />
            </div>
        </div>
    }
}

#[derive(Properties, PartialEq)]
pub struct Props {
    pub file: u32,
    /// The snapshot's name (exports are named after it).
    pub file_name: String,
    pub device: u32,
    pub events: Option<Shared<EventColumns>>,
    /// The latest state of this file and device (possibly of another entry while the wanted
    /// one is on its way).
    pub frame: Option<Shared<StateFrame>>,
    /// The selected entry (`None`: the last).
    pub event: Option<u32>,
    /// Address of the pinned allocation (outlined in the map).
    pub pinned_addr: Option<u64>,
    /// The device's peak reserved bytes (fixes the map's scale for the whole trace).
    pub peak_reserved: u64,
    pub on_event: Callback<u32>,
    /// A block was clicked (its address), or empty space (`None`).
    pub on_pin_block: Callback<Option<u64>>,
    /// Show live memory after this entry as a flamegraph (the Diagnosis view).
    pub on_live_memory: Callback<u32>,
}

/// What the native listeners and the hit test need of the latest render.
struct Live {
    frame: Option<Shared<StateFrame>>,
    geometry: Option<MapGeometry>,
    transform: Transform,
    on_transform: Callback<Transform>,
}

fn metric(key: &'static str, name: &'static str, v: u64) -> Html {
    html! {
        <div class="metric" data-metric={format!("state_{key}")} data-value={v.to_string()}
            data-definition={definition(key)} title={metric_title(key, &format!("{v} bytes"))}>
            <span class="metric-name">{ name }</span>
            <span class="metric-value">{ format_bytes(v as f64) }</span>
        </div>
    }
}

/// At an `oom` entry: the request against the largest free block and all free bytes.
fn oom_html(n: &StateNumbers) -> Option<Html> {
    n.oom.map(|o: OomNumbers| {
        let (req, largest, total) = (
            o.requested_bytes,
            o.largest_free_block_bytes,
            o.total_free_bytes,
        );
        let verdict = if req > largest {
            if req <= total {
                "the request is larger than the largest free block but not than all free memory: fragmentation"
            } else {
                "the request is larger than all free memory in the segments"
            }
        } else {
            "a free block was large enough: the allocator could not use it (stream or pool)"
        };
        html! {
            <div class="state-oom" data-testid="state-oom">
                <b>{ "OOM " }</b>
                <span data-metric="state_oom_requested_bytes" data-value={req.to_string()}>{ format!("requested {}", format_size(req)) }</span>
                { " · " }
                <span data-metric="state_oom_largest_free_block_bytes" data-value={largest.to_string()}>{ format!("largest free block {}", format_size(largest)) }</span>
                { " · " }
                <span data-metric="state_oom_total_free_bytes" data-value={total.to_string()}>{ format!("total free {}", format_size(total)) }</span>
                if let Some(d) = o.device_free_bytes {
                    { " · " }
                    <span data-metric="state_oom_device_free_bytes" data-value={d.to_string()}>{ format!("device free {}", format_size(d)) }</span>
                }
                <div class="muted small">{ verdict }</div>
            </div>
        }
    })
}

fn numbers_html(n: &StateNumbers, event: Option<u32>) -> Html {
    html! {
        <div class="summary state-numbers" data-testid="state-numbers" data-event={event.map(|e| e.to_string())}>
            { metric("allocated_bytes", "Allocated", n.allocated_bytes) }
            { metric("requested_bytes", "Requested", n.requested_bytes) }
            { metric("active_bytes", "Active", n.active_bytes) }
            { metric("reserved_bytes", "Reserved", n.reserved_bytes) }
            { metric("inactive_split_bytes", "Inactive split", n.inactive_split_bytes) }
            { metric(RESERVED_MINUS_ALLOCATED, "Reserved − allocated", n.reserved_bytes.saturating_sub(n.allocated_bytes)) }
            { metric("largest_free_block_bytes", "Largest free block", n.largest_free_block_bytes) }
            <div class="metric" data-metric="state_fragmentation_pct" data-value={format!("{:.4}", n.fragmentation_pct)}
                data-definition={definition("fragmentation_pct")} title={metric_title("fragmentation_pct", &format!("{:.4} %", n.fragmentation_pct))}>
                <span class="metric-name">{ "Fragmentation" }</span>
                <span class="metric-value">{ format!("{:.1} %", n.fragmentation_pct) }</span>
            </div>
            { metric("pending_free_bytes", "Pending free", n.pending_free_bytes) }
            { metric("rounding_waste_bytes", "Rounding waste", n.rounding_waste_bytes) }
            <div class="metric" data-metric="state_segments" data-value={n.segments.to_string()}
                data-definition={definition("segments")} title={metric_title("segments", &format!("{} segments, {} blocks", n.segments, n.blocks))}>
                <span class="metric-name">{ "Segments / blocks" }</span>
                <span class="metric-value">{ format!("{} / {}", n.segments, n.blocks) }</span>
            </div>
            if n.unplaced_allocations > 0 {
                <div class="metric" data-metric="state_unplaced_allocations" data-value={n.unplaced_allocations.to_string()}
                    data-definition={definition("unplaced_allocations")} title={metric_title("unplaced_allocations", &n.unplaced_allocations.to_string())}>
                    <span class="metric-name">{ "Unplaced" }</span>
                    <span class="metric-value">{ format!("{} ({})", n.unplaced_allocations, format_bytes(n.unplaced_requested_bytes as f64)) }</span>
                </div>
            }
        </div>
    }
}

/// Parses "12.5", "+12.5s", "1500ms", "300us" (after the first entry) or "14:03:07.250" (clock
/// time on the first entry's day) into µs since the epoch.
fn parse_time(s: &str, first_us: i64) -> Option<i64> {
    let s = s.trim();
    if s.contains(':') {
        let mut parts = s.split(':');
        let h: f64 = parts.next()?.trim().parse().ok()?;
        let m: f64 = parts.next()?.trim().parse().ok()?;
        let sec: f64 = parts.next().map_or(Some(0.0), |x| x.trim().parse().ok())?;
        let d = js_sys::Date::new(&JsValue::from_f64(first_us as f64 / 1000.0));
        d.set_hours(h as u32);
        d.set_minutes(m as u32);
        d.set_seconds(sec.floor() as u32);
        let ms = d.set_milliseconds((sec.fract() * 1000.0).round() as u32);
        return ms.is_finite().then_some((ms * 1000.0) as i64);
    }
    let s = s.trim_start_matches('+');
    let (num, scale) = if let Some(x) = s.strip_suffix("ms") {
        (x, 1e3)
    } else if let Some(x) = s.strip_suffix("us").or_else(|| s.strip_suffix("µs")) {
        (x, 1.0)
    } else if let Some(x) = s.strip_suffix('s') {
        (x, 1e6)
    } else {
        (s, 1e6)
    };
    let v: f64 = num.trim().parse().ok()?;
    v.is_finite().then(|| first_us + (v * scale) as i64)
}

fn time_text(ev: &EventColumns, i: usize) -> Option<String> {
    let t = ev.time_of(i)?;
    let first = ev.first_time_us()?;
    let d = js_sys::Date::new(&JsValue::from_f64(t as f64 / 1000.0));
    let clock = d.to_iso_string().as_string().unwrap_or_default();
    Some(format!(
        "+{:.6} s · {}",
        (t - first) as f64 / 1e6,
        clock.replace('T', " ").trim_end_matches('Z')
    ))
}

fn tooltip_text(f: &StateFrame, hit: &Hit) -> String {
    let seg = hit.seg;
    let seg_addr = f.columns.segment_address.get(seg).copied().unwrap_or(0);
    let seg_size = f.columns.segment_size_bytes.get(seg).copied().unwrap_or(0);
    let (mut alloc, mut free) = (0u64, 0u64);
    for b in f.blocks_of(seg) {
        let s = f.columns.block_size_bytes.get(b).copied().unwrap_or(0);
        if f.block_state(b) == BlockState::Inactive {
            free += s;
        } else {
            alloc += s;
        }
    }
    let pool = match f.columns.segment_pool_id.get(seg).copied().flatten() {
        Some((0, 0)) => "default pool".to_string(),
        Some((a, b)) => format!("pool_id ({a}, {b})"),
        None => "pool unknown".to_string(),
    };
    let expandable = f.columns.segment_is_expandable.get(seg).is_some_and(|&x| x);
    let seg_line = format!(
        "segment s'{seg_addr:x}: {} allocated, {} free of {} (stream {}, {pool}{})",
        format_bytes(alloc as f64),
        format_bytes(free as f64),
        format_bytes(seg_size as f64),
        f.columns.segment_stream.get(seg).copied().unwrap_or(0),
        if expandable { ", expandable" } else { "" }
    );
    let Some(b) = hit.block else {
        return seg_line;
    };
    let addr = f.columns.block_address.get(b).copied().unwrap_or(0);
    let size = f.columns.block_size_bytes.get(b).copied().unwrap_or(0);
    match f.block_state(b) {
        BlockState::Inactive => format!("free block b'{addr:x} {}\n{seg_line}", format_size(size)),
        st => {
            let req = f
                .columns
                .block_requested_size_bytes
                .get(b)
                .copied()
                .unwrap_or(size);
            let ev = f.columns.block_alloc_event.get(b).copied().flatten();
            let when = match ev {
                Some(ev) => format!("allocated at event {ev}"),
                None => "allocated before the trace (or its alloc is not recorded)".to_string(),
            };
            let pending = if st == BlockState::ActivePendingFree {
                " (block freed but waiting due to record_stream)"
            } else {
                ""
            };
            format!(
                "b'{addr:x} {} allocation{pending}\nrequested {}, rounding waste {}\n{} · {when}\n{seg_line}",
                format_size(size),
                format_size(req),
                format_bytes(size.saturating_sub(req) as f64),
                st.name()
            )
        }
    }
}

type SharedLive = Rc<RefCell<Live>>;

#[function_component(StateView)]
pub fn state_view(p: &Props) -> Html {
    let root = use_node_ref();
    let canvas = use_node_ref();
    let list_ref = use_node_ref();
    let transform = use_state(Transform::default);
    let hover = use_state(|| None::<(Hit, f64, f64)>);
    let press = use_press::<Transform>(DragAxes::XY);
    let on_transform = {
        let t = transform.clone();
        Callback::from(move |x: Transform| t.set(x))
    };
    let live = use_mut_ref(|| Live {
        frame: None,
        geometry: None,
        transform: Transform::default(),
        on_transform: on_transform.clone(),
    });
    {
        let mut l = live.borrow_mut();
        l.frame = p.frame.clone();
        l.transform = *transform;
        l.on_transform = on_transform.clone();
    }
    // Wheel: zoom around the pointer, without scrolling the page.
    let resize_tick = use_canvas_listeners(&canvas, {
        let live = live.clone();
        move |e: WheelEvent| {
            e.prevent_default();
            let l = live.borrow();
            l.on_transform
                .emit(l.transform.zoom_at(e.offset_x() as f64, wheel_zoom(&e)));
        }
    });
    let n = p.events.as_ref().map_or(0, |e| e.len());
    let shown = p.event.or_else(|| p.frame.as_ref().and_then(|f| f.event));
    let marks = Marks {
        pinned: p.pinned_addr,
        event_addr: event_addr(p.events.as_ref(), shown),
        hovered: hover.as_ref().and_then(|(h, _, _)| h.block),
    };
    let bytes_per_row = use_map_drawing(MapDrawing {
        p,
        canvas: &canvas,
        root: &root,
        live: &live,
        transform: *transform,
        marks,
        resize_tick,
    });
    use_focus_on_open(&root);
    let mouse = map_mouse(p, &live, &press, &hover, &transform);
    let onkeydown = entry_keys(p, n, shown, &list_ref, &transform, &canvas);
    let numbers = p
        .frame
        .as_ref()
        .and_then(|f| f.numbers.as_ref().map(|n| numbers_html(n, f.event)));
    let warnings = p
        .events
        .as_ref()
        .map(|e| e.meta.warnings.join("; "))
        .unwrap_or_default();
    let list = match &p.events {
        Some(e) => html! { <>
            <EventCsv events={e.clone()} file_name={p.file_name.clone()} />
            <EventList events={e.clone()} selected={shown} on_select={p.on_event.clone()} list_ref={list_ref.clone()} />
        </> },
        None => {
            html! { <div class="event-list muted" ref={list_ref.clone()}>{ "Reading the trace…" }</div> }
        }
    };
    html! {
        <div class="state-view" ref={root} tabindex="0" {onkeydown} data-testid="state-view"
            data-event={shown.map(|e| e.to_string())} data-events={n.to_string()}>
            <StateBar events={p.events.clone()} {shown} on_event={p.on_event.clone()}
                on_live_memory={p.on_live_memory.clone()} />
            { for numbers }
            if !warnings.is_empty() { <p class="muted small">{ format!("Reconstruction: {warnings}") }</p> }
            <div class="state-main">
                <div class="event-col">{ list }</div>
                <div class="state-map">
                    { legend(p.frame.is_none(), bytes_per_row) }
                    <div class="plot">
                        <canvas ref={canvas} class="plot-canvas state-canvas" data-testid="state-canvas"
                            onmousedown={mouse.down} onmousemove={mouse.moved} onmouseup={mouse.up}
                            onmouseleave={mouse.leave} ondblclick={mouse.double} />
                        { for p.frame.as_ref().and_then(|f| f.numbers.as_ref()).and_then(oom_html) }
                        { map_tooltip(hover.as_ref(), p.frame.as_ref()) }
                    </div>
                </div>
            </div>
        </div>
    }
}

/// The address of the entry shown, when it is an alloc or a free (marked in the map).
fn event_addr(events: Option<&Shared<EventColumns>>, shown: Option<u32>) -> Option<u64> {
    let (ev, i) = (events?, shown? as usize);
    matches!(
        ev.action(i),
        TraceAction::Alloc | TraceAction::FreeRequested | TraceAction::FreeCompleted
    )
    .then(|| ev.addr.get(i).copied())
    .flatten()
}

/// What [`use_map_drawing`] draws with.
struct MapDrawing<'a> {
    p: &'a Props,
    canvas: &'a NodeRef,
    root: &'a NodeRef,
    live: &'a SharedLive,
    transform: Transform,
    marks: Marks,
    resize_tick: u32,
}

/// Draws the segment map when the state, zoom, marks or size change, keeps its geometry for
/// the hit test, and marks the view with what was painted and how long it took. Returns the
/// map's bytes per row.
#[hook]
fn use_map_drawing(d: MapDrawing<'_>) -> u64 {
    let mounted_ms = use_state(now_ms);
    let bytes_per_row = use_state(|| 0u64);
    let switch_done = use_mut_ref(|| false);
    let p = d.p;
    let wanted = WantedState::of(p.event);
    let (canvas, root, live) = (d.canvas.clone(), d.root.clone(), d.live.clone());
    let (bpr, mounted_ms) = (bytes_per_row.clone(), *mounted_ms);
    let deps = (
        p.frame.clone(),
        d.transform,
        d.marks,
        d.resize_tick,
        p.peak_reserved,
        (p.file, p.device, wanted),
    );
    use_effect_with(deps, move |(frame, t, marks, _, peak, key)| {
        let (Some(c), Some(f)) = (canvas.cast::<HtmlCanvasElement>(), frame) else {
            return;
        };
        let (w, h) = history_canvas::css_size(&c);
        let g = map::fit(f, *peak, (w - 2.0 * map::PAD).max(50.0), h);
        history_canvas::draw(&c, f, &g, *t, *marks);
        if *bpr != g.bytes_per_row {
            bpr.set(g.bytes_per_row);
        }
        live.borrow_mut().geometry = Some(g.clone());
        if let Some(r) = root.cast::<Element>() {
            mark_painted(&r, f, &g, *key);
            if f.requested == key.2 && !*switch_done.borrow() {
                *switch_done.borrow_mut() = true;
                let ms = now_ms() - mounted_ms;
                let _ = r.set_attribute("data-switch-ms", &format!("{ms:.1}"));
                web_sys::console::log_1(
                    &format!(
                        "memlens: allocator state history shown {ms:.1} ms after the view opened"
                    )
                    .into(),
                );
            }
        }
    });
    *bytes_per_row
}

/// The view's attributes after a paint: the entry painted, where its state came from, the
/// scale, and, for the wanted state, the seek times (the browser tests and benchmarks read them).
fn mark_painted(r: &Element, f: &StateFrame, g: &MapGeometry, key: StateKey) {
    let painted = f.event.map_or("none".to_string(), |e| e.to_string());
    let _ = r.set_attribute("data-painted-event", &painted);
    let source = if f.from_file { "file" } else { "history" };
    let _ = r.set_attribute("data-state-source", source);
    let _ = r.set_attribute("data-bytes-per-row", &g.bytes_per_row.to_string());
    if f.requested != key.2 {
        return;
    }
    let since = WANTED_SINCE
        .with(|c| c.get())
        .filter(|(k, _, done)| *k == key && !done)
        .map(|(_, t, _)| t);
    if let Some(t0) = since {
        // Once per wanted state: from wanting it to its first paint.
        WANTED_SINCE.with(|c| c.set(Some((key, t0, true))));
        let _ = r.set_attribute("data-seek-ms", &format!("{:.2}", now_ms() - t0));
    }
    let _ = r.set_attribute("data-worker-seek-ms", &format!("{:.3}", f.seek_ms));
    if f.build_ms > 0.0 {
        let _ = r.set_attribute("data-build-ms", &format!("{:.1}", f.build_ms));
    }
}

/// Takes the keyboard on opening, so ↑/↓ step through entries rather than change the view
/// selector that opened it.
#[hook]
fn use_focus_on_open(root: &NodeRef) {
    let root = root.clone();
    use_effect_with((), move |_| {
        if let Some(r) = root.cast::<web_sys::HtmlElement>() {
            let _ = r.focus();
        }
    });
}

/// The map's mouse handlers.
struct MapMouse {
    down: Callback<MouseEvent>,
    moved: Callback<MouseEvent>,
    up: Callback<MouseEvent>,
    leave: Callback<MouseEvent>,
    double: Callback<MouseEvent>,
}

/// Drag to pan, hover for the tooltip, click a block to pin its allocation (empty space
/// unpins), double-click to reset the zoom.
fn map_mouse(
    p: &Props,
    live: &SharedLive,
    press: &PressCell<Transform>,
    hover: &UseStateHandle<Option<(Hit, f64, f64)>>,
    transform: &UseStateHandle<Transform>,
) -> MapMouse {
    let hit = {
        let live = live.clone();
        move |e: &MouseEvent| -> Option<Hit> {
            let l = live.borrow();
            let (f, g) = (l.frame.as_ref()?, l.geometry.as_ref()?);
            let (mx, my) = l.transform.to_map(e.offset_x() as f64, e.offset_y() as f64);
            g.hit(f, mx, my)
        }
    };
    let down = {
        let (press, t) = (press.clone(), **transform);
        Callback::from(move |e: MouseEvent| press.begin(&e, || t))
    };
    let moved = {
        let (press, hover, hit) = (press.clone(), hover.clone(), hit.clone());
        let on_transform = live.borrow().on_transform.clone();
        Callback::from(move |e: MouseEvent| {
            let panned = press.drag(&e, |pr, (dx, dy)| {
                let t = pr.at_start;
                on_transform.emit(Transform {
                    k: t.k,
                    tx: t.tx + dx,
                    ty: t.ty + dy,
                });
            });
            if panned.is_some() {
                hover.set(None);
                return;
            }
            set_hover(
                &hover,
                hit(&e).map(|h| (h, e.offset_x() as f64, e.offset_y() as f64)),
            );
        })
    };
    let up = {
        let (press, on_pin, live) = (press.clone(), p.on_pin_block.clone(), live.clone());
        Callback::from(move |e: MouseEvent| {
            if press.release().is_some_and(|d| !d.moved) {
                let h = hit(&e);
                let l = live.borrow();
                let addr = h.zip(l.frame.as_ref()).and_then(|(h, f)| {
                    let b = h.block?;
                    f.block_state(b)
                        .is_active()
                        .then(|| f.columns.block_address.get(b).copied())
                        .flatten()
                });
                on_pin.emit(addr);
            }
        })
    };
    let leave = {
        let (press, hover) = (press.clone(), hover.clone());
        Callback::from(move |_| {
            press.cancel();
            hover.set(None);
        })
    };
    let double = {
        let t = transform.clone();
        Callback::from(move |_| t.set(Transform::default()))
    };
    MapMouse {
        down,
        moved,
        up,
        leave,
        double,
    }
}

/// Keys: ↑/↓, PgUp/PgDn, Home/End step through entries; +/-/0 zoom.
fn entry_keys(
    p: &Props,
    n: usize,
    shown: Option<u32>,
    list_ref: &NodeRef,
    transform: &UseStateHandle<Transform>,
    canvas: &NodeRef,
) -> Callback<KeyboardEvent> {
    let go = {
        let cb = p.on_event.clone();
        move |i: i64| {
            if n > 0 {
                cb.emit(i.clamp(0, n as i64 - 1) as u32);
            }
        }
    };
    let (list_ref, transform, canvas) = (list_ref.clone(), transform.clone(), canvas.clone());
    Callback::from(move |e: KeyboardEvent| {
        if e.target()
            .is_some_and(|t| t.dyn_ref::<HtmlInputElement>().is_some())
        {
            return;
        }
        let cur = shown.map_or(n as i64 - 1, |s| s as i64);
        let page = list_ref.cast::<Element>().map_or(20, |l| {
            ((l.client_height() as f64 / ROW_PX) as i64 - 1).max(1)
        });
        let zoom = |factor: f64| {
            let w = canvas
                .cast::<HtmlCanvasElement>()
                .map_or(400.0, |c| history_canvas::css_size(&c).0);
            transform.set(transform.zoom_at(w / 2.0, factor));
        };
        match e.key().as_str() {
            "ArrowDown" => go(cur + 1),
            "ArrowUp" => go(cur - 1),
            "PageDown" => go(cur + page),
            "PageUp" => go(cur - page),
            "Home" => go(0),
            "End" => go(n as i64 - 1),
            "+" | "=" => zoom(1.25),
            "-" | "_" => zoom(0.8),
            "0" => transform.set(Transform::default()),
            _ => return,
        }
        e.prevent_default();
    })
}

#[derive(Properties, PartialEq)]
struct BarProps {
    events: Option<Shared<EventColumns>>,
    /// The entry shown (`None`: none yet).
    shown: Option<u32>,
    on_event: Callback<u32>,
    on_live_memory: Callback<u32>,
}

/// The bar over the view: where the entry is, stepping (first, previous, next, last, the peak,
/// OOMs), live memory, and going to a time.
#[function_component(StateBar)]
fn state_bar(p: &BarProps) -> Html {
    let time_ref = use_node_ref();
    let time_error = use_state(|| false);
    let (ev, shown) = (&p.events, p.shown);
    let n = ev.as_ref().map_or(0, |e| e.len());
    let peak = ev.as_ref().and_then(|e| e.meta.peak_event);
    let ooms: Vec<u32> = ev
        .as_ref()
        .map(|e| e.meta.ooms.iter().map(|o| o.event).collect())
        .unwrap_or_default();
    let prev_oom = ooms
        .iter()
        .rev()
        .find(|&&o| shown.is_some_and(|s| o < s))
        .copied();
    let next_oom = ooms.iter().find(|&&o| shown.is_none_or(|s| o > s)).copied();
    let button = |label: &str, testid: &str, title: &str, target: Option<u32>| {
        let cb = p.on_event.clone();
        let onclick = Callback::from(move |_: MouseEvent| {
            if let Some(t) = target {
                cb.emit(t);
            }
        });
        html! {
            <button data-testid={testid.to_string()} title={title.to_string()} disabled={target.is_none()} {onclick}>{ label }</button>
        }
    };
    let last = n.checked_sub(1).map(|x| x as u32);
    let on_time = time_submit(ev.clone(), &time_ref, &time_error, &p.on_event);
    let live_memory = {
        let cb = p.on_live_memory.clone();
        Callback::from(move |_: MouseEvent| {
            if let Some(i) = shown {
                cb.emit(i)
            }
        })
    };
    html! {
        <div class="state-bar">
            { button("|◂", "state-first", "first entry (Home)", (n > 0).then_some(0)) }
            { button("◂", "state-prev", "previous entry (↑)", shown.and_then(|s| s.checked_sub(1))) }
            <span class="state-pos" data-testid="state-position">{ position_text(shown, ev.as_deref()) }</span>
            { button("▸", "state-next", "next entry (↓)", shown.map(|s| s + 1).filter(|&s| (s as usize) < n)) }
            { button("▸|", "state-last", "last entry (End)", last) }
            { button("peak", "state-peak", "the entry after which the timeline is highest", peak) }
            { button("◂ OOM", "state-prev-oom", "previous out-of-memory entry", prev_oom) }
            <span class="muted small" data-testid="state-oom-count">{ format!("{} OOM{}", ooms.len(), if ooms.len() == 1 { "" } else { "s" }) }</span>
            { button("OOM ▸", "state-next-oom", "next out-of-memory entry", next_oom) }
            <button data-testid="state-live-memory" title="live memory after this entry as a flamegraph (Diagnosis)" disabled={shown.is_none()}
                onclick={live_memory}>{ "live memory" }</button>
            <form class="state-time" onsubmit={on_time}>
                <input ref={time_ref} data-testid="state-time" class={classes!(time_error.then_some("bad"))}
                    placeholder="time: +12.5s or 14:03:07.250" title="seconds after the first entry (12.5, 1500ms) or a clock time" />
                <button type="submit" data-testid="state-time-go">{ "go" }</button>
            </form>
        </div>
    }
}

/// "event 12 of 400 · +1.5 s · clock time", or why there is none.
fn position_text(shown: Option<u32>, ev: Option<&EventColumns>) -> String {
    match (shown, ev) {
        (Some(i), Some(e)) => {
            let t = time_text(e, i as usize)
                .map(|t| format!(" · {t}"))
                .unwrap_or_default();
            format!("event {i} of {}{t}", e.len())
        }
        (None, Some(e)) if e.is_empty() => "no trace entries: the state is the snapshot's".into(),
        _ => "…".into(),
    }
}

/// The time box: goes to the entry at the typed time, or marks the box when none is.
fn time_submit(
    ev: Option<Shared<EventColumns>>,
    time_ref: &NodeRef,
    time_error: &UseStateHandle<bool>,
    on_event: &Callback<u32>,
) -> Callback<SubmitEvent> {
    let (time_ref, time_error, cb) = (time_ref.clone(), time_error.clone(), on_event.clone());
    Callback::from(move |e: SubmitEvent| {
        e.prevent_default();
        let Some(input) = time_ref.cast::<HtmlInputElement>() else {
            return;
        };
        let target = ev.as_ref().and_then(|ev| {
            let t = parse_time(&input.value(), ev.first_time_us()?)?;
            ev.event_at_time(t)
        });
        time_error.set(target.is_none());
        if let Some(i) = target {
            cb.emit(i);
        }
    })
}

/// The map's legend: the block colours, whether a state is on its way, the scale, the gestures.
fn legend(reconstructing: bool, bytes_per_row: u64) -> Html {
    html! {
        <div class="state-legend">
            <span class="sw" style={format!("background:{}", history_canvas::BLOCK_COLOURS[0])}
                title="allocated: one colour per allocation"></span>{ "allocated" }
            <span class="sw" style={format!("background:{}", history_canvas::PENDING_COLOUR)}
                title="freed, waiting for its streams (record_stream)"></span>{ "pending free" }
            <span class="sw" style={format!("background:{}", history_canvas::WASTE_COLOUR)}
                title="block size − requested size"></span>{ "rounding waste" }
            <span class="sw free" title="inactive block: a hole in its segment"></span>{ "free" }
            if reconstructing { <span class="muted">{ " · reconstructing…" }</span> }
            if bytes_per_row > 0 { <b data-testid="state-scale">{ format!(" · 1 row = {}", format_bytes(bytes_per_row as f64)) }</b> }
            <span class="muted">{ " · wheel: zoom · drag: pan · double-click: reset" }</span>
        </div>
    }
}

/// The tooltip of the segment or block under the pointer.
fn map_tooltip(hover: Option<&(Hit, f64, f64)>, frame: Option<&Shared<StateFrame>>) -> Html {
    let Some(((h, x, y), f)) = hover.zip(frame) else {
        return Html::default();
    };
    let active = h.block.is_some_and(|b| f.block_state(b).is_active());
    html! {
        <div class="tooltip" data-testid="state-tooltip" style={format!("left:{}px;top:{}px", x + 14.0, y + 14.0)}>
            { tooltip_text(f, h) }
            if active { <div class="hint">{ "click to pin its stack" }</div> }
        </div>
    }
}
