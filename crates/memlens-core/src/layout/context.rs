//! What the stack panel and the tooltip say about one timeline element: address with its reuse
//! version, size, lifetime, stream, and the frames filtered the way upstream filters
//! interpreter and dispatcher noise (reference §1.6), with consecutive repeats elided.

use super::axis::format_bytes;
use super::timeline::{ElementKind, Origin, TimelineKind, TimelineLayout};
use crate::model::Snapshot;
use crate::trace::{EntryExtra, StackId, StrRuns};
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
    /// Per line of `frames` (same length): what the stack panel needs to lead with the user's
    /// code.
    #[serde(default)]
    pub frame_info: Vec<FrameInfo>,
}

/// One line of [`ElementContext::frames`] as the stack panel shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameInfo {
    /// The frame's file as recorded (empty on a `<repeats N times>` line).
    pub file: String,
    /// `file` after the last `site-packages/` (or `dist-packages/`), else without the
    /// directories all of the stack's other files share ([`short_paths`]).
    pub short_file: String,
    /// A C++ or interpreter frame (not Python source): the panel folds runs of them.
    pub native: bool,
    /// The stack's user frame (`crate::flame::user_frame`, the analysis's rule).
    pub user: bool,
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
    let what = *el.kind.get(e)?;
    let alloc_row = el.alloc_row.get(e);
    let free_row = el.free_row.get(e);
    let stack = *el.stack.get(e)?;
    if what == ElementKind::PoolEnvelope {
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
    let mut notes: Vec<String> = kind_note(what).into_iter().collect();
    notes.extend(pool_note(layout, e));
    // Per-entry strings of the row the frames come from.
    let src = abs(alloc_row.or(free_row));
    if let Some(a) = src {
        entry_notes(snap, a, &mut notes);
    }
    // `annotate` events on this allocation while it was alive (torch ≥ 2.15).
    for (event, text) in annotations(layout, e) {
        notes.push(format!("Annotation (event {event}): {text}"));
    }
    let forward_frames = src.map(|a| forward_frames(snap, a)).unwrap_or_default();
    let StackLines {
        frames,
        hidden: hidden_frames,
        info: frame_info,
    } = format_frames(snap, stack, full);
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
        frame_info,
    })
}

/// What kind of element it is, when that needs saying.
fn kind_note(what: ElementKind) -> Option<String> {
    let note = match what {
        ElementKind::Allocation(Origin::UnmatchedFree) => "alloc not recorded (made before the trace starts); stack trace of the free:",
        ElementKind::Allocation(Origin::Untraced) => "[Ghost block] active in the snapshot but never allocated in the trace: allocated before _record_memory_history() was enabled, or evicted from the ring buffer",
        ElementKind::Remainder => "rest of a mapped range after part of it was unmapped",
        ElementKind::Allocation(Origin::Traced) | ElementKind::PoolEnvelope => return None,
    };
    Some(note.to_string())
}

/// The element's pool (from the entry's `pool_id`, else from the segment holding the address).
fn pool_note(layout: &TimelineLayout, e: usize) -> Option<String> {
    let el = &layout.elements;
    if let Some(&(a, b)) = el.pool.get(e).and_then(|p| layout.pools.get(p as usize)) {
        let private = if (a, b) == (0, 0) {
            ""
        } else {
            " (private pool)"
        };
        Some(format!("pool_id ({a}, {b}){private}"))
    } else if el.pool.get(e).is_none() {
        Some("pool_id unknown (its segment is not in the snapshot)".to_string())
    } else {
        None
    }
}

/// The strings trace entry `a` (absolute) carries: compile context, user metadata, internal
/// metadata, category.
fn entry_notes(snap: &Snapshot, a: usize, notes: &mut Vec<String>) {
    let t = &snap.trace;
    let text = |col: &StrRuns| col.get(a).map(|s| snap.str(*s)).filter(|s| !s.is_empty());
    if let Some(cc) = text(&t.compile_context) {
        notes.push(format!("Compile context: {cc}"));
    }
    if let Some(um) = text(&t.user_metadata) {
        notes.push(format!("User metadata: {um}"));
    }
    for x in t.extras_of(a as u32) {
        match x {
            // Shown as the element's pool.
            EntryExtra::PoolId(..) => {}
            EntryExtra::InternalMetadata(s) => {
                notes.push(format!("Internal metadata: {}", snap.str(*s)))
            }
            EntryExtra::Category(s) => notes.push(format!("Category: {}", snap.str(*s))),
            _ => {}
        }
    }
}

