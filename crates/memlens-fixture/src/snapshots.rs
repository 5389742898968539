//! The real snapshots tests run over: the `*.pickle` files of `../shared/snapshots` beside the
//! workspace (never copied into it). Where the folder is absent a test skips with a notice; under
//! `MEMLENS_NO_SKIP=1` (set in CI) a missing or empty folder fails the test instead.

use std::path::{Path, PathBuf};

/// Set to `1`: tests over the shared snapshots fail instead of skipping when there are none.
pub const NO_SKIP_VAR: &str = "MEMLENS_NO_SKIP";
/// Another folder to read instead of `../shared/snapshots` (e.g. to check the skip rule).
pub const SNAPSHOTS_DIR_VAR: &str = "MEMLENS_SHARED_SNAPSHOTS";

/// `../shared/snapshots` relative to the workspace root, or the folder `MEMLENS_SHARED_SNAPSHOTS`
/// names.
pub fn shared_snapshots_dir() -> PathBuf {
    match std::env::var_os(SNAPSHOTS_DIR_VAR) {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/snapshots"),
    }
}

/// The sorted `*.pickle` files of [`shared_snapshots_dir`]; `None` (after printing a SKIP
/// notice) when the folder cannot be read. Panics under `MEMLENS_NO_SKIP=1` when the folder is
/// missing or holds no pickle; otherwise an empty folder gives `Some` of nothing, for the test
/// to judge.
pub fn shared_snapshots() -> Option<Vec<PathBuf>> {
    let dir = shared_snapshots_dir();
    let no_skip = std::env::var_os(NO_SKIP_VAR).is_some_and(|v| v == "1");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        assert!(
            !no_skip,
            "the shared snapshots are missing ({NO_SKIP_VAR}=1): {}",
            dir.display()
        );
        println!(
            "SKIP: {} not found; tests over real snapshots skipped",
            dir.display()
        );
        return None;
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "pickle"))
        .collect();
    files.sort();
    assert!(
        !(no_skip && files.is_empty()),
        "no *.pickle in the shared snapshots ({NO_SKIP_VAR}=1): {}",
        dir.display()
    );
    Some(files)
}
