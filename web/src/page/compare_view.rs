//! The Compare view (`#view=compare`): two sides, A and B — devices of two open files (a
//! change's before and after, two ranks) or two devices of one file. Their Active Memory
//! Timelines stacked on a shared x axis with synced zoom, pan and cursor
//! (`crate::page::compare_timelines`); and, at the two timeline peaks (peak A, peak B, the
//! change) and at the cursor's moment of each trace, what is alive in A and in B by user
//! frame, by ledger class and by full stack side by side, largest change first ("+1.2 GiB at
//! model.py:88:forward", "new: …", "gone: …"), from core's `analysis::compare`. A frame row
//! outlines that frame's bands in both timelines (the timelines' frame search), a stack row
//! its user frame's; a frame row's ↗ opens B on the timeline with the frame searched.

use crate::page::app_state::{Action, AppState, FileStatus, LayoutKey, View};
use crate::page::bridge::Bridge;
use crate::page::compare_state::{CompareAction, Cursor};
use crate::page::compare_timelines::{CompareTimelines, Track};
use crate::page::grew::stack_change_row;
use crate::wire::clock::now_ms;
use crate::wire::protocol::{CompareSide, ToWorker};
use memlens_core::analysis::compare::{
    combine_moments, combine_peaks, Change, ClassChange, DeviceComparison, StackChange,
};
use memlens_core::analysis::verdict::human;
use memlens_core::layout::timeline::PREVIEW_MIN_EVENTS;
use memlens_core::layout::TimelineKind;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use wasm_bindgen::JsCast;
use web_sys::HtmlSelectElement;
use yew::prelude::*;

/// Frame rows per table.
const ROWS: usize = 20;
/// A cursor request unanswered after this long counts as lost.
const CURSOR_TIMEOUT_MS: f64 = 10_000.0;

#[derive(Properties, PartialEq)]
pub struct Props {
    pub state: Rc<AppState>,
    pub act: Callback<Action>,
}

fn signed(b: i64) -> String {
    format!(
        "{}{}",
        if b < 0 { "−" } else { "+" },
        human(b.unsigned_abs())
    )
}

fn side_key(s: CompareSide) -> LayoutKey {
    LayoutKey {
        file: s.file,
        device: s.device,
        kind: TimelineKind::Active,
    }
}

