//! Private pools (CUDA graphs, `torch.cuda.MemPool`, FSDP) for upstream's "Allocated Memory
//! (incl. Private Pools)" view: which pool each allocation belongs to, and the stacking that
//! puts a private pool's allocations inside one envelope.
//!
//! Rules (upstream's `process_alloc_data(include_private_inactive)`, reference §2.5 item 6):
//! - an allocation's pool is the `pool_id` its trace entry carries (torch ≥ 2.11), else the
//!   `segment_pool_id` of the snapshot segment holding its address; a pool is private unless it
//!   is `(0, 0)`. Memory in no pool that is known stays in the ordinary stack;
//! - each (private pool, stream) gets an envelope, placed on the stack when the pool first holds
//!   something, as tall as the larger of its live allocations and its reserved memory; the
//!   pool's allocations stack inside it from its bottom (an alloc on top of the pool's own
//!   stack, a free letting those above it slide down), and the rest of the stack sits on top;
//! - reserved memory is the pool's segments in the snapshot minus the net `segment_alloc` /
//!   `segment_map` − `segment_free` / `segment_unmap` of the pool in the trace, replayed
//!   forward. Unlike upstream's, which only grows, an envelope shrinks when its segments are
//!   freed (and everything above it slides down).
//!
//! An envelope's height changes over time while elements have one size, so an envelope is a
//! chain of elements ([`ElementKind::PoolEnvelope`]), one per stretch of constant height.

use super::elements::{ElementKind, Elements, Tmp};
use super::stacking::{end_lists, starts_at, PieceLog, Stacked};
use super::tolerance::{piece_tolerance, PIECE_BUDGET};
use crate::model::Snapshot;
use crate::replay::Allocation;
use crate::trace::StackId;
use crate::trace::{Action, EntryExtra};
use rustc_hash::FxHashMap;

/// Finds the pool of an address (or of a trace entry) on one device, by the rule above (also
/// the pool column of `memlens export`'s allocations).
pub struct PoolResolver<'a> {
    snap: &'a Snapshot,
    rows_start: u32,
    /// Snapshot segments of the device: (start, end, pool), by start.
    segs: Vec<(u64, u64, (i64, i64))>,
}

impl<'a> PoolResolver<'a> {
    pub fn new(snap: &'a Snapshot, device: u32) -> PoolResolver<'a> {
        let mut segs: Vec<(u64, u64, (i64, i64))> = snap
            .segments
            .iter()
            .filter(|s| s.device == device)
            .map(|s| {
                (
                    s.address,
                    s.address.saturating_add(s.total_size_bytes),
                    s.pool_id,
                )
            })
            .collect();
        segs.sort_unstable();
        PoolResolver {
            snap,
            rows_start: snap.device_rows(device).start,
            segs,
        }
    }

    /// The pool of `addr`, from device-local trace entry `row`'s `pool_id` if it has one.
    pub fn pool_of(&self, addr: u64, row: Option<u32>) -> Option<(i64, i64)> {
        if let Some(r) = row {
            let abs = self.rows_start.saturating_add(r);
            let from_entry = self.snap.trace.extras_of(abs).find_map(|x| match x {
                EntryExtra::PoolId(a, b) => Some((*a, *b)),
                _ => None,
            });
            if from_entry.is_some() {
                return from_entry;
            }
        }
        let i = self.segs.partition_point(|s| s.0 <= addr);
        let (_, end, pool) = *self.segs.get(i.checked_sub(1)?)?;
        (addr < end).then_some(pool)
    }

    /// The pool of an allocation: its `alloc` entry's (or, for an unmatched free, its free's).
    pub fn pool_of_allocation(&self, a: &Allocation) -> Option<(i64, i64)> {
        self.pool_of(a.addr, a.alloc_event.or(a.free_event))
    }
}

/// Distinct pool ids, numbered in order of appearance.
#[derive(Default)]
pub(super) struct PoolTable {
    pub(super) ids: Vec<(i64, i64)>,
    index: FxHashMap<(i64, i64), u32>,
}

impl PoolTable {
    /// The number of `pool` (`None`: not known).
    pub(super) fn index(&mut self, pool: Option<(i64, i64)>) -> Option<u32> {
        let p = pool?;
        Some(*self.index.entry(p).or_insert_with(|| {
            self.ids.push(p);
            (self.ids.len() - 1) as u32
        }))
    }

