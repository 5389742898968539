//! Building an [`AllocatorHistory`]: a pairing pre-pass, then one backward pass from the final
//! segments that turns every trace entry into a reversible [`Ops`] record (deciding block sizes
//! and merges once) and lays down the checkpoints. Kept apart from the seeking code because it
//! is the only place that decides anything; seeks only replay what it recorded.
//!
//! The pass reads the model's trace columns in place ([`Inputs`]) and writes what each entry
//! did through [`Record`]: into [`Ops`] for a history, nowhere ([`NoOps`]) for
//! [`super::SampledStates`], which keeps only a few states.

use super::live::{free_before, Blk, RangeFlags, State, Watch};
use super::{
    AllocatorHistory, Checkpoint, Diagnostics, Issue, IssueKind, OpKind, Ops, SegmentKind,
    SegmentMeta,
};
use crate::model::{BlockState, Snapshot};
use crate::trace::{Action, EntryExtra, StackId};
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// torch's `kMinBlockSize`: every block is a multiple of it.
pub(crate) const MIN_BLOCK_BYTES: u64 = 512;
/// torch's `kSmallSize`: a large-pool block is split only if more than this is left over.
const SMALL_SIZE_BYTES: u64 = 1 << 20;
/// Fewest events between checkpoints (replaying this many costs microseconds).
const MIN_STRIDE: usize = 32;
/// Checkpoint memory allowed whatever the trace length.
const MIN_CHECKPOINT_BUDGET_BYTES: u64 = 4 << 20;
/// Bytes one trace entry takes in the model's columns (action, action name, addr, size, stream,
/// time, stack, compile context, user metadata): the unit of the memory budget.
const MODEL_BYTES_PER_EVENT: u64 = 1 + 4 + 8 + 8 + 8 + 8 + 4 + 4 + 4;
/// Bytes of one block and one segment in a checkpoint.
pub(crate) const CHECKPOINT_BLOCK_BYTES: u64 = 8 + std::mem::size_of::<Blk>() as u64;
pub(crate) const CHECKPOINT_SEGMENT_BYTES: u64 = 8 + std::mem::size_of::<super::live::Seg>() as u64;
/// At most this many issues are kept with their event (all are counted).
const MAX_ISSUES: usize = 200;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// torch's `round_size` without `roundup_power2_divisions`: at least 512, a multiple of 512.
pub(crate) fn round_size(requested: u64) -> u64 {
    if requested < MIN_BLOCK_BYTES {
        MIN_BLOCK_BYTES
    } else {
        requested
            .div_ceil(MIN_BLOCK_BYTES)
            .saturating_mul(MIN_BLOCK_BYTES)
    }
}

/// The allocator settings that decide whether a free block is split.
#[derive(Debug, Clone, Copy)]
struct SplitRule {
    /// `max_split_size` (torch: blocks at least this large are never split); `u64::MAX` if unset.
    max_split_bytes: u64,
    /// `expandable_segments` was on: every pool splits like the small pool.
    expandable: bool,
}

impl SplitRule {
    fn from_settings(s: &Snapshot) -> SplitRule {
        SplitRule {
            max_split_bytes: s.max_split_bytes().unwrap_or(u64::MAX),
            expandable: s.expandable_segments(),
        }
    }

    /// torch's `should_split`: whether a free block with `remaining` bytes left over after a
    /// `size`-byte allocation is split.
    fn splits(&self, meta: &SegmentMeta, size: u64, remaining: u64) -> bool {
        if meta.kind == SegmentKind::Small || meta.is_expandable || self.expandable {
            remaining >= MIN_BLOCK_BYTES
        } else {
            size < self.max_split_bytes && remaining > SMALL_SIZE_BYTES
        }
    }
}

/// What the backward pass reads for one `free_completed`, from the allocation table: the
/// allocation's alloc event (if in the trace), its stack, and whether a `free_requested` came
/// first.
#[derive(Debug, Clone, Copy)]
struct FreeLink {
    event: u32,
    alloc_event: Option<u32>,
    stack: StackId,
    pending: bool,
}

/// The trace columns the backward pass reads, borrowed from the model (no copy), and what the
/// pre-pass learnt: per `free_completed` its [`FreeLink`], per `segment_free` its
/// `segment_alloc`'s stack. Both sorted by event; the pass reads them backward with a cursor.
pub(crate) struct Inputs<'a> {
    actions: &'a [Action],
    addr: &'a [u64],
    requested: &'a [u64],
    stack: &'a [StackId],
    links: Vec<FreeLink>,
    /// Links at index ≥ this are of later events than the one undone last.
    cursor: usize,
    segment_stacks: Vec<(u32, StackId)>,
}

