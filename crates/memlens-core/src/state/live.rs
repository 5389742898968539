//! The allocator state at one event, kept in address-ordered maps so that one trace entry changes
//! it in O(log n) per touched block, plus the running sums the per-state numbers are read from.
//!
//! Every change goes through a handful of primitives (carve a block out of a free one, release a
//! block and merge it with free neighbours, add or remove a segment or a mapped range). Both the
//! build pass and every later seek use the same primitives with the same recorded arguments, which
//! is what makes replaying forward and backward land on identical states.

use super::addr_map::{AddrMap, Pos};
use super::{BlockView, SegmentKind, SegmentMeta, SegmentView};
use crate::model::BlockState;
use crate::trace::StackId;
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;

/// One block of the live state. Inactive blocks carry no stack, no request and no event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Blk {
    pub size: u64,
    pub requested: u64,
    pub stack: StackId,
    /// The `alloc` that made it, when recorded.
    pub alloc_event: Option<u32>,
    pub state: BlockState,
}

impl Blk {
    pub fn free(size: u64) -> Blk {
        Blk {
            size,
            requested: 0,
            stack: StackId::EMPTY,
            alloc_event: None,
            state: BlockState::Inactive,
        }
    }
    pub fn view(&self, address: u64) -> BlockView {
        BlockView {
            address,
            size_bytes: self.size,
            requested_size_bytes: self.requested,
            state: self.state,
            stack: self.stack,
            alloc_event: self.alloc_event,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seg {
    pub size: u64,
    pub meta: SegmentMeta,
    /// The segment is one inactive block (counted in [`Sums::whole_free`]).
    pub whole_free: bool,
}

impl Seg {
    pub fn view(&self, address: u64) -> SegmentView {
        SegmentView {
            address,
            size_bytes: self.size,
            stream: self.meta.stream,
            pool_id: self.meta.pool_id,
            is_expandable: self.meta.is_expandable,
            kind: self.meta.kind,
            stack: self.meta.stack,
        }
    }
}

/// Running sums over the live state (bytes unless named otherwise).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Sums {
    pub reserved: u64,
    pub allocated: u64,
    pub pending: u64,
    /// Requested bytes of active blocks (orphans not included).
    pub requested: u64,
    pub inactive: u64,
    pub unknown: u64,
    /// Σ size of segments that are one inactive block.
    pub whole_free: u64,
    pub orphan_requested: u64,
}

/// An inferred block (made when its `free_completed` was undone) whose alloc has not been undone
/// yet: the hole behind it may have been its unsplit remainder (see the module docs of
/// [`super`]). Keyed by the address right after the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Watch {
    pub addr: u64,
    pub free_event: u32,
    /// The block's alloc event.
    pub link: u32,
    /// Lowest address at or after the key where anything changed while the block was live: the
    /// remainder it may own ends at or before it.
    pub limit: u64,
    /// End of the free space behind the block when it was freed.
    pub hole_end: u64,
}

/// A block and the blocks on either side of it in address order ([`State::block_and_neighbours`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Neighbours {
    /// Where the block sits, for [`State::release_at`] while the blocks are unchanged.
    pub pos: Pos,
    pub before: Option<(u64, Blk)>,
    pub at: Blk,
    pub after: Option<(u64, Blk)>,
}

/// Geometry of a range added to or removed from the segments (see [`State::add_range`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RangeFlags {
    pub seg_left: bool,
    pub seg_right: bool,
    pub blk_left: bool,
    pub blk_right: bool,
}

/// The allocator state of one device once the first `pos` trace entries have been applied
/// (`pos == 0`: before the first event). Read it through [`State::segments`], [`State::blocks`],
/// [`State::numbers`](super::State::numbers) and [`State::columns`](super::State::columns).
#[derive(Debug, Clone)]
pub struct State {
    /// The history whose entries `pos` counts (`None`: none yet; a seek starts from a
    /// checkpoint).
    pub(crate) history_id: Option<u64>,
    pub(crate) pos: usize,
    pub(crate) segs: AddrMap<Seg>,
    pub(crate) blocks: AddrMap<Blk>,
    /// Allocations the trace says are live but no reconstructed segment can hold (see the module
    /// docs of [`super`]); keyed by address, `size` is the rounded request.
    pub(crate) orphans: BTreeMap<u64, Blk>,
    pub(crate) sums: Sums,
    /// Multiset of inactive block sizes (size → count), kept only when `derived`.
    pub(crate) free_sizes: BTreeMap<u64, u32>,
    /// Whether `free_sizes`, `Seg::whole_free` and `Sums::whole_free` are kept up to date (not
    /// during the build, which never reads them).
    pub(crate) derived: bool,
    /// Build pass only: inferred blocks whose unsplit remainder is still undecided, by the
    /// address right after them (see [`Watch`]).
    pub(crate) watch: AddrMap<Watch>,
    /// Set by a seek when the event at this position is an `oom`.
    pub(crate) oom: Option<(u64, Option<u64>)>,
}

