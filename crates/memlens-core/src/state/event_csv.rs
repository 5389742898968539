//! The event list as CSV (the page's "CSV" of the Allocator State History list): one row per
//! trace entry of a range, with a header row; numbers in the units the list states — sizes in
//! bytes, times in µs since the epoch as the snapshot has them, addresses in hex as the list
//! writes them — and each unit in its column's name.

use super::events::EventList;
use crate::trace::Action;
use std::fmt::Write;
use std::ops::Range;

/// The header row. `size_bytes` is the entry's size (an `oom` entry's: the request);
/// `address` and `version` are the list's `b'<address>_<version>` (empty for `oom` and
/// `snapshot` entries); `stream` is the stream id; `device_free_bytes` only for `oom` entries
/// that report it.
pub const EVENT_CSV_HEADER: &str =
    "event,action,address,version,size_bytes,stream,time_us,device_free_bytes";

impl EventList {
    /// Entries `rows` (clamped to the list) as CSV, header first.
    pub fn csv(&self, rows: Range<usize>) -> String {
        let rows = rows.start.min(self.len())..rows.end.min(self.len());
        let mut out = String::with_capacity(EVENT_CSV_HEADER.len() + 1 + rows.len() * 64);
        out.push_str(EVENT_CSV_HEADER);
        out.push('\n');
        for i in rows {
            self.csv_row(i, &mut out);
        }
        out
    }

    fn csv_row(&self, i: usize, out: &mut String) {
        let action = self.action(i);
        let _ = write!(out, "{i},{},", action.name());
        let addressed = !matches!(action, Action::Oom | Action::Snapshot);
        match (self.addr.get(i), self.version.get(i)) {
            (Some(a), Some(v)) if addressed => {
                let _ = write!(out, "0x{a:x},{v},");
            }
            _ => out.push_str(",,"),
        }
        let size = self.size_bytes.get(i).copied().unwrap_or(0);
        let _ = write!(out, "{size},");
        if let Some(s) = self.stream_of(i) {
            let _ = write!(out, "{s}");
        }
        out.push(',');
        if let Some(t) = self.time_of(i) {
            let _ = write!(out, "{t}");
        }
        out.push(',');
        let free = self
            .meta
            .ooms
            .iter()
            .find(|o| o.event as usize == i)
            .and_then(|o| o.device_free_bytes);
        if let Some(f) = free {
            let _ = write!(out, "{f}");
        }
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::replay_device;

    fn list(json: &str) -> EventList {
        let s = crate::load(json.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        EventList::build(&s, &replay_device(&s, 0), Vec::new())
    }

    const TRACE: &str = r#"{"segments": [], "device_traces": [[
        {"action": "segment_alloc", "addr": 4096, "size": 2097152, "stream": 0, "time_us": 100},
        {"action": "alloc", "addr": 4096, "size": 512, "stream": 7, "time_us": 101},
        {"action": "free_completed", "addr": 4096, "size": 512, "stream": 7, "time_us": 102},
        {"action": "alloc", "addr": 4096, "size": 1024, "stream": 0, "time_us": 103},
        {"action": "oom", "addr": 0, "size": 1073741824, "stream": 0, "device_free": 5000},
        {"action": "snapshot", "addr": 0, "size": 0, "stream": 0}
    ]]}"#;

    #[test]
    fn rows_carry_the_lists_numbers_in_bytes_and_us() {
        let l = list(TRACE);
        let csv = l.csv(0..l.len());
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), l.len() + 1);
        assert_eq!(lines[0], EVENT_CSV_HEADER);
        assert_eq!(lines[1], "0,segment_alloc,0x1000,0,2097152,0,100,");
        assert_eq!(lines[2], "1,alloc,0x1000,0,512,7,101,");
        // The second allocation at the address is version 1, as the list's `b'1000_1`.
        assert_eq!(lines[4], "3,alloc,0x1000,1,1024,0,103,");
        assert!(l.line(3).contains("b'1000_1"));
        assert_eq!(lines[5], "4,oom,,,1073741824,0,,5000");
        assert_eq!(lines[6], "5,snapshot,,,0,0,,");
        for line in &lines {
            assert_eq!(line.split(',').count(), 8, "{line}");
        }
    }

    #[test]
    fn a_range_is_clamped_to_the_list() {
        let l = list(TRACE);
        let csv = l.csv(3..100);
        let rows: Vec<&str> = csv.lines().skip(1).collect();
        assert_eq!(rows.len(), 3);
        assert!(rows[0].starts_with("3,alloc,"));
        assert_eq!(l.csv(10..20).lines().count(), 1);
    }
}