impl<'a> Inputs<'a> {
    /// The device's columns and the pre-pass over the shared [`crate::replay`] table.
    fn new(s: &'a Snapshot, replay: &crate::replay::Replay) -> Inputs<'a> {
        let t = &s.trace;
        let rows = s.device_rows(replay.device);
        let range = rows.start as usize..rows.end as usize;
        let cols = (
            t.action.get(range.clone()),
            t.addr.get(range.clone()),
            t.size_bytes.get(range.clone()),
            t.stack.get(range.clone()),
        );
        // The model's columns are parallel; anything else means no usable trace.
        let (actions, addr, requested, stack) = match cols {
            (Some(a), Some(b), Some(c), Some(d)) if t.stream.len() >= range.end => (a, b, c, d),
            _ => (&[][..], &[][..], &[][..], &[][..]),
        };
        let n = actions.len();
        // Each free_completed learns its allocation's stack, alloc event and whether a
        // free_requested came first. Without any free_requested (`skip_actions`), blocks stay
        // allocated until free_completed; with them, a free_completed whose request is not in
        // the trace was requested before it.
        let has_requests = actions.contains(&Action::FreeRequested);
        // The allocation each free event closes (index + 1; 0: none), filled in table order so
        // that of two allocations claiming one free (never expected) the later wins; read in
        // event order, which gives the links sorted without a sort.
        let mut freed_by: Vec<u32> = vec![0; n];
        for (k, a) in replay.allocations.iter().enumerate() {
            if let Some(slot) = a.free_event.and_then(|f| freed_by.get_mut(f as usize)) {
                *slot = k as u32 + 1;
            }
        }
        let links: Vec<FreeLink> = freed_by
            .iter()
            .enumerate()
            .filter_map(|(event, &k)| {
                let a = replay.allocations.get(k.checked_sub(1)? as usize)?;
                let pending = match a.alloc_event {
                    Some(_) => a.free_requested_event.is_some(),
                    None => a.free_requested_event.is_some() || has_requests,
                };
                Some(FreeLink {
                    event: event as u32,
                    alloc_event: a.alloc_event,
                    stack: a.stack,
                    pending,
                })
            })
            .collect();
        drop(freed_by);
        // Segments: segment_free takes the stack of its segment_alloc (paired by address).
        let mut open_segment: FxHashMap<u64, u32> = FxHashMap::default();
        let mut segment_stacks = Vec::new();
        for (i, (&a, &at)) in actions.iter().zip(addr).enumerate() {
            match a {
                Action::SegmentAlloc => {
                    open_segment.insert(at, i as u32);
                }
                Action::SegmentFree => {
                    if let Some(st) = open_segment.remove(&at).and_then(|k| stack.get(k as usize)) {
                        segment_stacks.push((i as u32, *st));
                    }
                }
                _ => {}
            }
        }
        Inputs {
            actions,
            addr,
            requested,
            stack,
            cursor: links.len(),
            links,
            segment_stacks,
        }
    }

    fn events(&self) -> usize {
        self.actions.len()
    }

    /// The link of the `free_completed` at `i`; called with falling `i`.
    fn link(&mut self, i: u32) -> Option<FreeLink> {
        while let Some(l) = self.cursor.checked_sub(1).and_then(|k| self.links.get(k)) {
            if l.event <= i {
                return (l.event == i).then_some(*l);
            }
            self.cursor -= 1;
        }
        None
    }

    /// The stack entry `i` stands for: its allocation's (a `free_completed`), its
    /// `segment_alloc`'s (a `segment_free`), else its own.
    fn stack_of(&self, i: usize) -> StackId {
        let own = self.stack.get(i).copied().unwrap_or(StackId::EMPTY);
        match self.actions.get(i) {
            Some(Action::SegmentFree) => self
                .segment_stacks
                .binary_search_by_key(&(i as u32), |(e, _)| *e)
                .ok()
                .and_then(|k| self.segment_stacks.get(k))
                .map_or(own, |(_, st)| *st),
            _ => own,
        }
    }

    /// Ops as the pre-pass leaves them for a whole history: the trace columns copied, each
    /// `free_completed`'s link, pending flag and stack, each `segment_free`'s stack.
    fn ops(&self) -> Ops {
        let n = self.events();
        let mut ops = Ops {
            kind: vec![OpKind::Noop; n],
            flags: vec![0; n],
            addr: self.addr.to_vec(),
            size: vec![0; n],
            requested: self.requested.to_vec(),
            stack: self.stack.to_vec(),
            link: (0..n).map(|_| None).collect(),
            meta: Vec::new(),
        };
        for l in &self.links {
            let i = l.event as usize;
            ops.link.set(i, l.alloc_event);
            if l.pending {
                set(&mut ops.flags, i, Ops::PENDING);
            }
            set(&mut ops.stack, i, l.stack);
        }
        for &(i, st) in &self.segment_stacks {
            set(&mut ops.stack, i as usize, st);
        }
        ops
    }
}

/// Where the backward pass writes what each entry did: [`Ops`] for a whole history (its seeks
/// replay them), [`NoOps`] for readers that keep only a few states.
pub(crate) trait Record {
    /// Entry `i` is an op of `kind` over `size` bytes; `flags` are added to its flags.
    fn op(&mut self, i: usize, kind: OpKind, size: u64, flags: u8);
    /// Entry `i` allocates or frees `blk` (its flags replaced by `flags`).
    fn block(&mut self, i: usize, kind: OpKind, blk: &Blk, flags: u8);
    /// The segment metadata of segment op `ev` (called with falling `ev`).
    fn meta(&mut self, ev: u32, meta: SegmentMeta);
    /// The block freed at `j` owns its unsplit remainder: it is `size` bytes, and with
    /// `right_gone` no free block follows it any more.
    fn grown(&mut self, j: usize, size: u64, right_gone: bool);
    /// Bytes held.
    fn bytes(&self) -> u64;
    fn finish(&mut self);
}

impl Record for Ops {
    fn op(&mut self, i: usize, kind: OpKind, size: u64, flags: u8) {
        set(&mut self.kind, i, kind);
        set(&mut self.size, i, size);
        if let Some(f) = self.flags.get_mut(i) {
            *f |= flags;
        }
    }
    fn block(&mut self, i: usize, kind: OpKind, blk: &Blk, flags: u8) {
        set(&mut self.flags, i, flags);
        set(&mut self.kind, i, kind);
        set(&mut self.size, i, blk.size);
        set(&mut self.requested, i, blk.requested);
        set(&mut self.stack, i, blk.stack);
        self.link.set(i, blk.alloc_event);
    }
    fn meta(&mut self, ev: u32, meta: SegmentMeta) {
        self.meta.push((ev, meta));
    }
    fn grown(&mut self, j: usize, size: u64, right_gone: bool) {
        set(&mut self.size, j, size);
        if let Some(f) = self.flags.get_mut(j) {
            if right_gone {
                *f &= !Ops::RIGHT;
            }
        }
    }
    fn bytes(&self) -> u64 {
        Ops::bytes(self)
    }
    fn finish(&mut self) {
        self.meta.reverse();
    }
}

/// Records nothing: the pass only moves its state ([`super::SampledStates`]).
pub(crate) struct NoOps;

impl Record for NoOps {
    fn op(&mut self, _: usize, _: OpKind, _: u64, _: u8) {}
    fn block(&mut self, _: usize, _: OpKind, _: &Blk, _: u8) {}
    fn meta(&mut self, _: u32, _: SegmentMeta) {}
    fn grown(&mut self, _: usize, _: u64, _: bool) {}
    fn bytes(&self) -> u64 {
        0
    }
    fn finish(&mut self) {}
}

struct Builder<'a, R> {
    rec: R,
    inp: Inputs<'a>,
    /// (alloc event, free event, address, bytes) of blocks grown by an unsplit remainder.
    patches: Vec<(u32, u32, u64, u64)>,
    diag: Diagnostics,
    rule: SplitRule,
    /// Address → alloc event of the file's active blocks that the trace allocated.
    final_alloc: FxHashMap<u64, u32>,
    snap: &'a Snapshot,
}

