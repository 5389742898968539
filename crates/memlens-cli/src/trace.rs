//! `memlens trace`: the trace of each device replayed as Python-like lines, as
//! `python -m torch.cuda._memory_viz trace` prints it, with upstream's bugs fixed: names of freed
//! allocations and segments are reused, snapshot segments are found by their `total_size` range,
//! `TOTAL MEM` is the bytes still allocated at the end, and a bare segment list does not crash.
//!
//! Which free closes which allocation is read from the allocation table
//! ([`memlens_core::replay`]); this module only names them. An alloc over a live address (its
//! free never recorded) takes over the address: the earlier allocation's name is free again and
//! it no longer counts in `TOTAL MEM`, as upstream's address map forgets it.

use crate::fmt::Bytes;
use crate::load::{load, CliError};
use memlens_core::model::Segment;
use memlens_core::replay::{replay_device, Origin, Replay};
use memlens_core::trace::Action;
use memlens_core::Snapshot;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{self, BufWriter, Write};
use std::ops::Range;

#[derive(clap::Args)]
pub struct Args {
    /// Snapshot file (pickle of any protocol, JSON, or _memory_viz HTML); `-` reads stdin.
    file: String,
    /// Only this device (default: every device with a non-empty trace).
    #[arg(short, long)]
    device: Option<u32>,
}

pub fn run(a: Args) -> Result<(), CliError> {
    let snap = load(&a.file)?;
    let mut out = BufWriter::new(io::stdout().lock());
    match write_trace(&snap, a.device, &mut out).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        // `memlens trace f | head` is normal use, not an error.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError(format!("cannot write output: {e}"))),
    }
}

/// Writes the replay of every device with a non-empty trace (or of `only`).
pub fn write_trace(s: &Snapshot, only: Option<u32>, out: &mut impl Write) -> io::Result<()> {
    if s.segments_only {
        return writeln!(
            out,
            "# no trace: this file is a bare list of segments (torch.cuda.memory_snapshot()); \
             dump with torch.cuda.memory._dump_snapshot() after _record_memory_history() to get one"
        );
    }
    let mut printed = false;
    for dt in &s.device_traces {
        if dt.rows.is_empty() || only.is_some_and(|d| d != dt.device) {
            continue;
        }
        writeln!(out, "Device {} ----------------", dt.device)?;
        writeln!(out, "{} entries", dt.rows.len())?;
        Writer::new(s, dt.device, dt.rows.clone()).write(out)?;
        printed = true;
    }
    if !printed {
        match only {
            Some(d) => writeln!(out, "# no trace entries for device {d}")?,
            None => writeln!(
                out,
                "# no trace entries on any device (memory history was not recorded)"
            )?,
        }
    }
    Ok(())
}

/// Short names `a..z, a1..z1, a2..`, reusing freed ones (most recently freed first).
#[derive(Default)]
struct Names {
    next: u64,
    free: Vec<String>,
}

impl Names {
    fn take(&mut self) -> String {
        if let Some(n) = self.free.pop() {
            return n;
        }
        let (round, letter) = (self.next / 26, self.next % 26);
        self.next += 1;
        let c = char::from(b'a' + letter as u8); // letter < 26
        if round == 0 {
            c.to_string()
        } else {
            format!("{c}{round}")
        }
    }

    fn give_back(&mut self, name: String) {
        self.free.push(name);
    }
}

/// A live allocation or segment of the replay.
struct Live {
    name: String,
    size_bytes: u64,
}

/// One device's replay state.
struct Writer<'a> {
    s: &'a Snapshot,
    rows: Range<u32>,
    /// The device's allocation table, and for each event the allocation it touches.
    table: Replay,
    allocation_of_event: Vec<Option<u32>>,
    names: Names,
    /// Segments cudaMalloc'ed in the trace and not yet freed, by base address.
    segments: BTreeMap<u64, Live>,
    /// Snapshot segments of this device (`seg_<index in the file>`), sorted by address, that
    /// existed before the trace began (none of them is cudaMalloc'ed within it).
    snapshot_segments: Vec<(u64, u64, usize)>,
    /// Names of the named allocations (index into the table).
    alloc_names: HashMap<u32, String>,
    /// Address → the named allocation there (the latest allocated, until its free).
    at_addr: HashMap<u64, u32>,
}

