//! `memlens segments|memory|compare` and the text of `memlens stats`, run as a user runs them:
//! on small JSON snapshots written to a temp dir, and on the real snapshots in
//! ../shared/snapshots (skipped with a notice when absent), where the folded lines and the
//! segsum view are checked against upstream's own Python (`_write_blocks`, `segsum`, embedded
//! below with memlens' documented fixes marked) run on Python's `pickle.load`.

use memlens_fixture::python;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::ok;

fn memlens(args: &[&str], cwd: Option<&Path>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memlens"));
    c.args(args);
    if let Some(d) = cwd {
        c.current_dir(d);
    }
    match c.output() {
        Ok(o) => o,
        Err(e) => panic!("cannot run memlens {args:?}: {e}"),
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A fresh, empty directory for one test.
fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memlens-flame-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    if let Err(e) = std::fs::create_dir_all(&d) {
        panic!("cannot create {}: {e}", d.display());
    }
    d
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    if let Err(e) = std::fs::write(&p, text) {
        panic!("cannot write {}: {e}", p.display());
    }
    p.to_string_lossy().into_owned()
}

/// Σ bytes of folded lines (`stack bytes`).
fn folded_sum(text: &str) -> u64 {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(
            |l| match l.rsplit_once(' ').map(|(_, n)| n.parse::<u64>()) {
                Some(Ok(n)) => n,
                _ => panic!("not a folded line: {l:?}"),
            },
        )
        .sum()
}

/// Folded lines summed per stack, zero stacks dropped.
fn folded_map(text: &str) -> BTreeMap<String, i128> {
    let mut m: BTreeMap<String, i128> = BTreeMap::new();
    for l in text.lines().filter(|l| !l.is_empty()) {
        let Some((k, n)) = l.rsplit_once(' ') else {
            panic!("not a folded line: {l:?}")
        };
        let Ok(n) = n.parse::<i128>() else {
            panic!("not a folded line: {l:?}")
        };
        *m.entry(k.to_string()).or_default() += n;
    }
    m.retain(|_, v| *v != 0);
    m
}

/// (device, reserved_bytes) from `stats --json`.
fn reserved_per_device(file: &str) -> Vec<(u64, u64)> {
    let v: Value = match serde_json::from_str(&ok(&["stats", "--json", file])) {
        Ok(v) => v,
        Err(e) => panic!("stats --json printed invalid JSON for {file}: {e}"),
    };
    let devs = v
        .get("devices")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    devs.iter()
        .map(|d| {
            let get = |k: &str| d.get(k).and_then(Value::as_u64).unwrap_or(u64::MAX);
            (get("device"), get("reserved_bytes"))
        })
        .collect()
}

const MIB: u64 = 1024 * 1024;
const SEG: u64 = 139637976727552;

/// Leaf first, as torch writes frames.
const F1: &str = r#"[{"filename":"/w/model.py","line":42,"name":"forward"},{"filename":"/w/train.py","line":10,"name":"main"}]"#;
const F2: &str = r#"[{"filename":"/w/layers.py","line":5,"name":"linear"},{"filename":"/w/train.py","line":11,"name":"main"}]"#;
const F3: &str = r#"[{"filename":"/w/data.py","line":3,"name":"load"}]"#;
const F4: &str = r#"[{"filename":"/w/opt.py","line":7,"name":"update"},{"filename":"/w/train.py","line":20,"name":"step"}]"#;

/// Device 0: a 20 MiB segment (4 MiB − 100 B and 2 MiB live, 14 MiB inactive with a stale
/// requested_size) and a 2 MiB small segment at `small`; device 1: a 1 MiB segment whose one
/// block covers only half of it. `trace` is device 0's trace.
fn snapshot(small: u64, trace: &str) -> String {
    format!(
        r#"{{"segments":[
          {{"device":0,"address":{SEG},"total_size":{t},"stream":0,"segment_type":"large","blocks":[
            {{"address":{SEG},"size":{b1},"requested_size":{r1},"state":"active_allocated","frames":{F1}}},
            {{"address":{a2},"size":{b2},"requested_size":{b2},"state":"active_allocated","frames":{F2}}},
            {{"address":{a3},"size":{b3},"requested_size":{stale},"state":"inactive","frames":[]}}]}},
          {{"device":0,"address":{small},"total_size":{b2},"stream":0,"segment_type":"small","blocks":[
            {{"address":{small},"size":512,"requested_size":500,"state":"active_pending_free","frames":[]}},
            {{"address":{small2},"size":{rest},"requested_size":0,"state":"inactive","frames":[]}}]}},
          {{"device":1,"address":5000000,"total_size":{m},"stream":140000000000,"blocks":[
            {{"address":5000000,"size":{h},"requested_size":200000,"state":"active_allocated","frames":[]}}]}}],
         "device_traces":[[{trace}],[]]}}"#,
        t = 20 * MIB,
        b1 = 4 * MIB,
        r1 = 4 * MIB - 100,
        a2 = SEG + 4 * MIB,
        b2 = 2 * MIB,
        a3 = SEG + 6 * MIB,
        b3 = 14 * MIB,
        stale = 30 * MIB,
        small2 = small + 512,
        rest = 2 * MIB - 512,
        m = MIB,
        h = MIB / 2,
    )
}

