#!/usr/bin/env python3
"""Independent count of the allocations a viewer search should match (stdlib only).

    search_count.py FILE DEVICE ADDRESS FRAME      (ADDRESS or FRAME may be '')

Reads the snapshot with Python's own pickle (snapshots are plain data), replays the device's
trace the way upstream's Active Memory Timeline does (alloc paired with free_completed by
address; a free with no alloc is an allocation from before the trace, with the free's stack or
its free_requested's; active blocks the trace never saw are ghosts), labels each allocation
`<hex addr>_<n-th use of the address>`, and counts those whose label contains ADDRESS and whose
shown frames (upstream's filter) contain FRAME as `file:line:name`, case-insensitively.
"""
import pickle
import sys

HIDDEN_NAMES = ["unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
                "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_"]
HIDDEN_FILES = ["core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
                "Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c",
                "cpython/abstract.h"]


def shown(f):
    name, file = f.get("name", ""), f.get("filename", "")
    return not any(h in name for h in HIDDEN_NAMES) and not any(h in file for h in HIDDEN_FILES)


def frames_match(frames, needle):
    if not needle:
        return True
    return any(needle in f"{f.get('filename', '')}:{f.get('line', 0)}:{f.get('name', '')}".lower()
               for f in frames or [] if shown(f))


def main():
    path, device, address, frame = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    with open(path, "rb") as fh:
        snap = pickle.load(fh)
    a = address.strip().lower()
    for p in ("b'", "s'", "0x"):
        if a.startswith(p):
            a = a[len(p):]
    a = a.rstrip("'")
    frame = frame.strip().lower()
    traces = snap.get("device_traces", []) if isinstance(snap, dict) else []
    trace = traces[device] if device < len(traces) else []
    allocs = []  # (addr, frames)
    open_ = {}
    lone_requests = {}
    for e in trace:
        act, addr = e.get("action"), e.get("addr", 0)
        if act == "alloc":
            open_[addr] = len(allocs)
            allocs.append((addr, e.get("frames", [])))
            lone_requests.pop(addr, None)
        elif act == "free_requested":
            if addr not in open_:
                lone_requests[addr] = e.get("frames", [])
        elif act == "free_completed":
            if addr in open_:
                del open_[addr]
            else:
                fr = e.get("frames", [])
                req = lone_requests.pop(addr, None)
                if not fr and req is not None:
                    fr = req
                allocs.append((addr, fr))
    segs = snap.get("segments", []) if isinstance(snap, dict) else snap
    for s in segs:
        if s.get("device", 0) != device:
            continue
        for b in s.get("blocks", []):
            baddr = b.get("address", b.get("addr"))
            if b.get("state") in ("active_allocated", "active_pending_free") and baddr not in open_:
                allocs.append((baddr, b.get("frames", [])))
    uses = {}
    n = 0
    for addr, fr in allocs:
        v = uses.get(addr, 0)
        uses[addr] = v + 1
        label = f"{addr:x}_{v}"
        if a and a not in label:
            continue
        if not frames_match(fr, frame):
            continue
        n += 1
    print(n)


if __name__ == "__main__":
    main()
