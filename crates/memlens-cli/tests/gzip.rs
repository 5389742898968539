//! gzip-compressed snapshots (`snap.pickle.gz`, or any name: recognised by content) through
//! every verb: the same output as the uncompressed file; a damaged `.gz` is one error line
//! naming the file.

use flate2::write::GzEncoder;
use flate2::Compression;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

mod common;
use common::{fixture_bytes, ok, scratch_dir};

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(bytes).unwrap_or_else(|e| panic!("{e}"));
    e.finish().unwrap_or_else(|e| panic!("{e}"))
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    p
}

fn memlens(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_memlens"));
    c.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap_or_else(|e| panic!("run memlens: {e}"));
    if let Some(mut w) = child.stdin.take() {
        let _ = w.write_all(stdin.unwrap_or_default());
    }
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait memlens: {e}"))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap_or_else(|| panic!("path not UTF-8"))
}

#[test]
fn every_verb_reads_gzip_as_the_plain_file() {
    let dir = scratch_dir("gzip-verbs");
    let plain_bytes = fixture_bytes("oom");
    let plain = write(&dir, "snap.pickle", &plain_bytes);
    let gz = write(&dir, "snap.pickle.gz", &gzip(&plain_bytes));
    // Recognised by content: a compressed file under a plain name reads the same.
    let renamed = write(&dir, "renamed.pickle", &gzip(&plain_bytes));
    let verbs: &[&[&str]] = &[
        &["stats", "--json"],
        &["stats"],
        &["trace"],
        &["segments", "--folded"],
        &["memory", "--folded"],
        &["diagnose", "--json"],
        &["check", "--max-peak", "1TiB"],
    ];
    for v in verbs {
        // Outputs that name the file name it as given.
        let run = |p: &Path| {
            let mut a = v.to_vec();
            a.push(s(p));
            ok(&a).replace(s(p), "FILE")
        };
        let want = run(&plain);
        assert!(
            !want.is_empty() || v.first() == Some(&"check"),
            "{v:?}: no output"
        );
        assert_eq!(run(&gz), want, "{v:?} on the .gz");
        assert_eq!(run(&renamed), want, "{v:?} on a gzip file named .pickle");
    }
    let cmp = ok(&["compare", "--json", s(&plain), s(&gz)]);
    assert!(cmp.contains("\"devices\""), "{cmp}");
    // stdin, compressed.
    let o = memlens(&["stats", "--json", "-"], Some(&gzip(&plain_bytes)));
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        ok(&["stats", "--json", s(&plain)])
    );
    // A report of a .gz embeds the snapshot itself, as for the plain file (when this memlens
    // carries the viewer: html_serve.rs checks the message otherwise).
    let rep_gz = dir.join("gz.html");
    let rep_plain = dir.join("plain.html");
    let o = memlens(&["html", s(&plain), "-o", s(&rep_plain)], None);
    if o.status.code() == Some(0) {
        ok(&["html", s(&gz), "-o", s(&rep_gz)]);
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        // The same page but for the file name (plain vs gz in the embedded name).
        assert!(size(&rep_gz) > 0 && size(&rep_gz).abs_diff(size(&rep_plain)) < 64);
    } else {
        assert!(
            std::env::var_os("MEMLENS_REQUIRE_VIEWER").is_none(),
            "MEMLENS_REQUIRE_VIEWER is set but memlens has no viewer"
        );
        println!("NOTICE: memlens was built without the viewer; the .gz report check is skipped");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_real_snapshot_reads_the_same_compressed() {
    let Some(snaps) = memlens_fixture::shared_snapshots() else {
        return;
    };
    let dir = scratch_dir("gzip-real");
    let Some(big) = snaps
        .iter()
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
    else {
        panic!("no real snapshots");
    };
    let bytes = std::fs::read(big).unwrap_or_else(|e| panic!("{}: {e}", big.display()));
    let gz = write(&dir, "real.pickle.gz", &gzip(&bytes));
    assert_eq!(
        ok(&["stats", "--json", s(&gz)]),
        ok(&["stats", "--json", s(big)])
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_damaged_gzip_is_one_line_naming_the_file() {
    let dir = scratch_dir("gzip-bad");
    let gz = gzip(&fixture_bytes("p4_snapshot"));
    let cut = write(
        &dir,
        "cut.pickle.gz",
        gz.get(..gz.len() / 2).unwrap_or_default(),
    );
    let mut flipped_bytes = gz.clone();
    if let Some(b) = flipped_bytes.get_mut(gz.len() / 2) {
        *b ^= 0xff;
    }
    let flipped = write(&dir, "flipped.pickle.gz", &flipped_bytes);
    for (p, verb) in [(&cut, "stats"), (&flipped, "trace"), (&cut, "diagnose")] {
        let o = memlens(&[verb, s(p)], None);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{verb} {}: {err}", p.display());
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.trim_end().ends_with(s(p)), "{err}");
        if verb != "trace" {
            assert!(err.contains("gzip data damaged or cut short"), "{err}");
        }
        assert!(o.stdout.is_empty());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