/// What the workers should answer for the view: both layouts, each side at its peak (once,
/// after the timelines have painted once: until then the page needs only the layouts), each
/// side at the cursor's moment (one request in flight per side; the latest wanted follows its
/// answer), and the highlight's matches. Until both timelines have painted once, the workers
/// also hold the work they do unasked after a load (`Bridge::hold_background`); with no file
/// open there is none, and holding would only stop the idle workers' warm-up.
#[hook]
pub fn use_compare_requests(state: &AppState, bridge: Option<Rc<Bridge>>) {
    let shown = state.view() == View::Compare;
    let pair = state.compare_pair().filter(|_| shown);
    let peaks_asked = use_mut_ref(HashSet::<CompareSide>::new);
    {
        let bridge = bridge.clone();
        let hold = shown && !state.compare.painted && !state.files.is_empty();
        use_effect_with(hold, move |hold| {
            if let Some(br) = &bridge {
                br.hold_background(*hold);
            }
        });
    }
    {
        let bridge = bridge.clone();
        let have: Vec<bool> = pair
            .iter()
            .flat_map(|(a, b)| [*a, *b])
            .map(|s| state.layouts.contains_key(&side_key(s)))
            .collect();
        let painted = state.compare.painted;
        use_effect_with((pair, have, painted), move |(pair, _, painted)| {
            if let (Some(br), Some((a, b))) = (&bridge, pair) {
                for s in [*a, *b] {
                    br.request_layout(side_key(s));
                    if *painted && peaks_asked.borrow_mut().insert(s) {
                        br.send_compare(&ToWorker::PeakGroups { side: s });
                    }
                }
            }
        });
    }
    // Per side: the event wanted at the cursor, and the event last answered.
    let wanted: Vec<(CompareSide, Option<u32>, Option<Option<u32>>)> = pair
        .zip(state.compare.cursor)
        .filter(|((a, b), c)| (c.a, c.b) == (*a, *b))
        .map(|(_, c)| {
            let got = |s: CompareSide| state.compare.moment_sides.get(&s).map(|m| m.0);
            vec![(c.a, c.a_event, got(c.a)), (c.b, c.b_event, got(c.b))]
        })
        .unwrap_or_default();
    let in_flight = use_mut_ref(HashMap::<CompareSide, (Option<u32>, f64)>::new);
    {
        let bridge = bridge.clone();
        use_effect_with(wanted, move |wanted| {
            let Some(br) = &bridge else { return };
            let mut f = in_flight.borrow_mut();
            for &(side, want, got) in wanted {
                let busy = f
                    .get(&side)
                    .is_some_and(|&(e, t)| got != Some(e) && now_ms() - t < CURSOR_TIMEOUT_MS);
                if busy || got == Some(want) {
                    continue;
                }
                f.insert(side, (want, now_ms()));
                br.send_compare(&ToWorker::MomentGroups { side, event: want });
            }
        });
    }
    let highlight = pair.and_then(|p| Some((p, state.compare.highlight.clone()?)));
    let seq = state.compare.highlight_seq;
    use_effect_with((highlight, seq), move |(h, seq)| {
        if let (Some(br), Some(((a, b), frame))) = (&bridge, h) {
            for s in [*a, *b] {
                br.send_search(&ToWorker::Search {
                    id: s.file,
                    device: s.device,
                    kind: TimelineKind::Active,
                    seq: *seq,
                    address: String::new(),
                    frame: frame.clone(),
                    regex: false,
                });
            }
        }
    });
}

/// Frame rows (B minus A), largest change first; a click outlines the frame's bands.
fn frame_rows(rows: &[Change], p: &Props, testid: &'static str) -> Html {
    let highlight = p.state.compare.highlight.clone();
    html! {
        { for rows.iter().filter(|c| c.change_bytes != 0).take(ROWS).map(|c| {
            let f = c.frame.clone();
            let clickable = !f.starts_with('(');
            let tag = match (c.a_bytes, c.b_bytes) { (0, _) => "new: ", (_, 0) => "gone: ", _ => "" };
            let on = highlight.as_deref() == Some(f.as_str());
            let toggle = {
                let (act, f) = (p.act.clone(), f.clone());
                move |_: MouseEvent| act.emit(Action::Compare(CompareAction::Highlight((!on).then(|| f.clone()))))
            };
            let open = {
                let (act, f, b) = (p.act.clone(), f.clone(), p.state.compare_pair().map(|x| x.1));
                Callback::from(move |e: MouseEvent| {
                    e.stop_propagation();
                    if let Some(b) = b {
                        act.emit(Action::OpenFileDevice(b.file, b.device));
                    }
                    act.emit(Action::ShowFrame(f.clone()));
                })
            };
            html! {
                <tr data-testid={testid} data-frame={c.frame.clone()} data-change={c.change_bytes.to_string()}
                    data-a-bytes={c.a_bytes.to_string()} data-b-bytes={c.b_bytes.to_string()}
                    class={classes!(clickable.then_some("clickable"), on.then_some("highlighted"))}
                    onclick={clickable.then(|| Callback::from(toggle))}>
                    <td class="num">{ signed(c.change_bytes) }</td>
                    <td class="num">{ human(c.a_bytes) }</td>
                    <td class="num">{ human(c.b_bytes) }</td>
                    <td class="frame">{ tag }{ &c.frame }
                        if clickable {
                            <button class="link" title="open B on the timeline with this frame searched" data-testid="compare-open" onclick={open}>{ " ↗" }</button>
                        }
                    </td>
                </tr>
            }
        }) }
    }
}

