//! The timeline view: canvas, overview strip and tooltip, with wheel zoom around the pointer,
//! drag to pan, shift-drag to zoom to a range (box zoom), alt-drag or `m` twice to measure
//! between two points (the ruler), click to pin, double-click or `0` to reset, and the keys of
//! [`KEYS`] (`?` lists them over the plot). Pointer positions go through the drawn viewport, so
//! everything works the same on the event and the wall-clock axis. It only reads the layout
//! and reports window changes, pins and (when asked) the pointer's x upward; what the bands are
//! coloured by, the lines and the filters come in as props, computed elsewhere; a cursor line
//! can be drawn at a given x (the Compare view keeps two timelines' cursors together).
//!
//! Each draw and each hover hit test is timed: the canvas carries `data-draw-ms` (the last
//! draw), `data-draw-log` (the last 50, comma-separated), `data-render-ms` (bands: level of
//! detail and canvas calls), `data-paint-ms` (canvas calls alone), `data-rects`, `data-bands`
//! (bands drawn one by one) and `data-hit-ms`, for the browser benchmarks.

use crate::page::app_state::{SharedLayout, SharedMatches};
use crate::page::canvas::{
    draw_overview, draw_timeline, overview_viewport, DrawOptions, DrawTiming, MARGIN_LEFT,
    MARGIN_TOP,
};
use crate::page::exports::DrawnTimeline;
use crate::page::pointer::{
    set_hover, use_canvas_listeners, use_press, wheel_zoom, DragAxes, Press, PressCell,
};
use crate::page::theme;
use crate::wire::clock::now_ms;
use memlens_core::colour::Colouring;
use memlens_core::layout::context::tooltip;
use memlens_core::layout::ruler::Ruler;
use memlens_core::layout::{BandFilter, RenderStats, TimeMap, TimelineKind, Viewport};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use web_sys::{HtmlCanvasElement, KeyboardEvent, MouseEvent, WheelEvent};
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct Props {
    pub layout: SharedLayout,
    pub kind: TimelineKind,
    pub window: Option<(f64, f64)>,
    pub selected: Option<u32>,
    /// Search matches to outline (and mark on the rug).
    #[prop_or_default]
    pub matches: Option<SharedMatches>,
    /// x axis in wall-clock time (when the layout has times).
    #[prop_or_default]
    pub time_axis: bool,
    /// A palette index per element; `None`: upstream's colours.
    #[prop_or_default]
    pub colours: Option<Rc<Colouring>>,
    #[prop_or_default]
    pub filter: BandFilter,
    /// The device's Segments layout, drawn as the reserved line.
    #[prop_or_default]
    pub reserved: Option<SharedLayout>,
    /// The capacity line: bytes, and the words at its end.
    #[prop_or_default]
    pub capacity: Option<(u64, String)>,
    pub on_window: Callback<Option<(f64, f64)>>,
    pub on_pin: Callback<Option<u32>>,
    /// Called after each paint (the page measures time to first paint with it).
    pub on_painted: Callback<()>,
    /// A vertical cursor line at this event-space x (the Compare view syncs two timelines).
    #[prop_or_default]
    pub cursor: Option<f64>,
    /// Told the event-space x under the pointer as it moves over the plot.
    #[prop_or_default]
    pub on_cursor: Option<Callback<f64>>,
}

#[derive(Clone, Copy, PartialEq)]
enum DragMode {
    Pan,
    /// Shift-drag: select an x range to zoom to.
    Box,
    /// Alt-drag: measure between two points.
    Measure,
}

/// Every key and gesture of the timelines, as the `?` overlay lists them.
pub const KEYS: &[(&str, &str)] = &[
    ("W / S", "zoom in / out around the middle"),
    ("A / D", "pan left / right"),
    ("+ / −", "zoom in / out"),
    ("← / →", "pan left / right"),
    ("0 / Home", "show the whole trace"),
    (
        "M",
        "ruler: mark the point under the pointer, then the second point; a third M clears",
    ),
    ("Esc", "clear the ruler, close this list"),
    ("?", "show or hide this list"),
    ("wheel", "zoom around the pointer"),
    ("drag", "pan"),
    ("shift-drag", "zoom to a range"),
    ("alt-drag", "ruler between two points"),
    ("click", "pin a band's stack"),
    ("double-click", "show the whole trace"),
];

