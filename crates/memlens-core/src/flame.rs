//! Folded stacks (`a;b;c 123`, one line per stack and byte count) of what the allocator holds,
//! the input of a flamegraph. `python -m torch.cuda._memory_viz segments|memory|compare` writes
//! these lines and pipes them to a downloaded `flamegraph.pl`; memlens builds the same lines here
//! so the CLI can draw them offline, plus a per-stack diff of live bytes at the timeline peak,
//! which `compare` adds to upstream's segment diff.
//!
//! Line format (upstream `_write_blocks`):
//! `stream_<s>;seg_<addr>;<state>;<root…leaf frames as basename:line:name> <bytes>` for
//! `segments`, the same without `seg_<addr>` for `memory`. A block's requested bytes go to its
//! stack (`<non-python>` when no frame is left after upstream's `_frame_filter`); the rest of the
//! block (rounding waste, free bytes) goes to `<gaps>`.
//!
//! Differences from upstream, each a fix:
//! - an `inactive` block is all `<gaps>`: torch leaves a stale `requested_size` on freed and
//!   merged blocks (up to several times the block's size in real snapshots), which upstream
//!   draws as live bytes of an empty stack next to a negative `<gaps>`;
//! - a requested size above an active block's size is capped to it; lines of 0 bytes are left out;
//! - bytes of a segment that its blocks do not cover become `stream_<s>;seg_<addr>;<gaps>`
//!   (upstream leaves them out), so a segment's lines always add up to its `total_size`;
//! - `;` and line breaks inside frame text are replaced, so a frame stays one level; file names
//!   are cut at `\` as well as `/`.
//!
//! torch ≤ 2.0 blocks are drawn from their first `history` entry only (the model keeps
//! `history[0]`; active blocks have one), and an entry without frames is `<non-python>` rather
//! than upstream's `<no-context>`.

use crate::model::stats::device_stats;
use crate::model::{BlockState, Segment, Snapshot};
use crate::replay::replay_device;
use crate::trace::{Frame, FrameId, StackId};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;
use std::fmt;

/// Stack level for bytes of a block (or segment) that no live request accounts for.
pub const GAPS: &str = "<gaps>";
/// Stack level for a block whose stack is empty once filtered (no frames recorded).
pub const NON_PYTHON: &str = "<non-python>";

/// Function-name substrings upstream's `_frame_filter` hides.
const OMIT_FUNCTIONS: [&str; 8] = [
    "unwind::unwind",
    "CapturedTraceback::gather",
    "gather_with_cpp",
    "_start",
    "__libc_start_main",
    "PyEval_",
    "PyObject_",
    "PyFunction_",
];

/// File-name substrings upstream's `_frame_filter` hides.
const OMIT_FILENAMES: [&str; 10] = [
    "core/boxing",
    "/Register",
    "/Redispatch",
    "pythonrun.c",
    "Modules/main.c",
    "Objects/call.c",
    "Objects/methodobject.c",
    "pycore_ceval.h",
    "ceval.c",
    "cpython/abstract.h",
];

/// Upstream `_frame_filter`: false for interpreter and dispatcher noise.
pub fn frame_is_shown(name: &str, filename: &str) -> bool {
    !OMIT_FUNCTIONS.iter().any(|o| name.contains(o))
        && !OMIT_FILENAMES.iter().any(|o| filename.contains(o))
}

/// Whether a filename is the user's Python (ends in `.py`, no `torch` path component).
pub fn is_user_file(filename: &str) -> bool {
    filename.ends_with(".py") && !filename.split(['/', '\\']).any(|c| c == "torch")
}

/// The user frame of a stack (the rule `crate::analysis::frames` describes: the first
/// frame of the user's Python, else the first frame the filter shows, else the first); `None` for an empty stack.
pub fn user_frame(s: &Snapshot, stack: StackId) -> Option<FrameId> {
    let frames = s.stacks.get(stack);
    frames
        .iter()
        .copied()
        .find(|&f| {
            s.frame(f)
                .is_some_and(|fr| is_user_file(s.str(fr.filename)))
        })
        .or_else(|| {
            frames.iter().copied().find(|&f| {
                s.frame(f)
                    .is_some_and(|fr| frame_is_shown(s.str(fr.name), s.str(fr.filename)))
            })
        })
        .or_else(|| frames.first().copied())
}

