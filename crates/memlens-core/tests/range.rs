//! Part of a trace (`memlens_core::range`) against the whole, on every real snapshot and a
//! fixture: the part holds exactly the selected entries, and the allocator outside the range
//! stays exact — live requested bytes after every event of the part (allocations from before
//! the range included), and reserved bytes, segments and requested bytes of the Allocator State
//! History, equal the whole's at the same event. Written as a pickle (`model::save`) and read
//! back, the part is the same model.

use memlens_core::model::save::write_pickle;
use memlens_core::range::{slice, time_origin_us, EventRange};
use memlens_core::replay::{replay_device, Replay};
use memlens_core::state::AllocatorHistory;
use memlens_core::{load, Snapshot};
use std::path::Path;

/// Up to `n` event indices spread over `0..len` (first and last included).
fn samples(len: u32, n: u32) -> Vec<u32> {
    if len == 0 {
        return Vec::new();
    }
    let mut v: Vec<u32> = (0..n)
        .map(|i| (u64::from(len - 1) * u64::from(i) / u64::from(n.max(2) - 1)) as u32)
        .collect();
    v.dedup();
    v
}

/// Checks `part` (the whole cut by `r`) against `whole`; returns how many devices had their
/// live bytes and states compared (a trace that disagrees with its own segments cannot be exact).
/// (A trace that disagrees with its own segments cannot be exact.)
fn check(what: &str, whole: &Snapshot, r: EventRange) -> usize {
    check_with(what, whole, &Whole::new(whole), r)
}

/// The whole trace's allocation tables and state histories, by device, where they are exact
/// (the trace agrees with the file's segments).
struct Whole(Vec<(u32, Option<(Replay, AllocatorHistory)>)>);

impl Whole {
    fn new(s: &Snapshot) -> Whole {
        Whole(
            s.device_traces
                .iter()
                .map(|dt| {
                    let replay = replay_device(s, dt.device);
                    let history = AllocatorHistory::with_replay(s, &replay);
                    let exact = replay.open_not_in_segments == 0
                        && replay.realloc_without_free == 0
                        && history.diagnostics().warnings().is_empty();
                    (dt.device, exact.then_some((replay, history)))
                })
                .collect(),
        )
    }
}

fn check_with(what: &str, whole: &Snapshot, exact_whole: &Whole, r: EventRange) -> usize {
    let part = slice(whole.clone(), &r).unwrap_or_else(|e| panic!("{what} {r}: {e}"));
    let origin = time_origin_us(whole);
    let mut exact = 0;
    for dt in &whole.device_traces {
        let d = dt.device;
        let ev = r.device_events(whole, d, origin);
        let rows = part.device_rows(d);
        assert_eq!(rows.len(), ev.len(), "{what} {r} device {d}: entries");
        for (i, row) in rows.clone().enumerate() {
            let (p, w) = (row as usize, (dt.rows.start + ev.start) as usize + i);
            let t = (&part.trace, &whole.trace);
            assert_eq!(
                (
                    t.0.action[p],
                    t.0.addr[p],
                    t.0.size_bytes[p],
                    t.0.time_us[p]
                ),
                (
                    t.1.action[w],
                    t.1.addr[w],
                    t.1.size_bytes[w],
                    t.1.time_us[w]
                ),
                "{what} {r} device {d}: entry {i}"
            );
            assert_eq!(
                part.trace.device_free(row),
                whole.trace.device_free(w as u32)
            );
        }
        let Some(Some((whole_replay, hw))) = exact_whole.0.iter().find(|w| w.0 == d).map(|w| &w.1)
        else {
            continue;
        };
        if ev.is_empty() {
            continue;
        }
        let part_replay = replay_device(&part, d);
        let hp = AllocatorHistory::new(&part, d);
        let shift = ev.start;
        let before = part_replay.live_bytes_at(None);
        assert_eq!(
            before,
            whole_replay.live_bytes_at(shift.checked_sub(1)),
            "{what} {r} device {d}: live bytes before the range"
        );
        for e in samples(ev.len() as u32, 24) {
            assert_eq!(
                part_replay.live_bytes_at(Some(e)),
                whole_replay.live_bytes_at(Some(shift + e)),
                "{what} {r} device {d}: live bytes after event {e}"
            );
            let (p, w) = (
                hp.state_at(Some(e as usize)).numbers(),
                hw.state_at(Some((ev.start + e) as usize)).numbers(),
            );
            assert_eq!(
                (p.reserved_bytes, p.segments, p.requested_bytes),
                (w.reserved_bytes, w.segments, w.requested_bytes),
                "{what} {r} device {d}: state after event {e}"
            );
        }
        exact += 1;
    }
    // written and read back, the part is the same model
    let bytes = write_pickle(&part, Vec::new(), 4).unwrap_or_else(|e| panic!("{what}: {e}"));
    let back = load(&bytes).unwrap_or_else(|e| panic!("{what} {r}: written part: {e}"));
    assert_eq!(back.device_traces, part.device_traces, "{what} {r}");
    assert_eq!(back.segments.len(), part.segments.len(), "{what} {r}");
    assert_eq!(back.blocks.len(), part.blocks.len(), "{what} {r}");
    assert_eq!(
        memlens_core::snapshot_stats(&back).devices,
        memlens_core::snapshot_stats(&part).devices,
        "{what} {r}: stats of the written part"
    );
    exact
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
            from: 0,
            to: Some(n / 2),
        },
        EventRange::Events {
            from: n / 2,
            to: None,
        },
    ];
    if let Some(origin) = time_origin_us(s) {
        let end = (0..s.trace.len())
            .filter_map(|r| s.trace.time_of(r))
            .max()
            .unwrap_or(origin);
        let span = end - origin;
        v.push(EventRange::Time {
            from_us: span / 3,
            to_us: Some(2 * span / 3),
        });
    }
    v
}

