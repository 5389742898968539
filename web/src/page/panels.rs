//! Small presentational pieces: the summary strip, the stack panel, the allocator settings,
//! load progress and the empty state. They format what they are given and nothing else.

use crate::wire::protocol::{FileInfo, PartialInfo};
use memlens_core::layout::axis::format_bytes;
use memlens_core::layout::context::{ElementContext, NO_FRAMES_REASON};
use memlens_core::model::glossary::{definition, RESERVED_MINUS_ALLOCATED};
use memlens_core::DeviceStats;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct SummaryProps {
    pub summary: DeviceStats,
}

/// `(key, name, value, is_bytes)` in display order; keys are the page contract's
/// `data-metric`s (the field names of `memlens stats --json`).
fn metrics(s: &DeviceStats) -> [(&'static str, &'static str, i128, bool); 9] {
    [
        ("reserved_bytes", "Reserved", s.reserved_bytes.into(), true),
        (
            "allocated_bytes",
            "Allocated",
            s.allocated_bytes.into(),
            true,
        ),
        ("active_bytes", "Active", s.active_bytes.into(), true),
        (
            "inactive_split_bytes",
            "Inactive split",
            s.inactive_split_bytes.into(),
            true,
        ),
        (
            "largest_free_block_bytes",
            "Largest free block",
            s.largest_free_block_bytes.into(),
            true,
        ),
        (
            "timeline_peak_bytes",
            "Timeline peak",
            s.timeline_peak_bytes.into(),
            true,
        ),
        (
            "peak_reserved_bytes",
            "Peak reserved",
            s.peak_reserved_bytes.into(),
            true,
        ),
        (
            "trace_entries",
            "Trace entries",
            s.trace_entries.into(),
            false,
        ),
        (
            RESERVED_MINUS_ALLOCATED,
            "Reserved − allocated",
            i128::from(s.reserved_bytes) - i128::from(s.allocated_bytes),
            true,
        ),
    ]
}

/// A metric's hover text: its definition (core's glossary), then the exact value.
pub fn metric_title(key: &str, exact: &str) -> String {
    match definition(key) {
        Some(d) => format!("{d}\n({exact})"),
        None => exact.to_string(),
    }
}

#[function_component(SummaryStrip)]
pub fn summary_strip(p: &SummaryProps) -> Html {
    let s = &p.summary;
    html! {
        <div class="summary" data-testid="summary" data-device={s.device.to_string()}>
            { for metrics(s).into_iter().map(|(key, name, v, bytes)| {
                let text = if bytes { format_bytes(v as f64) } else { v.to_string() };
                html! {
                    <div class="metric" data-metric={key} data-value={v.to_string()}
                        data-definition={definition(key)} title={metric_title(key, &v.to_string())}>
                        <span class="metric-name">{ name }</span>
                        <span class="metric-value">{ text }</span>
                    </div>
                }
            }) }
        </div>
    }
}

#[derive(Properties, PartialEq)]
pub struct StackProps {
    pub selected: Option<u32>,
    pub context: Option<ElementContext>,
    pub loading: bool,
    pub full: bool,
    pub on_toggle_full: Callback<()>,
    pub on_unpin: Callback<()>,
    /// Show live memory after the pinned allocation's alloc as a flamegraph (Diagnosis view).
    #[prop_or_default]
    pub on_live_memory: Option<Callback<()>>,
}

fn time_text(us: Option<i64>) -> Option<String> {
    let us = us?;
    let d = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(us as f64 / 1000.0));
    Some(d.to_iso_string().as_string().unwrap_or_default())
}

#[function_component(StackPanel)]
pub fn stack_panel(p: &StackProps) -> Html {
    let toggle = {
        let cb = p.on_toggle_full.clone();
        Callback::from(move |_| cb.emit(()))
    };
    let unpin = {
        let cb = p.on_unpin.clone();
        Callback::from(move |_| cb.emit(()))
    };
    let body = match (&p.selected, &p.context) {
        (None, _) => {
            html! { <p class="muted">{ "Click a band to pin it and see where it was allocated." }</p> }
        }
        (Some(_), None) if p.loading => html! { <p class="muted">{ "Loading stack…" }</p> },
        (Some(_), None) => html! { <p class="muted">{ "No details for this element." }</p> },
        (Some(_), Some(c)) => {
            let times = match (time_text(c.alloc_time_us), time_text(c.free_time_us)) {
                (Some(a), Some(b)) => format!("{a} → {b}"),
                (Some(a), None) => format!("{a} →"),
                (None, Some(b)) => format!("→ {b}"),
                (None, None) => String::new(),
            };
            html! {
                <>
                    <div class="ctx-head">
                        <b>{ &c.label }</b>{ " " }{ format_bytes(c.size_bytes as f64) }{ format!(" ({} bytes)", c.size_bytes) }
                        { format!(", stream {}", c.stream) }
                    </div>
                    <div class="ctx-line">{ format!("alive {}", c.alive) }</div>
                    if !times.is_empty() { <div class="ctx-line muted">{ times }</div> }
                    { for c.notes.iter().map(|n| html! { <div class="ctx-note">{ n }</div> }) }
                    if c.frames.is_empty() {
                        <p class="ctx-note">{ NO_FRAMES_REASON }</p>
                    } else {
                        <crate::page::stack_frames::StackFrames context={c.clone()} />
                    }
                    if c.hidden_frames > 0 {
                        <div class="muted">{ format!("{} interpreter/dispatcher frame{} hidden (tick “full stack” to see {})", c.hidden_frames, if c.hidden_frames == 1 { "" } else { "s" }, if c.hidden_frames == 1 { "it" } else { "them" }) }</div>
                    }
                    if !c.forward_frames.is_empty() {
                        <div class="ctx-line">{ "=== Forward Pass Stack Trace (where this tensor was created) ===" }</div>
                        <pre class="frames">{ c.forward_frames.join("") }</pre>
                    }
                </>
            }
        }
    };
    html! {
        <aside class="stack-panel" data-testid="stack-panel">
            <div class="panel-head">
                <span>{ "Stack" }</span>
                <label class="toggle"><input type="checkbox" checked={p.full} onchange={toggle} />{ " full stack" }</label>
                if p.selected.is_some() { <button class="link" onclick={unpin}>{ "unpin" }</button> }
                if let (Some(_), Some(cb)) = (p.selected, &p.on_live_memory) {
                    <button class="link" data-testid="stack-live-memory" title="live memory right after this allocation, as a flamegraph (Diagnosis) with its stack outlined"
                        onclick={cb.reform(|_: MouseEvent| ())}>{ "live memory here" }</button>
                }
            </div>
            { body }
        </aside>
    }
}

