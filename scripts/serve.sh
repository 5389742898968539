#!/usr/bin/env bash
# Builds the memlens viewer (trunk build --release --offline into dist/, then
# scripts/single_file.py into dist-single/memlens.html) and serves dist/ on
# 127.0.0.1:${PORT:-8080} (scripts/serve_dist.py: cache headers that let a browser keep the
# viewer between visits). Installs what is missing first: the wasm32 target, trunk, and the
# wasm-bindgen-cli whose version matches Cargo.lock (Trunk refuses any other in offline mode).
#
#   scripts/serve.sh            build and serve
#   scripts/serve.sh --build    build only
set -euo pipefail
cd "$(dirname "$0")/.."

TRUNK_VERSION=0.21.14
PORT="${PORT:-8080}"

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
    echo "serve.sh: installing the wasm32-unknown-unknown target" >&2
    rustup target add wasm32-unknown-unknown
fi
if ! command -v trunk >/dev/null || ! trunk --version | grep -q " ${TRUNK_VERSION}"; then
    echo "serve.sh: installing trunk ${TRUNK_VERSION}" >&2
    cargo install trunk --version "${TRUNK_VERSION}" --locked
fi
# The wasm-bindgen version in Cargo.lock (the `version` line after `name = "wasm-bindgen"`).
WBG_VERSION=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
if [ -z "${WBG_VERSION}" ]; then
    echo "serve.sh: no wasm-bindgen in Cargo.lock" >&2
    exit 2
fi
if ! command -v wasm-bindgen >/dev/null || [ "$(wasm-bindgen --version | awk '{print $2}')" != "${WBG_VERSION}" ]; then
    echo "serve.sh: installing wasm-bindgen-cli ${WBG_VERSION}" >&2
    cargo install wasm-bindgen-cli --version "${WBG_VERSION}"
fi

trunk build --release --offline
# The single-file viewer (file://, no server), which `memlens html` embeds.
python3 scripts/single_file.py dist dist-single/memlens.html

if [ "${1:-}" = "--build" ]; then
    exit 0
fi
echo "serve.sh: memlens viewer at http://127.0.0.1:${PORT}/ (Ctrl-C to stop)" >&2
exec python3 scripts/serve_dist.py "${PORT}" dist