impl<R> Builder<'_, R> {
    fn issue(&mut self, event: u32, kind: IssueKind) {
        self.diag.count(kind);
        if self.diag.issues.len() < MAX_ISSUES {
            self.diag.issues.push(Issue { event, kind });
        }
    }
}

/// The backward pass over one device, ready to run: the model's trace columns and the
/// pre-pass's links, where it records (`R`), and the final state.
pub(crate) struct Pass<'a, R> {
    b: Builder<'a, R>,
    /// The state the pass has reached (the final one before [`Pass::run`]).
    pub st: State,
    rows_start: u32,
    pub id: u64,
    pub device: u32,
}

/// What a finished pass leaves: what it recorded, what it had to skip, every `oom` entry and
/// the unsplit remainders found (to patch the states kept while those blocks lived).
pub(crate) struct Passed<R> {
    pub ops: R,
    pub diag: Diagnostics,
    /// (event, requested bytes, device_free) of every `oom` entry.
    pub ooms: Vec<(u32, u64, Option<u64>)>,
    patches: Vec<(u32, u32, u64, u64)>,
}

impl<R> Passed<R> {
    /// Grows the blocks found to own their remainder in the states kept while they lived
    /// (`kept` sorted by position): those still have them at their rounded size.
    pub fn patch(&self, kept: &mut [Checkpoint]) {
        for &(k, j, addr, tail) in &self.patches {
            let from = kept.partition_point(|c| c.pos <= k as usize);
            for c in kept
                .iter_mut()
                .skip(from)
                .take_while(|c| c.pos <= j as usize)
            {
                c.grow_block(addr, tail);
            }
        }
    }
}

