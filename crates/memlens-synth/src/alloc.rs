//! The simulated CUDA caching allocator: one `DeviceCachingAllocator` of PyTorch
//! (c10/cuda/CUDACachingAllocator.cpp) reduced to what shapes a memory snapshot, i.e. which
//! trace entries it records and which segments and blocks it holds. Rules kept as torch has them:
//! 512-byte rounding; small pool (≤ 1 MiB) in 2 MiB segments; large pool in 20 MiB segments for
//! requests under 10 MiB and 2 MiB-rounded exact segments above; best fit per (stream, pool) in
//! (stream, size, address) order; splitting (`should_split`) and coalescing (`try_merge_blocks`);
//! `max_split_size`; `release_available_cached_blocks` and `release_cached_blocks` (segment_free
//! on OOM retry and `empty_cache`); expandable segments (`segment_map`/`segment_unmap`, pages of
//! 2 or 20 MiB, one segment per mapped run); `record_stream` with `free_requested` now and
//! `free_completed` when the other stream's event completes; private pools for CUDA graph capture;
//! `oom` entries with `device_free` when the simulated device is full.

use crate::rng::Rng;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

pub const MIN_BLOCK_SIZE: u64 = 512;
pub const SMALL_SIZE: u64 = 1 << 20;
pub const SMALL_BUFFER: u64 = 2 << 20;
pub const LARGE_BUFFER: u64 = 20 << 20;
pub const MIN_LARGE_ALLOC: u64 = 10 << 20;
pub const ROUND_LARGE: u64 = 2 << 20;

/// torch `round_size` without `roundup_power2_divisions`.
pub fn round_size(size: u64) -> u64 {
    if size < MIN_BLOCK_SIZE {
        MIN_BLOCK_SIZE
    } else {
        size.div_ceil(MIN_BLOCK_SIZE) * MIN_BLOCK_SIZE
    }
}

/// torch `get_allocation_size`: the cudaMalloc size for a (rounded) request.
pub fn allocation_size(size: u64) -> u64 {
    if size <= SMALL_SIZE {
        SMALL_BUFFER
    } else if size < MIN_LARGE_ALLOC {
        LARGE_BUFFER
    } else {
        size.div_ceil(ROUND_LARGE) * ROUND_LARGE
    }
}

/// A block, as the simulation refers to it (an index into the allocator's block arena).
pub type BlockId = u32;
const NIL: u32 = u32::MAX;

/// Trace entry actions: the model's own enum, so names are written exactly as they are read.
pub use memlens_core::trace::Action;

/// A captured context (torch's `CapturedTraceback`): entries recorded with the same context share
/// one frames list object in the pickle. `serial` is unique per device and run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ctx {
    pub serial: u64,
    pub stack: u32,
}

/// One recorded trace entry. For `oom`, `addr` holds `device_free`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub action: Action,
    pub addr: u64,
    pub size_bytes: u64,
    pub stream: u64,
    pub time_us: i64,
    pub ctx: Ctx,
}

/// Receives what the simulation records, in order.
pub trait Sink {
    fn entry(&mut self, device: u32, e: &Entry);
    /// An `external_annotations` record (`record_function` START/END).
    fn annotation(&mut self, device: u32, time_us: i64, name: &str, start: bool);
}

/// Allocator configuration (what `PYTORCH_CUDA_ALLOC_CONF` and the device decide).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocConfig {
    pub expandable_segments: bool,
    /// `max_split_size_mb` in bytes; `None` = unlimited (torch reports -1).
    pub max_split_size_bytes: Option<u64>,
    /// Total device memory (`cudaMemGetInfo` total).
    pub device_total_bytes: u64,
    /// Memory the CUDA context and other users hold (not available to the allocator).
    pub device_overhead_bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockState {
    ActiveAllocated,
    ActivePendingFree,
    Inactive,
}

impl BlockState {
    pub fn name(self) -> &'static str {
        match self {
            BlockState::ActiveAllocated => "active_allocated",
            BlockState::ActivePendingFree => "active_pending_free",
            BlockState::Inactive => "inactive",
        }
    }
}

/// A block of the final state, as `_snapshot()` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockInfo {
    pub address: u64,
    pub size_bytes: u64,
    pub requested_size_bytes: u64,
    pub state: BlockState,
    pub ctx: Option<Ctx>,
}

/// A segment of the final state (for expandable segments: one contiguous mapped run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    pub device: u32,
    pub address: u64,
    pub total_size_bytes: u64,
    pub allocated_size_bytes: u64,
    pub active_size_bytes: u64,
    pub requested_size_bytes: u64,
    pub stream: u64,
    pub is_small: bool,
    pub pool_id: (i64, i64),
    pub is_expandable: bool,
    pub ctx: Option<Ctx>,
    pub blocks: Vec<BlockInfo>,
}

#[derive(Debug, Clone)]
struct Block {
    ptr: u64,
    size: u64,
    requested: u64,
    stream: u64,
    pool: u32,
    prev: u32,
    next: u32,
    /// Index into `exp_segs`, or NIL.
    expandable: u32,
    event_count: u32,
    /// Bit i: `streams[i]` used this block (`record_stream`).
    stream_uses: u32,
    allocated: bool,
    mapped: bool,
    dead: bool,
    ctx_alloc: Option<Ctx>,
    ctx_segment: Option<Ctx>,
}

type SizeKey = (u64, u64, u64, u32);
type AddrKey = (u64, u64, u32);

#[derive(Debug, Clone)]
struct Pool {
    is_small: bool,
    owner: (i64, i64),
    /// Free mapped blocks in torch's `BlockComparatorSize` order: stream, size, address.
    free: BTreeSet<SizeKey>,
    /// Unmapped parts of expandable segments, by stream and address.
    unmapped: BTreeSet<AddrKey>,
    /// A private pool whose graph is gone: `release_cached_blocks` frees it.
    freeable: bool,
}

#[derive(Debug, Clone)]
struct ExpSeg {
    base: u64,
    va_size: u64,
    page: u64,
}

/// Device memory: physical capacity and a virtual address space handing out 2 MiB-aligned ranges.
#[derive(Debug, Clone)]
struct Vram {
    capacity: u64,
    reserved: u64,
    free_va: BTreeMap<u64, u64>,
}

