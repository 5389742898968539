//! `memlens compare --json` against an independent Python reading of the two pickles
//! (tests/python/compare_ref.py: timeline peaks, alive-at-peak groups by user frame and by stack, their
//! change), on a real pair (the 512 and 1024 runs of one model) and on synth A/B pairs with one
//! planted change; and the CI gates (`compare --max-peak-growth`, `check --max-peak`) exit 1
//! and 0 where they must, 2 on bad input.

use memlens_fixture::python;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{json, memlens, synth_workload};

fn synth(workload: &str, seed: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("cmp_{workload}_{seed}.pickle"));
    synth_workload(&path, workload, "20000", seed);
    path
}

fn real_pair() -> Option<(PathBuf, PathBuf)> {
    let files = memlens_fixture::shared_snapshots()?;
    let find = |s: &str| {
        files
            .iter()
            .find(|f| f.to_string_lossy().contains(s))
            .cloned()
    };
    Some((
        find("results_medium_512_training")?,
        find("results_medium_1024_training")?,
    ))
}

/// Compares one pair; returns one message per mismatch.
fn check_pair(a: &Path, b: &Path) -> Vec<String> {
    let (sa, sb) = (
        a.to_string_lossy().into_owned(),
        b.to_string_lossy().into_owned(),
    );
    let ours = json(
        &memlens(&["compare", "--json", &sa, &sb]),
        "memlens compare",
    );
    let Some(py) = python() else {
        panic!("python3 is needed for the compare reference");
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/python/compare_ref.py");
    let reference = Command::new(py).arg(&script).arg(a).arg(b).output();
    let reference = json(
        &reference.unwrap_or_else(|e| panic!("{e}")),
        "compare_ref.py",
    );
    let mut bad = Vec::new();
    let (rd, od) = (&reference["devices"], &ours["devices"]);
    let n = rd.as_array().map_or(0, Vec::len);
    if n != od.as_array().map_or(0, Vec::len) {
        return vec![format!("devices: python {rd}, memlens {od}")];
    }
    for i in 0..n {
        let (r, o) = (&rd[i], &od[i]);
        for key in ["device", "peak_change_bytes"] {
            if r[key] != o[key] {
                bad.push(format!(
                    "device {i}: {key}: python {}, memlens {}",
                    r[key], o[key]
                ));
            }
        }
        for side in ["a", "b"] {
            if r[side]["timeline_peak_bytes"] != o[side]["timeline_peak_bytes"] {
                bad.push(format!(
                    "device {i}: {side}.timeline_peak_bytes: python {}, memlens {}",
                    r[side], o[side]
                ));
            }
        }
        if r["by_stack"] != o["by_stack"] {
            bad.push(format!(
                "device {i}: by_stack differs; python {}, memlens {}",
                r["by_stack"], o["by_stack"]
            ));
        }
        if r["by_frame"] != o["by_frame"] {
            let head = |v: &Value| {
                v.as_array()
                    .map(|a| a.iter().take(3).cloned().collect::<Vec<_>>())
            };
            bad.push(format!(
                "device {i}: by_frame differs; python {:?}, memlens {:?}",
                head(&r["by_frame"]),
                head(&o["by_frame"])
            ));
        }
    }
    bad
}

#[test]
fn compare_matches_the_python_reference_on_a_real_pair() {
    let Some((a, b)) = real_pair() else {
        return;
    };
    let bad = check_pair(&a, &b);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn compare_matches_the_python_reference_on_synth_pairs_and_names_the_planted_change() {
    let (healthy, leak) = (synth("training", "0"), synth("leak", "0"));
    let bad = check_pair(&healthy, &leak);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    let (h, l) = (
        healthy.to_string_lossy().into_owned(),
        leak.to_string_lossy().into_owned(),
    );
    let v = json(&memlens(&["compare", "--json", &h, &l]), "compare");
    let d = &v["devices"][0];
    // The leak keeps 100 MiB per step alive: at the later peak it is the largest new frame.
    let top = &d["by_frame"][0];
    assert!(
        top["frame"]
            .as_str()
            .unwrap_or("")
            .ends_with("train.py:77:train_step"),
        "{top}"
    );
    assert_eq!(top["a_bytes"], 0);
    assert!(
        top["change_bytes"].as_i64().unwrap_or(0) >= 100 << 20,
        "{top}"
    );
    let (fr, oom) = (synth("fragmenting", "0"), synth("oom", "4"));
    let bad = check_pair(&fr, &oom);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn gates_exit_one_when_a_limit_is_exceeded_and_zero_otherwise() {
    let (healthy, leak) = (synth("training", "1"), synth("leak", "1"));
    let (h, l) = (
        healthy.to_string_lossy().into_owned(),
        leak.to_string_lossy().into_owned(),
    );
    let code = |args: &[&str]| memlens(args).status.code();
    assert_eq!(
        code(&["compare", "--json", "--max-peak-growth", "0%", &h, &h]),
        Some(0)
    );
    let grown = json(&memlens(&["compare", "--json", &h, &l]), "compare");
    let change = grown["devices"][0]["peak_change_bytes"]
        .as_i64()
        .unwrap_or(0);
    assert!(change > 0, "the leak run peaks higher: {change}");
    let below = format!("{}", change - 1);
    let above = format!("{}", change + 1);
    let out = memlens(&["compare", "--folded", "--max-peak-growth", &below, &h, &l]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // Names the device, the figures and the top change (the leaked tensor's train step).
    assert!(
        err.contains("device 0") && err.contains("top change") && err.contains("train_step"),
        "{err}"
    );
    assert_eq!(
        code(&["compare", "--folded", "--max-peak-growth", &above, &h, &l]),
        Some(0)
    );
    assert_eq!(
        code(&["compare", "--folded", "--max-peak-growth", "lots", &h, &l]),
        Some(2)
    );

    let peak = grown["devices"][0]["b"]["timeline_peak_bytes"]
        .as_i64()
        .unwrap_or(0);
    let (lo, hi) = (format!("{}", peak - 1), format!("{peak}"));
    let out = memlens(&["check", "--max-peak", &lo, &l]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("timeline peak") && err.trim_end().ends_with(&l),
        "{err}"
    );
    assert_eq!(code(&["check", "--max-peak", &hi, &l]), Some(0));
    assert_eq!(code(&["check", "--max-reserved", "1B", &l]), Some(1));
    assert_eq!(code(&["check", &l]), Some(2));
}
