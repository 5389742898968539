#!/usr/bin/env bash
# The checks that hold the plan (called by scripts/test.sh; run it alone before a commit):
#   formatting, clippy for the host and for wasm32 with warnings denied, core free of web crates,
#   the import rules (scripts/check_imports.py), and `cargo test --workspace` (memlens-web's
#   native tests included).
# Usage: scripts/check.sh [--fix] [--no-test]
#   --fix      format the code instead of checking its format
#   --no-test  everything but `cargo test`
# MEMLENS_NO_SKIP=1 (set by CI) makes the tests over ../shared/snapshots fail when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0; test=1
for a in "$@"; do
  case "$a" in --fix) fix=1 ;; --no-test) test=0 ;; *) echo "unknown option $a" >&2; exit 2 ;; esac
done
step() { echo "== check: $*"; }

step "cargo fmt"
if [ "$fix" = 1 ]; then cargo fmt --all; else cargo fmt --all --check; fi

step "import rules"
python3 scripts/check_imports.py

step "memlens-core uses no web crate"
web=$(cargo tree -q -p memlens-core -e normal --prefix none | grep -E '^(wasm-bindgen|web-sys|js-sys|yew|gloo)' || true)
if [ -n "$web" ]; then echo "memlens-core depends on web crates:"; echo "$web"; exit 1; fi
step "no production crate ships the test-support crate"
for p in memlens-core memlens-cli memlens-web; do
  if cargo tree -q -p "$p" -e normal --prefix none | grep -q '^memlens-fixture'; then
    echo "$p depends on memlens-fixture outside its tests"; exit 1
  fi
done

step "clippy (host, warnings denied)"
cargo clippy -q --workspace --all-targets -- -D warnings
step "clippy (wasm32: memlens-core and the web app, warnings denied)"
cargo clippy -q -p memlens-core -p memlens-web --target wasm32-unknown-unknown -- -D warnings

if [ "$test" = 1 ]; then
  step "cargo test --workspace"
  cargo test -q --workspace
fi
echo "== check: all passed"