impl<'a> Writer<'a> {
    fn new(s: &'a Snapshot, device: u32, rows: Range<u32>) -> Self {
        let t = &s.trace;
        let malloced: HashSet<u64> = rows
            .clone()
            .filter(|&r| t.action.get(r as usize) == Some(&Action::SegmentAlloc))
            .filter_map(|r| t.addr.get(r as usize).copied())
            .collect();
        let mut snapshot_segments: Vec<(u64, u64, usize)> = s
            .segments
            .iter()
            .enumerate()
            .filter(|(_, g): &(usize, &Segment)| {
                g.device == device && !malloced.contains(&g.address)
            })
            .map(|(i, g)| (g.address, g.address.saturating_add(g.total_size_bytes), i))
            .collect();
        snapshot_segments.sort_unstable();
        let table = replay_device(s, device);
        Writer {
            s,
            rows,
            allocation_of_event: table.allocation_of_events(),
            table,
            names: Names::default(),
            segments: BTreeMap::new(),
            snapshot_segments,
            alloc_names: HashMap::new(),
            at_addr: HashMap::new(),
        }
    }

    /// The segment holding `addr`: `(name, base)`.
    fn find_segment(&self, addr: u64) -> Option<(String, u64)> {
        if let Some((&base, seg)) = self.segments.range(..=addr).next_back() {
            if addr - base < seg.size_bytes {
                return Some((seg.name.clone(), base));
            }
        }
        let i = self
            .snapshot_segments
            .partition_point(|&(start, _, _)| start <= addr);
        let &(start, end, idx) = self.snapshot_segments.get(i.checked_sub(1)?)?;
        (addr < end).then(|| (format!("seg_{idx}"), start))
    }

    /// The allocation entry `event` touches (per the table), else the one named at `addr`.
    fn allocation(&self, event: usize, addr: u64) -> Option<u32> {
        let of = self.allocation_of_event.get(event).copied().flatten();
        of.or_else(|| self.at_addr.get(&addr).copied())
    }

    /// The name of `allocation`, or the address itself.
    fn alloc_name(&self, allocation: Option<u32>, addr: u64) -> String {
        allocation
            .and_then(|a| self.alloc_names.get(&a))
            .cloned()
            .unwrap_or_else(|| addr.to_string())
    }

    /// Names the allocation of an `alloc` entry; an earlier one named at its address (its free
    /// never recorded) gives its name back.
    fn name_allocation(&mut self, allocation: Option<u32>, addr: u64) -> String {
        let name = self.names.take();
        if let Some(a) = allocation {
            self.alloc_names.insert(a, name.clone());
            if let Some(old) = self.at_addr.insert(addr, a) {
                if let Some(n) = self.alloc_names.remove(&old) {
                    self.names.give_back(n);
                }
            }
        }
        name
    }

    /// The `free_completed` of `allocation`: its name, given back (the address itself for an
    /// allocation made before the trace).
    fn free_allocation(&mut self, allocation: Option<u32>, addr: u64) -> String {
        let traced = allocation
            .and_then(|a| self.table.allocations.get(a as usize))
            .is_some_and(|a| a.origin == Origin::Traced);
        let name = match allocation.filter(|_| traced) {
            Some(a) => self.alloc_names.remove(&a),
            None => None,
        };
        match name {
            Some(n) => {
                if self.at_addr.get(&addr) == allocation.as_ref() {
                    self.at_addr.remove(&addr);
                }
                self.names.give_back(n.clone());
                n
            }
            None => addr.to_string(),
        }
    }