impl PartialEq for State {
    fn eq(&self, o: &State) -> bool {
        self.pos == o.pos
            && self.segs == o.segs
            && self.blocks == o.blocks
            && self.orphans == o.orphans
            && self.sums == o.sums
    }
}

impl State {
    pub(crate) fn empty(history_id: u64) -> State {
        State {
            history_id: Some(history_id),
            pos: 0,
            segs: AddrMap::new(),
            blocks: AddrMap::new(),
            orphans: BTreeMap::new(),
            sums: Sums::default(),
            free_sizes: BTreeMap::new(),
            derived: false,
            watch: AddrMap::new(),
            oom: None,
        }
    }

    /// Rebuilds the derived parts (sums, free sizes, whole-free flags) from segments and blocks.
    pub(crate) fn recompute(&mut self) {
        let mut sums = Sums::default();
        self.free_sizes.clear();
        for (_, b) in self.blocks.iter() {
            add_sums(&mut sums, b);
            if self.derived && b.state == BlockState::Inactive {
                *self.free_sizes.entry(b.size).or_insert(0) += 1;
            }
        }
        for b in self.orphans.values() {
            if b.state.is_active() {
                sums.orphan_requested += b.requested;
            }
        }
        let blocks = &self.blocks;
        for (a, s) in self.segs.iter_mut() {
            sums.reserved += s.size;
            s.whole_free = blocks
                .get(&a)
                .is_some_and(|b| b.state == BlockState::Inactive && b.size == s.size);
            if s.whole_free {
                sums.whole_free += s.size;
            }
        }
        self.sums = sums;
    }

    /// Something changed at `addr` (build pass): it bounds the remainder of the watched block
    /// whose hole holds it.
    fn touch(&mut self, addr: u64) {
        if self.watch.is_empty() {
            return;
        }
        if let Some((_, w)) = self.watch.at_or_before_mut(addr) {
            w.limit = w.limit.min(addr);
        }
    }

    pub(crate) fn add_blk(&mut self, addr: u64, b: Blk) {
        account(&mut self.sums, &mut self.free_sizes, self.derived, &b, true);
        if let Some(old) = self.blocks.insert(addr, b) {
            // Never expected: the primitives remove before they insert. Keep the sums right.
            self.unaccount(&old);
        }
    }

    pub(crate) fn del_blk(&mut self, addr: u64) -> Option<Blk> {
        let b = self.blocks.remove(&addr)?;
        self.unaccount(&b);
        Some(b)
    }

    fn unaccount(&mut self, b: &Blk) {
        account(&mut self.sums, &mut self.free_sizes, self.derived, b, false);
    }

    /// Sets the state of the block (or, with `orphan`, the unplaced allocation) at `addr` from
    /// `from` to `to`. False when there is no such block in state `from`.
    pub(crate) fn set_state(
        &mut self,
        addr: u64,
        orphan: bool,
        from: BlockState,
        to: BlockState,
    ) -> bool {
        if orphan {
            return match self.orphans.get_mut(&addr) {
                Some(b) if b.state == from => {
                    b.state = to;
                    true
                }
                _ => false,
            };
        }
        if from == BlockState::Inactive || to == BlockState::Inactive {
            // Changes the free-size multiset: through the accounting primitives.
            return match self.blocks.get(&addr) {
                Some(b) if b.state == from => {
                    let mut nb = *b;
                    nb.state = to;
                    self.del_blk(addr);
                    self.add_blk(addr, nb);
                    true
                }
                _ => false,
            };
        }
        match self.blocks.get_mut(&addr) {
            Some(b) if b.state == from => {
                sub_sums(&mut self.sums, b);
                b.state = to;
                add_sums(&mut self.sums, b);
                true
            }
            _ => false,
        }
    }

