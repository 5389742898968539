//! Golden tests over the project's own fixtures (`tests/fixtures/*.txt`): each is rebuilt with
//! `memlens_fixture`, run through `memlens stats --json`, and compared with
//! `tests/golden/stats/<name>.json`; the committed binaries in `tests/fixtures/bin/` must equal
//! what the builder writes now. `UPDATE_GOLDEN=1 cargo test -p memlens-cli --test
//! fixtures_golden` rewrites both (review the diff).

use std::process::Command;

mod common;
use common::{repo_root, scratch_dir};

fn update() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1")
}

/// (name, fixture text) of every fixture, sorted by name.
fn fixtures() -> Vec<(String, String)> {
    let dir = memlens_fixture::fixtures_dir();
    let out: Vec<(String, String)> = memlens_fixture::fixture_texts()
        .into_iter()
        .map(|(p, text)| {
            let name = p.file_stem().map(|s| s.to_string_lossy().into_owned());
            (name.unwrap_or_default(), text)
        })
        .collect();
    assert!(
        out.len() >= 15,
        "expected the fixture set in {}, found {}",
        dir.display(),
        out.len()
    );
    out
}

/// Fixtures whose bytes are committed under tests/fixtures/bin (one per format variant).
const COMMITTED: &[&str] = &[
    "p2_snapshot",
    "p3_snapshot",
    "p4_snapshot",
    "p5_snapshot",
    "segments_list",
    "torch20_legacy",
    "no_time_no_frames",
    "json_snapshot",
    "trace_plot_html",
    "segment_plot_html_p5",
    "annotated",
];

fn build(name: &str, text: &str) -> (Vec<u8>, &'static str) {
    let fx =
        memlens_fixture::parse(text).unwrap_or_else(|e| panic!("tests/fixtures/{name}.txt: {e}"));
    let bytes = fx.to_bytes().unwrap_or_else(|e| panic!("{name}: {e}"));
    (bytes, fx.options().form.extension())
}

#[test]
fn stats_json_matches_golden() {
    let dir = scratch_dir("fixtures-golden");
    let golden_dir = repo_root().join("tests/golden/stats");
    let mut failures = Vec::new();
    for (name, text) in fixtures() {
        let (bytes, ext) = build(&name, &text);
        let file = dir.join(format!("{name}.{ext}"));
        std::fs::write(&file, &bytes).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let out = Command::new(env!("CARGO_BIN_EXE_memlens"))
            .args(["stats", "--json"])
            .arg(&file)
            .output()
            .unwrap_or_else(|e| panic!("running memlens: {e}"));
        assert!(
            out.status.success(),
            "memlens stats --json {name}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let got = String::from_utf8_lossy(&out.stdout).into_owned();
        let golden = golden_dir.join(format!("{name}.json"));
        if update() {
            std::fs::create_dir_all(&golden_dir).unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(&golden, &got).unwrap_or_else(|e| panic!("{}: {e}", golden.display()));
            continue;
        }
        match std::fs::read_to_string(&golden) {
            Ok(want) if want == got => {}
            Ok(want) => failures.push(format!(
                "{name}: stats differ from {}\n--- want\n{want}\n--- got\n{got}",
                golden.display()
            )),
            Err(e) => failures.push(format!(
                "{name}: {}: {e} (run with UPDATE_GOLDEN=1 to create it)",
                golden.display()
            )),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn committed_binaries_are_what_the_builder_writes() {
    let all = fixtures();
    let bin_dir = repo_root().join("tests/fixtures/bin");
    let mut failures = Vec::new();
    for &name in COMMITTED {
        let Some((_, text)) = all.iter().find(|(n, _)| n == name) else {
            failures.push(format!("{name}: no tests/fixtures/{name}.txt"));
            continue;
        };
        let (bytes, ext) = build(name, text);
        let path = bin_dir.join(format!("{name}.{ext}"));
        if update() {
            std::fs::write(&path, &bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            continue;
        }
        match std::fs::read(&path) {
            Ok(want) if want == bytes => {}
            Ok(want) => failures.push(format!(
                "{}: {} committed bytes, the builder now writes {} (different); if intended, UPDATE_GOLDEN=1",
                path.display(),
                want.len(),
                bytes.len()
            )),
            Err(e) => failures.push(format!("{}: {e}", path.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn golden_device(name: &str, device: usize) -> serde_json::Value {
    let p = repo_root().join(format!("tests/golden/stats/{name}.json"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    v["devices"][device].clone()
}

/// Numbers worked out by hand from the fixture texts (see their header comments), so a golden
/// file cannot be regenerated into something wrong unnoticed.
#[test]
fn golden_numbers_checked_by_hand() {
    const MIB: i64 = 1 << 20;
    let p4 = golden_device("p4_snapshot", 0);
    assert_eq!(p4["reserved_bytes"], 22 * MIB);
    assert_eq!(p4["allocated_bytes"], 16 * MIB + 1024);
    assert_eq!(p4["requested_bytes"], 2 * 4_194_304 + 8_000_000 + 800);
    assert_eq!(p4["largest_free_block_bytes"], 4 * MIB);
    assert_eq!(p4["inactive_split_bytes"], 4 * MIB + 2 * MIB - 1024);
    assert_eq!(p4["timeline_baseline_bytes"], 0);
    assert_eq!(p4["timeline_peak_bytes"], 16_389_408 + 4 * MIB);
    assert_eq!(p4["peak_reserved_bytes"], 22 * MIB);
    assert_eq!(p4["trace_entries"], 10);
    // protocol 2 and 5 variants hold the same numbers (same snapshot, other encodings)
    assert_eq!(
        golden_device("p2_snapshot", 0)["timeline_peak_bytes"],
        p4["timeline_peak_bytes"]
    );

    let legacy = golden_device("torch20_legacy", 0);
    // history[0].real_size of the active and pending-free blocks, no requested_size keys
    assert_eq!(legacy["requested_bytes"], 5_000_000 + 2_000_000 + 1000);
    assert_eq!(legacy["active_bytes"], 7 * MIB + 1024);
    assert_eq!(legacy["allocated_bytes"], 5 * MIB + 1024);

    let exp = golden_device("expandable_segments", 0);
    assert_eq!(exp["reserved_bytes"], 40 * MIB);
    assert_eq!(exp["peak_reserved_bytes"], 60 * MIB);
    assert_eq!(exp["actions"]["segment_map"], 3);

    let multi1 = golden_device("multi_device", 1);
    assert_eq!(multi1["device"], 1);
    assert_eq!(multi1["reserved_bytes"], 22 * MIB);
    assert_eq!(multi1["timeline_peak_bytes"], 8_000_000 + 8_388_608 + MIB);
    assert_eq!(golden_device("multi_device", 2)["trace_entries"], 0);

    let odd = golden_device("oddities", 0);
    // 4000000 live now - (4000000 + 16MiB allocated by the trace) + 9MiB freed that it never allocated
    assert_eq!(odd["timeline_baseline_bytes"], -7 * MIB);
    assert_eq!(odd["timeline_peak_bytes"], 4_000_000);
    let oom = golden_device("oom", 0);
    assert_eq!(oom["actions"]["oom"], 1);
    assert_eq!(oom["peak_reserved_bytes"], 1024 * MIB + 20 * MIB);
}
