//! `memlens stats`: per-device summary, as text or as one JSON object. The text ends each device
//! with upstream's `segsum` view (`python -m torch.cuda._memory_viz stats`): one bar of 20 MiB
//! pages per large segment, then totals, with upstream's legend once at the end.

use crate::fmt::Bytes;
use crate::load::{load, CliError};
use memlens_core::model::BlockState;
use memlens_core::{snapshot_stats, DeviceStats, Snapshot};
use std::fmt::Write as _;
use std::io::{self, Write};

#[derive(clap::Args)]
pub struct Args {
    /// Snapshot file (pickle of any protocol, JSON, or _memory_viz HTML); `-` reads stdin.
    /// Several files are read in parallel: one JSON object per line with `--json` (its `file`
    /// added), one summary line per file and device otherwise.
    #[arg(required = true)]
    files: Vec<String>,
    /// Print one JSON object {"devices": [...], "warnings": [...]}.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<(), CliError> {
    if a.files.len() > 1 {
        return run_many(&a.files, a.json);
    }
    let file = a.files[0].clone();
    let snap = load(&file)?;
    let st = snapshot_stats(&snap);
    if a.json {
        let s = serde_json::to_string_pretty(&st).map_err(|e| CliError(e.to_string()))?;
        println!("{s}");
        return Ok(());
    }
    let mut t = String::new();
    let enc = snap.encoding.map(|e| e.to_string()).unwrap_or_default();
    let _ = writeln!(
        t,
        "{}: {enc}{}",
        file,
        if snap.segments_only {
            ", segments only (no trace)"
        } else {
            ""
        }
    );
    if st.devices.is_empty() {
        t.push_str("no devices: the snapshot holds no segments and no trace\n");
    }
    for d in &st.devices {
        t.push('\n');
        device_text(&mut t, &snap, d);
        t.push('\n');
        segsum(&mut t, &snap, d.device);
    }
    if !st.devices.is_empty() {
        t.push_str(LEGEND);
    }
    if !st.warnings.is_empty() {
        t.push('\n');
    }
    for w in &st.warnings {
        let _ = writeln!(t, "warning: {w}");
    }
    let mut out = io::stdout().lock();
    match out.write_all(t.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(CliError(format!("cannot write output: {e}")))
        }
        _ => Ok(()),
    }
}

/// Several files, read in parallel (`crate::load::map_files`), reported in the order given; a
/// file that does not load is reported last on stderr and makes the exit status 2.
fn run_many(files: &[String], json: bool) -> Result<(), CliError> {
    let results = crate::load::map_files(files, |_, _, snap| snapshot_stats(&snap));
    crate::load::report_files(files, results, |t, file, st| {
        if json {
            let mut v = serde_json::to_value(&st).map_err(|e| CliError(e.to_string()))?;
            v["file"] = serde_json::Value::from(file);
            t.push_str(&v.to_string());
            t.push('\n');
            return Ok(());
        }
        for d in &st.devices {
            let _ = writeln!(
                t,
                "{file}: device {}: timeline peak {}, peak reserved {}, reserved {}, inactive split {}, {} trace entries",
                d.device,
                Bytes::from(d.timeline_peak_bytes),
                Bytes::from(d.peak_reserved_bytes),
                Bytes::from(d.reserved_bytes),
                Bytes::from(d.inactive_split_bytes),
                d.trace_entries
            );
        }
        Ok(())
    })
}

/// `1.5GiB (1610612736 bytes)`.
fn sized(n: u64) -> String {
    format!("{} ({n} bytes)", Bytes::from(n))
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "-".to_string();
    }
    format!("{:.1}%", part as f64 / whole as f64 * 100.0)
}

/// The readable summary of one device.
fn device_text(t: &mut String, snap: &Snapshot, d: &DeviceStats) {
    let _ = writeln!(t, "device {}", d.device);
    let _ = writeln!(
        t,
        "  segments            {} ({} blocks)",
        d.segments, d.blocks
    );
    let _ = writeln!(t, "  reserved            {}", sized(d.reserved_bytes));
    let _ = writeln!(
        t,
        "  allocated           {}  (active_allocated blocks)",
        sized(d.allocated_bytes)
    );
    let _ = writeln!(
        t,
        "  active              {}  (+ active_pending_free blocks)",
        sized(d.active_bytes)
    );
    let waste = d.active_bytes.saturating_sub(d.requested_bytes);
    let _ = writeln!(
        t,
        "  requested           {}  (unrounded sizes of active blocks; {} lost to rounding)",
        sized(d.requested_bytes),
        Bytes::from(waste)
    );
    let free = d.reserved_bytes.saturating_sub(d.active_bytes);
    let _ = writeln!(
        t,
        "  free (inactive)     {}  ({} of reserved)",
        sized(free),
        pct(free, d.reserved_bytes)
    );
    let _ = writeln!(
        t,
        "  inactive split      {}  (free blocks inside partly used segments)",
        sized(d.inactive_split_bytes)
    );
    let _ = writeln!(
        t,
        "  largest free block  {}",
        sized(d.largest_free_block_bytes)
    );
    let frag = free.saturating_sub(d.largest_free_block_bytes.min(free));
    let _ = writeln!(
        t,
        "  fragmentation       {}  (1 - largest free block / free)",
        pct(frag, free)
    );
    trace_text(t, snap, d);
}

