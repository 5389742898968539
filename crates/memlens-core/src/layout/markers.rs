//! Point events and spans along a timeline's x axis: `oom`, `snapshot` and `annotate` markers,
//! `external_annotations` regions, and the wall-clock time of each event.

use crate::model::Snapshot;
use crate::trace::Action;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// What a marker on the time axis stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MarkerKind {
    Oom,
    Snapshot,
    Annotate,
}

/// A point event drawn as a vertical line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Marker {
    pub x: u32,
    pub kind: MarkerKind,
    pub label: String,
    /// An `annotate` entry's allocation address and text (`user_metadata`): the tooltip of
    /// that allocation shows it.
    #[serde(default)]
    pub annotates: Option<(u64, String)>,
    /// `oom`: the `device_free` the entry reports (what the driver had left).
    #[serde(default)]
    pub device_free_bytes: Option<u64>,
}

/// An `external_annotations` START/END pair (e.g. `ProfilerStep#3`) mapped onto the x axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Region {
    pub x0: f64,
    pub x1: f64,
    pub label: String,
}

/// `time_us` of the device's events, made non-decreasing; empty if any event lacks one.
pub(super) fn device_times(snap: &Snapshot, device: u32) -> Vec<i64> {
    let rows = snap.device_rows(device);
    let mut out = Vec::with_capacity(rows.len());
    let mut last = i64::MIN;
    for r in rows {
        match snap.trace.time_of(r as usize) {
            Some(t) => {
                last = last.max(t);
                out.push(last);
            }
            _ => return Vec::new(),
        }
    }
    out
}

/// `oom`, `snapshot` and `annotate` events, and `external_annotations` regions.
pub(super) fn markers(snap: &Snapshot, device: u32) -> (Vec<Marker>, Vec<Region>) {
    let rows = snap.device_rows(device);
    let t = &snap.trace;
    let mut out = Vec::new();
    for (i, r) in rows.clone().enumerate() {
        let Some(&action) = t.action.get(r as usize) else {
            continue;
        };
        let x = i as u32 + 1;
        let size = t.size_bytes.get(r as usize).copied().unwrap_or(0);
        match action {
            Action::Oom => {
                let device_free = t.device_free(r);
                let free = device_free
                    .map(|f| format!(", device has {} free", super::axis::format_bytes(f as f64)))
                    .unwrap_or_default();
                out.push(Marker {
                    x,
                    kind: MarkerKind::Oom,
                    label: format!(
                        "OOM at event {i}: requested {}{free}",
                        super::axis::format_bytes(size as f64)
                    ),
                    annotates: None,
                    device_free_bytes: device_free,
                });
            }
            Action::Snapshot => out.push(Marker {
                x,
                kind: MarkerKind::Snapshot,
                label: format!("snapshot at event {i}"),
                annotates: None,
                device_free_bytes: None,
            }),
            Action::Annotate => {
                let text = t
                    .user_metadata
                    .get(r as usize)
                    .map(|s| snap.str(*s))
                    .unwrap_or("");
                let addr = t.addr.get(r as usize).copied().unwrap_or(0);
                out.push(Marker {
                    x,
                    kind: MarkerKind::Annotate,
                    label: format!("annotate at event {i}: {text}"),
                    annotates: Some((addr, text.to_string())),
                    device_free_bytes: None,
                });
            }
            _ => {}
        }
    }
    // external_annotations are timed in µs: place them between the events around them.
    let times: Option<Vec<i64>> = rows.clone().map(|r| t.time_of(r as usize)).collect();
    let times = times.unwrap_or_default();
    let timed = !times.is_empty() && times.windows(2).all(|w| w[0] <= w[1]);
    let mut regions = Vec::new();
    if timed {
        let x_of = |time_us: i64| times.partition_point(|&v| v <= time_us) as f64;
        let mut open: FxHashMap<u32, Vec<(f64, u32)>> = FxHashMap::default();
        for a in snap
            .external_annotations
            .iter()
            .filter(|a| a.device == device)
        {
            let stage = snap.str(a.stage);
            let x = x_of(a.time_us);
            if stage.eq_ignore_ascii_case("START") {
                open.entry(a.name.0).or_default().push((x, a.name.0));
            } else if let Some((x0, name)) = open.get_mut(&a.name.0).and_then(|v| v.pop()) {
                regions.push(Region {
                    x0,
                    x1: x,
                    label: snap.str(crate::trace::StrId(name)).to_string(),
                });
            }
        }
        regions.sort_by(|a, b| a.x0.total_cmp(&b.x0));
    }
    (out, regions)
}