impl Vram {
    fn take_va(&mut self, size: u64) -> Option<u64> {
        let (&start, &len) = self.free_va.iter().find(|(_, &len)| len >= size)?;
        self.free_va.remove(&start);
        if len > size {
            self.free_va.insert(start + size, len - size);
        }
        Some(start)
    }

    fn give_va(&mut self, ptr: u64, size: u64) {
        let mut start = ptr;
        let mut len = size;
        if let Some((&s, &l)) = self.free_va.range(..ptr).next_back() {
            if s + l == ptr {
                self.free_va.remove(&s);
                start = s;
                len += l;
            }
        }
        if let Some(&l) = self.free_va.get(&(ptr + size)) {
            self.free_va.remove(&(ptr + size));
            len += l;
        }
        self.free_va.insert(start, len);
    }
}

/// One device's caching allocator.
#[derive(Debug, Clone)]
pub struct Allocator {
    pub device: u32,
    /// The clock that stamps entries (µs since the epoch); workloads advance it.
    pub now_us: i64,
    /// Entries recorded so far.
    pub emitted: u64,
    expandable: bool,
    max_split: u64,
    blocks: Vec<Block>,
    free_slots: Vec<u32>,
    pools: Vec<Pool>,
    /// Pool indices (large, small) that allocations go to while a graph capture is underway.
    capture: Option<(u32, u32)>,
    exp_segs: Vec<Option<ExpSeg>>,
    /// Outstanding `record_stream` events per stream: (completion time, block).
    events: BTreeMap<u64, VecDeque<(i64, BlockId)>>,
    stream_busy_until: BTreeMap<u64, i64>,
    streams: Vec<u64>,
    deferred: Vec<BlockId>,
    vram: Vram,
    rng: Rng,
}

const LARGE_POOL: u32 = 0;
const SMALL_POOL: u32 = 1;

impl Allocator {
    /// `va_base` is where this device's virtual addresses start (2 MiB aligned).
    pub fn new(device: u32, cfg: &AllocConfig, va_base: u64, now_us: i64, rng: Rng) -> Allocator {
        let pool = |is_small| Pool {
            is_small,
            owner: (0, 0),
            free: BTreeSet::new(),
            unmapped: BTreeSet::new(),
            freeable: false,
        };
        let mut free_va = BTreeMap::new();
        free_va.insert(va_base, 1u64 << 40);
        Allocator {
            device,
            now_us,
            emitted: 0,
            expandable: cfg.expandable_segments,
            max_split: cfg.max_split_size_bytes.unwrap_or(u64::MAX),
            blocks: Vec::new(),
            free_slots: Vec::new(),
            pools: vec![pool(false), pool(true)],
            capture: None,
            exp_segs: Vec::new(),
            events: BTreeMap::new(),
            stream_busy_until: BTreeMap::new(),
            streams: vec![0],
            deferred: Vec::new(),
            vram: Vram {
                capacity: cfg
                    .device_total_bytes
                    .saturating_sub(cfg.device_overhead_bytes),
                reserved: 0,
                free_va,
            },
            rng,
        }
    }

    /// Bytes held in segments (cudaMalloc'd or mapped).
    pub fn reserved_bytes(&self) -> u64 {
        self.vram.reserved
    }

    /// What `cudaMemGetInfo` would call free.
    pub fn device_free_bytes(&self) -> u64 {
        self.vram.capacity.saturating_sub(self.vram.reserved)
    }

    /// Requested size of a live block (0 for a stale id).
    pub fn requested_size(&self, id: BlockId) -> u64 {
        self.blocks.get(id as usize).map_or(0, |b| b.requested)
    }

    pub fn is_capturing(&self) -> bool {
        self.capture.is_some()
    }

    fn b(&self, id: u32) -> &Block {
        &self.blocks[id as usize]
    }

    fn bm(&mut self, id: u32) -> &mut Block {
        &mut self.blocks[id as usize]
    }

    fn new_block(&mut self, ptr: u64, size: u64, stream: u64, pool: u32) -> u32 {
        let blk = Block {
            ptr,
            size,
            requested: 0,
            stream,
            pool,
            prev: NIL,
            next: NIL,
            expandable: NIL,
            event_count: 0,
            stream_uses: 0,
            allocated: false,
            mapped: true,
            dead: false,
            ctx_alloc: None,
            ctx_segment: None,
        };
        if let Some(id) = self.free_slots.pop() {
            self.blocks[id as usize] = blk;
            id
        } else {
            self.blocks.push(blk);
            (self.blocks.len() - 1) as u32
        }
    }

    fn delete_block(&mut self, id: u32) {
        let b = self.bm(id);
        b.dead = true;
        b.ctx_alloc = None;
        b.ctx_segment = None;
        self.free_slots.push(id);
    }

    fn pool_insert(&mut self, id: u32) {
        let b = self.b(id);
        let (pool, mapped, key, akey) = (
            b.pool,
            b.mapped,
            (b.stream, b.size, b.ptr, id),
            (b.stream, b.ptr, id),
        );
        let p = &mut self.pools[pool as usize];
        if mapped {
            p.free.insert(key);
        } else {
            p.unmapped.insert(akey);
        }
    }

    fn pool_remove(&mut self, id: u32) {
        let b = self.b(id);
        let (pool, mapped, key, akey) = (
            b.pool,
            b.mapped,
            (b.stream, b.size, b.ptr, id),
            (b.stream, b.ptr, id),
        );
        let p = &mut self.pools[pool as usize];
        if mapped {
            p.free.remove(&key);
        } else {
            p.unmapped.remove(&akey);
        }
    }

    fn emit(
        &mut self,
        sink: &mut dyn Sink,
        action: Action,
        addr: u64,
        size_bytes: u64,
        stream: u64,
        ctx: Ctx,
    ) {
        let e = Entry {
            action,
            addr,
            size_bytes,
            stream,
            time_us: self.now_us,
            ctx,
        };
        sink.entry(self.device, &e);
        self.emitted += 1;
    }

    fn stream_bit(&mut self, stream: u64) -> u32 {
        let i = match self.streams.iter().position(|&s| s == stream) {
            Some(i) => i,
            None => {
                self.streams.push(stream);
                self.streams.len() - 1
            }
        };
        1u32 << (i.min(31))
    }

