//! Conformance: `memlens stats --json` must agree, key for key, with an independent reading of
//! every real snapshot by Python's own `pickle.load` (tests/python/stats_ref.py, written from the
//! definitions and not from the Rust code). Also checks that every real snapshot decodes.

use serde_json::{json, Value};
use std::path::Path;

mod common;
use common::{paired_devices, read_both, repo_root};

/// The per-device keys the reference defines; each must be present on both sides and equal.
const KEYS: &[&str] = &[
    "device",
    "segments",
    "blocks",
    "trace_entries",
    "actions",
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

/// Compares one file; returns one message per mismatch.
fn compare(file: &Path, reference: &Value, ours: &Value) -> Vec<String> {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let pairs = match paired_devices(&name, reference, ours) {
        Ok(pairs) => pairs,
        Err(e) => return vec![e],
    };
    let mut bad = Vec::new();
    for (rd, od) in &pairs {
        let dev = rd.get("device").cloned().unwrap_or(Value::Null);
        for key in KEYS {
            match (rd.get(*key), od.get(*key)) {
                (Some(a), Some(b)) if a == b => {}
                (a, b) => bad.push(format!(
                    "{name}: device {dev}: {key}: python {a:?}, memlens {b:?}"
                )),
            }
        }
    }
    bad
}

#[test]
fn stats_match_python_reference_on_real_snapshots() {
    let Some((files, py)) = common::real_snapshots_and_python() else {
        return;
    };
    let script = repo_root().join("tests/python/stats_ref.py");
    let mut problems = Vec::new();
    for file in &files {
        let name = file.display();
        match read_both(py, &script, &["stats", "--json"], file) {
            Ok((ours, reference)) => problems.extend(compare(file, &reference, &ours)),
            Err(e) => problems.push(format!("{name}: {e}")),
        }
    }
    println!(
        "compared {} snapshots, {} mismatches",
        files.len(),
        problems.len()
    );
    assert!(
        problems.is_empty(),
        "{} mismatches:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn compare_reports_every_differing_key() {
    let a = json!({"devices": [{"device": 0, "segments": 1, "actions": {"alloc": 2}, "reserved_bytes": 5}]});
    let b = json!({"devices": [{"device": 0, "segments": 2, "actions": {"alloc": 1}, "reserved_bytes": 5}]});
    let bad = compare(Path::new("x.pickle"), &a, &b);
    assert!(
        bad.iter()
            .any(|m| m.contains("x.pickle: device 0: segments: python Some(Number(1))")),
        "{bad:?}"
    );
    assert!(bad.iter().any(|m| m.contains(": actions: ")), "{bad:?}");
    assert!(
        !bad.iter().any(|m| m.contains(": reserved_bytes: ")),
        "{bad:?}"
    );
    // A key missing on both sides is a mismatch too (a reference that forgot a key must not pass).
    assert!(
        bad.iter()
            .any(|m| m.contains("peak_reserved_bytes: python None, memlens None")),
        "{bad:?}"
    );
    let c = json!({"devices": [{"device": 1}]});
    assert_eq!(compare(Path::new("x.pickle"), &a, &c).len(), 1);
}
