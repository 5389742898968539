//! raw → model: the one place that knows every snapshot layout torch has written.
//!
//! - a dict with `segments`/`device_traces` (torch ≥ 2.0), or a bare list of segments
//!   (`torch.cuda.memory_snapshot()`, `MemPool.snapshot()`);
//! - torch ≤ 2.0 blocks without `address`/`frames`, with `history: [{addr, real_size, frames}]`;
//! - trace entries without `time_us` (torch ≤ 2.0) or `frames`;
//! - `oom` entries carrying `device_free` instead of `addr`;
//! - JSON input, where tuples such as `segment_pool_id` are arrays.
//!
//! A value of the wrong type where a layout has a list or a dict is skipped with a warning; a
//! file where that leaves nothing (no segment and no trace entry, and at least one such
//! warning: `{"segments": "nope", "device_traces": 5}`) is refused as not a snapshot, its first
//! problems named. A snapshot that is empty with every key of the right type is not refused.

use super::*;
use crate::error::DecodeError;
use crate::raw::value::{Arena, Node, RowExtra};
use crate::trace::*;
use rustc_hash::FxHashMap;

fn pair(a: &Arena, v: Option<Val>) -> (i64, i64) {
    let Some(v) = v else { return (0, 0) };
    let mut it = match a.seq(v) {
        Some(it) => it,
        None => return (0, 0),
    };
    let x = it.next().and_then(|x| a.as_i64(x)).unwrap_or(0);
    let y = it.next().and_then(|y| a.as_i64(y)).unwrap_or(0);
    (x, y)
}

fn get_u64(a: &Arena, d: Val, k: &str) -> Option<u64> {
    a.get(d, k).and_then(|v| a.as_u64(v))
}

/// Bounded conversion of a raw value to JSON for display (memo fan-out cannot blow it up).
pub fn to_json(a: &Arena, v: Val) -> serde_json::Value {
    let mut budget = 100_000usize;
    to_json_inner(a, v, 0, &mut budget)
}

fn to_json_inner(a: &Arena, v: Val, depth: usize, budget: &mut usize) -> serde_json::Value {
    use serde_json::Value as J;
    if *budget == 0 || depth > 32 {
        return J::String("…".into());
    }
    *budget -= 1;
    match v {
        Val::None => J::Null,
        Val::Bool(b) => J::Bool(b),
        Val::Int(i) => J::from(i),
        Val::Float(f) => serde_json::Number::from_f64(f)
            .map(J::Number)
            .unwrap_or(J::Null),
        Val::Str(s) => J::String(a.strings.get(s).to_string()),
        Val::Row(_) => J::String("<trace entry>".into()),
        Val::Node(_) => match a.node(v) {
            Some(Node::Dict(items)) => {
                let mut m = serde_json::Map::new();
                for &(k, x) in items {
                    let key = match k {
                        Val::Str(s) => a.strings.get(s).to_string(),
                        other => to_json_inner(a, other, depth + 1, budget).to_string(),
                    };
                    m.insert(key, to_json_inner(a, x, depth + 1, budget));
                }
                J::Object(m)
            }
            Some(Node::List(_))
            | Some(Node::Tuple(_))
            | Some(Node::NodeList(_))
            | Some(Node::RowRange { .. }) => {
                let items: Vec<Val> = a.seq(v).map(|it| it.collect()).unwrap_or_default();
                J::Array(
                    items
                        .into_iter()
                        .map(|x| to_json_inner(a, x, depth + 1, budget))
                        .collect(),
                )
            }
            Some(Node::BigInt(b)) => match crate::raw::value::bigint_to_u64(b) {
                Some(u) => J::from(u),
                None => J::String("<big integer>".into()),
            },
            Some(Node::Bytes(b)) => J::String(format!("<{} bytes>", b.len())),
            Some(Node::Row(_)) => J::String("<trace entry>".into()),
            Some(Node::Stack(_)) => J::String("<frames>".into()),
            Some(Node::Frame(_)) => J::String("<frame>".into()),
            Some(Node::Ext { .. }) | None => J::Null,
        },
    }
}