    pub(crate) fn add_orphan(&mut self, addr: u64, b: Blk) {
        if b.state.is_active() {
            self.sums.orphan_requested += b.requested;
        }
        if let Some(old) = self.orphans.insert(addr, b) {
            if old.state.is_active() {
                self.sums.orphan_requested -= old.requested;
            }
        }
    }

    pub(crate) fn del_orphan(&mut self, addr: u64) -> Option<Blk> {
        let b = self.orphans.remove(&addr)?;
        if b.state.is_active() {
            self.sums.orphan_requested -= b.requested;
        }
        Some(b)
    }

    /// The block holding byte `addr`, with its address.
    pub(crate) fn block_containing(&self, addr: u64) -> Option<(u64, Blk)> {
        let (a, b) = self.blocks.at_or_before(addr)?;
        (addr - a < b.size).then_some((a, *b))
    }

    /// [`State::block_containing`] with the block's position, for [`State::carve_at`] while
    /// the blocks are unchanged.
    pub(crate) fn block_containing_pos(&self, addr: u64) -> Option<(Pos, u64, Blk)> {
        let p = self.blocks.pos_at_or_before(addr)?;
        let (a, b) = self.blocks.at(p)?;
        (addr - a < b.size).then_some((p, a, *b))
    }

    /// The segment holding byte `addr`, with its address.
    pub(crate) fn seg_containing(&self, addr: u64) -> Option<(u64, Seg)> {
        let (a, s) = self.segs.at_or_before(addr)?;
        (addr - a < s.size).then_some((a, *s))
    }

    /// Whether any segment overlaps `[addr, addr + size)`.
    pub(crate) fn overlaps_segment(&self, addr: u64, size: u64) -> bool {
        let end = addr.saturating_add(size);
        match self.segs.before(end) {
            Some((a, s)) => a.saturating_add(s.size) > addr,
            None => false,
        }
    }

    /// Re-reads whether the segment at `seg_addr` is one inactive block.
    pub(crate) fn refresh_seg(&mut self, seg_addr: u64) {
        if !self.derived {
            return;
        }
        let whole = match (self.segs.get(&seg_addr), self.blocks.get(&seg_addr)) {
            (Some(s), Some(b)) => b.state == BlockState::Inactive && b.size == s.size,
            _ => false,
        };
        if let Some(s) = self.segs.get_mut(&seg_addr) {
            if s.whole_free != whole {
                if whole {
                    self.sums.whole_free += s.size;
                } else {
                    self.sums.whole_free -= s.size;
                }
                s.whole_free = whole;
            }
        }
    }

    /// Re-reads the whole-free flag of the segment holding `addr`.
    pub(crate) fn refresh_seg_at(&mut self, addr: u64) {
        if !self.derived {
            return;
        }
        if let Some((a, _)) = self.seg_containing(addr) {
            self.refresh_seg(a);
        }
    }

    fn seg_insert(&mut self, addr: u64, size: u64, meta: SegmentMeta) {
        self.sums.reserved += size;
        if let Some(old) = self.segs.insert(
            addr,
            Seg {
                size,
                meta,
                whole_free: false,
            },
        ) {
            self.sums.reserved -= old.size;
            if old.whole_free {
                self.sums.whole_free -= old.size;
            }
        }
    }

    fn seg_remove(&mut self, addr: u64) -> Option<Seg> {
        let s = self.segs.remove(&addr)?;
        self.sums.reserved -= s.size;
        if s.whole_free {
            self.sums.whole_free -= s.size;
        }
        Some(s)
    }

    /// Puts `b` at `[addr, addr + b.size)`, inside the inactive block holding `addr`, which is
    /// split around it. Returns whether free space is left before and after it; `None` (and no
    /// change) when there is no inactive block holding the whole range.
    pub(crate) fn carve(&mut self, addr: u64, b: Blk) -> Option<(bool, bool)> {
        // One search: the hole is changed in place (to its left part, or to `b` itself) and
        // the rest is inserted right after it.
        let p = self.blocks.pos_at_or_before(addr)?;
        self.carve_at(p, addr, b)
    }

