//! The tables of `memlens export`: each a list of fields and a function writing one snapshot's
//! rows into a [`Part`], in batches of [`BATCH_ROWS`]. Values are the model's, with its units
//! (`_bytes`, `_us`) and ids (`stack_id`, `frame_id`: indices into the stacks and frames tables of
//! the same file); an event is a 0-based index into one device's trace, as everywhere in core.

use super::part::{Part, Table, BATCH_ROWS};
use crate::load::CliError;
use arrow_array::{ArrayRef, BooleanArray, Int64Array, StringArray, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field};
use memlens_core::analysis::frames::StackFacts;
use memlens_core::layout::PoolResolver;
use memlens_core::replay::{replay_device, Origin};
use memlens_core::Snapshot;
use std::ops::Range;
use std::sync::Arc;

/// Every table, in the order written.
pub const TABLES: [Table; 7] = [
    Table {
        name: "trace",
        fields: trace_fields,
    },
    Table {
        name: "allocations",
        fields: allocation_fields,
    },
    Table {
        name: "segments",
        fields: segment_fields,
    },
    Table {
        name: "blocks",
        fields: block_fields,
    },
    Table {
        name: "frames",
        fields: frame_fields,
    },
    Table {
        name: "stacks",
        fields: stack_fields,
    },
    Table {
        name: "stats",
        fields: stats_fields,
    },
];

/// Writes the rows of table `TABLES[i]`.
pub fn write(i: usize, s: &Snapshot, p: &mut Part) -> Result<(), CliError> {
    match i {
        0 => trace(s, p),
        1 => allocations(s, p),
        2 => segments(s, p),
        3 => blocks(s, p),
        4 => frames(s, p),
        5 => stacks(s, p),
        _ => stats(s, p),
    }
}

fn field(name: &str, t: DataType, nullable: bool) -> Field {
    Field::new(name, t, nullable)
}

fn u32s(v: impl IntoIterator<Item = u32>) -> ArrayRef {
    Arc::new(UInt32Array::from_iter_values(v))
}
fn opt_u32s(v: impl IntoIterator<Item = Option<u32>>) -> ArrayRef {
    Arc::new(UInt32Array::from_iter(v))
}
fn u64s(v: impl IntoIterator<Item = u64>) -> ArrayRef {
    Arc::new(UInt64Array::from_iter_values(v))
}
fn opt_i64s(v: impl IntoIterator<Item = Option<i64>>) -> ArrayRef {
    Arc::new(Int64Array::from_iter(v))
}
fn strs<'a>(v: impl IntoIterator<Item = &'a str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(v))
}

/// `range` cut into batches.
fn batches(range: Range<usize>) -> impl Iterator<Item = Range<usize>> {
    let end = range.end;
    range
        .step_by(BATCH_ROWS)
        .map(move |a| a..a.saturating_add(BATCH_ROWS).min(end))
}

/// Writes `n` rows, `BATCH_ROWS` at a time: `cols(range)` gives one batch's columns.
fn write_rows(
    p: &mut Part,
    n: usize,
    mut cols: impl FnMut(Range<usize>) -> Vec<ArrayRef>,
) -> Result<(), CliError> {
    for b in batches(0..n) {
        p.write(b.len(), cols(b))?;
    }
    Ok(())
}

fn trace_fields() -> Vec<Field> {
    vec![
        field("device", DataType::UInt32, false),
        field("event", DataType::UInt32, false),
        field("action", DataType::Utf8, false),
        field("address", DataType::UInt64, false),
        field("size_bytes", DataType::UInt64, false),
        field("stream", DataType::UInt64, false),
        field("time_us", DataType::Int64, true),
        field("stack_id", DataType::UInt32, false),
    ]
}

/// One row per trace entry, device by device, in trace order.
fn trace(s: &Snapshot, p: &mut Part) -> Result<(), CliError> {
    let t = &s.trace;
    for d in &s.device_traces {
        let start = d.rows.start as usize;
        let n = d.rows.len();
        write_rows(p, n, |b| {
            let rows = start + b.start..start + b.end;
            vec![
                u32s(std::iter::repeat_n(d.device, b.len())),
                u32s(b.start as u32..b.end as u32),
                strs(rows.clone().map(|r| s.action_name(r))),
                u64s(rows.clone().map(|r| t.addr.get(r).copied().unwrap_or(0))),
                u64s(
                    rows.clone()
                        .map(|r| t.size_bytes.get(r).copied().unwrap_or(0)),
                ),
                u64s(t.stream.to_vec(rows.clone())),
                opt_i64s(rows.clone().map(|r| t.time_of(r))),
                u32s(rows.map(|r| t.stack.get(r).map_or(0, |k| k.0))),
            ]
        })?;
    }
    Ok(())
}