    fn write(mut self, out: &mut impl Write) -> io::Result<()> {
        let t = &self.s.trace;
        for (event, r) in self.rows.clone().enumerate() {
            let i = r as usize;
            let (Some(&action), Some(&addr), Some(&size)) =
                (t.action.get(i), t.addr.get(i), t.size_bytes.get(i))
            else {
                continue;
            };
            let sz = Bytes::from(size);
            match action {
                Action::Alloc => {
                    let name = self.name_allocation(self.allocation(event, addr), addr);
                    match self.find_segment(addr) {
                        Some((seg, base)) => writeln!(out, "{name} = {seg}[{}:{sz}]", addr - base)?,
                        None => writeln!(out, "{name} = MEM[{addr}:{sz}]")?,
                    }
                }
                Action::FreeRequested => {
                    let name = self.alloc_name(self.allocation(event, addr), addr);
                    writeln!(out, "del {name} # {sz}")?
                }
                Action::FreeCompleted => {
                    let name = self.free_allocation(self.allocation(event, addr), addr);
                    writeln!(out, "# free completed for {name} {sz}")?;
                }
                Action::SegmentAlloc => {
                    let name = self.names.take();
                    writeln!(out, "{name} = cudaMalloc({addr}, {sz})")?;
                    if let Some(old) = self.segments.insert(
                        addr,
                        Live {
                            name,
                            size_bytes: size,
                        },
                    ) {
                        self.names.give_back(old.name);
                    }
                }
                Action::SegmentFree => match self.segments.remove(&addr) {
                    Some(seg) => {
                        writeln!(out, "cudaFree({}) # {sz}", seg.name)?;
                        self.names.give_back(seg.name);
                    }
                    None => writeln!(out, "cudaFree({addr}) # {sz}")?,
                },
                Action::Oom => match t.device_free(r) {
                    Some(free) => writeln!(
                        out,
                        "raise OutOfMemoryError # {sz} requested, {} free in CUDA",
                        Bytes::from(free)
                    )?,
                    None => writeln!(out, "raise OutOfMemoryError # {sz} requested")?,
                },
                Action::Annotate => {
                    let text = t.user_metadata.get(i).map(|&m| self.s.str(m)).unwrap_or("");
                    let name = self.alloc_name(self.at_addr.get(&addr).copied(), addr);
                    writeln!(out, "# annotate {name}: {text}")?;
                }
                Action::SegmentMap | Action::SegmentUnmap | Action::Snapshot | Action::Unknown => {
                    self.write_dict(out, i)?
                }
            }
        }
        let total = self
            .alloc_names
            .keys()
            .filter_map(|&a| self.table.allocations.get(a as usize))
            .fold(0u64, |t, a| t.saturating_add(a.size_bytes));
        writeln!(out, "TOTAL MEM: {}", Bytes::from(total))
    }

    /// An entry upstream has no line for, written like Python's `repr` of its dict (frames left out).
    fn write_dict(&self, out: &mut impl Write, i: usize) -> io::Result<()> {
        let t = &self.s.trace;
        let action = self.s.action_name(i);
        let num = |c: &Vec<u64>| c.get(i).copied().unwrap_or(0);
        write!(
            out,
            "{{'action': {}, 'addr': {}, 'size': {}",
            py_str(action),
            num(&t.addr),
            num(&t.size_bytes)
        )?;
        write!(out, ", 'stream': {}", t.stream.get(i).copied().unwrap_or(0))?;
        if let Some(time) = t.time_of(i) {
            write!(out, ", 'time_us': {time}")?;
        }
        for (key, col) in [
            ("compile_context", &t.compile_context),
            ("user_metadata", &t.user_metadata),
        ] {
            if let Some(&id) = col.get(i) {
                let v = self.s.str(id);
                if !v.is_empty() {
                    write!(out, ", '{key}': {}", py_str(v))?;
                }
            }
        }
        writeln!(out, "}}")
    }
}

