//! What the stack panel and the tooltip say about one timeline element: address with its reuse
//! version, size, lifetime, stream, and the frames filtered the way upstream filters
//! interpreter and dispatcher noise (reference §1.6), with consecutive repeats elided.

use super::axis::format_bytes;
use super::timeline::{Origin, TimelineKind, TimelineLayout};
use crate::model::Snapshot;
use crate::trace::{Action, EntryExtra, StackId};
use serde::{Deserialize, Serialize};

/// Whether upstream's filter keeps a frame (one filter for the CLI and the viewer: `flame`).
pub fn frame_shown(filename: &str, name: &str) -> bool {
    crate::flame::frame_is_shown(name, filename)
}

/// Everything the UI shows about an element.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ElementContext {
    /// `b'7f3a00000000_2` (blocks) or `s'…` (segments), as upstream labels them.
    pub label: String,
    pub size_bytes: u64,
    pub addr: u64,
    pub version: u32,
    pub stream: u64,
    /// "event 12 → event 40", "before the trace → event 40", "event 12 → end of trace".
    pub alive: String,
    pub alloc_time_us: Option<i64>,
    pub free_time_us: Option<i64>,
    /// Lines shown above the frames (origin notes, compile context, metadata, annotations).
    pub notes: Vec<String>,
    /// `file:line:name`, innermost first, filtered unless `full`, repeats elided.
    pub frames: Vec<String>,
    /// Frames the filter hid (0 when `full`).
    pub hidden_frames: usize,
    pub forward_frames: Vec<String>,
}

/// Describes element `e` of `layout` (built from `snap` for `device`).
pub fn element_context(
    snap: &Snapshot,
    device: u32,
    layout: &TimelineLayout,
    kind: TimelineKind,
    e: usize,
    full: bool,
) -> Option<ElementContext> {
    let el = &layout.elements;
    let size = *el.size_bytes.get(e)?;
    let addr = *el.addr.get(e)?;
    let version = *el.version.get(e)?;
    let origin = Origin::from_u8(*el.origin.get(e)?);
    let alloc_row = el.alloc_row.get(e);
    let free_row = el.free_row.get(e);
    let stack = *el.stack.get(e)?;
    if origin == Origin::PoolEnvelope {
        return Some(envelope_context(layout, e));
    }
    let rows = snap.device_rows(device);
    let abs = |r: Option<u32>| {
        r.map(|r| rows.start as usize + r as usize)
            .filter(|&a| a < rows.end as usize)
    };
    let t = &snap.trace;
    let time = |r: Option<u32>| abs(r).and_then(|a| t.time_of(a));
    let prefix = if kind == TimelineKind::Segments {
        "s"
    } else {
        "b"
    };
    let from = alloc_row.map_or_else(|| "before the trace".to_string(), |r| format!("event {r}"));
    let to = free_row.map_or_else(|| "end of trace".to_string(), |r| format!("event {r}"));
    let mut notes = Vec::new();
    match origin {
        Origin::FreedUntraced => notes.push("alloc not recorded (made before the trace starts); stack trace of the free:".to_string()),
        Origin::Ghost => notes.push(
            "[Ghost block] active in the snapshot but never allocated in the trace: allocated before _record_memory_history() was enabled, or evicted from the ring buffer".to_string(),
        ),
        Origin::Remainder => notes.push("rest of a mapped range after part of it was unmapped".to_string()),
        Origin::Traced | Origin::PoolEnvelope => {}
    }
    // The pool (from the entry's `pool_id`, else from the segment holding the address).
    if let Some(&(a, b)) = el.pool.get(e).and_then(|p| layout.pools.get(p as usize)) {
        let private = if (a, b) == (0, 0) {
            ""
        } else {
            " (private pool)"
        };
        notes.push(format!("pool_id ({a}, {b}){private}"));
    } else if el.pool.get(e).is_none() {
        notes.push("pool_id unknown (its segment is not in the snapshot)".to_string());
    }
    // Per-entry strings of the row the frames come from.
    let src_row = alloc_row.or(free_row);
    if let Some(a) = abs(src_row) {
        if let Some(cc) = t
            .compile_context
            .get(a)
            .map(|s| snap.str(*s))
            .filter(|s| !s.is_empty())
        {
            notes.push(format!("Compile context: {cc}"));
        }
        if let Some(um) = t
            .user_metadata
            .get(a)
            .map(|s| snap.str(*s))
            .filter(|s| !s.is_empty())
        {
            notes.push(format!("User metadata: {um}"));
        }
        for x in t.extras_of(a as u32) {
            match x {
                // Shown above, as the element's pool.
                EntryExtra::PoolId(..) => {}
                EntryExtra::InternalMetadata(s) => {
                    notes.push(format!("Internal metadata: {}", snap.str(*s)))
                }
                EntryExtra::Category(s) => notes.push(format!("Category: {}", snap.str(*s))),
                _ => {}
            }
        }
    }
    // `annotate` events on this allocation while it was alive (torch ≥ 2.15).
    let (s, en) = (
        el.start_x.get(e).copied().unwrap_or(0),
        el.end_x.get(e).copied().unwrap_or(0),
    );
    for (i, r) in rows.clone().enumerate() {
        let x = i as u32 + 1;
        if x < s || x >= en {
            continue;
        }
        let r = r as usize;
        if t.action.get(r) == Some(&Action::Annotate) && t.addr.get(r) == Some(&addr) {
            let text = t.user_metadata.get(r).map(|s| snap.str(*s)).unwrap_or("");
            notes.push(format!("Annotation (event {i}): {text}"));
        }
    }
    let mut forward_frames = Vec::new();
    if let Some(a) = abs(src_row) {
        for x in t.extras_of(a as u32) {
            if let EntryExtra::ForwardFrames(v) = x {
                forward_frames.extend(v.iter().map(|s| snap.str(*s).to_string()));
            }
        }
    }
    let (frames, hidden_frames) = format_frames(snap, stack, full);
    Some(ElementContext {
        label: format!("{prefix}'{addr:x}_{version}"),
        size_bytes: size,
        addr,
        version,
        stream: *el.stream.get(e)?,
        alive: format!("{from} → {to}"),
        alloc_time_us: time(alloc_row),
        free_time_us: time(free_row),
        notes,
        frames,
        hidden_frames,
        forward_frames,
    })
}

