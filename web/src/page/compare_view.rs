//! The Compare view (`#view=compare`): two open files, A and B (a change's before and after,
//! two ranks), compared at their timeline peaks per device — peak A, peak B, the change — and
//! what is alive there by user frame and by ledger class side by side, largest change first
//! ("+1.2 GiB at model.py:88:forward", "new: …", "gone: …"), from core's
//! `analysis::compare::compare_peaks`. A frame row opens B on the timeline with the frame
//! searched.

use crate::page::app_state::AppState;
use memlens_core::analysis::compare::DeviceComparison;
use memlens_core::analysis::verdict::human;
use wasm_bindgen::JsCast;
use web_sys::HtmlSelectElement;
use yew::prelude::*;

/// Frame rows per device.
const ROWS: usize = 20;

#[derive(Properties, PartialEq)]
pub struct Props {
    pub state: std::rc::Rc<AppState>,
    /// Pick A (`true`) or B.
    pub on_pick: Callback<(bool, u32)>,
    /// Open B on the timeline with this frame searched.
    pub on_frame: Callback<String>,
}

fn signed(b: i64) -> String {
    format!(
        "{}{}",
        if b < 0 { "−" } else { "+" },
        human(b.unsigned_abs())
    )
}

fn device_table(d: &DeviceComparison, on_frame: &Callback<String>) -> Html {
    html! {
        <section data-testid="compare-device" data-device={d.device.to_string()} data-change={d.peak_change_bytes.to_string()}>
            <h3>{ format!("device {}: timeline peak {} → {} ({}{})", d.device, human(d.a.timeline_peak_bytes.max(0) as u64), human(d.b.timeline_peak_bytes.max(0) as u64), signed(d.peak_change_bytes), d.peak_change_pct.map_or(String::new(), |p| format!(", {p:+.1}%"))) }</h3>
            <table class="diag-table">
                <thead><tr><th>{ "change" }</th><th>{ "A" }</th><th>{ "B" }</th><th>{ "user frame" }</th></tr></thead>
                <tbody>
                    { for d.by_frame.iter().filter(|c| c.change_bytes != 0).take(ROWS).map(|c| {
                        let f = c.frame.clone();
                        let clickable = !f.starts_with('(');
                        let tag = match (c.a_bytes, c.b_bytes) { (0, _) => "new: ", (_, 0) => "gone: ", _ => "" };
                        html! {
                            <tr data-testid="compare-row" data-frame={c.frame.clone()} data-change={c.change_bytes.to_string()}
                                class={classes!(clickable.then_some("clickable"))}
                                onclick={clickable.then(|| on_frame.reform(move |_: MouseEvent| f.clone()))}>
                                <td class="num">{ signed(c.change_bytes) }</td>
                                <td class="num">{ human(c.a_bytes) }</td>
                                <td class="num">{ human(c.b_bytes) }</td>
                                <td class="frame">{ tag }{ &c.frame }</td>
                            </tr>
                        }
                    }) }
                    { for d.by_class.iter().filter(|c| c.change_bytes != 0).map(|c| html! {
                        <tr data-testid="compare-class" data-class={c.class.clone()} data-change={c.change_bytes.to_string()}>
                            <td class="num">{ signed(c.change_bytes) }</td>
                            <td class="num">{ human(c.a_bytes) }</td>
                            <td class="num">{ human(c.b_bytes) }</td>
                            <td>{ format!("ledger: {}", c.class) }</td>
                        </tr>
                    }) }
                </tbody>
            </table>
        </section>
    }
}

fn picker(p: &Props, a_side: bool, chosen: u32) -> Html {
    let cb = p.on_pick.clone();
    let onchange = Callback::from(move |e: Event| {
        let v = e
            .target()
            .and_then(|t| t.dyn_into::<HtmlSelectElement>().ok())
            .and_then(|s| s.value().parse().ok());
        if let Some(id) = v {
            cb.emit((a_side, id));
        }
    });
    html! {
        <label>{ if a_side { "A " } else { " B " } }
            <select data-testid={if a_side { "compare-a" } else { "compare-b" }} {onchange}>
                { for p.state.files.iter().filter(|f| matches!(f.status, crate::page::app_state::FileStatus::Ready(_))).map(|f| html! {
                    <option value={f.id.to_string()} selected={f.id == chosen}>{ &f.name }</option>
                }) }
            </select>
        </label>
    }
}

#[function_component(CompareView)]
pub fn compare_view(p: &Props) -> Html {
    let Some((a, b)) = p.state.compare_pair() else {
        return html! { <div class="compare" data-testid="compare" data-state="need-two"><p class="muted">{ "Open two snapshots (or more) to compare them: drop them together, or one after the other." }</p></div> };
    };
    let name = |id: u32| p.state.file(id).map(|f| f.name.clone()).unwrap_or_default();
    let result = p
        .state
        .compared
        .as_ref()
        .filter(|(x, y, _)| (*x, *y) == (a, b))
        .map(|(_, _, c)| c.clone());
    html! {
        <div class="compare" data-testid="compare" data-a={name(a)} data-b={name(b)} data-state={if result.is_some() { "ready" } else { "pending" }}>
            <p>{ picker(p, true, a) }{ picker(p, false, b) }<span class="muted small">{ " — peaks per device, and what is alive there, B minus A" }</span></p>
            { match result {
                Some(c) => html! { <>{ for c.devices.iter().map(|d| device_table(d, &p.on_frame)) }</> },
                None => html! { <p class="muted">{ "Comparing…" }</p> },
            } }
        </div>
    }
}
