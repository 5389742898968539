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
    let n = rows.len() as u32;
    let t = &snap.trace;
    let mut traced: Vec<Tmp> = Vec::new();
    let mut before: Vec<Tmp> = Vec::new();
    // Live ranges by start address: (end address, element index in `traced`).
    let mut live: std::collections::BTreeMap<u64, (u64, usize)> = Default::default();
    let mut versions: FxHashMap<u64, u32> = FxHashMap::default();
    let mut untraced_unmaps = 0u64;
    let mut streams = t.stream.cursor();
    for (i, r) in rows.clone().enumerate() {
        let r = r as usize;
        let (Some(&action), Some(&addr), Some(&size)) =
            (t.action.get(r), t.addr.get(r), t.size_bytes.get(r))
        else {
            continue;
        };
        let i = i as u32;
        let stream = streams.at(r).unwrap_or(0);
        let stack = t.stack.get(r).copied().unwrap_or(StackId::EMPTY);
        let end = addr.saturating_add(size);
        let pool = pools.index(res.pool_of(addr, Some(i)));
        match action {
            Action::SegmentAlloc | Action::SegmentMap => {
                let version = *versions.get(&addr).unwrap_or(&0);
                *versions.entry(addr).or_insert(0) += 1;
                live.insert(addr, (end, traced.len()));
                traced.push(Tmp {
                    size,
                    addr,
                    version,
                    start_x: i + 1,
                    end_x: n + 1,
                    alloc_row: Some(i),
                    free_row: None,
                    stream,
                    kind: ElementKind::TRACED,
                    stack,
                    pool,
                });
            }
            Action::SegmentFree | Action::SegmentUnmap => {
                // Every live range overlapping [addr, end) ends here; the parts outside it live on.
                let overlapping: Vec<(u64, u64, usize)> = live
                    .range(..end)
                    .rev()
                    .take_while(|(_, (e_end, _))| *e_end > addr)
                    .map(|(&s, &(e_end, idx))| (s, e_end, idx))
                    .collect();
                let mut covered = 0u64;
                for (s, e_end, idx) in overlapping {
                    live.remove(&s);
                    covered += e_end.min(end) - s.max(addr);
                    let Some(old) = traced.get_mut(idx) else {
                        continue;
                    };
                    old.end_x = i + 1;
                    old.free_row = Some(i);
                    let old = *old;
                    for (rs, re) in [(s, addr.min(e_end)), (end.max(s), e_end)] {
                        if re > rs {
                            live.insert(rs, (re, traced.len()));
                            traced.push(Tmp {
                                size: re - rs,
                                addr: rs,
                                version: *versions.get(&rs).unwrap_or(&0),
                                start_x: i + 1,
                                end_x: n + 1,
                                alloc_row: old.alloc_row,
                                free_row: None,
                                stream: old.stream,
                                kind: ElementKind::Remainder,
                                stack: old.stack,
                                pool: old.pool,
                            });
                        }
                    }
                }
                *versions.entry(addr).or_insert(0) += 1;
                if covered < size {
                    untraced_unmaps += 1;
                    before.push(Tmp {
                        size: size - covered,
                        addr,
                        version: 0,
                        start_x: 0,
                        end_x: i + 1,
                        alloc_row: None,
                        free_row: Some(i),
                        stream,
                        kind: ElementKind::Allocation(Origin::UnmatchedFree),
                        stack,
                        pool,
                    });
                }
            }
            _ => {}
        }
    }
    // Segments of the file not live at the end of the trace existed before it.
    let mut ghosts = Vec::new();
    for seg in snap.segments.iter().filter(|s| s.device == device) {
        let (s, e) = (
            seg.address,
            seg.address.saturating_add(seg.total_size_bytes),
        );
        let covered: u64 = live
            .range(..e)
            .rev()
            .take_while(|(_, (r_end, _))| *r_end > s)
            .map(|(&rs, &(re, _))| re.min(e) - rs.max(s))
            .sum();
        if covered < seg.total_size_bytes {
            ghosts.push(Tmp {
                size: seg.total_size_bytes - covered,
                addr: seg.address,
                version: *versions.get(&seg.address).unwrap_or(&0),
                start_x: 0,
                end_x: n + 1,
                alloc_row: None,
                free_row: None,
                stream: seg.stream,
                kind: ElementKind::Allocation(Origin::Untraced),
                stack: seg.stack,
                pool: pools.index(Some(seg.pool_id)),
            });
        }
    }
    // Remainders were appended after later allocs: restore start order (stable).
    traced.sort_by_key(|e| e.start_x);
    let mut warnings = Vec::new();
    if untraced_unmaps > 0 {
        warnings.push(format!(
            "{untraced_unmaps} segment frees/unmaps of memory mapped before the trace"
        ));
    }
    (order(ghosts, before, traced), warnings)
}
