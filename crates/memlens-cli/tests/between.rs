//! What grew between two moments: `memlens diagnose --json --between FROM TO` must equal an
//! independent reading by Python's own `pickle.load` (tests/python/between_ref.py, written from
//! the definitions): the live bytes at both ends, every user frame whose bytes changed, and the
//! 20 stacks that changed most (frames, user frame, bytes at both ends), in the same order; on
//! the fixtures, on synthetic snapshots (training and a leak) and on the real snapshots. The
//! moments are a quarter and three quarters into each device's trace.

use memlens_fixture::python;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{json, memlens, repo_root, scratch_dir, synth_workload};

/// The two moments of `file`'s device `device`: a quarter and three quarters into its trace.
fn moments(file: &Path, device: u64) -> Option<(u64, u64)> {
    let stats = json(
        &memlens(&["stats", "--json", &file.to_string_lossy()]),
        "stats",
    );
    let d = stats["devices"]
        .as_array()?
        .iter()
        .find(|d| d["device"] == device)?;
    let n = d["trace_entries"].as_u64()?;
    (n >= 4).then_some((n / 4, 3 * n / 4))
}

/// One message per difference between the reference and memlens on `file`, device 0.
fn check(py: &str, file: &Path) -> Vec<String> {
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    let Some((from, to)) = moments(file, 0) else {
        return Vec::new();
    };
    let (f, t) = (from.to_string(), to.to_string());
    let script = repo_root().join("tests/python/between_ref.py");
    let out = Command::new(py)
        .arg(&script)
        .arg(file)
        .args(["0", &f, &t])
        .output()
        .unwrap_or_else(|e| panic!("{py}: {e}"));
    let reference: Value = match serde_json::from_slice(&out.stdout) {
        Ok(v) => v,
        Err(e) => return vec![format!("{name}: reference failed: {e}")],
    };
    let path = file.to_string_lossy();
    let args = [
        "diagnose",
        "--json",
        "--device",
        "0",
        "--between",
        &f,
        &t,
        &path,
    ];
    let ours = json(&memlens(&args), "diagnose --between");
    let ours = &ours["devices"][0];
    let mut bad = Vec::new();
    for key in ["from_bytes", "to_bytes", "by_frame", "by_stack"] {
        if ours[key] != reference[key] {
            bad.push(format!(
                "{name} {f}..{t}: {key}: python {}, memlens {}",
                reference[key], ours[key]
            ));
        }
    }
    if reference["by_stack"]
        .as_array()
        .is_none_or(|a| a.is_empty())
        && from < to
    {
        println!("{name} {f}..{t}: no stack changed");
    }
    bad
}

fn assert_none(what: &str, files: &[PathBuf], py: &str) {
    let problems: Vec<String> = files.iter().flat_map(|f| check(py, f)).collect();
    println!(
        "compared {} {what}, {} mismatches",
        files.len(),
        problems.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn between_matches_python_reference_on_fixtures_and_synthetic_snapshots() {
    let Some(py) = python() else {
        println!("SKIP: python3 not found; the conformance test needs it for the reference");
        return;
    };
    let dir = scratch_dir("between");
    let mut files = Vec::new();
    for name in ["p2_snapshot", "p4_snapshot"] {
        let out = dir.join(format!("{name}.pickle"));
        std::fs::write(&out, common::fixture_bytes(name)).unwrap_or_else(|e| panic!("{e}"));
        files.push(out);
    }
    for (workload, seed) in [("training", "3"), ("leak", "5")] {
        let out = dir.join(format!("{workload}.pickle"));
        synth_workload(&out, workload, "20000", seed);
        files.push(out);
    }
    assert_none("fixtures and synthetic snapshots", &files, py);
    // On the synthetic training run some user frame grows through several call paths: the
    // stacks are a finer grain than the frames.
    let (f, t) = moments(&files[2], 0).unwrap_or_else(|| panic!("synth has a trace"));
    let (f, t, p) = (f.to_string(), t.to_string(), files[2].to_string_lossy());
    let ours = json(
        &memlens(&["diagnose", "--json", "--between", &f, &t, &p]),
        "diagnose --between",
    );
    let stacks = ours["devices"][0]["by_stack"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let split = stacks
        .iter()
        .any(|s| stacks.iter().filter(|o| o["frame"] == s["frame"]).count() > 1);
    assert!(split, "no frame with two stacks among {stacks:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn between_matches_python_reference_on_real_snapshots() {
    let Some((mut files, py)) = common::real_snapshots_and_python() else {
        return;
    };
    // The smallest few: the reference walks the whole trace twice in Python.
    files.sort_by_key(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(u64::MAX));
    files.truncate(8);
    assert_none("real snapshots", &files, py);
}
