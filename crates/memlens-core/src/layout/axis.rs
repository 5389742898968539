//! Axis ticks and the byte formatting every view shares (binary units, like upstream's
//! `formatSize`): y ticks fall on powers of two so labels read `256 MiB`, `512 MiB`, `1 GiB`;
//! x ticks count events, or read as wall-clock time since the first event.

/// One tick: its value in data units and its label.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    pub value: f64,
    pub label: String,
}

const UNITS: [&str; 9] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"];

/// `1536` → `1.5 KiB`; up to two decimals, trailing zeros dropped.
pub fn format_bytes(bytes: f64) -> String {
    if !bytes.is_finite() {
        return "? B".into();
    }
    let neg = bytes < 0.0;
    let mut v = bytes.abs();
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    let mut s = if u == 0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    format!(
        "{}{s} {}",
        if neg { "-" } else { "" },
        UNITS.get(u).copied().unwrap_or("B")
    )
}

/// Ticks for a byte axis on `[lo, hi]`: multiples of the smallest power of two that keeps the
/// count at or under `max_ticks`.
pub fn bytes_ticks(lo: f64, hi: f64, max_ticks: usize) -> Vec<Tick> {
    let span = hi - lo;
    if !(span.is_finite() && span > 0.0) || max_ticks == 0 {
        return Vec::new();
    }
    let mut step = 1.0f64;
    while span / step > max_ticks as f64 {
        step *= 2.0;
    }
    ticks_with_step(lo, hi, step, format_bytes)
}

/// Ticks for a count axis (events) on `[lo, hi]`: steps of 1, 2 or 5 × 10^k.
pub fn count_ticks(lo: f64, hi: f64, max_ticks: usize) -> Vec<Tick> {
    let span = hi - lo;
    if !(span.is_finite() && span > 0.0) || max_ticks == 0 {
        return Vec::new();
    }
    let mut base = 1.0f64;
    loop {
        for m in [1.0, 2.0, 5.0] {
            let step = base * m;
            if span / step <= max_ticks as f64 {
                return ticks_with_step(lo, hi, step, |v| format!("{v:.0}"));
            }
        }
        base *= 10.0;
    }
}

/// Ticks for a wall-clock axis on `[lo_us, hi_us]` (µs since the first event): steps of 1, 2
/// or 5 × 10^k µs up to 5 s, then 10 s, 15 s, 30 s, 1, 2, 5, 10, 15, 30 min and whole hours.
/// Labels are seconds with as many decimals as the step needs (`1.25 s`), or `m:ss` / `h:mm:ss`
/// once the step is a second or more and the axis passes a minute.
pub fn time_ticks(lo_us: f64, hi_us: f64, max_ticks: usize) -> Vec<Tick> {
    let span = hi_us - lo_us;
    if !(span.is_finite() && span > 0.0) || max_ticks == 0 {
        return Vec::new();
    }
    let mut steps: Vec<f64> = Vec::new();
    let mut base = 1.0f64;
    while base < 1e6 {
        steps.extend([base, 2.0 * base, 5.0 * base]);
        base *= 10.0;
    }
    steps.extend([10e6, 15e6, 30e6, 60e6, 120e6, 300e6, 600e6, 900e6, 1800e6]);
    let mut hours = 3600e6;
    while hours < 1e15 {
        steps.push(hours);
        hours *= 2.0;
    }
    let step = steps
        .into_iter()
        .find(|&st| span / st <= max_ticks as f64)
        .unwrap_or(span);
    let clock = step >= 1e6 && hi_us >= 60e6;
    let decimals = if step >= 1e6 {
        0
    } else {
        (-(step / 1e6).log10()).ceil().max(0.0) as usize
    };
    ticks_with_step(lo_us, hi_us, step, move |v| {
        if clock {
            format_clock(v / 1e6)
        } else {
            format!("{:.*} s", decimals, v / 1e6)
        }
    })
}

/// `75` → `1:15`, `3725` → `1:02:05` (seconds, rounded; negative with a sign).
pub fn format_clock(seconds: f64) -> String {
    let neg = seconds < 0.0;
    let t = seconds.abs().round() as u64;
    let (h, m, s) = (t / 3600, (t / 60) % 60, t % 60);
    let sign = if neg { "-" } else { "" };
    if h > 0 {
        format!("{sign}{h}:{m:02}:{s:02}")
    } else {
        format!("{sign}{m}:{s:02}")
    }
}

fn ticks_with_step(lo: f64, hi: f64, step: f64, label: impl Fn(f64) -> String) -> Vec<Tick> {
    let mut v = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while v <= hi && out.len() < 1000 {
        out.push(Tick {
            value: v,
            label: label(v),
        });
        v += step;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_binary_units() {
        assert_eq!(format_bytes(0.0), "0 B");
        assert_eq!(format_bytes(512.0), "512 B");
        assert_eq!(format_bytes(1536.0), "1.5 KiB");
        assert_eq!(format_bytes(1024.0 * 1024.0 * 1024.0), "1 GiB");
        assert_eq!(format_bytes(1.25 * 1024.0 * 1024.0 * 1024.0), "1.25 GiB");
        assert_eq!(format_bytes(-2048.0), "-2 KiB");
    }

    #[test]
    fn byte_ticks_fall_on_powers_of_two() {
        let gib = 1024.0 * 1024.0 * 1024.0;
        let t = bytes_ticks(0.0, 1.5 * gib, 6);
        let labels: Vec<&str> = t.iter().map(|t| t.label.as_str()).collect();
        assert_eq!(
            labels,
            ["0 B", "256 MiB", "512 MiB", "768 MiB", "1 GiB", "1.25 GiB", "1.5 GiB"][..t.len()]
        );
        assert!(t.len() <= 7);
        let t = bytes_ticks(0.0, 3000.0, 4);
        assert_eq!(
            t.iter().map(|t| t.value).collect::<Vec<_>>(),
            [0.0, 1024.0, 2048.0]
        );
        assert!(bytes_ticks(5.0, 5.0, 4).is_empty());
    }

    #[test]
    fn time_ticks_read_as_seconds_or_clock() {
        let labels = |t: Vec<Tick>| t.into_iter().map(|t| t.label).collect::<Vec<_>>();
        assert_eq!(
            labels(time_ticks(0.0, 2_000_000.0, 5)),
            ["0.0 s", "0.5 s", "1.0 s", "1.5 s", "2.0 s"]
        );
        assert_eq!(
            labels(time_ticks(1000.0, 1003.0, 4)),
            ["0.001000 s", "0.001001 s", "0.001002 s", "0.001003 s"]
        );
        assert_eq!(
            labels(time_ticks(0.0, 180e6, 4)),
            ["0:00", "1:00", "2:00", "3:00"]
        );
        assert_eq!(format_clock(3725.0), "1:02:05");
        assert!(time_ticks(5.0, 5.0, 4).is_empty());
        assert!(time_ticks(0.0, 1e6, 8).len() <= 8);
    }

    #[test]
    fn count_ticks_use_1_2_5() {
        let t = count_ticks(0.0, 22331.0, 8);
        assert_eq!(t.first().map(|t| t.value), Some(0.0));
        assert_eq!(t.get(1).map(|t| t.value), Some(5000.0));
        assert!(t.len() <= 8);
        let t = count_ticks(3.2, 7.9, 10);
        assert_eq!(
            t.iter().map(|t| t.label.as_str()).collect::<Vec<_>>(),
            ["4", "5", "6", "7"]
        );
    }
}
