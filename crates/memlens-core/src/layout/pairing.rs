//! Pairing the trace into a timeline's elements: the Active allocations from the shared
//! [`crate::replay`], and the Segments view's ranges (`segment_alloc`/`segment_free` by
//! address, `segment_map`/`segment_unmap` ranges of expandable segments), in stack order.

use super::elements::{ElementKind, Elements, Tmp};
use crate::model::Snapshot;
use crate::replay::Origin;
use crate::trace::{Action, StackId};
use rustc_hash::FxHashMap;

/// Allocations from the shared [`crate::replay`] (alloc paired with `free_completed` by address,
/// frees of allocations made before the trace, active blocks the trace never saw).
pub(super) fn pair_active(
    snap: &Snapshot,
    device: u32,
    res: &super::pools::PoolResolver,
    pools: &mut super::pools::PoolTable,
) -> (Elements, Vec<String>) {
    let rp = crate::replay::replay_device(snap, device);
    let n = rp.events;
    let tmp_of = |a: &crate::replay::Allocation, version: u32, pool: Option<u32>| Tmp {
        size: a.size_bytes,
        addr: a.addr,
        version,
        start_x: a.alloc_event.map(|i| i + 1).unwrap_or(0),
        end_x: a.free_event.map(|i| i + 1).unwrap_or(n + 1),
        alloc_row: a.alloc_event,
        free_row: a.free_event,
        stream: a.stream,
        kind: ElementKind::Allocation(a.origin),
        stack: a.stack,
        pool,
    };
    // In allocation order: pools (numbered in order of appearance); the allocations from before
    // the trace, which sit at the bottom, are set aside.
    let mut version_pool: Vec<(u32, Option<u32>)> = Vec::with_capacity(rp.allocations.len());
    let (mut before, mut ghosts) = (Vec::new(), Vec::new());
    for a in &rp.allocations {
        let version = a.version;
        let pool = pools.index(res.pool_of_allocation(a));
        version_pool.push((version, pool));
        match a.origin {
            Origin::Untraced => ghosts.push(tmp_of(a, version, pool)),
            Origin::UnmatchedFree => before.push(tmp_of(a, version, pool)),
            _ => {}
        }
    }
    // Longest-lived first at the bottom (as `order`), then the trace's own allocations written
    // straight into the columns.
    before.sort_by_key(|e| std::cmp::Reverse(e.end_x));
    let mut el = Elements::with_capacity(rp.allocations.len());
    for t in ghosts.into_iter().chain(before) {
        el.push(t);
    }
    for (a, &(version, pool)) in rp.allocations.iter().zip(&version_pool) {
        if a.origin == Origin::Traced {
            el.push(tmp_of(a, version, pool));
        }
    }
    let mut warnings = Vec::new();
    if rp.realloc_without_free > 0 {
        warnings.push(format!(
            "{} allocs at an address that was still live (the earlier allocation stays alive to the end, as upstream draws it)",
            rp.realloc_without_free
        ));
    }
    (el, warnings)
}

/// Longest-lived first at the bottom, then the trace in alloc order.
fn order(ghosts: Vec<Tmp>, mut before: Vec<Tmp>, traced: Vec<Tmp>) -> Elements {
    // Freed last sits lowest, so a free of memory from before the trace moves as little as possible.
    before.sort_by_key(|e| std::cmp::Reverse(e.end_x));
    let mut el = Elements::with_capacity(ghosts.len() + before.len() + traced.len());
    for e in ghosts.into_iter().chain(before).chain(traced) {
        el.push(e);
    }
    el
}

/// Segments: `segment_alloc`/`segment_free` paired by address; `segment_map` adds a range and
/// `segment_unmap` removes bytes from whatever mapped ranges it covers (expandable segments).
pub(super) fn pair_segments(
    snap: &Snapshot,
    device: u32,
    res: &super::pools::PoolResolver,
    pools: &mut super::pools::PoolTable,
) -> (Elements, Vec<String>) {
    let rows = snap.device_rows(device);
    let t = &snap.trace;
    let mut p = SegmentPairing::new(rows.len() as u32);
    let mut streams = t.stream.cursor();
    for (i, r) in rows.enumerate() {
        let r = r as usize;
        let (Some(&action), Some(&addr), Some(&size)) =
            (t.action.get(r), t.addr.get(r), t.size_bytes.get(r))
        else {
            continue;
        };
        let i = i as u32;
        let entry = SegEntry {
            event: i,
            addr,
            size,
            stream: streams.at(r).unwrap_or(0),
            stack: t.stack.get(r).copied().unwrap_or(StackId::EMPTY),
            pool: pools.index(res.pool_of(addr, Some(i))),
        };
        match action {
            Action::SegmentAlloc | Action::SegmentMap => p.map(entry),
            Action::SegmentFree | Action::SegmentUnmap => p.unmap(entry),
            _ => {}
        }
    }
    let ghosts = p.ghosts(snap, device, pools);
    let mut warnings = Vec::new();
    if p.untraced_unmaps > 0 {
        warnings.push(format!(
            "{} segment frees/unmaps of memory mapped before the trace",
            p.untraced_unmaps
        ));
    }
    // Remainders were appended after later allocs: restore start order (stable).
    p.traced.sort_by_key(|e| e.start_x);
    (order(ghosts, p.before, p.traced), warnings)
}