/// One device's list of trace rows.
enum RowList {
    Range(u32, u32),
    Rows(Vec<u32>),
}

impl RowList {
    fn len(&self) -> usize {
        match self {
            RowList::Range(s, e) => (e - s) as usize,
            RowList::Rows(v) => v.len(),
        }
    }
}

fn row_list(a: &Arena, v: Val, what: &str, warnings: &mut Vec<String>) -> RowList {
    match a.node(v) {
        Some(Node::RowRange { start, end }) => RowList::Range(*start, *end),
        Some(Node::List(_)) | Some(Node::NodeList(_)) => {
            let items = a.seq(v).into_iter().flatten();
            let mut out = Vec::with_capacity(a.seq_len(v).unwrap_or(0));
            let mut skipped = 0usize;
            for it in items {
                match a.row_of(it) {
                    Some(r) => out.push(r.0),
                    None => skipped += 1,
                }
            }
            if skipped > 0 {
                warnings.push(format!("{what}: {skipped} entries are not trace entries (no `action`) and were skipped"));
            }
            RowList::Rows(out)
        }
        _ => {
            if v != Val::None {
                warnings.push(format!("{what} is {}, not a list; ignored", kind_of(a, v)));
            }
            RowList::Rows(Vec::new())
        }
    }
}

/// Turns decoded values into a [`Snapshot`].
pub fn normalize(mut a: Arena, top: Val, encoding: Encoding) -> Result<Snapshot, DecodeError> {
    let mut warnings = Vec::new();
    let (segments_val, traces_val, segments_only) = top_level(&a, top)?;
    let (segments, blocks) = match segments_val {
        Some(sv) => read_segments(&mut a, sv, &mut warnings),
        None => (Vec::new(), Vec::new()),
    };
    let lists = trace_lists(&a, traces_val, &mut warnings);
    let host_list = if segments_only {
        None
    } else {
        a.get(top, "host_traces")
            .map(|v| row_list(&a, v, "host_traces", &mut warnings))
    };
    let used: usize = lists.iter().map(|(_, l)| l.len()).sum();
    let host_len = host_list.as_ref().map(|l| l.len()).unwrap_or(0);
    if segments.is_empty() && used + host_len == 0 && !warnings.is_empty() {
        return Err(DecodeError::NotASnapshot(nothing_usable(&warnings)));
    }
    let (trace, device_traces, host_trace) =
        arrange_trace(&mut a, &lists, host_list.as_ref(), &mut warnings);

    // ---- the rest of the top-level dict
    let (allocator_settings, host_segments, external_annotations) = if segments_only {
        (None, None, Vec::new())
    } else {
        let settings = a.get(top, "allocator_settings").map(|v| to_json(&a, v));
        let host = a.get(top, "host_segments").map(|v| to_json(&a, v));
        (settings, host, read_annotations(&a, top))
    };

    let interner = std::mem::take(&mut a.stack_interner);
    let (frames, stacks) = (interner.frames, interner.stacks);
    let mut snap = Snapshot {
        strings: std::mem::take(&mut a.strings),
        frames,
        stacks,
        segments,
        blocks,
        trace,
        device_traces,
        allocator_settings,
        external_annotations,
        host_segments,
        host_trace,
        encoding: Some(encoding),
        segments_only,
        warnings,
    };
    drop(a);
    let w = trace_warnings(&snap);
    snap.warnings.extend(w);
    Ok(snap)
}