/// Upstream `_frame_fmt`: `basename:line:name`, made safe for one folded level.
pub fn format_frame(s: &Snapshot, f: &Frame) -> String {
    let filename = s.str(f.filename);
    let base = filename.rsplit(['/', '\\']).next().unwrap_or(filename);
    let text = format!("{base}:{}:{}", f.line, s.str(f.name));
    text.replace(';', ",").replace(['\n', '\r'], " ")
}

/// Formats stacks root first, filtered, joined by `;` (`<non-python>` when nothing is left),
/// once per stack.
pub struct StackFormatter<'a> {
    snap: &'a Snapshot,
    cache: FxHashMap<StackId, String>,
}

impl<'a> StackFormatter<'a> {
    pub fn new(snap: &'a Snapshot) -> Self {
        StackFormatter {
            snap,
            cache: FxHashMap::default(),
        }
    }

    pub fn folded(&mut self, id: StackId) -> &str {
        let snap = self.snap;
        self.cache.entry(id).or_insert_with(|| {
            let parts: Vec<String> = snap
                .stacks
                .get(id)
                .iter()
                .rev()
                .filter_map(|&fid| snap.frame(fid))
                .filter(|f| frame_is_shown(snap.str(f.name), snap.str(f.filename)))
                .map(|f| format_frame(snap, f))
                .collect();
            if parts.is_empty() {
                NON_PYTHON.to_string()
            } else {
                parts.join(";")
            }
        })
    }
}

/// One folded line: `stack size_bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldedLine {
    /// Levels root first, joined by `;`.
    pub stack: String,
    pub size_bytes: u64,
}

impl fmt::Display for FoldedLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.stack, self.size_bytes)
    }
}

/// Upstream `_write_blocks` for one segment, under `prefix` (see the module docs).
fn segment_lines(
    fmt: &mut StackFormatter<'_>,
    seg: &Segment,
    prefix: &str,
    out: &mut Vec<FoldedLine>,
) {
    let snap = fmt.snap;
    let mut covered: u64 = 0;
    for b in snap.segment_blocks(seg) {
        covered = covered.saturating_add(b.size_bytes);
        let state = b.state.name();
        let accounted = match b.state {
            BlockState::Inactive => 0,
            _ => b.requested_size_bytes.min(b.size_bytes),
        };
        if accounted > 0 {
            let frames = fmt.folded(b.stack);
            out.push(FoldedLine {
                stack: format!("{prefix};{state};{frames}"),
                size_bytes: accounted,
            });
        }
        let gaps = b.size_bytes - accounted;
        if gaps > 0 {
            out.push(FoldedLine {
                stack: format!("{prefix};{state};{GAPS}"),
                size_bytes: gaps,
            });
        }
    }
    if covered < seg.total_size_bytes {
        out.push(FoldedLine {
            stack: format!("{prefix};{GAPS}"),
            size_bytes: seg.total_size_bytes - covered,
        });
    }
}

fn on_device(seg: &Segment, device: Option<u32>) -> bool {
    device.is_none_or(|d| seg.device == d)
}

/// `_memory_viz segments`: `stream_<s>;seg_<addr>;<state>;frames… bytes`, segments in file
/// order; `device` keeps one device's segments (upstream draws all).
pub fn segments_folded(s: &Snapshot, device: Option<u32>) -> Vec<FoldedLine> {
    let mut fmt = StackFormatter::new(s);
    let mut out = Vec::new();
    for seg in s.segments.iter().filter(|g| on_device(g, device)) {
        let prefix = format!("stream_{};seg_{}", seg.stream, seg.address);
        segment_lines(&mut fmt, seg, &prefix, &mut out);
    }
    out
}

/// `_memory_viz memory`: `stream_<s>;<state>;frames… bytes`.
pub fn memory_folded(s: &Snapshot, device: Option<u32>) -> Vec<FoldedLine> {
    let mut fmt = StackFormatter::new(s);
    let mut out = Vec::new();
    for seg in s.segments.iter().filter(|g| on_device(g, device)) {
        let prefix = format!("stream_{}", seg.stream);
        segment_lines(&mut fmt, seg, &prefix, &mut out);
    }
    out
}

