#!/usr/bin/env python3
"""Independent path of an allocation through the live-memory flamegraph (stdlib only).

    stack_path.py FILE DEVICE EVENT

Reads the snapshot with Python's own pickle, takes the device's trace entry EVENT (an `alloc`),
keeps the frames upstream's `_frame_filter` shows (search_count.py's `shown`), writes each as
`basename:line:name` (`;` as `,`, line breaks as spaces) and prints them root first as a JSON
list: the cells the Diagnosis view's icicle should outline for that allocation's band
(`["(no stack)"]` when no frame is left).
"""
import json
import os
import pickle
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from search_count import shown  # noqa: E402


def label(f):
    base = f.get("filename", "").replace("\\", "/").rsplit("/", 1)[-1]
    text = f"{base}:{f.get('line', 0)}:{f.get('name', '')}"
    return text.replace(";", ",").replace("\n", " ").replace("\r", " ")


def main():
    path, device, event = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with open(path, "rb") as fh:
        snap = pickle.load(fh)
    entry = snap["device_traces"][device][event]
    if entry.get("action") != "alloc":
        sys.exit(f"entry {event} of device {device} is {entry.get('action')!r}, not an alloc")
    frames = [label(f) for f in entry.get("frames") or [] if shown(f)]
    print(json.dumps(list(reversed(frames)) or ["(no stack)"]))


if __name__ == "__main__":
    main()
