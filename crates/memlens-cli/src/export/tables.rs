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
use memlens_core::replay::{replay_device, Allocation, Origin};
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

/// One column of a batch: its field (name, type, nullability) and its values. Each table
/// lists its columns once, in its `*_cols` function; its schema is the fields of an empty
/// batch.
struct Col {
    field: Field,
    values: ArrayRef,
}

fn col(name: &str, nullable: bool, values: ArrayRef) -> Col {
    Col {
        field: Field::new(name, values.data_type().clone(), nullable),
        values,
    }
}
fn u32s(name: &str, v: impl IntoIterator<Item = u32>) -> Col {
    col(name, false, Arc::new(UInt32Array::from_iter_values(v)))
}
fn opt_u32s(name: &str, v: impl IntoIterator<Item = Option<u32>>) -> Col {
    col(name, true, Arc::new(UInt32Array::from_iter(v)))
}
fn u64s(name: &str, v: impl IntoIterator<Item = u64>) -> Col {
    col(name, false, Arc::new(UInt64Array::from_iter_values(v)))
}
fn i64s(name: &str, v: impl IntoIterator<Item = i64>) -> Col {
    col(name, false, Arc::new(Int64Array::from_iter_values(v)))
}
fn opt_i64s(name: &str, v: impl IntoIterator<Item = Option<i64>>) -> Col {
    col(name, true, Arc::new(Int64Array::from_iter(v)))
}
fn strs<'a>(name: &str, v: impl IntoIterator<Item = &'a str>) -> Col {
    col(name, false, Arc::new(StringArray::from_iter_values(v)))
}
fn bools(name: &str, v: impl IntoIterator<Item = bool>) -> Col {
    col(
        name,
        false,
        Arc::new(BooleanArray::from_iter(v.into_iter().map(Some))),
    )
}

/// The fields of a batch's columns (of an empty batch: a table's schema).
fn fields_of(cols: Vec<Col>) -> Vec<Field> {
    cols.into_iter().map(|c| c.field).collect()
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
    mut cols: impl FnMut(Range<usize>) -> Vec<Col>,
) -> Result<(), CliError> {
    for b in batches(0..n) {
        p.write(b.len(), cols(b).into_iter().map(|c| c.values).collect())?;
    }
    Ok(())
}

fn trace_fields() -> Vec<Field> {
    fields_of(trace_cols(&Snapshot::default(), 0, 0, 0..0))
}

/// One row per trace entry, device by device, in trace order.
fn trace(s: &Snapshot, p: &mut Part) -> Result<(), CliError> {
    for d in &s.device_traces {
        write_rows(p, d.rows.len(), |b| {
            trace_cols(s, d.device, d.rows.start as usize, b)
        })?;
    }
    Ok(())
}

/// Device `device`'s entries `events` (device-local; its trace starts at row `start`).
fn trace_cols(s: &Snapshot, device: u32, start: usize, events: Range<usize>) -> Vec<Col> {
    let t = &s.trace;
    let rows = start + events.start..start + events.end;
    vec![
        u32s("device", std::iter::repeat_n(device, events.len())),
        u32s("event", events.start as u32..events.end as u32),
        strs("action", rows.clone().map(|r| s.action_name(r))),
        u64s(
            "address",
            rows.clone().map(|r| t.addr.get(r).copied().unwrap_or(0)),
        ),
        u64s(
            "size_bytes",
            rows.clone()
                .map(|r| t.size_bytes.get(r).copied().unwrap_or(0)),
        ),
        u64s("stream", t.stream.to_vec(rows.clone())),
        opt_i64s("time_us", rows.clone().map(|r| t.time_of(r))),
        u32s("stack_id", rows.map(|r| t.stack.get(r).map_or(0, |k| k.0))),
    ]
}

fn origin_name(o: Origin) -> &'static str {
    match o {
        Origin::Traced => "traced",
        Origin::UnmatchedFree => "unmatched_free",
        Origin::Untraced => "untraced",
    }
}

/// A device's allocation table (core's replay) with the pool of each allocation by the
/// timeline's rule and its user frame by the analysis's.
struct DeviceAllocations<'a> {
    device: u32,
    all: Vec<Allocation>,
    pools: PoolResolver<'a>,
    facts: StackFacts,
    groups: Vec<u32>,
}

impl DeviceAllocations<'_> {
    fn new(s: &Snapshot, device: u32) -> DeviceAllocations<'_> {
        let all = replay_device(s, device).allocations;
        let mut facts = StackFacts::default();
        let groups = all.iter().map(|a| facts.allocation_group(s, a)).collect();
        DeviceAllocations {
            device,
            all,
            pools: PoolResolver::new(s, device),
            facts,
            groups,
        }
    }

    /// Allocations `b` of the table.
    fn cols(&self, b: Range<usize>) -> Vec<Col> {
        let a = &self.all[b.clone()];
        let pool: Vec<Option<(i64, i64)>> =
            a.iter().map(|x| self.pools.pool_of_allocation(x)).collect();
        let user_frame = self.groups[b.clone()]
            .iter()
            .map(|&g| self.facts.names[g as usize].as_str());
        vec![
            u32s("device", std::iter::repeat_n(self.device, a.len())),
            u32s("allocation", b.start as u32..b.end as u32),
            u64s("address", a.iter().map(|x| x.addr)),
            u32s("version", a.iter().map(|x| x.version)),
            u64s("size_bytes", a.iter().map(|x| x.size_bytes)),
            u64s("stream", a.iter().map(|x| x.stream)),
            strs("origin", a.iter().map(|x| origin_name(x.origin))),
            opt_u32s("alloc_event", a.iter().map(|x| x.alloc_event)),
            opt_u32s(
                "free_requested_event",
                a.iter().map(|x| x.free_requested_event),
            ),
            opt_u32s("free_completed_event", a.iter().map(|x| x.free_event)),
            opt_i64s("pool_a", pool.iter().map(|p| p.map(|p| p.0))),
            opt_i64s("pool_b", pool.iter().map(|p| p.map(|p| p.1))),
            u32s("stack_id", a.iter().map(|x| x.stack.0)),
            strs("user_frame", user_frame),
        ]
    }
}