/// Segments present in one snapshot only, keyed by `(address, total_size)` as upstream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SegmentDiff {
    /// Addresses, ascending.
    pub only_before: Vec<u64>,
    pub only_after: Vec<u64>,
    /// `only_before;stream_<s>;seg_<addr>;…` then `only_after;…` lines of those segments.
    pub lines: Vec<FoldedLine>,
}

/// Upstream `compare` as intended (it crashes in torch 2.15): which segments differ, and what
/// they hold.
pub fn compare_segments(before: &Snapshot, after: &Snapshot, device: Option<u32>) -> SegmentDiff {
    let keys = |s: &Snapshot| -> FxHashSet<(u64, u64)> {
        s.segments
            .iter()
            .filter(|g| on_device(g, device))
            .map(|g| (g.address, g.total_size_bytes))
            .collect()
    };
    let (kb, ka) = (keys(before), keys(after));
    let mut diff = SegmentDiff::default();
    for (snap, other, side, addrs) in [
        (before, &ka, "only_before", &mut diff.only_before),
        (after, &kb, "only_after", &mut diff.only_after),
    ] {
        let mut fmt = StackFormatter::new(snap);
        for seg in snap.segments.iter().filter(|g| on_device(g, device)) {
            if other.contains(&(seg.address, seg.total_size_bytes)) {
                continue;
            }
            addrs.push(seg.address);
            let prefix = format!("{side};stream_{};seg_{}", seg.stream, seg.address);
            segment_lines(&mut fmt, seg, &prefix, &mut diff.lines);
        }
        addrs.sort_unstable();
        addrs.dedup();
    }
    diff
}

/// Live requested bytes per stack at one device's timeline peak.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeakLive {
    pub device: u32,
    /// [`crate::DeviceStats::timeline_peak_event`] (`None`: before the first event).
    pub peak_event: Option<u32>,
    /// [`crate::DeviceStats::timeline_peak_bytes`].
    pub peak_bytes: i64,
    /// Σ of `by_stack`: equals `peak_bytes` unless the trace disagrees with the segments.
    pub live_bytes: u64,
    /// Folded stack (root first, filtered) → live requested bytes.
    pub by_stack: BTreeMap<String, u64>,
}

/// What is live at the timeline peak of `device`, grouped by filtered stack.
pub fn live_by_stack_at_peak(s: &Snapshot, device: u32) -> PeakLive {
    let st = device_stats(s, device);
    let replay = replay_device(s, device);
    let mut fmt = StackFormatter::new(s);
    let mut by_stack: BTreeMap<String, u64> = BTreeMap::new();
    let mut live_bytes = 0u64;
    for a in replay.live_at(st.timeline_peak_event) {
        live_bytes = live_bytes.saturating_add(a.size_bytes);
        let e = by_stack.entry(fmt.folded(a.stack).to_string()).or_default();
        *e = e.saturating_add(a.size_bytes);
    }
    PeakLive {
        device,
        peak_event: st.timeline_peak_event,
        peak_bytes: st.timeline_peak_bytes,
        live_bytes,
        by_stack,
    }
}

/// Bytes of one stack in two snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackDelta {
    pub stack: String,
    pub before_bytes: u64,
    pub after_bytes: u64,
}

impl StackDelta {
    pub fn delta_bytes(&self) -> i128 {
        i128::from(self.after_bytes) - i128::from(self.before_bytes)
    }
}

