#!/usr/bin/env python3
"""Serves the built viewer (dist/) on 127.0.0.1 with the cache headers that let a browser keep
it between visits (the same rule as tests/browser/harness.mjs's cacheControl): Trunk's
content-hashed names (the app's JS and wasm, the stylesheet) are kept a year without asking,
so Chromium may keep the app's compiled wasm too; the viewer's other files (the page, the
bootstraps, the worker's JS and wasm, whose names carry no hash) are kept but asked for again
each time (`no-cache`, answered 304 while unchanged); anything else (snapshots, the example)
is not kept (`no-store`: a file may change under its name). scripts/serve.sh runs it.

Usage: python3 scripts/serve_dist.py PORT DIR
"""

import functools
import http.server
import re
import sys

HASHED = re.compile(r"-[0-9a-f]{16}(_bg)?\.(js|wasm|css)$")
VIEWER = re.compile(r"\.(html|js|wasm|css|svg)$")


def cache_control(path):
    """The Cache-Control header for a request path (its query already removed)."""
    name = path.rstrip("/").rsplit("/", 1)[-1] or "index.html"
    if HASHED.search(name):
        return "public, max-age=31536000, immutable"
    return "no-cache" if VIEWER.search(name) or path.endswith("/") else "no-store"


class Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".wasm": "application/wasm", ".js": "text/javascript"}

    def end_headers(self):
        self.send_header("Cache-Control", cache_control(self.path.split("?", 1)[0]))
        super().end_headers()


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(2)
    port, root = int(sys.argv[1]), sys.argv[2]
    handler = functools.partial(Handler, directory=root)
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        server.serve_forever()


if __name__ == "__main__":
    main()
