#!/usr/bin/env bash
# What plotters' canvas backend would cost the Diagnosis view's two small charts (ARCHITECTURE.md
# Decisions): builds this probe twice for wasm32 (the canvas 2D API directly, and plotters +
# plotters-canvas with `--features plot`), prints both .wasm sizes (raw and gzip -9) and the
# median time of drawing both charts (8 ledger bars, 256 fragmentation samples) 50 times in
# headless Chromium. Usage: bash bench/plotters_probe/run.sh  (needs wasm-bindgen, chromium,
# tests/browser/node_modules).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${TMPDIR:-/tmp}/memlens-plotters-probe"
export CARGO_TARGET_DIR="$out/target"
for v in base plot; do
  flags=()
  [ "$v" = plot ] && flags=(--features plot)
  (cd "$here" && cargo build --quiet --release --target wasm32-unknown-unknown "${flags[@]}")
  mkdir -p "$out/$v"
  wasm-bindgen --target web --out-dir "$out/$v" "$CARGO_TARGET_DIR/wasm32-unknown-unknown/release/plotters_probe.wasm"
  cp "$here/index.html" "$out/$v/"
  w="$out/$v/plotters_probe_bg.wasm"
  echo "$v: wasm $(stat -c %s "$w") bytes, gzip -9 $(gzip -9c "$w" | wc -c) bytes"
done
python3 -m http.server 18777 --bind 127.0.0.1 --directory "$out" >/dev/null 2>&1 &
srv=$!
trap 'kill $srv' EXIT
sleep 1
NODE_PATH="$root/tests/browser/node_modules" node "$here/run.mjs" "$root/tests/browser/node_modules"