/// Which layout the top-level value has: (segments, device traces, whether it is a bare list
/// of segments), or why it is not a snapshot.
fn top_level(a: &Arena, top: Val) -> Result<(Option<Val>, Option<Val>, bool), DecodeError> {
    if a.is_dict(top) {
        let s = a.get(top, "segments");
        let t = a.get(top, "device_traces");
        if s.is_none() && t.is_none() {
            let keys: Vec<String> = a
                .dict_items(top)
                .map(|items| {
                    items
                        .iter()
                        .take(6)
                        .filter_map(|(k, _)| a.as_str(*k).map(|s| format!("'{s}'")))
                        .collect()
                })
                .unwrap_or_default();
            return Err(DecodeError::NotASnapshot(if a.row_of(top).is_some() {
                "top-level value is a single trace entry".into()
            } else {
                format!(
                    "top-level dict has neither 'segments' nor 'device_traces' (keys: {})",
                    keys.join(", ")
                )
            }));
        }
        Ok((s, t, false))
    } else if let Some(n) = a.seq_len(top) {
        // A bare list is `memory_snapshot()` output: it must hold segment dicts (or be empty).
        let ok = n == 0
            || a.seq(top)
                .map(|mut i| i.all(|x| a.is_dict(x) && a.get(x, "total_size").is_some()))
                .unwrap_or(false);
        if !ok {
            return Err(DecodeError::NotASnapshot(
                "top-level list does not hold segment dicts".into(),
            ));
        }
        Ok((Some(top), None, true))
    } else {
        Err(DecodeError::NotASnapshot(format!(
            "top-level value is {}",
            kind_of(a, top)
        )))
    }
}

/// The segments and their blocks (blocks of segment `i` are `segments[i].blocks`).
fn read_segments(a: &mut Arena, sv: Val, warnings: &mut Vec<String>) -> (Vec<Segment>, Vec<Block>) {
    let mut segments = Vec::new();
    let mut blocks = Vec::new();
    let segs: Vec<Val> = match a.seq(sv) {
        Some(i) => i.collect(),
        None => {
            warnings.push(format!(
                "'segments' is {}, not a list; ignored",
                kind_of(a, sv)
            ));
            Vec::new()
        }
    };
    let segment_type_key = a.strings.intern("segment_type");
    let _ = segment_type_key;
    for (si, s) in segs.into_iter().enumerate() {
        if !a.is_dict(s) {
            warnings.push(format!(
                "segment {si} is {}, not a dict; skipped",
                kind_of(a, s)
            ));
            continue;
        }
        segments.push(read_segment(a, si, s, &mut blocks, warnings));
    }
    (segments, blocks)
}

/// Segment `si` (a dict), its blocks appended to `blocks`.
fn read_segment(
    a: &mut Arena,
    si: usize,
    s: Val,
    blocks: &mut Vec<Block>,
    warnings: &mut Vec<String>,
) -> Segment {
    let address = get_u64(a, s, "address").unwrap_or(0);
    let total = get_u64(a, s, "total_size").unwrap_or(0);
    let device_raw = a.get(s, "device").and_then(|v| a.as_i64(v)).unwrap_or(0);
    let device = u32::try_from(device_raw).unwrap_or_else(|_| {
        warnings.push(format!(
            "segment {si} has device {device_raw}; counted as device 0"
        ));
        0
    });
    let stream = a
        .get(s, "stream")
        .and_then(|v| a.as_i64(v).map(|i| i as u64).or_else(|| a.as_u64(v)))
        .unwrap_or(0);
    let segment_type = a
        .get(s, "segment_type")
        .and_then(|v| if let Val::Str(x) = v { Some(x) } else { None })
        .unwrap_or(StrId::EMPTY);
    let pool_id = pair(a, a.get(s, "segment_pool_id"));
    let is_expandable = matches!(
        a.get(s, "is_expandable"),
        Some(Val::Bool(true)) | Some(Val::Int(1))
    );
    let seg_frames = a.get(s, "frames");
    let stack = seg_frames
        .map(|f| a.intern_stack(f))
        .unwrap_or(StackId::EMPTY);
    let b0 = blocks.len() as u32;
    let sum = match a.get(s, "blocks") {
        Some(bl) => read_blocks(a, bl, address, blocks),
        None => 0,
    };
    if sum != total {
        warnings.push(format!(
            "segment {si} at 0x{address:x}: blocks add up to {sum} bytes, not its total_size {total}"
        ));
    }
    Segment {
        device,
        address,
        total_size_bytes: total,
        allocated_size_bytes: get_u64(a, s, "allocated_size").unwrap_or(0),
        active_size_bytes: get_u64(a, s, "active_size").unwrap_or(0),
        requested_size_bytes: get_u64(a, s, "requested_size").unwrap_or(0),
        stream,
        segment_type,
        pool_id,
        is_expandable,
        stack,
        blocks: b0..blocks.len() as u32,
    }
}

