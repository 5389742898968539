//! The Allocator State History's event list: every trace entry of the device, one line each in
//! upstream's format, virtualized (only the rows in view are in the DOM) so a million entries
//! scroll like ten. Past a few hundred thousand rows the scroll range is compressed (browsers
//! cap an element's height), so the scrollbar maps proportionally onto the rows.

use crate::wire::history::{EventColumns, Shared};
use memlens_core::trace::Action;
use web_sys::{Element, Event};
use yew::prelude::*;

/// Height of one row, in CSS pixels (the stylesheet's `.ev-row` height).
pub const ROW_PX: f64 = 18.0;
/// Largest scroll height used; longer lists are compressed into it.
const MAX_SCROLL_PX: f64 = 4_000_000.0;

#[derive(Properties, PartialEq)]
pub struct Props {
    pub events: Shared<EventColumns>,
    /// The entry whose state is shown.
    pub selected: Option<u32>,
    pub on_select: Callback<u32>,
    /// The scroll container (the parent reads its height for PgUp/PgDn).
    pub list_ref: NodeRef,
}

/// Maps a scroll position to (first row, pixel offset of that row).
fn first_row(n: usize, scroll_top: f64, view_px: f64) -> (usize, f64) {
    let full = n as f64 * ROW_PX;
    if full <= MAX_SCROLL_PX {
        let first = (scroll_top / ROW_PX).floor().max(0.0);
        return (first as usize, first * ROW_PX - scroll_top);
    }
    let visible = (view_px / ROW_PX).floor();
    let range = (MAX_SCROLL_PX - view_px).max(1.0);
    let pos = (scroll_top / range).clamp(0.0, 1.0) * (n as f64 - visible).max(0.0);
    (pos.floor() as usize, -(pos.fract()) * ROW_PX)
}

/// The scroll position that puts row `i` at the top.
fn scroll_for(n: usize, i: usize, view_px: f64) -> f64 {
    let full = n as f64 * ROW_PX;
    if full <= MAX_SCROLL_PX {
        return i as f64 * ROW_PX;
    }
    let visible = (view_px / ROW_PX).floor();
    let range = (MAX_SCROLL_PX - view_px).max(1.0);
    i as f64 / (n as f64 - visible).max(1.0) * range
}

#[function_component(EventList)]
pub fn event_list(p: &Props) -> Html {
    let scroll = use_state(|| (0.0f64, 600.0f64));
    let n = p.events.len();
    let (scroll_top, view_px) = *scroll;
    let (first, offset) = first_row(n, scroll_top, view_px);
    let count = (view_px / ROW_PX).ceil() as usize + 2;
    let visible_rows = (view_px / ROW_PX).floor().max(1.0) as usize;

    // Keep the selected row in view when it changes (keys, buttons, the URL).
    {
        let (list_ref, scroll) = (p.list_ref.clone(), scroll.clone());
        use_effect_with((p.selected, n), move |(sel, n)| {
            let (Some(el), Some(sel)) = (list_ref.cast::<Element>(), sel) else {
                return;
            };
            let view = el.client_height().max(1) as f64;
            let (top, _) = first_row(*n, el.scroll_top() as f64, view);
            let rows = (view / ROW_PX).floor().max(1.0) as usize;
            let sel = *sel as usize;
            if sel < top || sel + 1 >= top + rows {
                let want = sel.saturating_sub(rows / 3);
                let st = scroll_for(*n, want, view);
                el.set_scroll_top(st.round() as i32);
                scroll.set((el.scroll_top() as f64, view));
            } else if (view - scroll.1).abs() > 0.5 {
                scroll.set((el.scroll_top() as f64, view));
            }
        });
    }
    let onscroll = {
        let scroll = scroll.clone();
        Callback::from(move |e: Event| {
            if let Some(el) = e.target_dyn_into::<Element>() {
                scroll.set((el.scroll_top() as f64, el.client_height().max(1) as f64));
            }
        })
    };
    let onclick = {
        let cb = p.on_select.clone();
        Callback::from(move |e: MouseEvent| {
            let row = e
                .target_dyn_into::<Element>()
                .and_then(|t| t.closest("[data-event]").ok().flatten())
                .and_then(|r| r.get_attribute("data-event"))
                .and_then(|v| v.parse::<u32>().ok());
            if let Some(i) = row {
                cb.emit(i);
            }
        })
    };
    let total_px = (n as f64 * ROW_PX).min(MAX_SCROLL_PX);
    let ev = &p.events;
    let width = n.max(1).to_string().len();
    let rows = (first..(first + count).min(n)).map(|i| {
        let sel = p.selected == Some(i as u32);
        let class = classes!(
            "ev-row",
            sel.then_some("selected"),
            matches!(ev.action(i), Action::Oom).then_some("oom"),
            (ev.meta.peak_event == Some(i as u32)).then_some("peak"),
        );
        let stream = ev.stream_of(i).filter(|&s| s != 0);
        let title = stream.map(|s| format!("stream {s}"));
        html! {
            <div {class} data-event={i.to_string()} {title}>
                <span class="ev-idx">{ format!("{i:>width$} ") }</span>{ ev.line(i) }
                if let Some(s) = stream { <span class="ev-stream">{ format!("  (stream {s})") }</span> }
            </div>
        }
    });
    html! {
        <div class="event-list" ref={p.list_ref.clone()} {onscroll} {onclick} data-testid="event-list"
            data-rows={n.to_string()} data-first-row={first.to_string()} data-visible-rows={visible_rows.to_string()}>
            <div class="event-spacer" style={format!("height:{total_px}px")}></div>
            <div class="event-rows" style={format!("top:{}px", scroll_top + offset)}>
                { for rows }
            </div>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scroll_positions_map_to_rows_and_back() {
        for n in [0usize, 1, 37, 10_000, 1_000_000, 5_000_000] {
            let view = 600.0;
            let visible = (view / ROW_PX).floor() as usize;
            for i in [0, 1, n / 3, n / 2, n.saturating_sub(visible)] {
                let st = scroll_for(n, i, view);
                let (first, off) = first_row(n, st, view);
                assert!(
                    first.abs_diff(i) <= 1,
                    "n {n}: row {i} → scroll {st} → row {first}"
                );
                assert!(off <= 0.0 && off > -ROW_PX, "offset {off}");
            }
            // Never past the last rows, and the DOM holds at most a screenful.
            let max = (n as f64 * ROW_PX).min(MAX_SCROLL_PX) - view;
            let (first, _) = first_row(n, max.max(0.0), view);
            assert!(
                first + visible <= n.max(visible) + 1,
                "n {n}: first row {first} at the end"
            );
        }
    }
}