fn allocation_fields() -> Vec<Field> {
    fields_of(DeviceAllocations::new(&Snapshot::default(), 0).cols(0..0))
}

/// One row per allocation of core's replay (the allocation table), device by device.
fn allocations(s: &Snapshot, p: &mut Part) -> Result<(), CliError> {
    for device in s.devices() {
        let d = DeviceAllocations::new(s, device);
        write_rows(p, d.all.len(), |b| d.cols(b))?;
    }
    Ok(())
}

fn segment_fields() -> Vec<Field> {
    fields_of(segment_cols(&Snapshot::default(), 0..0))
}

/// One row per segment of the snapshot (its state when it was taken).
fn segments(s: &Snapshot, p: &mut Part) -> Result<(), CliError> {
    write_rows(p, s.segments.len(), |b| segment_cols(s, b))
}

fn segment_cols(s: &Snapshot, b: Range<usize>) -> Vec<Col> {
    let g = &s.segments[b.clone()];
    vec![
        u32s("device", g.iter().map(|x| x.device)),
        u32s("segment", b.start as u32..b.end as u32),
        u64s("address", g.iter().map(|x| x.address)),
        u64s("total_size_bytes", g.iter().map(|x| x.total_size_bytes)),
        u64s(
            "allocated_size_bytes",
            g.iter().map(|x| x.allocated_size_bytes),
        ),
        u64s("active_size_bytes", g.iter().map(|x| x.active_size_bytes)),
        u64s(
            "requested_size_bytes",
            g.iter().map(|x| x.requested_size_bytes),
        ),
        u64s("stream", g.iter().map(|x| x.stream)),
        strs("segment_type", g.iter().map(|x| s.str(x.segment_type))),
        i64s("pool_a", g.iter().map(|x| x.pool_id.0)),
        i64s("pool_b", g.iter().map(|x| x.pool_id.1)),
        bools("is_expandable", g.iter().map(|x| x.is_expandable)),
        u32s("stack_id", g.iter().map(|x| x.stack.0)),
    ]
}

/// A block with its segment's device and row number.
type BlockRow<'a> = (u32, u32, &'a memlens_core::model::Block);

fn block_fields() -> Vec<Field> {
    fields_of(block_cols(&[]))
}

/// One row per block of every segment, with its segment's row number.
fn blocks(s: &Snapshot, p: &mut Part) -> Result<(), CliError> {
    let rows: Vec<BlockRow> = s
        .segments
        .iter()
        .enumerate()
        .flat_map(|(i, g)| {
            s.segment_blocks(g)
                .iter()
                .map(move |b| (g.device, i as u32, b))
        })
        .collect();
    write_rows(p, rows.len(), |b| block_cols(&rows[b]))
}

fn block_cols(r: &[BlockRow]) -> Vec<Col> {
    vec![
        u32s("device", r.iter().map(|x| x.0)),
        u32s("segment", r.iter().map(|x| x.1)),
        u64s("address", r.iter().map(|x| x.2.address)),
        u64s("size_bytes", r.iter().map(|x| x.2.size_bytes)),
        u64s(
            "requested_size_bytes",
            r.iter().map(|x| x.2.requested_size_bytes),
        ),
        strs("state", r.iter().map(|x| x.2.state.name())),
        u32s("stack_id", r.iter().map(|x| x.2.stack.0)),
    ]
}

fn frame_fields() -> Vec<Field> {
    fields_of(frame_cols(&Snapshot::default(), 0..0))
}

/// One row per distinct frame.
fn frames(s: &Snapshot, p: &mut Part) -> Result<(), CliError> {
    write_rows(p, s.frames.len(), |b| frame_cols(s, b))
}

fn frame_cols(s: &Snapshot, b: Range<usize>) -> Vec<Col> {
    let f = &s.frames[b.clone()];
    vec![
        u32s("frame_id", b.start as u32..b.end as u32),
        strs("filename", f.iter().map(|x| s.str(x.filename))),
        i64s("line", f.iter().map(|x| x.line)),
        strs("name", f.iter().map(|x| s.str(x.name))),
    ]
}

fn stack_fields() -> Vec<Field> {
    fields_of(stack_cols(&[]))
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
    write_rows(p, rows.len(), |b| stack_cols(&rows[b]))
}

/// (stack, depth, frame) rows.
fn stack_cols(r: &[(u32, u32, u32)]) -> Vec<Col> {
    vec![
        u32s("stack_id", r.iter().map(|x| x.0)),
        u32s("depth", r.iter().map(|x| x.1)),
        u32s("frame_id", r.iter().map(|x| x.2)),
    ]
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
            Field::new(k, t, true)
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
                Arc::new(Int64Array::from_iter(vals.map(serde_json::Value::as_i64)))
            } else {
                Arc::new(StringArray::from_iter_values(vals.map(|v| v.to_string())))
            }
        })
        .collect();
    p.write(rows.len(), cols)
}
