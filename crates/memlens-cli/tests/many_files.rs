//! `memlens stats|diagnose FILES...`: read in parallel, reported in the order given, each line
//! the same object the single-file command prints (plus its `file`); a file that does not load
//! makes the exit status 2 and is named, the others are still reported.

use serde_json::Value;
use std::path::Path;
use std::process::Output;

mod common;
use common::{memlens, synth_workload};

/// Four synth snapshots; `tag` keeps the files of tests running at once apart.
fn files(tag: &str) -> Vec<String> {
    ["training", "leak", "inference", "oom"]
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let p = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("many_{tag}_{w}.pickle"));
            synth_workload(&p, w, "8000", &i.to_string());
            p.to_string_lossy().into_owned()
        })
        .collect()
}

fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l}: {e}")))
        .collect()
}

#[test]
fn many_files_equal_one_file_at_a_time_in_the_order_given() {
    let f = files("order");
    for verb in ["stats", "diagnose"] {
        let mut args = vec![verb, "--json"];
        args.extend(f.iter().map(String::as_str));
        let out = memlens(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let many = lines(&out);
        assert_eq!(many.len(), f.len(), "{verb}: one line per file");
        for (file, got) in f.iter().zip(&many) {
            assert_eq!(got["file"], file.as_str(), "{verb}: order");
            let one: Value = serde_json::from_slice(&memlens(&[verb, "--json", file]).stdout)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(got["devices"], one["devices"], "{verb} {file}");
        }
    }
}

#[test]
fn a_bad_file_among_many_is_named_and_the_others_are_reported() {
    let f = files("bad");
    let missing = Path::new(env!("CARGO_TARGET_TMPDIR")).join("many_missing.pickle");
    let m = missing.to_string_lossy().into_owned();
    let out = memlens(&["diagnose", &f[0], &m, &f[1]]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.trim().ends_with(&m), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("{}: device 0: ", f[0]))
            && text.contains(&format!("{}: device 0: ", f[1])),
        "{text}"
    );
}
