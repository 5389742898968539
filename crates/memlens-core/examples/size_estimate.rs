//! What `estimate` foretells of a file from its head, against the whole decode's count: the
//! numbers behind the worker's size limit (docs/BENCHMARKS.md, "Any size").
//!
//! Usage: cargo run --release -p memlens-core --example size_estimate -- FILE...
//! Prints per file: its size, the estimate once 20 000 entries were read past the chunk the
//! trace began in (as the page's worker makes it; 1 MiB chunks), the bytes read then, and the
//! whole decode's entries and held bytes.

use memlens_core::estimate::estimate;
use memlens_core::Loader;
use std::io::Read;

const CHUNK: usize = 1 << 20;
const HEAD_ENTRIES: u64 = 20_000;

fn main() {
    println!("file\tMB\thead_MB\test_entries\test_held_MB\tentries\theld_MB\tratio");
    for path in std::env::args().skip(1) {
        let Ok(mut f) = std::fs::File::open(&path) else {
            eprintln!("{path}: cannot open");
            continue;
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let mut l = Loader::new(Some(len));
        let mut buf = vec![0u8; CHUNK];
        let mut est = None;
        loop {
            let n = match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) => {
                    eprintln!("{path}: {e}");
                    break;
                }
            };
            if let Err(e) = l.push(&buf[..n]) {
                eprintln!("{path}: {e}");
                break;
            }
            if est.is_none() {
                let h = l.head_shape();
                let enough = h.is_some_and(|h| {
                    h.trace_start
                        .is_some_and(|m| h.entries >= m.entries + HEAD_ENTRIES)
                });
                if enough {
                    est = h.and_then(|h| estimate(len, &h).map(|e| (h.bytes_read, e)));
                }
            }
        }
        let Some(whole) = l.head_shape() else {
            eprintln!("{path}: not a pickle");
            continue;
        };
        let mb = |b: u64| format!("{:.1}", b as f64 / 1e6);
        let (head, e_entries, e_held) = match est {
            Some((read, e)) => (mb(read), e.entries.to_string(), mb(e.held_bytes)),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let ratio = est.map_or("-".into(), |(_, e)| {
            format!(
                "{:.3}",
                e.held_bytes as f64 / whole.held_bytes.max(1) as f64
            )
        });
        let name = std::path::Path::new(&path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or(path.clone());
        println!(
            "{name}\t{}\t{head}\t{e_entries}\t{e_held}\t{}\t{}\t{ratio}",
            mb(len),
            whole.entries,
            mb(whole.held_bytes)
        );
    }
}
