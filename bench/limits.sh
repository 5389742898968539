#!/usr/bin/env bash
# The "Any size" table of docs/BENCHMARKS.md: for each input, made one at a time under
# $BENCH_TMP (default /tmp/memlens-limits) and deleted after, what the size estimate foretells
# from the head against the whole decode's count (the size_estimate example), then what the
# viewer does with it in headless Chromium with the size check off and on (bench/browser.mjs,
# BENCH_VIEW=limits: opens whole, dies, or is refused and opened in part; time, peak tab memory).
#
#   bench/limits.sh                         synth 1, 2, 4, 6, 8 GB and the real Wedsonlin trace
#                                           repeated to 4, 6, 8 GB
#   BENCH_SIZES="synth:4 rep:6" bench/limits.sh
#
# Needs `scripts/serve.sh --build`, tests/browser's packages, and ~2x the largest input free on
# disk. synth: `memlens synth --workload training` (~170 bytes an entry); rep: the
# repeat_snapshot example (~75 bytes an entry: denser, so more entries per GB).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p memlens-cli
cargo build --release -q -p memlens-core --example size_estimate --example repeat_snapshot
target=${CARGO_TARGET_DIR:-target}
bin=${MEMLENS_BIN:-$target/release/memlens}
dir=${BENCH_TMP:-/tmp/memlens-limits}
mkdir -p "$dir"
src=../shared/snapshots/Wedsonlin__assignment2-systems__results_medium_1024_training_memory_snapshot.pickle
for spec in ${BENCH_SIZES:-synth:1 synth:2 synth:4 synth:6 synth:8 rep:4 rep:6 rep:8}; do
  kind=${spec%%:*}; gb=${spec##*:}; f=$dir/${kind}_${gb}GB.pickle
  if [ "$kind" = synth ]; then
    "$bin" synth --workload training --events "$((gb * 6000000))" --seed 1 -q -o "$f"
  else
    "$target/release/examples/repeat_snapshot" "$src" "$((gb * 1000))" "$f"
  fi
  echo "# $spec: $(date -u +%H:%M) $(uptime | sed 's/.*load/load/')"
  "$target/release/examples/size_estimate" "$f"
  BENCH_VIEW=limits node bench/browser.mjs "$f"
  rm -f "$f"
done