    fn pool_for(&self, size: u64) -> u32 {
        let small = size <= SMALL_SIZE;
        match self.capture {
            Some((large, smallp)) => {
                if small {
                    smallp
                } else {
                    large
                }
            }
            None => {
                if small {
                    SMALL_POOL
                } else {
                    LARGE_POOL
                }
            }
        }
    }

    /// `malloc`: returns the block handed out, or `None` after recording an `oom` entry.
    pub fn malloc(
        &mut self,
        orig_size: u64,
        stream: u64,
        ctx: Ctx,
        sink: &mut dyn Sink,
    ) -> Option<BlockId> {
        if self.capture.is_none() {
            self.process_events(ctx, sink);
        }
        let size = round_size(orig_size);
        let pool = self.pool_for(size);
        let alloc_size = allocation_size(size);
        let mut found = self.get_free_block(pool, stream, size);
        if found.is_none() {
            found = self.alloc_block(pool, stream, size, alloc_size, ctx, sink);
            if found.is_none()
                && self.release_available_cached_blocks(pool, stream, size, ctx, sink)
            {
                found = self.alloc_block(pool, stream, size, alloc_size, ctx, sink);
            }
            if found.is_none() && self.capture.is_none() {
                self.release_cached_blocks(ctx, sink);
                found = self.alloc_block(pool, stream, size, alloc_size, ctx, sink);
            }
        }
        let Some(block) = found else {
            let free = self.device_free_bytes();
            self.emit(sink, Action::Oom, free, size, stream, ctx);
            return None;
        };
        Some(self.alloc_found_block(block, orig_size, size, ctx, sink))
    }

    fn get_free_block(&mut self, pool: u32, stream: u64, size: u64) -> Option<u32> {
        let pick = self.peek_free_block(pool, stream, size)?;
        self.pools[pool as usize].free.remove(&pick);
        Some(pick.3)
    }

    /// The block `get_free_block` would hand out, without taking it.
    fn peek_free_block(&self, pool: u32, stream: u64, size: u64) -> Option<SizeKey> {
        let p = &self.pools[pool as usize];
        let mut it = p.free.range((stream, size, 0, 0)..);
        let first = *it.next()?;
        if first.0 != stream {
            return None;
        }
        let mut pick = first;
        if self.expandable && self.b(pick.3).expandable != NIL {
            // Best fit counts the unmapped space behind a block as part of its size.
            let exp_size = |b: &Block| {
                b.size
                    + match self.blocks.get(b.next as usize) {
                        Some(n) if !n.mapped => n.size,
                        _ => 0,
                    }
            };
            for &next in it {
                if self.b(pick.3).expandable == NIL || next.0 != stream {
                    break;
                }
                if exp_size(self.b(next.3)) < exp_size(self.b(pick.3)) {
                    pick = next;
                } else {
                    break;
                }
            }
        }
        let bsize = self.b(pick.3).size;
        if size < self.max_split && bsize >= self.max_split {
            return None;
        }
        if size >= self.max_split && bsize >= size + LARGE_BUFFER {
            return None;
        }
        Some(pick)
    }

    /// Whether a request of `size` bytes on `stream` would be served from a cached free block
    /// (no new segment, no retry).
    pub fn fits_cached(&self, size: u64, stream: u64) -> bool {
        let size = round_size(size);
        self.peek_free_block(self.pool_for(size), stream, size)
            .is_some()
    }

    /// The largest free (inactive, mapped) block of the default large or small pool on `stream`.
    pub fn largest_free_block(&self, stream: u64, small: bool) -> u64 {
        let pool = if small { SMALL_POOL } else { LARGE_POOL };
        self.pools[pool as usize]
            .free
            .range((stream, 0, 0, 0)..=(stream, u64::MAX, u64::MAX, u32::MAX))
            .next_back()
            .map_or(0, |k| k.1)
    }

    /// Bytes of allocated blocks (what the snapshot reports as `active_allocated`).
    pub fn allocated_bytes(&self) -> u64 {
        self.blocks
            .iter()
            .filter(|b| !b.dead && b.allocated)
            .map(|b| b.size)
            .sum()
    }

    /// This allocator as it would be after the last retry before an OOM
    /// (`release_cached_blocks`), recorded nowhere.
    pub fn after_release(&self) -> Allocator {
        struct Nothing;
        impl Sink for Nothing {
            fn entry(&mut self, _device: u32, _e: &Entry) {}
            fn annotation(&mut self, _device: u32, _time_us: i64, _name: &str, _start: bool) {}
        }
        let mut a = self.clone();
        a.release_cached_blocks(
            Ctx {
                serial: 0,
                stack: 0,
            },
            &mut Nothing,
        );
        a
    }

    fn alloc_block(
        &mut self,
        pool: u32,
        stream: u64,
        size: u64,
        alloc_size: u64,
        ctx: Ctx,
        sink: &mut dyn Sink,
    ) -> Option<u32> {
        if self.expandable && self.capture.is_none() && self.pools[pool as usize].owner == (0, 0) {
            return self.try_allocate_expandable_block(pool, stream, size, ctx, sink);
        }
        if self.vram.reserved + alloc_size > self.vram.capacity {
            return None;
        }
        let ptr = self.vram.take_va(alloc_size)?;
        self.vram.reserved += alloc_size;
        let id = self.new_block(ptr, alloc_size, stream, pool);
        self.bm(id).ctx_segment = Some(ctx);
        self.emit(sink, Action::SegmentAlloc, ptr, alloc_size, stream, ctx);
        // cudaMalloc takes a while, longer for big segments.
        self.now_us += self.rng.range(3, 40) as i64 + (alloc_size >> 27) as i64;
        Some(id)
    }

    fn should_split(&self, pool: u32, block_size: u64, size: u64) -> bool {
        let remaining = block_size - size;
        if self.pools[pool as usize].is_small || self.expandable {
            remaining >= MIN_BLOCK_SIZE
        } else {
            size < self.max_split && remaining > SMALL_SIZE
        }
    }

