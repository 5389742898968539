#!/usr/bin/env python3
"""Independent check of the fixture builder's output with Python's own pickle and json
modules (stdlib only). Called by crates/memlens-cli/tests/fixtures_python.rs with the built
fixture files and the golden stats directory.

For every file:
  * it loads: a pickle with pickle.loads, a JSON document with json.loads, a _memory_viz HTML
    page by taking the base64 out of `const local_files = [...]` (its length must be a multiple
    of 4 with no `=`, as upstream's NUL padding makes it) and unpickling that;
  * the per-device stats that stats_ref.py computes from the loaded data equal the golden file
    tests/golden/stats/<name>.json (devices and every key stats_ref.py defines);
  * for pickles (bare or inside HTML): `pickle.dumps(pickle.loads(b), protocol=P)` writes the
    same opcodes as the builder, i.e. what CPython writes for the same objects with the same
    sharing (strings, frame dicts and frame lists written once and fetched from the memo).
    One known difference is tolerated and counted: CPython writes a container holding exactly
    one item as `item APPEND` / `key value SETITEM`, the streaming PickleWriter as
    `MARK item APPENDS` (it cannot know the count in advance); both sides are normalised to
    the single-item form before comparing, and FRAME lengths are ignored;
  * identical frame lists, and identical frames, are one object each (shared by memo), as
    torch's py_symbolize makes them.

Usage: fixtures_check.py GOLDEN_DIR FILE...   (prints one line per file; exit 1 on any failure)
"""
import base64
import json
import os
import pickle
import pickletools
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import snapshot_pickle  # noqa: E402
import stats_ref  # noqa: E402

KEYS = [
    "device", "segments", "blocks", "trace_entries", "actions", "reserved_bytes",
    "allocated_bytes", "active_bytes", "requested_bytes", "inactive_split_bytes",
    "largest_free_block_bytes", "timeline_baseline_bytes", "timeline_peak_bytes",
    "peak_reserved_bytes",
]


def load(path):
    """Returns (data, pickle bytes or None)."""
    raw = open(path, "rb").read()
    if path.endswith(".json"):
        return json.loads(raw.decode("utf-8")), None
    if path.endswith(".html"):
        text = raw.decode("utf-8")
        m = re.search(r'const local_files = (\[.*?\])\n', text)
        if not m:
            raise ValueError("no `const local_files = [...]` line")
        files = json.loads(m.group(1))
        b64 = files[0]["base64"]
        if files[0]["name"] != "snapshot.pickle" or "=" in b64 or len(b64) % 4:
            raise ValueError("local_files entry is not upstream's NUL-padded snapshot.pickle")
        padded = base64.b64decode(b64)
        data = pickle.loads(padded)
        body = padded.rstrip(b"\x00")
        if not (1 <= len(padded) - len(body) <= 3):
            raise ValueError("expected 1..3 NUL padding bytes (3 - len % 3)")
        return data, body
    return pickle.loads(raw), raw


def stats(data):
    segments, traces = snapshot_pickle.split(data)
    return [
        stats_ref.device_stats(d, segments, snapshot_pickle.trace_of(traces, d))
        for d in snapshot_pickle.devices(segments, traces)
    ]


def frame_lists(data):
    segments = data if isinstance(data, list) else data.get("segments", [])
    for seg in segments:
        yield seg.get("frames")
        for b in seg.get("blocks", []):
            yield b.get("frames")
            for h in b.get("history", []):
                yield h.get("frames")
    if isinstance(data, dict):
        for trace in data.get("device_traces", []):
            for e in trace:
                yield e.get("frames")