/// What a press keeps from when it began.
struct AtPress {
    /// The viewport then (a pan maps pixels through it).
    vp: Option<Viewport>,
    mode: DragMode,
}

/// What a draw returns: the viewport, what was drawn and how long it took.
type Drawn = (Viewport, RenderStats, DrawTiming);

/// What the native listeners need to see of the latest props.
struct Live {
    layout: Option<SharedLayout>,
    window: (f64, f64),
    vp: Option<Viewport>,
    on_window: Callback<Option<(f64, f64)>>,
}

fn clamp_window(a: f64, b: f64, x_end: f64) -> (f64, f64) {
    let w = (b - a).clamp(2.0_f64.min(x_end), x_end);
    let a = a.clamp(0.0, (x_end - w).max(0.0));
    (a, a + w)
}

/// The window seen when the plot's pixel range `[px0, px1]` is stretched over the plot.
fn window_of_px(vp: &Viewport, px0: f64, px1: f64, x_end: f64) -> (f64, f64) {
    clamp_window(vp.x_data(px0), vp.x_data(px1), x_end)
}

/// Zoom by `factor` around plot pixel `at_px` (factor < 1 zooms in).
fn zoom_px(vp: &Viewport, at_px: f64, factor: f64, x_end: f64) -> (f64, f64) {
    let at = at_px.clamp(0.0, vp.width_px);
    window_of_px(
        vp,
        at - at * factor,
        at + (vp.width_px - at) * factor,
        x_end,
    )
}

/// The data-space point (event-space x, bytes) under the pointer, if it is over the plot.
fn data_at(vp: &Option<Viewport>, e: &MouseEvent) -> Option<(f64, f64)> {
    let vp = vp.as_ref()?;
    let (x, y) = (
        e.offset_x() as f64 - MARGIN_LEFT,
        e.offset_y() as f64 - MARGIN_TOP,
    );
    let inside = (0.0..=vp.width_px).contains(&x) && (0.0..=vp.height_px).contains(&y);
    inside.then(|| (vp.x_data(x), vp.y_data(y)))
}

fn set_attr(c: &HtmlCanvasElement, name: &str, value: &str) {
    let _ = c.set_attribute(name, value);
}