    /// [`State::carve`] into the block at `p` (found by the caller, no search): it must be the
    /// block at or before `addr`.
    pub(crate) fn carve_at(&mut self, p: Pos, addr: u64, b: Blk) -> Option<(bool, bool)> {
        let (r0, &hole) = self.blocks.at(p)?;
        if r0 > addr {
            return None;
        }
        let end = r0 + hole.size;
        if addr - r0 >= hole.size
            || hole.state != BlockState::Inactive
            || b.size == 0
            || addr.checked_add(b.size)? > end
        {
            return None;
        }
        let left = r0 < addr;
        let right = addr + b.size < end;
        let here = if left { Blk::free(addr - r0) } else { b };
        *self.blocks.at_mut(p)? = here;
        self.unaccount(&hole);
        account(
            &mut self.sums,
            &mut self.free_sizes,
            self.derived,
            &here,
            true,
        );
        self.touch(addr);
        let mut q = p;
        if left {
            q = self.add_blk_after(p, addr, b);
        }
        if right {
            self.add_blk_after(q, addr + b.size, Blk::free(end - addr - b.size));
        }
        self.refresh_seg_at(addr);
        Some((left, right))
    }

    /// [`State::add_blk`] for an address right after the block at `p` (no search); its position.
    fn add_blk_after(&mut self, p: Pos, addr: u64, b: Blk) -> Pos {
        match self.blocks.insert_after(p, addr, b) {
            Some(q) => {
                account(&mut self.sums, &mut self.free_sizes, self.derived, &b, true);
                q
            }
            // Never expected (`p` is a block of this map): the searching insert.
            None => {
                self.add_blk(addr, b);
                self.blocks.pos_of(addr).unwrap_or(p)
            }
        }
    }

    /// The block at `addr` with the blocks right before and right after it in address order
    /// (adjacent to it or not), found by one search.
    pub(crate) fn block_and_neighbours(&self, addr: u64) -> Option<Neighbours> {
        let p = self.blocks.pos_of(addr)?;
        let (_, &at) = self.blocks.at(p)?;
        let copy = |(_, a, b): (Pos, u64, &Blk)| (a, *b);
        Some(Neighbours {
            pos: p,
            before: self.blocks.prev(p).map(copy),
            at,
            after: self.blocks.next(p).map(copy),
        })
    }

    /// Whether the block at `addr` (of `size` bytes) has an inactive neighbour in its segment
    /// on the left / on the right: the merges a release would make.
    #[cfg(test)]
    pub(crate) fn free_neighbours(&self, addr: u64, size: u64) -> (bool, bool) {
        match self.seg_containing(addr) {
            Some((s0, seg)) => (
                self.free_left_in(addr, s0),
                self.free_right_in(addr + size, s0 + seg.size),
            ),
            None => (false, false),
        }
    }

    /// Whether an inactive block of the segment starting at `s0` ends at `addr`.
    #[cfg(test)]
    pub(crate) fn free_left_in(&self, addr: u64, s0: u64) -> bool {
        free_before(self.blocks.before(addr).map(|(a, b)| (a, *b)), addr, s0)
    }

    /// Whether an inactive block of the segment ending at `s1` starts at `end`.
    pub(crate) fn free_right_in(&self, end: u64, s1: u64) -> bool {
        end < s1
            && self
                .blocks
                .get(&end)
                .is_some_and(|b| b.state == BlockState::Inactive)
    }

    /// Makes the block at `addr` inactive and merges it with its left / right neighbour as told.
    /// Returns the block as it was.
    pub(crate) fn release(&mut self, addr: u64, left: bool, right: bool) -> Option<Blk> {
        // One search: the neighbours are the entries next to it.
        let p = self.blocks.pos_of(addr)?;
        self.release_at(p, addr, left, right)
    }

    /// [`State::release`] of the block at `p` (found by the caller, no search): it must be the
    /// block at `addr`.
    pub(crate) fn release_at(&mut self, p: Pos, addr: u64, left: bool, right: bool) -> Option<Blk> {
        let (k, &b) = self.blocks.at(p)?;
        if k != addr {
            return None;
        }
        self.unaccount(&b);
        self.touch(addr);
        let mut size = b.size;
        if right {
            let next = addr + b.size;
            let merge = match self.blocks.next(p) {
                Some((q, k, n)) if k == next && n.state == BlockState::Inactive => Some((q, *n)),
                _ => None,
            };
            // Removing the entry after `p` leaves `p` where it is.
            if let Some((q, n)) = merge {
                self.blocks.remove_at(q);
                self.unaccount(&n);
                size += n.size;
            }
        }
        // Merged into the free block on the left in place, else a free block of its own.
        let mut start = addr;
        let before = match self.blocks.prev(p) {
            Some((q, pa, prev)) if left && pa + prev.size == addr => Some((q, pa, *prev)),
            _ => None,
        };
        match before.filter(|(_, _, prev)| prev.state == BlockState::Inactive) {
            Some((q, pa, prev)) => {
                let mut grown = prev;
                grown.size += size;
                if let Some(x) = self.blocks.at_mut(q) {
                    *x = grown;
                }
                self.unaccount(&prev);
                account(
                    &mut self.sums,
                    &mut self.free_sizes,
                    self.derived,
                    &grown,
                    true,
                );
                self.blocks.remove_at(p);
                start = pa;
            }
            None => {
                let free = Blk::free(size);
                if let Some(x) = self.blocks.at_mut(p) {
                    *x = free;
                }
                account(
                    &mut self.sums,
                    &mut self.free_sizes,
                    self.derived,
                    &free,
                    true,
                );
            }
        }
        self.refresh_seg_at(start);
        Some(b)
    }

