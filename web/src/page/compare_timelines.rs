//! The Compare view's timelines: A's and B's Active Memory Timelines stacked on one shared x
//! axis (`memlens_core::layout::shared_axis`: each trace's length scaled to the same width, or
//! wall-clock time since each trace's start), drawn by the page's one timeline component. A
//! zoom, pan or box zoom in either becomes one window in shared units that both show; the
//! pointer's position over either is the cursor line in both. Above them, one small chart
//! overlays both totals over the whole shared axis with each timeline peak marked, the window
//! shaded and the cursor drawn; a click there centres the window.
//!
//! A side whose layout is in is drawn at once, while the other's is still being laid out (its
//! place says so): the first layout's drawing then uses the core its worker has left, instead
//! of adding to the page's work once the last layout is in. The totals chart and the cursor
//! wait for both.

use crate::page::app_state::SharedLayout;
use crate::page::canvas::{prepare, MARGIN_LEFT, MARGIN_RIGHT};
use crate::page::compare_state::Cursor;
use crate::page::timeline::TimelineView;
use crate::wire::protocol::CompareSide;
use memlens_core::layout::shared_axis::AxisMap;
use memlens_core::layout::Matches;
use std::rc::Rc;
use web_sys::{HtmlCanvasElement, MouseEvent};
use yew::prelude::*;

/// A's and B's colours on the totals chart.
const COLOURS: [&str; 2] = ["#4e79a7", "#e15759"];
/// Height of the totals chart, CSS pixels.
const TOTALS_HEIGHT_PX: f64 = 90.0;

/// One stacked timeline.
#[derive(Clone, PartialEq)]
pub struct Track {
    pub side: CompareSide,
    /// `A: name cuda:0`.
    pub label: String,
    pub layout: SharedLayout,
    /// `memlens stats`'s timeline peak: event and bytes.
    pub peak_event: Option<u32>,
    pub peak_bytes: i64,
    pub matches: Option<Rc<Matches>>,
}

#[derive(Properties, PartialEq)]
pub struct Props {
    /// A's and B's timelines (`None`: that side's layout has not arrived yet).
    pub a: Option<Track>,
    pub b: Option<Track>,
    /// Wall-clock axis (both traces have times), else fractions of each trace.
    pub time_axis: bool,
    /// The window in shared units (`None`: everything).
    pub window: Option<(f64, f64)>,
    pub cursor: Option<Cursor>,
    pub on_window: Callback<Option<(f64, f64)>>,
    pub on_cursor: Callback<Cursor>,
    /// `performance.now()` when the later of the two files was chosen: the root's
    /// `data-painted-ms` is the time from then to both timelines painted (benchmarks).
    pub opened_ms: f64,
    /// Both timelines have painted (once).
    pub on_painted: Callback<()>,
}

/// Both sides' axis maps and the shared extent (the longer trace's, in time).
type Maps = (AxisMap, AxisMap, (f64, f64));

/// Each side's axis map (`None`: its layout has not arrived), and both with the shared extent
/// once both have.
struct Axes {
    sides: [Option<AxisMap>; 2],
    both: Option<Maps>,
}

fn axes(a: Option<&SharedLayout>, b: Option<&SharedLayout>, time_axis: bool) -> Axes {
    let map = |l: Option<&SharedLayout>| l.map(|l| AxisMap::new(&l.0, time_axis));
    let sides = [map(a), map(b)];
    let both = sides[0].clone().zip(sides[1].clone()).map(|(ma, mb)| {
        let (ea, eb) = (ma.extent(), mb.extent());
        (ma, mb, (ea.0.min(eb.0), ea.1.max(eb.1)))
    });
    Axes { sides, both }
}

/// What the totals chart shows.
#[derive(Clone, PartialEq)]
struct Totals {
    tracks: [Track; 2],
    window: Option<(f64, f64)>,
    cursor: Option<Cursor>,
}