/// Appends a draw time to the canvas's `data-draw-log` (last 50).
fn log_draw(c: &HtmlCanvasElement, ms: f64) {
    let mut log: Vec<String> = c
        .get_attribute("data-draw-log")
        .map(|s| s.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    log.retain(|s| !s.is_empty());
    log.push(format!("{ms:.2}"));
    let skip = log.len().saturating_sub(50);
    set_attr(c, "data-draw-log", &log[skip..].join(","));
    set_attr(c, "data-draw-ms", &format!("{ms:.2}"));
}

/// The view's own state between renders: hover, box zoom, ruler, keys overlay.
#[derive(Clone)]
struct Ui {
    /// Element under the pointer and where (for the tooltip).
    hover: UseStateHandle<Option<(u32, f64, f64)>>,
    /// Box zoom selection being dragged: plot pixels (from, to).
    boxsel: UseStateHandle<Option<(f64, f64)>>,
    /// The ruler (data space).
    ruler: UseStateHandle<Option<Ruler>>,
    /// A first point waiting for its second (`m`).
    ruler_anchor: Rc<RefCell<Option<(f64, f64)>>>,
    show_keys: UseStateHandle<bool>,
    /// Where the pointer is, in data space (for `m`).
    pointer: Rc<RefCell<Option<(f64, f64)>>>,
    /// The viewport of the last draw, kept as state while a ruler is shown so it follows zooms.
    drawn_vp: UseStateHandle<Option<Viewport>>,
}

#[hook]
fn use_ui() -> Ui {
    Ui {
        hover: use_state(|| None),
        boxsel: use_state(|| None),
        ruler: use_state(|| None),
        ruler_anchor: use_mut_ref(|| None),
        show_keys: use_state(|| false),
        pointer: use_mut_ref(|| None),
        drawn_vp: use_state(|| None),
    }
}

type SharedLive = Rc<RefCell<Live>>;

#[function_component(TimelineView)]
pub fn timeline_view(p: &Props) -> Html {
    let canvas = use_node_ref();
    let overview = use_node_ref();
    let cursor_line = use_node_ref();
    let press = use_press::<AtPress>(DragAxes::X);
    let ui = use_ui();
    let x_end = p.layout.0.x_end() as f64;
    let window = p
        .window
        .map(|(a, b)| clamp_window(a, b, x_end))
        .unwrap_or((0.0, x_end));
    let time: Option<Arc<TimeMap>> = (*use_memo((p.layout.clone(), p.time_axis), |(l, on)| {
        if *on {
            TimeMap::new(&l.0.time_us).map(Arc::new)
        } else {
            None
        }
    }))
    .clone();
    let live = use_mut_ref(|| Live {
        layout: None,
        window,
        vp: None,
        on_window: p.on_window.clone(),
    });
    {
        let mut l = live.borrow_mut();
        l.layout = Some(p.layout.clone());
        l.window = window;
        l.on_window = p.on_window.clone();
    }
    let resize_tick = use_canvas_listeners(&canvas, wheel_zoom_window(&live));
    use_timeline_drawing(TimelineDrawing {
        p,
        canvas: &canvas,
        overview: &overview,
        live: &live,
        ui: &ui,
        window,
        time: time.clone(),
        resize_tick,
    });
    use_cursor_line(p, &cursor_line, &live, window, resize_tick);
    let mouse = plot_mouse(p, &live, &press, &ui, &canvas);
    let onkeydown = timeline_keys(p, &live, &ui, x_end);
    let (ov_down, ov_move) = overview_mouse(p, &overview, window, time.clone(), x_end);
    let tip = ui
        .hover
        .and_then(|(el, x, y)| tooltip(&p.layout.0, p.kind, el as usize).map(|t| (t, x, y)));
    let zoom_box = ui.boxsel.map(|(a, b)| {
        format!(
            "left:{}px;width:{}px;top:{}px;bottom:{}px",
            MARGIN_LEFT + a.min(b),
            (b - a).abs(),
            MARGIN_TOP,
            crate::page::canvas::MARGIN_BOTTOM
        )
    });
    let ruler_box = ui
        .ruler
        .as_ref()
        .zip(ui.drawn_vp.as_ref())
        .map(|(r, vp)| ruler_overlay(r, vp, time.as_deref()));
    html! {
        <div class="timeline">
            <div class="plot">
                <canvas ref={canvas} class="plot-canvas" tabindex="0" data-testid="timeline-canvas"
                    data-window={format!("{:.2},{:.2}", window.0, window.1)}
                    data-axis={if time.is_some() { "time" } else { "events" }}
                    onmousedown={mouse.down} onmousemove={mouse.moved} onmouseup={mouse.up}
                    onmouseleave={mouse.leave} ondblclick={mouse.double} {onkeydown} />
                <div ref={cursor_line} class="cursor-line" data-testid="cursor-line" style="display:none"></div>
                if let Some(style) = zoom_box {
                    <div class="zoom-box" data-testid="zoom-box" {style}></div>
                }
                { ruler_box.unwrap_or_default() }
                { keys_overlay(&ui.show_keys) }
                if let Some((t, x, y)) = tip {
                    <div class="tooltip" data-testid="tooltip" style={format!("left:{}px;top:{}px", x + 14.0, y + 14.0)}>
                        { t }
                        <div class="hint">{ "click to pin its stack" }</div>
                    </div>
                }
            </div>
            <canvas ref={overview} class="overview-canvas" data-testid="overview" onmousedown={ov_down} onmousemove={ov_move} />
        </div>
    }
}

/// The wheel: zoom around the pointer.
fn wheel_zoom_window(live: &SharedLive) -> impl FnMut(WheelEvent) + 'static {
    let live = live.clone();
    move |e: WheelEvent| {
        e.prevent_default();
        let l = live.borrow();
        let (Some(layout), Some(vp)) = (&l.layout, &l.vp) else {
            return;
        };
        let at = e.offset_x() as f64 - MARGIN_LEFT;
        let w = zoom_px(vp, at, 1.0 / wheel_zoom(&e), layout.0.x_end() as f64);
        l.on_window.emit(Some(w));
    }
}

