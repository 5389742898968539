//! The event list's CSV export (in the Allocator State History's bar): the entries of a range
//! typed as `120-480` (inclusive, as the list numbers them; empty: all), written by core's
//! `EventList::csv` (a header row; sizes in bytes, times in µs, as the column names say) and
//! saved as `<snapshot>-events[-A-B].csv`. A range that does not read, or lies outside the
//! list, is marked on the input and nothing is saved.

use crate::page::exports::{base_name, save_text};
use crate::wire::history::{EventColumns, Shared};
use std::ops::Range;
use web_sys::HtmlInputElement;
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct Props {
    pub events: Shared<EventColumns>,
    /// The snapshot's name (the file is named after it).
    pub file_name: String,
}

/// `""`/`all` → every entry; `A-B` → A..=B; `A-` → A to the end; `-B` → 0..=B; `A` → entry A.
/// `None` when it does not read or is not inside `0..n`.
pub fn parse_range(text: &str, n: usize) -> Option<Range<usize>> {
    let t = text.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("all") {
        return Some(0..n);
    }
    let num = |s: &str, default: usize| -> Option<usize> {
        let s = s.trim();
        if s.is_empty() {
            Some(default)
        } else {
            s.parse().ok()
        }
    };
    let (a, b) = match t.split_once(['-', '–']) {
        Some((a, b)) => (num(a, 0)?, num(b, n.checked_sub(1)?)?),
        None => {
            let a = num(t, 0)?;
            (a, a)
        }
    };
    (a <= b && b < n).then_some(a..b + 1)
}

#[function_component(EventCsv)]
pub fn event_csv(p: &Props) -> Html {
    let input = use_node_ref();
    let bad = use_state(|| false);
    let onsubmit = {
        let (input, bad, events, file) = (
            input.clone(),
            bad.clone(),
            p.events.clone(),
            p.file_name.clone(),
        );
        Callback::from(move |e: SubmitEvent| {
            e.prevent_default();
            let text = input
                .cast::<HtmlInputElement>()
                .map(|i| i.value())
                .unwrap_or_default();
            let Some(rows) = parse_range(&text, events.len()) else {
                bad.set(true);
                return;
            };
            bad.set(false);
            let mut name = base_name(&file, "events");
            if rows != (0..events.len()) {
                name.push_str(&format!("-{}-{}", rows.start, rows.end - 1));
            }
            save_text(&events.csv(rows), "text/csv", &format!("{name}.csv"));
        })
    };
    let n = p.events.len();
    let title = format!(
        "the event list as CSV: entries A-B (of 0-{}), empty for all; sizes in bytes, times in µs",
        n.saturating_sub(1)
    );
    html! {
        <form class="event-csv" {onsubmit} {title}>
            <input ref={input} data-testid="event-csv-range" class={classes!((*bad).then_some("bad"))}
                placeholder="entries: all, or 120-480" />
            <button type="submit" data-testid="event-csv">{ "Export CSV" }</button>
        </form>
    }
}

#[cfg(test)]
mod tests {
    use super::parse_range;

    #[test]
    fn ranges_read_as_typed_and_stay_inside_the_list() {
        assert_eq!(parse_range("", 10), Some(0..10));
        assert_eq!(parse_range(" all ", 10), Some(0..10));
        assert_eq!(parse_range("2-5", 10), Some(2..6));
        assert_eq!(parse_range("2 – 5", 10), Some(2..6));
        assert_eq!(parse_range("7-", 10), Some(7..10));
        assert_eq!(parse_range("-3", 10), Some(0..4));
        assert_eq!(parse_range("4", 10), Some(4..5));
        assert_eq!(parse_range("5-2", 10), None);
        assert_eq!(parse_range("3-10", 10), None);
        assert_eq!(parse_range("x", 10), None);
        assert_eq!(parse_range("1-2-3", 10), None);
        assert_eq!(parse_range("0-", 0), None);
        assert_eq!(parse_range("", 0), Some(0..0));
    }
}
