"""Reads a `memlens export --format parquet` folder with DuckDB and checks its sums against
`memlens stats --json` (one JSON object per line, each with its "file").

Usage: export_check.py DIR STATS.jsonl

Per file and device, from the tables alone:
- stats: every number of the stats row equals the JSON; `actions` is the same map;
- trace: rows = trace_entries, rows by action = actions, the running sum of alloc minus
  free_completed sizes from the baseline (requested_bytes - sum alloc + sum free_completed)
  peaks at timeline_peak_bytes, first reached at timeline_peak_event;
- segments: rows = segments, sum total_size_bytes = reserved_bytes;
- blocks: rows = blocks, allocated/active/requested/inactive-split/largest-free as defined in
  core's model::stats;
- allocations: one per alloc entry plus those without one, sum of traced sizes = sum of alloc
  sizes, each frees at most once after its alloc, every user frame is a frame of its stack
  (frames and stacks joined) or one of the two group names;
- file and rank: rank parsed from the file name (`rank_7.pickle`), null otherwise.
Prints `ok FILE` per file that matches, `BAD FILE: ...` per mismatch; exit 1 on any mismatch.
"""

import json
import os
import re
import sys

import duckdb

GROUPS = ("(allocated before the trace)", "(no stack)")


def rank_of(path):
    name = os.path.basename(path).lower()
    last = name.rfind("rank")
    m = re.match(r"rank[_-]*(\d+)", name[last:]) if last >= 0 else None
    return int(m.group(1)) if m else None


def one(db, sql, args):
    row = db.execute(sql, args).fetchone()
    return None if row is None else (row[0] if len(row) == 1 else row)


def check_device(db, t, f, d):
    bad = []
    dev = d["device"]
    key = [f, dev]

    def eq(what, got, want):
        if got != want:
            bad.append(f"device {dev}: {what}: duckdb {got}, stats {want}")

    cols = [c[0] for c in db.execute(f"DESCRIBE SELECT * FROM {t('stats')}").fetchall()]
    row = db.execute(
        f"SELECT * FROM {t('stats')} WHERE file = ? AND device = ?", key
    ).fetchall()
    eq("stats rows", len(row), 1)
    if row:
        got = dict(zip(cols, row[0]))
        for k, v in d.items():
            eq(f"stats.{k}", json.loads(got[k]) if k == "actions" else got[k], v)
    q = f"SELECT count(*) FROM {t('trace')} WHERE file = ? AND device = ?"
    eq("trace rows", one(db, q, key), d["trace_entries"])
    acts = dict(
        db.execute(
            f"SELECT action, count(*) FROM {t('trace')} WHERE file = ? AND device = ? GROUP BY action",
            key,
        ).fetchall()
    )
    eq("trace actions", acts, d["actions"])
    check_timeline(db, t, key, d, eq)
    q = f"SELECT count(*), coalesce(sum(total_size_bytes), 0) FROM {t('segments')} WHERE file = ? AND device = ?"
    eq("segments, reserved", tuple(one(db, q, key)), (d["segments"], d["reserved_bytes"]))
    check_blocks(db, t, key, d, eq)
    check_allocations(db, t, key, d, eq)
    return bad


def running_peak(db, t, key, up, down):
    """(largest running sum of +size for `up` and -size for `down` actions, its first event)."""
    ups = ", ".join(f"'{a}'" for a in up)
    downs = ", ".join(f"'{a}'" for a in down)
    return one(
        db,
        f"""SELECT net, event FROM (
              SELECT event, sum(CASE WHEN action IN ({ups}) THEN size_bytes::HUGEINT
                                     WHEN action IN ({downs}) THEN -size_bytes::HUGEINT
                                     ELSE 0 END) OVER (ORDER BY event) AS net
              FROM {t('trace')} WHERE file = ? AND device = ?)
            ORDER BY net DESC, event LIMIT 1""",
        key,
    )