    /// A new segment made of one inactive block.
    pub(crate) fn add_segment(&mut self, addr: u64, size: u64, meta: SegmentMeta) {
        self.seg_insert(addr, size, meta);
        self.add_blk(addr, Blk::free(size));
        self.refresh_seg(addr);
    }

    /// Removes the segment at `addr` if it is one inactive block of `size` bytes.
    pub(crate) fn remove_free_segment(&mut self, addr: u64, size: u64) -> Option<SegmentMeta> {
        let s = self.segs.get(&addr)?;
        let b = self.blocks.get(&addr)?;
        if s.size != size || b.size != size || b.state != BlockState::Inactive {
            return None;
        }
        let meta = s.meta;
        self.del_blk(addr);
        self.seg_remove(addr);
        Some(meta)
    }

    /// Removes `[addr, addr + size)` from the segment holding it (an expandable segment's pages
    /// being unmapped); the range must lie inside one inactive block. The segment shrinks or
    /// splits in two; the right piece gets `right_meta` (default: the segment's own).
    pub(crate) fn remove_range(
        &mut self,
        addr: u64,
        size: u64,
        right_meta: Option<SegmentMeta>,
    ) -> Option<(RangeFlags, SegmentMeta)> {
        let end = addr.checked_add(size)?;
        let (s0, seg) = self.seg_containing(addr)?;
        let s1 = s0 + seg.size;
        let (r0, b) = self.block_containing(addr)?;
        let r1 = r0 + b.size;
        if size == 0 || end > s1 || end > r1 || b.state != BlockState::Inactive {
            return None;
        }
        let flags = RangeFlags {
            seg_left: s0 < addr,
            seg_right: end < s1,
            blk_left: r0 < addr,
            blk_right: end < r1,
        };
        self.touch(addr);
        self.del_blk(r0);
        if flags.blk_left {
            self.add_blk(r0, Blk::free(addr - r0));
        }
        if flags.blk_right {
            self.add_blk(end, Blk::free(r1 - end));
        }
        self.seg_remove(s0);
        if flags.seg_left {
            self.seg_insert(s0, addr - s0, seg.meta);
            self.refresh_seg(s0);
        }
        if flags.seg_right {
            self.seg_insert(end, s1 - end, right_meta.unwrap_or(seg.meta));
            self.refresh_seg(end);
        }
        Some((flags, seg.meta))
    }

    /// Adds `[addr, addr + size)` as free, mapped memory, merging with the segment ending at
    /// `addr` / starting at `addr + size` and with their boundary blocks as `flags` say. A range
    /// merged with nothing on the left becomes a segment with `meta` (or the right one's).
    pub(crate) fn add_range(&mut self, addr: u64, size: u64, flags: RangeFlags, meta: SegmentMeta) {
        let end = addr + size;
        self.touch(addr);
        let left = if flags.seg_left {
            self.segs
                .before(addr)
                .filter(|(a, s)| a + s.size == addr)
                .map(|(a, s)| (a, *s))
        } else {
            None
        };
        let right = if flags.seg_right {
            self.segs.get(&end).copied()
        } else {
            None
        };
        let mut start = addr;
        let mut total = size;
        let mut m = meta;
        if right.is_some() {
            if let Some(r) = self.seg_remove(end) {
                total += r.size;
                m = r.meta;
            }
        }
        if let Some((la, l)) = left {
            self.seg_remove(la);
            start = la;
            total += l.size;
            m = l.meta;
        }
        self.seg_insert(start, total, m);
        let mut bstart = addr;
        let mut bsize = size;
        if flags.blk_right
            && self
                .blocks
                .get(&end)
                .is_some_and(|b| b.state == BlockState::Inactive)
        {
            if let Some(n) = self.del_blk(end) {
                bsize += n.size;
            }
        }
        if flags.blk_left {
            let prev = self.blocks.before(addr).map(|(a, p)| (a, *p));
            if let Some((pa, p)) = prev {
                if pa + p.size == addr && p.state == BlockState::Inactive {
                    self.del_blk(pa);
                    bstart = pa;
                    bsize += p.size;
                }
            }
        }
        self.add_blk(bstart, Blk::free(bsize));
        self.refresh_seg(start);
    }