/// Stacks whose bytes differ, largest |delta| first (ties by stack text).
pub fn stack_diff(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> Vec<StackDelta> {
    let mut out: Vec<StackDelta> = Vec::new();
    for (stack, &b) in before {
        let a = after.get(stack).copied().unwrap_or(0);
        if a != b {
            out.push(StackDelta {
                stack: stack.clone(),
                before_bytes: b,
                after_bytes: a,
            });
        }
    }
    for (stack, &a) in after {
        if a != 0 && !before.contains_key(stack) {
            out.push(StackDelta {
                stack: stack.clone(),
                before_bytes: 0,
                after_bytes: a,
            });
        }
    }
    out.sort_by(|x, y| {
        y.delta_bytes()
            .abs()
            .cmp(&x.delta_bytes().abs())
            .then_with(|| x.stack.cmp(&y.stack))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(text: &str) -> Snapshot {
        match crate::load(text.as_bytes()) {
            Ok(s) => s,
            Err(e) => panic!("test snapshot does not load: {e}"),
        }
    }

    fn lines(v: &[FoldedLine]) -> Vec<String> {
        v.iter().map(|l| l.to_string()).collect()
    }

    /// Leaf first, as torch writes frames; one interpreter frame the filter hides.
    const FRAMES: &str = r#"[{"filename":"/src/model.py","line":42,"name":"forward"},
        {"filename":"/usr/include/python3.10/cpython/abstract.h","line":1,"name":"_PyObject_Vectorcall"},
        {"filename":"/src/train.py","line":7,"name":"main"}]"#;

    fn two_segments() -> Snapshot {
        snap(&format!(
            r#"{{"segments":[
              {{"device":0,"address":1000,"total_size":300,"stream":0,"blocks":[
                {{"address":1000,"size":100,"requested_size":90,"state":"active_allocated","frames":{FRAMES}}},
                {{"address":1100,"size":100,"requested_size":100,"state":"active_pending_free","frames":[]}},
                {{"address":1200,"size":100,"requested_size":250,"state":"inactive","frames":{FRAMES}}}]}},
              {{"device":1,"address":5000,"total_size":64,"stream":140000000000,"blocks":[
                {{"address":5000,"size":32,"requested_size":40,"state":"active_allocated","frames":{FRAMES}}}]}}],
             "device_traces":[[],[]]}}"#
        ))
    }

    #[test]
    fn filter_hides_upstreams_noise() {
        assert!(frame_is_shown("forward", "/src/model.py"));
        assert!(!frame_is_shown("_PyEval_EvalFrameDefault", "x.c"));
        assert!(!frame_is_shown("__libc_start_main", "libc.so"));
        assert!(!frame_is_shown(
            "f",
            "/pytorch/aten/src/ATen/core/boxing/impl.h"
        ));
        assert!(!frame_is_shown(
            "f",
            "torch/csrc/autograd/generated/RegisterCUDA.cpp"
        ));
        assert!(!frame_is_shown("f", "Python/ceval.c"));
    }

    #[test]
    fn frames_are_basename_line_name() {
        let s = two_segments();
        let texts: Vec<String> = s.frames.iter().map(|f| format_frame(&s, f)).collect();
        assert!(
            texts.contains(&"model.py:42:forward".to_string()),
            "{texts:?}"
        );
        assert!(texts.contains(&"train.py:7:main".to_string()), "{texts:?}");
    }

    #[test]
    fn segments_lines_match_upstream_layout() {
        let s = two_segments();
        assert_eq!(
            lines(&segments_folded(&s, None)),
            vec![
                "stream_0;seg_1000;active_allocated;train.py:7:main;model.py:42:forward 90",
                "stream_0;seg_1000;active_allocated;<gaps> 10",
                "stream_0;seg_1000;active_pending_free;<non-python> 100",
                "stream_0;seg_1000;inactive;<gaps> 100",
                // requested 40 > size 32: capped, no negative gaps; 32 of 64 bytes uncovered.
                "stream_140000000000;seg_5000;active_allocated;train.py:7:main;model.py:42:forward 32",
                "stream_140000000000;seg_5000;<gaps> 32",
            ]
        );
    }

    #[test]
    fn memory_lines_drop_the_segment_level_and_filter_by_device() {
        let s = two_segments();
        assert_eq!(
            lines(&memory_folded(&s, Some(0))),
            vec![
                "stream_0;active_allocated;train.py:7:main;model.py:42:forward 90",
                "stream_0;active_allocated;<gaps> 10",
                "stream_0;active_pending_free;<non-python> 100",
                "stream_0;inactive;<gaps> 100",
            ]
        );
        assert!(memory_folded(&s, Some(3)).is_empty());
    }

    #[test]
    fn lines_add_up_to_reserved_bytes_per_device() {
        let s = two_segments();
        for d in s.devices() {
            let sum: u64 = segments_folded(&s, Some(d))
                .iter()
                .map(|l| l.size_bytes)
                .sum();
            assert_eq!(sum, crate::device_stats(&s, d).reserved_bytes, "device {d}");
            let sum: u64 = memory_folded(&s, Some(d))
                .iter()
                .map(|l| l.size_bytes)
                .sum();
            assert_eq!(sum, crate::device_stats(&s, d).reserved_bytes, "device {d}");
        }
    }

    #[test]
    fn compare_keys_segments_by_address_and_size() {
        let before = two_segments();
        let after = snap(
            r#"{"segments":[
              {"device":0,"address":1000,"total_size":300,"stream":0,"blocks":[
                {"address":1000,"size":300,"requested_size":0,"state":"inactive"}]},
              {"device":1,"address":5000,"total_size":128,"stream":0,"blocks":[
                {"address":5000,"size":128,"requested_size":128,"state":"active_allocated"}]},
              {"device":0,"address":9000,"total_size":8,"stream":0,"blocks":[
                {"address":9000,"size":8,"requested_size":0,"state":"inactive"}]}]}"#,
        );
        let d = compare_segments(&before, &after, None);
        assert_eq!(d.only_before, vec![5000]);
        assert_eq!(d.only_after, vec![5000, 9000]);
        assert_eq!(
            lines(&d.lines),
            vec![
                "only_before;stream_140000000000;seg_5000;active_allocated;train.py:7:main;model.py:42:forward 32",
                "only_before;stream_140000000000;seg_5000;<gaps> 32",
                "only_after;stream_0;seg_5000;active_allocated;<non-python> 128",
                "only_after;stream_0;seg_9000;inactive;<gaps> 8",
            ]
        );
        let same = compare_segments(&before, &before, None);
        assert_eq!(same, SegmentDiff::default());
    }

    /// Trace: a (model.py) 100 B alloc+free, then b (train.py) 50 B alive at the end; the peak
    /// (100 B + the 30 B untraced block) is at event 0.
    fn traced() -> Snapshot {
        snap(
            r#"{"segments":[{"device":0,"address":0,"total_size":512,"stream":0,"blocks":[
                  {"address":0,"size":64,"requested_size":30,"state":"active_allocated","frames":[]},
                  {"address":64,"size":64,"requested_size":50,"state":"active_allocated",
                   "frames":[{"filename":"t/train.py","line":3,"name":"step"}]},
                  {"address":128,"size":384,"requested_size":0,"state":"inactive"}]}],
                "device_traces":[[
                  {"action":"alloc","addr":128,"size":100,"stream":0,
                   "frames":[{"filename":"m/model.py","line":9,"name":"fwd"}]},
                  {"action":"free_completed","addr":128,"size":100,"stream":0},
                  {"action":"alloc","addr":64,"size":50,"stream":0,
                   "frames":[{"filename":"t/train.py","line":3,"name":"step"}]}]]}"#,
        )
    }

    #[test]
    fn live_at_peak_groups_by_stack() {
        let s = traced();
        let p = live_by_stack_at_peak(&s, 0);
        assert_eq!(
            (p.peak_event, p.peak_bytes, p.live_bytes),
            (Some(0), 130, 130)
        );
        let want: BTreeMap<String, u64> = [
            ("model.py:9:fwd".to_string(), 100),
            ("<non-python>".to_string(), 30),
        ]
        .into_iter()
        .collect();
        assert_eq!(p.by_stack, want);
    }

    #[test]
    fn stack_diff_orders_by_absolute_delta_and_omits_equal_stacks() {
        let before: BTreeMap<String, u64> = [
            ("a".to_string(), 100),
            ("b".to_string(), 10),
            ("same".to_string(), 7),
        ]
        .into_iter()
        .collect();
        let after: BTreeMap<String, u64> = [
            ("b".to_string(), 60),
            ("c".to_string(), 70),
            ("same".to_string(), 7),
        ]
        .into_iter()
        .collect();
        let d = stack_diff(&before, &after);
        let got: Vec<(&str, i128)> = d
            .iter()
            .map(|x| (x.stack.as_str(), x.delta_bytes()))
            .collect();
        assert_eq!(got, vec![("a", -100), ("c", 70), ("b", 50)]);
        assert!(stack_diff(&after, &after).is_empty());
    }
}