fn allocation_fields() -> Vec<Field> {
    vec![
        field("device", DataType::UInt32, false),
        field("allocation", DataType::UInt32, false),
        field("address", DataType::UInt64, false),
        field("version", DataType::UInt32, false),
        field("size_bytes", DataType::UInt64, false),
        field("stream", DataType::UInt64, false),
        field("origin", DataType::Utf8, false),
        field("alloc_event", DataType::UInt32, true),
        field("free_requested_event", DataType::UInt32, true),
        field("free_completed_event", DataType::UInt32, true),
        field("pool_a", DataType::Int64, true),
        field("pool_b", DataType::Int64, true),
        field("stack_id", DataType::UInt32, false),
        field("user_frame", DataType::Utf8, false),
    ]
}

fn origin_name(o: Origin) -> &'static str {
    match o {
        Origin::Traced => "traced",
        Origin::UnmatchedFree => "unmatched_free",
        Origin::Untraced => "untraced",
    }
}

/// One row per allocation of core's replay (the allocation table), device by device; the
/// pool by the timeline's rule, the user frame by the analysis's.
fn allocations(s: &Snapshot, p: &mut Part) -> Result<(), CliError> {
    for device in s.devices() {
        let rp = replay_device(s, device);
        let pools = PoolResolver::new(s, device);
        let mut facts = StackFacts::default();
        let groups: Vec<u32> = rp
            .allocations
            .iter()
            .map(|a| facts.allocation_group(s, a))
            .collect();
        let all = &rp.allocations;
        write_rows(p, all.len(), |b| {
            let a = &all[b.clone()];
            let pool: Vec<Option<(i64, i64)>> =
                a.iter().map(|x| pools.pool_of_allocation(x)).collect();
            vec![
                u32s(std::iter::repeat_n(device, a.len())),
                u32s(b.start as u32..b.end as u32),
                u64s(a.iter().map(|x| x.addr)),
                u32s(a.iter().map(|x| x.version)),
                u64s(a.iter().map(|x| x.size_bytes)),
                u64s(a.iter().map(|x| x.stream)),
                strs(a.iter().map(|x| origin_name(x.origin))),
                opt_u32s(a.iter().map(|x| x.alloc_event)),
                opt_u32s(a.iter().map(|x| x.free_requested_event)),
                opt_u32s(a.iter().map(|x| x.free_event)),
                opt_i64s(pool.iter().map(|p| p.map(|p| p.0))),
                opt_i64s(pool.iter().map(|p| p.map(|p| p.1))),
                u32s(a.iter().map(|x| x.stack.0)),
                strs(groups[b].iter().map(|&g| facts.names[g as usize].as_str())),
            ]
        })?;
    }
    Ok(())
}

fn segment_fields() -> Vec<Field> {
    vec![
        field("device", DataType::UInt32, false),
        field("segment", DataType::UInt32, false),
        field("address", DataType::UInt64, false),
        field("total_size_bytes", DataType::UInt64, false),
        field("allocated_size_bytes", DataType::UInt64, false),
        field("active_size_bytes", DataType::UInt64, false),
        field("requested_size_bytes", DataType::UInt64, false),
        field("stream", DataType::UInt64, false),
        field("segment_type", DataType::Utf8, false),
        field("pool_a", DataType::Int64, false),
        field("pool_b", DataType::Int64, false),
        field("is_expandable", DataType::Boolean, false),
        field("stack_id", DataType::UInt32, false),
    ]
}

/// One row per segment of the snapshot (its state when it was taken).
fn segments(s: &Snapshot, p: &mut Part) -> Result<(), CliError> {
    write_rows(p, s.segments.len(), |b| {
        let g = &s.segments[b.clone()];
        vec![
            u32s(g.iter().map(|x| x.device)),
            u32s(b.start as u32..b.end as u32),
            u64s(g.iter().map(|x| x.address)),
            u64s(g.iter().map(|x| x.total_size_bytes)),
            u64s(g.iter().map(|x| x.allocated_size_bytes)),
            u64s(g.iter().map(|x| x.active_size_bytes)),
            u64s(g.iter().map(|x| x.requested_size_bytes)),
            u64s(g.iter().map(|x| x.stream)),
            strs(g.iter().map(|x| s.str(x.segment_type))),
            opt_i64s(g.iter().map(|x| Some(x.pool_id.0))),
            opt_i64s(g.iter().map(|x| Some(x.pool_id.1))),
            Arc::new(BooleanArray::from_iter(
                g.iter().map(|x| Some(x.is_expandable)),
            )),
            u32s(g.iter().map(|x| x.stack.0)),
        ]
    })
}

