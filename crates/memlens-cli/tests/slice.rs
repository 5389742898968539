//! Part of a trace through the CLI: `memlens slice SNAPSHOT --last N -o PART.pickle` writes a
//! pickle that Python's own `pickle` reads with the same stats (tests/python/stats_ref.py) and
//! that torch's `_memory_viz` (../shared/reference/torch-2.15.0, run without torch) reads for
//! `stats`, `trace`, `segments` and `memory`, with the number of entries asked for; and the
//! verbs given `--last N`/`--range` on the whole file answer as on the written part.

use memlens_fixture::python;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{devices, ok, repo_root, run};

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// torch's `_memory_viz` functions over a pickle (flamegraphs as their folded lines, since
/// `flamegraph.pl` cannot be downloaded here); prints the `trace` text.
const TORCH_READS: &str = r#"
import pickle, sys
sys.path.insert(0, sys.argv[1])
import _memory_viz as mv
with open(sys.argv[2], "rb") as f:
    data = pickle.load(f)
mv.segsum(data)
mv.segments(data, format_flamegraph=lambda lines: lines)
mv.memory(data, format_flamegraph=lambda lines: lines)
print(mv.trace(data))
"#;

/// The stats keys tests/python/stats_ref.py defines.
const KEYS: &[&str] = &[
    "segments",
    "blocks",
    "trace_entries",
    "reserved_bytes",
    "allocated_bytes",
    "active_bytes",
    "requested_bytes",
    "inactive_split_bytes",
    "largest_free_block_bytes",
    "timeline_baseline_bytes",
    "timeline_peak_bytes",
    "peak_reserved_bytes",
];

