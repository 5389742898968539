//! Replay of one device's trace into allocations with lifetimes, so that "what is live at event
//! i, allocated where" has one answer shared by `memlens compare`, the flamegraph diff and the
//! viewer.
//!
//! Rules (as upstream's `process_alloc_data`, house style §5):
//! - `alloc` opens an allocation at its address; the next `free_completed` at that address closes
//!   it. Each reuse of an address is its own allocation.
//! - A `free_completed` with no open allocation at its address closes an allocation that was made
//!   before the trace starts (history enabled late, or the ring buffer dropped the oldest
//!   entries): [`Origin::UnmatchedFree`], stack of the free (or of its `free_requested`).
//! - An active block of the final segment state whose address is not open at the end of the trace
//!   was allocated before the trace and is alive throughout: [`Origin::Untraced`], with the
//!   block's requested size and stack.
//! - An `alloc` at an address that is already open leaves the earlier allocation open to the end
//!   (its free was never recorded), as upstream does; [`Replay::realloc_without_free`] counts them.
//!
//! - An allocation's *version* counts the `free_completed` entries at its address before its
//!   first entry (upstream's version numbers, which bump on `free_completed` only: an alloc over
//!   a live address keeps the live one's version). The timeline draws `addr_version`; the event
//!   list labels every entry of the allocation with it ([`crate::state::events`]).
//!
//! An *event index* ([`EventIdx`]) is a 0-based index into one device's trace entries (the `i`th
//! entry of [`Snapshot::device_rows`]); everything below counts events that way.
//!
//! Sizes are requested (unrounded) bytes, as `alloc`/`free_completed` record them, so the live
//! sum at every event equals the timeline of [`crate::device_stats`] whenever the trace agrees
//! with the final segment state.

use crate::model::Snapshot;
use crate::trace::{Action, StackId};
use rustc_hash::FxHashMap;

/// Index of an event: 0-based, into one device's trace entries (see the module docs).
pub type EventIdx = u32;

/// Where an allocation's lifetime comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// Its `alloc` is in the trace.
    Traced,
    /// Only its `free_completed` is in the trace: alive from the start until that free.
    UnmatchedFree,
    /// An active block at snapshot time that the trace never allocated: alive throughout.
    Untraced,
}

/// One allocation and its lifetime in event indices (0-based, within the device's trace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    pub addr: u64,
    /// `free_completed` entries at `addr` before this allocation's first entry (see the module
    /// docs).
    pub version: u32,
    /// Requested (unrounded) bytes.
    pub size_bytes: u64,
    pub stream: u64,
    /// Allocation site (for [`Origin::UnmatchedFree`]: the free site).
    pub stack: StackId,
    /// Event of the `alloc`; `None`: alive before the first event.
    pub alloc_event: Option<EventIdx>,
    /// Event of the `free_requested` that preceded the free, if recorded.
    pub free_requested_event: Option<EventIdx>,
    /// Event of the `free_completed`; `None`: still alive after the last event.
    pub free_event: Option<EventIdx>,
    pub origin: Origin,
}

impl Allocation {
    /// Alive once event `after` has been applied (`None`: before the first event).
    pub fn is_live_at(&self, after: Option<EventIdx>) -> bool {
        let applied = |e: EventIdx| after.is_some_and(|i| e <= i);
        let born = self.alloc_event.is_none_or(applied);
        let dead = self.free_event.is_some_and(applied);
        born && !dead
    }
}

/// Every allocation of one device's trace (see the module docs for the rules).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replay {
    pub device: u32,
    /// Number of trace events of the device.
    pub events: u32,
    /// Traced and unmatched-free allocations in the order their first event appears, then the
    /// untraced ones in segment/block order.
    pub allocations: Vec<Allocation>,
    /// `alloc` at an address that was already open (the earlier allocation stays open).
    pub realloc_without_free: u64,
    /// Traced allocations left open at the end that no active block of the final segments
    /// accounts for (their frees were not recorded, e.g. history was stopped before the
    /// snapshot; includes those counted in `realloc_without_free`).
    pub open_not_in_segments: u64,
}