    /// Pool number `i`, if it is a private pool.
    fn private(&self, i: Option<u32>) -> Option<u32> {
        i.filter(|&i| self.ids.get(i as usize).is_some_and(|&p| p != (0, 0)))
    }
}

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Tag {
    Elem,
    /// Bottom of pool state `k`'s envelope (no size: its allocations follow it).
    PoolStart(u32),
    /// What the envelope holds above the pool's allocations: `height - active`.
    PoolSlack(u32),
}

/// One place on the stack during the sweep.
#[derive(Clone, Copy)]
struct Slot {
    tag: Tag,
    /// Element whose pieces this slot records (`NONE`: none).
    e: u32,
    y: u64,
    last: u64,
    /// Bytes it takes on the stack.
    size: u64,
    /// Height of the band drawn from it (its size, or the envelope's height).
    band: u64,
}

/// A (private pool, stream) during the sweep.
struct PoolState {
    pool: u32,
    stream: u64,
    active: u64,
    reserved: i64,
    height: u64,
    started: bool,
    /// Current envelope element (`NONE` while the height is 0).
    env: u32,
}

struct Sweep {
    slots: Vec<Slot>,
    pools: Vec<PoolState>,
    /// The pool state of each (pool, stream), numbered in order of appearance.
    pool_keys: FxHashMap<(u32, u64), u32>,
    /// Envelope elements made so far (ids follow the allocations').
    envelopes: Vec<Tmp>,
    n_alloc: u32,
    /// Pieces in emission order (element ids before the final reordering).
    pieces: PieceLog,
    over_budget: bool,
}

impl Sweep {
    fn new(n_alloc: u32) -> Sweep {
        Sweep {
            slots: Vec::new(),
            pools: Vec::new(),
            pool_keys: FxHashMap::default(),
            envelopes: Vec::new(),
            n_alloc,
            pieces: PieceLog::with_capacity(0),
            over_budget: false,
        }
    }

    /// The state of private pool `pool` on `stream`, made when first asked for.
    fn pool_state(&mut self, pool: u32, stream: u64) -> u32 {
        let pools = &mut self.pools;
        *self.pool_keys.entry((pool, stream)).or_insert_with(|| {
            pools.push(PoolState {
                pool,
                stream,
                active: 0,
                reserved: 0,
                height: 0,
                started: false,
                env: NONE,
            });
            (pools.len() - 1) as u32
        })
    }

    fn piece(&mut self, e: u32, x: u32, y: u64, start: bool) {
        if start || !self.over_budget {
            self.pieces.push(e, x, y);
            self.over_budget = self.pieces.len() >= PIECE_BUDGET;
        }
    }

    fn find(&self, tag: Tag, e: u32) -> Option<usize> {
        self.slots
            .iter()
            .rposition(|s| s.tag == tag && (tag != Tag::Elem || s.e == e))
    }

    /// Recomputes bottoms from slot `from` up, recording the moves past the tolerance.
    fn relayout(&mut self, from: usize, x: u32) {
        let mut y = match from.checked_sub(1).and_then(|i| self.slots.get(i)) {
            Some(s) => s.y + s.size,
            None => 0,
        };
        let mut moved = Vec::new();
        for s in self.slots.iter_mut().skip(from) {
            s.y = y;
            y += s.size;
            if s.e != NONE && s.last.abs_diff(s.y) > piece_tolerance(s.y, s.band) {
                s.last = s.y;
                moved.push((s.e, s.y));
            }
        }
        for (e, y) in moved {
            self.piece(e, x, y, false);
        }
    }

