//! The Diagnosis view: core's `DeviceDiagnosis` as the page shows it — the verdict with its
//! evidence and fixes, who holds memory at the peak, the ledger as bars, leak suspects, OOMs,
//! fragmentation over time, pending frees and private pools. A frame row opens the Active
//! Memory Timeline with that frame's bands highlighted (the frame search); an OOM row opens the
//! Allocator State History at that entry. Numbers carry `data-metric`/`data-value` as the
//! summary strip's do. The charts are inline SVG (see ARCHITECTURE.md's Decisions).

use crate::page::app_state::{SharedDiagnosis, SharedIcicle};
use crate::page::icicle::IcicleView;
use memlens_core::analysis::fragmentation::Fragmentation;
use memlens_core::analysis::verdict::human;
use memlens_core::analysis::DeviceDiagnosis;
use yew::prelude::*;

/// Rows per table.
const ROWS: usize = 15;

#[derive(Properties, PartialEq)]
pub struct Props {
    pub diagnosis: Option<SharedDiagnosis>,
    /// Open the timeline with this frame's bands highlighted.
    pub on_frame: Callback<String>,
    /// Open the Allocator State History after this entry.
    pub on_event: Callback<u32>,
    /// Live memory at the moment shown (once the worker sent it).
    pub icicle: Option<SharedIcicle>,
    /// Pick the moment the icicle shows (`None`: the peak).
    pub on_moment: Callback<Option<u32>>,
    /// Invert the icicle for a frame (`None`: all frames again).
    pub on_callers: Callback<Option<String>>,
}

fn metric(name: &str, value: u64, text: String) -> Html {
    html! { <span class="metric" data-metric={name.to_string()} data-value={value.to_string()}>{ text }</span> }
}

fn frame_row(frame: &str, cells: Html, testid: &'static str, on_frame: &Callback<String>) -> Html {
    let f = frame.to_string();
    let cb = on_frame.reform(move |_: MouseEvent| f.clone());
    let clickable = !frame.starts_with('(');
    html! {
        <tr data-testid={testid} data-frame={frame.to_string()} class={classes!(clickable.then_some("clickable"))}
            onclick={clickable.then_some(cb)} title={clickable.then_some("show its bands on the timeline")}>
            { cells }
            <td class="frame">{ frame }</td>
        </tr>
    }
}

fn verdict_section(d: &DeviceDiagnosis) -> Html {
    let v = &d.verdict;
    html! {
        <section class={classes!("verdict", format!("verdict-{}", v.kind.name()))}>
            <h2 data-testid="verdict-kind">{ v.kind.name().replace('_', " ") }</h2>
            <p data-testid="verdict-summary">{ &v.summary }</p>
            <ul class="evidence">{ for v.evidence.iter().map(|e| html! { <li>{ e }</li> }) }</ul>
            if !v.fixes.is_empty() {
                <h3>{ "Fixes" }</h3>
                <ul class="fixes" data-testid="fixes">{ for v.fixes.iter().map(|f| html! { <li>{ f }</li> }) }</ul>
            }
            { for v.missing.iter().map(|m| html! { <p class="muted small">{ format!("Missing: {m}") }</p> }) }
        </section>
    }
}

fn peak_section(d: &DeviceDiagnosis, on_frame: &Callback<String>) -> Html {
    let p = &d.peak;
    let when = p.event.map_or("before the first event".to_string(), |e| {
        format!("after event {e}")
    });
    html! {
        <section data-testid="peak">
            <h3>{ "Alive at the peak " }{ when }{ ": " }
                { metric("peak_allocated_bytes", p.allocated_bytes, human(p.allocated_bytes)) }
                { " in " }{ metric("peak_allocations", p.allocations, p.allocations.to_string()) }{ " allocations" }
            </h3>
            if let Some(e) = p.event {
                <span class="hidden" data-metric="peak_event" data-value={e.to_string()}></span>
            }
            <table class="diag-table">
                <thead><tr><th>{ "bytes" }</th><th>{ "share" }</th><th>{ "allocations" }</th><th>{ "user frame" }</th></tr></thead>
                <tbody>
                    { for p.top.iter().take(ROWS).map(|g| frame_row(&g.frame, html! {
                        <>
                            <td class="num" data-bytes={g.bytes.to_string()}>{ human(g.bytes) }</td>
                            <td class="num">{ format!("{:.1}%", 100.0 * g.share) }</td>
                            <td class="num">{ g.allocations }</td>
                        </>
                    }, "peak-row", on_frame)) }
                </tbody>
            </table>
            if p.top.len() > ROWS {
                <p class="muted small">{ format!("{} more frames (memlens diagnose --json lists all)", p.top.len() - ROWS) }</p>
            }
        </section>
    }
}

