#!/usr/bin/env python3
"""Independent check of a snapshot written by `memlens synth`, with Python's own pickle (stdlib
only). It reads the file as torch's viewer would and checks what any real dump satisfies:

  * top-level keys in torch's order; every segment's blocks tile it exactly; segment and block
    sizes follow the caching allocator's rules (512-byte blocks, 2 MiB small segments, large
    segments of 20 MiB or 2 MiB-rounded >= 10 MiB, expandable runs in whole pages);
  * per device, time_us never decreases; frames are {name, filename, line} dicts;
  * replaying each device's trace backwards from the final segments never contradicts itself
    (an alloc undone must be live at that address with that size, a free_completed undone must
    not overlap a live allocation, a segment_alloc undone must exist and be empty, allocations
    lie inside a segment) and, with --complete (no ring-buffer truncation), ends at an empty
    device: nothing live, nothing reserved;
  * memo sharing as torch's py_symbolize produces it: a live block and its alloc entry share one
    frames list object; a free_requested and its immediate free_completed share one (a delayed
    free_completed shares the list of the malloc that completed it).
  * external_annotations are time-ordered START/END pairs per (device, name).

Usage: check_snapshot.py FILE [--complete]   (prints a one-line summary; exit 1 on a failure)
"""
import bisect
import pickle
import sys

MiB = 1 << 20
KEYS = ["segments", "device_traces", "allocator_settings", "external_annotations"]


class Fail(Exception):
    pass


def need(cond, msg):
    if not cond:
        raise Fail(msg)


