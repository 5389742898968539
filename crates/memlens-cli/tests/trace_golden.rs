//! Golden tests for `memlens trace`: its output on a few real snapshots must equal the files in
//! tests/golden/trace/ (repo root). When made, they were checked by eye and line for line
//! against an independent Python replay of the same pickles (upstream's semantics, its bugs
//! fixed). `UPDATE_GOLDEN=1 cargo test -p memlens-cli --test trace_golden` rewrites them; review
//! the diff before committing.

use std::process::Command;

mod common;
use common::repo_root;

/// (snapshot file stem in ../shared/snapshots, extra arguments, golden file stem)
const CASES: &[(&str, &[&str], &str)] = &[
    // segment_alloc, alloc, free of a block: the smallest complete replay.
    (
        "HugePandaCoder__octree-nca-groupeq__mem_snapshots_cuda_single_step",
        &[],
        "HugePandaCoder__octree-nca-groupeq__mem_snapshots_cuda_single_step",
    ),
    // Two devices; a `snapshot` entry (dict line); a free of an allocation made before the trace.
    (
        "Muduard__LayoutEditing__dump_snapshot__7bced596",
        &[],
        "Muduard__LayoutEditing__dump_snapshot__7bced596",
    ),
    (
        "Muduard__LayoutEditing__dump_snapshot__7bced596",
        &["--device", "1"],
        "Muduard__LayoutEditing__dump_snapshot__7bced596--device-1",
    ),
    // Names past z (a1, b1, …) and their reuse.
    (
        "drisspg__transformer_nuggets__test_data_mini_snapshot",
        &[],
        "drisspg__transformer_nuggets__test_data_mini_snapshot",
    ),
    // cudaFree of trace segments, reused names, allocations inside snapshot segments (seg_<i>).
    (
        "HugePandaCoder__octree-nca-groupeq__mem_snapshots_inference2_peso_oct",
        &[],
        "HugePandaCoder__octree-nca-groupeq__mem_snapshots_inference2_peso_oct",
    ),
    // Bare list of segments (upstream: KeyError) and a dict whose traces are all empty.
    (
        "Muduard__LayoutEditing__memory_snapshot",
        &[],
        "Muduard__LayoutEditing__memory_snapshot",
    ),
    (
        "Maphsge4__select_n__snapshot__bdf4fe2e",
        &[],
        "Maphsge4__select_n__snapshot__bdf4fe2e",
    ),
];

/// The first line where `got` and `want` differ, for the failure message.
fn first_difference(got: &str, want: &str) -> String {
    let (mut g, mut w) = (got.lines(), want.lines());
    let mut n = 1;
    loop {
        match (g.next(), w.next()) {
            (None, None) => return "same lines, different line endings".into(),
            (a, b) if a == b => n += 1,
            (a, b) => return format!("line {n}: got {a:?}, golden {b:?}"),
        }
    }
}

#[test]
fn trace_output_matches_golden_files() {
    let Some(snapshots) = memlens_fixture::shared_snapshots() else {
        return;
    };
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    let golden_dir = repo_root().join("tests/golden/trace");
    let mut problems = Vec::new();
    for (stem, args, golden) in CASES {
        let Some(file) = snapshots
            .iter()
            .find(|p| p.file_stem().is_some_and(|s| s == *stem))
        else {
            println!("SKIP: {stem}.pickle not found");
            continue;
        };
        let out = match Command::new(env!("CARGO_BIN_EXE_memlens"))
            .arg("trace")
            .arg(file)
            .args(*args)
            .output()
        {
            Ok(o) => o,
            Err(e) => panic!("cannot run memlens: {e}"),
        };
        if !out.status.success() {
            problems.push(format!(
                "{stem} {args:?}: exit {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            continue;
        }
        let got = String::from_utf8_lossy(&out.stdout);
        let path = golden_dir.join(format!("{golden}.txt"));
        if update {
            if let Err(e) = std::fs::create_dir_all(&golden_dir)
                .and_then(|()| std::fs::write(&path, got.as_bytes()))
            {
                panic!("cannot write {}: {e}", path.display());
            }
            println!("updated {}", path.display());
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(want) if want == got => {}
            Ok(want) => problems.push(format!(
                "{}: {}",
                path.display(),
                first_difference(&got, &want)
            )),
            Err(e) => problems.push(format!(
                "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
                path.display()
            )),
        }
    }
    assert!(
        problems.is_empty(),
        "memlens trace differs from the golden files:\n{}",
        problems.join("\n")
    );
}

#[test]
fn first_difference_names_the_line() {
    assert_eq!(
        first_difference("a\nb\nc\n", "a\nb\nd\n"),
        "line 3: got Some(\"c\"), golden Some(\"d\")"
    );
    assert_eq!(
        first_difference("a\n", "a\nb\n"),
        "line 2: got None, golden Some(\"b\")"
    );
}
