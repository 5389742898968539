//! Reading snapshot files at the edge: the file path is appended last to every error.

use memlens_core::Snapshot;
use std::fmt;
use std::io::Read;

/// A one-line error for the user.
#[derive(Debug)]
pub struct CliError(pub String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Reads a file (`-` for stdin) fully.
pub fn read_bytes(path: &str) -> Result<Vec<u8>, CliError> {
    if path == "-" {
        let mut v = Vec::new();
        std::io::stdin()
            .read_to_end(&mut v)
            .map_err(|e| CliError(format!("cannot read stdin: {e}")))?;
        return Ok(v);
    }
    std::fs::read(path).map_err(|e| CliError(format!("cannot read file: {e}: {path}")))
}

/// Loads a snapshot, naming the file last on failure. Files are streamed in chunks, so memory
/// holds the model, not the file.
pub fn load(path: &str) -> Result<Snapshot, CliError> {
    if path == "-" {
        let bytes = read_bytes(path)?;
        return memlens_core::load(&bytes).map_err(|e| CliError(format!("{e}: <stdin>")));
    }
    let f = std::fs::File::open(path)
        .map_err(|e| CliError(format!("cannot read file: {e}: {path}")))?;
    let len = f.metadata().ok().map(|m| m.len());
    if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        return Err(CliError(format!("is a directory, not a snapshot: {path}")));
    }
    memlens_core::load_reader(f, len).map_err(|e| CliError(format!("{e}: {path}")))
}
