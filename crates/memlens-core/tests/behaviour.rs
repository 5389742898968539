//! Behaviour golden: for every fixture (`tests/fixtures/*.txt`) and every real snapshot in
//! `../shared/snapshots`, a digest of everything the pipeline derives — stats, the replay's
//! allocations, the three timeline layouts (elements, pieces, totals, markers), the Allocator
//! State History at a spread of events — compared with `tests/golden/behaviour/<name>.txt`.
//!
//! It pins behaviour across refactors: the digest is written from the values, field by field,
//! in a fixed encoding (`None` of an event or row as `-`), so a change of types that keeps the
//! values keeps the digest. `UPDATE_GOLDEN=1 cargo test -p memlens-core --test behaviour`
//! rewrites the files (review the diff: a changed line is a changed behaviour).

use memlens_core::layout::{TimelineKind, TimelineLayout};
use memlens_core::replay::replay_device;
use memlens_core::state::AllocatorHistory;
use memlens_core::Snapshot;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// FNV-1a over the text of a digest part: stable across runs and platforms.
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn add(&mut self, v: impl std::fmt::Display) {
        for b in v.to_string().bytes().chain(std::iter::once(b',')) {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}

fn opt(v: Option<impl std::fmt::Display>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

fn replay_part(out: &mut String, s: &Snapshot, device: u32) {
    let r = replay_device(s, device);
    let mut h = Fnv::new();
    for a in &r.allocations {
        h.add(a.addr);
        h.add(a.size_bytes);
        h.add(a.stream);
        h.add(a.stack.0);
        h.add(opt(a.alloc_event));
        h.add(opt(a.free_requested_event));
        h.add(opt(a.free_event));
        h.add(format!("{:?}", a.origin));
    }
    let _ = writeln!(
        out,
        "  replay allocations={} realloc_without_free={} open_not_in_segments={} digest={}",
        r.allocations.len(),
        r.realloc_without_free,
        r.open_not_in_segments,
        h.hex()
    );
}

/// Row/pool columns hold `u32::MAX` for "none" today; written as `-` so an `Option` column
/// digests the same.
fn row(v: Option<u32>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

fn layout_part(out: &mut String, l: &TimelineLayout, name: &str) {
    let e = &l.elements;
    let mut h = Fnv::new();
    for i in 0..e.len() {
        h.add(e.size_bytes[i]);
        h.add(e.addr[i]);
        h.add(e.version[i]);
        h.add(e.start_x[i]);
        h.add(e.end_x[i]);
        h.add(row(e.alloc_row.get(i)));
        h.add(row(e.free_row.get(i)));
        h.add(e.stream[i]);
        h.add(e.kind[i].code());
        h.add(e.stack[i]);
        h.add(row(e.pool.get(i)));
    }
    let mut p = Fnv::new();
    for i in 0..e.len() {
        for k in l.pieces_of(i) {
            p.add(l.piece_t0[k]);
            p.add(l.piece_y0[k].to_bits());
        }
        p.add(';');
    }
    let mut t = Fnv::new();
    for v in &l.total_bytes {
        t.add(v);
    }
    for v in &l.time_us {
        t.add(v);
    }
    let mut m = Fnv::new();
    for mk in &l.markers {
        m.add(mk.x);
        m.add(format!("{:?}", mk.kind));
        m.add(&mk.label);
    }
    for r in &l.regions {
        m.add(r.x0);
        m.add(r.x1);
        m.add(&r.label);
    }
    for w in &l.warnings {
        m.add(w);
    }
    for (a, b) in &l.pools {
        m.add(a);
        m.add(b);
    }
    let _ = writeln!(
        out,
        "  {name} events={} elements={} pieces={} elements={} pieces={} totals={} marks={}",
        l.n_events,
        e.len(),
        l.piece_count(),
        h.hex(),
        p.hex(),
        t.hex(),
        m.hex()
    );
}

fn state_part(out: &mut String, s: &Snapshot, device: u32) {
    let hist = AllocatorHistory::new(s, device);
    let n = hist.events();
    let mut picks: Vec<Option<usize>> = vec![None];
    for k in 0..=16 {
        picks.push(Some((n.saturating_sub(1)) * k / 16));
    }
    picks.extend(hist.ooms().take(4).map(Some));
    picks.dedup();
    let mut h = Fnv::new();
    for ev in &picks {
        let st = hist.state_at(*ev);
        let nums = st.numbers();
        h.add(format!("{nums:?}"));
        let c = st.columns();
        for k in 0..c.segment_address.len() {
            h.add(c.segment_address[k]);
            h.add(c.segment_size_bytes[k]);
            h.add(c.segment_stream[k]);
            h.add(format!("{:?}", c.segment_pool_id[k]));
            h.add(c.segment_is_expandable[k]);
            h.add(format!("{:?}", c.segment_kind[k]));
            h.add(c.segment_stack[k].0);
            h.add(format!("{:?}", c.segment_blocks[k]));
        }
        for b in 0..c.block_address.len() {
            h.add(c.block_address[b]);
            h.add(c.block_size_bytes[b]);
            h.add(c.block_requested_size_bytes[b]);
            h.add(format!("{:?}", c.block_state[b]));
            h.add(c.block_stack[b].0);
            h.add(row(c.block_alloc_event[b]));
        }
    }
    let mut d = Fnv::new();
    for w in hist.diagnostics().warnings() {
        d.add(w);
    }
    let _ = writeln!(
        out,
        "  state events={n} stride={} consistent={} states={} digest={} diagnostics={}",
        hist.stride(),
        hist.replays_consistently(),
        picks.len(),
        h.hex(),
        d.hex()
    );
}

/// The stats' `Debug` text as the goldens were recorded, when `timeline_peak_event` was an
/// `i64` with `-1` for "before the first event": `Some(7)` is written `7`, `None` `-1`.
fn peak_event_as_recorded(debug: &str) -> String {
    const KEY: &str = "timeline_peak_event: ";
    let mut out = String::with_capacity(debug.len());
    let mut rest = debug;
    while let Some(k) = rest.find(KEY) {
        let (head, tail) = rest.split_at(k + KEY.len());
        out.push_str(head);
        rest = if let Some(t) = tail.strip_prefix("None") {
            out.push_str("-1");
            t
        } else if let Some(t) = tail.strip_prefix("Some(") {
            let end = t.find(')').unwrap_or(t.len());
            out.push_str(&t[..end]);
            t.get(end + 1..).unwrap_or("")
        } else {
            tail
        };
    }
    out.push_str(rest);
    out
}

fn digest(s: &Snapshot) -> String {
    let mut out = String::new();
    let stats = memlens_core::snapshot_stats(s);
    let _ = writeln!(out, "stats {}", {
        let mut h = Fnv::new();
        h.add(peak_event_as_recorded(&format!("{stats:?}")));
        h.hex()
    });
    for d in s.devices() {
        let _ = writeln!(out, "device {d}");
        replay_part(&mut out, s, d);
        for (kind, name) in [
            (TimelineKind::Active, "active"),
            (TimelineKind::Segments, "segments"),
            (TimelineKind::Allocated, "allocated"),
        ] {
            layout_part(&mut out, &TimelineLayout::build(s, d, kind), name);
        }
        layout_part(
            &mut out,
            &TimelineLayout::build_preview(s, d, TimelineKind::Active),
            "preview",
        );
        state_part(&mut out, s, d);
    }
    out
}

fn check(name: &str, s: &Snapshot, failures: &mut Vec<String>) {
    let got = digest(s);
    let path = repo_root().join(format!("tests/golden/behaviour/{name}.txt"));
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        let _ = std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")));
        std::fs::write(&path, &got).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    match std::fs::read_to_string(&path) {
        Ok(want) if want == got => {}
        Ok(want) => failures.push(format!(
            "{name}: behaviour changed\n--- golden\n{want}--- now\n{got}"
        )),
        Err(e) => failures.push(format!("{}: {e}", path.display())),
    }
}

#[test]
fn fixtures_behave_as_recorded() {
    let fixtures = memlens_fixture::fixture_texts();
    assert!(
        fixtures.len() >= 15,
        "fixture set missing in {}",
        memlens_fixture::fixtures_dir().display()
    );
    let mut failures = Vec::new();
    for (p, text) in fixtures {
        let bytes =
            memlens_fixture::build(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let s = memlens_core::load(&bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned());
        check(
            &format!("fixture-{}", stem.unwrap_or_default()),
            &s,
            &mut failures,
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn real_snapshots_behave_as_recorded() {
    let Some(files) = memlens_fixture::shared_snapshots() else {
        return;
    };
    assert!(
        !files.is_empty(),
        "no *.pickle in {}",
        memlens_fixture::shared_snapshots_dir().display()
    );
    let mut failures = Vec::new();
    for p in files {
        let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let s = memlens_core::load(&bytes).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let stem = p.file_stem().map(|s| s.to_string_lossy().into_owned());
        check(
            &format!("real-{}", stem.unwrap_or_default()),
            &s,
            &mut failures,
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