    fn top(&self) -> u64 {
        self.slots.last().map(|s| s.y + s.size).unwrap_or(0)
    }

    fn push(&mut self, tag: Tag, e: u32, size: u64, band: u64, x: u32) {
        let y = self.top();
        self.slots.push(Slot {
            tag,
            e,
            y,
            last: y,
            size,
            band,
        });
        if e != NONE {
            self.piece(e, x, y, true);
        }
    }

    fn start_pool(&mut self, k: u32, x: u32) {
        if let Some(p) = self.pools.get_mut(k as usize) {
            p.started = true;
        }
        self.push(Tag::PoolStart(k), NONE, 0, 0, x);
        self.push(Tag::PoolSlack(k), NONE, 0, 0, x);
    }

    /// Sets pool `k`'s height from its active and reserved bytes (starting a new envelope
    /// element when it changes) and the slack above its allocations. Returns the slack's
    /// index: the caller relays the stack out from there (or lower) once, after all changes.
    fn resize(&mut self, k: u32, x: u32) -> Option<usize> {
        let p = self.pools.get(k as usize)?;
        let height = p.active.max(p.reserved.max(0) as u64);
        let (old_env, changed, slack, pool, stream) = (
            p.env,
            height != p.height,
            height - p.active,
            p.pool,
            p.stream,
        );
        let si = self.find(Tag::PoolStart(k), NONE)?;
        let li = self.find(Tag::PoolSlack(k), NONE)?;
        if changed {
            if let Some(t) = old_env
                .checked_sub(self.n_alloc)
                .and_then(|i| self.envelopes.get_mut(i as usize))
            {
                t.end_x = x;
            }
            let mut env = NONE;
            if height > 0 {
                env = self.n_alloc + self.envelopes.len() as u32;
                self.envelopes.push(Tmp {
                    size: height,
                    addr: 0,
                    version: self.envelopes.len() as u32,
                    start_x: x,
                    end_x: u32::MAX,
                    alloc_row: None,
                    free_row: None,
                    stream,
                    kind: ElementKind::PoolEnvelope,
                    stack: StackId::EMPTY,
                    pool: Some(pool),
                });
            }
            let y = self.slots.get(si).map(|s| s.y).unwrap_or(0);
            if let Some(s) = self.slots.get_mut(si) {
                s.e = env;
                s.band = height;
                s.last = y;
            }
            if env != NONE {
                self.piece(env, x, y, true);
            }
            if let Some(p) = self.pools.get_mut(k as usize) {
                p.height = height;
                p.env = env;
            }
        }
        if let Some(s) = self.slots.get_mut(li) {
            s.size = slack;
        }
        Some(li)
    }
}

/// Stacks the Active allocations `el` with private pools in envelopes (see the module docs).
/// Returns the elements (allocations and envelopes, by start) and their geometry.
pub(super) fn stack_allocated(
    snap: &Snapshot,
    device: u32,
    el: Elements,
    n_events: u32,
    res: &PoolResolver,
    table: &mut PoolTable,
) -> (Elements, Stacked) {
    let xs = n_events as usize + 1;
    let mut sw = Sweep::new(el.len() as u32);
    let elem_pool = sw.elem_pools(&el, table);
    let seg_events = sw.segment_events(snap, device, res, table);
    sw.reserved_at_start(snap, device, table, &seg_events);
    let mut seg_at: Vec<Vec<(u32, i64)>> = vec![Vec::new(); xs];
    for (x, k, d) in seg_events {
        if let Some(v) = seg_at.get_mut(x as usize) {
            v.push((k, d));
        }
    }
    let total = sw.run(&el, &elem_pool, &seg_at);
    // Envelopes still open last to the end; then all elements by start (stable).
    let mut rows_all: Vec<Tmp> = (0..el.len()).filter_map(|e| el.row(e)).collect();
    for mut t in sw.envelopes.drain(..) {
        t.end_x = t.end_x.min(xs as u32);
        rows_all.push(t);
    }
    let (out, new_id) = by_start(rows_all);
    let (start, t0, y0) = sw.pieces.renumber(&new_id).by_element(out.len());
    let mut warnings = Vec::new();
    if sw.over_budget {
        warnings.push(format!(
            "the stacked layout needs more than {PIECE_BUDGET} pieces; bands stop sliding after that point"
        ));
    }
    let stacked = Stacked {
        piece_start: start,
        piece_t0: t0,
        piece_y0: y0,
        total_bytes: total,
        warnings,
    };
    (out, stacked)
}

/// `rows` ordered by start (stable), and the new id of each old one.
fn by_start(rows: Vec<Tmp>) -> (Elements, Vec<u32>) {
    let mut order: Vec<u32> = (0..rows.len() as u32).collect();
    order.sort_by_key(|&i| rows.get(i as usize).map(|t| t.start_x).unwrap_or(0));
    let mut new_id = vec![0u32; order.len()];
    let mut out = Elements::default();
    for (n, &old) in order.iter().enumerate() {
        if let (Some(t), Some(slot)) = (rows.get(old as usize), new_id.get_mut(old as usize)) {
            out.push(*t);
            *slot = n as u32;
        }
    }
    (out, new_id)
}

impl Sweep {
    /// The pool state of each allocation (`NONE`: the ordinary stack).
    fn elem_pools(&mut self, el: &Elements, table: &PoolTable) -> Vec<u32> {
        let mut elem_pool = vec![NONE; el.len()];
        for (e, k) in elem_pool.iter_mut().enumerate() {
            if let (Some(p), Some(&stream)) = (table.private(el.pool.get(e)), el.stream.get(e)) {
                *k = self.pool_state(p, stream);
            }
        }
        elem_pool
    }