fn before() -> String {
    snapshot(
        1 << 40,
        &format!(
            r#"{{"action":"alloc","addr":{a2},"size":{b2},"stream":0,"frames":{F2}}},
               {{"action":"alloc","addr":77,"size":{m},"stream":0,"frames":{F3}}},
               {{"action":"free_requested","addr":77,"size":{m},"stream":0}},
               {{"action":"free_completed","addr":77,"size":{m},"stream":0}}"#,
            a2 = SEG + 4 * MIB,
            b2 = 2 * MIB,
            m = MIB
        ),
    )
}

/// Another small segment; the 2 MiB block is untraced; a 3 MiB allocation (F4) is live at the peak.
fn after() -> String {
    snapshot(
        1 << 41,
        &format!(
            r#"{{"action":"alloc","addr":77,"size":{m},"stream":0,"frames":{F3}}},
               {{"action":"alloc","addr":99,"size":{m3},"stream":0,"frames":{F4}}},
               {{"action":"free_completed","addr":99,"size":{m3},"stream":0}},
               {{"action":"free_completed","addr":77,"size":{m},"stream":0}}"#,
            m = MIB,
            m3 = 3 * MIB
        ),
    )
}

#[test]
fn segments_folded_lines_on_a_small_snapshot() {
    let dir = temp_dir("seg");
    let f = write(&dir, "before.json", &before());
    let out = ok(&["segments", "--folded", &f]);
    let s = SEG;
    let want = [
        format!(
            "stream_0;seg_{s};active_allocated;train.py:10:main;model.py:42:forward {}",
            4 * MIB - 100
        ),
        format!("stream_0;seg_{s};active_allocated;<gaps> 100"),
        format!(
            "stream_0;seg_{s};active_allocated;train.py:11:main;layers.py:5:linear {}",
            2 * MIB
        ),
        format!("stream_0;seg_{s};inactive;<gaps> {}", 14 * MIB),
        format!(
            "stream_0;seg_{};active_pending_free;<non-python> 500",
            1u64 << 40
        ),
        format!("stream_0;seg_{};active_pending_free;<gaps> 12", 1u64 << 40),
        format!(
            "stream_0;seg_{};inactive;<gaps> {}",
            1u64 << 40,
            2 * MIB - 512
        ),
        "stream_140000000000;seg_5000000;active_allocated;<non-python> 200000".to_string(),
        format!(
            "stream_140000000000;seg_5000000;active_allocated;<gaps> {}",
            MIB / 2 - 200000
        ),
        format!("stream_140000000000;seg_5000000;<gaps> {}", MIB / 2),
    ];
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        want.iter().map(String::as_str).collect::<Vec<_>>()
    );
}

