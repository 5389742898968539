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

/// Loads several files at once on all cores (at most one thread per file) and maps each
/// snapshot with `f(position, path, snapshot)` on the thread that loaded it; results in the
/// order given.
pub fn map_files<T: Send>(
    files: &[String],
    f: impl Fn(usize, &str, Snapshot) -> T + Sync,
) -> Vec<Result<T, CliError>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len())
        .max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<Option<Result<T, CliError>>> = (0..files.len()).map(|_| None).collect();
    let slots = std::sync::Mutex::new(&mut out);
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(path) = files.get(i) else { break };
                let r = load(path).map(|s| f(i, path, s));
                if let Ok(mut g) = slots.lock() {
                    g[i] = Some(r);
                }
            });
        }
    });
    out.into_iter()
        .map(|r| r.unwrap_or_else(|| Err(CliError("a reader thread failed".into()))))
        .collect()
}

/// Reports [`map_files`]'s results in the order given: `line` writes a file's text (one JSON
/// line, or its summary lines) to stdout; the files that did not load are named on stderr, the
/// last one as the returned error (exit status 2).
pub fn report_files<T>(
    files: &[String],
    results: Vec<Result<T, CliError>>,
    mut line: impl FnMut(&mut String, &str, T) -> Result<(), CliError>,
) -> Result<(), CliError> {
    use std::io::Write;
    let mut t = String::new();
    let mut failed = Vec::new();
    for (file, r) in files.iter().zip(results) {
        match r {
            Ok(v) => line(&mut t, file, v)?,
            Err(e) => failed.push(e),
        }
    }
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(t.as_bytes()).and_then(|()| out.flush());
    let last = failed.pop();
    for e in failed {
        eprintln!("memlens: {e}");
    }
    last.map_or(Ok(()), Err)
}