    fn alloc_found_block(
        &mut self,
        id: u32,
        orig_size: u64,
        size: u64,
        ctx: Ctx,
        sink: &mut dyn Sink,
    ) -> u32 {
        let (pool, bsize) = (self.b(id).pool, self.b(id).size);
        let mut block = id;
        if self.should_split(pool, bsize, size) {
            // The front part becomes a new block; the old one keeps the remainder (and with it the
            // segment's context, so a split segment reports no frames, as in torch).
            let r = self.b(id).clone();
            let nb = self.new_block(r.ptr, size, r.stream, r.pool);
            {
                let n = self.bm(nb);
                n.expandable = r.expandable;
                n.prev = r.prev;
                n.next = id;
            }
            if r.prev != NIL {
                self.bm(r.prev).next = nb;
            }
            {
                let rem = self.bm(id);
                rem.prev = nb;
                rem.ptr += size;
                rem.size -= size;
            }
            self.pool_insert(id);
            block = nb;
        }
        let (ptr, stream) = {
            let b = self.bm(block);
            b.allocated = true;
            b.requested = orig_size;
            b.ctx_alloc = Some(ctx);
            (b.ptr, b.stream)
        };
        self.emit(sink, Action::Alloc, ptr, orig_size, stream, ctx);
        block
    }

    /// `record_stream`: the block is used on `stream` too; its free waits for that stream.
    pub fn record_stream(&mut self, id: BlockId, stream: u64) {
        if self
            .blocks
            .get(id as usize)
            .is_none_or(|b| b.dead || b.stream == stream)
        {
            return;
        }
        let bit = self.stream_bit(stream);
        self.bm(id).stream_uses |= bit;
    }

    /// `free`: records `free_requested`, and `free_completed` now or once the block's other
    /// streams are done with it.
    pub fn free(&mut self, id: BlockId, ctx: Ctx, sink: &mut dyn Sink) {
        let Some(b) = self.blocks.get(id as usize) else {
            return;
        };
        if b.dead || !b.allocated {
            return;
        }
        let (ptr, req, stream, uses) = (b.ptr, b.requested, b.stream, b.stream_uses);
        self.bm(id).allocated = false;
        self.emit(sink, Action::FreeRequested, ptr, req, stream, ctx);
        if uses != 0 {
            if self.capture.is_some() {
                self.deferred.push(id);
            } else {
                self.insert_events(id);
            }
        } else {
            self.free_block(id, ctx, sink);
        }
    }

    fn insert_events(&mut self, id: u32) {
        let uses = std::mem::take(&mut self.bm(id).stream_uses);
        for (i, s) in self.streams.clone().into_iter().enumerate() {
            if i < 32 && uses & (1 << i) != 0 {
                let work = self.rng.range(20, 2500) as i64;
                let busy = self.stream_busy_until.entry(s).or_insert(0);
                let done = (*busy).max(self.now_us) + work;
                *busy = done;
                self.events.entry(s).or_default().push_back((done, id));
                self.bm(id).event_count += 1;
            }
        }
    }

    fn process_events(&mut self, ctx: Ctx, sink: &mut dyn Sink) {
        for id in std::mem::take(&mut self.deferred) {
            self.insert_events(id);
        }
        let streams: Vec<u64> = self.events.keys().copied().collect();
        for s in streams {
            while let Some(&(done, id)) = self.events.get(&s).and_then(|q| q.front()) {
                if done > self.now_us {
                    break;
                }
                if let Some(q) = self.events.get_mut(&s) {
                    q.pop_front();
                }
                self.event_done(id, ctx, sink);
            }
        }
        self.events.retain(|_, q| !q.is_empty());
    }

    fn event_done(&mut self, id: u32, ctx: Ctx, sink: &mut dyn Sink) {
        let b = self.bm(id);
        b.event_count = b.event_count.saturating_sub(1);
        if b.event_count == 0 {
            self.free_block(id, ctx, sink);
        }
    }

    fn synchronize_and_free_events(&mut self, ctx: Ctx, sink: &mut dyn Sink) {
        for id in std::mem::take(&mut self.deferred) {
            self.insert_events(id);
        }
        let events = std::mem::take(&mut self.events);
        for (_, q) in events {
            for (done, id) in q {
                self.now_us = self.now_us.max(done);
                self.event_done(id, ctx, sink);
            }
        }
    }

    fn free_block(&mut self, id: u32, ctx: Ctx, sink: &mut dyn Sink) {
        let (ptr, req, stream, prev, next) = {
            let b = self.b(id);
            (b.ptr, b.requested, b.stream, b.prev, b.next)
        };
        self.emit(sink, Action::FreeCompleted, ptr, req, stream, ctx);
        self.bm(id).ctx_alloc = None;
        self.try_merge_blocks(id, prev);
        self.try_merge_blocks(id, next);
        self.pool_insert(id);
    }

    /// Merges the free neighbour `src` into `dst` (which is not in a pool set at this point).
    fn try_merge_blocks(&mut self, dst: u32, src: u32) -> u64 {
        if src == NIL {
            return 0;
        }
        let s = self.b(src).clone();
        if s.allocated || s.event_count > 0 || s.stream_uses != 0 || s.mapped != self.b(dst).mapped
        {
            return 0;
        }
        self.pool_remove(src);
        if self.b(dst).prev == src {
            let d = self.bm(dst);
            d.ptr = s.ptr;
            d.prev = s.prev;
            d.ctx_segment = s.ctx_segment;
            if s.prev != NIL {
                self.bm(s.prev).next = dst;
            }
        } else {
            self.bm(dst).next = s.next;
            if s.next != NIL {
                self.bm(s.next).prev = dst;
            }
        }
        self.bm(dst).size += s.size;
        self.delete_block(src);
        s.size
    }

    fn release_block(&mut self, id: u32, ctx: Ctx, sink: &mut dyn Sink) {
        let b = self.b(id).clone();
        self.emit(sink, Action::SegmentFree, b.ptr, b.size, b.stream, ctx);
        self.now_us += self.rng.range(5, 60) as i64;
        self.pool_remove(id);
        self.vram.give_va(b.ptr, b.size);
        self.vram.reserved -= b.size;
        self.delete_block(id);
    }

