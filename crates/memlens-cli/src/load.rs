//! Reading snapshot files at the edge: the file path is appended last to every error. A
//! gzip-compressed file (`snap.pickle.gz`, or any name: recognised by its magic bytes) is
//! decompressed as it is read, for every verb.

use flate2::bufread::MultiGzDecoder;
use memlens_core::range::EventRange;
use memlens_core::Snapshot;
use std::fmt;
use std::io::{self, BufRead, BufReader, Read};

/// The first two bytes of every gzip member (RFC 1952).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// A one-line error for the user.
#[derive(Debug)]
pub struct CliError(pub String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What `r` holds, decompressed when it starts with gzip's magic bytes; the flag says whether it
/// was compressed.
pub fn content(r: impl Read + 'static) -> io::Result<(Box<dyn BufRead>, bool)> {
    let mut br = BufReader::with_capacity(1 << 20, r);
    let head = br.fill_buf()?;
    if head.starts_with(&GZIP_MAGIC) {
        let gz = GzipErrors(MultiGzDecoder::new(br));
        return Ok((Box::new(BufReader::with_capacity(1 << 20, gz)), true));
    }
    Ok((Box::new(br), false))
}

/// Says "gzip" in the decompressor's errors ("gzip data damaged or cut short: incomplete
/// deflate stream").
struct GzipErrors<R>(R);

impl<R: Read> Read for GzipErrors<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf).map_err(|e| {
            if e.kind() == io::ErrorKind::Interrupted {
                return e;
            }
            io::Error::new(e.kind(), format!("gzip data damaged or cut short: {e}"))
        })
    }
}

/// Opens a file (`-` for stdin) for reading its content ([`content`]); with the file's size when
/// that is the content's size (not compressed, not stdin).
pub fn open(path: &str) -> Result<(Box<dyn BufRead>, Option<u64>), CliError> {
    let name = if path == "-" { "<stdin>" } else { path };
    let err = |e: io::Error| CliError(format!("cannot read file: {e}: {name}"));
    if path == "-" {
        return content(io::stdin()).map(|(r, _)| (r, None)).map_err(err);
    }
    let f = std::fs::File::open(path).map_err(err)?;
    if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        return Err(CliError(format!("is a directory, not a snapshot: {path}")));
    }
    let len = f.metadata().ok().map(|m| m.len());
    let (r, gz) = content(f).map_err(err)?;
    Ok((r, if gz { None } else { len }))
}

/// Reads a file's content (`-` for stdin; gzip decompressed) fully.
pub fn read_bytes(path: &str) -> Result<Vec<u8>, CliError> {
    let name = if path == "-" { "<stdin>" } else { path };
    let (mut r, len) = open(path)?;
    let mut v = Vec::with_capacity(len.unwrap_or(0).min(1 << 36) as usize);
    r.read_to_end(&mut v)
        .map_err(|e| CliError(format!("cannot read file: {e}: {name}")))?;
    Ok(v)
}

/// [`read_bytes`], a plain file read in `threads` shares at once (each thread faults in the
/// pages of its share); gzip and stdin on one thread.
fn read_on(path: &str, threads: usize) -> Result<Vec<u8>, CliError> {
    #[cfg(unix)]
    if path != "-" {
        use std::os::unix::fs::FileExt;
        let err = |e: io::Error| CliError(format!("cannot read file: {e}: {path}"));
        let f = std::fs::File::open(path).map_err(err)?;
        let len = f.metadata().map_err(err)?.len();
        let mut head = [0u8; 2];
        let plain = f.read_exact_at(&mut head, 0).is_ok() && head != GZIP_MAGIC;
        if let (true, Ok(len)) = (plain, usize::try_from(len)) {
            let mut v = vec![0u8; len];
            let share = (len / threads.max(1)).max(1 << 20);
            std::thread::scope(|sc| {
                let reads: Vec<_> = v
                    .chunks_mut(share)
                    .enumerate()
                    .map(|(i, c)| {
                        let f = &f;
                        sc.spawn(move || f.read_exact_at(c, (i * share) as u64))
                    })
                    .collect();
                reads.into_iter().try_for_each(|r| {
                    r.join()
                        .unwrap_or_else(|_| Err(io::Error::other("a reader thread failed")))
                })
            })
            .map_err(err)?;
            return Ok(v);
        }
    }
    read_bytes(path)
}