/// A segment's blocks, from `address` on (legacy blocks without an address follow each other).
/// Returns the bytes they add up to.
fn read_blocks(a: &mut Arena, bl: Val, address: u64, blocks: &mut Vec<Block>) -> u64 {
    let mut cursor = address;
    let mut sum = 0u64;
    let items: Vec<Val> = a.seq(bl).map(|i| i.collect()).unwrap_or_default();
    for b in items {
        if !a.is_dict(b) {
            continue;
        }
        let size = get_u64(a, b, "size").unwrap_or(0);
        let history_first = a
            .get(b, "history")
            .and_then(|h| a.seq(h))
            .and_then(|mut i| i.next());
        let addr_opt = get_u64(a, b, "address");
        let legacy = addr_opt.is_none() || history_first.is_some();
        let baddr = addr_opt.unwrap_or(cursor);
        let requested = match get_u64(a, b, "requested_size") {
            Some(r) => r,
            None => history_first
                .and_then(|h| get_u64(a, h, "real_size"))
                .unwrap_or(size),
        };
        let state = match a.get(b, "state").and_then(|v| a.as_str(v)) {
            Some("active_allocated") => BlockState::ActiveAllocated,
            Some("active_pending_free") | Some("active_awaiting_free") => {
                BlockState::ActivePendingFree
            }
            Some("inactive") => BlockState::Inactive,
            _ => BlockState::Unknown,
        };
        let frames = a
            .get(b, "frames")
            .or_else(|| history_first.and_then(|h| a.get(h, "frames")));
        let stack = frames.map(|f| a.intern_stack(f)).unwrap_or(StackId::EMPTY);
        blocks.push(Block {
            address: baddr,
            size_bytes: size,
            requested_size_bytes: requested,
            state,
            stack,
            legacy,
        });
        cursor = baddr.wrapping_add(size);
        sum = sum.wrapping_add(size);
    }
    sum
}

/// Which rows belong to which device (`device_traces[d]`).
fn trace_lists(
    a: &Arena,
    traces_val: Option<Val>,
    warnings: &mut Vec<String>,
) -> Vec<(u32, RowList)> {
    let mut lists: Vec<(u32, RowList)> = Vec::new();
    if let Some(tv) = traces_val {
        match a.seq(tv) {
            Some(items) => {
                let items: Vec<Val> = items.collect();
                for (d, l) in items.into_iter().enumerate() {
                    let rl = row_list(a, l, &format!("device_traces[{d}]"), warnings);
                    lists.push((d as u32, rl));
                }
            }
            None => warnings.push(format!(
                "'device_traces' is {}, not a list; ignored",
                kind_of(a, tv)
            )),
        }
    }
    lists
}

