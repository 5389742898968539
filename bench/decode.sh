#!/usr/bin/env bash
# Native decode benchmark: decode + model + stats (`memlens stats --json`) against Python's C
# unpickler merely loading the same file. Prints a table; numbers are measured, never typed in.
#
# Usage: bench/decode.sh [SIZE_MB ...]     (default: 100 500)
# Inputs: the real 3.7 MB Wedsonlin snapshot from ../shared/snapshots, repeated to each size
# (bench/make_repeated.py), kept in bench/data/ (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
src=../shared/snapshots/Wedsonlin__assignment2-systems__results_medium_1024_training_memory_snapshot.pickle
[ -f "$src" ] || { echo "SKIP: $src not found"; exit 0; }
sizes=("$@"); [ ${#sizes[@]} -gt 0 ] || sizes=(100 500)
cargo build --release -q -p memlens-cli
mkdir -p bench/data
bin=target/release/memlens
best() { # best of N runs: prints "seconds maxrss_kb"
  local n=$1; shift; local b=""
  for _ in $(seq "$n"); do
    local o; o=$( { /usr/bin/time -f "%e %M" "$@" >/dev/null 2>/dev/null; } 2>&1 | tail -1)
    if [ -z "$b" ] || awk -v a="${o% *}" -v c="${b% *}" 'BEGIN{exit !(a<c)}'; then b=$o; fi
  done
  echo "$b"
}
printf "%-28s %10s %10s %10s %10s %12s %8s\n" file MB memlens_s MB/s peakRSS_MB python_s speedup
for f in "$src" $(for s in "${sizes[@]}"; do echo "bench/data/rep_${s}MB.pickle"; done); do
  if [ ! -f "$f" ]; then
    s=${f#bench/data/rep_}; s=${s%MB.pickle}
    python3 bench/make_repeated.py "$src" "$s" "$f" >/dev/null
  fi
  mb=$(python3 -c "import os,sys; print(f'{os.path.getsize(sys.argv[1])/1e6:.1f}')" "$f")
  read -r ms mk <<<"$(best 3 $bin stats --json "$f")"
  read -r ps _ <<<"$(best 1 python3 -c "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))" "$f")"
  awk -v f="$(basename "$f" | cut -c1-28)" -v mb="$mb" -v ms="$ms" -v mk="$mk" -v ps="$ps" 'BEGIN{
    printf "%-28s %10s %10.2f %10.0f %10.0f %12.2f %7.1fx\n", f, mb, ms, (ms>0? mb/ms : 0), mk/1024, ps, (ms>0? ps/ms : 0) }'
done