#[test]
fn folded_sums_equal_reserved_bytes_per_device() {
    let dir = temp_dir("sums");
    let f = write(&dir, "before.json", &before());
    let reserved = reserved_per_device(&f);
    assert_eq!(reserved, vec![(0, 22 * MIB), (1, MIB)]);
    for (d, r) in reserved {
        let d = d.to_string();
        assert_eq!(
            folded_sum(&ok(&["segments", "--folded", "--device", &d, &f])),
            r,
            "segments, device {d}"
        );
        assert_eq!(
            folded_sum(&ok(&["memory", "--folded", "-d", &d, &f])),
            r,
            "memory, device {d}"
        );
    }
    let mem = ok(&["memory", "--folded", &f]);
    assert!(mem.lines().all(|l| !l.contains(";seg_")), "{mem}");
    assert!(
        mem.contains("stream_0;active_allocated;train.py:10:main;model.py:42:forward 4194204\n"),
        "{mem}"
    );
}

fn assert_svg(path: &Path, title: &str) {
    let svg = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => panic!("no SVG at {}: {e}", path.display()),
    };
    assert!(
        svg.starts_with("<?xml") || svg.starts_with("<svg"),
        "{}",
        &svg[..svg.len().min(200)]
    );
    assert!(svg.contains("<svg"), "no <svg> element");
    assert!(
        svg.contains(title),
        "title {title:?} not in {}",
        path.display()
    );
    assert!(svg.trim_end().ends_with("</svg>"), "SVG not closed");
    assert!(svg.contains(" bytes, "), "counts are not named bytes");
}

#[test]
fn svg_to_the_default_file_and_to_o() {
    let dir = temp_dir("svg");
    let f = write(&dir, "before.json", &before());
    let o = memlens(&["segments", &f], Some(&dir));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stdout(&o).contains("segments.svg"),
        "does not say where: {}",
        stdout(&o)
    );
    assert_svg(&dir.join("segments.svg"), "segments of before.json");
    let o = memlens(&["memory", &f], Some(&dir));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_svg(&dir.join("memory.svg"), "memory of before.json");
    let out = dir.join("x.svg");
    let out_s = out.to_string_lossy().into_owned();
    ok(&["memory", &f, "-o", &out_s]);
    assert_svg(&out, "memory of before.json");
    // `-o -`: the SVG alone on stdout.
    let svg = ok(&["segments", &f, "-o", "-"]);
    assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
}

#[test]
fn compare_a_file_with_itself_shows_no_difference() {
    let dir = temp_dir("self");
    let f = write(&dir, "before.json", &before());
    let o = memlens(&["compare", &f, &f], Some(&dir));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = stdout(&o);
    assert!(
        out.starts_with("only_before = []\nonly_after = []\n"),
        "{out}"
    );
    assert!(out.contains("no stack differs"), "{out}");
    assert!(!out.contains("disagree"), "{out}");
    assert!(
        !dir.join("compare.svg").exists(),
        "an empty comparison drew a flamegraph"
    );
}