/// Ledger class rows (B minus A), nonzero only.
fn class_rows(rows: &[ClassChange], testid: &'static str) -> Html {
    html! {
        { for rows.iter().filter(|c| c.change_bytes != 0).map(|c| html! {
            <tr data-testid={testid} data-class={c.class.clone()} data-change={c.change_bytes.to_string()}>
                <td class="num">{ signed(c.change_bytes) }</td>
                <td class="num">{ human(c.a_bytes) }</td>
                <td class="num">{ human(c.b_bytes) }</td>
                <td>{ format!("ledger: {}", c.class) }</td>
            </tr>
        }) }
    }
}

/// Stack rows (B minus A, core's top stacks); a click outlines the bands of the stack's user
/// frame (the stack's among them) in both timelines.
fn stack_table(rows: &[StackChange], p: &Props, testid: &'static str) -> Html {
    if rows.is_empty() {
        return html! {};
    }
    let highlight = p.state.compare.highlight.clone();
    html! {
        <table class="diag-table">
            <thead><tr><th>{ "change" }</th><th>{ "A" }</th><th>{ "B" }</th><th>{ "by stack (innermost frame first)" }</th></tr></thead>
            <tbody>
                { for rows.iter().take(ROWS).map(|c| {
                    let on = highlight.as_deref() == Some(c.frame.as_str());
                    let (act, f) = (p.act.clone(), c.frame.clone());
                    let toggle = Callback::from(move |_: MouseEvent| act.emit(Action::Compare(CompareAction::Highlight((!on).then(|| f.clone())))));
                    stack_change_row(c, testid, toggle, on)
                }) }
            </tbody>
        </table>
    }
}

fn table_head() -> Html {
    html! { <thead><tr><th>{ "change" }</th><th>{ "A" }</th><th>{ "B" }</th><th>{ "user frame" }</th></tr></thead> }
}

fn peak_table(d: &DeviceComparison, p: &Props) -> Html {
    html! {
        <section data-testid="compare-device" data-device={d.device.to_string()} data-change={d.peak_change_bytes.to_string()}
            data-a-peak={d.a.timeline_peak_bytes.to_string()} data-b-peak={d.b.timeline_peak_bytes.to_string()}>
            <h3>{ format!("at the peaks: {} → {} ({}{})", human(d.a.timeline_peak_bytes.max(0) as u64), human(d.b.timeline_peak_bytes.max(0) as u64), signed(d.peak_change_bytes), d.peak_change_pct.map_or(String::new(), |p| format!(", {p:+.1}%"))) }</h3>
            <table class="diag-table">
                { table_head() }
                <tbody>
                    { frame_rows(&d.by_frame, p, "compare-row") }
                    { class_rows(&d.by_class, "compare-class") }
                </tbody>
            </table>
            { stack_table(&d.by_stack, p, "compare-stack-row") }
        </section>
    }
}

