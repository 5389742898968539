#!/usr/bin/env python3
"""Makes a large snapshot by repeating a real trace until the pickle reaches a target size.

Usage: make_repeated.py SOURCE.pickle TARGET_MB OUT.pickle

Each repetition shifts time_us; entries are shallow copies, so frame lists stay one shared Python
object and the pickle refers to them by memo (BINGET), as torch's dumps do. Until `memlens synth`
exists this is how the decode benchmark gets inputs of hundreds of MB.
"""
import pickle
import sys

src, target_mb, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
with open(src, "rb") as f:
    d = pickle.load(f)
traces = d["device_traces"]
dev = max(range(len(traces)), key=lambda i: len(traces[i]))
t = traces[dev]
one = len(pickle.dumps(t, protocol=4))
reps = max(1, int(target_mb * 1e6 / max(one, 1)))
span = (t[-1].get("time_us", 0) - t[0].get("time_us", 0)) + 1 if t else 1
rep = []
for i in range(reps):
    for e in t:
        e2 = dict(e)
        if "time_us" in e2:
            e2["time_us"] = e["time_us"] + i * span
        rep.append(e2)
traces[dev] = rep
with open(out, "wb") as f:
    pickle.dump(d, f, protocol=4)
print(f"{out}: {reps} repetitions of {len(t)} entries")