    /// Segments in address order.
    pub fn segments(&self) -> impl Iterator<Item = SegmentView> + '_ {
        self.segs.iter().map(|(a, s)| s.view(a))
    }

    /// Blocks of every segment in address order; they tile the segments exactly.
    pub fn blocks(&self) -> impl Iterator<Item = BlockView> + '_ {
        self.blocks.iter().map(|(a, b)| b.view(a))
    }

    /// Blocks of one segment, in address order.
    pub fn segment_blocks(&self, seg: &SegmentView) -> impl Iterator<Item = BlockView> + '_ {
        let end = seg.address.saturating_add(seg.size_bytes);
        self.blocks.range(seg.address, end).map(|(a, b)| b.view(a))
    }

    /// The segment and block holding byte `addr`.
    pub fn block_at(&self, addr: u64) -> Option<(SegmentView, BlockView)> {
        let (sa, s) = self.seg_containing(addr)?;
        let (ba, b) = self.block_containing(addr)?;
        Some((s.view(sa), b.view(ba)))
    }

    /// Allocations live at this event that no reconstructed segment can hold (a trace that frees
    /// memory of segments it never shows, or frees over a live block). `size_bytes` is the
    /// rounded request.
    pub fn unplaced(&self) -> impl Iterator<Item = BlockView> + '_ {
        self.orphans.iter().map(|(&a, b)| b.view(a))
    }

    /// Number of segments and of blocks.
    pub fn counts(&self) -> (usize, usize) {
        (self.segs.len(), self.blocks.len())
    }
}

/// Whether `before`, the block before `addr`, is inactive and ends at `addr` inside the segment
/// starting at `s0`.
pub(crate) fn free_before(before: Option<(u64, Blk)>, addr: u64, s0: u64) -> bool {
    addr > s0 && before.is_some_and(|(a, b)| a + b.size == addr && b.state == BlockState::Inactive)
}

/// Adds `b` to (or, with `add` false, removes it from) the running sums and, when `derived`,
/// the free-size multiset.
fn account(sums: &mut Sums, free: &mut BTreeMap<u64, u32>, derived: bool, b: &Blk, add: bool) {
    if add {
        add_sums(sums, b);
    } else {
        sub_sums(sums, b);
    }
    if !derived || b.state != BlockState::Inactive {
        return;
    }
    if add {
        *free.entry(b.size).or_insert(0) += 1;
    } else if let Entry::Occupied(mut c) = free.entry(b.size) {
        *c.get_mut() -= 1;
        if *c.get() == 0 {
            c.remove();
        }
    }
}

fn add_sums(s: &mut Sums, b: &Blk) {
    match b.state {
        BlockState::ActiveAllocated => {
            s.allocated += b.size;
            s.requested += b.requested;
        }
        BlockState::ActivePendingFree => {
            s.pending += b.size;
            s.requested += b.requested;
        }
        BlockState::Inactive => s.inactive += b.size,
        BlockState::Unknown => s.unknown += b.size,
    }
}

fn sub_sums(s: &mut Sums, b: &Blk) {
    match b.state {
        BlockState::ActiveAllocated => {
            s.allocated -= b.size;
            s.requested -= b.requested;
        }
        BlockState::ActivePendingFree => {
            s.pending -= b.size;
            s.requested -= b.requested;
        }
        BlockState::Inactive => s.inactive -= b.size,
        BlockState::Unknown => s.unknown -= b.size,
    }
}

impl SegmentKind {
    /// Small-pool segments are exactly 2 MiB (`kSmallBuffer`); large-pool ones are 20 MiB or at
    /// least 10 MiB rounded to 2 MiB, so the size tells them apart except for expandable ones.
    pub(crate) fn infer(size: u64, expandable: bool) -> SegmentKind {
        if expandable {
            SegmentKind::Unknown
        } else if size == 2 << 20 {
            SegmentKind::Small
        } else {
            SegmentKind::Large
        }
    }
}
