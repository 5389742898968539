#!/usr/bin/env python3
"""Independent reading of a device's capacity from its trace's `oom` entries (stdlib only).

    capacity_ref.py FILE DEVICE

Reads the snapshot with Python's own pickle, takes the device's reserved bytes at the end (the
sum of its segments' `total_size`), walks the trace backwards undoing `segment_alloc`/`segment_map`
(subtract) and `segment_free`/`segment_unmap` (add) to know what was reserved at each `oom`, and
prints the largest `device_free + reserved` over the `oom` entries (nothing if there is none).
"""
import pickle
import sys

path, device = sys.argv[1], int(sys.argv[2])
with open(path, "rb") as f:
    snap = pickle.load(f)
reserved = sum(s["total_size"] for s in snap["segments"] if s.get("device", 0) == device)
trace = snap["device_traces"][device]
best = None
for e in reversed(trace):
    a = e["action"]
    if a == "oom" and "device_free" in e:
        cap = e["device_free"] + reserved
        best = cap if best is None else max(best, cap)
    elif a in ("segment_alloc", "segment_map"):
        reserved -= e["size"]
    elif a in ("segment_free", "segment_unmap"):
        reserved += e["size"]
if best is not None:
    print(best)
