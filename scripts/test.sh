#!/usr/bin/env bash
# Runs every test: installs what is missing, the native suites (core, CLI, conformance over
# ../shared/snapshots, golden files), the core's wasm32 build, and, once the viewer exists, the
# browser end-to-end tests in headless Chromium against the built dist/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ ! -d ../shared/snapshots ]; then
  echo "NOTICE: ../shared/snapshots not found: tests over real snapshots are skipped"
fi
web_excl=()
if grep -q '"web"' Cargo.toml; then web_excl=(--exclude memlens-web); fi
cargo build --release -p memlens-cli
cargo test --workspace "${web_excl[@]}"
echo "== memlens-core builds for wasm32"
cargo build -q -p memlens-core --target wasm32-unknown-unknown
if [ -f Trunk.toml ] && [ -d tests/browser ]; then
  echo "== viewer build and browser tests"
  trunk build --release --offline
  (cd tests/browser && node --test --test-concurrency=1)
fi
