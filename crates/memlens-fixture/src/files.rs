//! The fixtures the tests run over: the `*.txt` files of the workspace's `tests/fixtures`, with
//! their text, sorted by path. A missing or unreadable folder or file fails the test: the
//! fixtures are part of the repository.

use std::path::{Path, PathBuf};

/// `tests/fixtures` of the workspace.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// (path, text) of every `tests/fixtures/*.txt`, sorted by path.
pub fn fixture_texts() -> Vec<(PathBuf, String)> {
    let dir = fixtures_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text =
                std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p, text)
        })
        .collect()
}

/// (`"NAME pP"`, bytes) of every fixture written as a pickle at each protocol of `protocols`
/// (fixtures written as JSON or HTML left out).
pub fn fixture_pickles(protocols: std::ops::RangeInclusive<u8>) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (p, text) in fixture_texts() {
        let fx = crate::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        for protocol in protocols.clone() {
            let Ok(bytes) = fx.clone().with_protocol(protocol).to_bytes() else {
                continue;
            };
            if memlens_core::raw::sniff(&bytes).ok() == Some(memlens_core::raw::Sniff::Pickle) {
                let name = p.file_stem().and_then(|s| s.to_str()).unwrap_or("?");
                out.push((format!("{name} p{protocol}"), bytes));
            }
        }
    }
    out
}

/// (file name, bytes) of every real snapshot [`crate::shared_snapshots`] finds (none where it
/// skips).
pub fn shared_snapshot_bytes() -> Vec<(String, Vec<u8>)> {
    let Some(paths) = crate::shared_snapshots() else {
        return Vec::new();
    };
    paths
        .into_iter()
        .filter_map(|p| {
            let b = std::fs::read(&p).ok()?;
            Some((p.file_name()?.to_string_lossy().into_owned(), b))
        })
        .collect()
}