def check(golden_dir, path):
    name = os.path.splitext(os.path.basename(path))[0]
    data, body = load(path)
    problems, notes = [], []
    want = json.load(open(os.path.join(golden_dir, name + ".json")))["devices"]
    got = stats(data)
    if [d["device"] for d in want] != [d["device"] for d in got]:
        problems.append(f"devices {[d['device'] for d in got]} != golden {[d['device'] for d in want]}")
    for w, g in zip(want, got):
        for k in KEYS:
            if w.get(k) != g.get(k):
                problems.append(f"device {g['device']} {k}: python {g.get(k)} != golden {w.get(k)}")
    if body is not None:
        protocol = body[1]
        again = pickle.dumps(pickle.loads(body), protocol=protocol)
        if again != body:
            ours, single = canonical_ops(body)
            theirs, _ = canonical_ops(again)
            if ours != theirs:
                at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
                problems.append(f"pickle.dumps(protocol={protocol}) writes other opcodes than the builder: "
                                f"op {at}: builder {ours[at:at + 3]} vs CPython {theirs[at:at + 3]}")
            else:
                notes.append(f"opcodes equal CPython's up to {single} single-item MARK..APPENDS/SETITEMS")
        lists, frames = {}, {}
        for fl in frame_lists(data):
            if fl:
                lists.setdefault(json.dumps(fl, sort_keys=True), set()).add(id(fl))
                for fr in fl:
                    frames.setdefault(json.dumps(fr, sort_keys=True), set()).add(id(fr))
        for what, table in (("frame lists", lists), ("frames", frames)):
            split = [k for k, ids in table.items() if len(ids) > 1]
            if split:
                problems.append(f"{len(split)} {what} written more than once instead of shared")
    return problems, notes


PUSH = {
    "EMPTY_DICT", "EMPTY_LIST", "EMPTY_TUPLE", "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8",
    "BININT", "BININT1", "BININT2", "LONG1", "LONG4", "BINFLOAT", "NEWTRUE", "NEWFALSE", "NONE",
    "BINGET", "LONG_BINGET", "SHORT_BINBYTES", "BINBYTES", "BINBYTES8",
}
NOP = {"MEMOIZE", "BINPUT", "LONG_BINPUT", "PROTO", "STOP"}


def canonical_ops(b):
    """Opcodes (name, argument) without FRAME, with every MARK..APPENDS holding one item
    rewritten to APPEND and every MARK..SETITEMS holding one pair to SETITEM. Returns the list
    and how many rewrites it made."""
    out, stack, rewrites = [], [], 0
    for op, arg, _pos in pickletools.genops(b):
        name = op.name
        if name == "FRAME":
            continue
        if name in PUSH:
            stack.append(len(out))
        elif name == "MARK":
            stack.append(("mark", len(out)))
        elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
            n = int(name[-1])
            start = stack[-n]
            del stack[-n:]
            stack.append(start)
        elif name in ("TUPLE", "APPENDS", "SETITEMS"):
            i = max(j for j, x in enumerate(stack) if isinstance(x, tuple))
            mark_at = stack[i][1]
            items = len(stack) - i - 1
            del stack[i:]
            if name == "TUPLE":
                stack.append(mark_at)
            elif items == (1 if name == "APPENDS" else 2):
                out[mark_at] = None
                name = "APPEND" if name == "APPENDS" else "SETITEM"
                rewrites += 1
        elif name == "APPEND":
            stack.pop()
        elif name == "SETITEM":
            del stack[-2:]
        elif name not in NOP:
            raise ValueError(f"unexpected opcode {name}")
        out.append((name, arg))
    return [o for o in out if o is not None], rewrites


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__.rstrip().rsplit("\n", 1)[-1])
    golden_dir, files = argv[1], argv[2:]
    failed = 0
    for path in files:
        try:
            problems, notes = check(golden_dir, path)
        except Exception as e:  # report every file, not just the first failure
            problems, notes = [f"{type(e).__name__}: {e}"], []
        status = "ok" if not problems else "FAIL"
        print(f"{status} {os.path.basename(path)}")
        for p in problems + notes:
            print(f"    {p}")
        failed += bool(problems)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main(sys.argv)