/// The trace's lines of [`device_text`]: baseline, peak, peak reserved, entries by action.
fn trace_text(t: &mut String, snap: &Snapshot, d: &DeviceStats) {
    if d.trace_entries == 0 {
        t.push_str(
            "  trace               no entries (memory history not recorded for this device)\n",
        );
        return;
    }
    let _ = writeln!(
        t,
        "  timeline baseline   {}  (live before the first event)",
        signed(d.timeline_baseline_bytes)
    );
    let _ = writeln!(
        t,
        "  timeline peak       {}  {}",
        signed(d.timeline_peak_bytes),
        peak_at(snap, d)
    );
    let _ = writeln!(t, "  peak reserved       {}", signed(d.peak_reserved_bytes));
    let actions: Vec<String> = d.actions.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let _ = writeln!(
        t,
        "  trace entries       {}: {}",
        d.trace_entries,
        actions.join(", ")
    );
}

/// Where the timeline peaks: "after event N of M (alloc 2.0MiB)", or before the first event.
fn peak_at(snap: &Snapshot, d: &DeviceStats) -> String {
    let Some(peak) = d.timeline_peak_event else {
        return "before the first event".to_string();
    };
    let row = u64::from(snap.device_rows(d.device).start) + u64::from(peak);
    let what = usize::try_from(row)
        .ok()
        .and_then(|r| {
            Some((
                snap.trace.action.get(r)?.name(),
                *snap.trace.size_bytes.get(r)?,
            ))
        })
        .map(|(a, s)| format!(" ({a} {})", Bytes::from(s)))
        .unwrap_or_default();
    format!("after event {peak} of {}{what}", d.trace_entries)
}

fn signed(n: i64) -> String {
    match u64::try_from(n) {
        Ok(u) => sized(u),
        Err(_) => format!("{} ({n} bytes)", Bytes::from(n)),
    }
}

/// Upstream's page size for the segment bars.
const PAGE_SIZE: u64 = 20 * 1024 * 1024;

const LEGEND: &str = "
Legend:
    [a     ] - a segment in the allocator
     ^-- a page 20.0MiB of memory in the segment
    a-z: pages filled with a single block's content
    ' ': page is completely free
    *: page if completely full with multiple blocks
    0-9: page is partially full with tensors of multiple blocks (9 == 90% full)
    (X% internal) - of the free memory, X% is free because we rounded the size of the allocation.
";

/// Upstream `_report_free`.
fn report_free(external: u64, internal: u64) -> String {
    let total = external.saturating_add(internal);
    if total == 0 {
        return Bytes::from(total).to_string();
    }
    format!(
        "{} ({:.1}% internal)",
        Bytes::from(total),
        internal as f64 / total as f64 * 100.0
    )
}

/// Upstream `segsum` for one device's segments, without the legend. Differences, each a fix:
/// a requested size above its block's size is capped to it (upstream indexes past the bar), and
/// bytes of a segment its blocks do not cover count as free (upstream asserts; the model warns).
fn segsum(t: &mut String, snap: &Snapshot, device: u32) {
    let _ = writeln!(
        t,
        "Summary of segments >= {} in size",
        Bytes::from(PAGE_SIZE)
    );
    let mut segs: Vec<_> = snap
        .segments
        .iter()
        .filter(|g| g.device == device)
        .collect();
    let active_of = |g: &memlens_core::model::Segment| -> u64 {
        snap.segment_blocks(g)
            .iter()
            .filter(|b| b.state == BlockState::ActiveAllocated)
            .map(|b| b.size_bytes)
            .sum()
    };
    segs.sort_by_key(|g| (g.total_size_bytes, active_of(g)));
    let (mut total_reserved, mut total_allocated, mut free_external, mut free_internal) =
        (0u64, 0u64, 0u64, 0u64);
    for seg in &segs {
        total_reserved += seg.total_size_bytes;
        let u = segment_use(snap, seg);
        total_allocated += u.allocated;
        free_external += u.external;
        free_internal += u.internal;
        if seg.total_size_bytes < PAGE_SIZE {
            continue;
        }
        let body = page_bar(&u.ranges, seg.total_size_bytes);
        let stream = if seg.stream == 0 {
            String::new()
        } else {
            format!(" stream_{}", seg.stream)
        };
        let _ = writeln!(
            t,
            "[{body}] {} allocated, {} free{stream}",
            Bytes::from(seg.total_size_bytes),
            report_free(u.external, u.internal)
        );
    }
    let _ = writeln!(t, "segments: {}", segs.len());
    let _ = writeln!(t, "total_reserved: {}", Bytes::from(total_reserved));
    let _ = writeln!(t, "total_allocated: {}", Bytes::from(total_allocated));
    let _ = writeln!(
        t,
        "total_free: {}",
        report_free(free_external, free_internal)
    );
}