/// What is alive at the cursor in A and B, by user frame, ledger class and stack.
fn cursor_table(p: &Props, a: CompareSide, b: CompareSide) -> Html {
    let Some(c) = p.state.compare.cursor.filter(|c| (c.a, c.b) == (a, b)) else {
        return html! { <p class="muted small" data-testid="compare-cursor" data-state="none">{ "Move the pointer over a timeline: what is alive there in A and in B appears here." }</p> };
    };
    let m = p
        .state
        .compare
        .moments_of(&c)
        .flatten()
        .map(|(x, y)| combine_moments(&x, &y));
    let ev = |e: Option<u32>| {
        e.map_or("before the first entry".to_string(), |e| {
            format!("after entry {e}")
        })
    };
    let Some(m) = m else {
        return html! { <p class="muted small" data-testid="compare-cursor" data-state="pending">{ format!("At the cursor (A {}, B {})…", ev(c.a_event), ev(c.b_event)) }</p> };
    };
    let change = m.b.allocated_bytes as i64 - m.a.allocated_bytes as i64;
    html! {
        <section data-testid="compare-cursor" data-state="ready" data-a-event={m.a.event.map(|e| e.to_string())} data-b-event={m.b.event.map(|e| e.to_string())}
            data-a-bytes={m.a.allocated_bytes.to_string()} data-b-bytes={m.b.allocated_bytes.to_string()}>
            <h3>{ format!("at the cursor (A {}, B {}): {} → {} ({})", ev(m.a.event), ev(m.b.event), human(m.a.allocated_bytes), human(m.b.allocated_bytes), signed(change)) }</h3>
            <table class="diag-table">
                { table_head() }
                <tbody>
                    { frame_rows(&m.by_frame, p, "compare-cursor-row") }
                    { class_rows(&m.by_class, "compare-cursor-class") }
                </tbody>
            </table>
            { stack_table(&m.by_stack, p, "compare-cursor-stack-row") }
        </section>
    }
}

/// A select of every device of every ready file.
fn picker(p: &Props, a_side: bool, chosen: CompareSide) -> Html {
    let act = p.act.clone();
    let onchange = Callback::from(move |e: Event| {
        let v = e
            .target()
            .and_then(|t| t.dyn_into::<HtmlSelectElement>().ok())
            .map(|s| s.value());
        let side = v
            .as_deref()
            .and_then(|v| v.split_once(':'))
            .and_then(|(f, d)| {
                Some(CompareSide {
                    file: f.parse().ok()?,
                    device: d.parse().ok()?,
                })
            });
        if let Some(s) = side {
            act.emit(Action::PickCompare(a_side, s));
        }
    });
    let options = p.state.files.iter().filter_map(|f| match &f.status {
        FileStatus::Ready(i) => Some((f, i.clone())),
        _ => None,
    });
    html! {
        <label>{ if a_side { "A " } else { " B " } }
            <select data-testid={if a_side { "compare-a" } else { "compare-b" }} {onchange}>
                { for options.flat_map(|(f, i)| i.devices.iter().map(|d| {
                    let s = CompareSide { file: f.id, device: d.device };
                    html! { <option value={format!("{}:{}", s.file, s.device)} selected={s == chosen}>{ format!("{} · cuda:{}", f.name, d.device) }</option> }
                }).collect::<Vec<_>>()) }
            </select>
        </label>
    }
}

/// A timeline's track: its layout, label, peak and highlight matches.
fn track(p: &Props, s: CompareSide, letter: &str) -> Option<Track> {
    let st = &p.state;
    let layout = st.layouts.get(&side_key(s))?.clone();
    let f = st.file(s.file)?;
    let stats = match &f.status {
        FileStatus::Ready(i) => i.devices.iter().find(|d| d.device == s.device).cloned(),
        _ => None,
    }?;
    Some(Track {
        side: s,
        label: format!("{letter}: {} · cuda:{}", f.name, s.device),
        layout,
        peak_event: stats.timeline_peak_event,
        peak_bytes: stats.timeline_peak_bytes,
        matches: st.compare.matches.get(&s).cloned(),
    })
}

/// Whether side `s`'s trace is long (its layout comes as a preview, after the worker has
/// worked on it for a while: ~140 ms for 300k entries on a 2-core machine).
fn long_trace(p: &Props, s: CompareSide) -> bool {
    let Some(FileStatus::Ready(i)) = p.state.file(s.file).map(|f| &f.status) else {
        return false;
    };
    i.devices
        .iter()
        .find(|d| d.device == s.device)
        .is_some_and(|d| d.trace_entries > u64::from(PREVIEW_MIN_EVENTS))
}

