//! Pointer and wheel handling shared by the plot canvases (the timeline, the history's segment
//! map, the flamegraph): a press of the main button that becomes a drag once it has moved past
//! [`DRAG_THRESHOLD_PX`] (released before that, it is a click), the hover set only when it
//! changes, the wheel's zoom step, and the native listeners (a non-passive `wheel`, so zooming
//! does not scroll the page, and a `ResizeObserver`) as one hook. What a drag or a click does
//! stays with each view.

use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::JsCast;
use web_sys::{HtmlCanvasElement, MouseEvent, WheelEvent};
use yew::prelude::*;

/// How far (CSS pixels) a press moves before it is a drag rather than a click.
pub const DRAG_THRESHOLD_PX: f64 = 3.0;

/// Zoom per wheel pixel: `exp(rate · deltaY)`.
const WHEEL_ZOOM_RATE: f64 = 0.0015;

/// The pointer's position in the element, in CSS pixels.
pub fn offset(e: &MouseEvent) -> (f64, f64) {
    (e.offset_x() as f64, e.offset_y() as f64)
}

/// How much a wheel event magnifies the view (> 1: zoom in, scrolling up).
pub fn wheel_zoom(e: &WheelEvent) -> f64 {
    (-e.delta_y() * WHEEL_ZOOM_RATE).exp()
}

/// Sets `hover` to `value` unless it holds it already (no render for a pointer that stays on
/// the same thing).
pub fn set_hover<T: PartialEq>(hover: &UseStateHandle<T>, value: T) {
    if **hover != value {
        hover.set(value);
    }
}

/// Which movement counts toward [`DRAG_THRESHOLD_PX`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum DragAxes {
    /// Horizontal only (a plot over time).
    X,
    /// Both, added (a map panned in two directions).
    XY,
}

/// A press of the main button: where it began, what the view kept from then (`S`), and whether
/// it has become a drag.
pub struct Press<S> {
    pub start: (f64, f64),
    pub at_start: S,
    pub moved: bool,
}

/// The press in progress, shared by a canvas's mouse handlers.
pub struct PressCell<S> {
    cell: Rc<RefCell<Option<Press<S>>>>,
    axes: DragAxes,
}

impl<S> Clone for PressCell<S> {
    fn clone(&self) -> Self {
        PressCell {
            cell: self.cell.clone(),
            axes: self.axes,
        }
    }
}

/// The press cell of a canvas, kept across renders.
#[hook]
pub fn use_press<S>(axes: DragAxes) -> PressCell<S>
where
    S: 'static,
{
    let cell = use_mut_ref(|| None::<Press<S>>);
    PressCell { cell, axes }
}

impl<S> PressCell<S> {
    /// `mousedown`: a press of the main button begins, keeping `at_start()`.
    pub fn begin(&self, e: &MouseEvent, at_start: impl FnOnce() -> S) {
        if e.button() == 0 {
            *self.cell.borrow_mut() = Some(Press {
                start: offset(e),
                at_start: at_start(),
                moved: false,
            });
        }
    }

    /// `mousemove`: while the main button is held and the press has moved past the threshold,
    /// calls `on_drag` with the press and the pointer's offset from its start, and returns
    /// its answer; `None` (not dragging) lets the caller treat the move as a hover.
    pub fn drag<R>(
        &self,
        e: &MouseEvent,
        on_drag: impl FnOnce(&Press<S>, (f64, f64)) -> R,
    ) -> Option<R> {
        let mut cell = self.cell.borrow_mut();
        let press = cell.as_mut().filter(|_| e.buttons() & 1 == 1)?;
        let (x, y) = offset(e);
        let d = (x - press.start.0, y - press.start.1);
        let dist = match self.axes {
            DragAxes::X => d.0.abs(),
            DragAxes::XY => d.0.abs() + d.1.abs(),
        };
        if dist > DRAG_THRESHOLD_PX {
            press.moved = true;
        }
        press.moved.then(|| on_drag(press, d))
    }

    /// `mouseup`: the press ends (`moved == false`: it was a click).
    pub fn release(&self) -> Option<Press<S>> {
        self.cell.borrow_mut().take()
    }

    /// `mouseleave`: the press is dropped.
    pub fn cancel(&self) {
        *self.cell.borrow_mut() = None;
    }
}

/// The canvas's native listeners, added once when it mounts and removed when it goes: a
/// non-passive `wheel` calling `on_wheel`, and a `ResizeObserver`. Returns a count that moves on
/// each change of the canvas's size (a dependency for the effects that draw).
#[hook]
pub fn use_canvas_listeners<F>(canvas: &NodeRef, on_wheel: F) -> u32
where
    F: FnMut(WheelEvent) + 'static,
{
    let resize_tick = use_state(|| 0u32);
    {
        let (canvas, tick) = (canvas.clone(), resize_tick.clone());
        use_effect_with((), move |_| {
            let cleanup = canvas
                .cast::<HtmlCanvasElement>()
                .map(|c| listen_wheel_and_resize(&c, on_wheel, tick))
                .unwrap_or_default();
            move || cleanup.into_iter().for_each(|f| f())
        });
    }
    *resize_tick
}

/// Adds the two listeners of [`use_canvas_listeners`]; returns what removes them again.
fn listen_wheel_and_resize(
    c: &HtmlCanvasElement,
    mut on_wheel: impl FnMut(WheelEvent) + 'static,
    resize_tick: UseStateHandle<u32>,
) -> Vec<Box<dyn FnOnce()>> {
    use wasm_bindgen::closure::Closure;
    let mut cleanup: Vec<Box<dyn FnOnce()>> = Vec::new();
    let wheel = gloo_events::EventListener::new_with_options(
        c,
        "wheel",
        gloo_events::EventListenerOptions::enable_prevent_default(),
        move |e| {
            if let Some(e) = e.dyn_ref::<WheelEvent>() {
                on_wheel(e.clone());
            }
        },
    );
    cleanup.push(Box::new(move || drop(wheel)));
    // An observer reports the size it first sees, too: that is the size the first draw had
    // (read here, before the drawing effects run), so the count moves only on a change, and a
    // canvas just drawn is not drawn again for nothing.
    let size = |c: &HtmlCanvasElement| (c.client_width(), c.client_height());
    let mut last = size(c);
    let mut n = 0u32;
    let canvas = c.clone();
    let onresize = Closure::<dyn FnMut()>::new(move || {
        let now = size(&canvas);
        if now != last {
            last = now;
            n += 1;
            resize_tick.set(n);
        }
    });
    if let Ok(obs) = web_sys::ResizeObserver::new(onresize.as_ref().unchecked_ref()) {
        obs.observe(c);
        cleanup.push(Box::new(move || {
            obs.disconnect();
            drop(onresize);
        }));
    }
    cleanup
}