impl Replay {
    /// Allocations alive once event `after` has been applied (`None`: before the first event).
    pub fn live_at(&self, after: Option<EventIdx>) -> impl Iterator<Item = &Allocation> + '_ {
        self.allocations.iter().filter(move |a| a.is_live_at(after))
    }

    /// Σ requested bytes alive once event `after` has been applied (`None`: before the first).
    pub fn live_bytes_at(&self, after: Option<EventIdx>) -> u64 {
        self.live_at(after).map(|a| a.size_bytes).sum()
    }

    /// Allocations alive before the first event (unmatched frees and untraced blocks).
    pub fn pre_trace(&self) -> impl Iterator<Item = &Allocation> + '_ {
        self.allocations.iter().filter(|a| a.alloc_event.is_none())
    }
}

/// Replays the trace of `device` against its final segment state.
pub fn replay_device(s: &Snapshot, device: u32) -> Replay {
    let rows = s.device_rows(device);
    let t = &s.trace;
    // One allocation per `alloc` (plus the rare unmatched frees): reserved once, not doubled.
    let allocs = t
        .action
        .get(rows.start as usize..rows.end as usize)
        .map_or(0, |a| a.iter().filter(|&&x| x == Action::Alloc).count());
    let mut p = Pairing {
        out: Replay {
            device,
            events: rows.len() as u32,
            ..Replay::default()
        },
        open: FxHashMap::default(),
        lone_requests: FxHashMap::default(),
    };
    p.out.allocations.reserve_exact(allocs);
    let mut streams = t.stream.cursor();
    for (event, r) in rows.enumerate() {
        let r = r as usize;
        let (Some(&action), Some(&addr), Some(&size), Some(stream), Some(&stack)) = (
            t.action.get(r),
            t.addr.get(r),
            t.size_bytes.get(r),
            streams.at(r),
            t.stack.get(r),
        ) else {
            continue;
        };
        let e = Entry {
            event: event as u32,
            addr,
            size,
            stream,
            stack,
        };
        match action {
            Action::Alloc => p.alloc(e),
            Action::FreeRequested => p.free_requested(e),
            Action::FreeCompleted => p.free_completed(e),
            _ => {}
        }
    }
    p.untraced(s, device);
    number_versions(&mut p.out.allocations);
    p.out
}

/// One `alloc`/`free_requested`/`free_completed` entry of the trace.
struct Entry {
    event: u32,
    addr: u64,
    size: u64,
    stream: u64,
    stack: StackId,
}

/// The pairing as it walks the trace.
struct Pairing {
    out: Replay,
    /// Address → index of the open allocation in `out.allocations`.
    open: FxHashMap<u64, usize>,
    /// Address → (event, stack) of a `free_requested` with no open allocation.
    lone_requests: FxHashMap<u64, (u32, StackId)>,
}

impl Pairing {
    fn alloc(&mut self, e: Entry) {
        let idx = self.out.allocations.len();
        self.out.allocations.push(Allocation {
            addr: e.addr,
            version: 0,
            size_bytes: e.size,
            stream: e.stream,
            stack: e.stack,
            alloc_event: Some(e.event),
            free_requested_event: None,
            free_event: None,
            origin: Origin::Traced,
        });
        if self.open.insert(e.addr, idx).is_some() {
            self.out.realloc_without_free += 1;
        }
        self.lone_requests.remove(&e.addr);
    }

    fn free_requested(&mut self, e: Entry) {
        match self
            .open
            .get(&e.addr)
            .and_then(|&i| self.out.allocations.get_mut(i))
        {
            Some(a) => a.free_requested_event = Some(e.event),
            None => {
                self.lone_requests.insert(e.addr, (e.event, e.stack));
            }
        }
    }

    /// Closes the open allocation at the address, or records one made before the trace (its
    /// stack the free's, else its `free_requested`'s).
    fn free_completed(&mut self, e: Entry) {
        if let Some(a) = self
            .open
            .remove(&e.addr)
            .and_then(|i| self.out.allocations.get_mut(i))
        {
            a.free_event = Some(e.event);
            return;
        }
        let request = self.lone_requests.remove(&e.addr);
        let stack = match (e.stack, request) {
            (StackId::EMPTY, Some((_, st))) => st,
            _ => e.stack,
        };
        self.out.allocations.push(Allocation {
            addr: e.addr,
            version: 0,
            size_bytes: e.size,
            stream: e.stream,
            stack,
            alloc_event: None,
            free_requested_event: request.map(|(e, _)| e),
            free_event: Some(e.event),
            origin: Origin::UnmatchedFree,
        });
    }