/// The trace as columns in device order (each device's rows together), the devices' row
/// ranges, and the host trace.
fn arrange_trace(
    a: &mut Arena,
    lists: &[(u32, RowList)],
    host_list: Option<&RowList>,
    warnings: &mut Vec<String>,
) -> (TraceColumns, Vec<DeviceTrace>, TraceColumns) {
    let used: usize = lists.iter().map(|(_, l)| l.len()).sum();
    let host_len = host_list.map(|l| l.len()).unwrap_or(0);
    let mut rows = std::mem::take(&mut a.rows);
    rows.shrink_to_fit();
    if a.odd_values > 0 {
        warnings.push(format!(
            "{} trace entry fields had values of the wrong type or sign (read as 0)",
            a.odd_values
        ));
    }
    let total_rows = rows.len();
    // Row ids in output order; identity (the common case) lets the columns move without a copy.
    let mut identity = true;
    let mut next = 0u32;
    let mut device_traces = Vec::new();
    for (d, l) in lists {
        let start = next;
        match l {
            RowList::Range(s, e) => {
                if *s != next {
                    identity = false;
                }
                next += e - s;
            }
            RowList::Rows(v) => {
                for &r in v {
                    if r != next {
                        identity = false;
                    }
                    next += 1;
                }
            }
        }
        device_traces.push(DeviceTrace {
            device: *d,
            rows: start..next,
        });
    }
    if identity && used == total_rows && host_len == 0 {
        return (
            columns_from_rows(a, rows),
            device_traces,
            TraceColumns::default(),
        );
    }
    let order: Vec<u32> = lists.iter().flat_map(|(_, l)| list_iter(l)).collect();
    let trace = gather(a, &rows, &order);
    let host_trace = match host_list {
        Some(h) => gather(a, &rows, &list_iter(h).collect::<Vec<u32>>()),
        None => TraceColumns::default(),
    };
    (trace, device_traces, host_trace)
}

/// `external_annotations`: the entries that are dicts.
fn read_annotations(a: &Arena, top: Val) -> Vec<ExternalAnnotation> {
    let mut ann = Vec::new();
    let Some(v) = a.get(top, "external_annotations") else {
        return ann;
    };
    let str_of = |x: Val, k: &str| {
        a.get(x, k)
            .and_then(|v| if let Val::Str(s) = v { Some(s) } else { None })
            .unwrap_or(StrId::EMPTY)
    };
    let items: Vec<Val> = a.seq(v).map(|i| i.collect()).unwrap_or_default();
    for x in items {
        if !a.is_dict(x) {
            continue;
        }
        let device = a
            .get(x, "device")
            .and_then(|v| a.as_i64(v))
            .and_then(|d| u32::try_from(d).ok())
            .unwrap_or(0);
        let time_us = a
            .get(x, "time_us")
            .and_then(|v| a.as_i64(v))
            .unwrap_or(TIME_NONE);
        ann.push(ExternalAnnotation {
            device,
            time_us,
            name: str_of(x, "name"),
            stage: str_of(x, "stage"),
        });
    }
    ann
}

/// What a value is, for messages: "a string", "an int", "a dict", ...
fn kind_of(a: &Arena, v: Val) -> &'static str {
    match v {
        Val::None => "None",
        Val::Bool(_) => "a bool",
        Val::Int(_) => "an int",
        Val::Float(_) => "a float",
        Val::Str(_) => "a string",
        Val::Row(_) => "a trace entry",
        Val::Node(_) => match a.node(v) {
            Some(Node::Dict(_)) => "a dict",
            Some(Node::List(_)) | Some(Node::NodeList(_)) | Some(Node::RowRange { .. }) => "a list",
            Some(Node::Tuple(_)) => "a tuple",
            Some(Node::BigInt(_)) => "an int",
            Some(Node::Bytes(_)) => "bytes",
            Some(Node::Row(_)) => "a trace entry",
            Some(Node::Stack(_)) | Some(Node::Frame(_)) => "a frame list",
            Some(Node::Ext { .. }) | None => "not a dict or list",
        },
    }
}

/// The refusal of a file whose known keys held nothing of the right type (no segment, no
/// trace entry, and at least one key of the wrong shape): its first problems, in one line.
fn nothing_usable(problems: &[String]) -> String {
    let mut shown: Vec<&str> = problems.iter().take(3).map(String::as_str).collect();
    let more = problems.len().saturating_sub(shown.len());
    let tail = format!("and {more} more");
    if more > 0 {
        shown.push(&tail);
    }
    format!(
        "no usable segment or trace entry ({})",
        shown
            .iter()
            .map(|p| p
                .trim_end_matches("; ignored")
                .trim_end_matches("; skipped"))
            .collect::<Vec<_>>()
            .join("; ")
    )
}