/// Slices `file` to its last `n` events and checks the part every way (see the module docs).
fn check_part(file: &Path, n: u32, dir: &Path, reference: Option<&Path>) {
    let f = file.to_string_lossy().into_owned();
    let name = file
        .file_name()
        .map(|x| x.to_string_lossy().into_owned())
        .unwrap_or_default();
    let part = dir.join(format!("{name}.last{n}.pickle"));
    let p = part.to_string_lossy().into_owned();
    let last = n.to_string();
    let said = ok(&["slice", &f, "--last", &last, "-o", &p]);
    assert!(said.starts_with(&format!("wrote {p} (")), "{said}");
    // the verbs given --last on the whole file answer as on the part
    let ours = json(&ok(&["stats", "--json", &p]));
    assert_eq!(
        json(&ok(&["stats", "--json", "--last", &last, &f])),
        ours,
        "{name}: stats --last"
    );
    assert_eq!(
        ok(&["trace", &p]),
        ok(&["trace", &f, "--last", &last]),
        "{name}: trace --last"
    );
    assert_eq!(
        ok(&["memory", &p, "--folded"]),
        ok(&["memory", &f, "--folded", "--last", &last]),
        "{name}: memory --last"
    );
    let whole = json(&ok(&["stats", "--json", &f]));
    for (d, w) in devices(&ours).iter().zip(devices(&whole)) {
        let (got, all) = (
            &d["trace_entries"],
            w["trace_entries"].as_u64().unwrap_or(0),
        );
        assert_eq!(
            got.as_u64(),
            Some(all.min(u64::from(n))),
            "{name}: entries of {d}"
        );
        // the final state is the file's
        for k in [
            "reserved_bytes",
            "allocated_bytes",
            "requested_bytes",
            "segments",
        ] {
            assert_eq!(d[k], w[k], "{name}: {k}");
        }
    }
    let Some(py) = python() else { return };
    let out = Command::new(py)
        .arg(repo_root().join("tests/python/stats_ref.py"))
        .arg(&part)
        .output()
        .unwrap_or_else(|e| panic!("python: {e}"));
    assert!(
        out.status.success(),
        "{name}: stats_ref.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs = json(&String::from_utf8_lossy(&out.stdout));
    for (o, t) in devices(&ours).iter().zip(devices(&theirs)) {
        for k in KEYS {
            assert_eq!(
                o[k], t[k],
                "{name} last {n}: {k} (memlens vs python's pickle)"
            );
        }
    }
    let Some(reference) = reference else { return };
    let out = Command::new(py)
        .args(["-c", TORCH_READS])
        .arg(reference)
        .arg(&part)
        .output()
        .unwrap_or_else(|e| panic!("python: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{name}: torch's _memory_viz: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let counts: Vec<u64> = text
        .lines()
        .filter_map(|l| l.strip_suffix(" entries")?.parse().ok())
        .collect();
    let want: Vec<u64> = devices(&ours)
        .iter()
        .filter_map(|d| d["trace_entries"].as_u64())
        .filter(|&e| e > 0)
        .collect();
    assert_eq!(counts, want, "{name}: entries per device in torch's trace");
}

/// torch's `_memory_viz.py` beside the repository, or `None` after a notice (a failure under
/// `MEMLENS_NO_SKIP=1`).
fn torch_reference() -> Option<PathBuf> {
    let dir = repo_root().join("../shared/reference/torch-2.15.0");
    if dir.join("_memory_viz.py").is_file() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("MEMLENS_NO_SKIP").is_none_or(|v| v != "1"),
        "torch's _memory_viz.py is missing (MEMLENS_NO_SKIP=1): {}",
        dir.display()
    );
    println!(
        "SKIP: {} not found; torch's reading of the parts skipped",
        dir.display()
    );
    None
}

#[test]
fn a_slice_is_read_by_python_and_torch_with_consistent_stats() {
    let dir = std::env::temp_dir().join(format!("memlens-slice-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let reference = torch_reference();
    let synth = dir.join("synth.pickle");
    let s = synth.to_string_lossy().into_owned();
    ok(&[
        "synth",
        "--workload",
        "training",
        "--events",
        "20000",
        "--seed",
        "3",
        "-o",
        &s,
        "-q",
    ]);
    check_part(&synth, 5000, &dir, reference.as_deref());
    check_part(&synth, 1, &dir, reference.as_deref());
    if let Some(files) = memlens_fixture::shared_snapshots() {
        for want in [
            "Wedsonlin__assignment2-systems__results_medium_1024_training_memory_snapshot.pickle",
            "kkaitlyn111__cs336-a2-systems__memory_small_forward.pickle",
            "drisspg__transformer_nuggets__test_data_mini_snapshot.pickle",
        ] {
            let f = files.iter().find(|f| f.ends_with(want));
            let f = f.unwrap_or_else(|| panic!("{want} is not among the shared snapshots"));
            check_part(f, 300, &dir, reference.as_deref());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ranges_on_the_verbs_and_their_errors() {
    let dir = std::env::temp_dir().join(format!("memlens-range-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let f = dir.join("synth.pickle").to_string_lossy().into_owned();
    ok(&[
        "synth",
        "--workload",
        "training",
        "--events",
        "3000",
        "--seed",
        "5",
        "-o",
        &f,
        "-q",
    ]);
    for verb in [
        vec!["stats", "--range", "100..900"],
        vec!["trace", "--range", "100..900"],
        vec!["segments", "--folded", "--range", "..500"],
        vec!["memory", "--folded", "--range", "2000.."],
        vec!["diagnose", "--json", "--range", "100..900"],
        vec!["check", "--max-peak", "1TiB", "--last", "50"],
        vec!["stats", "--range", "10ms..20ms"],
    ] {
        let mut args = verb.clone();
        args.insert(1, &f);
        ok(&args);
    }
    let entries = |args: &[&str]| {
        let mut a = vec!["stats", "--json", &f];
        a.extend_from_slice(args);
        devices(&json(&ok(&a)))[0]["trace_entries"].as_u64()
    };
    assert_eq!(entries(&["--range", "100..900"]), Some(800));
    assert_eq!(entries(&["--range", "last:7"]), Some(7));
    assert_eq!(entries(&["--last", "7"]), Some(7));
    // bad ranges and a slice without one: exit 2, one line, the file last where there is one
    for (args, fragment) in [
        (
            vec!["stats", &f, "--range", "900..100"],
            "empty range 900..100",
        ),
        (vec!["stats", &f, "--range", "abc"], "bad range"),
        (
            vec!["stats", &f, "--last", "5", "--range", "1..2"],
            "cannot be used with",
        ),
        (
            vec!["slice", &f, "-o", "/dev/null"],
            "needs --last N or --range",
        ),
        (
            vec!["html", &f, "-o", "/dev/null", "--last", "5"],
            "apply to the commands that read snapshots",
        ),
    ] {
        let (code, stdout, stderr) = run(&args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert!(
            stderr.contains(fragment),
            "{args:?}: want {fragment:?} in {stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
