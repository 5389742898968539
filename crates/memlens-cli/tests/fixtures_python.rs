//! An independent reading of every fixture: python3's own `pickle`/`json` modules load the bytes
//! the builder writes (pickles, the pickle inside the HTML pages, JSON), the stats computed
//! from them by `tests/python/stats_ref.py` equal the golden files, pickles carry the opcodes
//! CPython writes for the same objects, and frames are shared by memo
//! (`tests/python/fixtures_check.py` says exactly what is checked). Skipped, with a notice, when
//! python3 is not installed.

use std::path::Path;
use std::process::Command;

#[test]
fn python_reads_every_fixture_as_memlens_does() {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("NOTICE: python3 not found; skipping the Python cross-check of the fixtures");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = std::env::temp_dir().join(format!("memlens-fixtures-python-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut files = Vec::new();
    let entries = std::fs::read_dir(root.join("tests/fixtures")).unwrap_or_else(|e| panic!("{e}"));
    for e in entries.flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "txt") {
            continue;
        }
        let name = p
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let fx = memlens_fixture::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let bytes = fx.to_bytes().unwrap_or_else(|e| panic!("{name}: {e}"));
        let out = dir.join(format!("{name}.{}", fx.options().form.extension()));
        std::fs::write(&out, bytes).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
        files.push(out);
    }
    files.sort();
    assert!(files.len() >= 15, "found {} fixtures", files.len());
    let out = Command::new("python3")
        .arg(root.join("tests/python/fixtures_check.py"))
        .arg(root.join("tests/golden/stats"))
        .args(&files)
        .output()
        .unwrap_or_else(|e| panic!("running python3: {e}"));
    let report = String::from_utf8_lossy(&out.stdout);
    println!("{report}");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        report.lines().filter(|l| l.starts_with("ok ")).count(),
        files.len(),
        "{report}"
    );
}