fn list_iter(l: &RowList) -> Box<dyn Iterator<Item = u32> + '_> {
    match l {
        RowList::Range(s, e) => Box::new(*s..*e),
        RowList::Rows(v) => Box::new(v.iter().copied()),
    }
}

pub(super) fn convert_extra(a: &Arena, e: &RowExtra) -> Option<EntryExtra> {
    Some(match e {
        RowExtra::DeviceFree(f) => EntryExtra::DeviceFree(*f),
        RowExtra::InternalMetadata(s) => EntryExtra::InternalMetadata(*s),
        RowExtra::Category(s) => EntryExtra::Category(*s),
        RowExtra::ActionName(s) => EntryExtra::ActionName(*s),
        RowExtra::PoolId(v) => {
            let (x, y) = pair(a, Some(*v));
            EntryExtra::PoolId(x, y)
        }
        RowExtra::ForwardFrames(v) => {
            let items: Vec<StrId> = a
                .seq(*v)?
                .filter_map(|x| if let Val::Str(s) = x { Some(s) } else { None })
                .collect();
            EntryExtra::ForwardFrames(items)
        }
    })
}

/// Adopts the decoder's columns as they are (rows already in device order), rare fields read.
fn columns_from_rows(a: &Arena, rows: TraceColumns<RowExtra>) -> TraceColumns {
    rows.map_extras(|e| convert_extra(a, &e))
}

/// Copies the rows in `order` into new columns.
fn gather(a: &Arena, rows: &TraceColumns<RowExtra>, order: &[u32]) -> TraceColumns {
    let mut c = TraceColumns::default();
    let (mut streams, mut contexts, mut metadata) = (
        rows.stream.cursor(),
        rows.compile_context.cursor(),
        rows.user_metadata.cursor(),
    );
    let mut pos_of: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
    for (i, &r) in order.iter().enumerate() {
        let r = r as usize;
        if r >= rows.len() {
            continue;
        }
        c.action.push(rows.action[r]);
        c.addr.push(rows.addr[r]);
        c.size_bytes.push(rows.size_bytes[r]);
        c.stream.push(streams.at(r).unwrap_or(0));
        c.time_us.push(rows.time_us[r]);
        c.stack.push(rows.stack[r]);
        c.compile_context
            .push(contexts.at(r).unwrap_or(StrId::EMPTY));
        c.user_metadata.push(metadata.at(r).unwrap_or(StrId::EMPTY));
        pos_of.entry(r as u32).or_default().push(i as u32);
    }
    for (r, e) in &rows.extras {
        if let (Some(ps), Some(x)) = (pos_of.get(r), convert_extra(a, e)) {
            for &p in ps {
                c.extras.push((p, x.clone()));
            }
        }
    }
    c.extras.sort_by_key(|(r, _)| *r);
    c
}

/// Warnings about the trace: frees of allocations the trace never saw (history enabled late,
/// or the ring buffer overflowed and dropped the oldest entries).
pub(crate) fn trace_warnings(s: &Snapshot) -> Vec<String> {
    let mut new = Vec::new();
    for dt in &s.device_traces {
        let mut live: rustc_hash::FxHashSet<u64> = Default::default();
        let mut unmatched = 0u64;
        for r in dt.rows.clone() {
            let r = r as usize;
            let addr = s.trace.addr[r];
            match s.trace.action[r] {
                Action::Alloc => {
                    live.insert(addr);
                }
                // free_requested of an address never allocated here: counted once, so its
                // free_completed is not counted again.
                Action::FreeRequested if live.insert(addr) => unmatched += 1,
                Action::FreeCompleted if !live.remove(&addr) => unmatched += 1,
                _ => {}
            }
        }
        if unmatched > 0 {
            new.push(format!(
                "device {}: {unmatched} frees of allocations made before the trace starts (history enabled late, or the ring buffer overflowed and dropped the oldest entries)",
                dt.device
            ));
        }
    }
    new
}