def check_timeline(db, t, key, d, eq):
    sums = one(
        db,
        f"""SELECT coalesce(sum(CASE WHEN action = 'alloc' THEN size_bytes END), 0),
                  coalesce(sum(CASE WHEN action = 'free_completed' THEN size_bytes END), 0)
           FROM {t('trace')} WHERE file = ? AND device = ?""",
        key,
    )
    baseline = d["requested_bytes"] - sums[0] + sums[1]
    eq("timeline baseline", baseline, d["timeline_baseline_bytes"])
    peak = running_peak(db, t, key, ["alloc"], ["free_completed"])
    if peak is None or peak[0] <= 0:
        want = (baseline, -1)
    else:
        want = (baseline + peak[0], peak[1])
    eq("timeline peak", want, (d["timeline_peak_bytes"], d["timeline_peak_event"]))
    seg = running_peak(db, t, key, ["segment_alloc", "segment_map"], ["segment_free", "segment_unmap"])
    final = one(
        db,
        f"""SELECT coalesce(sum(CASE WHEN action IN ('segment_alloc', 'segment_map') THEN size_bytes::HUGEINT
                                     WHEN action IN ('segment_free', 'segment_unmap') THEN -size_bytes::HUGEINT END), 0)
            FROM {t('trace')} WHERE file = ? AND device = ?""",
        key,
    )
    base = d["reserved_bytes"] - final
    eq("reserved baseline", base, d["reserved_baseline_bytes"])
    eq("peak reserved", base + max(0, seg[0] if seg else 0), d["peak_reserved_bytes"])


def check_blocks(db, t, key, d, eq):
    got = one(
        db,
        f"""WITH b AS (
              SELECT b.*, count(*) OVER (PARTITION BY segment) AS in_segment
              FROM {t('blocks')} b WHERE file = ? AND device = ?)
            SELECT count(*),
              coalesce(sum(CASE WHEN state = 'active_allocated' THEN size_bytes END), 0),
              coalesce(sum(CASE WHEN state LIKE 'active%' THEN size_bytes END), 0),
              coalesce(sum(CASE WHEN state LIKE 'active%' THEN requested_size_bytes END), 0),
              coalesce(sum(CASE WHEN state = 'inactive' AND in_segment > 1 THEN size_bytes END), 0),
              coalesce(max(CASE WHEN state = 'inactive' THEN size_bytes END), 0)
            FROM b""",
        key,
    )
    want = tuple(
        d[k]
        for k in (
            "blocks",
            "allocated_bytes",
            "active_bytes",
            "requested_bytes",
            "inactive_split_bytes",
            "largest_free_block_bytes",
        )
    )
    eq("blocks", tuple(got), want)


def check_allocations(db, t, key, d, eq):
    a = t("allocations")
    got = one(
        db,
        f"""SELECT count(*) FILTER (WHERE alloc_event IS NOT NULL),
                   coalesce(sum(size_bytes) FILTER (WHERE alloc_event IS NOT NULL), 0),
                   count(*) FILTER (WHERE free_completed_event < alloc_event
                                      OR free_requested_event > free_completed_event)
            FROM {a} WHERE file = ? AND device = ?""",
        key,
    )
    allocs = one(
        db,
        f"""SELECT count(*), coalesce(sum(size_bytes), 0) FROM {t('trace')}
            WHERE file = ? AND device = ? AND action = 'alloc'""",
        key,
    )
    eq("traced allocations (count, bytes), misordered", tuple(got), (allocs[0], allocs[1], 0))
    stray = one(
        db,
        f"""SELECT count(*) FROM {a} x WHERE file = ? AND device = ?
              AND user_frame NOT IN {GROUPS}
              AND NOT EXISTS (
                SELECT 1 FROM {t('stacks')} s JOIN {t('frames')} f
                  ON f.file = s.file AND f.frame_id = s.frame_id
                WHERE s.file = x.file AND s.stack_id = x.stack_id
                  AND f.filename || ':' || f.line || ':' || f.name = x.user_frame)""",
        key,
    )
    eq("user frames not in their stack", stray, 0)


def main():
    out, stats_path = sys.argv[1], sys.argv[2]
    db = duckdb.connect()

    def t(name):
        return f"read_parquet('{os.path.join(out, name, '*.parquet')}')"

    bad = 0
    with open(stats_path) as fh:
        expected = [json.loads(line) for line in fh if line.strip()]
    for st in expected:
        f = st["file"]
        errs = []
        ranks = db.execute(f"SELECT DISTINCT rank FROM {t('stats')} WHERE file = ?", [f]).fetchall()
        if ranks and ranks != [(rank_of(f),)]:
            errs.append(f"rank: duckdb {ranks}, name says {rank_of(f)}")
        devices = one(db, f"SELECT count(*) FROM {t('stats')} WHERE file = ?", [f])
        if devices != len(st["devices"]):
            errs.append(f"stats rows: duckdb {devices}, stats {len(st['devices'])}")
        for d in st["devices"]:
            errs.extend(check_device(db, t, f, d))
        if errs:
            bad += 1
            for e in errs:
                print(f"BAD {f}: {e}")
        else:
            print(f"ok {f}")
    files = one(db, f"SELECT count(DISTINCT file) FROM {t('trace')}", [])
    print(f"{len(expected)} files checked, {files} files with trace rows, {bad} bad")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
