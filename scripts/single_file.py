#!/usr/bin/env python3
"""Packs the built viewer (dist/, from `trunk build`) into ONE self-contained HTML file that works
opened straight from disk (file://, no server, no network): the app's JS inline, and the app's
wasm, the worker's JS and wasm and the example as gzip+base64 data blocks, unpacked by
web/assets/single.js. `memlens html` embeds this file (crates/memlens-cli/build.rs).

The page carries a Content-Security-Policy that allows its one inline script and one inline style
by their sha256, wasm compilation and a worker from a blob: URL; no connection at all
(`connect-src 'none'`; `memlens serve` relaxes it to 'self' in the page it serves); nothing else.

Usage: python3 scripts/single_file.py [DIST_DIR] [OUT_FILE]
       (defaults: dist  dist-single/memlens.html)
"""

import base64
import gzip
import hashlib
import os
import re
import urllib.parse
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BOOT = os.path.join(ROOT, "web", "assets", "single.js")
# `memlens html` and `memlens serve` replace exactly this element (crates/memlens-cli/src/html.rs).
PRELOAD_SLOT = '<script type="application/json" id="memlens-preload">null</script>'


def fail(msg):
    print(f"single_file.py: {msg}", file=sys.stderr)
    sys.exit(2)


def read(path, mode="rb"):
    try:
        with open(path, mode) as f:
            return f.read()
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror} (run `trunk build --release --offline` first)")


def packed(data):
    """gzip (reproducible: no name, no time) then base64."""
    return base64.b64encode(gzip.compress(data, compresslevel=9, mtime=0)).decode("ascii")


def sha256_source(text):
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def check_inline(kind, text):
    """Inline script/style text must not end its element early or confuse the HTML parser."""
    low = text.lower()
    for bad in (f"</{kind}", "<!--"):
        if bad in low:
            fail(f"the inline {kind} contains {bad!r}; cannot inline it safely")


def main():
    dist = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "dist")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "dist-single", "memlens.html")
    index = read(os.path.join(dist, "index.html"), "r")

    def attr(pattern, what):
        m = re.search(pattern, index)
        if not m:
            fail(f"{what} not found in {dist}/index.html (is it a memlens trunk build?)")
        return os.path.basename(m.group(1))

    app_js_name = attr(r'data-memlens-js="([^"]+)"', "the app's JS (boot.js tag)")
    app_wasm_name = attr(r'data-memlens-wasm="([^"]+)"', "the app's wasm (boot.js tag)")
    css_name = attr(r'<link rel="stylesheet" href="([^"]+)"', "the stylesheet")
    title = attr(r"<title>([^<]*)</title>", "the title")
    # The icon inline (img-src allows data:): the page makes no request for it.
    if not re.search(r'<link rel="icon"[^>]*/>', index):
        fail(f"the icon link not found in {dist}/index.html")
    icon_svg = read(os.path.join(dist, "favicon.svg"), "r").strip()
    icon = ('<link rel="icon" type="image/svg+xml" href="data:image/svg+xml,'
            + urllib.parse.quote(icon_svg, safe=" =:/'") + '" />')
    shim = read(os.path.join(dist, "memlens-worker_loader.js"), "r")
    m = re.fullmatch(r'\s*importScripts\("([^"]+)"\);\s*wasm_bindgen\("([^"]+)"\);\s*', shim)
    if not m:
        fail(f"unexpected worker loader shim: {shim[:200]!r}")
    worker_js_name, worker_wasm_name = (os.path.basename(x) for x in m.groups())

    app_js = read(os.path.join(dist, app_js_name), "r")
    # The module's default export is its init function; the bootstrap calls it directly.
    m = re.search(r"export\s*\{[^}]*\b(\w+)\s+as\s+default\b[^}]*\};?", app_js)
    if not m:
        fail(f"no default export (init) in {app_js_name}")
    init_name = m.group(1)
    boot = read(BOOT, "r").replace("__MEMLENS_INIT__", init_name)
    module = app_js + "\n" + boot
    css = read(os.path.join(dist, css_name), "r")
    check_inline("script", module)
    check_inline("style", css)

    csp = "; ".join([
        "default-src 'none'",
        f"script-src {sha256_source(module)} 'wasm-unsafe-eval'",
        f"style-src {sha256_source(css)}",
        "style-src-attr 'unsafe-inline'",
        "worker-src blob:",
        # No fetch at all from disk; `memlens serve` swaps in 'self' for the page it serves.
        "connect-src 'none'",
        "img-src 'self' data: blob:",
        "base-uri 'none'",
        "form-action 'none'",
    ])
    if any(c in csp for c in "\"<>&"):
        fail(f"unexpected characters in the policy: {csp}")

    def data_block(block_id, data):
        return f'<script type="application/octet-stream" id="{block_id}">{packed(data)}</script>\n'

    parts = [
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\" />\n",
        f'<meta http-equiv="Content-Security-Policy" content="{csp}" />\n',
        '<meta name="viewport" content="width=device-width, initial-scale=1" />\n',
        f"<title>{title}</title>\n",
        icon + "\n",
        f"<style>{css}</style>\n",
        PRELOAD_SLOT + "\n",
        data_block("memlens-worker-js", read(os.path.join(dist, worker_js_name))),
        data_block("memlens-worker-wasm", read(os.path.join(dist, worker_wasm_name))),
        data_block("memlens-app-wasm", read(os.path.join(dist, app_wasm_name))),
        data_block("memlens-example", read(os.path.join(dist, "example.pickle"))),
        f'<script type="module">{module}</script>\n',
        "</head>\n<body></body>\n</html>\n",
    ]
    page = "".join(parts)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(page)
    os.replace(tmp, out)
    print(f"single_file.py: wrote {out} ({len(page.encode('utf-8')) / 1024:.0f} KiB)", file=sys.stderr)


if __name__ == "__main__":
    main()