/// What [`use_timeline_drawing`] draws with.
struct TimelineDrawing<'a> {
    p: &'a Props,
    canvas: &'a NodeRef,
    overview: &'a NodeRef,
    live: &'a SharedLive,
    ui: &'a Ui,
    window: (f64, f64),
    time: Option<Arc<TimeMap>>,
    resize_tick: u32,
}

/// Draws the plot and the overview when what is drawn changes (not on hover: the tooltip is a
/// DOM element), and keeps the drawn viewport for the pointer.
#[hook]
fn use_timeline_drawing(d: TimelineDrawing<'_>) {
    let p = d.p;
    let (canvas, overview, live, on_painted) = (
        d.canvas.clone(),
        d.overview.clone(),
        d.live.clone(),
        p.on_painted.clone(),
    );
    let deps = (
        (p.layout.clone(), d.window, p.selected, p.matches.clone()),
        d.time.as_ref().map(|t| Arc::as_ptr(t) as usize),
        d.resize_tick,
        (p.colours.clone(), p.filter, p.reserved.clone()),
        (p.capacity.clone(), theme::is_dark()),
    );
    let time = d.time;
    let (drawn_vp, ruler_on) = (d.ui.drawn_vp.clone(), d.ui.ruler.is_some());
    use_effect_with(deps, move |deps| {
        let ((layout, window, selected, matches), _, _, (colours, filter, reserved), (cap, _)) =
            deps;
        if let Some(c) = canvas.cast::<HtmlCanvasElement>() {
            let t0 = now_ms();
            let drawn = draw_timeline(
                &c,
                &layout.0,
                window.0,
                window.1,
                DrawOptions {
                    selected: *selected,
                    matches: matches.as_ref().map(|m| m.0.as_ref()),
                    time: time.clone(),
                    colours: colours.as_ref().map(|c| c.index.as_slice()),
                    filter: *filter,
                    reserved: reserved.as_ref().map(|r| r.0.as_ref()),
                    capacity: cap.clone(),
                },
            );
            log_draw(&c, now_ms() - t0);
            mark_drawn(&c, drawn.as_ref(), cap.as_ref());
            if let Some((vp, _, _)) = &drawn {
                if ruler_on {
                    drawn_vp.set(Some(vp.clone()));
                }
                crate::page::exports::remember_drawn(DrawnTimeline {
                    layout: layout.clone(),
                    vp: vp.clone(),
                    selected: *selected,
                    matches: matches.clone(),
                    colours: colours.clone(),
                    filter: *filter,
                    reserved: reserved.clone(),
                    capacity: cap.clone(),
                });
            }
            live.borrow_mut().vp = drawn.map(|d| d.0);
        }
        if let Some(o) = overview.cast::<HtmlCanvasElement>() {
            draw_overview(&o, &layout.0, window.0, window.1, time);
        }
        on_painted.emit(());
    });
}

/// The canvas's attributes after a draw (for the browser tests and benchmarks).
fn mark_drawn(c: &HtmlCanvasElement, drawn: Option<&Drawn>, cap: Option<&(u64, String)>) {
    if let Some((_, st, tm)) = drawn {
        set_attr(c, "data-rects", &st.rects.to_string());
        set_attr(c, "data-bands", &st.elements_visited.to_string());
        set_attr(c, "data-render-ms", &format!("{:.2}", tm.render_ms));
        set_attr(c, "data-paint-ms", &format!("{:.2}", tm.paint_ms));
    }
    if let Some(((vp, _, _), (bytes, _))) = drawn.zip(cap) {
        let y = MARGIN_TOP + vp.y_px(*bytes as f64);
        set_attr(c, "data-capacity-bytes", &bytes.to_string());
        set_attr(c, "data-capacity-px", &format!("{y:.2}"));
    } else {
        let _ = c.remove_attribute("data-capacity-bytes");
        let _ = c.remove_attribute("data-capacity-px");
    }
    if let Some((vp, _, _)) = drawn {
        set_attr(c, "data-y-max-bytes", &format!("{:.0}", vp.y1_bytes));
    }
}