#[test]
fn compare_two_snapshots() {
    let dir = temp_dir("cmp");
    let b = write(&dir, "before.json", &before());
    let a = write(&dir, "after.json", &after());
    let o = memlens(&["compare", &b, &a], Some(&dir));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = stdout(&o);
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some(format!("only_before = [{}]", 1u64 << 40).as_str()),
        "{out}"
    );
    assert_eq!(
        lines.next(),
        Some(format!("only_after = [{}]", 1u64 << 41).as_str()),
        "{out}"
    );
    // Before: the peak is after event 1, with the untraced 4 MiB − 100 and 500 B, the 2 MiB
    // block and the 1 MiB of data.py live.
    let live = 4 * MIB - 100 + 500 + 2 * MIB + MIB;
    assert!(
        out.contains(&format!("before device 0: {} live at event 1\n", fmt(live))),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "after  device 0: {} live at event 1\n",
            fmt(live + 3 * MIB)
        )),
        "{out}"
    );
    // Only the 3 MiB of opt.py differs.
    // The user-frame comparison: opt.py:7:update is new, 3 MiB.
    assert!(
        out.contains("device 0: timeline peak 7.0MiB -> 10.0MiB (+3.0MiB, +42.9%)"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.contains("+3.0MiB") && l.ends_with("new: /w/opt.py:7:update")),
        "{out}"
    );
    // The per-stack diff below it.
    let rows: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("live bytes per stack"))
        .filter(|l| l.contains("MiB  ") || l.contains("B  "))
        .collect();
    let data: Vec<&&str> = rows.iter().filter(|l| !l.contains("stack (root")).collect();
    assert_eq!(data.len(), 1, "{out}");
    assert!(
        data[0].contains("+3.0MiB") && data[0].ends_with("train.py:20:step;opt.py:7:update"),
        "{out}"
    );
    assert_svg(&dir.join("compare.svg"), "before.json");
    // --folded: the same summary, then the lines of the two differing segments.
    let folded = ok(&["compare", "--folded", &b, &a]);
    let fl: Vec<&str> = folded
        .lines()
        .filter(|l| l.starts_with("only_before;") || l.starts_with("only_after;"))
        .collect();
    assert_eq!(folded_sum(&fl.join("\n")), 2 * 2 * MIB, "{folded}");
    assert!(fl.contains(
        &format!(
            "only_after;stream_0;seg_{};active_pending_free;<non-python> 500",
            1u64 << 41
        )
        .as_str()
    ));
}

/// Upstream's `Bytes` for the sizes used here.
fn fmt(n: u64) -> String {
    let mut x = n as f64;
    for unit in ["", "Ki", "Mi", "Gi"] {
        if x < 1024.0 {
            return format!("{x:.1}{unit}B");
        }
        x /= 1024.0;
    }
    format!("{x:.1}TiB")
}

#[test]
fn stats_text_is_a_readable_summary_with_segsum() {
    let dir = temp_dir("stats");
    let f = write(&dir, "before.json", &before());
    let out = ok(&["stats", &f]);
    for want in [
        "device 0\n",
        "  reserved            22.0MiB (23068672 bytes)\n",
        "  allocated           6.0MiB (6291456 bytes)  (active_allocated blocks)\n",
        "  largest free block  14.0MiB (14680064 bytes)\n",
        "  timeline peak       7.0MiB (7340432 bytes)  after event 1 of 4 (alloc 1.0MiB)\n",
        "  trace entries       4: alloc 2, free_completed 1, free_requested 1\n",
        "Summary of segments >= 20.0MiB in size\n[2] 20.0MiB allocated, 14.0MiB (0.0% internal) free\nsegments: 2\ntotal_reserved: 22.0MiB\ntotal_allocated: 6.0MiB\ntotal_free: 16.0MiB (0.0% internal)\n",
        "device 1\n",
        "  trace               no entries",
        "\nLegend:\n    [a     ] - a segment in the allocator\n",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    assert_eq!(out.matches("Legend:").count(), 1, "{out}");
    // --json is unchanged: one JSON object.
    let j: Result<Value, _> = serde_json::from_str(&ok(&["stats", "--json", &f]));
    assert!(j.is_ok_and(|v| v.get("devices").is_some()));
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let dir = temp_dir("bad");
    let bad = write(&dir, "bad.pickle", "this is not a snapshot");
    let good = write(&dir, "good.json", &before());
    let missing = dir.join("missing.pickle").to_string_lossy().into_owned();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["segments", &bad], &bad),
        (vec!["memory", "--folded", &bad], &bad),
        (vec!["segments", &missing], &missing),
        (vec!["compare", &good, &bad], &bad),
        (vec!["compare", &bad, &good], &bad),
        (vec!["stats", &bad], &bad),
    ];
    for (args, file) in cases {
        let o = memlens(&args, Some(&dir));
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("memlens: ") && err.trim_end().ends_with(file),
            "{args:?}: {err}"
        );
    }
    // Nothing to draw is an error for the SVG, an empty answer for --folded.
    let empty = write(&dir, "empty.json", r#"{"segments":[],"device_traces":[]}"#);
    let o = memlens(&["segments", &empty], Some(&dir));
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nothing to draw"));
    assert_eq!(ok(&["segments", "--folded", &empty]), "");
    assert!(!dir.join("segments.svg").exists());
}