fn block_fields() -> Vec<Field> {
    vec![
        field("device", DataType::UInt32, false),
        field("segment", DataType::UInt32, false),
        field("address", DataType::UInt64, false),
        field("size_bytes", DataType::UInt64, false),
        field("requested_size_bytes", DataType::UInt64, false),
        field("state", DataType::Utf8, false),
        field("stack_id", DataType::UInt32, false),
    ]
}

/// One row per block of every segment, with its segment's row number.
fn blocks(s: &Snapshot, p: &mut Part) -> Result<(), CliError> {
    let rows: Vec<(u32, u32, &memlens_core::model::Block)> = s
        .segments
        .iter()
        .enumerate()
        .flat_map(|(i, g)| {
            s.segment_blocks(g)
                .iter()
                .map(move |b| (g.device, i as u32, b))
        })
        .collect();
    write_rows(p, rows.len(), |b| {
        let r = &rows[b];
        vec![
            u32s(r.iter().map(|x| x.0)),
            u32s(r.iter().map(|x| x.1)),
            u64s(r.iter().map(|x| x.2.address)),
            u64s(r.iter().map(|x| x.2.size_bytes)),
            u64s(r.iter().map(|x| x.2.requested_size_bytes)),
            strs(r.iter().map(|x| x.2.state.name())),
            u32s(r.iter().map(|x| x.2.stack.0)),
        ]
    })
}

fn frame_fields() -> Vec<Field> {
    vec![
        field("frame_id", DataType::UInt32, false),
        field("filename", DataType::Utf8, false),
        field("line", DataType::Int64, false),
        field("name", DataType::Utf8, false),
    ]
}

/// One row per distinct frame.
fn frames(s: &Snapshot, p: &mut Part) -> Result<(), CliError> {
    write_rows(p, s.frames.len(), |b| {
        let f = &s.frames[b.clone()];
        vec![
            u32s(b.start as u32..b.end as u32),
            strs(f.iter().map(|x| s.str(x.filename))),
            opt_i64s(f.iter().map(|x| Some(x.line))),
            strs(f.iter().map(|x| s.str(x.name))),
        ]
    })
}

fn stack_fields() -> Vec<Field> {
    vec![
        field("stack_id", DataType::UInt32, false),
        field("depth", DataType::UInt32, false),
        field("frame_id", DataType::UInt32, false),
    ]
}

/// One row per frame of each distinct stack; `depth` 0 is the innermost frame (torch's order).
/// The empty stack (`stack_id` 0) has no rows.
fn stacks(s: &Snapshot, p: &mut Part) -> Result<(), CliError> {
    let rows: Vec<(u32, u32, u32)> = (0..s.stacks.len() as u32)
        .flat_map(|k| {
            let frames = s.stacks.get(memlens_core::trace::StackId(k));
            frames
                .iter()
                .enumerate()
                .map(move |(d, f)| (k, d as u32, f.0))
        })
        .collect();
    write_rows(p, rows.len(), |b| {
        let r = &rows[b];
        vec![
            u32s(r.iter().map(|x| x.0)),
            u32s(r.iter().map(|x| x.1)),
            u32s(r.iter().map(|x| x.2)),
        ]
    })
}

/// The fields of `memlens stats --json`'s device objects, `device` first, then by name:
/// numbers as Int64, anything else (the `actions` counts) as its JSON text.
fn stats_fields() -> Vec<Field> {
    let zero = memlens_core::device_stats(&Snapshot::default(), 0);
    let v = serde_json::to_value(zero).unwrap_or_default();
    let mut obj: Vec<(String, serde_json::Value)> = v
        .as_object()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .collect();
    obj.sort_by(|a, b| (a.0 != "device", &a.0).cmp(&(b.0 != "device", &b.0)));
    obj.iter()
        .map(|(k, v)| {
            let t = if v.is_number() {
                DataType::Int64
            } else {
                DataType::Utf8
            };
            field(k, t, true)
        })
        .collect()
}

/// One row per device: the numbers `memlens stats --json` prints.
fn stats(s: &Snapshot, p: &mut Part) -> Result<(), CliError> {
    let st = memlens_core::snapshot_stats(s);
    let rows: Vec<serde_json::Value> = st
        .devices
        .iter()
        .map(|d| serde_json::to_value(d).map_err(|e| CliError(e.to_string())))
        .collect::<Result<_, _>>()?;
    let fields = stats_fields();
    let cols = fields
        .iter()
        .map(|f| -> ArrayRef {
            let vals = rows.iter().map(|r| &r[f.name().as_str()]);
            if f.data_type() == &DataType::Int64 {
                opt_i64s(vals.map(serde_json::Value::as_i64))
            } else {
                Arc::new(StringArray::from_iter_values(vals.map(|v| v.to_string())))
            }
        })
        .collect();
    p.write(rows.len(), cols)
}
