#!/usr/bin/env python3
"""Independent reference for the Allocator State History's per-state numbers (the viewer's
`data-metric="state_<key>"` elements). Reads a snapshot pickle with Python's own `pickle.load`
(stdlib only, no torch) and replays the device's trace from the final segments the way the
issue defines the numbers; it is written from these definitions, not from the Rust code.

Definitions, for device d and trace entry i (0-based, in the device's trace as stored):
  requested_bytes after i  = baseline + running sum of (alloc size - free_completed size) over
                             entries 0..=i, where baseline = requested size of the final
                             active blocks (active_allocated or active_pending_free)
                             - sum(alloc) + sum(free_completed) over the whole trace
  reserved_bytes after i   = the same for segments: final sum of segment total_size, with
                             segment_alloc/segment_map adding and segment_free/segment_unmap
                             removing
  After the last entry the state is the file's segments, so there also:
  allocated_bytes          sum of size of active_allocated blocks
  inactive_split_bytes     sum of size of inactive blocks in segments holding > 1 block
  largest_free_block_bytes largest inactive block (0 if none)
  peak_event               first entry after which requested_bytes is highest (-1: the
                           baseline is never exceeded)

Prints {"device", "n_events", "peak_event", "events": {"<i>": {"requested_bytes",
"reserved_bytes"}}, "last": {...numbers after the last entry...}}.

Usage: state_ref.py SNAPSHOT.pickle DEVICE [EVENT ...]
"""
import json
import sys

import snapshot_pickle
from snapshot_pickle import requested_size

ACTIVE = ("active_allocated", "active_pending_free")


def live_delta(e):
    if e["action"] == "alloc":
        return e["size"]
    if e["action"] == "free_completed":
        return -e["size"]
    return 0


def reserved_delta(e):
    if e["action"] in ("segment_alloc", "segment_map"):
        return e["size"]
    if e["action"] in ("segment_free", "segment_unmap"):
        return -e["size"]
    return 0


def main(path, device, wanted):
    segments, traces = snapshot_pickle.read(path)
    trace = snapshot_pickle.trace_of(traces, device)
    final = {"requested_bytes": 0, "reserved_bytes": 0, "allocated_bytes": 0,
             "inactive_split_bytes": 0, "largest_free_block_bytes": 0}
    for seg in segments:
        if seg.get("device", 0) != device:
            continue
        blocks = seg.get("blocks", [])
        final["reserved_bytes"] += seg["total_size"]
        for b in blocks:
            state = b.get("state")
            if state in ACTIVE:
                final["requested_bytes"] += requested_size(b)
            if state == "active_allocated":
                final["allocated_bytes"] += b["size"]
            if state == "inactive":
                if len(blocks) > 1:
                    final["inactive_split_bytes"] += b["size"]
                final["largest_free_block_bytes"] = max(final["largest_free_block_bytes"], b["size"])
    live = [live_delta(e) for e in trace]
    res = [reserved_delta(e) for e in trace]
    requested = final["requested_bytes"] - sum(live)
    reserved = final["reserved_bytes"] - sum(res)
    peak, peak_event = requested, -1
    out = {}
    want = set(wanted)
    for i, (dl, dr) in enumerate(zip(live, res)):
        requested += dl
        reserved += dr
        if requested > peak:
            peak, peak_event = requested, i
        if i in want:
            out[str(i)] = {"requested_bytes": requested, "reserved_bytes": reserved}
    json.dump({"device": device, "n_events": len(trace), "peak_event": peak_event,
               "events": out, "last": final}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__.rstrip().rsplit("\n", 1)[-1])
    main(sys.argv[1], int(sys.argv[2]), [int(x) for x in sys.argv[3:]])
