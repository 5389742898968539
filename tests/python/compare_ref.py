#!/usr/bin/env python3
"""Independent reference for `memlens compare A B --json`'s peak comparison, from the two pickles
(stdlib only). Per device of either snapshot (a device missing on one side is empty there):
  a/b.timeline_peak_bytes  stats_ref.py's timeline peak of that side (0 when missing)
  peak_change_bytes        b - a
  by_frame                 every user frame alive at either side's peak (diagnose_ref.py's
                           alive set and user-frame rule), {frame, a_bytes, b_bytes,
                           change_bytes = b - a}, sorted by |change| descending, then frame
  by_stack                 the 20 stacks alive at either peak whose bytes differ, matched by
                           their frames (between_ref.py's stacks and order)

With a device and an entry of each side, the same at those moments instead (the Compare view's
cursor): live bytes once entry EVENT_A of DEVICE_A of A and entry EVENT_B of DEVICE_B of B are
applied, {a_bytes, b_bytes, by_frame (changed frames only), by_stack}.

Usage: compare_ref.py A.pickle B.pickle [DEVICE_A EVENT_A DEVICE_B EVENT_B]
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import between_ref  # noqa: E402
import diagnose_ref  # noqa: E402
import snapshot_pickle  # noqa: E402
import stats_ref  # noqa: E402


def side(device, segments, traces):
    if device not in snapshot_pickle.devices(segments, traces):
        return 0, {}, {}
    trace = snapshot_pickle.trace_of(traces, device)
    stats = stats_ref.device_stats(device, segments, trace)
    peak = diagnose_ref.device_peak(device, segments, trace)
    stacks = between_ref.stacks_after(device, segments, trace, peak["event"])
    return stats["timeline_peak_bytes"], {g["frame"]: g["bytes"] for g in peak["top"]}, stacks


def frame_changes(fa, fb):
    frames = [
        {"frame": k, "a_bytes": fa.get(k, 0), "b_bytes": fb.get(k, 0),
         "change_bytes": fb.get(k, 0) - fa.get(k, 0)}
        for k in set(fa) | set(fb)
    ]
    frames.sort(key=lambda c: (-abs(c["change_bytes"]), c["frame"]))
    return frames


def moment(device, event, segments, traces):
    trace = snapshot_pickle.trace_of(traces, device)
    alive = diagnose_ref.alive_after(device, segments, trace, event)
    return (alive["allocated_bytes"], {g["frame"]: g["bytes"] for g in alive["top"]},
            between_ref.stacks_after(device, segments, trace, event))


def moments(a_path, b_path, da, ea, db, eb):
    ta, fa, sa = moment(da, ea, *snapshot_pickle.read(a_path))
    tb, fb, sb = moment(db, eb, *snapshot_pickle.read(b_path))
    frames = [c for c in frame_changes(fa, fb) if c["change_bytes"] != 0]
    json.dump({"a_bytes": ta, "b_bytes": tb, "by_frame": frames,
               "by_stack": between_ref.stack_changes(sa, sb)}, sys.stdout, indent=1)
    sys.stdout.write("\n")


def main(a_path, b_path):
    a, b = snapshot_pickle.read(a_path), snapshot_pickle.read(b_path)
    out = []
    for d in sorted(set(snapshot_pickle.devices(*a)) | set(snapshot_pickle.devices(*b))):
        pa, fa, sa = side(d, *a)
        pb, fb, sb = side(d, *b)
        frames = frame_changes(fa, fb)
        out.append({"device": d, "a": {"timeline_peak_bytes": pa}, "b": {"timeline_peak_bytes": pb},
                    "peak_change_bytes": pb - pa, "by_frame": frames,
                    "by_stack": between_ref.stack_changes(sa, sb)})
    json.dump({"devices": out}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) == 3:
        main(sys.argv[1], sys.argv[2])
    elif len(sys.argv) == 7:
        moments(sys.argv[1], sys.argv[2], *map(int, sys.argv[3:]))
    else:
        sys.exit(__doc__.rstrip().rsplit("\n", 1)[-1])
