//! Opening part of a snapshot while decoding (`range::PartLoader`, what `#range=` and the
//! CLI's `--last`/`--range` use) gives the same model as decoding the whole file and cutting
//! it afterwards (`range::slice`), on every real snapshot and a fixture, fed in small chunks
//! with rows removed every few dozen rows; and for the last N events it never holds much more
//! than N rows of a trace.

use memlens_core::range::{slice, time_origin_us, EventRange, PartLoader};
use memlens_core::{load, snapshot_stats, Snapshot};
use std::path::Path;

/// Rows removed in passes of at least this many (the page's default is far larger; these
/// files are small).
const EVERY_ROWS: usize = 4;
/// Chunks fed to the loader.
const CHUNK: usize = 4096;

/// The part by `PartLoader`, fed `chunk` bytes at a time; with the most rows it held.
fn open_part(bytes: &[u8], r: EventRange, chunk: usize) -> (Snapshot, usize) {
    let mut l = PartLoader::removing_every(Some(bytes.len() as u64), Some(r), EVERY_ROWS);
    let mut most = 0;
    for c in bytes.chunks(chunk) {
        l.push(c).unwrap_or_else(|e| panic!("{r}: {e}"));
        most = most.max(l.rows_held());
    }
    (l.finish().unwrap_or_else(|e| panic!("{r}: {e}")), most)
}

/// Everything of the model that a part changes, compared field by field.
fn assert_same(what: &str, a: &Snapshot, b: &Snapshot) {
    let (x, y) = (&a.trace, &b.trace);
    assert_eq!(a.device_traces, b.device_traces, "{what}: device traces");
    assert_eq!(x.action, y.action, "{what}: actions");
    assert_eq!(x.addr, y.addr, "{what}: addresses");
    assert_eq!(x.size_bytes, y.size_bytes, "{what}: sizes");
    assert_eq!(x.time_us, y.time_us, "{what}: times");
    assert_eq!(x.stack, y.stack, "{what}: stacks");
    let n = x.len();
    assert_eq!(
        x.stream.to_vec(0..n),
        y.stream.to_vec(0..n),
        "{what}: streams"
    );
    assert_eq!(
        x.compile_context.to_vec(0..n),
        y.compile_context.to_vec(0..n),
        "{what}: compile contexts"
    );
    assert_eq!(
        x.user_metadata.to_vec(0..n),
        y.user_metadata.to_vec(0..n),
        "{what}: user metadata"
    );
    assert_eq!(x.extras, y.extras, "{what}: extras");
    assert_eq!(a.segments, b.segments, "{what}: segments");
    assert_eq!(a.blocks, b.blocks, "{what}: blocks");
    assert_eq!(
        a.external_annotations, b.external_annotations,
        "{what}: annotations"
    );
    assert_eq!(a.host_trace.len(), b.host_trace.len(), "{what}: host trace");
    assert_eq!(a.warnings, b.warnings, "{what}: warnings");
    assert_eq!(
        snapshot_stats(a).devices,
        snapshot_stats(b).devices,
        "{what}: stats"
    );
}

fn ranges(s: &Snapshot) -> Vec<EventRange> {
    let n = s
        .device_traces
        .iter()
        .map(|t| t.rows.len() as u32)
        .max()
        .unwrap_or(0);
    let mut v = vec![
        EventRange::Last(n / 3),
        EventRange::Last(1),
        EventRange::Last(n + 10),
        EventRange::Events {
            from: n / 4,
            to: Some(3 * n / 4),
        },
        EventRange::Events {
            from: n / 2,
            to: None,
        },
        EventRange::Events {
            from: n + 5,
            to: None,
        },
    ];
    if let Some(origin) = time_origin_us(s) {
        let end = (0..s.trace.len()).filter_map(|r| s.trace.time_of(r)).max();
        let span = end.unwrap_or(origin) - origin;
        v.push(EventRange::Time {
            from_us: span / 3,
            to_us: None,
        });
    }
    v
}

fn check_file(what: &str, bytes: &[u8]) -> usize {
    let Ok(whole) = load(bytes) else { return 0 };
    let mut n = 0;
    for r in ranges(&whole) {
        let cut = slice(whole.clone(), &r).unwrap_or_else(|e| panic!("{what} {r}: {e}"));
        let (part, most) = open_part(bytes, r, CHUNK);
        assert_same(&format!("{what} {r}"), &part, &cut);
        if let EventRange::Last(k) = r {
            // A pass keeps k rows of each list and the rows not in a list yet (pickle appends
            // up to 1000 at a time); the next runs once the columns hold twice that, plus
            // what one chunk brings (a row takes more than 8 bytes).
            let kept = k as usize * whole.device_traces.len() + 1000;
            let bound = 2 * kept + CHUNK / 8 + EVERY_ROWS;
            let rows = whole.trace.len() + whole.host_trace.len();
            assert!(
                most <= bound.min(rows),
                "{what} {r}: held {most} rows of {rows} (bound {bound})"
            );
        }
        n += 1;
    }
    n
}

#[test]
fn a_part_opened_while_decoding_is_the_part_cut_afterwards_on_every_real_snapshot() {
    let Some(files) = memlens_fixture::shared_snapshots() else {
        return;
    };
    let mut tried = 0;
    for f in &files {
        let bytes = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
        tried += check_file(&name.unwrap_or_default(), &bytes);
    }
    println!("{tried} parts of {} files", files.len());
    assert!(tried >= 3 * files.len(), "only {tried} parts tried");
}

#[test]
fn a_part_of_every_fixture_opened_while_decoding_is_the_part_cut_afterwards() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    let mut tried = 0;
    for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.unwrap_or_else(|e| panic!("{e}")).path();
        if p.extension().is_none_or(|x| x != "txt") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let Ok(bytes) = memlens_fixture::build(&text) else {
            continue;
        };
        tried += check_file(&p.display().to_string(), &bytes);
    }
    assert!(tried >= 40, "only {tried} parts tried");
}
