//! The timelines' second bar: colour by (with its legend), the reserved line, the capacity line
//! (from the trace's OOMs, a GPU, or typed in; the headroom at the peak beside it), and the band
//! filters. The worker colours (`memlens_core::colour`), core places the lines
//! (`memlens_core::layout::lines`); this bar asks for what is needed and shows the choices.

use crate::page::app_state::{Action, AppState, LayoutKey, SharedLayout};
use crate::page::bridge::Bridge;
use crate::page::theme;
use crate::page::view_options::{Capacity, TimelineOptions};
use memlens_core::colour::{ColourBy, Colouring};
use memlens_core::layout::axis::format_bytes;
use memlens_core::layout::lines::{capacity_from_ooms, headroom_bytes, parse_size, GPUS};
use memlens_core::layout::{MarkerKind, TimelineKind};
use std::rc::Rc;
use wasm_bindgen::JsCast;
use web_sys::{HtmlInputElement, HtmlSelectElement};
use yew::prelude::*;

/// The Segments layout of the current file and device (its live total is reserved memory).
fn reserved_key(state: &AppState) -> Option<LayoutKey> {
    let k = state.layout_key()?;
    Some(LayoutKey {
        kind: TimelineKind::Segments,
        ..k
    })
}

/// Whether the current layout has an `oom` entry that says how much the device had free.
fn has_oom_free(state: &AppState) -> bool {
    state.current_layout().is_some_and(|l| {
        l.0.markers
            .iter()
            .any(|m| m.kind == MarkerKind::Oom && m.device_free_bytes.is_some())
    })
}

/// Whether what is drawn needs the Segments layout: the reserved line, or the capacity from
/// the trace's OOMs (reserved at each).
fn wants_reserved(state: &AppState) -> bool {
    state.opts.reserved_line || (state.opts.capacity == Capacity::FromTrace && has_oom_free(state))
}

/// The reserved layout, when what is drawn needs it and it has arrived.
pub fn reserved_layout(state: &AppState) -> Option<SharedLayout> {
    wants_reserved(state)
        .then(|| state.layouts.get(&reserved_key(state)?).cloned())
        .flatten()
}

/// Asks the worker for the colouring of the current layout and, when a line needs it, the
/// Segments layout.
#[hook]
pub fn use_option_requests(state: &UseReducerHandle<AppState>, bridge: Option<Rc<Bridge>>) {
    let key = state
        .layout_key()
        .filter(|_| state.current_layout().is_some());
    let by = state.opts.colour_by;
    let have = state.current_colouring().is_some();
    {
        let bridge = bridge.clone();
        use_effect_with((key, by, have), move |(key, by, have)| {
            if let (Some(b), Some(k), false) = (&bridge, key, *have) {
                if *by != ColourBy::Stack {
                    b.request_colours(*k, *by);
                }
            }
        });
    }
    let want_reserved = wants_reserved(state)
        .then(|| reserved_key(state))
        .flatten()
        .filter(|k| !state.layouts.contains_key(k));
    use_effect_with(want_reserved, move |want| {
        if let (Some(b), Some(k)) = (&bridge, want) {
            b.request_layout(*k);
        }
    });
}

/// The capacity line: bytes and its words (name, size, headroom at the peak).
pub fn capacity_line(state: &AppState) -> Option<(u64, String)> {
    let (bytes, name) = match state.opts.capacity {
        Capacity::Off => return None,
        Capacity::FromTrace => {
            let reserved = reserved_layout(state)?;
            let c = capacity_from_ooms(&state.current_layout()?.0, &reserved.0)?;
            (c, "capacity (OOM: device_free + reserved)".to_string())
        }
        Capacity::Gpu(i) => GPUS.get(i).map(|g| (g.1, g.0.to_string()))?,
        Capacity::Bytes(b) => (b, "capacity".to_string()),
    };
    let peak = peak_reserved_bytes(state);
    let headroom = match headroom_bytes(bytes, peak) {
        Some(h) => format!("headroom at peak {}", format_bytes(h as f64)),
        None => format!("peak reserved {} is above it", format_bytes(peak as f64)),
    };
    Some((
        bytes,
        format!("{name}: {} · {headroom}", format_bytes(bytes as f64)),
    ))
}

/// The device's highest reserved total (the summary strip's number).
fn peak_reserved_bytes(state: &AppState) -> u64 {
    let info = state.current_info();
    let device = state.device.or(info.and_then(|i| i.default_device));
    info.and_then(|i| i.devices.iter().find(|d| Some(d.device) == device))
        .map_or(0, |d| d.peak_reserved_bytes.max(0) as u64)
}

fn target_value(e: &Event) -> Option<String> {
    let t = e.target()?;
    if let Some(s) = t.dyn_ref::<HtmlSelectElement>() {
        return Some(s.value());
    }
    t.dyn_into::<HtmlInputElement>().ok().map(|i| i.value())
}

fn checked(e: &Event) -> bool {
    e.target()
        .and_then(|t| t.dyn_into::<HtmlInputElement>().ok())
        .is_some_and(|i| i.checked())
}

/// A callback that edits the options with what an event carries.
fn edit(
    state: &UseReducerHandle<AppState>,
    f: impl Fn(&mut TimelineOptions, &Event) + 'static,
) -> Callback<Event> {
    let s = state.clone();
    Callback::from(move |e: Event| {
        let mut o = s.opts;
        f(&mut o, &e);
        if o != s.opts {
            s.dispatch(Action::SetOptions(o));
        }
    })
}

