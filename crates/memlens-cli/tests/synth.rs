//! `memlens synth` from the command line: the same arguments give the same file, bad arguments
//! exit 2 with one line, and `memlens stats --json` on generated files agrees with the
//! independent Python reading (tests/python/stats_ref.py) key for key.

use memlens_fixture::python;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod common;
use common::memlens;

fn tmp(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

fn synth(name: &str, args: &[&str]) -> PathBuf {
    let path = tmp(name);
    let p = path.to_string_lossy().into_owned();
    let mut all = vec!["synth"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", &p]);
    let out = memlens(&all);
    assert!(
        out.status.success(),
        "memlens {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout);
    assert!(
        line.contains("bytes") && line.contains("trace entries"),
        "summary line: {line}"
    );
    path
}

#[test]
fn same_arguments_same_file() {
    let args = [
        "--workload",
        "fragmenting",
        "--events",
        "4000",
        "--seed",
        "7",
        "--devices",
        "2",
    ];
    let a = synth("cli-same-a.pickle", &args);
    let b = synth("cli-same-b.pickle", &args);
    let (x, y) = (
        std::fs::read(&a).unwrap_or_default(),
        std::fs::read(&b).unwrap_or_default(),
    );
    assert!(
        !x.is_empty() && x == y,
        "two runs with the same arguments differ"
    );
    let _ = (std::fs::remove_file(a), std::fs::remove_file(b));
}

#[test]
fn help_and_bad_arguments() {
    let out = memlens(&["synth", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--workload",
        "--events",
        "--seed",
        "--devices",
        "--protocol",
        "--max-entries",
        "--expandable-segments",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
    for w in memlens_synth::Workload::ALL {
        assert!(help.contains(w.name()), "--help lacks the workload {w}");
    }
    let o = tmp("cli-bad.pickle").to_string_lossy().into_owned();
    for (args, what) in [
        (
            vec!["synth", "--workload", "nope", "--events", "10", "-o", &o],
            "unknown workload",
        ),
        (
            vec![
                "synth",
                "--workload",
                "leak",
                "--events",
                "10",
                "--devices",
                "0",
                "-o",
                &o,
            ],
            "--devices must be 1 to 16",
        ),
        (
            vec![
                "synth",
                "--workload",
                "leak",
                "--events",
                "10",
                "--protocol",
                "9",
                "-o",
                &o,
            ],
            "--protocol must be",
        ),
    ] {
        let out = memlens(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(what), "{args:?}: {err}");
    }
    let out = memlens(&[
        "synth",
        "--workload",
        "leak",
        "--events",
        "10",
        "-o",
        "/nonexistent-dir/x.pickle",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("memlens: ") && err.trim_end().ends_with("/nonexistent-dir/x.pickle"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1);
}

#[test]
fn stats_agree_with_python_on_generated_files() {
    let Some(py) = python() else {
        println!("NOTICE: python3 not found: the stats cross-check is skipped");
        return;
    };
    let reference = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/python/stats_ref.py");
    if !reference.exists() {
        println!("NOTICE: tests/python/stats_ref.py not found: the stats cross-check is skipped");
        return;
    }
    let cases: [(&str, &[&str]); 5] = [
        (
            "cli-train.pickle",
            &[
                "--workload",
                "training",
                "--events",
                "8000",
                "--seed",
                "1",
                "--devices",
                "2",
            ],
        ),
        (
            "cli-infer.pickle",
            &[
                "--workload",
                "inference",
                "--events",
                "8000",
                "--seed",
                "2",
                "--expandable-segments",
            ],
        ),
        (
            "cli-frag.pickle",
            &[
                "--workload",
                "fragmenting",
                "--events",
                "12000",
                "--seed",
                "3",
                "--max-entries",
                "3000",
            ],
        ),
        (
            "cli-leak.pickle",
            &[
                "--workload",
                "leak",
                "--events",
                "6000",
                "--seed",
                "4",
                "--protocol",
                "2",
            ],
        ),
        (
            "cli-oom.pickle",
            &[
                "--workload",
                "oom",
                "--events",
                "6000",
                "--seed",
                "5",
                "--device-memory-mib",
                "8192",
            ],
        ),
    ];
    for (name, args) in cases {
        let path = synth(name, args);
        let p = path.to_string_lossy().into_owned();
        let ours = memlens(&["stats", "--json", &p]);
        assert!(
            ours.status.success(),
            "stats {name}: {}",
            String::from_utf8_lossy(&ours.stderr)
        );
        let theirs = Command::new(py)
            .arg(&reference)
            .arg(&path)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            theirs.status.success(),
            "stats_ref {name}: {}",
            String::from_utf8_lossy(&theirs.stderr)
        );
        let ours: Value =
            serde_json::from_slice(&ours.stdout).unwrap_or_else(|e| panic!("{name}: {e}"));
        let theirs: Value =
            serde_json::from_slice(&theirs.stdout).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (o, t) = (&ours["devices"], &theirs["devices"]);
        let (Some(o), Some(t)) = (o.as_array(), t.as_array()) else {
            panic!("{name}: no devices")
        };
        assert_eq!(o.len(), t.len(), "{name}: device count");
        for (od, td) in o.iter().zip(t) {
            let Some(keys) = td.as_object() else {
                panic!("{name}: device is not an object")
            };
            for (k, v) in keys {
                assert_eq!(&od[k], v, "{name}: device {} key {k}", td["device"]);
            }
            assert!(
                od["trace_entries"].as_u64().unwrap_or(0) > 0,
                "{name}: empty trace"
            );
        }
        let _ = std::fs::remove_file(path);
    }
}

/// A large file is streamed in chunks (src/load.rs), cut at chunk boundaries inside opcodes;
/// stdin is read whole. Both must give the same stats.
#[test]
fn a_large_streamed_file_reads_like_stdin() {
    let path = synth(
        "mapped_large.pickle",
        &[
            "--workload",
            "training",
            "--events",
            "220000",
            "--seed",
            "3",
        ],
    );
    let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    assert!(len > 32 << 20, "generated only {len} bytes");
    let p = path.to_string_lossy().into_owned();
    let mapped = memlens(&["stats", "--json", &p]);
    assert!(
        mapped.status.success(),
        "{}",
        String::from_utf8_lossy(&mapped.stderr)
    );
    let bytes = std::fs::read(&path).unwrap_or_default();
    let mut child = Command::new(env!("CARGO_BIN_EXE_memlens"))
        .args(["stats", "--json", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run memlens: {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        stdin.write_all(&bytes).unwrap_or_else(|e| panic!("{e}"));
    }
    let piped = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    assert!(piped.status.success());
    assert_eq!(
        String::from_utf8_lossy(&mapped.stdout),
        String::from_utf8_lossy(&piped.stdout)
    );
    let _ = std::fs::remove_file(&path);
}
