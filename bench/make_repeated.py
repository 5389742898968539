#!/usr/bin/env python3
"""Makes a large snapshot by repeating a real trace until the pickle reaches a target size.

Usage: make_repeated.py [--fresh] SOURCE.pickle TARGET_MB OUT.pickle

Each repetition shifts time_us. By default entries are shallow copies: every repetition shares
the first one's frame lists and strings, so the pickle refers to them by memo (BINGET) and an
entry costs ~75 bytes, denser than any real snapshot (110-510 bytes an entry in
../shared/snapshots): the hardest case for bytes per second.

With --fresh each repetition is a deep copy made by a pickle round trip, so it is written the way
torch writes a trace: fresh entry dicts, a fresh `compile_context` string per entry, and frame
lists and dicts shared within a repetition exactly as in the source (~165 bytes an entry for the
Wedsonlin source, like the source itself).
"""
import pickle
import sys

args = sys.argv[1:]
fresh = "--fresh" in args
args = [a for a in args if a != "--fresh"]
src, target_mb, out = args[0], float(args[1]), args[2]
with open(src, "rb") as f:
    d = pickle.load(f)
traces = d["device_traces"]
dev = max(range(len(traces)), key=lambda i: len(traces[i]))
t = traces[dev]
one = len(pickle.dumps(t, protocol=4))
reps = max(1, int(target_mb * 1e6 / max(one, 1)))
span = (t[-1].get("time_us", 0) - t[0].get("time_us", 0)) + 1 if t else 1
rep = []
blob = pickle.dumps(t, protocol=4) if fresh else None
for i in range(reps):
    for e in pickle.loads(blob) if fresh else t:
        e2 = e if fresh else dict(e)
        if "time_us" in e2:
            e2["time_us"] = e["time_us"] + i * span
        rep.append(e2)
traces[dev] = rep
with open(out, "wb") as f:
    pickle.dump(d, f, protocol=4)
print(f"{out}: {reps} repetitions of {len(t)} entries")