/// The pre-pass (each `free_completed` learns its allocation from the shared allocation table)
/// and the final state, ready for a backward pass recording into what `record` makes of the
/// inputs.
pub(crate) fn prepare<'a, R: Record>(
    s: &'a Snapshot,
    replay: &crate::replay::Replay,
    record: impl FnOnce(&Inputs<'a>) -> R,
) -> Pass<'a, R> {
    let device = replay.device;
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let inp = Inputs::new(s, replay);
    let rec = record(&inp);
    let mut b = Builder {
        rec,
        inp,
        diag: Diagnostics::default(),
        rule: SplitRule::from_settings(s),
        final_alloc: replay.open_at_end(),
        snap: s,
        patches: Vec::new(),
    };
    let st = final_state(s, device, id, &b.final_alloc, &mut b.diag);
    Pass {
        b,
        st,
        rows_start: s.device_rows(device).start,
        id,
        device,
    }
}

impl<R: Record> Pass<'_, R> {
    /// Number of trace entries the pass undoes.
    pub fn events(&self) -> usize {
        self.b.inp.events()
    }

    /// Event indices of the `oom` entries.
    pub fn oom_events(&self) -> impl Iterator<Item = usize> + '_ {
        self.b
            .inp
            .actions
            .iter()
            .enumerate()
            .filter(|(_, a)| **a == Action::Oom)
            .map(|(i, _)| i)
    }

    /// Bytes of the ops recorded.
    pub fn ops_bytes(&self) -> u64 {
        self.b.rec.bytes()
    }

    /// Undoes entries N-1 … 0 on the final state, recording what each did; `after(st)` sees the
    /// state once entry `st.pos` is undone (the state before it).
    pub fn run(mut self, mut after: impl FnMut(&State)) -> Passed<R> {
        let n = self.events();
        for i in (0..n).rev() {
            let action = self
                .b
                .inp
                .actions
                .get(i)
                .copied()
                .unwrap_or(Action::Unknown);
            let row = self.rows_start.saturating_add(i as u32);
            self.b.undo(&mut self.st, i, action, row);
            self.st.pos = i;
            after(&self.st);
        }
        self.b.rec.finish();
        let t = &self.b.snap.trace;
        let ooms = self
            .oom_events()
            .map(|i| {
                let row = self.rows_start.saturating_add(i as u32);
                (
                    i as u32,
                    self.b.inp.requested.get(i).copied().unwrap_or(0),
                    t.device_free(row),
                )
            })
            .collect();
        let Builder {
            rec, diag, patches, ..
        } = self.b;
        Passed {
            ops: rec,
            diag,
            ooms,
            patches,
        }
    }
}

