//! One clock for the page and the worker: `performance.now()` of whichever global scope runs
//! this (a window or a worker), in milliseconds; 0 where there is none.

use wasm_bindgen::JsCast;
use web_sys::Performance;

thread_local! {
    static PERFORMANCE: Option<Performance> = js_sys::Reflect::get(&js_sys::global(), &"performance".into())
        .ok()
        .and_then(|p| p.dyn_into::<Performance>().ok());
}

/// Milliseconds since this global scope started.
pub fn now_ms() -> f64 {
    PERFORMANCE.with(|p| p.as_ref().map_or(0.0, |p| p.now()))
}
