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