/// The two timelines. One whose layout is in is drawn while the other's is laid out when that
/// takes a while (a long trace): the page then draws it on the core the first worker has left,
/// instead of after the last layout. Not when the axis may be wall-clock time (whether both
/// traces have times decides it), nor for a short trace, whose layout would arrive while the
/// page is still drawing the first.
fn timelines(p: &Props, a: CompareSide, b: CompareSide) -> Html {
    let (ta, tb) = (track(p, a, "A"), track(p, b, "B"));
    let early = !p.state.time_axis
        && match (&ta, &tb) {
            (Some(_), None) => long_trace(p, b),
            (None, Some(_)) => long_trace(p, a),
            _ => false,
        };
    if !early && (ta.is_none() || tb.is_none()) {
        return html! { <p class="muted">{ "Laying out…" }</p> };
    }
    let has_times = |t: &Option<Track>| t.as_ref().is_some_and(|t| !t.layout.0.time_us.is_empty());
    let both_times = has_times(&ta) && has_times(&tb);
    let time_axis = p.state.time_axis && both_times;
    let act = p.act.clone();
    let on_window = Callback::from(move |w: Option<(f64, f64)>| {
        act.emit(match w {
            Some((x, y)) => Action::SetWindow(x, y),
            None => Action::ResetWindow,
        })
    });
    let act = p.act.clone();
    let on_cursor =
        Callback::from(move |c: Cursor| act.emit(Action::Compare(CompareAction::Cursor(Some(c)))));
    let act = p.act.clone();
    let on_axis = Callback::from(move |_: Event| {
        act.emit(Action::SetTimeAxis(!time_axis));
        act.emit(Action::ResetWindow);
    });
    let act = p.act.clone();
    let on_painted = Callback::from(move |()| act.emit(Action::Compare(CompareAction::Painted)));
    let opened_ms = p
        .state
        .files
        .iter()
        .filter(|f| f.id == a.file || f.id == b.file)
        .map(|f| f.opened_ms)
        .fold(f64::NEG_INFINITY, f64::max);
    html! {
        <>
            <p class="small">
                <label title={if both_times { "" } else { "one of the traces has no times" }}>
                    <input type="checkbox" data-testid="compare-time-axis" checked={time_axis} disabled={!both_times} onchange={on_axis} />
                    { " wall-clock time from each trace's start (else each trace's events scaled to the same width)" }
                </label>
            </p>
            <CompareTimelines a={ta} b={tb} {time_axis} window={p.state.window} cursor={p.state.compare.cursor}
                {on_window} {on_cursor} {opened_ms} {on_painted} />
        </>
    }
}

#[function_component(CompareView)]
pub fn compare_view(p: &Props) -> Html {
    let Some((a, b)) = p.state.compare_pair() else {
        return html! { <div class="compare" data-testid="compare" data-state="need-two"><p class="muted">{ "Open two snapshots (or one with two devices) to compare them: drop them together, or one after the other." }</p></div> };
    };
    let name = |id: u32| p.state.file(id).map(|f| f.name.clone()).unwrap_or_default();
    let result = p
        .state
        .compare
        .peaks_of(a, b)
        .map(|g| g.map(|(x, y)| combine_peaks(b.device, &x, &y)));
    html! {
        <div class="compare" data-testid="compare" data-a={name(a.file)} data-b={name(b.file)}
            data-a-device={a.device.to_string()} data-b-device={b.device.to_string()}
            data-state={if result.is_some() { "ready" } else { "pending" }}>
            <p>{ picker(p, true, a) }{ picker(p, false, b) }<span class="muted small">{ " — B minus A; click a frame row to outline its bands in both timelines" }</span></p>
            { timelines(p, a, b) }
            { cursor_table(p, a, b) }
            { match result {
                Some(Some(c)) => peak_table(&c, p),
                Some(None) => html! { <p class="muted">{ "A file of the pair was closed." }</p> },
                None => html! { <p class="muted">{ "Comparing…" }</p> },
            } }
        </div>
    }
}
