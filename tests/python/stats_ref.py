#!/usr/bin/env python3
"""Independent reference for `memlens stats --json`: reads a snapshot pickle with Python's own
`pickle.load` (stdlib only, no torch) and prints {"devices": [...]} with the per-device numbers
defined below. It is written from the definitions, not from the Rust code, so that the
conformance test (crates/memlens-cli/tests/conformance.rs) compares two independent readings.

Definitions, per device d (segments are those whose `device` is d, default 0; devices are the
sorted union of segment devices and all `device_traces` indices; a bare-list pickle is
segments only):
  reserved_bytes            sum of segment total_size
  allocated_bytes           sum of block size, state active_allocated
  active_bytes              sum of block size, state active_allocated or active_pending_free
  requested_bytes           sum of requested size of those active blocks (torch 2.0 blocks
                            without requested_size: history[0].real_size, else size)
  inactive_split_bytes      sum of size of inactive blocks in segments holding > 1 block
  largest_free_block_bytes  largest inactive block (0 if none)
  timeline_baseline_bytes   requested_bytes - sum(alloc) + sum(free_completed)
  timeline_peak_bytes       max(baseline, baseline + running sum(alloc - free_completed))
  peak_reserved_bytes       the same for reserved_bytes with segment_alloc/segment_map
                            adding and segment_free/segment_unmap removing

Usage: stats_ref.py SNAPSHOT.pickle
"""
import json
import sys

import snapshot_pickle
from snapshot_pickle import requested_size

ACTIVE = ("active_allocated", "active_pending_free")
SEG_ADD = ("segment_alloc", "segment_map")
SEG_SUB = ("segment_free", "segment_unmap")


def peak_of(baseline, deltas):
    cur = peak = baseline
    for delta in deltas:
        cur += delta
        peak = max(peak, cur)
    return peak


def device_stats(device, segments, trace):
    st = {
        "device": device,
        "segments": 0,
        "blocks": 0,
        "trace_entries": len(trace),
        "actions": {},
        "reserved_bytes": 0,
        "allocated_bytes": 0,
        "active_bytes": 0,
        "requested_bytes": 0,
        "inactive_split_bytes": 0,
        "largest_free_block_bytes": 0,
    }
    for seg in segments:
        if seg.get("device", 0) != device:
            continue
        blocks = seg.get("blocks", [])
        st["segments"] += 1
        st["blocks"] += len(blocks)
        st["reserved_bytes"] += seg["total_size"]
        for b in blocks:
            state = b.get("state")
            if state == "active_allocated":
                st["allocated_bytes"] += b["size"]
            if state in ACTIVE:
                st["active_bytes"] += b["size"]
                st["requested_bytes"] += requested_size(b)
            if state == "inactive":
                if len(blocks) > 1:
                    st["inactive_split_bytes"] += b["size"]
                st["largest_free_block_bytes"] = max(st["largest_free_block_bytes"], b["size"])

    for e in trace:
        st["actions"][e["action"]] = st["actions"].get(e["action"], 0) + 1

    def live_delta(e):
        if e["action"] == "alloc":
            return e["size"]
        if e["action"] == "free_completed":
            return -e["size"]
        return 0

    def reserved_delta(e):
        if e["action"] in SEG_ADD:
            return e["size"]
        if e["action"] in SEG_SUB:
            return -e["size"]
        return 0

    live = [live_delta(e) for e in trace]
    reserved = [reserved_delta(e) for e in trace]
    baseline = st["requested_bytes"] - sum(live)
    st["timeline_baseline_bytes"] = baseline
    st["timeline_peak_bytes"] = peak_of(baseline, live)
    st["peak_reserved_bytes"] = peak_of(st["reserved_bytes"] - sum(reserved), reserved)
    return st


def main(path):
    segments, traces = snapshot_pickle.read(path)
    out = []
    for d in snapshot_pickle.devices(segments, traces):
        out.append(device_stats(d, segments, snapshot_pickle.trace_of(traces, d)))
    json.dump({"devices": out}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.rstrip().rsplit("\n", 1)[-1])
    main(sys.argv[1])