/// `pool (1, 42) stream 0`, for a private pool's envelope element.
fn envelope_label(layout: &TimelineLayout, e: usize) -> String {
    let el = &layout.elements;
    let pool = el
        .pool
        .get(e)
        .and_then(|p| layout.pools.get(p as usize))
        .map(|(a, b)| format!("({a}, {b})"))
        .unwrap_or_else(|| "(unknown)".into());
    format!(
        "private pool {pool} stream {}",
        el.stream.get(e).copied().unwrap_or(0)
    )
}

/// `event 12 → event 40` in x terms (`x = event + 1`), for elements without entries.
fn span_text(layout: &TimelineLayout, e: usize) -> String {
    let el = &layout.elements;
    let (s, en) = (
        el.start_x.get(e).copied().unwrap_or(0),
        el.end_x.get(e).copied().unwrap_or(0),
    );
    let from = match s {
        0 => "before the trace".to_string(),
        s => format!("event {}", s - 1),
    };
    let to = if en >= layout.x_end() {
        "end of trace".to_string()
    } else {
        format!("event {}", en.saturating_sub(1))
    };
    format!("{from} → {to}")
}

/// What the panel says about a pool envelope.
fn envelope_context(layout: &TimelineLayout, e: usize) -> ElementContext {
    let el = &layout.elements;
    ElementContext {
        label: envelope_label(layout, e),
        size_bytes: el.size_bytes.get(e).copied().unwrap_or(0),
        addr: 0,
        version: 0,
        stream: el.stream.get(e).copied().unwrap_or(0),
        alive: span_text(layout, e),
        notes: vec![
            "Private pool envelope: as tall as the larger of the pool's reserved segments and its live allocations, while that stays the same. The pool's allocations are stacked inside it; the rest is memory the pool holds but nothing uses (upstream's gray bar, which never shrinks; here it shrinks when the pool's segments are freed).".to_string(),
        ],
        frames: vec!["(a pool, not an allocation: no stack)".to_string()],
        ..ElementContext::default()
    }
}

