// Shared scaffolding of the browser tests: a static server for dist/ under a sub-path (so the
// page must use relative URLs) and a fresh headless Debian Chromium with the flags this machine
// needs (no background networking: nothing may leave 127.0.0.1).

import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

export const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm',
  '.css': 'text/css', '.pickle': 'application/octet-stream', '.json': 'application/json' };

export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
  '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** Serves the files of `dir` at http://127.0.0.1:<port><prefix>; resolves to { server, base }. */
export async function serveDist(dir, prefix) {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    if (!url.pathname.startsWith(prefix)) { res.writeHead(404); res.end(); return; }
    const rel = decodeURIComponent(url.pathname.slice(prefix.length)) || 'index.html';
    const file = path.resolve(dir, rel);
    if (!file.startsWith(dir + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404); res.end(); return;
    }
    res.writeHead(200, { 'content-type': TYPES[path.extname(file)] || 'application/octet-stream' });
    fs.createReadStream(file).pipe(res);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { server, base: `http://127.0.0.1:${server.address().port}${prefix}` };
}

/** A fresh Chromium profile each run. */
export async function launchChromium(viewport) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'memlens-chromium-'));
  return chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
    viewport,
  });
}

/**
 * Skips test context `t` with a notice, or fails it when MEMLENS_NO_SKIP=1 (CI sets it: there,
 * nothing a test needs may be missing).
 */
export function skipOrFail(t, why) {
  if (process.env.MEMLENS_NO_SKIP === '1') {
    throw new Error(`${why} (MEMLENS_NO_SKIP=1: this test may not be skipped)`);
  }
  console.log(`NOTICE: ${why}; skipped`);
  t.skip(why);
}
