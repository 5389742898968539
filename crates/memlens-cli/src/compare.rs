//! The peak comparison of `memlens compare` as text: per device, peak A → peak B with the
//! change, then the largest changes by user frame and by ledger class (core's
//! `analysis::compare`; its JSON, with the stacks that changed at the peaks, is core's).

use crate::fmt::{signed_bytes, Bytes};
use memlens_core::analysis::compare::DeviceComparison;
use std::fmt::Write as _;

/// Changes listed per table.
const ROWS: usize = 10;

pub fn peaks_text(devices: &[DeviceComparison]) -> String {
    let mut t = String::new();
    for d in devices {
        let _ = writeln!(
            t,
            "device {}: timeline peak {} -> {} ({}{})",
            d.device,
            Bytes::from(d.a.timeline_peak_bytes),
            Bytes::from(d.b.timeline_peak_bytes),
            signed_bytes(d.peak_change_bytes),
            d.peak_change_pct
                .map_or(String::new(), |p| format!(", {p:+.1}%"))
        );
        let frames: Vec<_> = d
            .by_frame
            .iter()
            .filter(|c| c.change_bytes != 0)
            .take(ROWS)
            .collect();
        if !frames.is_empty() {
            let _ = writeln!(
                t,
                "  {:>11} {:>11} {:>11}  user frame",
                "change", "before", "after"
            );
        }
        for c in frames {
            let tag = match (c.a_bytes, c.b_bytes) {
                (0, _) => "new: ",
                (_, 0) => "gone: ",
                _ => "",
            };
            let _ = writeln!(
                t,
                "  {:>11} {:>11} {:>11}  {tag}{}",
                signed_bytes(c.change_bytes),
                Bytes::from(c.a_bytes).to_string(),
                Bytes::from(c.b_bytes).to_string(),
                c.frame
            );
        }
        for c in d.by_class.iter().filter(|c| c.change_bytes != 0) {
            let _ = writeln!(
                t,
                "  {:>11} {:>11} {:>11}  ledger: {}",
                signed_bytes(c.change_bytes),
                Bytes::from(c.a_bytes).to_string(),
                Bytes::from(c.b_bytes).to_string(),
                c.class
            );
        }
    }
    t.push('\n');
    t
}
