#!/usr/bin/env python3
"""Writes web/assets/example.pickle: the viewer's built-in example snapshot.

A small, made-up training run (not a copy of any real snapshot), produced by a toy caching
allocator so that segments, blocks and the trace agree the way torch writes them:

- 6 "parameters" allocated before recording started: active blocks the trace never saw (ghost
  blocks), plus one warm-up buffer allocated before recording and freed during it (a free
  without its alloc);
- 3 training steps: forward (activations, short-lived temporaries, tiny scalars), backward
  (gradients, activations freed), optimizer step (states created on step 1);
- `external_annotations` ProfilerStep#N regions, an `oom` event, a `snapshot` event,
  `allocator_settings`.

Pickle protocol 4 (what Python 3.8-3.13 writes). Run: python3 web/assets/make_example.py
"""

import os
import pickle
import random

random.seed(20240611)
MiB = 1 << 20
SEG_BYTES = 20 * MiB
ROUND = 512

trace = []
segments = []  # each: {"address", "total_size", "blocks": [[addr, size, requested, state, frames]]}
clock = [1_718_000_000_000_000]
recording = [False]
next_segment_addr = [0x7F3A_0000_0000]


def frames_for(*names):
    out = []
    for i, n in enumerate(names):
        out.append({"filename": "/home/user/project/train.py", "line": 40 + 7 * i, "name": n})
    out.append({"filename": "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", "line": 1736, "name": "_call_impl"})
    out.append({"filename": "Python/ceval.c", "line": 0, "name": "_PyEval_EvalFrameDefault"})
    out.append({"filename": "/home/user/project/train.py", "line": 120, "name": "<module>"})
    return out


def tick(us=None):
    clock[0] += us if us is not None else random.randint(5, 60)
    return clock[0]


def record(action, addr, size, frames):
    if recording[0]:
        trace.append({"action": action, "addr": addr, "size": size, "stream": 0, "time_us": tick(), "frames": frames})


def malloc(requested, frames):
    size = max(ROUND, (requested + ROUND - 1) // ROUND * ROUND)
    for seg in segments:
        for i, b in enumerate(seg["blocks"]):
            if b[3] == "inactive" and b[1] >= size:
                rest = b[1] - size
                seg["blocks"][i] = [b[0], size, requested, "active_allocated", frames]
                if rest:
                    seg["blocks"].insert(i + 1, [b[0] + size, rest, 0, "inactive", []])
                record("alloc", b[0], requested, frames)
                return b[0]
    total = max(SEG_BYTES, (size + 2 * MiB - 1) // (2 * MiB) * (2 * MiB))
    addr = next_segment_addr[0]
    next_segment_addr[0] += total + 64 * MiB
    segments.append({"address": addr, "total_size": total, "frames": frames, "blocks": [[addr, total, 0, "inactive", []]]})
    record("segment_alloc", addr, total, frames)
    return malloc(requested, frames)


def free(addr):
    for seg in segments:
        for i, b in enumerate(seg["blocks"]):
            if b[0] == addr and b[3] == "active_allocated":
                record("free_requested", addr, b[2], b[4])
                record("free_completed", addr, b[2], b[4])
                seg["blocks"][i] = [b[0], b[1], 0, "inactive", []]
                # merge with inactive neighbours
                blocks = seg["blocks"]
                j = 0
                while j + 1 < len(blocks):
                    if blocks[j][3] == "inactive" and blocks[j + 1][3] == "inactive":
                        blocks[j] = [blocks[j][0], blocks[j][1] + blocks[j + 1][1], 0, "inactive", []]
                        del blocks[j + 1]
                    else:
                        j += 1
                return
    raise KeyError(hex(addr))


# Before recording: parameters and a warm-up buffer.
params = [malloc(random.choice([1, 2, 3]) * MiB + random.randint(0, 4096), frames_for("build_model", "Linear.__init__")) for _ in range(6)]
warmup = malloc(5 * MiB, frames_for("warmup"))
recording[0] = True

annotations = []
optimizer_states = []
grads = []
for step in range(3):
    annotations.append({"device": 0, "time_us": tick(1), "name": f"ProfilerStep#{step}", "stage": "START"})
    if step == 0:
        free(warmup)
    acts = []
    for layer in range(6):
        acts.append(malloc(random.randint(2, 5) * MiB, frames_for("forward", f"Block{layer}.forward", "Linear.forward")))
        tmp = malloc(random.randint(1, 3) * MiB, frames_for("forward", f"Block{layer}.forward", "gelu"))
        scalars = [malloc(4, frames_for("forward", f"Block{layer}.forward", "loss_scale")) for _ in range(4)]
        free(tmp)
        for s in scalars[:2]:
            free(s)
        acts.extend(scalars[2:])
    if step == 2:
        trace.append({"action": "oom", "device_free": 734 * MiB, "size": 8 * 1024 * MiB, "stream": 0, "time_us": tick(), "frames": frames_for("forward", "attention", "matmul")})
    for layer in reversed(range(6)):
        if step == 0:
            grads.append(malloc(random.choice([1, 2, 3]) * MiB, frames_for("backward", f"Block{layer}.backward", "AccumulateGrad")))
        tmp = malloc(random.randint(1, 4) * MiB, frames_for("backward", f"Block{layer}.backward", "mm_backward"))
        free(tmp)
    for a in reversed(acts):
        free(a)
    if step == 0:
        optimizer_states = [malloc(random.choice([2, 4, 6]) * MiB, frames_for("optimizer.step", "Adam._init_group")) for _ in range(6)]
    annotations.append({"device": 0, "time_us": tick(1), "name": f"ProfilerStep#{step}", "stage": "END"})

trace.append({"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": tick()})

out_segments = []
for seg in segments:
    blocks = [{"address": b[0], "size": b[1], "requested_size": b[2], "state": b[3], "frames": b[4]} for b in seg["blocks"]]
    allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    out_segments.append({
        "device": 0,
        "address": seg["address"],
        "total_size": seg["total_size"],
        "allocated_size": allocated,
        "active_size": allocated,
        "requested_size": sum(b["requested_size"] for b in blocks),
        "stream": 0,
        "segment_type": "large",
        "segment_pool_id": (0, 0),
        "is_expandable": False,
        "frames": seg["frames"],
        "blocks": blocks,
    })

snapshot = {
    "segments": out_segments,
    "device_traces": [trace],
    "allocator_settings": {
        "PYTORCH_CUDA_ALLOC_CONF": "",
        "max_split_size": -1,
        "garbage_collection_threshold": 0.0,
        "expandable_segments": False,
        "pinned_num_register_threads": 1,
        "release_lock_on_cudamalloc": False,
        "pinned_use_cuda_host_register": False,
        "roundup_power2_divisions": {"1": 0, "2": 0, "4": 0, "8": 0},
    },
    "external_annotations": annotations,
}

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "example.pickle")
with open(path, "wb") as f:
    pickle.dump(snapshot, f, protocol=4)
print(f"wrote {path}: {len(trace)} trace entries, {len(out_segments)} segments, {os.path.getsize(path)} bytes")
