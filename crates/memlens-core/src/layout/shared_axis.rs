//! A shared x axis for timelines of different traces (the Compare view stacks two): a position
//! in shared units is either the fraction of each trace (event index scaled to its length) or
//! µs since each trace's first event. [`AxisMap`] maps one layout's event-space x to shared
//! units and back, so one window and one cursor drive every timeline.

use super::render::TimeMap;
use super::timeline::TimelineLayout;
use std::sync::Arc;

/// One layout's side of the shared axis.
#[derive(Debug, Clone, PartialEq)]
pub struct AxisMap {
    x_end: f64,
    /// Wall-clock units (µs since the first event); `None`: fractions of the trace.
    time: Option<Arc<TimeMap>>,
}

impl AxisMap {
    /// Fractions of the trace, or with `time` µs since its first event (fractions when the
    /// layout has no times).
    pub fn new(layout: &TimelineLayout, time: bool) -> AxisMap {
        AxisMap {
            x_end: f64::from(layout.x_end().max(1)),
            time: if time {
                TimeMap::new(&layout.time_us).map(Arc::new)
            } else {
                None
            },
        }
    }

    /// Whether positions are µs (else fractions).
    pub fn is_time(&self) -> bool {
        self.time.is_some()
    }

    /// Shared units at event-space `x`.
    pub fn shared(&self, x: f64) -> f64 {
        match &self.time {
            Some(t) => t.u(x),
            None => x / self.x_end,
        }
    }

    /// Event-space x at shared units `s`.
    pub fn x(&self, s: f64) -> f64 {
        match &self.time {
            Some(t) => t.x(s),
            None => s * self.x_end,
        }
    }

    /// The whole trace in shared units.
    pub fn extent(&self) -> (f64, f64) {
        (self.shared(0.0), self.shared(self.x_end))
    }

    /// The trace entry applied last at event-space `x` (event `i` sits at `x = i + 1`):
    /// `None` before the first.
    pub fn event_at(&self, x: f64) -> Option<u32> {
        let last = (self.x_end - 2.0).max(0.0);
        let i = x.floor() - 1.0;
        (i >= 0.0 && self.x_end >= 2.0).then(|| i.min(last) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(n: u32, time_us: Vec<i64>) -> TimelineLayout {
        let mut l = TimelineLayout::default();
        l.n_events = n;
        l.time_us = time_us;
        l
    }

    #[test]
    fn fractions_scale_each_trace_to_its_length() {
        let (a, b) = (
            AxisMap::new(&layout(99, vec![]), false),
            AxisMap::new(&layout(9, vec![]), true),
        );
        assert!(!b.is_time(), "no times: fractions");
        assert_eq!(a.shared(50.0), 0.5);
        assert_eq!(b.x(a.shared(50.0)), 5.0);
        assert_eq!(a.extent(), (0.0, 1.0));
        assert_eq!(a.x(a.shared(37.25)), 37.25);
    }

    #[test]
    fn time_is_microseconds_since_each_first_event() {
        let a = AxisMap::new(&layout(3, vec![1000, 1010, 1030]), true);
        let b = AxisMap::new(&layout(2, vec![5000, 5020]), true);
        assert!(a.is_time());
        assert_eq!(a.shared(1.0), 0.0);
        assert_eq!(a.shared(3.0), 30.0);
        // 20 µs after each start: a's third... b's second event.
        assert_eq!(b.x(a.shared(2.5)), 2.0);
    }

    #[test]
    fn the_event_at_a_position_is_the_last_applied() {
        let a = AxisMap::new(&layout(10, vec![]), false);
        assert_eq!(a.event_at(0.5), None);
        assert_eq!(a.event_at(1.0), Some(0));
        assert_eq!(a.event_at(4.7), Some(3));
        assert_eq!(a.event_at(11.0), Some(9));
        assert_eq!(a.event_at(99.0), Some(9));
        assert_eq!(AxisMap::new(&layout(0, vec![]), false).event_at(0.5), None);
    }
}
