#!/usr/bin/env bash
# Runs every test: installs what is missing, the native suites (core, CLI, conformance over
# ../shared/snapshots, golden files), the core's wasm32 build, and the browser end-to-end tests in
# headless Chromium against the built dist/, dist-single/ and `memlens html`/`memlens serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ ! -d ../shared/snapshots ]; then
  echo "NOTICE: ../shared/snapshots not found: tests over real snapshots are skipped"
fi
web_excl=()
if grep -q '"web"' Cargo.toml; then web_excl=(--exclude memlens-web); fi
# The viewer first: dist/ (trunk), then dist-single/memlens.html, which memlens embeds at
# compile time (crates/memlens-cli/build.rs) for `memlens html` and `memlens serve`.
echo "== viewer build (dist/, dist-single/memlens.html)"
scripts/serve.sh --build
cargo build --release -p memlens-cli
MEMLENS_REQUIRE_VIEWER=1 cargo test --workspace "${web_excl[@]}"
echo "== memlens-core builds for wasm32"
cargo build -q -p memlens-core --target wasm32-unknown-unknown
echo "== browser tests (headless Chromium; firefox-esr when installed)"
(cd tests/browser && node --test --test-concurrency=1)