#[derive(Properties, PartialEq)]
pub struct InfoProps {
    pub info: std::rc::Rc<FileInfo>,
}

#[function_component(SettingsView)]
pub fn settings_view(p: &InfoProps) -> Html {
    let conf = p.info.alloc_conf.as_ref().map(|(var, text)| {
        let text = if text.is_empty() { "(empty: the defaults)" } else { text };
        html! { <p data-testid="alloc-conf" data-var={var.clone()}><code>{ var }</code>{ " = " }<code>{ text }</code></p> }
    });
    match &p.info.allocator_settings {
        Some(s) => html! {
            <>
                { for conf }
                <pre class="settings" data-testid="settings">{ s }</pre>
            </>
        },
        None => {
            html! { <p class="muted" data-testid="settings">{ "No allocator settings found." }</p> }
        }
    }
}

#[function_component(Warnings)]
pub fn warnings(p: &InfoProps) -> Html {
    let w = &p.info.warnings;
    if w.is_empty() {
        return html! {};
    }
    html! {
        <details class="warnings">
            <summary>{ format!("{} warning{} about this file", w.len(), if w.len() == 1 { "" } else { "s" }) }</summary>
            <ul>{ for w.iter().map(|x| html! { <li>{ x }</li> }) }</ul>
        </details>
    }
}

#[derive(Properties, PartialEq)]
pub struct ProgressProps {
    pub name: String,
    pub done: f64,
    pub total: f64,
    pub on_cancel: Callback<()>,
}

#[function_component(LoadProgress)]
pub fn load_progress(p: &ProgressProps) -> Html {
    let cancel = {
        let cb = p.on_cancel.clone();
        Callback::from(move |_| cb.emit(()))
    };
    let total = if p.total > 0.0 { p.total } else { 1.0 };
    html! {
        <div class="progress" data-testid="progress">
            <div>{ format!("Decoding {} …", p.name) }</div>
            <progress max={total.to_string()} value={p.done.to_string()} />
            <div class="muted">{ format!("{} of {} processed", format_bytes(p.done), format_bytes(p.total)) }</div>
            <button onclick={cancel} data-testid="cancel">{ "Cancel" }</button>
        </div>
    }
}

#[derive(Properties, PartialEq)]
pub struct EmptyProps {
    pub on_example: Callback<()>,
}

#[function_component(EmptyState)]
pub fn empty_state(p: &EmptyProps) -> Html {
    let example = {
        let cb = p.on_example.clone();
        Callback::from(move |_| cb.emit(()))
    };
    html! {
        <div class="empty" data-testid="empty">
            <h2>{ "Drop a PyTorch memory snapshot anywhere on this page" }</h2>
            <p>{ "or choose one with “Open snapshot…” above (pickle of any protocol, JSON, or an HTML file written by torch.cuda._memory_viz)." }</p>
            <p><button class="primary" onclick={example} data-testid="open-example">{ "Open the built-in example" }</button></p>
            <p class="privacy">{ "Nothing leaves this machine: the file is read and decoded inside this browser tab, and this page loads nothing from any other site." }</p>
        </div>
    }
}

/// Above the picture of the trace read so far: what it shows and the numbers final already
/// (`data-events`: the entries drawn; `data-device`, `data-events-total`: entries of all
/// devices so far).
pub fn partial_note(p: &PartialInfo) -> Html {
    let device = p.device.unwrap_or(0);
    let drawn = p.events.get(device as usize).copied().unwrap_or(0);
    let total: u64 = p.events.iter().map(|&n| n as u64).sum();
    let seen = p.events.iter().filter(|&&n| n > 0).count();
    html! {
        <p class="note small partial-note" data-testid="partial" data-events={drawn.to_string()}
            data-device={device.to_string()} data-events-total={total.to_string()}>
            <b>{ format!("Loading: events 0..{drawn} of device {device} so far") }</b>
            { format!(
                " · {} · {} of {} read · {seen} device{} with entries · {total} entries so far. Totals are exact for these events; allocations made before the trace show where these events free them, the others once the whole file is read.",
                p.encoding,
                format_bytes(p.done_bytes),
                format_bytes(p.total_bytes),
                if seen == 1 { "" } else { "s" },
            ) }
        </p>
    }
}