    fn release_available_cached_blocks(
        &mut self,
        pool: u32,
        stream: u64,
        size: u64,
        ctx: Ctx,
        sink: &mut dyn Sink,
    ) -> bool {
        if self.max_split == u64::MAX {
            return false;
        }
        let key_size = size.max(self.max_split);
        let p = &self.pools[pool as usize];
        let hit = p.free.range((stream, key_size, 0, 0)..).next().copied();
        match hit {
            Some(k) if k.0 == stream && self.b(k.3).expandable == NIL => {
                self.release_block(k.3, ctx, sink);
                true
            }
            _ => {
                // No single block is big enough: free oversize blocks of this stream, largest first.
                let below: Vec<SizeKey> = p
                    .free
                    .range(..(stream, key_size, 0, 0))
                    .rev()
                    .copied()
                    .collect();
                let mut released = 0u64;
                for k in below {
                    if released >= key_size || k.0 != stream || k.1 < self.max_split {
                        break;
                    }
                    if self.b(k.3).expandable == NIL {
                        released += k.1;
                        self.release_block(k.3, ctx, sink);
                    }
                }
                released >= key_size
            }
        }
    }

    fn release_blocks(&mut self, pool: u32, ctx: Ctx, sink: &mut dyn Sink) {
        let keys: Vec<SizeKey> = self.pools[pool as usize].free.iter().copied().collect();
        let mut to_unmap = Vec::new();
        for k in keys {
            let b = self.b(k.3);
            if b.expandable != NIL {
                to_unmap.push(k.3);
            } else if b.prev == NIL && b.next == NIL {
                self.release_block(k.3, ctx, sink);
            }
        }
        for id in to_unmap {
            if self.b(id).dead {
                continue;
            }
            self.unmap_block(id, ctx, sink);
            let b = self.b(id);
            if !b.dead && b.prev == NIL && b.next == NIL && !b.mapped {
                self.release_expandable_segment(id);
            }
        }
    }

    /// `release_cached_blocks` (`empty_cache`, and the last retry before an OOM).
    fn release_cached_blocks(&mut self, ctx: Ctx, sink: &mut dyn Sink) {
        self.synchronize_and_free_events(ctx, sink);
        self.release_blocks(LARGE_POOL, ctx, sink);
        self.release_blocks(SMALL_POOL, ctx, sink);
        for i in 2..self.pools.len() as u32 {
            if self.pools[i as usize].freeable {
                self.release_blocks(i, ctx, sink);
            }
        }
    }

    /// `torch.cuda.empty_cache()`.
    pub fn empty_cache(&mut self, ctx: Ctx, sink: &mut dyn Sink) {
        if self.capture.is_none() {
            self.release_cached_blocks(ctx, sink);
        }
    }

    // ---- expandable segments ----

    fn try_allocate_expandable_block(
        &mut self,
        pool: u32,
        stream: u64,
        size: u64,
        ctx: Ctx,
        sink: &mut dyn Sink,
    ) -> Option<u32> {
        let mut cand = self.find_expandable_block(pool, stream, size)?;
        if !self.b(cand).mapped {
            let want = self.b(cand).size.min(size);
            if !self.map_block(cand, want, ctx, sink) {
                return None;
            }
            // map_block may have merged `cand` with a free mapped neighbour; it keeps its id.
        }
        while self.b(cand).size < size {
            let remaining = size - self.b(cand).size;
            let next = self.b(cand).next;
            if next == NIL || self.b(next).mapped {
                return None;
            }
            let want = self.b(next).size.min(remaining);
            if !self.map_block(next, want, ctx, sink) {
                return None;
            }
            cand = next;
        }
        self.pool_remove(cand);
        Some(cand)
    }

    fn allocatable(&self, id: u32) -> bool {
        self.blocks
            .get(id as usize)
            .is_some_and(|b| !b.dead && !b.allocated && b.event_count == 0 && b.stream_uses == 0)
    }

    fn find_expandable_block(&mut self, pool: u32, stream: u64, size: u64) -> Option<u32> {
        let cands: Vec<AddrKey> = self.pools[pool as usize]
            .unmapped
            .range((stream, 0, 0)..)
            .take_while(|k| k.0 == stream)
            .copied()
            .collect();
        for k in cands {
            let mut c = k.2;
            let prev = self.b(c).prev;
            if prev != NIL && self.allocatable(prev) {
                c = prev;
            }
            let mut bytes = 0;
            let mut b = c;
            while bytes < size && b != NIL && self.allocatable(b) {
                bytes += self.b(b).size;
                b = self.b(b).next;
            }
            if bytes >= size {
                return Some(c);
            }
        }
        let page = if self.pools[pool as usize].is_small {
            SMALL_BUFFER
        } else {
            LARGE_BUFFER
        };
        // torch reserves 1 1/8 of the device's memory of address space per expandable segment.
        let total = self.vram.capacity;
        let va_size = (total + total / 8).div_ceil(page) * page;
        let base = self
            .vram
            .take_va(va_size.div_ceil(ROUND_LARGE) * ROUND_LARGE)?;
        self.exp_segs.push(Some(ExpSeg {
            base,
            va_size,
            page,
        }));
        let seg = (self.exp_segs.len() - 1) as u32;
        let id = self.new_block(base, va_size, stream, pool);
        {
            let b = self.bm(id);
            b.mapped = false;
            b.expandable = seg;
        }
        self.pool_insert(id);
        Some(id)
    }

    fn seg_of(&self, id: u32) -> Option<ExpSeg> {
        self.exp_segs
            .get(self.b(id).expandable as usize)
            .and_then(|s| s.clone())
    }