/// A string as Python's `repr` writes it (quotes chosen as Python chooses them).
fn py_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut o = String::with_capacity(s.len() + 2);
    o.push(quote);
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if c == quote => {
                o.push('\\');
                o.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                o.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => o.push(c),
        }
    }
    o.push(quote);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace_of(json: &str) -> String {
        let snap = match memlens_core::load(json.as_bytes()) {
            Ok(s) => s,
            Err(e) => panic!("test snapshot does not load: {e}"),
        };
        let mut out = Vec::new();
        if let Err(e) = write_trace(&snap, None, &mut out) {
            panic!("write failed: {e}");
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn names_run_a_to_z_then_a1() {
        let mut n = Names::default();
        let all: Vec<String> = (0..28).map(|_| n.take()).collect();
        assert_eq!(all[0], "a");
        assert_eq!(all[25], "z");
        assert_eq!(all[26], "a1");
        assert_eq!(all[27], "b1");
        n.give_back("c".into());
        n.give_back("q".into());
        assert_eq!(n.take(), "q");
        assert_eq!(n.take(), "c");
        assert_eq!(n.take(), "c1");
    }

    #[test]
    fn replays_like_upstream_with_the_bugs_fixed() {
        let mib = 1u64 << 20;
        let base = 139_637_976_727_552u64;
        let json = format!(
            r#"{{"segments": [], "device_traces": [[
            {{"action": "segment_alloc", "addr": {base}, "size": {s20}, "stream": 0}},
            {{"action": "alloc", "addr": {base}, "size": {s4}, "stream": 0}},
            {{"action": "alloc", "addr": {a2}, "size": {s8}, "stream": 0}},
            {{"action": "free_requested", "addr": {a2}, "size": {s8}, "stream": 0}},
            {{"action": "free_completed", "addr": {a2}, "size": {s8}, "stream": 0}},
            {{"action": "alloc", "addr": {a2}, "size": {s2}, "stream": 0}},
            {{"action": "annotate", "addr": {base}, "size": 0, "stream": 0, "user_metadata": "saved for backward"}},
            {{"action": "oom", "device_free": 123502, "size": {s64}, "stream": 0}},
            {{"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": 17}},
            {{"action": "alloc", "addr": 4096, "size": 512, "stream": 0}},
            {{"action": "free_completed", "addr": 8192, "size": 512, "stream": 0}}
            ]]}}"#,
            s20 = 20 * mib,
            s4 = 4 * mib,
            s8 = 8 * mib,
            s2 = 2 * mib,
            s64 = 64 * mib,
            a2 = base + 4 * mib,
        );
        let want = "\
Device 0 ----------------
11 entries
a = cudaMalloc(139637976727552, 20.0MiB)
b = a[0:4.0MiB]
c = a[4194304:8.0MiB]
del c # 8.0MiB
# free completed for c 8.0MiB
c = a[4194304:2.0MiB]
# annotate b: saved for backward
raise OutOfMemoryError # 64.0MiB requested, 120.6KiB free in CUDA
{'action': 'snapshot', 'addr': 0, 'size': 0, 'stream': 0, 'time_us': 17}
d = MEM[4096:512.0B]
# free completed for 8192 512.0B
TOTAL MEM: 6.0MiB
";
        assert_eq!(trace_of(&json), want);
    }

    /// An alloc over a live address (its free never recorded): the new allocation takes the
    /// address's name slot, the forgotten one gives its name back and is not in `TOTAL MEM`;
    /// a repeated and a lone `free_requested`, an annotation of a freed address, an unmatched free.
    #[test]
    fn realloc_without_free_is_pinned() {
        let json = r#"{"segments": [], "device_traces": [[
            {"action": "alloc", "addr": 4096, "size": 100, "stream": 0},
            {"action": "alloc", "addr": 4096, "size": 200, "stream": 0},
            {"action": "free_requested", "addr": 4096, "size": 200, "stream": 0},
            {"action": "free_requested", "addr": 4096, "size": 200, "stream": 0},
            {"action": "free_completed", "addr": 4096, "size": 200, "stream": 0},
            {"action": "annotate", "addr": 4096, "size": 0, "stream": 0, "user_metadata": "pinned"},
            {"action": "alloc", "addr": 4096, "size": 300, "stream": 0},
            {"action": "free_requested", "addr": 8192, "size": 50, "stream": 0},
            {"action": "alloc", "addr": 8192, "size": 50, "stream": 0},
            {"action": "annotate", "addr": 8192, "size": 0, "stream": 0, "user_metadata": "live"},
            {"action": "free_completed", "addr": 4096, "size": 300, "stream": 0},
            {"action": "free_completed", "addr": 12288, "size": 10, "stream": 0},
            {"action": "alloc", "addr": 4096, "size": 7, "stream": 0}]]}"#;
        let want = "\
Device 0 ----------------
13 entries
a = MEM[4096:100.0B]
b = MEM[4096:200.0B]
del b # 200.0B
del b # 200.0B
# free completed for b 200.0B
# annotate 4096: pinned
b = MEM[4096:300.0B]
del 8192 # 50.0B
a = MEM[8192:50.0B]
# annotate a: live
# free completed for b 300.0B
# free completed for 12288 10.0B
b = MEM[4096:7.0B]
TOTAL MEM: 57.0B
";
        assert_eq!(trace_of(json), want);
    }

    #[test]
    fn snapshot_segments_are_found_by_total_size() {
        // allocated_size covers only the first block; upstream would miss the second one.
        let json = r#"{"segments": [
            {"device": 0, "address": 1000, "total_size": 100, "allocated_size": 10, "stream": 0,
             "blocks": [{"address": 1000, "size": 10, "state": "active_allocated"},
                        {"address": 1010, "size": 90, "state": "inactive"}]},
            {"device": 0, "address": 5000, "total_size": 100, "allocated_size": 0, "stream": 0,
             "blocks": [{"address": 5000, "size": 100, "state": "inactive"}]}],
          "device_traces": [[
            {"action": "alloc", "addr": 1050, "size": 10, "stream": 0},
            {"action": "alloc", "addr": 5000, "size": 10, "stream": 0},
            {"action": "alloc", "addr": 5100, "size": 10, "stream": 0},
            {"action": "segment_free", "addr": 77, "size": 10, "stream": 0}]]}"#;
        let got = trace_of(json);
        assert!(
            got.contains("a = seg_0[50:10.0B]\nb = seg_1[0:10.0B]\nc = MEM[5100:10.0B]\n"),
            "{got}"
        );
        assert!(
            got.contains("cudaFree(77) # 10.0B\nTOTAL MEM: 30.0B\n"),
            "{got}"
        );
    }

    #[test]
    fn freed_segment_names_are_reused_and_its_range_forgotten() {
        let json = r#"{"segments": [], "device_traces": [[], [
            {"action": "segment_alloc", "addr": 1000, "size": 100, "stream": 0},
            {"action": "segment_free", "addr": 1000, "size": 100, "stream": 0},
            {"action": "alloc", "addr": 1010, "size": 10, "stream": 0},
            {"action": "segment_alloc", "addr": 2000, "size": 100, "stream": 0},
            {"action": "alloc", "addr": 2010, "size": 10, "stream": 0}]]}"#;
        let got = trace_of(json);
        let want = "Device 1 ----------------\n5 entries\na = cudaMalloc(1000, 100.0B)\ncudaFree(a) # 100.0B\n\
                    a = MEM[1010:10.0B]\nb = cudaMalloc(2000, 100.0B)\nc = b[10:10.0B]\nTOTAL MEM: 20.0B\n";
        assert_eq!(got, want);
    }

    #[test]
    fn no_trace_is_said_not_crashed_on() {
        let got = trace_of(
            r#"[{"device": 0, "address": 0, "total_size": 0, "stream": 0, "blocks": []}]"#,
        );
        assert!(
            got.starts_with("# no trace: this file is a bare list of segments"),
            "{got}"
        );
        let got = trace_of(r#"{"segments": [], "device_traces": [[], []]}"#);
        assert_eq!(
            got,
            "# no trace entries on any device (memory history was not recorded)\n"
        );
    }

    #[test]
    fn python_repr_of_strings() {
        assert_eq!(py_str("snapshot"), "'snapshot'");
        assert_eq!(py_str("it's"), "\"it's\"");
        assert_eq!(py_str("a'b\"c\n"), "'a\\'b\"c\\n'");
    }
}
