//! Labelled cases for `memlens diagnose`: each `memlens synth` workload plants one cause (docs/SYNTH.md,
//! "Labelled cases") and the diagnosis must give its verdict and name the planted stack; plus
//! the command's contract (JSON keys, `--at`, `--device`, `--params`, bad input).

use serde_json::Value;
use std::path::{Path, PathBuf};

mod common;
use common::{json, memlens, synth_workload};

/// Writes a labelled case; `tag` keeps the files of tests running at once apart.
fn synth(workload: &str, seed: &str, tag: &str) -> PathBuf {
    let path =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("diag_{workload}_{seed}_{tag}.pickle"));
    synth_workload(&path, workload, "20000", seed);
    path
}

fn diagnose(file: &Path, extra: &[&str]) -> Value {
    let f = file.to_string_lossy().into_owned();
    let mut args = vec!["diagnose", "--json"];
    args.extend_from_slice(extra);
    args.push(&f);
    json(&memlens(&args), &format!("diagnose {f}"))
}

fn device0(v: &Value) -> &Value {
    &v["devices"][0]
}

fn kind(d: &Value) -> &str {
    d["verdict"]["kind"].as_str().unwrap_or("")
}

#[test]
fn oom_from_too_much_memory() {
    let v = diagnose(&synth("oom", "4", "a"), &[]);
    let d = device0(&v);
    assert_eq!(kind(d), "too_much", "{}", d["verdict"]);
    let o = &d["ooms"][0];
    assert_eq!(o["requested_bytes"], 95_734_988_800u64);
    assert_eq!(o["fits_in_free_total"], false);
    assert!(
        o["frame"]
            .as_str()
            .unwrap_or("")
            .ends_with("train.py:77:train_step"),
        "{o}"
    );
    assert!(!d["verdict"]["fixes"]
        .as_array()
        .is_none_or(|f| f.is_empty()));
}

#[test]
fn oom_from_fragmentation() {
    let v = diagnose(&synth("oom-fragmentation", "0", "a"), &[]);
    let d = device0(&v);
    assert_eq!(kind(d), "fragmentation", "{}", d["verdict"]);
    let o = &d["ooms"][0];
    assert_eq!(o["requested_bytes"], 27_458_691_584u64);
    assert_eq!(o["fits_in_free_total"], true);
    assert!(o["largest_free_block_bytes"].as_u64() < o["requested_bytes"].as_u64());
    assert!(
        o["frame"]
            .as_str()
            .unwrap_or("")
            .ends_with("train.py:103:evaluate"),
        "{o}"
    );
    let fixes = d["verdict"]["fixes"].to_string();
    assert!(
        fixes.contains("expandable_segments:True") && fixes.contains("max_split_size_mb:"),
        "{fixes}"
    );
}

#[test]
fn slow_leak_names_the_planted_frame() {
    let v = diagnose(&synth("leak", "0", "a"), &[]);
    let d = device0(&v);
    assert_eq!(kind(d), "leak", "{}", d["verdict"]);
    assert_eq!(d["leak_method"], "steps");
    let l = &d["leaks"][0];
    assert!(
        l["frame"]
            .as_str()
            .unwrap_or("")
            .ends_with("train.py:77:train_step"),
        "{l}"
    );
    assert_eq!(l["bytes_per_step"], 104_857_600u64);
    assert!(d["verdict"]["summary"]
        .as_str()
        .unwrap_or("")
        .contains("train.py:77:train_step"));
}

#[test]
fn healthy_training_has_no_problem() {
    let v = diagnose(&synth("training", "0", "healthy"), &[]);
    let d = device0(&v);
    assert_eq!(kind(d), "no_problem_found", "{}", d["verdict"]);
    // The logits' gradient is the first thing backward allocates: the peak follows forward.
    assert_eq!(
        d["peak_phase"], "at the start of backward (right after forward)",
        "{}",
        d["peak_phase"]
    );
    assert_eq!(d["leak_method"], "steps");
    assert_eq!(
        d["leaks"].as_array().map(Vec::len),
        Some(0),
        "{}",
        d["leaks"]
    );
    // At the peak (in forward) zero_grad(set_to_none=True) has dropped the gradients; at the end
    // of a step Adam's model states are there: gradients as large as the parameters, two
    // optimizer states per parameter.
    let bytes = |at: &str, class: &str| -> u64 {
        d["ledger"][at]
            .as_array()
            .and_then(|r| r.iter().find(|c| c["class"] == class))
            .and_then(|c| c["bytes"].as_u64())
            .unwrap_or(0)
    };
    for c in ["parameters", "optimizer_state", "activations"] {
        assert!(bytes("peak", c) > 0, "ledger at the peak lacks {c}");
    }
    let params = bytes("end", "parameters");
    assert!(params > 0);
    assert_eq!(bytes("end", "gradients"), params);
    assert_eq!(bytes("end", "optimizer_state"), 2 * params);
}

#[test]
fn cuda_graph_pools_are_their_own_item_not_a_leak() {
    let v = diagnose(&synth("inference", "0", "a"), &[]);
    let d = device0(&v);
    assert_ne!(kind(d), "leak", "{}", d["verdict"]);
    let p = &d["private_pools"][0];
    assert_eq!(p["pool_id"], serde_json::json!([0, 1]));
    assert_eq!(p["reserved_bytes"], 2_097_152u64);
}

#[test]
fn json_has_the_documented_keys_and_the_groups_sum_to_the_live_total() {
    let v = diagnose(&synth("training", "0", "keys"), &["--params", "1000000"]);
    let d = device0(&v);
    for k in ["device", "peak", "ledger", "leaks", "ooms", "verdict"] {
        assert!(d.get(k).is_some(), "no {k}");
    }
    for k in ["event", "allocated_bytes", "top"] {
        assert!(d["peak"].get(k).is_some(), "no peak.{k}");
    }
    let total = d["peak"]["allocated_bytes"].as_u64().unwrap_or(0);
    let sum = |key: &str| -> u64 {
        d["peak"][key]
            .as_array()
            .map_or(0, |g| g.iter().filter_map(|x| x["bytes"].as_u64()).sum())
    };
    assert_eq!(sum("top"), total);
    assert_eq!(sum("by_class"), total);
    let e = &d["ledger"]["expected"];
    assert_eq!(e["parameters_bytes"], 2_000_000u64);
    assert_eq!(e["optimizer_state_bytes"], 12_000_000u64);
}

#[test]
fn at_replaces_the_peak_and_bad_input_is_one_line() {
    let f = synth("training", "0", "at");
    let v = diagnose(&f, &["--at", "100"]);
    assert_eq!(device0(&v)["peak"]["event"], 100);
    assert_eq!(device0(&v)["moment"], "event");
    let p = f.to_string_lossy().into_owned();
    let out = memlens(&["diagnose", "--device", "9", &p]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no device 9") && err.trim_end().ends_with(&p),
        "{err}"
    );
    let bad = Path::new(env!("CARGO_TARGET_TMPDIR")).join("diag_bad.pickle");
    std::fs::write(&bad, b"\x80\x04not a pickle").unwrap_or_else(|e| panic!("{e}"));
    let b = bad.to_string_lossy().into_owned();
    let out = memlens(&["diagnose", &b]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim().lines().count(),
        1
    );
}