// ---- real snapshots

#[test]
fn real_snapshot_svg() {
    let Some(files) = memlens_fixture::shared_snapshots() else {
        return;
    };
    let Some(file) = files
        .iter()
        .find(|f| {
            f.to_string_lossy()
                .contains("Maphsge4__select_n__snapshot.pickle")
        })
        .or(files.first())
    else {
        println!("SKIP: no *.pickle in ../shared/snapshots");
        return;
    };
    let dir = temp_dir("realsvg");
    let out = dir.join("s.svg");
    let f = file.to_string_lossy().into_owned();
    ok(&["segments", &f, "-o", &out.to_string_lossy()]);
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    assert_svg(&out, &format!("segments of {name}"));
}

/// Upstream `_memory_viz.py` (`_frame_fmt`, `_frame_filter`, `_block_extra*`, `_write_blocks`,
/// `segments`, `memory`, `Bytes`, `_report_free`, `segsum`), verbatim except the lines marked
/// FIX, which are memlens' documented fixes (crates/memlens-core/src/flame.rs, stats.rs).
const UPSTREAM_PY: &str = r#"
import io, pickle, sys

def _frame_fmt(f, full_filename=False):
    i = f['line']
    fname = f['filename']
    if not full_filename:
        fname = fname.split('/')[-1]
    func = f['name']
    return f'{fname}:{i}:{func}'

def _frame_filter(name, filename):
    omit_functions = ["unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
                      "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_"]
    omit_filenames = ["core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
                      "Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c",
                      "cpython/abstract.h"]
    for of in omit_functions:
        if of in name:
            return False
    for of in omit_filenames:
        if of in filename:
            return False
    return True

def _frames_fmt(frames, full_filename=False, reverse=False):
    if reverse:
        frames = reversed(frames)
    return [_frame_fmt(f, full_filename) for f in frames if _frame_filter(f['name'], f['filename'])]

def _block_extra_legacy(b):
    if 'history' in b:
        frames = b['history'][0].get('frames', [])
        real_size = b['history'][0]['real_size']
    else:
        real_size = b.get('requested_size', b['size'])
        frames = []
    return frames, real_size

def _block_extra(b):
    if 'frames' not in b:
        return _block_extra_legacy(b)
    return b['frames'], b['requested_size']

def _write_blocks(f, prefix, blocks):
    def frames_fragment(frames):
        if not frames:
            return "<non-python>"
        return ';'.join(_frames_fmt(frames, reverse=True))
    for b in blocks:
        # FIX: one history entry (the first), inactive blocks all <gaps>, requested capped.
        frames, accounted_for_size = _block_extra(b)
        accounted_for_size = 0 if b['state'] == 'inactive' else min(accounted_for_size, b['size'])
        if accounted_for_size:  # FIX: no 0-byte lines
            f.write(f'{prefix};{b["state"]};{frames_fragment(frames)} {accounted_for_size}\n')
        gaps = b['size'] - accounted_for_size
        if gaps:
            f.write(f'{prefix};{b["state"]};<gaps> {gaps}\n')

def _untiled(f, prefix, seg):  # FIX: bytes no block covers
    rest = seg['total_size'] - sum(b['size'] for b in seg['blocks'])
    if rest > 0:
        f.write(f'{prefix};<gaps> {rest}\n')

def segments(snapshot):
    f = io.StringIO()
    for seg in snapshot['segments']:
        prefix = f'stream_{seg["stream"]};seg_{seg["address"]}'
        _write_blocks(f, prefix, seg['blocks'])
        _untiled(f, prefix, seg)
    return f.getvalue()

