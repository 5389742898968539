//! Under a zoomed timeline: what grew between the window's ends — the net change of live bytes
//! by user frame and by full stack (core's `analysis::compare::between`), largest first; a row
//! searches its user frame's bands. Shown on the event-index axis (the window's ends are events
//! there).

use crate::page::app_state::{Action, AppState};
use memlens_core::analysis::compare::StackChange;
use memlens_core::analysis::verdict::human;
use yew::prelude::*;

/// Rows shown.
const ROWS: usize = 10;

pub fn panel(state: &UseReducerHandle<AppState>) -> Html {
    let Some((file, device, from, to)) = state.wanted_between() else {
        return html! {};
    };
    let b = state
        .between
        .as_ref()
        .filter(|(f, b)| {
            *f == file && b.device == device && b.from == Some(from) && b.to == Some(to)
        })
        .map(|(_, b)| b.clone());
    let Some(b) = b else {
        return html! { <p class="muted small" data-testid="grew" data-state="pending">{ format!("What grew between events {from} and {to}…") }</p> };
    };
    let net = b.to_bytes as i64 - b.from_bytes as i64;
    html! {
        <section class="grew" data-testid="grew" data-state="ready" data-from={from.to_string()} data-to={to.to_string()} data-net-bytes={net.to_string()}>
            <h4>{ format!("What grew between events {from} and {to}: {} → {} ({}{})", human(b.from_bytes), human(b.to_bytes), if net < 0 { "−" } else { "+" }, human(net.unsigned_abs())) }</h4>
            <table class="diag-table">
                <tbody>
                    { for b.by_frame.iter().take(ROWS).map(|c| {
                        let s = state.clone();
                        let frame = c.frame.clone();
                        let clickable = !frame.starts_with('(');
                        let onclick = clickable.then(|| Callback::from(move |_: MouseEvent| s.dispatch(Action::SetSearch { address: String::new(), frame: frame.clone() })));
                        html! {
                            <tr data-testid="grew-row" data-frame={c.frame.clone()} data-change={c.change_bytes.to_string()} class={classes!(clickable.then_some("clickable"))} {onclick}>
                                <td class="num">{ format!("{}{}", if c.change_bytes < 0 { "−" } else { "+" }, human(c.change_bytes.unsigned_abs())) }</td>
                                <td class="num">{ human(c.a_bytes) }</td>
                                <td class="num">{ human(c.b_bytes) }</td>
                                <td class="frame">{ &c.frame }</td>
                            </tr>
                        }
                    }) }
                </tbody>
            </table>
            if !b.by_stack.is_empty() {
                <h4>{ "By stack (innermost frame first)" }</h4>
                <table class="diag-table">
                    <tbody>
                        { for b.by_stack.iter().take(ROWS).map(|c| stack_row(state, c)) }
                    </tbody>
                </table>
            }
        </section>
    }
}

/// Frames of a stack shown in its row (all of them in its tooltip).
const STACK_FRAMES: usize = 4;

fn stack_row(state: &UseReducerHandle<AppState>, c: &StackChange) -> Html {
    let s = state.clone();
    let frame = c.frame.clone();
    let onclick = Callback::from(move |_: MouseEvent| {
        s.dispatch(Action::SetSearch {
            address: String::new(),
            frame: frame.clone(),
        })
    });
    stack_change_row(c, "grew-stack-row", onclick, false)
}

/// A row of a stack's change: B minus A (or end minus start), both sides, its user frame and
/// its first frames (all of them in its tooltip). A click (when its user frame is one, not
/// `(allocated before the trace)`) runs `onclick`; `on` marks the row highlighted.
pub fn stack_change_row(
    c: &StackChange,
    testid: &'static str,
    onclick: Callback<MouseEvent>,
    on: bool,
) -> Html {
    let clickable = !c.frame.starts_with('(');
    let mut shown = c.frames[..c.frames.len().min(STACK_FRAMES)].join(" ‹ ");
    if c.frames.len() > STACK_FRAMES {
        shown += &format!(" ‹ … {} more", c.frames.len() - STACK_FRAMES);
    }
    let sign = if c.change_bytes < 0 { "−" } else { "+" };
    html! {
        <tr data-testid={testid} data-frame={c.frame.clone()} data-frames={c.frames.join("\n")}
            data-change={c.change_bytes.to_string()} title={c.frames.join("\n")}
            class={classes!(clickable.then_some("clickable"), on.then_some("highlighted"))}
            onclick={clickable.then_some(onclick)}>
            <td class="num">{ format!("{sign}{}", human(c.change_bytes.unsigned_abs())) }</td>
            <td class="num">{ human(c.a_bytes) }</td>
            <td class="num">{ human(c.b_bytes) }</td>
            <td class="frame">{ &c.frame }<div class="muted small">{ shown }</div></td>
        </tr>
    }
}