/// The legend of the colouring shown.
fn legend(c: Option<&Rc<Colouring>>, by: ColourBy) -> Html {
    let colours = theme::colours();
    let Some(c) = c.filter(|_| by != ColourBy::Stack) else {
        if by != ColourBy::Stack {
            return html! { <span class="legend muted small" data-testid="legend" data-state="loading">{ "colouring…" }</span> };
        }
        let swatches = colours.bands.iter().take(10);
        return html! {
            <span class="legend small" data-testid="legend" data-by="stack">
                { for swatches.map(|hex| html! { <span class="swatch" style={format!("background:{hex}")}></span> }) }
                <span class="muted">{ " each allocation its own colour, 10 in turn (as upstream)" }</span>
            </span>
        };
    };
    html! {
        <span class="legend small" data-testid="legend" data-by={by.key()}>
            { for c.legend.iter().map(|l| {
                let hex = colours.bands.get(l.colour as usize).copied().unwrap_or("#808080");
                html! {
                    <span class="legend-item" data-colour={hex} title={l.label.clone()}>
                        <span class="swatch" style={format!("background:{hex}")}></span>{ l.label.clone() }
                    </span>
                }
            }) }
        </span>
    }
}

/// The bar under the search: colour by, lines, filters, and the legend.
pub fn controls(state: &UseReducerHandle<AppState>) -> Html {
    let o = state.opts;
    let on_colour = edit(state, |o, e| {
        if let Some(c) = target_value(e).and_then(|v| ColourBy::from_key(&v)) {
            o.colour_by = c;
        }
    });
    let on_reserved = edit(state, |o, e| o.reserved_line = checked(e));
    let on_capacity = edit(state, |o, e| {
        o.capacity = match target_value(e).as_deref() {
            Some("trace") => Capacity::FromTrace,
            Some("off") => Capacity::Off,
            Some("typed") => Capacity::Bytes(80 << 30),
            Some(v) => v.parse().map_or(Capacity::Off, Capacity::Gpu),
            None => return,
        }
    });
    let on_typed = edit(state, |o, e| {
        if let Some(b) = target_value(e).and_then(|v| parse_size(&v, 1 << 30)) {
            o.capacity = Capacity::Bytes(b);
        }
    });
    let on_hide_pre = edit(state, |o, e| o.filter.hide_before_trace = checked(e));
    let on_hide_never = edit(state, |o, e| o.filter.hide_never_freed = checked(e));
    let on_min = edit(state, |o, e| {
        if let Some(v) = target_value(e) {
            o.filter.min_size_bytes = if v.trim().is_empty() {
                0
            } else {
                parse_size(&v, 1).unwrap_or(o.filter.min_size_bytes)
            };
        }
    });
    let cap_value = match o.capacity {
        Capacity::FromTrace => "trace".to_string(),
        Capacity::Off => "off".to_string(),
        Capacity::Bytes(_) => "typed".to_string(),
        Capacity::Gpu(i) => i.to_string(),
    };
    let oom = has_oom_free(state);
    let cap = capacity_line(state);
    let min_text = if o.filter.min_size_bytes > 0 {
        format_bytes(o.filter.min_size_bytes as f64)
    } else {
        String::new()
    };
    html! {
        <div class="view-controls options" data-testid="timeline-options">
            <label class="small">{ "colour by " }
                <select data-testid="colour-by" onchange={on_colour}>
                    { for ColourBy::ALL.iter().map(|c| html! {
                        <option value={c.key()} selected={*c == o.colour_by}>{ c.title() }</option>
                    }) }
                </select>
            </label>
            <label class="small"><input type="checkbox" data-testid="reserved-line" checked={o.reserved_line} onchange={on_reserved} />{ " reserved line" }</label>
            <label class="small">{ "capacity " }
                <select data-testid="capacity" onchange={on_capacity}>
                    <option value="off" selected={cap_value == "off"}>{ "off" }</option>
                    <option value="trace" selected={cap_value == "trace"} disabled={!oom}>{ if oom { "from the trace's OOM" } else { "from the trace's OOM (it has none)" } }</option>
                    { for GPUS.iter().enumerate().map(|(i, g)| html! {
                        <option value={i.to_string()} selected={cap_value == i.to_string()}>{ format!("{} ({})", g.0, format_bytes(g.1 as f64)) }</option>
                    }) }
                    <option value="typed" selected={cap_value == "typed"}>{ "typed in…" }</option>
                </select>
            </label>
            if let Capacity::Bytes(b) = o.capacity {
                <input type="text" class="search narrow" data-testid="capacity-bytes" placeholder="e.g. 80 GiB"
                    value={format_bytes(b as f64)} onchange={on_typed} spellcheck="false" />
            }
            if let Some((_, text)) = &cap {
                <span class="small capacity-text" data-testid="capacity-text">{ text.clone() }</span>
            }
            <span class="spacer"></span>
            <label class="small"><input type="checkbox" data-testid="hide-before-trace" checked={o.filter.hide_before_trace} onchange={on_hide_pre} />{ " hide pre-trace" }</label>
            <label class="small"><input type="checkbox" data-testid="hide-never-freed" checked={o.filter.hide_never_freed} onchange={on_hide_never} />{ " hide never freed" }</label>
            <input type="text" class="search narrow" data-testid="min-size" placeholder="min size, e.g. 1 MiB"
                value={min_text}
                onchange={on_min} spellcheck="false" />
        </div>
    }
}

/// The legend row (under the bars).
pub fn legend_row(state: &AppState) -> Html {
    html! {
        <div class="legend-row">{ legend(state.current_colouring(), state.opts.colour_by) }</div>
    }
}