/// One segment entry of the trace: a range mapped or unmapped at device-local `event`.
struct SegEntry {
    event: u32,
    addr: u64,
    size: u64,
    stream: u64,
    stack: StackId,
    pool: Option<u32>,
}

/// The Segments view's pairing as it walks the trace.
struct SegmentPairing {
    /// Events of the device.
    n: u32,
    /// Ranges mapped in the trace (and the remainders of partly unmapped ones), by event.
    traced: Vec<Tmp>,
    /// Memory unmapped in the trace that it never saw mapped.
    before: Vec<Tmp>,
    /// Live ranges by start address: (end address, element index in `traced`).
    live: std::collections::BTreeMap<u64, (u64, usize)>,
    /// Ranges seen so far at each address (upstream's `_N`).
    versions: FxHashMap<u64, u32>,
    untraced_unmaps: u64,
}

impl SegmentPairing {
    fn new(n: u32) -> SegmentPairing {
        SegmentPairing {
            n,
            traced: Vec::new(),
            before: Vec::new(),
            live: Default::default(),
            versions: FxHashMap::default(),
            untraced_unmaps: 0,
        }
    }

    fn version(&self, addr: u64) -> u32 {
        self.versions.get(&addr).copied().unwrap_or(0)
    }

    /// A live range `[addr, addr + size)` from `r.event` on, of `kind`.
    fn open(
        &mut self,
        r: &SegEntry,
        addr: u64,
        size: u64,
        kind: ElementKind,
        alloc_row: Option<u32>,
    ) {
        self.live
            .insert(addr, (addr.saturating_add(size), self.traced.len()));
        self.traced.push(Tmp {
            size,
            addr,
            version: self.version(addr),
            start_x: r.event + 1,
            end_x: self.n + 1,
            alloc_row,
            free_row: None,
            stream: r.stream,
            kind,
            stack: r.stack,
            pool: r.pool,
        });
    }

    /// `segment_alloc` / `segment_map`.
    fn map(&mut self, r: SegEntry) {
        self.open(&r, r.addr, r.size, ElementKind::TRACED, Some(r.event));
        *self.versions.entry(r.addr).or_insert(0) += 1;
    }

    /// `segment_free` / `segment_unmap`: every live range overlapping it ends here; the parts
    /// outside it live on as remainders, and what no live range covered was mapped before the
    /// trace.
    fn unmap(&mut self, r: SegEntry) {
        let (addr, end, i) = (r.addr, r.addr.saturating_add(r.size), r.event);
        let overlapping: Vec<(u64, u64, usize)> = self
            .live
            .range(..end)
            .rev()
            .take_while(|(_, (e_end, _))| *e_end > addr)
            .map(|(&s, &(e_end, idx))| (s, e_end, idx))
            .collect();
        let mut covered = 0u64;
        for (s, e_end, idx) in overlapping {
            self.live.remove(&s);
            covered += e_end.min(end) - s.max(addr);
            let Some(old) = self.traced.get_mut(idx) else {
                continue;
            };
            old.end_x = i + 1;
            old.free_row = Some(i);
            let old = *old;
            let rest = SegEntry {
                stream: old.stream,
                stack: old.stack,
                pool: old.pool,
                ..r
            };
            for (rs, re) in [(s, addr.min(e_end)), (end.max(s), e_end)] {
                if re > rs {
                    self.open(&rest, rs, re - rs, ElementKind::Remainder, old.alloc_row);
                }
            }
        }
        *self.versions.entry(addr).or_insert(0) += 1;
        if covered < r.size {
            self.untraced_unmaps += 1;
            self.before.push(Tmp {
                size: r.size - covered,
                addr,
                version: 0,
                start_x: 0,
                end_x: i + 1,
                alloc_row: None,
                free_row: Some(i),
                stream: r.stream,
                kind: ElementKind::Allocation(Origin::UnmatchedFree),
                stack: r.stack,
                pool: r.pool,
            });
        }
    }

    /// Segments of the file not live at the end of the trace existed before it.
    fn ghosts(
        &self,
        snap: &Snapshot,
        device: u32,
        pools: &mut super::pools::PoolTable,
    ) -> Vec<Tmp> {
        let mut ghosts = Vec::new();
        for seg in snap.segments.iter().filter(|s| s.device == device) {
            let (s, e) = (
                seg.address,
                seg.address.saturating_add(seg.total_size_bytes),
            );
            let covered: u64 = self
                .live
                .range(..e)
                .rev()
                .take_while(|(_, (r_end, _))| *r_end > s)
                .map(|(&rs, &(re, _))| re.min(e) - rs.max(s))
                .sum();
            if covered < seg.total_size_bytes {
                ghosts.push(Tmp {
                    size: seg.total_size_bytes - covered,
                    addr: seg.address,
                    version: self.version(seg.address),
                    start_x: 0,
                    end_x: self.n + 1,
                    alloc_row: None,
                    free_row: None,
                    stream: seg.stream,
                    kind: ElementKind::Allocation(Origin::Untraced),
                    stack: seg.stack,
                    pool: pools.index(Some(seg.pool_id)),
                });
            }
        }
        ghosts
    }
}
