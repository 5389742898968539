#!/usr/bin/env python3
"""Independent reference for what grew between two moments of one device (`memlens diagnose
--between FROM TO`, the timeline's what-grew panel), from the pickle (stdlib only): live bytes
by user frame once entry FROM and once entry TO are applied (diagnose_ref.py's alive set and
user-frame rule), and per frame whose bytes differ {frame, a_bytes, b_bytes, change_bytes =
b - a}, sorted by |change| descending, then frame. The same by full stack (`by_stack`): the
alloc entry's frames innermost first, each `filename:line:name`, with its user frame
({frame, frames, a_bytes, b_bytes, change_bytes}; allocations from before the trace have no
frames), the 20 largest |change| first, ties by frames then frame.

Usage: between_ref.py FILE DEVICE FROM TO
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diagnose_ref  # noqa: E402
import snapshot_pickle  # noqa: E402


TOP_STACKS = 20


def stacks_after(device, segments, trace, event):
    """Live bytes once entry `event` is applied, by (frames, user frame)."""
    at = diagnose_ref.BEFORE if event is None else event
    out = {}
    for born, died, size, entry in diagnose_ref.allocations(device, segments, trace):
        if born <= at < died:
            frames = () if entry is None else tuple(
                diagnose_ref.write_frame(f) for f in entry.get("frames") or [])
            key = (frames, diagnose_ref.user_frame(entry))
            out[key] = out.get(key, 0) + size
    return out


def stack_changes(sa, sb):
    """The TOP_STACKS stacks whose bytes differ between two `stacks_after` readings."""
    out = [
        {"frame": k[1], "frames": list(k[0]), "a_bytes": sa.get(k, 0), "b_bytes": sb.get(k, 0),
         "change_bytes": sb.get(k, 0) - sa.get(k, 0)}
        for k in set(sa) | set(sb)
        if sb.get(k, 0) != sa.get(k, 0)
    ]
    out.sort(key=lambda c: (-abs(c["change_bytes"]), c["frames"], c["frame"]))
    return out[:TOP_STACKS]


def main(path, device, start, end):
    segments, traces = snapshot_pickle.read(path)
    trace = snapshot_pickle.trace_of(traces, device)
    a = diagnose_ref.alive_after(device, segments, trace, start)
    b = diagnose_ref.alive_after(device, segments, trace, end)
    fa = {g["frame"]: g["bytes"] for g in a["top"]}
    fb = {g["frame"]: g["bytes"] for g in b["top"]}
    frames = [
        {"frame": k, "a_bytes": fa.get(k, 0), "b_bytes": fb.get(k, 0),
         "change_bytes": fb.get(k, 0) - fa.get(k, 0)}
        for k in set(fa) | set(fb)
        if fb.get(k, 0) != fa.get(k, 0)
    ]
    frames.sort(key=lambda c: (-abs(c["change_bytes"]), c["frame"]))
    json.dump({"device": device, "from": start, "to": end, "from_bytes": a["allocated_bytes"],
               "to_bytes": b["allocated_bytes"], "by_frame": frames,
               "by_stack": stack_changes(stacks_after(device, segments, trace, start),
                                         stacks_after(device, segments, trace, end))},
              sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__.rstrip().rsplit("\n", 1)[-1])
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