/// Draws both totals over the whole shared extent, peaks marked, window and cursor.
fn draw_totals(c: &HtmlCanvasElement, p: &Totals, maps: &Maps) {
    let Some((ctx, w, h)) = prepare(c) else {
        return;
    };
    let (s0, s1) = maps.2;
    let pw = (w - MARGIN_LEFT - MARGIN_RIGHT).max(10.0);
    let px_of = |s: f64| MARGIN_LEFT + (s - s0) / (s1 - s0).max(f64::MIN_POSITIVE) * pw;
    let s_of = |px: f64| s0 + (px - MARGIN_LEFT) / pw * (s1 - s0);
    let (top, ph) = (14.0, h - 20.0);
    let max = p
        .tracks
        .iter()
        .map(|t| t.peak_bytes.max(1) as f64)
        .fold(1.0, f64::max);
    let y_of = |b: f64| top + ph - b / (max * 1.05) * ph;
    if let Some((a, b)) = p.window {
        ctx.set_fill_style_str("rgba(0,0,0,0.06)");
        ctx.fill_rect(px_of(a), top, (px_of(b) - px_of(a)).max(1.0), ph);
    }
    ctx.set_font("11px system-ui, sans-serif");
    for (i, (t, m)) in p.tracks.iter().zip([&maps.0, &maps.1]).enumerate() {
        let l = &t.layout.0;
        ctx.set_stroke_style_str(COLOURS[i]);
        ctx.set_line_width(1.5);
        ctx.begin_path();
        let (e0, e1) = m.extent();
        let mut first = true;
        for col in 0..pw as usize {
            let (sa, sb) = (
                s_of(MARGIN_LEFT + col as f64),
                s_of(MARGIN_LEFT + col as f64 + 1.0),
            );
            if sb <= e0 || sa >= e1 {
                continue;
            }
            let (xa, xb) = (m.x(sa.max(e0)), m.x(sb.min(e1)));
            let y = y_of(l.max_total(xa, xb.max(xa + 1.0)) as f64);
            let x = MARGIN_LEFT + col as f64 + 0.5;
            if first {
                ctx.move_to(x, y);
                first = false;
            } else {
                ctx.line_to(x, y);
            }
        }
        ctx.stroke();
        // The peak: a dot where the timeline peak's event sits, and its size.
        if let Some(e) = t.peak_event {
            let x = px_of(m.shared(f64::from(e) + 1.0));
            let y = y_of(t.peak_bytes as f64);
            ctx.set_fill_style_str(COLOURS[i]);
            ctx.begin_path();
            let _ = ctx.arc(x, y, 3.5, 0.0, std::f64::consts::TAU);
            ctx.fill();
            let text = format!(
                "{} peak {}",
                if i == 0 { "A" } else { "B" },
                memlens_core::layout::axis::format_bytes(t.peak_bytes.max(0) as f64)
            );
            ctx.set_text_baseline("bottom");
            let right = x > MARGIN_LEFT + pw * 0.7;
            ctx.set_text_align(if right { "right" } else { "left" });
            let _ = ctx.fill_text(
                &text,
                x + if right { -6.0 } else { 6.0 },
                (y - 2.0).max(12.0),
            );
        }
    }
    if let Some(s) = p.cursor.map(|c| c.at) {
        ctx.set_fill_style_str("#333333");
        ctx.fill_rect(px_of(s).round(), top, 1.0, ph);
    }
    ctx.set_fill_style_str("#777777");
    ctx.set_text_align("right");
    ctx.set_text_baseline("middle");
    let _ = ctx.fill_text("totals", MARGIN_LEFT - 6.0, top + ph / 2.0);
}

/// What one side's timeline is drawn with.
struct Side<'a> {
    p: &'a Props,
    /// 0: A, 1: B.
    i: usize,
    axes: &'a Rc<Axes>,
    /// Whether each side has painted (the view's `data-painted-ms` once both have).
    painted: &'a Rc<std::cell::RefCell<[bool; 2]>>,
    root: &'a NodeRef,
}

/// The cursor callback of side `i`'s timeline, once both sides are laid out (the cursor stands
/// for an event of each).
fn cursor_callback(p: &Props, i: usize, m: Option<&Maps>) -> Option<Callback<f64>> {
    let (m, a, b) = (m?.clone(), p.a.as_ref()?.side, p.b.as_ref()?.side);
    let cb = p.on_cursor.clone();
    Some(Callback::from(move |x: f64| {
        let at = if i == 0 { m.0.shared(x) } else { m.1.shared(x) };
        cb.emit(Cursor {
            a,
            b,
            at,
            a_event: m.0.event_at(m.0.x(at)),
            b_event: m.1.event_at(m.1.x(at)),
        })
    }))
}

