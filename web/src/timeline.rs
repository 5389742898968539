//! The timeline view: canvas, overview strip and tooltip, with wheel zoom around the pointer,
//! drag to pan, click to pin, double-click or `0` to reset, `+`/`-`/arrows on the keyboard.
//! It only reads the layout and reports window changes and pins upward.

use crate::canvas::{draw_overview, draw_timeline, MARGIN_LEFT, MARGIN_RIGHT};
use crate::state::SharedLayout;
use memlens_core::layout::context::tooltip;
use memlens_core::layout::{TimelineKind, Viewport};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{HtmlCanvasElement, KeyboardEvent, MouseEvent, WheelEvent};
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct Props {
    pub layout: SharedLayout,
    pub kind: TimelineKind,
    pub window: Option<(f64, f64)>,
    pub selected: Option<u32>,
    pub on_window: Callback<Option<(f64, f64)>>,
    pub on_pin: Callback<Option<u32>>,
    /// Called after each paint (the page measures time to first paint with it).
    pub on_painted: Callback<()>,
}

struct Drag {
    start_px: f64,
    start_window: (f64, f64),
    moved: bool,
}

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

fn zoom(window: (f64, f64), at: f64, factor: f64, x_end: f64) -> (f64, f64) {
    let (a, b) = window;
    let at = at.clamp(a, b);
    clamp_window(at - (at - a) * factor, at + (b - at) * factor, x_end)
}