/// The cursor line, placed through the viewport just drawn.
#[hook]
fn use_cursor_line(
    p: &Props,
    line: &NodeRef,
    live: &SharedLive,
    window: (f64, f64),
    resize_tick: u32,
) {
    let (line, live) = (line.clone(), live.clone());
    let deps = (p.cursor, window, resize_tick, p.layout.clone(), p.time_axis);
    use_effect_with(deps, move |(cursor, ..)| {
        let px = cursor
            .zip(live.borrow().vp.clone())
            .map(|(x, vp)| vp.x_px(x));
        if let Some(el) = line.cast::<web_sys::HtmlElement>() {
            let style = match px {
                Some(px) => format!("left:{:.1}px", MARGIN_LEFT + px),
                None => "display:none".to_string(),
            };
            let _ = el.set_attribute("style", &style);
        }
    });
}

/// The plot's mouse handlers.
struct PlotMouse {
    down: Callback<MouseEvent>,
    moved: Callback<MouseEvent>,
    up: Callback<MouseEvent>,
    leave: Callback<MouseEvent>,
    double: Callback<MouseEvent>,
}

/// The element under the pointer, timed into the canvas's `data-hit-ms`.
fn hit_test(live: &SharedLive, canvas: &NodeRef, e: &MouseEvent) -> Option<u32> {
    let l = live.borrow();
    let (layout, vp) = (l.layout.as_ref()?, l.vp.as_ref()?);
    let (x, y) = (
        e.offset_x() as f64 - MARGIN_LEFT,
        e.offset_y() as f64 - MARGIN_TOP,
    );
    if x < 0.0 || y < 0.0 || x > vp.width_px || y > vp.height_px {
        return None;
    }
    let t0 = now_ms();
    let h = layout.0.hit(vp.x_data(x), vp.y_data(y)).map(|e| e as u32);
    if let Some(c) = canvas.cast::<HtmlCanvasElement>() {
        set_attr(&c, "data-hit-ms", &format!("{:.3}", now_ms() - t0));
    }
    h
}

/// Drag to pan, shift-drag to zoom to a range, alt-drag to measure, hover for the tooltip (and
/// the cursor), click to pin, double-click to show the whole trace.
fn plot_mouse(
    p: &Props,
    live: &SharedLive,
    press: &PressCell<AtPress>,
    ui: &Ui,
    canvas: &NodeRef,
) -> PlotMouse {
    let down = {
        let (press, live) = (press.clone(), live.clone());
        Callback::from(move |e: MouseEvent| {
            press.begin(&e, || AtPress {
                vp: live.borrow().vp.clone(),
                mode: if e.alt_key() {
                    DragMode::Measure
                } else if e.shift_key() {
                    DragMode::Box
                } else {
                    DragMode::Pan
                },
            })
        })
    };
    let moved = {
        let (press, live, ui, canvas) = (press.clone(), live.clone(), ui.clone(), canvas.clone());
        let on_cursor = p.on_cursor.clone();
        Callback::from(move |e: MouseEvent| {
            let at = data_at(&live.borrow().vp, &e);
            *ui.pointer.borrow_mut() = at;
            if let (Some(cb), Some((x, _))) = (&on_cursor, at) {
                cb.emit(x);
            }
            let dragged = press.drag(&e, |pr, (dx, _)| drag_to(&live.borrow(), &ui, pr, dx, at));
            if dragged.is_some() {
                ui.hover.set(None);
                return;
            }
            let h = hit_test(&live, &canvas, &e);
            set_hover(
                &ui.hover,
                h.map(|el| (el, e.offset_x() as f64, e.offset_y() as f64)),
            );
        })
    };
    let up = {
        let (press, on_pin, live, ui, canvas) = (
            press.clone(),
            p.on_pin.clone(),
            live.clone(),
            ui.clone(),
            canvas.clone(),
        );
        Callback::from(move |e: MouseEvent| {
            let Some(d) = press.release() else { return };
            if !d.moved {
                if d.at_start.mode != DragMode::Measure {
                    on_pin.emit(hit_test(&live, &canvas, &e));
                }
                return;
            }
            if d.at_start.mode == DragMode::Box {
                ui.boxsel.set(None);
                box_zoom(&live.borrow(), &d, e.offset_x() as f64 - MARGIN_LEFT);
            }
        })
    };
    let leave = {
        let (press, ui) = (press.clone(), ui.clone());
        Callback::from(move |_| {
            press.cancel();
            ui.boxsel.set(None);
            ui.hover.set(None);
        })
    };
    let double = {
        let on_window = p.on_window.clone();
        Callback::from(move |_| on_window.emit(None))
    };
    PlotMouse {
        down,
        moved,
        up,
        leave,
        double,
    }
}