pub(crate) fn build(s: &Snapshot, replay: &crate::replay::Replay) -> AllocatorHistory {
    let pass = prepare(s, replay, Inputs::ops);
    let (id, device, n) = (pass.id, pass.device, pass.events());
    // Checkpoints: all of them together within 1.5× the model's trace columns minus the ops.
    // The stride starts from the final state's size and doubles (dropping every other
    // checkpoint) whenever the budget is exceeded.
    let budget = (n as u64 * MODEL_BYTES_PER_EVENT * 3 / 2)
        .saturating_sub(pass.ops_bytes())
        .max(MIN_CHECKPOINT_BUDGET_BYTES);
    let last = Checkpoint::of(&pass.st);
    let guess = ((n as u64 + 1) * last.bytes().max(1)).div_ceil(budget) as usize;
    let mut stride = guess.clamp(MIN_STRIDE, n.max(MIN_STRIDE));
    let mut used = 0u64;
    let mut checkpoints = Vec::new();
    let passed = pass.run(|st| {
        if st.pos % stride == 0 {
            let c = Checkpoint::of(st);
            used += c.bytes();
            checkpoints.push(c);
            while used > budget && stride < n {
                stride = stride.saturating_mul(2);
                checkpoints.retain(|c| c.pos % stride == 0);
                used = checkpoints.iter().map(Checkpoint::bytes).sum();
            }
        }
    });
    checkpoints.reverse();
    checkpoints.push(last);
    passed.patch(&mut checkpoints);
    let Passed {
        ops, diag, ooms, ..
    } = passed;
    AllocatorHistory {
        id,
        device,
        events: n,
        ops,
        checkpoints,
        stride,
        ooms,
        diag,
    }
}

/// The state after the device's last trace entry, read from the file's segments without the
/// backward pass: equal to what the built history shows there (`State`'s `==`), at the cost of
/// one backward scan of the trace that stops once every active block's `alloc` is found.
pub(crate) fn last_state(s: &Snapshot, device: u32) -> State {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let rows = s.device_rows(device);
    let t = &s.trace;
    let range = rows.start as usize..rows.end as usize;
    let (Some(actions), Some(addrs)) = (t.action.get(range.clone()), t.addr.get(range.clone()))
    else {
        let mut st = State::empty(id);
        st.derived = true;
        st.recompute();
        return st;
    };
    // The pre-pass of `build` leaves, per address, the last `alloc` not followed by a
    // `free_completed` of that address: scanning backward, the first of the two met decides.
    let mut unresolved: rustc_hash::FxHashSet<u64> = s
        .segments
        .iter()
        .filter(|g| g.device == device)
        .flat_map(|g| s.segment_blocks(g))
        .filter(|b| b.state.is_active())
        .map(|b| b.address)
        .collect();
    let mut final_alloc: FxHashMap<u64, u32> = FxHashMap::default();
    for (i, (&a, &addr)) in actions.iter().zip(addrs).enumerate().rev() {
        if unresolved.is_empty() {
            break;
        }
        match a {
            Action::Alloc if unresolved.remove(&addr) => {
                final_alloc.insert(addr, i as u32);
            }
            Action::FreeCompleted => {
                unresolved.remove(&addr);
            }
            _ => {}
        }
    }
    let mut st = final_state(s, device, id, &final_alloc, &mut Diagnostics::default());
    st.derived = true;
    st.recompute();
    st.oom = match actions.last() {
        Some(Action::Oom) => {
            let last = rows.end.saturating_sub(1);
            Some((
                t.size_bytes.get(last as usize).copied().unwrap_or(0),
                t.device_free(last),
            ))
        }
        _ => None,
    };
    st
}

fn set<T>(v: &mut [T], i: usize, x: T) {
    if let Some(slot) = v.get_mut(i) {
        *slot = x;
    }
}