    /// Active blocks of the final segments the trace left no allocation open at are
    /// allocations it never saw; counts the open ones no active block backs.
    fn untraced(&mut self, s: &Snapshot, device: u32) {
        let out = &mut self.out;
        let mut active: rustc_hash::FxHashSet<u64> = Default::default();
        for seg in s.segments.iter().filter(|g| g.device == device) {
            for b in s.segment_blocks(seg) {
                if b.state.is_active() {
                    active.insert(b.address);
                }
                if b.state.is_active() && !self.open.contains_key(&b.address) {
                    out.allocations.push(Allocation {
                        addr: b.address,
                        version: 0,
                        size_bytes: b.requested_size_bytes,
                        stream: seg.stream,
                        stack: b.stack,
                        alloc_event: None,
                        free_requested_event: None,
                        free_event: None,
                        origin: Origin::Untraced,
                    });
                }
            }
        }
        let open_traced = out
            .allocations
            .iter()
            .filter(|a| a.origin == Origin::Traced && a.free_event.is_none())
            .count();
        let matched = self.open.keys().filter(|a| active.contains(a)).count();
        out.open_not_in_segments = open_traced.saturating_sub(matched) as u64;
    }
}

/// Sets each allocation's version: how many allocations at its address come before it and are
/// freed in the trace. Allocations are in the order of their first entry, and an earlier one at
/// the same address is either freed before that entry or never (an alloc over it left it open),
/// so this counts the `free_completed` entries at the address before the allocation.
fn number_versions(allocations: &mut [Allocation]) {
    let mut freed: FxHashMap<u64, u32> = FxHashMap::default();
    for a in allocations {
        let v = freed.entry(a.addr).or_insert(0);
        a.version = *v;
        if a.free_event.is_some() {
            *v += 1;
        }
    }
}

impl Replay {
    /// Address → alloc event of the address's latest traced allocation, where that one is still
    /// open after the last event (an earlier one left open by a realloc does not count).
    pub fn open_at_end(&self) -> FxHashMap<u64, EventIdx> {
        let mut out = FxHashMap::default();
        for a in &self.allocations {
            match (a.origin, a.alloc_event, a.free_event) {
                (Origin::Traced, Some(e), None) => {
                    out.insert(a.addr, e);
                }
                (Origin::Traced, Some(_), Some(_)) => {
                    out.remove(&a.addr);
                }
                _ => {}
            }
        }
        out
    }

