#!/usr/bin/env bash
# The benchmark suite. Generates the standard inputs when missing (bench/data/, git-ignored) and
# prints a table; every number is measured by this script, never typed in.
#
#   bench/run.sh                  native decode of: the real 3.7 MB Wedsonlin snapshot (when
#                                 ../shared/snapshots exists), the same trace repeated to 100 MB
#                                 (bench/make_repeated.py), and `memlens synth` files of
#                                 10 MB, 100 MB, 1 GB, 2 GB
#   bench/run.sh --quick          only the inputs up to 100 MB
#   bench/run.sh --browser        also the viewer in headless Chromium (bench/browser.mjs): wasm
#                                 decode, file → first painted timeline, zoom/pan frame times
#                                 (needs `scripts/serve.sh --build` and tests/browser's packages)
#   BENCH_PYTHON=0 bench/run.sh   skip the Python comparison
#
# "memlens" = `memlens stats --json FILE`: decode + model + stats, one thread, file streamed in
# 1 MiB chunks. cpu_s = user + sys seconds (steadier than wall time on a shared machine);
# MB/s uses cpu_s. "python" = python3 -c "import pickle; pickle.load(open(F,'rb'))", merely
# unpickling the same file with the C unpickler.
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0; browser=0
for a in "$@"; do
  case "$a" in --quick) quick=1 ;; --browser) browser=1 ;; esac
done
cargo build --release -q -p memlens-cli
bin=${MEMLENS_BIN:-${CARGO_TARGET_DIR:-target}/release/memlens}
mkdir -p bench/data
src=../shared/snapshots/Wedsonlin__assignment2-systems__results_medium_1024_training_memory_snapshot.pickle

inputs=()
if [ -f "$src" ]; then
  inputs+=("$src")
  [ -f bench/data/rep_100MB.pickle ] || python3 bench/make_repeated.py "$src" 180 bench/data/rep_100MB.pickle >/dev/null
  inputs+=(bench/data/rep_100MB.pickle)
  if [ $quick = 0 ]; then
    # 1 GB: the shallow repetition (75 bytes an entry, denser than any real snapshot) and the
    # --fresh one, written the way torch writes a trace (~165 bytes an entry, like its source)
    [ -f bench/data/rep_1GB.pickle ] || python3 bench/make_repeated.py "$src" 1870 bench/data/rep_1GB.pickle >/dev/null
    [ -f bench/data/fresh_rep_1GB.pickle ] || python3 bench/make_repeated.py --fresh "$src" 663 bench/data/fresh_rep_1GB.pickle >/dev/null
    inputs+=(bench/data/rep_1GB.pickle bench/data/fresh_rep_1GB.pickle)
  fi
else
  echo "NOTICE: $src not found: real-snapshot rows skipped"
fi
# events per size: synth training files take ~170 bytes per trace entry
sizes=("10MB:60000" "100MB:600000" "1GB:6000000" "2GB:12000000")
[ $quick = 1 ] && sizes=("10MB:60000" "100MB:600000")
for s in "${sizes[@]}"; do
  name=${s%%:*}; ev=${s##*:}; f=bench/data/synth_training_${name}.pickle
  [ -f "$f" ] || "$bin" synth --workload training --events "$ev" --seed 1 -q -o "$f"
  inputs+=("$f")
done

measure() { # best (lowest cpu) of N runs: "wall cpu maxrss_kb"
  local n=$1; shift; local best="" t; t=$(mktemp)
  for _ in $(seq "$n"); do
    /usr/bin/time -o "$t" -f "%e %U %S %M" "$@" >/dev/null 2>&1 || true
    read -r w u s m <"$t"
    local c; c=$(awk -v u="$u" -v s="$s" 'BEGIN{printf "%.3f", u+s}')
    if [ -z "$best" ] || awk -v a="$c" -v b="$best" 'BEGIN{split(b,x," "); exit !(a<x[2])}'; then best="$w $c $m"; fi
  done
  rm -f "$t"; echo "$best"
}
printf "%-36s %9s %8s %8s %8s %9s %9s %9s %8s\n" input MB wall_s cpu_s MB/s RSS/file python_s py_RSS/MB speedup
for f in "${inputs[@]}"; do
  mb=$(python3 -c "import os,sys; print(f'{os.path.getsize(sys.argv[1])/1e6:.1f}')" "$f")
  read -r w c m <<<"$(measure 3 "$bin" stats --json "$f")"
  pw="-"; pm="-"
  # Python needs ~5x the file in memory: skipped above 1.2 GB on this 24 GiB machine.
  if [ "${BENCH_PYTHON:-1}" = 1 ] && [ "$(stat -c %s "$f")" -lt 1200000000 ]; then
    read -r pw _ pm <<<"$(measure 1 python3 -c "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))" "$f")"
  fi
  awk -v f="$(basename "$f" | cut -c1-36)" -v mb="$mb" -v w="$w" -v c="$c" -v m="$m" -v pw="$pw" -v pm="$pm" 'BEGIN{
    printf "%-36s %9s %8.2f %8.2f %8.0f %9.2f %9s %9s %8s\n", f, mb, w, c, (c>0? mb/c : 0), (m*1024/1e6)/mb,
      pw, (pm=="-"? "-" : sprintf("%.0f", pm*1024/1e6)), (pw=="-"||w==0? "-" : sprintf("%.1fx", pw/w)) }'
done

if [ $browser = 1 ]; then
  echo
  echo "viewer in headless Chromium (bench/browser.mjs)"
  node bench/browser.mjs "${inputs[@]}"
fi