def memory(snapshot):
    f = io.StringIO()
    for seg in snapshot['segments']:
        prefix = f'stream_{seg["stream"]}'
        _write_blocks(f, prefix, seg['blocks'])
        _untiled(f, prefix, seg)
    return f.getvalue()

def _format_size(num):
    for unit in ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"]:
        if abs(num) < 1024.0:
            return f"{num:3.1f}{unit}B"
        num /= 1024.0
    return f"{num:.1f}YiB"

class Bytes:
    def __init__(self, value):
        self.value = value
    def __repr__(self):
        return _format_size(self.value)

def calc_active(seg):
    return sum(b['size'] for b in seg['blocks'] if b['state'] == 'active_allocated')

def _report_free(free_external, free_internal):
    total = free_external + free_internal
    suffix = ''
    if total != 0:
        pct = (free_internal / total) * 100
        suffix = f' ({pct:.1f}% internal)'
    return f'{Bytes(total)}{suffix}'

PAGE_SIZE = 1024 * 1024 * 20

def segsum(data):
    out = io.StringIO()
    out.write(f"Summary of segments >= {Bytes(PAGE_SIZE)} in size\n")
    total_reserved = 0
    total_allocated = 0
    free_external = 0
    free_internal = 0
    for seg in sorted(data['segments'], key=lambda x: (x['total_size'], calc_active(x))):
        total_reserved += seg['total_size']
        seg_free_external = 0
        seg_free_internal = 0
        seg_allocated = 0
        all_ranges = []
        boffset = 0
        for b in seg['blocks']:
            active = b['state'] == 'active_allocated'
            if active:
                _, allocated_size = _block_extra(b)
                allocated_size = min(allocated_size, b['size'])  # FIX: capped
                all_ranges.append((boffset, allocated_size, True))
                seg_allocated += allocated_size
                seg_free_internal += b['size'] - allocated_size
            else:
                seg_free_external += b['size']
            boffset += b['size']
        seg_free_external += max(0, seg['total_size'] - boffset)  # FIX: untiled bytes are free
        total_allocated += seg_allocated
        free_external += seg_free_external
        free_internal += seg_free_internal
        nseg = (seg['total_size'] - 1) // PAGE_SIZE + 1
        occupied = [' ' for _ in range(nseg)]
        frac = [0.0 for _ in range(nseg)]
        active_size = 0
        for i, (start_, size, active) in enumerate(all_ranges):
            active_size += size
            finish_ = (start_ + size)
            start = start_ // PAGE_SIZE
            finish = (finish_ - 1) // PAGE_SIZE + 1
            m = chr(ord('a' if active else 'A') + (i % 26))
            for j in range(start, finish):
                s = max(start_, j * PAGE_SIZE)
                e = min(finish_, (j + 1) * PAGE_SIZE)
                frac[j] += (e - s) / PAGE_SIZE
                if occupied[j] != ' ':
                    occupied[j] = '0123456789*'[int(frac[j] * 10)]
                else:
                    occupied[j] = m
        stream = '' if seg['stream'] == 0 else f', stream_{seg["stream"]}'
        body = ''.join(occupied)
        assert seg_free_external + seg_free_internal + seg_allocated == seg['total_size']
        stream = f' stream_{seg["stream"]}' if seg['stream'] != 0 else ''
        if seg['total_size'] >= PAGE_SIZE:
            out.write(f'[{body}] {Bytes(seg["total_size"])} allocated, '
                      f'{_report_free(seg_free_external, seg_free_internal)} free{stream}\n')
    out.write(f'segments: {len(data["segments"])}\n')
    out.write(f'total_reserved: {Bytes(total_reserved)}\n')
    out.write(f'total_allocated: {Bytes(total_allocated)}\n')
    out.write(f'total_free: {_report_free(free_external, free_internal)}\n')
    assert free_internal + free_external + total_allocated == total_reserved
    return out.getvalue()

kind, path, device = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(path, 'rb') as fh:
    data = pickle.load(fh)