/// The file's segments of `device` as a live state at the last position. Blocks that do not
/// tile their segment are repaired (gaps become inactive, overlaps are dropped) and counted.
fn final_state(
    s: &Snapshot,
    device: u32,
    id: u64,
    final_alloc: &FxHashMap<u64, u32>,
    diag: &mut Diagnostics,
) -> State {
    let mut st = State::empty(id);
    st.pos = s.device_rows(device).len();
    for seg in s.segments.iter().filter(|g| g.device == device) {
        let (addr, size) = (seg.address, seg.total_size_bytes);
        if size == 0 || addr.checked_add(size).is_none() || st.overlaps_segment(addr, size) {
            diag.file_fixups += 1;
            continue;
        }
        let kind = match s.str(seg.segment_type) {
            "small" => SegmentKind::Small,
            "large" => SegmentKind::Large,
            _ => SegmentKind::infer(size, seg.is_expandable),
        };
        let meta = SegmentMeta {
            stream: seg.stream,
            pool_id: Some(seg.pool_id),
            is_expandable: seg.is_expandable,
            kind,
            stack: seg.stack,
        };
        st.segs.insert(
            addr,
            super::live::Seg {
                size,
                meta,
                whole_free: false,
            },
        );
        let end = addr + size;
        let mut cursor = addr;
        let mut fixed = false;
        for blk in s.segment_blocks(seg) {
            let (ba, bs) = (blk.address, blk.size_bytes);
            let Some(be) = ba.checked_add(bs) else {
                fixed = true;
                continue;
            };
            if bs == 0 || ba < cursor || be > end {
                fixed = true;
                continue;
            }
            if ba > cursor {
                st.blocks.insert(cursor, Blk::free(ba - cursor));
                fixed = true;
            }
            let b = if blk.state == BlockState::Inactive {
                Blk::free(bs)
            } else {
                let alloc_event = if blk.state.is_active() {
                    final_alloc.get(&ba).copied()
                } else {
                    None
                };
                Blk {
                    size: bs,
                    requested: blk.requested_size_bytes,
                    stack: blk.stack,
                    alloc_event,
                    state: blk.state,
                }
            };
            st.blocks.insert(ba, b);
            cursor = be;
        }
        if cursor < end {
            st.blocks.insert(cursor, Blk::free(end - cursor));
            fixed = true;
        }
        if fixed {
            diag.file_fixups += 1;
        }
    }
    st.recompute();
    st
}