fn ledger_bars(
    rows: &[memlens_core::analysis::ledger::ClassRow],
    f: &Fragmentation,
    which: &str,
) -> Html {
    let frag = f.reserved_bytes.saturating_sub(f.requested_bytes);
    let mut bars: Vec<(String, u64, String)> = rows
        .iter()
        .map(|r| (r.class.name().to_string(), r.bytes, r.rule.clone()))
        .collect();
    bars.push((
        "fragmentation".into(),
        frag,
        format!(
            "reserved − requested: rounding {}, pending free {}, inactive_split {}, free segments {}",
            human(f.rounding_bytes),
            human(f.pending_free_bytes),
            human(f.inactive_split_bytes),
            human(f.free_segments_bytes)
        ),
    ));
    let max = bars.iter().map(|b| b.1).max().unwrap_or(0).max(1);
    let row_h = 18.0;
    let h = row_h * bars.len() as f64;
    html! {
        <div class="ledger">
            <h4>{ format!("{which} (reserved {})", human(f.reserved_bytes)) }</h4>
            <svg class="ledger-bars" width="100%" height={format!("{h}")} viewBox={format!("0 0 600 {h}")} preserveAspectRatio="none">
                { for bars.iter().enumerate().map(|(i, (name, bytes, rule))| {
                    let y = i as f64 * row_h;
                    let w = 400.0 * *bytes as f64 / max as f64;
                    html! {
                        <g data-metric={format!("ledger_{which}_{name}")} data-value={bytes.to_string()}>
                            <title>{ rule }</title>
                            <text x="0" y={format!("{}", y + 13.0)} class="bar-label">{ name }</text>
                            <rect x="120" y={format!("{}", y + 3.0)} width={format!("{w:.1}")} height="12" class={format!("bar bar-{name}")} />
                            <text x={format!("{:.1}", 124.0 + w)} y={format!("{}", y + 13.0)} class="bar-value">{ human(*bytes) }</text>
                        </g>
                    }
                }) }
            </svg>
        </div>
    }
}

fn leaks_section(d: &DeviceDiagnosis, on_frame: &Callback<String>) -> Html {
    let how = match d.leak_method {
        memlens_core::analysis::LeakMethod::Steps => {
            format!("kept across steps ({} steps)", d.steps.len())
        }
        memlens_core::analysis::LeakMethod::EndOfTrace => {
            "alive at the end, born after the first 5% of the trace (no steps)".to_string()
        }
    };
    html! {
        <section data-testid="leaks">
            <h3>{ "Leak suspects: " }{ how }</h3>
            if d.leaks.is_empty() {
                <p class="muted">{ "None." }</p>
            } else {
                <table class="diag-table">
                    <thead><tr><th>{ "bytes" }</th><th>{ "allocations" }</th><th>{ "per step" }</th><th>{ "user frame" }</th></tr></thead>
                    <tbody>
                        { for d.leaks.iter().take(ROWS).map(|l| frame_row(&l.frame, html! {
                            <>
                                <td class="num" data-bytes={l.bytes.to_string()}>{ human(l.bytes) }</td>
                                <td class="num">{ l.allocations }</td>
                                <td class="num">{ if l.steps > 0 { human(l.bytes_per_step) } else { "–".into() } }</td>
                            </>
                        }, "leak-row", on_frame)) }
                    </tbody>
                </table>
            }
        </section>
    }
}

