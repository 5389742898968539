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
    #[cfg(target_os = "linux")]
    if let Some(r) = mapped::load(&f, len) {
        return r.map_err(|e| CliError(format!("{e}: {path}")));
    }
    memlens_core::load_reader(f, len).map_err(|e| CliError(format!("{e}: {path}")))
}

/// Regular files are fed to the decoder from memory-mapped windows of the page cache instead of
/// `read` copies (the kernel's copy was 6-8 % of a decode's CPU time). One window is mapped at
/// a time, so memory holds at most [`mapped::WINDOW`] of the file.
#[cfg(target_os = "linux")]
mod mapped {
    #![allow(unsafe_code)]
    use memlens_core::{LoadError, Loader, Snapshot};
    use std::fs::File;
    use std::os::fd::AsRawFd;

    pub const WINDOW: usize = 8 << 20;

    /// Smaller files are read: a window would hold all of one, and the copy costs little.
    const MIN_LEN: u64 = 4 * WINDOW as u64;

    /// `None` where the file is small or cannot be mapped (the caller reads it instead).
    pub fn load(f: &File, len: Option<u64>) -> Option<Result<Snapshot, LoadError>> {
        let len = len?;
        if !f.metadata().ok()?.is_file() || len < MIN_LEN {
            return None;
        }
        let mut l = Loader::new(Some(len));
        let mut off = 0u64;
        while off < len {
            let n = (len - off).min(WINDOW as u64) as usize;
            let w = Window::map(f, off, n)?;
            if let Err(e) = l.push(w.bytes()) {
                return Some(Err(e.into()));
            }
            off += n as u64;
        }
        Some(l.finish().map_err(Into::into))
    }

    /// A read-only private mapping of part of a file.
    struct Window {
        p: *mut libc::c_void,
        n: usize,
    }

    impl Window {
        fn map(f: &File, off: u64, n: usize) -> Option<Window> {
            // SAFETY: a fresh read-only mapping of `n` bytes of an open regular file, at an
            // offset that is a multiple of WINDOW (so of the page size); unmapped on drop.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    n,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | libc::MAP_POPULATE,
                    f.as_raw_fd(),
                    off as libc::off_t,
                )
            };
            (p != libc::MAP_FAILED).then_some(Window { p, n })
        }

        fn bytes(&self) -> &[u8] {
            // SAFETY: `p` maps `n` readable bytes for as long as `self` lives. (A file cut
            // shorter by another process while mapped would raise SIGBUS on the missing pages.)
            unsafe { std::slice::from_raw_parts(self.p.cast::<u8>(), self.n) }
        }
    }

    impl Drop for Window {
        fn drop(&mut self) {
            // SAFETY: `p`/`n` came from a successful mmap and no slice of it outlives `self`.
            unsafe {
                libc::munmap(self.p, self.n);
            }
        }
    }
}
