#!/usr/bin/env python3
"""Independent reference for `memlens diagnose --json`: reads a snapshot pickle with Python's
own `pickle.load` (stdlib only, no torch) and prints, per device, what was alive at the peak
of the active timeline and which user frames allocated it. Written from the definitions
below, not from the Rust code, so that crates/memlens-cli/tests/diagnose_conformance.rs
compares two independent readings. Devices, requested size and the timeline are
stats_ref.py's (imported from this folder).

Definitions, per device d (trace = device_traces[d], or none):
  peak event      the 0-based index in the trace of the first entry where baseline + running
                  sum(alloc size - free_completed size) reaches its maximum (stats_ref's
                  timeline peak); null when that maximum is the baseline itself (never
                  exceeded) or there is no trace
  allocations     walk the trace in order:
                    alloc           opens an allocation at its addr (size, frames of the
                                    entry); one already open at that addr is no longer
                                    closable and stays alive to the end
                    free_completed  closes the open allocation at its addr (it dies at that
                                    event); with none open there, it is an allocation made
                                    before the trace, alive from before event 0 until then
                    anything else   ignored
                  then every active block (active_allocated, active_pending_free) of d's final
                  segments whose address is not open after the walk is an allocation alive
                  throughout (size: its requested size)
  alive at peak   born at or before the peak event (before-trace ones: before event 0) and
                  not freed at or before it; with peak null, alive before event 0
  user frame      before-trace allocations (no alloc entry): "(allocated before the trace)";
                  else over the alloc entry's frames innermost first (frames[0] innermost),
                  the first whose filename ends with `.py` and has no path component (split
                  on `/` and `\\`) equal to `torch`, as `filename:line:name`; if none
                  qualifies, the first frame upstream's `_frame_filter` shows (torch's
                  _memory_viz.py: omitted function and filename substrings), else frames[0],
                  written the same way; no frames: "(no stack)"
  top             alive allocations grouped by user frame: {frame, bytes, allocations}, all
                  groups, bytes descending then frame ascending; they sum to allocated_bytes

Block addresses: a block's `address`, else (torch 2.0 blocks) the segment's address plus the
sizes of the blocks before it, as torch's own _memory_viz computes it.

Prints {"devices": [{"device": D, "peak": {"event": E|null, "allocated_bytes": N,
"allocations": K, "top": [...]}}]}.

Usage: diagnose_ref.py SNAPSHOT.pickle
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import snapshot_pickle  # noqa: E402
import stats_ref  # noqa: E402

BEFORE_TRACE = "(allocated before the trace)"
NO_STACK = "(no stack)"
# Born before event 0 / never freed.
BEFORE = -1
NEVER = float("inf")


def write_frame(f):
    return "%s:%s:%s" % (f.get("filename", ""), f.get("line", ""), f.get("name", ""))


def is_user(f):
    filename = f.get("filename", "")
    if not isinstance(filename, str) or not filename.endswith(".py"):
        return False
    return "torch" not in re.split(r"[/\\]", filename)


OMIT_FUNCTIONS = ("unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
                  "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_")
OMIT_FILENAMES = ("core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
                  "Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c",
                  "cpython/abstract.h")


def frame_shown(f):
    """torch's _memory_viz `_frame_filter`, as documented in reference-memory_viz.md."""
    name, filename = f.get("name", ""), f.get("filename", "")
    return not any(o in name for o in OMIT_FUNCTIONS) and not any(
        o in filename for o in OMIT_FILENAMES)


def user_frame(entry):
    if entry is None:
        return BEFORE_TRACE
    frames = entry.get("frames") or []
    if not frames:
        return NO_STACK
    for f in frames:
        if is_user(f):
            return write_frame(f)
    for f in frames:
        if frame_shown(f):
            return write_frame(f)
    return write_frame(frames[0])


def peak_event(baseline, trace):
    """Index of the first entry reaching the timeline's maximum; None if never above baseline."""
    cur = best = baseline
    event = None
    for i, e in enumerate(trace):
        if e["action"] == "alloc":
            cur += e["size"]
        elif e["action"] == "free_completed":
            cur -= e["size"]
        if cur > best:
            best, event = cur, i
    return event


def active_blocks(device, segments):
    """(address, requested size) of the device's active blocks in the final segments."""
    for seg in segments:
        if seg.get("device", 0) != device:
            continue
        addr = seg.get("address", 0)
        for b in seg.get("blocks", []):
            here = b.get("address", addr)
            if b.get("state") in stats_ref.ACTIVE:
                yield here, snapshot_pickle.requested_size(b)
            addr = here + b["size"]


def allocations(device, segments, trace):
    """Every allocation as (born, died, size, alloc entry or None)."""
    done = []
    open_at = {}  # addr -> [born, size, entry]
    for i, e in enumerate(trace):
        action = e.get("action")
        if action == "alloc":
            prev = open_at.get(e["addr"])
            if prev is not None:
                done.append((prev[0], NEVER, prev[1], prev[2]))
            open_at[e["addr"]] = [i, e["size"], e]
        elif action == "free_completed":
            prev = open_at.pop(e["addr"], None)
            if prev is None:
                done.append((BEFORE, i, e["size"], None))
            else:
                done.append((prev[0], i, prev[1], prev[2]))
    for born, size, entry in open_at.values():
        done.append((born, NEVER, size, entry))
    for addr, size in active_blocks(device, segments):
        if addr not in open_at:
            done.append((BEFORE, NEVER, size, None))
    return done


def device_peak(device, segments, trace):
    baseline = stats_ref.device_stats(device, segments, trace)["timeline_baseline_bytes"]
    event = peak_event(baseline, trace)
    return alive_after(device, segments, trace, event)


def alive_after(device, segments, trace, event):
    """What is alive once trace entry `event` is applied (None: before the first), by user
    frame."""
    at = BEFORE if event is None else event
    groups = {}
    total = count = 0
    for born, died, size, entry in allocations(device, segments, trace):
        if born <= at < died:
            frame = user_frame(entry)
            g = groups.setdefault(frame, [0, 0])
            g[0] += size
            g[1] += 1
            total += size
            count += 1
    top = [
        {"frame": frame, "bytes": b, "allocations": c}
        for frame, (b, c) in sorted(groups.items(), key=lambda kv: (-kv[1][0], kv[0]))
    ]
    return {"event": event, "allocated_bytes": total, "allocations": count, "top": top}


def main(path):
    segments, traces = snapshot_pickle.read(path)
    out = []
    for d in snapshot_pickle.devices(segments, traces):
        peak = device_peak(d, segments, snapshot_pickle.trace_of(traces, d))
        out.append({"device": d, "peak": peak})
    json.dump({"devices": out}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.rstrip().rsplit("\n", 1)[-1])
    main(sys.argv[1])
