//! CI gates: `memlens compare BASE NEW --max-peak-growth 5%|256MiB` and `memlens check NEW
//! --max-peak 20GiB [--max-reserved 24GiB]` exit 1 with one line naming the device, the figures
//! and the top change when a limit is exceeded, 0 otherwise (2 on bad input, as every command).

use crate::fmt::{signed_bytes, Bytes};
use crate::load::{load, CliError};
use memlens_core::analysis::compare::DeviceComparison;

/// A limit: bytes, or a percentage of the base.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    Bytes(u64),
    Percent(f64),
}

/// `5%`, `256MiB`, `1.5GiB`, `20GB`, `4096` (bytes); binary units for KiB/MiB/GiB/TiB, decimal
/// for KB/MB/GB/TB.
pub fn parse_limit(s: &str) -> Result<Limit, String> {
    let t = s.trim();
    if let Some(p) = t.strip_suffix('%') {
        let v: f64 = p
            .trim()
            .parse()
            .map_err(|_| format!("not a percentage: {s}"))?;
        return if v.is_finite() && v >= 0.0 {
            Ok(Limit::Percent(v))
        } else {
            Err(format!("not a percentage: {s}"))
        };
    }
    parse_size(t).map(Limit::Bytes)
}

/// A size (see [`parse_limit`]).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("not a size (e.g. 256MiB, 20GiB): {s}"))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kib" | "k" => 1024.0,
        "mib" | "m" => 1024.0 * 1024.0,
        "gib" | "g" => 1024.0 * 1024.0 * 1024.0,
        "tib" | "t" => 1024.0f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => {
            return Err(format!(
                "unknown size unit in {s} (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
            ))
        }
    };
    let bytes = v * mult;
    if (0.0..1.8e19).contains(&bytes) {
        Ok(bytes.round() as u64)
    } else {
        Err(format!("not a size: {s}"))
    }
}

/// The first device whose peak grew beyond `limit`, as the one line to print.
pub fn peak_growth_violation(devices: &[DeviceComparison], limit: Limit) -> Option<String> {
    devices.iter().find_map(|d| {
        let over = match limit {
            Limit::Bytes(b) => d.peak_change_bytes > 0 && d.peak_change_bytes.unsigned_abs() > b,
            Limit::Percent(p) => d.peak_change_pct.is_some_and(|x| x > p),
        };
        if !over {
            return None;
        }
        let top = d
            .by_frame
            .iter()
            .find(|c| c.change_bytes > 0)
            .map(|c| {
                format!(
                    "; top change {} at {}",
                    signed_bytes(c.change_bytes),
                    c.frame
                )
            })
            .unwrap_or_default();
        Some(format!(
            "peak grew beyond the limit on device {}: {} -> {} ({}{}, limit {}){top}",
            d.device,
            Bytes::from(d.a.timeline_peak_bytes),
            Bytes::from(d.b.timeline_peak_bytes),
            signed_bytes(d.peak_change_bytes),
            d.peak_change_pct
                .map_or(String::new(), |p| format!(", {p:+.1}%")),
            match limit {
                Limit::Bytes(b) => Bytes::from(b).to_string(),
                Limit::Percent(p) => format!("{p}%"),
            }
        ))
    })
}

#[derive(clap::Args)]
pub struct CheckArgs {
    /// Snapshot to check.
    file: String,
    /// Largest allowed timeline peak (e.g. 20GiB).
    #[arg(long, value_parser = parse_size)]
    max_peak: Option<u64>,
    /// Largest allowed peak reserved memory (e.g. 24GiB).
    #[arg(long, value_parser = parse_size)]
    max_reserved: Option<u64>,
    /// Only this device (default: all).
    #[arg(short, long)]
    device: Option<u32>,
}

/// `memlens check`: `Ok(Some(line))` when a limit is exceeded (exit 1).
pub fn run_check(a: CheckArgs) -> Result<Option<String>, CliError> {
    if a.max_peak.is_none() && a.max_reserved.is_none() {
        return Err(CliError(
            "check needs --max-peak and/or --max-reserved".into(),
        ));
    }
    let snap = load(&a.file)?;
    let stats = memlens_core::snapshot_stats(&snap);
    for d in stats
        .devices
        .iter()
        .filter(|d| a.device.is_none_or(|x| x == d.device))
    {
        let peak = d.timeline_peak_bytes.max(0) as u64;
        let reserved = d.peak_reserved_bytes.max(0) as u64;
        let what = match (a.max_peak, a.max_reserved) {
            (Some(m), _) if peak > m => Some(format!(
                "timeline peak {} > limit {}",
                Bytes::from(peak),
                Bytes::from(m)
            )),
            (_, Some(m)) if reserved > m => Some(format!(
                "peak reserved {} > limit {}",
                Bytes::from(reserved),
                Bytes::from(m)
            )),
            _ => None,
        };
        if let Some(w) = what {
            // Who holds the peak: the allocation table is enough (no state history).
            let replay = memlens_core::replay::replay_device(&snap, d.device);
            let event = d.timeline_peak_event;
            let mut cx = memlens_core::analysis::ledger::Classifier::new(&snap, d.device);
            let alive = memlens_core::analysis::alive::alive_at(&replay, &mut cx, event);
            let top = alive
                .top
                .first()
                .map(|g| {
                    format!(
                        "; largest at the peak {} at {}",
                        Bytes::from(g.bytes),
                        g.frame
                    )
                })
                .unwrap_or_default();
            return Ok(Some(format!("device {}: {w}{top}: {}", d.device, a.file)));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_as_people_write_them() {
        assert_eq!(parse_limit("5%"), Ok(Limit::Percent(5.0)));
        assert_eq!(parse_limit("256MiB"), Ok(Limit::Bytes(256 << 20)));
        assert_eq!(parse_limit("1.5GiB"), Ok(Limit::Bytes(3 << 29)));
        assert_eq!(parse_limit("20GB"), Ok(Limit::Bytes(20_000_000_000)));
        assert_eq!(parse_limit("4096"), Ok(Limit::Bytes(4096)));
        assert!(parse_limit("lots").is_err());
        assert!(parse_limit("5 parsecs").is_err());
        assert!(parse_limit("-5%").is_err());
    }
}