#[function_component(TimelineView)]
pub fn timeline_view(p: &Props) -> Html {
    let canvas = use_node_ref();
    let overview = use_node_ref();
    let hover = use_state(|| None::<(u32, f64, f64)>);
    let drag = use_mut_ref(|| None::<Drag>);
    let resize_tick = use_state(|| 0u32);
    let x_end = p.layout.0.x_end() as f64;
    let window = p
        .window
        .map(|(a, b)| clamp_window(a, b, x_end))
        .unwrap_or((0.0, x_end));
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

    // Draw when what is drawn changes (not on hover: the tooltip is a DOM element).
    {
        let (canvas, overview, live, on_painted) = (
            canvas.clone(),
            overview.clone(),
            live.clone(),
            p.on_painted.clone(),
        );
        let deps = (p.layout.clone(), window, p.selected, *resize_tick);
        use_effect_with(deps, move |(layout, window, selected, _)| {
            if let Some(c) = canvas.cast::<HtmlCanvasElement>() {
                let vp = draw_timeline(&c, &layout.0, window.0, window.1, *selected);
                live.borrow_mut().vp = vp;
            }
            if let Some(o) = overview.cast::<HtmlCanvasElement>() {
                draw_overview(&o, &layout.0, window.0, window.1);
            }
            on_painted.emit(());
        });
    }

    // Native listeners: a non-passive wheel (to stop page scroll) and a resize observer.
    {
        let (canvas, live, resize_tick) = (canvas.clone(), live.clone(), resize_tick.clone());
        use_effect_with((), move |_| {
            let mut cleanup: Vec<Box<dyn FnOnce()>> = Vec::new();
            if let Some(c) = canvas.cast::<HtmlCanvasElement>() {
                let live2 = live.clone();
                let wheel = Closure::<dyn FnMut(WheelEvent)>::new(move |e: WheelEvent| {
                    e.prevent_default();
                    let l = live2.borrow();
                    let (Some(layout), Some(vp)) = (&l.layout, l.vp) else {
                        return;
                    };
                    let at = vp.x_data(e.offset_x() as f64 - MARGIN_LEFT);
                    let factor = (e.delta_y() * 0.0015).exp();
                    let w = zoom(l.window, at, factor, layout.0.x_end() as f64);
                    l.on_window.emit(Some(w));
                });
                let opts = web_sys::AddEventListenerOptions::new();
                opts.set_passive(false);
                let _ = c.add_event_listener_with_callback_and_add_event_listener_options(
                    "wheel",
                    wheel.as_ref().unchecked_ref(),
                    &opts,
                );
                let c2 = c.clone();
                cleanup.push(Box::new(move || {
                    let _ = c2.remove_event_listener_with_callback(
                        "wheel",
                        wheel.as_ref().unchecked_ref(),
                    );
                }));
            }
            // Redraw whenever the canvas's box changes size (window resize, panels appearing).
            if let Some(c) = canvas.cast::<HtmlCanvasElement>() {
                let tick = resize_tick.clone();
                let mut n = 0u32;
                let onresize = Closure::<dyn FnMut()>::new(move || {
                    n += 1;
                    tick.set(n);
                });
                if let Ok(obs) = web_sys::ResizeObserver::new(onresize.as_ref().unchecked_ref()) {
                    obs.observe(&c);
                    cleanup.push(Box::new(move || {
                        obs.disconnect();
                        drop(onresize);
                    }));
                }
            }
            move || cleanup.into_iter().for_each(|f| f())
        });
    }

    let hit = {
        let live = live.clone();
        move |e: &MouseEvent| -> Option<u32> {
            let l = live.borrow();
            let (layout, vp) = (l.layout.as_ref()?, l.vp?);
            let (x, y) = (
                e.offset_x() as f64 - MARGIN_LEFT,
                e.offset_y() as f64 - crate::canvas::MARGIN_TOP,
            );
            if x < 0.0 || y < 0.0 || x > vp.width_px || y > vp.height_px {
                return None;
            }
            layout.0.hit(vp.x_data(x), vp.y_data(y)).map(|e| e as u32)
        }
    };
    let onmousedown = {
        let drag = drag.clone();
        Callback::from(move |e: MouseEvent| {
            if e.button() == 0 {
                *drag.borrow_mut() = Some(Drag {
                    start_px: e.offset_x() as f64,
                    start_window: window,
                    moved: false,
                });
            }
        })
    };
    let onmousemove = {
        let (drag, live, hover, hit) = (drag.clone(), live.clone(), hover.clone(), hit.clone());
        Callback::from(move |e: MouseEvent| {
            let mut d = drag.borrow_mut();
            if let Some(dr) = d.as_mut().filter(|_| e.buttons() & 1 == 1) {
                let dx = e.offset_x() as f64 - dr.start_px;
                if dx.abs() > 3.0 {
                    dr.moved = true;
                }
                if dr.moved {
                    let l = live.borrow();
                    if let (Some(layout), Some(vp)) = (&l.layout, l.vp) {
                        let shift = dx / vp.sx();
                        let (a, b) = dr.start_window;
                        l.on_window.emit(Some(clamp_window(
                            a - shift,
                            b - shift,
                            layout.0.x_end() as f64,
                        )));
                    }
                    hover.set(None);
                    return;
                }
            }
            drop(d);
            let h = hit(&e).map(|el| (el, e.offset_x() as f64, e.offset_y() as f64));
            if *hover != h {
                hover.set(h);
            }
        })
    };
    let onmouseup = {
        let (drag, on_pin, hit) = (drag.clone(), p.on_pin.clone(), hit.clone());
        Callback::from(move |e: MouseEvent| {
            let d = drag.borrow_mut().take();
            if d.is_some_and(|d| !d.moved) {
                on_pin.emit(hit(&e));
            }
        })
    };
    let onmouseleave = {
        let (drag, hover) = (drag.clone(), hover.clone());
        Callback::from(move |_| {
            *drag.borrow_mut() = None;
            hover.set(None);
        })
    };
    let ondblclick = {
        let on_window = p.on_window.clone();
        Callback::from(move |_| on_window.emit(None))
    };
    let onkeydown = {
        let on_window = p.on_window.clone();
        Callback::from(move |e: KeyboardEvent| {
            let (a, b) = window;
            let mid = (a + b) / 2.0;
            let w = match e.key().as_str() {
                "+" | "=" => Some(zoom(window, mid, 0.8, x_end)),
                "-" | "_" => Some(zoom(window, mid, 1.25, x_end)),
                "ArrowLeft" => Some(clamp_window(a - (b - a) * 0.1, b - (b - a) * 0.1, x_end)),
                "ArrowRight" => Some(clamp_window(a + (b - a) * 0.1, b + (b - a) * 0.1, x_end)),
                "0" | "Home" => None,
                _ => return,
            };
            e.prevent_default();
            on_window.emit(w);
        })
    };
    // Overview: click or drag to move the window there.
    let overview_move = {
        let (overview, on_window) = (overview.clone(), p.on_window.clone());
        move |e: &MouseEvent| {
            let Some(o) = overview.cast::<HtmlCanvasElement>() else {
                return;
            };
            let pw = (o.client_width() as f64 - MARGIN_LEFT - MARGIN_RIGHT).max(1.0);
            let at = (e.offset_x() as f64 - MARGIN_LEFT) / pw * x_end;
            let half = (window.1 - window.0) / 2.0;
            on_window.emit(Some(clamp_window(at - half, at + half, x_end)));
        }
    };
    let ov_down = {
        let m = overview_move.clone();
        Callback::from(move |e: MouseEvent| m(&e))
    };
    let ov_move = Callback::from(move |e: MouseEvent| {
        if e.buttons() & 1 == 1 {
            overview_move(&e)
        }
    });

    let tip =
        hover.and_then(|(el, x, y)| tooltip(&p.layout.0, p.kind, el as usize).map(|t| (t, x, y)));
    html! {
        <div class="timeline">
            <div class="plot">
                <canvas ref={canvas} class="plot-canvas" tabindex="0" data-testid="timeline-canvas"
                    {onmousedown} {onmousemove} {onmouseup} {onmouseleave} {ondblclick} {onkeydown} />
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