/// A drag `dx` pixels from where it began: pans, stretches the zoom box, or draws the ruler to
/// `at` (the data-space point under the pointer).
fn drag_to(l: &Live, ui: &Ui, pr: &Press<AtPress>, dx: f64, at: Option<(f64, f64)>) {
    let (Some(layout), Some(vp)) = (&l.layout, &pr.at_start.vp) else {
        return;
    };
    let (start_px, start_y_px) = (pr.start.0 - MARGIN_LEFT, pr.start.1 - MARGIN_TOP);
    match pr.at_start.mode {
        DragMode::Pan => l.on_window.emit(Some(window_of_px(
            vp,
            -dx,
            vp.width_px - dx,
            layout.0.x_end() as f64,
        ))),
        DragMode::Box => {
            let px = (start_px + dx).clamp(0.0, vp.width_px);
            ui.boxsel.set(Some((start_px, px)));
        }
        DragMode::Measure => {
            let a = (vp.x_data(start_px), vp.y_data(start_y_px));
            if let Some(b) = at {
                ui.ruler.set(Some(Ruler { a, b }));
                ui.drawn_vp.set(Some(vp.clone()));
            }
        }
    }
}

/// A box zoom released at plot pixel `px`: shows the range between it and where it began, if
/// it is at least 3 pixels wide.
fn box_zoom(l: &Live, d: &Press<AtPress>, px: f64) {
    let (Some(layout), Some(vp)) = (&l.layout, &d.at_start.vp) else {
        return;
    };
    let start_px = d.start.0 - MARGIN_LEFT;
    let (a, b) = (start_px.min(px), start_px.max(px));
    let (a, b) = (a.clamp(0.0, vp.width_px), b.clamp(0.0, vp.width_px));
    if b - a >= 3.0 {
        l.on_window
            .emit(Some(window_of_px(vp, a, b, layout.0.x_end() as f64)));
    }
}

/// The keys of [`KEYS`]: zoom, pan, reset, the ruler (`m`), the overlay (`?`), Escape.
fn timeline_keys(p: &Props, live: &SharedLive, ui: &Ui, x_end: f64) -> Callback<KeyboardEvent> {
    let (on_window, live, ui) = (p.on_window.clone(), live.clone(), ui.clone());
    Callback::from(move |e: KeyboardEvent| {
        if e.ctrl_key() || e.meta_key() {
            return;
        }
        let l = live.borrow();
        let Some(vp) = &l.vp else { return };
        let (w, mid) = (vp.width_px, vp.width_px / 2.0);
        let win = match e.key().as_str() {
            "+" | "=" | "w" | "W" => Some(zoom_px(vp, mid, 0.8, x_end)),
            "-" | "_" | "s" | "S" => Some(zoom_px(vp, mid, 1.25, x_end)),
            "ArrowLeft" | "a" | "A" => Some(window_of_px(vp, -0.1 * w, 0.9 * w, x_end)),
            "ArrowRight" | "d" | "D" => Some(window_of_px(vp, 0.1 * w, 1.1 * w, x_end)),
            "0" | "Home" => None,
            "?" => {
                ui.show_keys.set(!*ui.show_keys);
                e.prevent_default();
                return;
            }
            "Escape" => {
                ui.show_keys.set(false);
                ui.ruler.set(None);
                *ui.ruler_anchor.borrow_mut() = None;
                return;
            }
            "m" | "M" => {
                ruler_key(&ui, vp);
                e.prevent_default();
                return;
            }
            _ => return,
        };
        e.prevent_default();
        on_window.emit(win);
    })
}