fn ooms_section(d: &DeviceDiagnosis, on_event: &Callback<u32>) -> Html {
    if d.ooms.is_empty() {
        return html! {};
    }
    html! {
        <section data-testid="ooms">
            <h3>{ "Out of memory" }</h3>
            <table class="diag-table">
                <thead><tr><th>{ "event" }</th><th>{ "requested" }</th><th>{ "pool" }</th><th>{ "largest free block" }</th><th>{ "free in pool" }</th><th>{ "reserved" }</th><th>{ "allocated" }</th><th>{ "device free" }</th></tr></thead>
                <tbody>
                    { for d.ooms.iter().map(|o| {
                        let e = o.event;
                        html! {
                            <tr class="clickable" data-testid="oom-row" data-event={e.to_string()} title="open the Allocator State History here"
                                onclick={on_event.reform(move |_: MouseEvent| e)}>
                                <td class="num">{ e }</td>
                                <td class="num" data-metric="oom_requested_bytes" data-value={o.requested_bytes.to_string()}>{ human(o.requested_bytes) }</td>
                                <td>{ &o.pool }</td>
                                <td class="num">{ human(o.largest_free_block_bytes) }</td>
                                <td class="num">{ human(o.free_total_bytes) }</td>
                                <td class="num">{ human(o.reserved_bytes) }</td>
                                <td class="num">{ human(o.allocated_bytes) }</td>
                                <td class="num">{ o.device_free_bytes.map_or("–".into(), human) }</td>
                            </tr>
                        }
                    }) }
                </tbody>
            </table>
        </section>
    }
}