    fn map_block(&mut self, id: u32, size: u64, ctx: Ctx, sink: &mut dyn Sink) -> bool {
        let Some(seg) = self.seg_of(id) else {
            return false;
        };
        let b = self.b(id).clone();
        let mapped_size = (size.div_ceil(seg.page) * seg.page).min(b.size);
        if mapped_size == 0 || self.vram.reserved + mapped_size > self.vram.capacity {
            return false;
        }
        self.vram.reserved += mapped_size;
        self.pool_remove(id);
        self.bm(id).mapped = true;
        if mapped_size < b.size {
            let rem = self.new_block(b.ptr + mapped_size, b.size - mapped_size, b.stream, b.pool);
            {
                let r = self.bm(rem);
                r.mapped = false;
                r.expandable = b.expandable;
                r.prev = id;
                r.next = b.next;
            }
            if b.next != NIL {
                self.bm(b.next).prev = rem;
            }
            self.bm(id).next = rem;
            self.bm(id).size = mapped_size;
            self.pool_insert(rem);
        }
        let prev = self.b(id).prev;
        self.try_merge_blocks(id, prev);
        let next = self.b(id).next;
        self.try_merge_blocks(id, next);
        self.pool_insert(id);
        self.emit(sink, Action::SegmentMap, b.ptr, mapped_size, b.stream, ctx);
        self.now_us += self.rng.range(2, 20) as i64;
        let blk = self.bm(id);
        if blk.prev == NIL && blk.ctx_segment.is_none() {
            blk.ctx_segment = Some(ctx);
        }
        true
    }

    fn unmap_block(&mut self, id: u32, ctx: Ctx, sink: &mut dyn Sink) {
        let Some(seg) = self.seg_of(id) else { return };
        let b = self.b(id).clone();
        let off = b.ptr - seg.base;
        let begin = seg.base + off.div_ceil(seg.page) * seg.page;
        let end = seg.base + ((off + b.size) / seg.page) * seg.page;
        if begin >= end {
            return;
        }
        self.pool_remove(id);
        if begin > b.ptr {
            let bf = self.new_block(b.ptr, begin - b.ptr, b.stream, b.pool);
            {
                let x = self.bm(bf);
                x.expandable = b.expandable;
                x.prev = b.prev;
                x.next = id;
            }
            if b.prev != NIL {
                self.bm(b.prev).next = bf;
            }
            self.bm(id).prev = bf;
            self.pool_insert(bf);
        }
        if end < b.ptr + b.size {
            let af = self.new_block(end, b.ptr + b.size - end, b.stream, b.pool);
            {
                let x = self.bm(af);
                x.expandable = b.expandable;
                x.prev = id;
                x.next = b.next;
            }
            if b.next != NIL {
                self.bm(b.next).prev = af;
            }
            self.bm(id).next = af;
            self.pool_insert(af);
        }
        {
            let x = self.bm(id);
            x.ptr = begin;
            x.size = end - begin;
            x.mapped = false;
        }
        let prev = self.b(id).prev;
        self.try_merge_blocks(id, prev);
        let next = self.b(id).next;
        self.try_merge_blocks(id, next);
        self.pool_insert(id);
        self.vram.reserved -= end - begin;
        // torch falls back to the segment's context only when the release has none.
        self.emit(
            sink,
            Action::SegmentUnmap,
            begin,
            end - begin,
            b.stream,
            ctx,
        );
        self.now_us += self.rng.range(2, 20) as i64;
    }

    fn release_expandable_segment(&mut self, id: u32) {
        let seg_idx = self.b(id).expandable;
        let Some(seg) = self
            .exp_segs
            .get_mut(seg_idx as usize)
            .and_then(|s| s.take())
        else {
            return;
        };
        self.pool_remove(id);
        self.vram
            .give_va(seg.base, seg.va_size.div_ceil(ROUND_LARGE) * ROUND_LARGE);
        self.delete_block(id);
    }

    // ---- private pools (CUDA graph capture) ----

    /// `beginAllocateToPool` for a graph capture: allocations go to the private pool `owner`
    /// (created on first use) until [`Self::end_capture`].
    pub fn begin_capture(&mut self, owner: (i64, i64)) {
        let found = self
            .pools
            .iter()
            .position(|p| p.owner == owner && !p.is_small)
            .map(|i| i as u32);
        let large = match found {
            Some(i) => i,
            None => {
                for is_small in [false, true] {
                    self.pools.push(Pool {
                        is_small,
                        owner,
                        free: BTreeSet::new(),
                        unmapped: BTreeSet::new(),
                        freeable: false,
                    });
                }
                (self.pools.len() - 2) as u32
            }
        };
        self.capture = Some((large, large + 1));
    }

    pub fn end_capture(&mut self) {
        self.capture = None;
    }

    /// The graph that owns private pool `owner` was destroyed: its cached segments become
    /// releasable by `empty_cache`.
    pub fn release_pool(&mut self, owner: (i64, i64)) {
        for p in self.pools.iter_mut().filter(|p| p.owner == owner) {
            p.freeable = true;
        }
    }

    // ---- final state ----

    /// The allocator state as `_snapshot()` reports it: segments sorted by address.
    pub fn snapshot(&self) -> Vec<SegmentInfo> {
        let mut out = Vec::new();
        for (i, h) in self.blocks.iter().enumerate() {
            if h.dead || !h.mapped {
                continue;
            }
            if h.prev != NIL && self.b(h.prev).mapped {
                continue;
            }
            let pool = &self.pools[h.pool as usize];
            let mut seg = SegmentInfo {
                device: self.device,
                address: h.ptr,
                total_size_bytes: 0,
                allocated_size_bytes: 0,
                active_size_bytes: 0,
                requested_size_bytes: 0,
                stream: h.stream,
                is_small: pool.is_small,
                pool_id: pool.owner,
                is_expandable: h.expandable != NIL,
                ctx: h.ctx_segment,
                blocks: Vec::new(),
            };
            let mut cur = i as u32;
            while cur != NIL && self.b(cur).mapped {
                let b = self.b(cur);
                let state = if b.allocated {
                    BlockState::ActiveAllocated
                } else if b.event_count > 0 || b.stream_uses != 0 {
                    BlockState::ActivePendingFree
                } else {
                    BlockState::Inactive
                };
                seg.total_size_bytes += b.size;
                if state == BlockState::ActiveAllocated {
                    seg.allocated_size_bytes += b.size;
                }
                if state != BlockState::Inactive {
                    seg.active_size_bytes += b.size;
                    seg.requested_size_bytes += b.requested;
                }
                seg.blocks.push(BlockInfo {
                    address: b.ptr,
                    size_bytes: b.size,
                    requested_size_bytes: b.requested,
                    state,
                    ctx: b.ctx_alloc,
                });
                cur = b.next;
            }
            out.push(seg);
        }
        out.sort_by_key(|s| s.address);
        out
    }

