#!/usr/bin/env python3
"""Statistical shape of snapshot pickles, one row per file, so that `memlens synth` output can be
compared with real `torch.cuda.memory._dump_snapshot` files (docs/SYNTH.md records the table).

Columns:
  MB         file size in MiB
  entries    trace entries over all devices
  B/entry    file bytes per trace entry
  fr/entry   mean frames per trace entry (entries without a `frames` key count as 0)
  stacks     distinct stacks among trace entries (by content: (name, filename, line) sequences)
  frames     distinct frames (by content) among trace entries
  lists/e    distinct frames-list objects per trace entry (memo sharing: 0.5 means every list
             is shared by two entries, e.g. free_requested and free_completed)
  action mix percent of entries per action (alloc, free_requested, free_completed,
             segment_alloc, segment_free, map = segment_map+segment_unmap, oom)
  segs       segments: small / large / expandable / in a private pool
  blk/seg    mean blocks per segment
  inact%     inactive blocks in percent of all blocks

Usage: shape.py FILE_OR_DIR... (directories: every *.pickle inside, sorted)
Prints a Markdown table. Python stdlib only.
"""
import os
import pickle
import sys

ACTIONS = [
    ("alloc", ("alloc",)),
    ("f_req", ("free_requested",)),
    ("f_cmp", ("free_completed",)),
    ("s_alloc", ("segment_alloc",)),
    ("s_free", ("segment_free",)),
    ("map", ("segment_map", "segment_unmap")),
    ("oom", ("oom",)),
]


def frame_key(fr):
    return (fr.get("name"), fr.get("filename"), fr.get("line"))


def shape(path):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        data = pickle.load(f)
    if isinstance(data, list):
        segments, traces = data, []
    else:
        segments = data.get("segments", [])
        traces = data.get("device_traces", [])
    entries = [e for t in traces for e in t]
    n = len(entries)
    nframes = 0
    stacks = set()
    frames = set()
    lists = set()
    counts = {}
    for e in entries:
        counts[e["action"]] = counts.get(e["action"], 0) + 1
        fl = e.get("frames")
        if fl is None:
            continue
        nframes += len(fl)
        if id(fl) not in lists:
            lists.add(id(fl))
            keys = tuple(frame_key(fr) for fr in fl)
            stacks.add(keys)
            frames.update(keys)
    small = sum(1 for s in segments if s.get("segment_type") == "small")
    large = sum(1 for s in segments if s.get("segment_type") == "large")
    expandable = sum(1 for s in segments if s.get("is_expandable"))
    private = sum(1 for s in segments if tuple(s.get("segment_pool_id", (0, 0))) != (0, 0))
    blocks = [b for s in segments for b in s.get("blocks", [])]
    inactive = sum(1 for b in blocks if b.get("state") == "inactive")
    row = {
        "file": os.path.basename(path),
        "MB": f"{size / 2**20:.2f}",
        "entries": str(n),
        "B/entry": f"{size / n:.0f}" if n else "-",
        "fr/entry": f"{nframes / n:.1f}" if n else "-",
        "stacks": str(len(stacks)),
        "frames": str(len(frames)),
        "lists/e": f"{len(lists) / n:.2f}" if n else "-",
    }
    mix = []
    for label, names in ACTIONS:
        c = sum(counts.get(a, 0) for a in names)
        if c:
            mix.append(f"{label} {100 * c / n:.0f}")
    row["action mix %"] = ", ".join(mix) if mix else "-"
    row["segs s/l/x/p"] = f"{small}/{large}/{expandable}/{private}"
    row["blk/seg"] = f"{len(blocks) / len(segments):.1f}" if segments else "-"
    row["inact%"] = f"{100 * inactive / len(blocks):.0f}" if blocks else "-"
    return row


def main(args):
    if not args:
        sys.exit(__doc__.rstrip().rsplit("\n", 2)[-2])
    paths = []
    for a in args:
        if os.path.isdir(a):
            paths.extend(sorted(os.path.join(a, p) for p in os.listdir(a) if p.endswith(".pickle")))
        else:
            paths.append(a)
    rows = [shape(p) for p in paths]
    cols = list(rows[0].keys()) if rows else []
    print("| " + " | ".join(cols) + " |")
    print("|" + "|".join("---" for _ in cols) + "|")
    for r in rows:
        print("| " + " | ".join(r[c] for c in cols) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