#[test]
fn a_part_of_every_real_snapshot_keeps_the_allocator_exact() {
    let Some(files) = memlens_fixture::shared_snapshots() else {
        return;
    };
    assert!(!files.is_empty());
    let (mut tried, mut exact) = (0, 0);
    for f in &files {
        let bytes = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let Ok(whole) = load(&bytes) else { continue };
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let exact_whole = Whole::new(&whole);
        for r in ranges(&whole) {
            tried += 1;
            exact += check_with(&name, &whole, &exact_whole, r);
        }
    }
    println!(
        "{tried} parts of {} files; {exact} device traces compared exactly",
        files.len()
    );
    assert!(
        exact * 2 >= tried,
        "too few exact comparisons: {exact} of {tried}"
    );
}

#[test]
fn a_part_of_a_fixture_keeps_allocations_from_before_it() {
    // p4_snapshot: segment_alloc, w1, w2, segment_alloc, b1, b2, act, tmp, then tmp freed
    // (free_requested, free_completed); the golden numbers are in its header
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/p4_snapshot.txt");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let whole = load(&memlens_fixture::build(&text).unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(whole.device_rows(0).len(), 10);
    for r in ranges(&whole) {
        assert_eq!(check("p4_snapshot", &whole, r), 1, "{r}");
    }
    let requested = 4_194_304 * 2 + 8_000_000 + 400 * 2;
    // the last 3 events (alloc tmp, free tmp): w1, w2, b1, b2 and act come from before the
    // trace, as the file's active blocks
    let part = slice(whole.clone(), &EventRange::Last(3)).unwrap_or_else(|e| panic!("{e}"));
    let replay = replay_device(&part, 0);
    assert_eq!(replay.pre_trace().count(), 5);
    assert_eq!(replay.live_bytes_at(None), requested);
    assert_eq!(
        memlens_core::device_stats(&part, 0).timeline_peak_bytes,
        20_583_712
    );
    // the last 2 (tmp's free): tmp is alive from the start until its free
    let part = slice(whole.clone(), &EventRange::Last(2)).unwrap_or_else(|e| panic!("{e}"));
    let replay = replay_device(&part, 0);
    assert_eq!(replay.pre_trace().count(), 6);
    assert_eq!(replay.live_bytes_at(None), requested + 4 * 1024 * 1024);
    assert_eq!(replay.live_bytes_at(Some(1)), requested);
    // events 1..3 (w1, w2): the segments are the state after w2, one 20 MiB segment
    let part = slice(
        whole.clone(),
        &EventRange::Events {
            from: 1,
            to: Some(3),
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(part.segments.len(), 1);
    assert_eq!(part.segments[0].allocated_size_bytes, 8 * 1024 * 1024);
    assert_eq!(
        replay_device(&part, 0).live_bytes_at(Some(1)),
        8 * 1024 * 1024
    );
    // a time range needs times
    let mut untimed = whole.clone();
    for row in 0..untimed.trace.len() {
        untimed.trace.set_time(row, None);
    }
    let r = EventRange::Time {
        from_us: 0,
        to_us: None,
    };
    assert!(slice(untimed, &r).is_err());
}
