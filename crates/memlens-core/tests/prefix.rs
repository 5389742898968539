//! The model of a pickle's prefix (`Loader::with_prefix`, what the viewer draws while a file
//! loads) against the whole file's model cut to the same rows: every fixture at protocols 0–5
//! and every real snapshot, fed in chunks of random sizes, at every chunk (fixtures) or at a
//! dozen points (real snapshots). The prefix's trace columns equal the cut's, and so do the
//! layouts of every timeline kind of every device.

use memlens_core::layout::{TimelineKind, TimelineLayout};
use memlens_core::model::{DeviceTrace, Snapshot};
use memlens_core::Loader;
use memlens_fixture as fixture;

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n.max(1) as u64) as usize
    }
}

/// `whole` cut to the first `rows.len()` entries of each device `d` of the prefix's
/// `device_traces`, without segments (a prefix knows none).
fn cut(whole: &Snapshot, prefix: &[DeviceTrace]) -> Snapshot {
    let ranges: Vec<std::ops::Range<usize>> = prefix
        .iter()
        .map(|t| {
            let start = whole.device_rows(t.device).start as usize;
            start..start + t.rows.len()
        })
        .collect();
    let mut next = 0u32;
    let device_traces = prefix
        .iter()
        .map(|t| {
            let rows = next..next + t.rows.len() as u32;
            next = rows.end;
            DeviceTrace {
                device: t.device,
                rows,
            }
        })
        .collect();
    Snapshot {
        strings: whole.strings.clone(),
        frames: whole.frames.clone(),
        stacks: whole.stacks.clone(),
        trace: whole.trace.select(&ranges),
        device_traces,
        encoding: whole.encoding,
        ..Snapshot::default()
    }
}

const KINDS: [TimelineKind; 3] = [
    TimelineKind::Active,
    TimelineKind::Segments,
    TimelineKind::Allocated,
];

/// Checks one prefix against the cut; the number of entries it holds.
fn check(what: &str, prefix: &Snapshot, whole: &Snapshot) -> usize {
    let want = cut(whole, &prefix.device_traces);
    let entries: usize = prefix.device_traces.iter().map(|t| t.rows.len()).sum();
    let (p, w) = (&prefix.trace, &want.trace);
    assert_eq!(p.action[..entries], w.action[..], "{what}: actions");
    assert_eq!(p.addr[..entries], w.addr[..], "{what}: addresses");
    assert_eq!(p.size_bytes[..entries], w.size_bytes[..], "{what}: sizes");
    assert_eq!(p.stack[..entries], w.stack[..], "{what}: stacks");
    assert_eq!(p.time_us[..entries], w.time_us[..], "{what}: times");
    for t in &prefix.device_traces {
        for kind in KINDS {
            let a = TimelineLayout::build(prefix, t.device, kind);
            let b = TimelineLayout::build(&want, t.device, kind);
            assert_eq!(
                format!("{a:?}"),
                format!("{b:?}"),
                "{what}: device {} {kind:?} layout of {} entries",
                t.device,
                t.rows.len()
            );
        }
    }
    entries
}

/// Feeds `bytes` in random chunks, checking the prefix after each chunk where `every` says;
/// the entries seen in prefixes before the last byte, and whether any prefix held all of the
/// whole's entries.
fn run(what: &str, bytes: &[u8], rng: &mut Rng, max_chunk: usize, every: usize) -> (usize, bool) {
    let whole = memlens_core::load(bytes).unwrap_or_else(|e| panic!("{what}: {e}"));
    let total = whole.trace.len();
    let mut l = Loader::new(Some(bytes.len() as u64));
    let (mut at, mut seen, mut all, mut last) = (0usize, 0usize, false, 0usize);
    let mut chunk_no = 0usize;
    while at < bytes.len() {
        let n = (1 + rng.below(max_chunk)).min(bytes.len() - at);
        l.push(&bytes[at..at + n])
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        at += n;
        chunk_no += 1;
        // (The loader tells the form from the first 64 bytes.)
        if (chunk_no % every != 0 && at < bytes.len()) || at < 64 {
            continue;
        }
        let here = format!("{what} after {at} of {} bytes", bytes.len());
        let Some(entries) = l.with_prefix(|p| check(&here, p, &whole)) else {
            panic!("{here}: no prefix");
        };
        assert!(entries >= last, "{here}: {entries} entries after {last}");
        last = entries;
        if at < bytes.len() {
            seen += entries;
        }
        all |= entries == total;
    }
    // Lending gave everything back: the whole decodes as before.
    let after = l.finish().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(format!("{after:?}"), format!("{whole:?}"), "{what}: model");
    (seen, all)
}

#[test]
fn prefixes_of_fixtures_are_the_whole_cut() {
    let mut rng = Rng(0x005e_ed0f_5eed);
    let inputs = fixture::fixture_pickles(0..=5);
    assert!(inputs.len() >= 40, "only {} fixture pickles", inputs.len());
    let (mut partial, mut complete) = (0, 0);
    for (what, bytes) in &inputs {
        let (seen, all) = run(what, bytes, &mut rng, 300, 1);
        partial += (seen > 0) as usize;
        complete += all as usize;
    }
    assert!(
        partial * 2 > inputs.len(),
        "only {partial} fixtures had rows in a prefix"
    );
    assert!(
        complete * 2 > inputs.len(),
        "only {complete} fixtures reached all rows"
    );
}

#[test]
fn prefixes_of_real_snapshots_are_the_whole_cut() {
    let mut rng = Rng(0x0dd_ba11);
    let inputs = fixture::shared_snapshot_bytes();
    let mut traces_first = 0;
    for (what, bytes) in &inputs {
        let chunk = (bytes.len() / 6).max(2);
        let (seen, _) = run(what, bytes, &mut rng, chunk, 1);
        let whole = memlens_core::load(bytes).unwrap_or_else(|e| panic!("{what}: {e}"));
        // A trace that fills most of the file shows in some prefix before the end.
        if whole.trace.len() >= 2000 && bytes.len() > 300_000 {
            assert!(seen > 0, "{what}: no entries in any prefix before the end");
        }
        let first_key = |k: &[u8]| {
            bytes
                .windows(k.len())
                .position(|w| w == k)
                .unwrap_or(usize::MAX)
        };
        if seen > 0 && first_key(b"device_traces") < first_key(b"segments") {
            traces_first += 1;
        }
    }
    if !inputs.is_empty() {
        assert!(traces_first >= 1, "no real snapshot with its trace first");
    }
}
