//! Large buffers on transparent huge pages (Linux).
//!
//! Decoding a snapshot fills a few large column arrays (about the file's size in total). With
//! 4 KiB pages the kernel takes one page fault per 4 KiB as they fill: on a 100 MB file that is
//! ~22,000 faults and about 40 % of the decode's CPU time (measured with `perf stat`, see
//! docs/BENCHMARKS.md). This allocator maps every allocation of 1 MiB or more itself and asks
//! the kernel for 2 MiB pages there (`madvise(MADV_HUGEPAGE)`, which works where THP is
//! `madvise` or `always`); everything else goes to the system allocator untouched. It is
//! advice: where the kernel declines, the mapping works as before.
//!
//! Only the first [`HUGE_BUDGET`] bytes of large blocks get the advice. Fresh huge pages are
//! zeroed 2 MiB at a time, ahead of use, from memory the kernel (and, in a VM, the host) has not
//! touched lately: on the shared 2-core VM a 1 GB input spent 1.1–1.7 s of system time in
//! `clear_page_erms` with them and 0.5–0.6 s without (4 KiB pages are recycled warm and zeroed
//! just before they are written), while up to ~200 MB they still save faults and TLB misses.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};

/// The system allocator for small blocks; `mmap` with huge-page advice for large ones.
pub struct HugePageAlloc;

/// Blocks of this size or more (the column arrays) get their own mapping. Each has one VMA, so growing it with
/// `mremap` moves page tables instead of copying bytes (glibc's `mremap` fails with EFAULT
/// once `madvise` has split its mapping, and falls back to copying).
const LARGE: usize = 1 << 20;
const PAGE: usize = 4096;

fn is_large(size: usize, align: usize) -> bool {
    cfg!(target_os = "linux") && size >= LARGE && align <= PAGE
}

/// Bytes of large blocks mapped now. Huge pages are asked for only while this stays within
/// [`HUGE_BUDGET`]: past it, fresh 2 MiB pages cost more than the faults they save (measured
/// on the 2-core VM: rep_1GB sys 1.07 -> 0.51 s without them, rep_200MB 0.08 -> 0.11 s).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
static LARGE_BYTES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const HUGE_BUDGET: usize = 256 << 20;

#[cfg(target_os = "linux")]
mod os {
    use super::{HUGE_BUDGET, LARGE_BYTES, PAGE};
    use std::sync::atomic::Ordering::Relaxed;

    fn map_len(size: usize) -> usize {
        size.next_multiple_of(PAGE)
    }

    pub fn map(size: usize) -> *mut u8 {
        let len = map_len(size);
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                return std::ptr::null_mut();
            }
            // Advice only: where THP is off this fails harmlessly.
            if LARGE_BYTES.fetch_add(len, Relaxed) + len <= HUGE_BUDGET {
                libc::madvise(p, len, libc::MADV_HUGEPAGE);
            }
            p.cast()
        }
    }

    /// SAFETY: `p` came from `map(size)` and is not used afterwards.
    pub unsafe fn unmap(p: *mut u8, size: usize) {
        LARGE_BYTES.fetch_sub(map_len(size), Relaxed);
        unsafe {
            libc::munmap(p.cast(), map_len(size));
        }
    }

    /// SAFETY: `p` came from `map(old)`; on success the old pointer is dead.
    pub unsafe fn remap(p: *mut u8, old: usize, new: usize) -> *mut u8 {
        let q = unsafe { libc::mremap(p.cast(), map_len(old), map_len(new), libc::MREMAP_MAYMOVE) };
        if q == libc::MAP_FAILED {
            return std::ptr::null_mut();
        }
        let (old_len, new_len) = (map_len(old), map_len(new));
        let total = LARGE_BYTES.fetch_add(new_len, Relaxed) + new_len - old_len;
        LARGE_BYTES.fetch_sub(old_len, Relaxed);
        if total > HUGE_BUDGET && new_len > old_len {
            // Over budget: the rest of this block fills with ordinary pages. The whole
            // mapping is advised, so it is not split.
            unsafe {
                libc::madvise(q, new_len, libc::MADV_NOHUGEPAGE);
            }
        }
        q.cast()
    }
}

#[cfg(not(target_os = "linux"))]
mod os {
    pub fn map(_size: usize) -> *mut u8 {
        std::ptr::null_mut()
    }
    pub unsafe fn unmap(_p: *mut u8, _size: usize) {}
    pub unsafe fn remap(_p: *mut u8, _old: usize, _new: usize) -> *mut u8 {
        std::ptr::null_mut()
    }
}

// SAFETY: small blocks go to `System` unchanged; large ones (decided by size and alignment,
// the same on alloc, realloc and dealloc) are page-aligned private mappings, which satisfies any
// alignment up to a page, come zeroed, and are unmapped with the length they were mapped with.
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_large(layout.size(), layout.align()) {
            os::map(layout.size())
        } else {
            unsafe { System.alloc(layout) }
        }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_large(layout.size(), layout.align()) {
            os::map(layout.size())
        } else {
            unsafe { System.alloc_zeroed(layout) }
        }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if is_large(layout.size(), layout.align()) {
            unsafe { os::unmap(ptr, layout.size()) }
        } else {
            unsafe { System.dealloc(ptr, layout) }
        }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old_large = is_large(layout.size(), layout.align());
        let new_large = is_large(new_size, layout.align());
        match (old_large, new_large) {
            (false, false) => unsafe { System.realloc(ptr, layout, new_size) },
            (true, true) => unsafe { os::remap(ptr, layout.size(), new_size) },
            _ => {
                // SAFETY: the caller guarantees `new_size` with this alignment is a valid layout.
                let new_layout =
                    unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
                let q = unsafe { self.alloc(new_layout) };
                if !q.is_null() {
                    unsafe {
                        std::ptr::copy_nonoverlapping(ptr, q, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                q
            }
        }
    }
}
