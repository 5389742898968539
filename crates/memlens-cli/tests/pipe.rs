//! `memlens trace FILE | head`, `memlens stats --json FILE | true`: a reader that goes away must
//! end memlens quietly (exit 0, nothing on stderr), not with a "failed printing to stdout" panic.

use std::io::Read;
use std::process::{Command, Stdio};

mod common;
use common::{scratch_dir, synth_workload};

#[test]
fn closed_stdout_ends_quietly() {
    let bin = env!("CARGO_BIN_EXE_memlens");
    let dir = scratch_dir("pipe");
    let snap = dir.join("s.pickle");
    synth_workload(&snap, "training", "20000", "3");
    let mut child = Command::new(bin)
        .arg("trace")
        .arg(&snap)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run trace: {e}"));
    let mut out = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut first = [0u8; 256];
    out.read_exact(&mut first)
        .unwrap_or_else(|e| panic!("read: {e}"));
    drop(out); // the reader goes away, like `head`
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).unwrap_or_default();
    }
    let status = child.wait().unwrap_or_else(|e| panic!("wait: {e}"));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        String::from_utf8_lossy(&first).starts_with("Device 0"),
        "{}",
        String::from_utf8_lossy(&first)
    );
    assert!(err.is_empty(), "stderr: {err}");
    assert_eq!(status.code(), Some(0));
}

#[test]
fn reader_gone_before_the_first_line_ends_quietly() {
    let bin = env!("CARGO_BIN_EXE_memlens");
    let dir = scratch_dir("pipe2");
    let snap = dir.join("s.pickle");
    synth_workload(&snap, "training", "50000", "4");
    for args in [&["stats", "--json"][..], &["stats"][..]] {
        let mut child = Command::new(bin)
            .args(args)
            .arg(&snap)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("run: {e}"));
        drop(child.stdout.take()); // gone before memlens has decoded the file
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            e.read_to_string(&mut err).unwrap_or_default();
        }
        let status = child.wait().unwrap_or_else(|e| panic!("wait: {e}"));
        assert!(err.is_empty(), "{args:?}: stderr: {err}");
        assert_eq!(status.code(), Some(0), "{args:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