/// Frames of a stack as `file:line:name`, filtered unless `full`, consecutive repeats elided.
pub fn format_frames(snap: &Snapshot, stack: StackId, full: bool) -> (Vec<String>, usize) {
    let mut lines: Vec<String> = Vec::new();
    let mut hidden = 0usize;
    for f in snap
        .stacks
        .get(stack)
        .iter()
        .filter_map(|&id| snap.frame(id))
    {
        let (file, name) = (snap.str(f.filename), snap.str(f.name));
        if !full && !frame_shown(file, name) {
            hidden += 1;
            continue;
        }
        lines.push(format!("{file}:{}:{name}", f.line));
    }
    (elide_repeats(lines), hidden)
}

/// `a a a b` → `a`, `<repeats 2 times>`, `b` (upstream's `elideRepeats`).
pub fn elide_repeats(lines: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let mut j = i + 1;
        while j < lines.len() && lines[j] == lines[i] {
            j += 1;
        }
        out.push(lines[i].clone());
        if j - i > 1 {
            out.push(format!("<repeats {} times>", j - i - 1));
        }
        i = j;
    }
    out
}

/// Why an element may show no frames (upstream's list of causes).
pub const NO_FRAMES_REASON: &str = "No frames were recorded for this allocation. Possible causes: it was made before _record_memory_history() was enabled; the context setting did not record stacks for it (context=None or 'state'); it was allocated in backward without C++ stacks (stacks='python'); it was reconstructed from the snapshot's segments; or its alloc was evicted from the ring buffer.";

/// Short tooltip text for the element (size, address, lifetime, stream).
pub fn tooltip(layout: &TimelineLayout, kind: TimelineKind, e: usize) -> Option<String> {
    let el = &layout.elements;
    let size = *el.size_bytes.get(e)?;
    let addr = *el.addr.get(e)?;
    let version = *el.version.get(e)?;
    let origin = Origin::from_u8(*el.origin.get(e)?);
    let alloc_row = el.alloc_row.get(e);
    let free_row = el.free_row.get(e);
    if origin == Origin::PoolEnvelope {
        return Some(format!(
            "{} {} ({size} bytes)\nalive {}",
            envelope_label(layout, e),
            format_bytes(size as f64),
            span_text(layout, e)
        ));
    }
    let pool = el
        .pool
        .get(e)
        .and_then(|p| layout.pools.get(p as usize))
        .filter(|&&p| p != (0, 0))
        .map(|(a, b)| format!(", private pool ({a}, {b})"))
        .unwrap_or_default();
    let prefix = if kind == TimelineKind::Segments {
        "s"
    } else {
        "b"
    };
    let from = match alloc_row {
        Some(r) if !origin.before_trace() => format!("event {r}"),
        _ => "before the trace".to_string(),
    };
    let to = free_row.map_or_else(|| "end of trace".to_string(), |r| format!("event {r}"));
    let note = match origin {
        Origin::FreedUntraced => " (alloc not recorded)",
        Origin::Ghost => " (ghost block: allocated before the trace)",
        _ => "",
    };
    Some(format!(
        "{prefix}'{addr:x}_{version} {} ({size} bytes){note}\nalive {from} → {to}, stream {}{pool}",
        format_bytes(size as f64),
        el.stream.get(e)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_elided() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            elide_repeats(v(&["a", "a", "a", "b", "a"])),
            v(&["a", "<repeats 2 times>", "b", "a"])
        );
        assert_eq!(elide_repeats(v(&[])), v(&[]));
    }

    #[test]
    fn filter_matches_upstream_list() {
        assert!(!frame_shown("/usr/lib/python3.11/ceval.c", "main"));
        assert!(!frame_shown("x.cpp", "PyEval_EvalFrame"));
        assert!(!frame_shown("aten/src/ATen/core/boxing/impl.h", "call"));
        assert!(frame_shown("train.py", "forward"));
    }
}