impl<R: Record> Builder<'_, R> {
    fn pool_of(&self, row: u32) -> Option<(i64, i64)> {
        self.snap.trace.extras_of(row).find_map(|e| match e {
            EntryExtra::PoolId(a, b) => Some((*a, *b)),
            _ => None,
        })
    }

    /// Undoes event `i` on `st` (the state after it), recording the op.
    fn undo(&mut self, st: &mut State, i: usize, action: Action, row: u32) {
        let ev = i as u32;
        let addr = self.inp.addr.get(i).copied().unwrap_or(0);
        let req = self.inp.requested.get(i).copied().unwrap_or(0);
        let in_range = addr.checked_add(round_size(req)).is_some();
        match action {
            Action::Alloc if in_range => self.undo_alloc(st, i, addr, req),
            Action::FreeRequested => self.undo_free_requested(st, i, addr),
            Action::FreeCompleted if in_range => self.undo_free(st, i, addr, req),
            Action::SegmentAlloc if in_range => match st.remove_free_segment(addr, req) {
                Some(meta) => {
                    self.op(i, OpKind::SegmentAlloc, req, 0);
                    self.rec.meta(ev, meta);
                }
                None => self.issue(ev, IssueKind::SegmentAllocMismatch),
            },
            Action::SegmentFree if in_range => self.undo_segment_free(st, i, row, addr, req),
            Action::SegmentMap if in_range => match st.remove_range(addr, req, None) {
                Some((f, meta)) => {
                    self.op(i, OpKind::SegmentMap, req, Ops::range_flags(f));
                    self.rec.meta(ev, meta);
                }
                None => self.issue(ev, IssueKind::SegmentMapMismatch),
            },
            Action::SegmentUnmap if in_range => self.undo_segment_unmap(st, i, row, addr, req),
            Action::Alloc
            | Action::FreeCompleted
            | Action::SegmentAlloc
            | Action::SegmentFree
            | Action::SegmentMap
            | Action::SegmentUnmap => self.issue(ev, IssueKind::AddressOverflow),
            _ => {}
        }
    }

    /// The stream of trace row `row` (read only by the rare segment ops).
    fn stream_of(&self, row: u32) -> u64 {
        self.snap
            .trace
            .stream
            .get(row as usize)
            .copied()
            .unwrap_or(0)
    }

    /// A `free_requested` undone: the block (or orphan) at `addr` allocated again.
    fn undo_free_requested(&mut self, st: &mut State, i: usize, addr: u64) {
        let (pending, allocated) = (BlockState::ActivePendingFree, BlockState::ActiveAllocated);
        if st.set_state(addr, false, pending, allocated) {
            self.op(i, OpKind::FreeRequested, 0, 0);
        } else if st.set_state(addr, true, pending, allocated) {
            self.op(i, OpKind::FreeRequested, 0, Ops::ORPHAN);
        } else {
            self.issue(i as u32, IssueKind::FreeRequestedWithoutBlock);
        }
    }

    /// A `segment_free` undone: the segment it freed comes back, empty.
    fn undo_segment_free(&mut self, st: &mut State, i: usize, row: u32, addr: u64, req: u64) {
        let ev = i as u32;
        if req == 0 || st.overlaps_segment(addr, req) {
            self.issue(ev, IssueKind::SegmentFreeOverlap);
            return;
        }
        let meta = SegmentMeta {
            stream: self.stream_of(row),
            pool_id: self.pool_of(row),
            is_expandable: false,
            kind: SegmentKind::infer(req, false),
            stack: self.inp.stack_of(i),
        };
        st.add_segment(addr, req, meta);
        self.op(i, OpKind::SegmentFree, req, 0);
        self.rec.meta(ev, meta);
    }

    /// A `segment_unmap` undone: the range is mapped again, joined to the expandable segments
    /// of the same stream and pool it touches.
    fn undo_segment_unmap(&mut self, st: &mut State, i: usize, row: u32, addr: u64, req: u64) {
        let ev = i as u32;
        if req == 0 || st.overlaps_segment(addr, req) {
            self.issue(ev, IssueKind::SegmentUnmapOverlap);
            return;
        }
        let pool = self.pool_of(row);
        let stream = self.stream_of(row);
        let joins = |m: &SegmentMeta| {
            m.is_expandable
                && m.stream == stream
                && !matches!((m.pool_id, pool), (Some(a), Some(b)) if a != b)
        };
        let end = addr + req;
        let left = st
            .segs
            .before(addr)
            .filter(|(a, g)| a + g.size == addr && joins(&g.meta));
        let seg_left = left.is_some();
        let right = st.segs.get(&end).filter(|g| joins(&g.meta)).copied();
        let blk_left = seg_left
            && st
                .blocks
                .before(addr)
                .is_some_and(|(a, b)| a + b.size == addr && b.state == BlockState::Inactive);
        let blk_right = right.is_some()
            && st
                .blocks
                .get(&end)
                .is_some_and(|b| b.state == BlockState::Inactive);
        let flags = RangeFlags {
            seg_left,
            seg_right: right.is_some(),
            blk_left,
            blk_right,
        };
        let meta = match right {
            Some(r) => r.meta,
            None => SegmentMeta {
                stream,
                pool_id: pool.or(left.and_then(|(_, g)| g.meta.pool_id)),
                is_expandable: true,
                kind: left.map_or(SegmentKind::Unknown, |(_, g)| g.meta.kind),
                stack: self.inp.stack_of(i),
            },
        };
        st.add_range(addr, req, flags, meta);
        self.op(i, OpKind::SegmentUnmap, req, Ops::range_flags(flags));
        self.rec.meta(ev, meta);
    }

    fn op(&mut self, i: usize, kind: OpKind, size: u64, flags: u8) {
        self.rec.op(i, kind, size, flags);
    }

    fn undo_alloc(&mut self, st: &mut State, i: usize, addr: u64, req: u64) {
        let ev = i as u32;
        let Some(nb) = st
            .block_and_neighbours(addr)
            .filter(|n| n.at.state.is_active())
        else {
            match st.del_orphan(addr) {
                Some(o) => self.record_block(i, OpKind::Alloc, &o, Ops::ORPHAN),
                None => self.issue(ev, IssueKind::AllocWithoutBlock),
            }
            return;
        };
        let seg = st
            .seg_containing(addr)
            .map(|(a, g)| (a, a + g.size, g.meta));
        let mut blk = nb.at;
        let end = addr + blk.size;
        let next_free = nb
            .after
            .filter(|(a, n)| {
                *a == end
                    && n.state == BlockState::Inactive
                    && seg.is_some_and(|(_, s1, _)| end < s1)
            })
            .map(|(_, n)| n.size);
        let meta = seg.map(|(_, _, m)| m);
        // An inferred block with free space behind it that nothing used while it lived: if torch
        // would not have split that remainder off, the block owned it (see the module docs).
        let mut grown = false;
        if let (Some(w), Some(tail), Some(m)) = (st.watch.remove(&end), next_free, meta) {
            let j = w.free_event;
            let own = blk.alloc_event == Some(ev) && w.link == ev;
            let t1 = end + tail;
            if w.addr == addr && own && t1 <= w.limit && !self.rule.splits(&m, blk.size, tail) {
                st.del_blk(end);
                st.del_blk(addr);
                blk.size += tail;
                st.add_blk(addr, blk);
                self.rec.grown(j as usize, blk.size, t1 >= w.hole_end);
                self.patches.push((ev, j, addr, tail));
                self.diag.inferred_unsplit += 1;
                grown = true;
            }
        } else if self.final_alloc.get(&addr) == Some(&ev) && blk.alloc_event == Some(ev) {
            // A block of the file allocated in the trace: check the size rule against it.
            if let Some(m) = meta {
                let rounded = round_size(req);
                let whole = blk.size + next_free.unwrap_or(0);
                let predicted =
                    if whole >= rounded && self.rule.splits(&m, rounded, whole - rounded) {
                        rounded
                    } else {
                        whole
                    };
                self.diag.size_rule_checked += 1;
                if predicted == blk.size {
                    self.diag.size_rule_agreed += 1;
                }
            }
        }
        if blk.requested != req {
            self.issue(ev, IssueKind::RequestedMismatch);
        }
        // The merges its release makes (the block behind it is `next_free` unless it grew).
        let (left, right) = match seg {
            Some((s0, s1, _)) => (
                free_before(nb.before, addr, s0),
                if grown {
                    st.free_right_in(addr + blk.size, s1)
                } else {
                    next_free.is_some()
                },
            ),
            None => (false, false),
        };
        // The blocks changed only if it grew; else the block is still where it was found.
        if grown {
            st.release(addr, left, right);
        } else {
            st.release_at(nb.pos, addr, left, right);
        }
        let mut flags = 0;
        if left {
            flags |= Ops::LEFT;
        }
        if right {
            flags |= Ops::RIGHT;
        }
        self.record_block(i, OpKind::Alloc, &blk, flags);
    }

    fn record_block(&mut self, i: usize, kind: OpKind, blk: &Blk, flags: u8) {
        let mut f = flags;
        if blk.state == BlockState::ActivePendingFree {
            f |= Ops::PENDING;
        }
        self.rec.block(i, kind, blk, f);
    }

    fn undo_free(&mut self, st: &mut State, i: usize, addr: u64, req: u64) {
        let ev = i as u32;
        let link = self.inp.link(ev);
        let pending = link.is_some_and(|l| l.pending);
        let mut blk = Blk {
            size: round_size(req),
            requested: req,
            stack: link.map_or_else(|| self.inp.stack_of(i), |l| l.stack),
            alloc_event: link.and_then(|l| l.alloc_event),
            state: if pending {
                BlockState::ActivePendingFree
            } else {
                BlockState::ActiveAllocated
            },
        };
        match st.block_containing_pos(addr) {
            Some((p, r0, cur)) if cur.state == BlockState::Inactive => {
                let end = r0 + cur.size;
                if addr + blk.size > end {
                    blk.size = end - addr;
                    self.issue(ev, IssueKind::FreeClipped);
                }
                if let Some((left, right)) = st.carve_at(p, addr, blk) {
                    let mut flags = 0;
                    if left {
                        flags |= Ops::LEFT;
                    }
                    if right {
                        flags |= Ops::RIGHT;
                        if let Some(link) = blk.alloc_event {
                            st.watch.insert(
                                addr + blk.size,
                                Watch {
                                    addr,
                                    free_event: ev,
                                    link,
                                    limit: end,
                                    hole_end: end,
                                },
                            );
                        }
                    }
                    self.record_block(i, OpKind::FreeCompleted, &blk, flags);
                    return;
                }
                self.issue(ev, IssueKind::FreeOutsideSegments);
            }
            Some(_) => self.issue(ev, IssueKind::FreeOverLiveBlock),
            None => self.issue(ev, IssueKind::FreeOutsideSegments),
        }
        if st.orphans.contains_key(&addr) {
            self.issue(ev, IssueKind::DoubleFree);
            return;
        }
        st.add_orphan(addr, blk);
        self.record_block(i, OpKind::FreeCompleted, &blk, Ops::ORPHAN);
    }
}

impl Ops {
    fn range_flags(f: RangeFlags) -> u8 {
        let mut x = 0;
        if f.blk_left {
            x |= Ops::LEFT;
        }
        if f.blk_right {
            x |= Ops::RIGHT;
        }
        if f.seg_left {
            x |= Ops::SEG_LEFT;
        }
        if f.seg_right {
            x |= Ops::SEG_RIGHT;
        }
        x
    }
}