/// Reserved, allocated and inactive_split along the trace, as polylines.
fn fragmentation_chart(d: &DeviceDiagnosis, on_moment: &Callback<Option<u32>>) -> Html {
    let s = &d.fragmentation_over_time;
    if s.len() < 2 {
        return html! {};
    }
    let (w, h) = (600.0, 120.0);
    let max = s.iter().map(|f| f.reserved_bytes).max().unwrap_or(0).max(1) as f64;
    let last = s.last().and_then(|f| f.event).unwrap_or(0).max(1) as f64;
    let line = |get: fn(&Fragmentation) -> u64| -> String {
        s.iter()
            .map(|f| {
                let x = w * f64::from(f.event.unwrap_or(0)) / last;
                let y = h - h * get(f) as f64 / max;
                format!("{x:.1},{y:.1}")
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let n = s.len() as u32;
    let on_click = {
        let on_event = on_moment.clone();
        Callback::from(move |e: MouseEvent| {
            // Yew delegates events, so the current target is not the chart: find it.
            let Some(t) = e
                .target()
                .and_then(|t| wasm_bindgen::JsCast::dyn_into::<web_sys::Element>(t).ok())
                .and_then(|t| t.closest("svg").ok().flatten())
            else {
                return;
            };
            let r = t.get_bounding_client_rect();
            if r.width() > 0.0 {
                let frac = ((f64::from(e.client_x()) - r.left()) / r.width()).clamp(0.0, 1.0);
                on_event.emit(Some((frac * last).round() as u32));
            }
        })
    };
    html! {
        <section data-testid="fragmentation">
            <h3>{ format!("Fragmentation over time ({n} samples; click to see live memory there)") }</h3>
            <svg class="frag-chart" width="100%" height={format!("{h}")} viewBox={format!("0 0 {w} {h}")} preserveAspectRatio="none" onclick={on_click}>
                <polyline class="line-reserved" points={line(|f| f.reserved_bytes)} />
                <polyline class="line-allocated" points={line(|f| f.allocated_bytes)} />
                <polyline class="line-split" points={line(|f| f.inactive_split_bytes)} />
            </svg>
            <p class="legend small"><span class="key-reserved">{ "reserved" }</span>{ " · " }<span class="key-allocated">{ "allocated" }</span>{ " · " }<span class="key-split">{ "inactive_split" }</span>{ format!(" · top = {}", human(max as u64)) }</p>
        </section>
    }
}

fn extras_section(d: &DeviceDiagnosis) -> Html {
    let pf = &d.pending_frees;
    html! {
        <>
            if pf.count > 0 {
                <section data-testid="pending-frees">
                    <h3>{ format!("Pending frees (record_stream): {} blocks, {}", pf.count, human(pf.bytes)) }</h3>
                    <table class="diag-table">
                        <tbody>
                            { for pf.largest.iter().take(5).map(|x| html! {
                                <tr><td class="num">{ human(x.bytes) }</td>
                                    <td class="num">{ x.duration_us.map_or(format!("{} events", x.events), |us| format!("{us} µs")) }</td>
                                    <td class="frame">{ &x.frame }</td></tr>
                            }) }
                        </tbody>
                    </table>
                </section>
            }
            { for d.private_pools.iter().map(|p| html! {
                <p class="small">{ format!("Private pool {:?} (CUDA graph): {} reserved, {} allocated in {} segments — its own item, not a leak.", p.pool_id, human(p.reserved_bytes), human(p.allocated_bytes), p.segments) }</p>
            }) }
        </>
    }
}

fn icicle_section(d: &DeviceDiagnosis, p: &Props) -> Html {
    let at_peak = p
        .icicle
        .as_ref()
        .is_none_or(|i| i.icicle.event == d.peak.event);
    let event = p.icicle.as_ref().and_then(|i| i.icicle.event);
    let (to_peak, to_state) = (p.on_moment.reform(|_: MouseEvent| None), p.on_event.clone());
    html! {
        <section data-testid="live-flame">
            <h3>{ match p.icicle.as_ref().and_then(|i| i.callers_of.as_ref()) {
                    Some(f) => format!("Who calls {f} (live memory it holds, callers below)"),
                    None => "Live memory as a flamegraph".to_string(),
                } }
                if p.icicle.as_ref().is_some_and(|i| i.callers_of.is_some()) {
                    { " " }<button class="link" data-testid="flame-all" onclick={p.on_callers.reform(|_: MouseEvent| None)}>{ "all frames" }</button>
                }
                if !at_peak {
                    { " " }<button class="link" data-testid="flame-to-peak" onclick={to_peak}>{ "back to the peak" }</button>
                }
                if let Some(e) = event {
                    { " " }<button class="link" onclick={to_state.reform(move |_: MouseEvent| e)}>{ "open the state there" }</button>
                }
            </h3>
            { match &p.icicle {
                Some(ic) => html! { <IcicleView icicle={ic.clone()} on_frame={p.on_frame.clone()} on_callers={p.on_callers.clone()} /> },
                None => html! { <p class="muted">{ "Reading live memory…" }</p> },
            } }
        </section>
    }
}

#[function_component(DiagnosisView)]
pub fn diagnosis_view(p: &Props) -> Html {
    let Some(sd) = &p.diagnosis else {
        return html! {
            <div class="diagnosis" data-testid="diagnosis" data-verdict="pending">
                <p class="muted"><span class="spinner"></span>{ "Diagnosing… (the allocation table, the state history and the ledger are being read)" }</p>
            </div>
        };
    };
    let d = &sd.diagnosis;
    html! {
        <div class="diagnosis" data-testid="diagnosis" data-verdict={d.verdict.kind.name()} data-device={d.device.to_string()}
            data-build-ms={format!("{:.1}", sd.build_ms)}>
            { verdict_section(d) }
            { peak_section(d, &p.on_frame) }
            { icicle_section(d, p) }
            <section data-testid="ledger">
                <h3>{ "Memory ledger" }</h3>
                <div class="ledgers">
                    { ledger_bars(&d.ledger.peak, &d.ledger.fragmentation_peak, "peak") }
                    { ledger_bars(&d.ledger.end, &d.ledger.fragmentation_end, "end") }
                </div>
            </section>
            { leaks_section(d, &p.on_frame) }
            { ooms_section(d, &p.on_event) }
            { fragmentation_chart(d, &p.on_moment) }
            { extras_section(d) }
        </div>
    }
}
