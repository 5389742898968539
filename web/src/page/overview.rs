//! The files overview (`#view=overview`): with several snapshots open (one per rank, say), one
//! row per file and device — timeline peak, peak reserved, reserved, free in reserved,
//! inactive_split, verdict — so the rank that differs stands out. Rows whose peak exceeds the
//! median by more than [`OUTLIER_PCT`] % are outliers, and so is the largest peak when it
//! does; clicking a row opens that file and device on the timeline.

use crate::page::app_state::{AppState, FileStatus};
use memlens_core::analysis::verdict::human;
use yew::prelude::*;

/// Peak above the median by more than this (percent) marks an outlier.
pub const OUTLIER_PCT: f64 = 10.0;

#[derive(Properties, PartialEq)]
pub struct Props {
    pub state: std::rc::Rc<AppState>,
    /// Open (file, device) on the timeline.
    pub on_open: Callback<(u32, u32)>,
}

struct Row {
    file: u32,
    name: String,
    device: u32,
    peak: i64,
    peak_reserved: i64,
    reserved: u64,
    free: u64,
    split: u64,
    verdict: Option<String>,
}

fn rows(s: &AppState) -> Vec<Row> {
    let mut out = Vec::new();
    for f in &s.files {
        let FileStatus::Ready(info) = &f.status else {
            continue;
        };
        for d in &info.devices {
            out.push(Row {
                file: f.id,
                name: f.name.clone(),
                device: d.device,
                peak: d.timeline_peak_bytes,
                peak_reserved: d.peak_reserved_bytes,
                reserved: d.reserved_bytes,
                free: d.reserved_bytes.saturating_sub(d.active_bytes),
                split: d.inactive_split_bytes,
                verdict: s
                    .diagnoses
                    .get(&(f.id, d.device))
                    .map(|x| x.diagnosis.verdict.kind.name().to_string()),
            });
        }
    }
    out
}

fn median(mut v: Vec<i64>) -> i64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

#[function_component(OverviewView)]
pub fn overview_view(p: &Props) -> Html {
    let rows = rows(&p.state);
    let med = median(rows.iter().map(|r| r.peak).collect());
    let outlier =
        |r: &Row| rows.len() > 1 && r.peak as f64 > med as f64 * (1.0 + OUTLIER_PCT / 100.0);
    html! {
        <div class="overview" data-testid="overview" data-rows={rows.len().to_string()} data-median-peak={med.to_string()}>
            <p class="small">{ format!("{} files open; median timeline peak {}; rows more than {OUTLIER_PCT}% above it are marked. Click a row to open it.", p.state.files.len(), human(med.max(0) as u64)) }</p>
            <table class="diag-table">
                <thead><tr><th>{ "file" }</th><th>{ "device" }</th><th>{ "timeline peak" }</th><th>{ "vs median" }</th><th>{ "peak reserved" }</th><th>{ "reserved" }</th><th>{ "free in reserved" }</th><th>{ "inactive split" }</th><th>{ "verdict" }</th></tr></thead>
                <tbody>
                    { for rows.iter().map(|r| {
                        let (file, device) = (r.file, r.device);
                        let vs = if med > 0 { format!("{:+.1}%", 100.0 * (r.peak - med) as f64 / med as f64) } else { "–".into() };
                        html! {
                            <tr data-testid="overview-row" data-file={r.name.clone()} data-device={r.device.to_string()} data-peak={r.peak.to_string()}
                                data-outlier={outlier(r).to_string()} class={classes!("clickable", outlier(r).then_some("outlier"))}
                                onclick={p.on_open.reform(move |_: MouseEvent| (file, device))}>
                                <td class="frame">{ &r.name }</td>
                                <td class="num">{ r.device }</td>
                                <td class="num">{ human(r.peak.max(0) as u64) }</td>
                                <td class="num">{ vs }</td>
                                <td class="num">{ human(r.peak_reserved.max(0) as u64) }</td>
                                <td class="num">{ human(r.reserved) }</td>
                                <td class="num">{ human(r.free) }</td>
                                <td class="num">{ human(r.split) }</td>
                                <td data-testid="overview-verdict">{ r.verdict.clone().unwrap_or_else(|| "–".into()) }</td>
                            </tr>
                        }
                    }) }
                </tbody>
            </table>
        </div>
    }
}