/// `--last N` / `--range FROM..TO`: the part of every trace the commands read (global options,
/// given once per run; see `memlens_core::range`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Part {
    /// Read only the last N events of each device's trace (allocations from before them are
    /// kept as allocations from before the trace; the segments are the file's).
    #[arg(long, global = true, value_name = "N", conflicts_with = "range")]
    pub last: Option<u32>,
    /// Read only these events of each device: FROM..TO (0-based, TO excluded, either end may
    /// be left out), a time range since the first event (1.5s..3s, 200ms.., ..900us), or last:N.
    #[arg(long, global = true, value_name = "FROM..TO", value_parser = parse_range)]
    pub range: Option<EventRange>,
    /// Threads to decode one file on (default 1: the file is streamed, memory holds the model
    /// only). With more, the file is read into memory whole and a protocol 4+ pickle is
    /// decoded in pieces, to the same result (on 2 busy cores it was slower: docs/BENCHMARKS.md).
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: Option<u32>,
}

fn parse_range(s: &str) -> Result<EventRange, String> {
    EventRange::parse(s).map_err(|e| e.to_string())
}

impl Part {
    pub fn range(&self) -> Option<EventRange> {
        self.last.map(EventRange::Last).or(self.range)
    }

    /// `--threads` (default 1).
    pub fn threads(&self) -> usize {
        self.threads.map_or(1, |n| n as usize)
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// Sets how many threads [`load`] decodes one file on (once, at start).
pub fn set_threads(n: usize) {
    let _ = THREADS.set(n.max(1));
}

fn threads() -> usize {
    THREADS.get().copied().unwrap_or(1)
}

static PART: std::sync::OnceLock<Option<EventRange>> = std::sync::OnceLock::new();

/// Sets the part every [`load`] of this run reads (once, at start).
pub fn set_part(part: Option<EventRange>) {
    let _ = PART.set(part);
}

/// The part set by [`set_part`], if any.
pub fn part() -> Option<EventRange> {
    PART.get().copied().flatten()
}

/// Loads a snapshot (only the part of its trace given by `--last`/`--range`, if any), naming
/// the file last on failure.
pub fn load(path: &str) -> Result<Snapshot, CliError> {
    load_on(path, threads())
}

/// [`load`] on `threads` threads. A part, and any file on one thread, is streamed in chunks, so
/// memory holds the model (of the part), not the file, and the rows before a `--last`/`FROM..`
/// part are given up while decoding; a whole file on more threads is read whole and decoded in
/// pieces.
fn load_on(path: &str, threads: usize) -> Result<Snapshot, CliError> {
    let name = if path == "-" { "<stdin>" } else { path };
    if threads > 1 && part().is_none() {
        let bytes = read_on(path, threads)?;
        return memlens_core::load_parallel(&bytes, threads)
            .map_err(|e| CliError(format!("{e}: {name}")));
    }
    let (r, len) = open(path)?;
    memlens_core::range::PartLoader::new(len, part())
        .read_all(r)
        .map_err(|e| CliError(format!("{e}: {name}")))
}

/// Loads several files at once on all cores (at most one thread per file) and maps each
/// snapshot with `f(position, path, snapshot)` on the thread that loaded it; results in the
/// order given.
pub fn map_files<T: Send>(
    files: &[String],
    f: impl Fn(usize, &str, Snapshot) -> T + Sync,
) -> Vec<Result<T, CliError>> {
    let threads = cores().min(files.len()).max(1);
    // (The cores left over go to decoding each file.)
    let per_file = (self::threads() / threads).max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<Option<Result<T, CliError>>> = (0..files.len()).map(|_| None).collect();
    let slots = std::sync::Mutex::new(&mut out);
    std::thread::scope(|sc| {
        for _ in 0..threads {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(path) = files.get(i) else { break };
                let r = load_on(path, per_file).map(|s| f(i, path, s));
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