    /// Segment events of private pools: (x, pool state, signed bytes).
    fn segment_events(
        &mut self,
        snap: &Snapshot,
        device: u32,
        res: &PoolResolver,
        table: &mut PoolTable,
    ) -> Vec<(u32, u32, i64)> {
        let t = &snap.trace;
        let mut seg_events = Vec::new();
        let mut streams = t.stream.cursor();
        for (i, r) in snap.device_rows(device).enumerate() {
            let r = r as usize;
            let (Some(&action), Some(&addr), Some(&size), Some(stream)) = (
                t.action.get(r),
                t.addr.get(r),
                t.size_bytes.get(r),
                streams.at(r),
            ) else {
                continue;
            };
            let sign = match action {
                Action::SegmentAlloc | Action::SegmentMap => 1,
                Action::SegmentFree | Action::SegmentUnmap => -1,
                _ => continue,
            };
            let p = table.index(res.pool_of(addr, Some(i as u32)));
            if let Some(p) = table.private(p) {
                let k = self.pool_state(p, stream);
                seg_events.push((i as u32 + 1, k, sign * size.min(i64::MAX as u64) as i64));
            }
        }
        seg_events
    }

    /// Each pool's reserved bytes before the trace: its segments in the snapshot less the net
    /// of its segment events. Pools holding memory then are on the stack from the start.
    fn reserved_at_start(
        &mut self,
        snap: &Snapshot,
        device: u32,
        table: &mut PoolTable,
        seg_events: &[(u32, u32, i64)],
    ) {
        let mut net: FxHashMap<u32, i64> = FxHashMap::default();
        for &(_, k, d) in seg_events {
            *net.entry(k).or_insert(0) += d;
        }
        for seg in snap.segments.iter().filter(|s| s.device == device) {
            let p = table.index(Some(seg.pool_id));
            if let Some(p) = table.private(p) {
                let k = self.pool_state(p, seg.stream);
                if let Some(ps) = self.pools.get_mut(k as usize) {
                    ps.reserved = ps
                        .reserved
                        .saturating_add(seg.total_size_bytes.min(i64::MAX as u64) as i64);
                }
            }
        }
        for (k, ps) in self.pools.iter_mut().enumerate() {
            ps.reserved = ps
                .reserved
                .saturating_sub(net.get(&(k as u32)).copied().unwrap_or(0));
        }
        for k in 0..self.pools.len() as u32 {
            if self.pools.get(k as usize).is_some_and(|p| p.reserved > 0) {
                self.start_pool(k, 0);
                if let Some(li) = self.resize(k, 0) {
                    self.relayout(li, 0);
                }
            }
        }
    }

