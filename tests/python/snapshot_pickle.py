"""What the python references share: reading a snapshot pickle with Python's own `pickle.load`
(stdlib only, no torch) into its segments and per-device traces, and the device ids it holds.
A bare-list pickle is the segments alone."""

import pickle


def split(data):
    """(segments, device_traces) of a loaded snapshot."""
    if isinstance(data, list):
        return data, []
    return data.get("segments", []), data.get("device_traces", [])


def read(path):
    """(segments, device_traces) of the snapshot pickle at `path`."""
    with open(path, "rb") as f:
        return split(pickle.load(f))


def devices(segments, traces):
    """The sorted union of segment devices and all `device_traces` indices."""
    return sorted({seg.get("device", 0) for seg in segments} | set(range(len(traces))))


def trace_of(traces, device):
    """The trace of `device`, empty when the snapshot has none for it."""
    return traces[device] if device < len(traces) else []


def requested_size(block):
    """The bytes a block's caller asked for: `requested_size`, else its first history entry's
    `real_size`, else its `size`."""
    if "requested_size" in block:
        return block["requested_size"]
    history = block.get("history")
    if history:
        return history[0]["real_size"]
    return block["size"]