    /// Checks the block lists against the pools and the reserved byte count; used by tests.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut reserved = 0u64;
        for (i, b) in self.blocks.iter().enumerate() {
            if b.dead {
                continue;
            }
            let i = i as u32;
            if b.next != NIL {
                let n = self.b(b.next);
                if n.dead || n.prev != i || b.ptr + b.size != n.ptr {
                    return Err(format!("block {i}: broken next link"));
                }
            }
            if b.prev != NIL && self.b(b.prev).dead {
                return Err(format!("block {i}: dead prev"));
            }
            let p = &self.pools[b.pool as usize];
            let in_free = p.free.contains(&(b.stream, b.size, b.ptr, i));
            let in_unmapped = p.unmapped.contains(&(b.stream, b.ptr, i));
            let free = !b.allocated && b.event_count == 0 && b.stream_uses == 0;
            if b.mapped && in_free != free {
                return Err(format!("block {i}: free={free} but in pool={in_free}"));
            }
            if !b.mapped && !in_unmapped {
                return Err(format!("block {i}: unmapped but not in the unmapped set"));
            }
            if b.mapped {
                if b.expandable != NIL {
                    reserved += b.size;
                } else if b.prev == NIL {
                    let mut s = 0;
                    let mut c = i;
                    while c != NIL {
                        s += self.b(c).size;
                        c = self.b(c).next;
                    }
                    reserved += s;
                }
            }
            if free && b.mapped {
                for n in [b.prev, b.next] {
                    if n != NIL {
                        let nb = self.b(n);
                        if !nb.allocated
                            && nb.event_count == 0
                            && nb.stream_uses == 0
                            && nb.mapped == b.mapped
                        {
                            return Err(format!("block {i}: free neighbour {n} not merged"));
                        }
                    }
                }
            }
        }
        let in_sets: usize = self
            .pools
            .iter()
            .map(|p| p.free.len() + p.unmapped.len())
            .sum();
        let live_free = self
            .blocks
            .iter()
            .filter(|b| {
                !b.dead && (!b.mapped || (!b.allocated && b.event_count == 0 && b.stream_uses == 0))
            })
            .count();
        if in_sets != live_free {
            return Err(format!(
                "pool sets hold {in_sets} blocks, {live_free} are free"
            ));
        }
        if reserved != self.vram.reserved {
            return Err(format!(
                "reserved {} but segments hold {reserved}",
                self.vram.reserved
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rec(Vec<Entry>);
    impl Sink for Rec {
        fn entry(&mut self, _d: u32, e: &Entry) {
            self.0.push(*e);
        }
        fn annotation(&mut self, _d: u32, _t: i64, _n: &str, _s: bool) {}
    }

    fn cfg(expandable: bool, max_split: Option<u64>, total: u64) -> AllocConfig {
        AllocConfig {
            expandable_segments: expandable,
            max_split_size_bytes: max_split,
            device_total_bytes: total,
            device_overhead_bytes: 0,
        }
    }

    fn ctx(n: u64) -> Ctx {
        Ctx {
            serial: n,
            stack: 0,
        }
    }

    fn actions(r: &Rec) -> Vec<&'static str> {
        r.0.iter().map(|e| e.action.name()).collect()
    }

    #[test]
    fn rounding_and_segment_sizes_follow_torch() {
        assert_eq!(round_size(1), 512);
        assert_eq!(round_size(513), 1024);
        assert_eq!(allocation_size(1 << 20), 2 << 20);
        assert_eq!(allocation_size((1 << 20) + 512), 20 << 20);
        assert_eq!(allocation_size(10 << 20), 10 << 20);
        assert_eq!(allocation_size((10 << 20) + 512), 12 << 20);
    }

    #[test]
    fn small_blocks_split_and_coalesce() {
        let mut a = Allocator::new(0, &cfg(false, None, 1 << 34), 1 << 32, 0, Rng::new(1, 1));
        let mut r = Rec(Vec::new());
        let x = a.malloc(1000, 0, ctx(1), &mut r).unwrap_or(NIL);
        let y = a.malloc(3000, 0, ctx(2), &mut r).unwrap_or(NIL);
        assert_eq!(actions(&r), ["segment_alloc", "alloc", "alloc"]);
        assert_eq!(r.0[1].addr + 1024, r.0[2].addr);
        let s = a.snapshot();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].total_size_bytes, 2 << 20);
        assert_eq!(s[0].blocks.len(), 3);
        a.free(x, ctx(3), &mut r);
        a.free(y, ctx(4), &mut r);
        a.check_invariants().unwrap_or_else(|e| panic!("{e}"));
        let s = a.snapshot();
        assert_eq!(s[0].blocks.len(), 1, "free neighbours coalesce");
        assert_eq!(s[0].blocks[0].state, BlockState::Inactive);
        // torch keeps the last requested size on the merged block
        assert_eq!(s[0].blocks[0].requested_size_bytes, 3000);
        a.empty_cache(ctx(5), &mut r);
        assert_eq!(actions(&r).last(), Some(&"segment_free"));
        assert!(a.snapshot().is_empty());
        a.check_invariants().unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn large_requests_get_exact_segments_and_oom_releases_cache_first() {
        let mut a = Allocator::new(0, &cfg(false, None, 100 << 20), 1 << 32, 0, Rng::new(1, 1));
        let mut r = Rec(Vec::new());
        let x = a.malloc(30 << 20, 0, ctx(1), &mut r).unwrap_or(NIL);
        assert_eq!(r.0[0].size_bytes, 30 << 20);
        a.free(x, ctx(2), &mut r);
        let y = a.malloc(80 << 20, 0, ctx(3), &mut r);
        assert!(y.is_some());
        assert_eq!(
            actions(&r),
            [
                "segment_alloc",
                "alloc",
                "free_requested",
                "free_completed",
                "segment_free",
                "segment_alloc",
                "alloc"
            ]
        );
        let z = a.malloc(50 << 20, 0, ctx(4), &mut r);
        assert!(z.is_none());
        let last = r.0.last().copied();
        assert_eq!(last.map(|e| e.action), Some(Action::Oom));
        assert_eq!(last.map(|e| e.addr), Some(20 << 20));
        a.check_invariants().unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn queries_see_what_malloc_and_the_retry_would_do() {
        let mut a = Allocator::new(0, &cfg(false, None, 100 << 20), 1 << 32, 0, Rng::new(1, 1));
        let mut r = Rec(Vec::new());
        // one 60 MiB segment split into 20 + 20 + 20, the middle one freed
        let big = a.malloc(60 << 20, 0, ctx(1), &mut r).unwrap_or(NIL);
        a.free(big, ctx(2), &mut r);
        let _x = a.malloc(20 << 20, 0, ctx(3), &mut r).unwrap_or(NIL);
        let y = a.malloc(20 << 20, 0, ctx(4), &mut r).unwrap_or(NIL);
        let _z = a.malloc(20 << 20, 0, ctx(5), &mut r).unwrap_or(NIL);
        a.free(y, ctx(6), &mut r);
        assert_eq!(a.largest_free_block(0, false), 20 << 20);
        assert_eq!(a.largest_free_block(0, true), 0);
        assert_eq!(a.allocated_bytes(), 40 << 20);
        assert!(a.fits_cached(20 << 20, 0));
        assert!(!a.fits_cached((20 << 20) + 512, 0));
        assert!(
            !a.fits_cached(20 << 20, 7),
            "another stream's blocks do not serve"
        );
        // the retry releases only wholly free segments: this one stays
        let n = r.0.len();
        let after = a.after_release();
        assert_eq!(r.0.len(), n, "nothing recorded");
        assert_eq!(after.reserved_bytes(), 60 << 20);
        assert_eq!(after.device_free_bytes(), 40 << 20);
        a.check_invariants().unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn record_stream_delays_free_completed() {
        let mut a = Allocator::new(0, &cfg(false, None, 1 << 34), 1 << 32, 0, Rng::new(1, 1));
        let mut r = Rec(Vec::new());
        let x = a.malloc(4096, 0, ctx(1), &mut r).unwrap_or(NIL);
        a.record_stream(x, 77);
        a.free(x, ctx(2), &mut r);
        assert_eq!(actions(&r), ["segment_alloc", "alloc", "free_requested"]);
        assert_eq!(
            a.snapshot()[0].blocks[0].state,
            BlockState::ActivePendingFree
        );
        a.now_us += 1_000_000;
        let _ = a.malloc(4096, 0, ctx(3), &mut r);
        assert_eq!(actions(&r)[3..], ["free_completed", "alloc"]);
        assert_eq!(
            r.0[3].ctx, r.0[4].ctx,
            "completed by the next malloc, with its context"
        );
        a.check_invariants().unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn expandable_segments_map_grow_and_unmap() {
        let mut a = Allocator::new(0, &cfg(true, None, 1 << 34), 1 << 32, 0, Rng::new(1, 1));
        let mut r = Rec(Vec::new());
        let x = a.malloc(30 << 20, 0, ctx(1), &mut r).unwrap_or(NIL);
        let y = a.malloc(15 << 20, 0, ctx(2), &mut r).unwrap_or(NIL);
        assert_eq!(
            actions(&r),
            ["segment_map", "alloc", "segment_map", "alloc"]
        );
        assert_eq!(r.0[0].size_bytes, 40 << 20);
        let s = a.snapshot();
        assert_eq!(s.len(), 1, "one mapped run");
        assert_eq!(s[0].total_size_bytes, 60 << 20);
        assert!(s[0].is_expandable);
        a.check_invariants().unwrap_or_else(|e| panic!("{e}"));
        a.free(x, ctx(3), &mut r);
        a.empty_cache(ctx(4), &mut r);
        assert_eq!(actions(&r).last(), Some(&"segment_unmap"));
        a.check_invariants().unwrap_or_else(|e| panic!("{e}"));
        let s = a.snapshot();
        assert_eq!(s.len(), 1);
        // x's first page was wholly free; the rest of its page and y's pages stay mapped
        assert_eq!(
            s[0].address,
            r.0[0].addr + (20 << 20),
            "pages wholly free were unmapped"
        );
        assert_eq!(s[0].total_size_bytes, 40 << 20);
        a.free(y, ctx(5), &mut r);
        a.empty_cache(ctx(6), &mut r);
        assert!(a.snapshot().is_empty());
        assert_eq!(a.reserved_bytes(), 0);
        a.check_invariants().unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn private_pools_keep_their_segments() {
        let mut a = Allocator::new(0, &cfg(false, None, 1 << 34), 1 << 32, 0, Rng::new(1, 1));
        let mut r = Rec(Vec::new());
        a.begin_capture((0, 1));
        let x = a.malloc(4 << 20, 0, ctx(1), &mut r).unwrap_or(NIL);
        a.free(x, ctx(2), &mut r);
        a.end_capture();
        let _ = a.malloc(4 << 20, 0, ctx(3), &mut r);
        let s = a.snapshot();
        assert_eq!(
            s.len(),
            2,
            "the default pool does not reuse the private pool's segment"
        );
        assert!(s.iter().any(|g| g.pool_id == (0, 1)));
        a.empty_cache(ctx(4), &mut r);
        assert_eq!(a.snapshot().len(), 2);
        a.release_pool((0, 1));
        a.empty_cache(ctx(5), &mut r);
        assert_eq!(a.snapshot().len(), 1);
        a.check_invariants().unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn max_split_size_keeps_big_blocks_whole() {
        let ms = 64 << 20;
        let mut a = Allocator::new(
            0,
            &cfg(false, Some(ms), 1 << 34),
            1 << 32,
            0,
            Rng::new(1, 1),
        );
        let mut r = Rec(Vec::new());
        let x = a.malloc(100 << 20, 0, ctx(1), &mut r).unwrap_or(NIL);
        a.free(x, ctx(2), &mut r);
        // a small request does not take the oversize block
        let _ = a.malloc(12 << 20, 0, ctx(3), &mut r);
        assert_eq!(a.snapshot().len(), 2);
        // a large request within 20 MiB of it does
        let _ = a.malloc(90 << 20, 0, ctx(4), &mut r);
        assert_eq!(a.snapshot().len(), 2);
        a.check_invariants().unwrap_or_else(|e| panic!("{e}"));
    }
}