def round512(n):
    return max(512, (n + 511) // 512 * 512)


class Intervals:
    """Disjoint [start, end) ranges keyed by start."""

    def __init__(self):
        self.starts = []
        self.ends = {}

    def add(self, start, size, what):
        i = bisect.bisect_left(self.starts, start)
        if i > 0:
            p = self.starts[i - 1]
            need(self.ends[p] <= start, f"{what} at {start:#x} overlaps one at {p:#x}")
        if i < len(self.starts):
            need(start + size <= self.starts[i], f"{what} at {start:#x} overlaps one at {self.starts[i]:#x}")
        self.starts.insert(i, start)
        self.ends[start] = start + size

    def remove(self, start, size, what):
        need(self.ends.get(start) == start + size, f"{what} at {start:#x} size {size} not present")
        self.starts.remove(start)
        del self.ends[start]

    def containing(self, addr, size):
        i = bisect.bisect_right(self.starts, addr) - 1
        return i >= 0 and self.ends[self.starts[i]] >= addr + size

    def any_within(self, start, size):
        i = bisect.bisect_left(self.starts, start)
        return i < len(self.starts) and self.starts[i] < start + size

    def __len__(self):
        return len(self.starts)


class Mapped:
    """Mapped byte ranges of expandable segments (merged)."""

    def __init__(self):
        self.iv = Intervals()

    def add(self, start, size):
        end = start + size
        i = bisect.bisect_left(self.iv.starts, start)
        need(not (i > 0 and self.iv.ends[self.iv.starts[i - 1]] > start), f"segment_unmap undone over mapped memory at {start:#x}")
        need(not (i < len(self.iv.starts) and self.iv.starts[i] < end), f"segment_unmap undone over mapped memory at {start:#x}")
        if i > 0 and self.iv.ends[self.iv.starts[i - 1]] == start:
            p = self.iv.starts[i - 1]
            start = p
            self.iv.remove(p, self.iv.ends[p] - p, "run")
        if end in self.iv.ends:
            e2 = self.iv.ends[end]
            self.iv.remove(end, e2 - end, "run")
            end = e2
        self.iv.add(start, end - start, "mapped run")

    def remove(self, start, size):
        i = bisect.bisect_right(self.iv.starts, start) - 1
        need(i >= 0, f"segment_map undone outside mapped memory at {start:#x}")
        s = self.iv.starts[i]
        e = self.iv.ends[s]
        need(e >= start + size, f"segment_map undone outside mapped memory at {start:#x}")
        self.iv.remove(s, e - s, "run")
        if s < start:
            self.iv.add(s, start - s, "run")
        if start + size < e:
            self.iv.add(start + size, e - start - size, "run")

    def containing(self, addr, size):
        return self.iv.containing(addr, size)


def check_segments(data, settings):
    expandable = settings.get("expandable_segments", False)
    for seg in data["segments"]:
        a, total = seg["address"], seg["total_size"]
        blocks = seg["blocks"]
        need(blocks, f"segment {a:#x} has no blocks")
        need(sum(b["size"] for b in blocks) == total, f"segment {a:#x}: blocks do not sum to total_size")
        cur = a
        alloc = active = req = 0
        for b in blocks:
            need(b["address"] == cur, f"segment {a:#x}: block at {b['address']:#x}, expected {cur:#x}")
            need(b["size"] % 512 == 0, f"block {cur:#x}: size {b['size']} not a multiple of 512")
            st = b["state"]
            need(st in ("active_allocated", "active_pending_free", "inactive"), f"block state {st}")
            if st == "active_allocated":
                alloc += b["size"]
            if st != "inactive":
                active += b["size"]
                req += b["requested_size"]
                need(round512(b["requested_size"]) <= b["size"], f"block {cur:#x}: requested > size")
                need(b["frames"], f"active block {cur:#x} without frames")
            else:
                need(b["frames"] == [], f"inactive block {cur:#x} with frames")
            cur += b["size"]
        need((alloc, active, req) == (seg["allocated_size"], seg["active_size"], seg["requested_size"]),
             f"segment {a:#x}: allocated/active/requested sizes disagree with its blocks")
        small = seg["segment_type"] == "small"
        if seg["is_expandable"]:
            need(expandable, "expandable segment without expandable_segments")
            need(total % (2 * MiB if small else 20 * MiB) == 0, f"expandable run {a:#x} not whole pages")
        elif small:
            need(total == 2 * MiB, f"small segment {a:#x} of {total} bytes")
        else:
            need(total % (2 * MiB) == 0 and total >= 10 * MiB, f"large segment {a:#x} of {total} bytes")
        if len(blocks) > 1:
            need(seg["frames"] == [], f"split segment {a:#x} reports frames")


def replay(dev, trace, segments, complete):
    live = {}  # addr -> [requested size, state, frames]
    sizes = Intervals()
    segs = Intervals()
    mapped = Mapped()
    for seg in segments:
        if seg["is_expandable"]:
            mapped.add(seg["address"], seg["total_size"])
        else:
            segs.add(seg["address"], seg["total_size"], "segment")
        for b in seg["blocks"]:
            if b["state"] != "inactive":
                state = "alloc" if b["state"] == "active_allocated" else "pending"
                live[b["address"]] = [b["requested_size"], state, b["frames"]]
                sizes.add(b["address"], round512(b["requested_size"]), "live block")
    shared_alloc = 0
    prev_time = None
    for i in range(len(trace) - 1, -1, -1):
        e = trace[i]
        act = e["action"]
        t = e["time_us"]
        need(prev_time is None or t <= prev_time, f"device {dev}: time_us decreases at entry {i}")
        prev_time = t
        for fr in e["frames"]:
            need(set(fr) == {"name", "filename", "line"}, f"device {dev} entry {i}: frame keys {sorted(fr)}")
        if act == "oom":
            need("device_free" in e and "addr" not in e, "oom entry without device_free")
            continue
        addr, size = e["addr"], e["size"]
        where = f"device {dev} entry {i} ({act} {addr:#x} {size})"
        if act == "alloc":
            blk = live.get(addr)
            need(blk is not None and blk[1] == "alloc" and blk[0] == size, f"{where}: not live as allocated")
            need(segs.containing(addr, round512(size)) or mapped.containing(addr, round512(size)), f"{where}: outside every segment")
            if blk[2] is not None:
                need(blk[2] is e["frames"], f"{where}: live block does not share its alloc frames list")
                shared_alloc += 1
            del live[addr]
            sizes.remove(addr, round512(size), "live block")
        elif act == "free_requested":
            blk = live.get(addr)
            need(blk is not None and blk[1] == "pending" and blk[0] == size, f"{where}: not pending")
            blk[1] = "alloc"
            blk[2] = None
        elif act == "free_completed":
            need(addr not in live, f"{where}: completed free of a live address")
            sizes.add(addr, round512(size), f"{where}: freed block")
            live[addr] = [size, "pending", None]
            nxt = trace[i - 1] if i > 0 else None
            after = trace[i + 1] if i + 1 < len(trace) else None
            if nxt is not None and nxt["action"] == "free_requested" and nxt["addr"] == addr:
                # an immediate free shares the free's context; a delayed one (record_stream) is
                # completed by the next malloc and shares that malloc's context
                delayed = after is not None and after["frames"] is e["frames"]
                need(nxt["frames"] is e["frames"] or delayed, f"{where}: free_completed has its own frames list")
        elif act == "segment_alloc":
            segs.remove(addr, size, f"{where}: segment")
            need(not sizes.any_within(addr, size), f"{where}: segment still holds live blocks")
        elif act == "segment_free":
            segs.add(addr, size, f"{where}: segment")
        elif act == "segment_map":
            mapped.remove(addr, size)
            need(not sizes.any_within(addr, size), f"{where}: mapped range still holds live blocks")
        elif act == "segment_unmap":
            mapped.add(addr, size)
        else:
            raise Fail(f"{where}: unknown action")
    if complete:
        need(not live, f"device {dev}: {len(live)} allocations live before the first entry of a complete trace")
        need(len(segs) == 0 and len(mapped.iv) == 0, f"device {dev}: memory reserved before the first entry of a complete trace")
    return shared_alloc


def check_annotations(anns):
    open_ = {}
    prev = None
    for a in anns:
        need(list(a) == ["stage", "name", "device", "time_us"], f"annotation keys {list(a)}")
        need(prev is None or a["time_us"] >= prev, "external_annotations out of time order")
        prev = a["time_us"]
        key = (a["device"], a["name"])
        if a["stage"] == "START":
            need(key not in open_, f"{key} started twice")
            open_[key] = a["time_us"]
        else:
            need(open_.pop(key, None) is not None, f"{key} ended without a start")


def main(argv):
    path = argv[0]
    complete = "--complete" in argv[1:]
    with open(path, "rb") as f:
        data = pickle.load(f)
    need(list(data) == KEYS, f"top-level keys {list(data)}")
    check_segments(data, data["allocator_settings"])
    shared = 0
    for dev, trace in enumerate(data["device_traces"]):
        segs = [s for s in data["segments"] if s["device"] == dev]
        shared += replay(dev, trace, segs, complete)
    check_annotations(data["external_annotations"])
    n = sum(len(t) for t in data["device_traces"])
    print(f"ok: {len(data['segments'])} segments, {n} entries, {len(data['external_annotations'])} annotations, {shared} live blocks share their alloc frames")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__.rstrip().rsplit("\n", 1)[-1])
    try:
        main(sys.argv[1:])
    except Fail as e:
        print(f"FAIL: {e}")
        sys.exit(1)
