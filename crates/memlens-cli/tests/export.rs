//! `memlens export --format parquet`: DuckDB (python package `duckdb`) reads the tables and its
//! sums equal `memlens stats --json` for every fixture, synth files with several devices and
//! every real snapshot of ../shared/snapshots (tests/python/export_check.py says what is
//! summed); names like `rank_3_...` give the rank column. Bad input exits 2 naming the file; an
//! export into a folder that holds one is refused. Without python3 or duckdb the DuckDB test
//! skips with a notice, or fails under MEMLENS_NO_SKIP=1 (scripts/setup.sh installs duckdb).

use memlens_fixture::python;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::memlens;

fn tmp(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    p
}

/// Every fixture as its file (named `rank_N_NAME`), two synth files with two devices.
fn inputs(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for (i, (path, text)) in memlens_fixture::fixture_texts().iter().enumerate() {
        let fx = memlens_fixture::parse(text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let bytes = fx.to_bytes().unwrap_or_else(|e| panic!("{e}"));
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let out = dir.join(format!("rank_{i}_{stem}.{}", fx.options().form.extension()));
        std::fs::write(&out, bytes).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
        files.push(out.to_string_lossy().into_owned());
    }
    for w in ["training", "leak"] {
        let out = dir
            .join(format!("synth_{w}.pickle"))
            .to_string_lossy()
            .into_owned();
        let r = memlens(&[
            "synth",
            "-q",
            "--workload",
            w,
            "--events",
            "30000",
            "--devices",
            "2",
            "-o",
            &out,
        ]);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        files.push(out);
    }
    files
}

fn duckdb_python() -> Option<&'static str> {
    let no_skip = std::env::var_os("MEMLENS_NO_SKIP").is_some_and(|v| v == "1");
    let py = python().filter(|py| {
        Command::new(py)
            .args(["-c", "import duckdb"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    assert!(
        py.is_some() || !no_skip,
        "python3 with duckdb is needed (MEMLENS_NO_SKIP=1); scripts/setup.sh installs it"
    );
    if py.is_none() {
        println!("SKIP: python3 with the duckdb package not found; the DuckDB check is skipped");
    }
    py
}

/// Exports `files`, then has DuckDB check the tables against `memlens stats --json`.
fn export_and_check(name: &str, files: &[String]) {
    let Some(py) = duckdb_python() else { return };
    let out = tmp(name);
    let dir = out.join("tables").to_string_lossy().into_owned();
    let mut args = vec!["export", "--format", "parquet", "-o", &dir];
    args.extend(files.iter().map(String::as_str));
    let r = memlens(&args);
    assert!(
        r.status.success(),
        "export: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    let mut args = vec!["stats", "--json"];
    args.extend(files.iter().map(String::as_str));
    let stats = memlens(&args);
    assert!(
        stats.status.success(),
        "{}",
        String::from_utf8_lossy(&stats.stderr)
    );
    let jsonl = out.join("stats.jsonl");
    std::fs::write(&jsonl, &stats.stdout).unwrap_or_else(|e| panic!("{e}"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/python/export_check.py");
    let r = Command::new(py)
        .arg(script)
        .arg(&dir)
        .arg(&jsonl)
        .output()
        .unwrap_or_else(|e| panic!("running {py}: {e}"));
    let report = String::from_utf8_lossy(&r.stdout);
    println!("{report}");
    assert!(
        r.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let ok = report.lines().filter(|l| l.starts_with("ok ")).count();
    assert_eq!(ok, files.len(), "{report}");
}

#[test]
fn duckdb_sums_equal_stats_on_fixtures_and_synth_files() {
    let dir = tmp("export_inputs");
    let files = inputs(&dir);
    assert!(files.len() >= 15, "{files:?}");
    export_and_check("export_fixtures", &files);
}

#[test]
fn duckdb_sums_equal_stats_on_real_snapshots() {
    let Some(files) = memlens_fixture::shared_snapshots() else {
        return;
    };
    assert!(!files.is_empty(), "no real snapshots");
    let files: Vec<String> = files
        .iter()
        .map(|f| f.to_string_lossy().into_owned())
        .collect();
    export_and_check("export_real", &files);
}

#[test]
fn bad_input_exits_2_naming_the_file_and_the_others_are_written() {
    let dir = tmp("export_bad");
    let good = dir.join("rank_1.json");
    std::fs::write(
        &good,
        br#"{"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 512}]]}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let bad = dir.join("rank_2.pickle");
    std::fs::write(&bad, b"\x80\x04not a pickle").unwrap_or_else(|e| panic!("{e}"));
    let (g, b) = (good.to_string_lossy(), bad.to_string_lossy());
    let out = dir.join("out").to_string_lossy().into_owned();
    let r = memlens(&["export", "-o", &out, &g, &b]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.trim_end().ends_with(b.as_ref()), "{err}");
    let written =
        |table: &str| std::fs::read_dir(Path::new(&out).join(table)).map_or(0, Iterator::count);
    assert_eq!(
        written("trace"),
        1,
        "the good file's part is written, the bad one's not"
    );
    let again = memlens(&["export", "-o", &out, &g]);
    let err = String::from_utf8_lossy(&again.stderr);
    assert_eq!(again.status.code(), Some(2), "{err}");
    assert!(err.contains("already holds an export"), "{err}");
}

/// The README's query (the first `duckdb -c "..."` block) on two runs of three ranks finds the
/// rank whose timeline peak grew most by `memlens stats --json`.
#[test]
fn the_readme_query_finds_the_rank_whose_peak_grew_most() {
    let Some(py) = duckdb_python() else { return };
    let dir = tmp("export_runs");
    let mut peaks: Vec<Vec<i64>> = Vec::new();
    for (run, workload) in [("base", "training"), ("new", "leak")] {
        let mut files = Vec::new();
        for rank in 0..3 {
            let f = dir
                .join(format!("{run}_rank_{rank}.pickle"))
                .to_string_lossy()
                .into_owned();
            let seed = (rank * 7 + run.len()).to_string();
            let events = (6000 + rank * 3000).to_string();
            let r = memlens(&[
                "synth",
                "-q",
                "--workload",
                workload,
                "--events",
                &events,
                "--seed",
                &seed,
                "-o",
                &f,
            ]);
            assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
            files.push(f);
        }
        let out = dir
            .join(format!("{run}.tables"))
            .to_string_lossy()
            .into_owned();
        let mut args = vec!["export", "-o", &out];
        args.extend(files.iter().map(String::as_str));
        let r = memlens(&args);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        peaks.push(
            files
                .iter()
                .map(|f| {
                    let st: serde_json::Value =
                        serde_json::from_slice(&memlens(&["stats", "--json", f]).stdout)
                            .unwrap_or_else(|e| panic!("{e}"));
                    st["devices"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|d| d["timeline_peak_bytes"].as_i64())
                        .max()
                        .unwrap_or(0)
                })
                .collect(),
        );
    }
    let growth: Vec<i64> = (0..3).map(|r| peaks[1][r] - peaks[0][r]).collect();
    let want = (0..3).max_by_key(|&r| growth[r]).unwrap_or(0);
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap_or_else(|e| panic!("{e}"));
    let query = readme
        .split("duckdb -c \"")
        .nth(1)
        .and_then(|q| q.split('"').next())
        .unwrap_or_else(|| panic!("no duckdb query in the README"))
        .replace("'base.tables/", &format!("'{}/base.tables/", dir.display()))
        .replace("'new.tables/", &format!("'{}/new.tables/", dir.display()));
    let code = "import duckdb, json, sys\nprint(json.dumps([[int(x) for x in r] for r in duckdb.sql(sys.argv[1]).fetchall()]))";
    let r = Command::new(py)
        .args(["-c", code, &query])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        r.status.success(),
        "{}\n{query}",
        String::from_utf8_lossy(&r.stderr)
    );
    let rows: Vec<Vec<i64>> = serde_json::from_slice(&r.stdout).unwrap_or_else(|e| panic!("{e}"));
    let w = want as i64;
    assert_eq!(
        rows,
        vec![vec![w, peaks[0][want], peaks[1][want], growth[want]]],
        "growth by rank {growth:?}"
    );
}