/// How one segment is used, as upstream's `segsum` counts it.
struct SegmentUse {
    /// (offset, allocated bytes) of each active_allocated block.
    ranges: Vec<(u64, u64)>,
    allocated: u64,
    /// Free bytes outside blocks in use, and lost to rounding inside them.
    external: u64,
    internal: u64,
}

fn segment_use(snap: &Snapshot, seg: &memlens_core::model::Segment) -> SegmentUse {
    let mut u = SegmentUse {
        ranges: Vec::new(),
        allocated: 0,
        external: 0,
        internal: 0,
    };
    let mut offset = 0u64;
    for b in snap.segment_blocks(seg) {
        if b.state == BlockState::ActiveAllocated {
            let allocated = b.requested_size_bytes.min(b.size_bytes);
            u.ranges.push((offset, allocated));
            u.allocated += allocated;
            u.internal += b.size_bytes - allocated;
        } else {
            u.external += b.size_bytes;
        }
        offset = offset.saturating_add(b.size_bytes);
    }
    u.external += seg.total_size_bytes.saturating_sub(offset);
    u
}

/// Upstream's bar of a segment's pages: a block's letter on a page it fills alone, a digit
/// (tenths full) or `*` on a page shared by several, a space on a free page.
fn page_bar(ranges: &[(u64, u64)], total: u64) -> String {
    let pages = usize::try_from((total - 1) / PAGE_SIZE + 1).unwrap_or(0);
    let mut occupied = vec![' '; pages];
    let mut frac = vec![0.0f64; pages];
    for (i, &(start, size)) in ranges.iter().enumerate() {
        let finish = start.saturating_add(size);
        let first = start / PAGE_SIZE;
        let last = if finish == 0 {
            0
        } else {
            (finish - 1) / PAGE_SIZE + 1
        };
        let mark = char::from(b'a' + (i % 26) as u8);
        for j in first..last {
            let s = start.max(j * PAGE_SIZE);
            let e = finish.min((j + 1) * PAGE_SIZE);
            let Some(j) = usize::try_from(j).ok() else {
                continue;
            };
            let (Some(o), Some(f)) = (occupied.get_mut(j), frac.get_mut(j)) else {
                continue;
            };
            *f += e.saturating_sub(s) as f64 / PAGE_SIZE as f64;
            if *o != ' ' {
                let tenth = ((*f * 10.0) as usize).min(10);
                *o = "0123456789*"
                    .as_bytes()
                    .get(tenth)
                    .map_or('*', |&c| char::from(c));
            } else {
                *o = mark;
            }
        }
    }
    occupied.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(text: &str) -> Snapshot {
        match memlens_core::load(text.as_bytes()) {
            Ok(s) => s,
            Err(e) => panic!("test snapshot does not load: {e}"),
        }
    }

    /// Upstream's docstring example: a 20 MiB segment holding a 4 MiB and a 2 MiB block, plus a
    /// 2 MiB small-pool segment (no bar).
    #[test]
    fn segsum_matches_upstream_layout() {
        let mib = 1024 * 1024u64;
        let s = snap(&format!(
            r#"{{"segments":[
              {{"device":0,"address":0,"total_size":{t},"stream":0,"blocks":[
                {{"address":0,"size":{a},"requested_size":{a},"state":"active_allocated"}},
                {{"address":{a},"size":{b},"requested_size":{b},"state":"active_allocated"}},
                {{"address":{c},"size":{r},"requested_size":0,"state":"inactive"}}]}},
              {{"device":0,"address":{t},"total_size":{b},"stream":0,"blocks":[
                {{"address":{t},"size":{b},"requested_size":0,"state":"inactive"}}]}}]}}"#,
            t = 20 * mib,
            a = 4 * mib,
            b = 2 * mib,
            c = 6 * mib,
            r = 14 * mib
        ));
        let mut t = String::new();
        segsum(&mut t, &s, 0);
        assert_eq!(
            t,
            "Summary of segments >= 20.0MiB in size\n\
             [3] 20.0MiB allocated, 14.0MiB (0.0% internal) free\n\
             segments: 2\n\
             total_reserved: 22.0MiB\n\
             total_allocated: 6.0MiB\n\
             total_free: 16.0MiB (0.0% internal)\n"
        );
    }

    #[test]
    fn segsum_pages_and_streams() {
        let mib = 1024 * 1024u64;
        // 60 MiB segment on a side stream: a 30 MiB block (requested 25 MiB) fills page 0 and
        // half of page 1, then free.
        let s = snap(&format!(
            r#"{{"segments":[{{"device":0,"address":0,"total_size":{t},"stream":7,"blocks":[
                {{"address":0,"size":{a},"requested_size":{q},"state":"active_allocated"}},
                {{"address":{a},"size":{f},"requested_size":0,"state":"inactive"}}]}}]}}"#,
            t = 60 * mib,
            a = 30 * mib,
            q = 25 * mib,
            f = 30 * mib
        ));
        let mut t = String::new();
        segsum(&mut t, &s, 0);
        let bar = t.lines().nth(1).unwrap_or_default();
        assert_eq!(
            bar,
            "[aa ] 60.0MiB allocated, 35.0MiB (14.3% internal) free stream_7"
        );
    }
}
