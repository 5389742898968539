//! Bad input through every `memlens` command: exit status 2, nothing on stdout, and exactly one
//! line on stderr, `memlens: <what is wrong>: <file>`, naming the problem with the file last.

use std::path::Path;

mod common;
use common::{good_snapshot, run, scratch_dir};

/// (file name, contents, a fragment the one-line message must hold)
fn bad_files(good: &[u8]) -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let mut global = b"\x80\x04\x95\x12\x00\x00\x00\x00\x00\x00\x00".to_vec();
    global.extend_from_slice(b"cos\nsystem\n\x8c\x02id\x85R.");
    let mut huge = b"\x80\x05\x8d".to_vec();
    huge.extend_from_slice(&(1u64 << 40).to_le_bytes());
    huge.extend_from_slice(b"x.");
    vec![
        ("empty.pickle", Vec::new(), "empty input"),
        (
            "truncated.pickle",
            good.get(..good.len() / 2).unwrap_or_default().to_vec(),
            "truncated",
        ),
        (
            "global.pickle",
            global,
            "refused pickle opcode GLOBAL (0x63) at byte 11",
        ),
        ("huge_length.pickle", huge, "length 1099511627776 at byte 2"),
        (
            "unknown_opcode.pickle",
            b"\x80\x04\xff.".to_vec(),
            "unknown pickle opcode 0xff at byte 2",
        ),
        (
            "protocol9.pickle",
            b"\x80\x09N.".to_vec(),
            "unsupported pickle protocol 9",
        ),
        (
            "not_a_snapshot.json",
            b"{\"hello\": 1}".to_vec(),
            "not a memory snapshot",
        ),
        ("broken.json", b"{\"segments\": [".to_vec(), "invalid JSON"),
        (
            "plain.html",
            b"<!DOCTYPE html><html><body>hi</body></html>".to_vec(),
            "no `local_files`",
        ),
        (
            "snapshot.pickle.gz",
            b"\x1f\x8b\x08\x00\x00\x00\x00\x00".to_vec(),
            "gzip",
        ),
        (
            "an int.pickle",
            b"\x80\x04K\x07.".to_vec(),
            "top-level value is an int",
        ),
        (
            "wrong types.json",
            br#"{"segments": "nope", "device_traces": 5}"#.to_vec(),
            "not a memory snapshot: no usable segment or trace entry ('segments' is a string, not a list; 'device_traces' is an int, not a list)",
        ),
        (
            "wrong types.pickle",
            wrong_types_pickle(),
            "not a memory snapshot: no usable segment or trace entry ('segments' is a string, not a list; 'device_traces' is an int, not a list)",
        ),
        (
            "no trace entries.json",
            br#"{"segments": [7], "device_traces": [[{"size": 1}], "x"]}"#.to_vec(),
            "no usable segment or trace entry (segment 0 is an int, not a dict; device_traces[0]: 1 entries are not trace entries",
        ),
    ]
}

/// `{"segments": "nope", "device_traces": 5}` as torch would pickle it.
fn wrong_types_pickle() -> Vec<u8> {
    let mut w = memlens_core::write::PickleWriter::new(Vec::new(), 4);
    w.begin_dict();
    let written = w
        .str("segments")
        .and_then(|()| w.str("nope"))
        .and_then(|()| w.str("device_traces"))
        .and_then(|()| w.int(5))
        .and_then(|()| w.end().map(drop));
    written.unwrap_or_else(|e| panic!("{e}"));
    w.finish().unwrap_or_else(|e| panic!("{e}"))
}

fn check(args: &[&str], file: &str, fragment: &str) {
    let (code, stdout, stderr) = run(args);
    let shown = format!("memlens {}", args.join(" "));
    assert_eq!(code, 2, "{shown}: exit status (stderr: {stderr})");
    assert!(stdout.is_empty(), "{shown}: printed to stdout: {stdout}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "{shown}: want one line on stderr, got {stderr:?}"
    );
    let line = lines.first().copied().unwrap_or_default();
    assert!(line.starts_with("memlens: "), "{shown}: {line}");
    assert!(
        line.ends_with(&format!(": {file}")),
        "{shown}: the file must come last: {line}"
    );
    assert!(
        line.contains(fragment),
        "{shown}: want {fragment:?} in {line}"
    );
}

#[test]
fn every_command_reports_bad_input_in_one_line_and_exits_2() {
    let dir = scratch_dir("bad-input");
    let good = good_snapshot(&dir, "good.pickle");
    let good_s = good.to_string_lossy().into_owned();
    let good_bytes = std::fs::read(&good).unwrap_or_default();
    let svg = dir.join("out.svg").to_string_lossy().into_owned();
    let tables = dir.join("tables").to_string_lossy().into_owned();
    for (name, bytes, fragment) in bad_files(&good_bytes) {
        let path = dir.join(name);
        std::fs::write(&path, &bytes).unwrap_or_else(|e| panic!("{e}"));
        let f = path.to_string_lossy().into_owned();
        check(&["stats", &f], &f, fragment);
        check(&["stats", "--json", &f], &f, fragment);
        check(&["trace", &f], &f, fragment);
        check(&["segments", &f, "-o", &svg], &f, fragment);
        check(&["memory", &f, "-o", &svg], &f, fragment);
        check(&["compare", &f, &good_s, "-o", &svg], &f, fragment);
        check(&["compare", &good_s, &f, "-o", &svg], &f, fragment);
        check(&["export", &f, "-o", &tables], &f, fragment);
    }
    let missing = dir
        .join("no such file.pickle")
        .to_string_lossy()
        .into_owned();
    check(&["stats", &missing], &missing, "cannot read file");
    assert!(
        !Path::new(&svg).exists(),
        "no SVG may be written for bad input"
    );
    // a partly wrong file opens, its warnings printed
    let partly = dir.join("partly wrong.json");
    let seg = r#"{"device": 0, "address": 4096, "total_size": 512, "stream": 0, "segment_type": "small", "blocks": [{"size": 512, "state": "inactive", "address": 4096}]}"#;
    let doc = format!(r#"{{"segments": [{seg}], "device_traces": 5}}"#);
    std::fs::write(&partly, doc).unwrap_or_else(|e| panic!("{e}"));
    let (code, stdout, stderr) = run(&["stats", &partly.to_string_lossy()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("warning: 'device_traces' is an int, not a list; ignored"),
        "{stdout}"
    );
    // and the good file is fine, so the failures above are about the input
    let (code, _, stderr) = run(&["stats", &good_s]);
    assert_eq!(code, 0, "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