    /// For each event, the allocation (index into [`Replay::allocations`]) that it allocates,
    /// requests the free of, or frees; `None` for other events and for a `free_requested` that
    /// no allocation kept (a repeated one, or a lone one followed by an alloc).
    pub fn allocation_of_events(&self) -> Vec<Option<u32>> {
        let mut of = vec![None; self.events as usize];
        for (k, a) in self.allocations.iter().enumerate() {
            for e in [a.alloc_event, a.free_requested_event, a.free_event]
                .into_iter()
                .flatten()
            {
                if let Some(slot) = of.get_mut(e as usize) {
                    *slot = Some(k as u32);
                }
            }
        }
        of
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device_stats;

    fn snap(text: &str) -> Snapshot {
        match crate::load(text.as_bytes()) {
            Ok(s) => s,
            Err(e) => panic!("test snapshot does not load: {e}"),
        }
    }

    const FRAMES_A: &str = r#"[{"filename":"/x/model.py","line":10,"name":"fwd"}]"#;
    const FRAMES_B: &str = r#"[{"filename":"/x/train.py","line":5,"name":"step"}]"#;

    /// Segment at 0x1000 (4 KiB): block 0x1000 active (alloc traced), block 0x1400 active
    /// (never traced), rest inactive. Trace: free of 0x2000 (allocated before the trace),
    /// alloc 0x1000, alloc/free 0x1800 twice (address reuse), alloc 0x1000 again (no free).
    fn sample() -> Snapshot {
        let text = format!(
            r#"{{"segments":[{{"device":0,"address":4096,"total_size":4096,"stream":0,"blocks":[
                {{"address":4096,"size":1024,"requested_size":1000,"state":"active_allocated","frames":{FRAMES_A}}},
                {{"address":5120,"size":1024,"requested_size":900,"state":"active_allocated","frames":{FRAMES_B}}},
                {{"address":6144,"size":2048,"requested_size":0,"state":"inactive","frames":[]}}]}}],
              "device_traces":[[
                {{"action":"free_requested","addr":8192,"size":300,"stream":0,"frames":{FRAMES_B}}},
                {{"action":"free_completed","addr":8192,"size":300,"stream":0}},
                {{"action":"alloc","addr":6144,"size":100,"stream":0,"frames":{FRAMES_A}}},
                {{"action":"free_requested","addr":6144,"size":100,"stream":0}},
                {{"action":"free_completed","addr":6144,"size":100,"stream":0}},
                {{"action":"alloc","addr":6144,"size":200,"stream":0,"frames":{FRAMES_B}}},
                {{"action":"free_completed","addr":6144,"size":200,"stream":0}},
                {{"action":"alloc","addr":4096,"size":1000,"stream":0,"frames":{FRAMES_A}}},
                {{"action":"snapshot","addr":0,"size":0,"stream":0}}
              ]]}}"#
        );
        snap(&text)
    }

    /// (addr, size, alloc event, free event, origin).
    type Life = (u64, u64, Option<u32>, Option<u32>, Origin);

    #[test]
    fn pairs_by_address_and_version() {
        let s = sample();
        let r = replay_device(&s, 0);
        assert_eq!(r.events, 9);
        let got: Vec<Life> = r
            .allocations
            .iter()
            .map(|a| (a.addr, a.size_bytes, a.alloc_event, a.free_event, a.origin))
            .collect();
        assert_eq!(
            got,
            vec![
                (8192, 300, None, Some(1), Origin::UnmatchedFree),
                (6144, 100, Some(2), Some(4), Origin::Traced),
                (6144, 200, Some(5), Some(6), Origin::Traced),
                (4096, 1000, Some(7), None, Origin::Traced),
                (5120, 900, None, None, Origin::Untraced),
            ]
        );
        assert_eq!(r.allocations[1].free_requested_event, Some(3));
        assert_eq!(r.allocations[0].free_requested_event, Some(0));
        assert_eq!(r.realloc_without_free, 0);
        assert_eq!(r.open_not_in_segments, 0);
    }

    #[test]
    fn unmatched_free_takes_the_stack_of_its_request_when_it_has_none() {
        let s = sample();
        let r = replay_device(&s, 0);
        let a = &r.allocations[0];
        let frames = s.stacks.get(a.stack);
        assert_eq!(frames.len(), 1);
        let f = s.frame(frames[0]).map(|f| s.str(f.name).to_string());
        assert_eq!(f.as_deref(), Some("step"));
    }

    #[test]
    fn live_sets_follow_the_events() {
        let s = sample();
        let r = replay_device(&s, 0);
        let live = |i: Option<u32>| r.live_at(i).map(|a| a.size_bytes).collect::<Vec<_>>();
        assert_eq!(live(None), vec![300, 900]);
        assert_eq!(live(Some(0)), vec![300, 900]);
        assert_eq!(live(Some(1)), vec![900]);
        assert_eq!(live(Some(2)), vec![100, 900]);
        assert_eq!(live(Some(4)), vec![900]);
        assert_eq!(live(Some(5)), vec![200, 900]);
        assert_eq!(live(Some(7)), vec![1000, 900]);
        assert_eq!(live(Some(100)), vec![1000, 900]);
        assert_eq!(r.pre_trace().count(), 2);
    }

    #[test]
    fn live_bytes_match_the_stats_timeline() {
        let s = sample();
        let r = replay_device(&s, 0);
        let st = device_stats(&s, 0);
        assert_eq!(r.live_bytes_at(None) as i64, st.timeline_baseline_bytes);
        assert_eq!(
            r.live_bytes_at(st.timeline_peak_event) as i64,
            st.timeline_peak_bytes
        );
        // The peak is 1900 after the last alloc (event 7).
        assert_eq!(st.timeline_peak_event, Some(7));
        assert_eq!(st.timeline_peak_bytes, 1900);
    }

    #[test]
    fn alloc_over_an_open_address_keeps_the_first_open() {
        let s = snap(
            r#"{"segments":[],"device_traces":[[
                {"action":"alloc","addr":64,"size":10,"stream":0},
                {"action":"alloc","addr":64,"size":20,"stream":0},
                {"action":"free_completed","addr":64,"size":20,"stream":0}]]}"#,
        );
        let r = replay_device(&s, 0);
        assert_eq!(r.realloc_without_free, 1);
        assert_eq!(r.open_not_in_segments, 1);
        assert_eq!(r.live_bytes_at(Some(2)), 10);
        assert_eq!(r.allocations[0].free_event, None);
        assert_eq!(r.allocations[1].free_event, Some(2));
        // Upstream bumps versions on `free_completed` only: both allocations are `_0`.
        assert_eq!(
            r.allocations.iter().map(|a| a.version).collect::<Vec<_>>(),
            [0, 0]
        );
    }

    /// Live bytes after each event, from the allocations' lifetimes (prefix sums).
    fn live_series(r: &Replay) -> Vec<i128> {
        let n = r.events as usize;
        let mut delta = vec![0i128; n + 1];
        for a in &r.allocations {
            let size = i128::from(a.size_bytes);
            delta[a.alloc_event.map_or(0, |e| e as usize + 1)] += size;
            if let Some(f) = a.free_event {
                delta[f as usize + 1] -= size;
            }
        }
        let mut cur = 0i128;
        delta
            .iter()
            .map(|d| {
                cur += d;
                cur
            })
            .collect()
    }

    /// On every real snapshot whose trace agrees with its final segments, the replay's live bytes
    /// equal the stats timeline (baseline + running Σ alloc − free_completed) at every event.
    #[test]
    fn replay_matches_the_stats_timeline_on_real_snapshots() {
        let Some(files) = memlens_fixture::shared_snapshots() else {
            return;
        };
        let (mut checked, mut skipped) = (0, 0);
        for f in &files {
            let bytes = std::fs::read(f).unwrap_or_default();
            let Ok(s) = crate::load(&bytes) else {
                panic!("{} does not load", f.display())
            };
            for d in s.devices() {
                let r = replay_device(&s, d);
                if r.open_not_in_segments > 0 {
                    skipped += 1;
                    continue;
                }
                let st = device_stats(&s, d);
                let mut want = vec![i128::from(st.timeline_baseline_bytes)];
                let mut cur = want[0];
                for row in s.device_rows(d) {
                    let size = i128::from(s.trace.size_bytes[row as usize]);
                    match s.trace.action[row as usize] {
                        Action::Alloc => cur += size,
                        Action::FreeCompleted => cur -= size,
                        _ => {}
                    }
                    want.push(cur);
                }
                assert_eq!(live_series(&r), want, "{} device {d}", f.display());
                assert_eq!(
                    r.live_bytes_at(st.timeline_peak_event) as i64,
                    st.timeline_peak_bytes
                );
                checked += 1;
            }
        }
        println!("replay = stats timeline on {checked} devices; {skipped} skipped (trace and segments disagree)");
    }

    #[test]
    fn devices_are_replayed_separately() {
        let s = snap(
            r#"{"segments":[{"device":1,"address":0,"total_size":512,"stream":7,"blocks":[
                  {"address":0,"size":512,"requested_size":500,"state":"active_pending_free"}]}],
                "device_traces":[[{"action":"alloc","addr":0,"size":5,"stream":0}],[]]}"#,
        );
        let r0 = replay_device(&s, 0);
        assert_eq!(r0.allocations.len(), 1);
        // Device 0 has no segment holding the block its trace leaves open.
        assert_eq!(r0.open_not_in_segments, 1);
        assert_eq!(r0.live_bytes_at(Some(0)), 5);
        let r1 = replay_device(&s, 1);
        assert_eq!(r1.events, 0);
        assert_eq!(r1.allocations.len(), 1);
        assert_eq!(
            (r1.allocations[0].origin, r1.allocations[0].stream),
            (Origin::Untraced, 7)
        );
        assert_eq!(r1.live_bytes_at(None), 500);
        // A device with neither trace nor segments replays to nothing.
        assert_eq!(
            replay_device(&s, 5),
            Replay {
                device: 5,
                ..Replay::default()
            }
        );
    }
}