/// `m`: the first press marks the point under the pointer, the second draws the ruler to the
/// point under it then, a third clears it.
fn ruler_key(ui: &Ui, vp: &Viewport) {
    let at = *ui.pointer.borrow();
    let first = *ui.ruler_anchor.borrow();
    match (first, at, ui.ruler.is_some()) {
        (_, _, true) => ui.ruler.set(None),
        (None, Some(a), false) => *ui.ruler_anchor.borrow_mut() = Some(a),
        (Some(a), Some(b), false) => {
            *ui.ruler_anchor.borrow_mut() = None;
            ui.drawn_vp.set(Some(vp.clone()));
            ui.ruler.set(Some(Ruler { a, b }));
        }
        _ => {}
    }
}

/// The overview strip: click or drag to move the window there. Returns (mousedown, mousemove).
fn overview_mouse(
    p: &Props,
    overview: &NodeRef,
    window: (f64, f64),
    time: Option<Arc<TimeMap>>,
    x_end: f64,
) -> (Callback<MouseEvent>, Callback<MouseEvent>) {
    let (overview, on_window, layout) = (overview.clone(), p.on_window.clone(), p.layout.clone());
    let overview_move = move |e: &MouseEvent| {
        let Some(o) = overview.cast::<HtmlCanvasElement>() else {
            return;
        };
        let full = overview_viewport(
            &layout.0,
            o.client_width() as f64,
            o.client_height() as f64,
            time.clone(),
        );
        let at = full.x_data(e.offset_x() as f64 - MARGIN_LEFT);
        let half = (window.1 - window.0) / 2.0;
        on_window.emit(Some(clamp_window(at - half, at + half, x_end)));
    };
    let down = {
        let m = overview_move.clone();
        Callback::from(move |e: MouseEvent| m(&e))
    };
    let moved = Callback::from(move |e: MouseEvent| {
        if e.buttons() & 1 == 1 {
            overview_move(&e)
        }
    });
    (down, moved)
}

/// The `?` overlay listing [`KEYS`], when shown.
fn keys_overlay(show_keys: &UseStateHandle<bool>) -> Html {
    if !**show_keys {
        return Html::default();
    }
    let close = {
        let show_keys = show_keys.clone();
        Callback::from(move |_: MouseEvent| show_keys.set(false))
    };
    html! {
        <div class="keys-overlay" data-testid="keys-overlay" role="dialog" aria-label="keys">
            <div class="keys-title">{ "Keys of the timeline" }
                <button class="link" onclick={close}>{ "close" }</button></div>
            <table>
                { for KEYS.iter().map(|(k, what)| html! {
                    <tr data-key={*k}><td><kbd>{ *k }</kbd></td><td>{ *what }</td></tr>
                }) }
            </table>
        </div>
    }
}

/// The ruler over the plot: the rectangle between its two points and what it measures.
fn ruler_overlay(r: &Ruler, vp: &Viewport, time: Option<&TimeMap>) -> Html {
    let (ax, ay) = (vp.x_px(r.a.0), vp.y_px(r.a.1));
    let (bx, by) = (vp.x_px(r.b.0), vp.y_px(r.b.1));
    let clamp_x = |x: f64| x.clamp(0.0, vp.width_px);
    let clamp_y = |y: f64| y.clamp(0.0, vp.height_px);
    let (l, rgt) = (clamp_x(ax.min(bx)), clamp_x(ax.max(bx)));
    let (t, b) = (clamp_y(ay.min(by)), clamp_y(ay.max(by)));
    let style = format!(
        "left:{}px;top:{}px;width:{}px;height:{}px",
        MARGIN_LEFT + l,
        MARGIN_TOP + t,
        (rgt - l).max(1.0),
        (b - t).max(1.0)
    );
    // Above the box's left end: the pointer (and its tooltip) is at the other end.
    let label_style = format!(
        "left:{}px;top:{}px",
        MARGIN_LEFT + l,
        (MARGIN_TOP + t - 24.0).max(0.0)
    );
    html! {
        <>
            <div class="ruler-box" data-testid="ruler-box" {style}></div>
            <div class="ruler-label" data-testid="ruler" style={label_style}
                data-bytes={format!("{:.0}", r.bytes())} data-events={r.events().to_string()}>
                { r.describe(time) }
            </div>
        </>
    }
}
