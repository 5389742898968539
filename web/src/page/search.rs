//! The timeline's controls above the plot: search by address (hex) and by stack-frame text,
//! with the number of matches, and the x axis (event index or wall-clock time). Queries go to
//! the worker (which holds the frames) on every keystroke; the reply, a bitset over the
//! layout's elements, becomes [`memlens_core::layout::Matches`] for the renderer in the
//! reducer (`crate::page::app_state::SearchOutcome`).

use crate::page::app_state::{Action, AppState};
use crate::page::bridge::Bridge;
use crate::wire::protocol::ToWorker;
use std::rc::Rc;
use wasm_bindgen::JsCast;
use wasm_bindgen::JsValue;
use web_sys::{HtmlInputElement, HtmlSelectElement};
use yew::prelude::*;

/// Sends the current query for the current layout whenever either changes.
#[hook]
pub fn use_search_requests(state: &UseReducerHandle<AppState>, bridge: Option<Rc<Bridge>>) {
    let key = state.layout_key();
    let have = state.current_layout().is_some();
    let text = state.search_text.clone();
    let seq = state.search_seq;
    let regex = state.opts.regex;
    use_effect_with((key, have, text, seq), move |(key, have, text, seq)| {
        if let (Some(b), Some(k), true) = (&bridge, key, *have) {
            if !text.0.trim().is_empty() || !text.1.trim().is_empty() {
                b.send_search(&ToWorker::Search {
                    id: k.file,
                    device: k.device,
                    kind: k.kind,
                    seq: *seq,
                    address: text.0.clone(),
                    frame: text.1.clone(),
                    regex,
                });
            }
        }
    });
}

fn input_value(e: &InputEvent) -> Option<String> {
    e.target()
        .and_then(|t| t.dyn_into::<HtmlInputElement>().ok())
        .map(|i| i.value())
}

/// The bar above a timeline: two search boxes, the match count, and the x axis selector.
pub fn controls(state: &UseReducerHandle<AppState>) -> Html {
    let on_addr = {
        let s = state.clone();
        Callback::from(move |e: InputEvent| {
            if let Some(v) = input_value(&e) {
                let frame = s.search_text.1.clone();
                s.dispatch(Action::SetSearch { address: v, frame });
            }
        })
    };
    let on_frame = {
        let s = state.clone();
        Callback::from(move |e: InputEvent| {
            if let Some(v) = input_value(&e) {
                let address = s.search_text.0.clone();
                s.dispatch(Action::SetSearch { address, frame: v });
            }
        })
    };
    let on_axis = {
        let s = state.clone();
        Callback::from(move |e: Event| {
            if let Some(v) = e
                .target()
                .and_then(|t| t.dyn_into::<HtmlSelectElement>().ok())
                .map(|s| s.value())
            {
                s.dispatch(Action::SetTimeAxis(v == "time"));
            }
        })
    };
    let on_regex = {
        let s = state.clone();
        Callback::from(move |e: Event| {
            let on = e
                .target()
                .and_then(|t| t.dyn_into::<HtmlInputElement>().ok())
                .is_some_and(|i| i.checked());
            s.dispatch(Action::SetOptions(
                crate::page::view_options::TimelineOptions {
                    regex: on,
                    ..s.opts
                },
            ));
        })
    };
    let has_times = state
        .current_layout()
        .is_some_and(|l| !l.0.time_us.is_empty());
    let status = search_status(state);
    let time = state.time_axis && has_times;
    let origin = time_origin(state).filter(|_| time);
    html! {
        <div class="view-controls" data-testid="view-controls">
            <input type="search" class="search" placeholder="Search address (hex)…" data-testid="search-address"
                value={state.search_text.0.clone()} oninput={on_addr} spellcheck="false" />
            <input type="search" class="search wide" data-testid="search-frame"
                placeholder={if state.opts.regex { "Search stack frame (regular expression)…" } else { "Search stack frame…" }}
                value={state.search_text.1.clone()} oninput={on_frame} spellcheck="false" />
            <label class="small" title="the frame search is a regular expression (case-insensitive)">
                <input type="checkbox" data-testid="search-regex" checked={state.opts.regex} onchange={on_regex} />{ " .* regex" }
            </label>
            { status }
            <span class="spacer"></span>
            <label class="small">{ "x axis " }
                <select data-testid="x-axis" onchange={on_axis}>
                    <option value="events" selected={!time}>{ "event index" }</option>
                    <option value="time" selected={time} disabled={!has_times}>
                        { if has_times { "wall-clock time" } else { "wall-clock time (no times)" } }
                    </option>
                </select>
            </label>
            if let Some(o) = origin {
                <span class="muted small" data-testid="time-origin">{ format!("0 s = {o}") }</span>
            }
            <span class="muted small hint">{ "drag: pan · shift-drag: zoom to a range · alt-drag: ruler · wheel or W/S: zoom · A/D: pan · ?: all keys" }</span>
        </div>
    }
}

/// The search's state beside the boxes: searching, its error, or the count and its time.
fn search_status(state: &AppState) -> Html {
    let active = !state.search_text.0.trim().is_empty() || !state.search_text.1.trim().is_empty();
    let outcome = state
        .search
        .as_ref()
        .filter(|o| Some(o.key) == state.layout_key() && o.seq == state.search_seq);
    match (active, outcome) {
        (false, _) => html! {},
        (true, None) => {
            html! { <span class="muted small" data-testid="search-count">{ "searching…" }</span> }
        }
        (true, Some(o)) => match &o.error {
            Some(e) => {
                html! { <span class="search-error small" data-testid="search-count" data-error="1">{ e.clone() }</span> }
            }
            None => html! {
                <span class="small" data-testid="search-count" data-count={o.count.to_string()}>
                    { format!("{} match{}", o.count, if o.count == 1 { "" } else { "es" }) }
                    <span class="muted">{ format!(" ({:.0} ms)", o.search_ms) }</span>
                </span>
            },
        },
    }
}

/// On the time axis, what time 0 is: the first event's `time_us`, as UTC.
fn time_origin(state: &AppState) -> Option<String> {
    let us = state.current_layout()?.0.time_us.first().copied()?;
    Some(
        js_sys::Date::new(&JsValue::from_f64(us as f64 / 1000.0))
            .to_iso_string()
            .as_string()
            .unwrap_or_default(),
    )
}