if isinstance(data, list):
    data = {"segments": data, "traces": []}
data = dict(data)
data['segments'] = [s for s in data['segments'] if s.get('device', 0) == device]
sys.stdout.write({'segments': segments, 'memory': memory, 'segsum': segsum}[kind](data))
"#;

/// The segsum block of one device in `memlens stats` text.
fn segsum_of(stats: &str, device: u64) -> String {
    let mut out = String::new();
    let mut dev = None;
    let mut on = false;
    for l in stats.lines() {
        if let Some(d) = l.strip_prefix("device ") {
            dev = d.trim().parse::<u64>().ok();
        }
        if l.starts_with("Summary of segments") {
            on = dev == Some(device);
        }
        if on {
            out.push_str(l);
            out.push('\n');
            if l.starts_with("total_free:") {
                on = false;
            }
        }
    }
    out
}

/// On every real snapshot: per device, the folded lines of `segments` and `memory` add up to the
/// reserved bytes and equal upstream's (with the fixes), the segsum view equals upstream's;
/// `compare` of the file with itself finds nothing. Without python3 the upstream part is skipped.
#[test]
fn real_snapshots() {
    let Some(files) = memlens_fixture::shared_snapshots() else {
        return;
    };
    assert!(!files.is_empty(), "no *.pickle in ../shared/snapshots");
    let py = python();
    if py.is_none() {
        println!("SKIP (part): python3 not found; upstream's Python is not run as the reference");
    }
    let dir = temp_dir("upstream");
    let script = write(&dir, "upstream_memory_viz.py", UPSTREAM_PY);
    let reference = |kind: &str, file: &str, device: u64| -> Option<String> {
        let o = Command::new(py?)
            .args([&script, kind, file, &device.to_string()])
            .output();
        match o {
            Ok(o) if o.status.success() => Some(stdout(&o)),
            Ok(o) => panic!(
                "upstream {kind} failed on {file}: {}",
                String::from_utf8_lossy(&o.stderr)
            ),
            Err(e) => panic!("cannot run python: {e}"),
        }
    };
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in &files {
        let f = file.to_string_lossy().into_owned();
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stats = ok(&["stats", &f]);
        for (d, reserved) in reserved_per_device(&f) {
            let ds = d.to_string();
            for kind in ["segments", "memory"] {
                let text = ok(&[kind, "--folded", "--device", &ds, &f]);
                let sum = folded_sum(&text);
                if sum != reserved {
                    problems.push(format!(
                        "{name}: {kind} device {d}: folded {sum} != reserved {reserved}"
                    ));
                }
                let Some(theirs) = reference(kind, &f, d) else {
                    continue;
                };
                let (ours, theirs) = (folded_map(&text), folded_map(&theirs));
                if ours != theirs {
                    let only_ours: Vec<_> = ours
                        .iter()
                        .filter(|(k, v)| theirs.get(*k) != Some(v))
                        .take(3)
                        .collect();
                    let only_theirs: Vec<_> = theirs
                        .iter()
                        .filter(|(k, v)| ours.get(*k) != Some(v))
                        .take(3)
                        .collect();
                    problems.push(format!(
                        "{name}: {kind} device {d}: memlens {only_ours:?} upstream {only_theirs:?}"
                    ));
                }
            }
            let ours = segsum_of(&stats, d);
            if let Some(theirs) = reference("segsum", &f, d) {
                if ours != theirs {
                    problems.push(format!(
                        "{name}: segsum device {d}:\nmemlens:\n{ours}upstream:\n{theirs}"
                    ));
                }
            }
            checked += 1;
        }
        let cmp = ok(&["compare", "--folded", &f, &f]);
        if !cmp.starts_with("only_before = []\nonly_after = []\n")
            || !cmp.contains("no stack differs")
        {
            problems.push(format!("{name}: compare with itself:\n{cmp}"));
        }
    }
    println!(
        "checked {checked} devices of {} real snapshots",
        files.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