/// The forward pass's frames recorded with trace entry `a` (absolute), for a backward op.
fn forward_frames(snap: &Snapshot, a: usize) -> Vec<String> {
    let mut out = Vec::new();
    for x in snap.trace.extras_of(a as u32) {
        if let EntryExtra::ForwardFrames(v) = x {
            out.extend(v.iter().map(|s| snap.str(*s).to_string()));
        }
    }
    out
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

/// A stack's lines for the panel: the text, how many frames the filter hid, and per line its
/// [`FrameInfo`].
#[derive(Debug, Default)]
pub struct StackLines {
    pub frames: Vec<String>,
    pub hidden: usize,
    pub info: Vec<FrameInfo>,
}

/// Python source (`.py`, or generated code such as `<eval_with_key>.3`); the rest (C++
/// files, `??`, the interpreter's `.c` files) is native.
pub fn is_python_file(file: &str) -> bool {
    file.ends_with(".py") || file.starts_with('<')
}

/// Frames of a stack as `file:line:name`, filtered unless `full`, consecutive repeats elided.
pub fn format_frames(snap: &Snapshot, stack: StackId, full: bool) -> StackLines {
    let user = crate::flame::user_frame(snap, stack);
    let mut lines: Vec<(String, FrameInfo)> = Vec::new();
    let mut hidden = 0usize;
    for &id in snap.stacks.get(stack) {
        let Some(f) = snap.frame(id) else { continue };
        let (file, name) = (snap.str(f.filename), snap.str(f.name));
        if !full && !frame_shown(file, name) {
            hidden += 1;
            continue;
        }
        let info = FrameInfo {
            file: file.to_string(),
            short_file: String::new(),
            native: !is_python_file(file),
            user: Some(id) == user,
        };
        lines.push((format!("{file}:{}:{name}", f.line), info));
    }
    let short = short_paths(
        &lines
            .iter()
            .map(|(_, i)| i.file.as_str())
            .collect::<Vec<_>>(),
    );
    for ((_, i), s) in lines.iter_mut().zip(short) {
        i.short_file = s;
    }
    let (frames, info) = elide_repeats(lines, |i| FrameInfo {
        native: i.native,
        ..FrameInfo::default()
    })
    .into_iter()
    .unzip();
    StackLines {
        frames,
        hidden,
        info,
    }
}

/// Files shortened for display: the part after the last `site-packages/` or `dist-packages/`;
/// else, for Python files with a directory, without the directories all such files share
/// (when they share more than the root). C++ files keep their (build-relative) paths.
pub fn short_paths(files: &[&str]) -> Vec<String> {
    fn after_packages(f: &str) -> Option<&str> {
        ["site-packages/", "dist-packages/"]
            .iter()
            .filter_map(|p| f.rfind(p).map(|i| &f[i + p.len()..]))
            .min_by_key(|s| s.len())
    }
    let rest: Vec<&str> = files
        .iter()
        .copied()
        .filter(|f| is_python_file(f) && f.contains('/') && after_packages(f).is_none())
        .collect();
    let mut prefix = rest.first().map_or(0, |f| f.len());
    for f in rest.iter().skip(1) {
        let first = rest.first().copied().unwrap_or("");
        prefix = prefix.min(
            first
                .bytes()
                .zip(f.bytes())
                .take_while(|(a, b)| a == b)
                .count(),
        );
    }
    // Cut at a directory boundary, keeping more than the root.
    let dir = rest
        .first()
        .and_then(|f| f.get(..prefix))
        .and_then(|p| p.rfind('/'))
        .filter(|&i| i > 0)
        .map_or(0, |i| i + 1);
    files
        .iter()
        .map(|f| match after_packages(f) {
            Some(s) => s.to_string(),
            None if dir > 0 && rest.contains(f) => f.get(dir..).unwrap_or(f).to_string(),
            None => f.to_string(),
        })
        .collect()
}

/// `a a a b` → `a`, `<repeats 2 times>`, `b` (upstream's `elideRepeats`), each line with its
/// value; a repeats line gets `repeat(value)`.
pub fn elide_repeats<T>(lines: Vec<(String, T)>, repeat: impl Fn(&T) -> T) -> Vec<(String, T)> {
    let mut out: Vec<(String, T)> = Vec::with_capacity(lines.len());
    let mut it = lines.into_iter().peekable();
    while let Some((text, v)) = it.next() {
        let mut n = 0;
        while it.peek().is_some_and(|(t, _)| *t == text) {
            it.next();
            n += 1;
        }
        let r = (n > 0).then(|| repeat(&v));
        out.push((text, v));
        if let Some(r) = r {
            out.push((format!("<repeats {n} times>"), r));
        }
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
    let what = *el.kind.get(e)?;
    let alloc_row = el.alloc_row.get(e);
    let free_row = el.free_row.get(e);
    if what == ElementKind::PoolEnvelope {
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
        Some(r) if !what.before_trace() => format!("event {r}"),
        _ => "before the trace".to_string(),
    };
    let to = free_row.map_or_else(|| "end of trace".to_string(), |r| format!("event {r}"));
    let note = match what {
        ElementKind::Allocation(Origin::UnmatchedFree) => " (alloc not recorded)",
        ElementKind::Allocation(Origin::Untraced) => " (ghost block: allocated before the trace)",
        _ => "",
    };
    let mut text = format!(
        "{prefix}'{addr:x}_{version} {} ({size} bytes){note}\nalive {from} → {to}, stream {}{pool}",
        format_bytes(size as f64),
        el.stream.get(e)?
    );
    for (_, a) in annotations(layout, e) {
        text.push_str("\nannotation: ");
        text.push_str(a);
    }
    Some(text)
}

/// The `annotate` entries naming element `e` while it was alive (its address, inside its
/// span): (event index, text).
pub fn annotations(layout: &TimelineLayout, e: usize) -> impl Iterator<Item = (u32, &str)> {
    let el = &layout.elements;
    let addr = el.addr.get(e).copied();
    let span = el.start_x.get(e).copied().unwrap_or(0)..el.end_x.get(e).copied().unwrap_or(0);
    layout
        .markers
        .iter()
        .filter_map(move |m| match &m.annotates {
            Some((a, text)) if Some(*a) == addr && span.contains(&m.x) => {
                Some((m.x.saturating_sub(1), text.as_str()))
            }
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_elided() {
        let v = |s: &[&str]| s.iter().map(|x| (x.to_string(), 1)).collect::<Vec<_>>();
        let elided = elide_repeats(v(&["a", "a", "a", "b", "a"]), |_| 0);
        let text: Vec<&str> = elided.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(text, ["a", "<repeats 2 times>", "b", "a"]);
        assert_eq!(elided.get(1).map(|(_, x)| *x), Some(0));
        assert!(elide_repeats(v(&[]), |_| 0).is_empty());
    }

    #[test]
    fn paths_are_shortened() {
        let files = [
            "c10/cuda/CUDACachingAllocator.cpp",
            "/home/u/proj/src/train.py",
            "/home/u/proj/src/model/net.py",
            "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py",
            "??",
            "",
        ];
        assert_eq!(
            short_paths(&files),
            [
                "c10/cuda/CUDACachingAllocator.cpp",
                "train.py",
                "model/net.py",
                "torch/nn/modules/module.py",
                "??",
                ""
            ]
        );
        // A lone path loses its directories; paths sharing only the root keep theirs.
        assert_eq!(short_paths(&["/a/b/c.py"]), ["c.py"]);
        assert_eq!(short_paths(&["/a/x.py", "/b/y.py"]), ["/a/x.py", "/b/y.py"]);
        assert!(is_python_file("x.py") && is_python_file("<eval_with_key>.3"));
        assert!(!is_python_file("CUDACachingAllocator.cpp") && !is_python_file("??"));
    }

    #[test]
    fn filter_matches_upstream_list() {
        assert!(!frame_shown("/usr/lib/python3.11/ceval.c", "main"));
        assert!(!frame_shown("x.cpp", "PyEval_EvalFrame"));
        assert!(!frame_shown("aten/src/ATen/core/boxing/impl.h", "call"));
        assert!(frame_shown("train.py", "forward"));
    }
}