/// One side's timeline: its window and cursor in its own event space, and its callbacks back
/// to the shared axis; while its layout is not in, a line that says so.
fn track(s: Side<'_>) -> Html {
    let (p, i) = (s.p, s.i);
    let t = if i == 0 { &p.a } else { &p.b };
    let (Some(t), Some(map)) = (t, &s.axes.sides[i]) else {
        return html! {
            <div class="compare-track" data-testid="compare-track-pending">
                <p class="muted small">{ if i == 0 { "A: laying out…" } else { "B: laying out…" } }</p>
            </div>
        };
    };
    let window = p.window.map(|(a, b)| (map.x(a), map.x(b)));
    let cursor = p.cursor.map(|c| map.x(c.at));
    let on_window = {
        let (map, cb) = (map.clone(), p.on_window.clone());
        Callback::from(move |w: Option<(f64, f64)>| {
            cb.emit(w.map(|(a, b)| (map.shared(a), map.shared(b))))
        })
    };
    let on_cursor = cursor_callback(p, i, s.axes.both.as_ref());
    let on_painted = {
        let (painted, root, opened) = (s.painted.clone(), s.root.clone(), p.opened_ms);
        let done = p.on_painted.clone();
        Callback::from(move |_| {
            let both = {
                let mut d = painted.borrow_mut();
                d[i] = true;
                d[0] && d[1]
            };
            let el = root.cast::<web_sys::Element>();
            if let Some(el) = el.filter(|e| both && !e.has_attribute("data-painted-ms")) {
                let ms = crate::wire::clock::now_ms() - opened;
                let _ = el.set_attribute("data-painted-ms", &format!("{ms:.1}"));
                done.emit(());
            }
        })
    };
    let matches = t.matches.clone().map(crate::page::app_state::SharedMatches);
    html! {
        <div class="compare-track" data-testid={if i == 0 { "compare-track-a" } else { "compare-track-b" }}
            data-peak-bytes={t.peak_bytes.to_string()} data-peak-event={t.peak_event.map(|e| e.to_string())}
            data-window={window.map(|(a, b)| format!("{a:.3},{b:.3}"))}
            data-matches={t.matches.as_ref().map(|m| m.count().to_string())}>
            <div class="compare-track-label" style={format!("color:{}", COLOURS[i])}>{ &t.label }</div>
            <TimelineView layout={t.layout.clone()} kind={memlens_core::layout::TimelineKind::Active}
                {window} selected={None::<u32>} {matches} time_axis={p.time_axis}
                {on_window} on_pin={Callback::noop()} {on_painted} {cursor} {on_cursor} />
        </div>
    }
}

#[function_component(CompareTimelines)]
pub fn compare_timelines(p: &Props) -> Html {
    let totals = use_node_ref();
    let root = use_node_ref();
    let painted = use_mut_ref(|| [false, false]);
    let layout = |t: &Option<Track>| t.as_ref().map(|t| t.layout.clone());
    let m = (*use_memo((layout(&p.a), layout(&p.b), p.time_axis), |(a, b, t)| {
        Rc::new(axes(a.as_ref(), b.as_ref(), *t))
    }))
    .clone();
    {
        let (totals, m) = (totals.clone(), m.clone());
        let what = p.a.clone().zip(p.b.clone()).map(|(a, b)| Totals {
            cursor: p.cursor.filter(|c| (c.a, c.b) == (a.side, b.side)),
            tracks: [a, b],
            window: p.window,
        });
        use_effect_with((what, p.time_axis), move |(what, _)| {
            let Some(c) = totals.cast::<HtmlCanvasElement>() else {
                return;
            };
            match (what, &m.both) {
                (Some(what), Some(maps)) => draw_totals(&c, what, maps),
                // a side not laid out yet: the chart waits for it
                _ => {
                    prepare(&c);
                }
            }
        });
    }
    let side = |i: usize| Side {
        p,
        i,
        axes: &m,
        painted: &painted,
        root: &root,
    };
    let (track_a, track_b) = (track(side(0)), track(side(1)));
    let on_totals_click = {
        let (m, cb, window) = (m.clone(), p.on_window.clone(), p.window);
        Callback::from(move |e: MouseEvent| {
            let Some(m) = &m.both else {
                return;
            };
            let Some(c) = e
                .target()
                .and_then(|t| wasm_bindgen::JsCast::dyn_into::<HtmlCanvasElement>(t).ok())
            else {
                return;
            };
            let pw = (c.client_width() as f64 - MARGIN_LEFT - MARGIN_RIGHT).max(10.0);
            let (s0, s1) = m.2;
            let at = s0 + (e.offset_x() as f64 - MARGIN_LEFT) / pw * (s1 - s0);
            let half = window.map_or((s1 - s0) / 8.0, |(a, b)| (b - a) / 2.0);
            cb.emit(Some(((at - half).max(s0), (at + half).min(s1))));
        })
    };
    let time = m
        .both
        .as_ref()
        .is_some_and(|m| m.0.is_time() && m.1.is_time());
    html! {
        <div ref={root} class="compare-timelines" data-testid="compare-timelines" data-axis={if time { "time" } else { "fraction" }}
            data-window={p.window.map(|(a, b)| format!("{a},{b}"))} data-cursor={p.cursor.map(|c| c.at.to_string())}>
            <canvas ref={totals} class="compare-totals" data-testid="compare-totals" style={format!("height:{TOTALS_HEIGHT_PX}px")} onclick={on_totals_click} />
            { track_a }
            { track_b }
        </div>
    }
}
