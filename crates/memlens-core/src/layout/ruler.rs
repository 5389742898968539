//! The timeline's ruler: two points in data space (x = event, y = bytes) and what lies between
//! them, in bytes, events and (when the trace has times) wall-clock time.

use super::axis::format_bytes;
use super::render::TimeMap;

/// A measurement between two points of the plot, in data space.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ruler {
    pub a: (f64, f64),
    pub b: (f64, f64),
}

impl Ruler {
    /// Bytes between the two points (always ≥ 0).
    pub fn bytes(&self) -> f64 {
        (self.b.1 - self.a.1).abs()
    }
    /// Trace events between the two points (x is `event index + 1`, so whole events).
    pub fn events(&self) -> u64 {
        (self.b.0.floor() - self.a.0.floor()).abs() as u64
    }
    /// Wall-clock µs between the two points.
    pub fn time_us(&self, time: &TimeMap) -> f64 {
        (time.u(self.b.0) - time.u(self.a.0)).abs()
    }
    /// `Δ 1.5 GiB · 120 events · 3.2 ms`.
    pub fn describe(&self, time: Option<&TimeMap>) -> String {
        let mut s = format!(
            "Δ {} · {} event{}",
            format_bytes(self.bytes().round()),
            self.events(),
            if self.events() == 1 { "" } else { "s" }
        );
        if let Some(t) = time {
            s.push_str(&format!(" · {}", format_duration_us(self.time_us(t))));
        }
        s
    }
}

/// `850 µs`, `12.5 ms`, `3.25 s`, `4 min 5 s`.
pub fn format_duration_us(us: f64) -> String {
    if us < 1e3 {
        format!("{us:.0} µs")
    } else if us < 1e6 {
        let ms = format!("{:.3}", us / 1e3);
        format!("{} ms", ms.trim_end_matches('0').trim_end_matches('.'))
    } else if us < 60e6 {
        format!("{:.2} s", us / 1e6)
    } else {
        let s = (us / 1e6).round() as u64;
        format!("{} min {} s", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_bytes_events_and_time() {
        let r = Ruler {
            a: (10.4, 3.0 * 1024.0 * 1024.0),
            b: (4.9, 1024.0 * 1024.0),
        };
        assert_eq!(r.bytes(), 2.0 * 1024.0 * 1024.0);
        assert_eq!(r.events(), 6);
        assert_eq!(r.describe(None), "Δ 2 MiB · 6 events");
        let times: Vec<i64> = (0..20).map(|i| i * 1000).collect();
        let t = TimeMap::new(&times).unwrap_or_else(|| panic!("no time map"));
        // x = 5 is event 4 (4 ms), x = 10 event 9 (9 ms).
        let r = Ruler {
            a: (5.0, 0.0),
            b: (10.0, 0.0),
        };
        assert_eq!(r.describe(Some(&t)), "Δ 0 B · 5 events · 5 ms");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_duration_us(850.0), "850 µs");
        assert_eq!(format_duration_us(12_500.0), "12.5 ms");
        assert_eq!(format_duration_us(3_250_000.0), "3.25 s");
        assert_eq!(format_duration_us(245e6), "4 min 5 s");
    }
}
