//! What the `memlens` CLI tests share: running the built binary, reading its JSON, the repo
//! root, scratch folders and the small snapshots the tests write. Each test file takes it with
//! `mod common;` and uses only some of it, hence the `dead_code` allowance.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The repository root (the fixtures, goldens and python references are found from it).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the built `memlens` with `args` and returns what it did.
pub fn memlens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_memlens"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run memlens {args:?}: {e}"))
}

/// Runs `memlens` with `args`: (exit code, or -1 for a signal; stdout; stderr).
pub fn run(args: &[&str]) -> (i32, String, String) {
    let out = memlens(args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The stdout of `memlens ARGS`; fails the test when it exits non-zero.
pub fn ok(args: &[&str]) -> String {
    let (code, stdout, stderr) = run(args);
    assert_eq!(code, 0, "memlens {}: {stderr}", args.join(" "));
    stdout
}

/// The JSON `what` printed, or why there is none (a failed exit, invalid JSON).
pub fn parse(what: &str, out: &Output) -> Result<Value, String> {
    if !out.status.success() {
        return Err(format!(
            "{what} exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("{what} printed invalid JSON: {e}"))
}

/// The JSON `what` printed; fails the test when it exited non-zero or printed no JSON.
pub fn json(out: &Output, what: &str) -> Value {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{what}: bad JSON: {e}"))
}

/// The `devices` array of a stats/diagnose report (empty when absent).
pub fn devices(v: &Value) -> Vec<Value> {
    v.get("devices")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The devices of two readings of one file, paired in order; or, when their device ids differ,
/// the one message `NAME: devices: python [...], memlens [...]`.
pub fn paired_devices(
    name: &str,
    reference: &Value,
    ours: &Value,
) -> Result<Vec<(Value, Value)>, String> {
    let (r, o) = (devices(reference), devices(ours));
    let ids = |v: &[Value]| {
        v.iter()
            .map(|d| d.get("device").cloned().unwrap_or(Value::Null))
            .collect::<Vec<_>>()
    };
    if ids(&r) != ids(&o) {
        return Err(format!(
            "{name}: devices: python {:?}, memlens {:?}",
            ids(&r),
            ids(&o)
        ));
    }
    Ok(r.into_iter().zip(o).collect())
}

/// Runs `PY SCRIPT FILE` and `memlens ARGS FILE` at once (each reads the file once) and returns
/// (ours, the reference): the JSON each printed; or why one has none (memlens's failure as
/// `does not decode: ...`, the reference's as `reference failed: ...`).
pub fn read_both(
    py: &str,
    script: &Path,
    args: &[&str],
    file: &Path,
) -> Result<(Value, Value), String> {
    let spawn = |cmd: &mut Command| cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    let reference = spawn(Command::new(py).arg(script).arg(file));
    let ours = spawn(
        Command::new(env!("CARGO_BIN_EXE_memlens"))
            .args(args)
            .arg(file),
    );
    let (reference, ours) = match (reference, ours) {
        (Ok(r), Ok(o)) => (r.wait_with_output(), o.wait_with_output()),
        (r, o) => panic!("cannot start the readers: {:?} {:?}", r.err(), o.err()),
    };
    let script_name = script
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let what = format!("memlens {}", args.join(" "));
    let ours = ours
        .map_err(|e| e.to_string())
        .and_then(|o| parse(&what, &o))
        .map_err(|e| format!("does not decode: {e}"))?;
    let reference = reference
        .map_err(|e| e.to_string())
        .and_then(|o| parse(&script_name, &o))
        .map_err(|e| format!("reference failed: {e}"))?;
    Ok((ours, reference))
}

/// Writes `memlens synth -q --workload W --events N --seed S -o PATH`; fails the test if it fails.
pub fn synth_workload(path: &Path, workload: &str, events: &str, seed: &str) {
    let p = path.to_string_lossy().into_owned();
    let out = memlens(&[
        "synth",
        "-q",
        "--workload",
        workload,
        "--events",
        events,
        "--seed",
        seed,
        "-o",
        &p,
    ]);
    assert!(
        out.status.success(),
        "synth {workload}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A folder `memlens-TAG-PID` under the system temp dir (created, not emptied).
pub fn scratch_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("memlens-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
    d
}

/// The pickle bytes of `tests/fixtures/NAME.txt`.
pub fn fixture_bytes(name: &str) -> Vec<u8> {
    let p = repo_root().join(format!("tests/fixtures/{name}.txt"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    memlens_fixture::build(&text).unwrap_or_else(|e| panic!("{e}"))
}

/// The p4 fixture written as `dir/file_name`: a small snapshot every command reads.
pub fn good_snapshot(dir: &Path, file_name: &str) -> PathBuf {
    let out = dir.join(file_name);
    std::fs::write(&out, fixture_bytes("p4_snapshot")).unwrap_or_else(|e| panic!("{e}"));
    out
}

/// The real snapshots of ../shared/snapshots and the Python that reads the references; `None`
/// (the test skips with a notice, or fails under `MEMLENS_NO_SKIP=1` where the snapshots are
/// missing) when either is not there.
pub fn real_snapshots_and_python() -> Option<(Vec<PathBuf>, &'static str)> {
    let files = memlens_fixture::shared_snapshots()?;
    let Some(py) = memlens_fixture::python() else {
        println!("SKIP: python3 not found; the conformance test needs it for the reference");
        return None;
    };
    assert!(!files.is_empty(), "no *.pickle in ../shared/snapshots");
    Some((files, py))
}