    /// The sweep over x: at each x the frees, then the pools' segment events, then the allocs.
    /// Returns the live total at each x.
    fn run(&mut self, el: &Elements, elem_pool: &[u32], seg_at: &[Vec<(u32, i64)>]) -> Vec<u64> {
        let xs = seg_at.len();
        let (end_head, end_next) = end_lists(el, xs);
        let mut next_start = 0usize;
        let mut total = vec![0u64; xs];
        for (x, tot) in total.iter_mut().enumerate() {
            let xu = x as u32;
            let mut e = end_head.get(x).copied().unwrap_or(NONE);
            while e != NONE {
                self.end(e, el, elem_pool, xu);
                e = end_next.get(e as usize).copied().unwrap_or(NONE);
            }
            for &(k, d) in seg_at.get(x).map(Vec::as_slice).unwrap_or(&[]) {
                self.segment(k, d, xu);
            }
            for (e, size) in starts_at(el, &mut next_start, x) {
                self.start(e, size, elem_pool, xu);
            }
            *tot = self.top();
        }
        total
    }

    /// Allocation `e` is freed at `x`.
    fn end(&mut self, e: u32, el: &Elements, elem_pool: &[u32], x: u32) {
        let Some(i) = self.find(Tag::Elem, e) else {
            return;
        };
        self.slots.remove(i);
        let k = elem_pool.get(e as usize).copied().unwrap_or(NONE);
        if let Some(p) = self.pools.get_mut(k as usize) {
            p.active = p
                .active
                .saturating_sub(el.size_bytes.get(e as usize).copied().unwrap_or(0));
            self.resize(k, x);
        }
        // The freed slot was below (or is) everything that moves.
        self.relayout(i, x);
    }

    /// Pool state `k` maps (`d > 0`) or unmaps `d` bytes at `x`.
    fn segment(&mut self, k: u32, d: i64, x: u32) {
        let Some(p) = self.pools.get_mut(k as usize) else {
            return;
        };
        p.reserved = p.reserved.saturating_add(d);
        if !p.started {
            self.start_pool(k, x);
        }
        if let Some(li) = self.resize(k, x) {
            self.relayout(li, x);
        }
    }

    /// Allocation `e` of `size` bytes is made at `x`: on top of the stack, or on top of its
    /// private pool's allocations inside the envelope.
    fn start(&mut self, e: u32, size: u64, elem_pool: &[u32], x: u32) {
        let k = elem_pool.get(e as usize).copied().unwrap_or(NONE);
        if k == NONE {
            self.push(Tag::Elem, e, size, size, x);
            return;
        }
        if !self.pools.get(k as usize).is_some_and(|p| p.started) {
            self.start_pool(k, x);
        }
        let Some(li) = self.find(Tag::PoolSlack(k), NONE) else {
            return;
        };
        let y = self.slots.get(li).map(|s| s.y).unwrap_or(0);
        let slot = Slot {
            tag: Tag::Elem,
            e,
            y,
            last: y,
            size,
            band: size,
        };
        self.slots.insert(li, slot);
        self.piece(e, x, y, true);
        if let Some(p) = self.pools.get_mut(k as usize) {
            p.active = p.active.saturating_add(size);
        }
        if let Some(li) = self.resize(k, x) {
            self.relayout(li, x);
        }
    }
}
