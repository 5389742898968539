//! Conformance: `memlens diagnose --json` must agree with an independent reading of every real
//! snapshot and every fixture by Python's own `pickle.load` (tests/python/diagnose_ref.py,
//! written from the definitions and not from the Rust code): per device the peak event, the
//! bytes and count alive there, and the first groups of the by-user-frame breakdown.

use memlens_fixture::python;
use serde_json::{json, Value};
use std::path::PathBuf;

mod common;
use common::{paired_devices, read_both, repo_root};

/// How many of the largest groups of `peak.top` must match, frame, bytes and count.
const TOP: usize = 10;

fn top(peak: Option<&Value>) -> Vec<Value> {
    peak.and_then(|p| p.get("top"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// Compares one file's two readings; returns one message per mismatch.
fn compare(name: &str, reference: &Value, ours: &Value) -> Vec<String> {
    let pairs = match paired_devices(name, reference, ours) {
        Ok(pairs) => pairs,
        Err(e) => return vec![e],
    };
    let mut bad = Vec::new();
    for (rd, od) in &pairs {
        let dev = rd.get("device").cloned().unwrap_or(Value::Null);
        let (rp, op) = (rd.get("peak"), od.get("peak"));
        for key in ["event", "allocated_bytes", "allocations"] {
            match (rp.and_then(|p| p.get(key)), op.and_then(|p| p.get(key))) {
                (Some(a), Some(b)) if a == b => {}
                (a, b) => bad.push(format!(
                    "{name}: device {dev}: peak.{key}: python {a:?}, memlens {b:?}"
                )),
            }
        }
        let (rt, ot) = (top(rp), top(op));
        for i in 0..TOP.min(rt.len().max(ot.len())) {
            for key in ["frame", "bytes", "allocations"] {
                let (a, b) = (rt.get(i), ot.get(i));
                let (a, b) = (a.and_then(|g| g.get(key)), b.and_then(|g| g.get(key)));
                if a.is_none() || a != b {
                    bad.push(format!(
                        "{name}: device {dev}: peak.top[{i}].{key}: python {a:?}, memlens {b:?}"
                    ));
                }
            }
        }
        // memlens lists every group: together they are everything alive at the peak.
        let sum: Option<u64> = ot
            .iter()
            .map(|g| g.get("bytes").and_then(Value::as_u64))
            .sum();
        let total = op
            .and_then(|p| p.get("allocated_bytes"))
            .and_then(Value::as_u64);
        if sum.is_none() || sum != total {
            bad.push(format!(
                "{name}: device {dev}: memlens peak.top sums to {sum:?}, \
                 peak.allocated_bytes {total:?}"
            ));
        }
    }
    bad
}

/// Runs the reference and `memlens diagnose --json` on each file, both at once, and returns
/// one message per mismatch or failure.
fn check_files(py: &str, files: &[PathBuf]) -> Vec<String> {
    let script = repo_root().join("tests/python/diagnose_ref.py");
    let mut problems = Vec::new();
    for file in files {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match read_both(py, &script, &["diagnose", "--json"], file) {
            Ok((ours, reference)) => problems.extend(compare(&name, &reference, &ours)),
            Err(e) => problems.push(format!("{name}: {e}")),
        }
    }
    problems
}

fn assert_none(what: &str, count: usize, problems: &[String]) {
    println!("compared {count} {what}, {} mismatches", problems.len());
    assert!(
        problems.is_empty(),
        "{} mismatches:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn diagnose_matches_python_reference_on_real_snapshots() {
    let Some((files, py)) = common::real_snapshots_and_python() else {
        return;
    };
    let problems = check_files(py, &files);
    assert_none("snapshots", files.len(), &problems);
}

#[test]
fn diagnose_matches_python_reference_on_fixtures() {
    let Some(py) = python() else {
        println!("SKIP: python3 not found; the conformance test needs it for the reference");
        return;
    };
    let dir = std::env::temp_dir().join(format!(
        "memlens-diagnose-conformance-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut files = Vec::new();
    for (path, text) in memlens_fixture::fixture_texts() {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut fx = memlens_fixture::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        // The reference reads pickles: the JSON and HTML forms are written as the snapshot
        // dict they carry (a bare segment list stays one).
        if fx.options().form != memlens_fixture::Form::Segments {
            fx.options_mut().form = memlens_fixture::Form::Snapshot;
        }
        let bytes = fx.to_bytes().unwrap_or_else(|e| panic!("{name}: {e}"));
        let out = dir.join(format!("{name}.pickle"));
        std::fs::write(&out, bytes).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
        files.push(out);
    }
    assert!(files.len() >= 15, "found {} fixtures", files.len());
    let problems = check_files(py, &files);
    let _ = std::fs::remove_dir_all(&dir);
    assert_none("fixtures", files.len(), &problems);
}

#[test]
fn compare_reports_every_mismatch() {
    fn group(frame: &str, bytes: u64, allocations: u64) -> Value {
        json!({"frame": frame, "bytes": bytes, "allocations": allocations})
    }
    let peak = |event: Value, bytes: u64, n: u64, top: Vec<Value>| {
        json!({"devices": [{"device": 0, "peak": {
            "event": event, "allocated_bytes": bytes, "allocations": n, "top": top}}]})
    };
    let a = peak(
        json!(3),
        10,
        2,
        vec![group("a.py:1:f", 6, 1), group("b.py:2:g", 4, 1)],
    );
    // Identical, and extra keys on the memlens side are fine.
    let mut extra = a.clone();
    extra["devices"][0]["peak"]["reserved_bytes"] = json!(99);
    extra["devices"][0]["name"] = json!("cuda:0");
    assert_eq!(compare("x.pickle", &a, &extra), Vec::<String>::new());

    let b = peak(
        json!(null),
        10,
        3,
        vec![group("a.py:1:f", 6, 2), group("c.py:2:g", 4, 1)],
    );
    let bad = compare("x.pickle", &a, &b);
    assert!(
        bad.iter()
            .any(|m| m
                == "x.pickle: device 0: peak.event: python Some(Number(3)), memlens Some(Null)"),
        "{bad:?}"
    );
    assert!(
        bad.iter().any(|m| m.contains("peak.allocations:")),
        "{bad:?}"
    );
    assert!(
        !bad.iter().any(|m| m.contains("peak.allocated_bytes:")),
        "{bad:?}"
    );
    assert!(
        bad.iter().any(|m| m.contains("peak.top[0].allocations:")),
        "{bad:?}"
    );
    assert!(
        bad.iter().any(|m| m.contains("peak.top[1].frame:")),
        "{bad:?}"
    );
    assert!(
        !bad.iter().any(|m| m.contains("peak.top[0].bytes:")),
        "{bad:?}"
    );

    // A missing group, and memlens groups that do not add up to its allocated_bytes.
    let c = peak(json!(3), 10, 2, vec![group("a.py:1:f", 6, 1)]);
    let bad = compare("x.pickle", &a, &c);
    assert!(
        bad.iter()
            .any(|m| m
                .contains("peak.top[1].frame: python Some(String(\"b.py:2:g\")), memlens None")),
        "{bad:?}"
    );
    assert!(
        bad.iter()
            .any(|m| m.contains("memlens peak.top sums to Some(6), peak.allocated_bytes Some(10)")),
        "{bad:?}"
    );

    // Only the first TOP groups are compared; all of memlens's count toward the sum.
    let many = |last: &str| {
        let mut top: Vec<Value> = (0..TOP)
            .map(|i| group(&format!("f{i:02}.py:1:f"), 2, 1))
            .collect();
        top.push(group(last, 1, 1));
        peak(json!(0), 2 * TOP as u64 + 1, TOP as u64 + 1, top)
    };
    assert_eq!(
        compare("x.pickle", &many("y.py:1:f"), &many("z.py:1:f")),
        Vec::<String>::new()
    );

    // A missing key on both sides is a mismatch (a reference that forgot a key must not pass).
    let d = json!({"devices": [{"device": 0}]});
    let bad = compare("x.pickle", &d, &d);
    assert!(
        bad.iter()
            .any(|m| m.contains("peak.event: python None, memlens None")),
        "{bad:?}"
    );
    let e = json!({"devices": [{"device": 1}]});
    assert_eq!(compare("x.pickle", &a, &e).len(), 1);
}
