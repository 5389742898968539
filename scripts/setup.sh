#!/usr/bin/env bash
# Installs what memlens needs when it is missing: the wasm32 target, trunk, the wasm-bindgen CLI
# matching Cargo.lock, rustfmt and clippy, Debian's chromium and firefox-esr and the browser tests'
# node packages, and the python package duckdb (the export test reads Parquet with it). Idempotent.
# Usage: scripts/setup.sh [--no-browser]
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "setup: $*" >&2; }

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  log "adding rust target wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi
for c in rustfmt clippy; do
  if ! rustup component list --installed 2>/dev/null | grep -q "^$c"; then
    log "adding rust component $c"
    rustup component add "$c"
  fi
done
if ! command -v trunk >/dev/null || ! trunk --version | grep -q "0.21.14"; then
  log "installing trunk 0.21.14 (a few minutes)"
  cargo install trunk --version 0.21.14 --locked
fi
wb=$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/[^0-9.]/,""); print; exit}' Cargo.lock 2>/dev/null || true)
if [ -n "$wb" ]; then
  if ! command -v wasm-bindgen >/dev/null || ! wasm-bindgen --version | grep -q " $wb\$"; then
    log "installing wasm-bindgen-cli $wb (matches Cargo.lock)"
    cargo install wasm-bindgen-cli --version "$wb" --force
  fi
fi
# duckdb for the python3 the tests run (memlens_fixture::python()): pip into it, or, where
# Debian marks it externally managed, with --break-system-packages (one pure package, no
# system package depends on it).
if command -v python3 >/dev/null && ! python3 -c 'import duckdb' 2>/dev/null; then
  log "installing the python package duckdb"
  if ! python3 -m pip --version >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq python3-pip >/dev/null
  fi
  python3 -m pip install -q duckdb 2>/dev/null ||
    python3 -m pip install -q --break-system-packages duckdb
fi
if [ "${1:-}" != "--no-browser" ]; then
  if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/firefox-esr ]; then
    log "installing chromium and firefox-esr (Debian)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq chromium firefox-esr >/dev/null
  fi
  if [ -f tests/browser/package.json ] && [ ! -d tests/browser/node_modules/playwright-core ]; then
    log "installing browser test packages"
    (cd tests/browser && npm ci --no-audit --no-fund --silent)
  fi
fi
