// Shared scaffolding of the browser tests: where things are (dist/, the release CLI, the shared
// snapshots), a static server for dist/ under a sub-path (so the page must use relative URLs), a
// fresh headless Debian Chromium with the flags this machine needs (no background networking:
// nothing may leave 127.0.0.1), the viewer opened in it with requests and errors watched
// (`openViewer`), the CLI (`memlens`, `statsJson`), and waiting for a file to be shown.

import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const ROOT = path.resolve(HERE, '../..');
export const DIST = process.env.MEMLENS_DIST || path.join(ROOT, 'dist');
/** Screenshots and other artefacts the tests leave for a person to look at. */
export const OUT = path.join(ROOT, 'tests/out');
export const SNAPS = path.resolve(ROOT, '../shared/snapshots');
export const FIXTURES = path.join(ROOT, 'tests/fixtures/bin');
export const TARGET = process.env.CARGO_TARGET_DIR || path.join(ROOT, 'target');
export const MEMLENS = process.env.MEMLENS_BIN || path.join(TARGET, 'release/memlens');
/** The sub-path dist/ is served under. */
export const PREFIX = '/memlens/';
/** Plot margins of web/src/page/canvas.rs (CSS px). */
export const MARGIN_LEFT = 76, MARGIN_RIGHT = 12, MARGIN_TOP = 18, MARGIN_BOTTOM = 24;

export const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm',
  '.css': 'text/css', '.pickle': 'application/octet-stream', '.json': 'application/json',
  '.svg': 'image/svg+xml' };

export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic',
  '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/**
 * How long a browser may keep a file of the built viewer (the same rule as scripts/serve_dist.py,
 * which scripts/serve.sh runs): Trunk's content-hashed names (the app's JS and wasm, the
 * stylesheet) never change under their name, so they are kept a year without asking, and
 * Chromium can keep the app's compiled wasm between visits; the viewer's other files (the page,
 * the bootstraps, the worker's JS and wasm, whose names carry no hash) are kept but asked for
 * again each time (`no-cache`: a 304 when unchanged, so the worker's compiled wasm is kept too);
 * anything else (snapshots, the example) is not kept (`no-store`: a file may change under its name).
 */
export function cacheControl(name) {
  if (/-[0-9a-f]{16}(_bg)?\.(js|wasm|css)$/.test(name)) return 'public, max-age=31536000, immutable';
  return /\.(html|js|wasm|css|svg)$/.test(name) ? 'no-cache' : 'no-store';
}

/**
 * Serves the files of `dir` at http://127.0.0.1:<port><prefix>; resolves to { server, base }.
 * `cache: false` sends every file `no-store` (as servers did before `cacheControl`).
 */
export async function serveDist(dir, prefix, { cache = true } = {}) {
  dir = path.resolve(dir);
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    if (!url.pathname.startsWith(prefix)) { res.writeHead(404); res.end(); return; }
    const rel = decodeURIComponent(url.pathname.slice(prefix.length)) || 'index.html';
    const file = path.resolve(dir, rel);
    if (!file.startsWith(dir + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404); res.end(); return;
    }
    const modified = fs.statSync(file).mtime.toUTCString();
    const policy = cache ? cacheControl(path.basename(file)) : 'no-store';
    const headers = { 'cache-control': policy, 'last-modified': modified };
    if (policy !== 'no-store' && req.headers['if-modified-since'] === modified) {
      res.writeHead(304, headers); res.end(); return;
    }
    headers['content-type'] = TYPES[path.extname(file)] || 'application/octet-stream';
    res.writeHead(200, headers);
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

/** A clear failure when the release CLI is not built. */
export function requireMemlens() {
  if (!fs.existsSync(MEMLENS)) {
    throw new Error(`${MEMLENS} is missing: run \`cargo build --release -p memlens-cli\` first (scripts/test.sh does)`);
  }
}

/** Runs the release CLI with `args` and returns what it printed. */
export function memlens(args) {
  requireMemlens();
  return execFileSync(MEMLENS, args, { maxBuffer: 1 << 28 }).toString();
}

/** `memlens stats --json ...args`, parsed. */
export function statsJson(...args) {
  return JSON.parse(memlens(['stats', '--json', ...args]));
}

/** The device the page shows first: longest trace, lowest ordinal on a tie. */
export function defaultDevice(st) {
  let best = null;
  for (const d of st.devices) if (best === null || d.trace_entries > best.trace_entries) best = d;
  return best;
}

/**
 * Serves dist/ and opens a page in a fresh Chromium. Every request that would leave 127.0.0.1
 * is aborted and listed in `foreign` (`strict`: blob:, data: and about:blank too); page errors
 * and console errors are listed in `pageErrors`, the page's `memlens:` console lines in `log`
 * (printed under MEMLENS_E2E_VERBOSE=1). Resolves to { server, base, context, page, foreign,
 * pageErrors, log, close }.
 */
export async function openViewer({ viewport = { width: 1400, height: 860 }, strict = false } = {}) {
  assert.ok(fs.existsSync(path.join(DIST, 'index.html')), `${DIST}/index.html is missing: run scripts/serve.sh --build first`);
  fs.mkdirSync(OUT, { recursive: true });
  const { server, base } = await serveDist(DIST, PREFIX);
  const context = await launchChromium(viewport);
  const foreign = [], pageErrors = [], log = [];
  const local = (u) => /^http:\/\/127\.0\.0\.1:\d+\//.test(u)
    || (!strict && (u.startsWith('blob:') || u.startsWith('data:') || u === 'about:blank'));
  await context.route('**/*', (route) => {
    const u = route.request().url();
    if (local(u)) return route.continue();
    foreign.push(u);
    return route.abort();
  });
  const page = await context.newPage();
  watchPage(page, pageErrors, log);
  const close = async () => {
    await context.close();
    server.close();
  };
  return { server, base, context, page, foreign, pageErrors, log, close };
}

/**
 * Lists `page`'s errors and console errors in `pageErrors`, and its `memlens:` console lines in
 * `log` (printed under MEMLENS_E2E_VERBOSE=1).
 */
export function watchPage(page, pageErrors, log = []) {
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => {
    if (m.type() === 'error') pageErrors.push(m.text());
    if (m.text().startsWith('memlens:')) {
      log.push(m.text());
      if (process.env.MEMLENS_E2E_VERBOSE) console.log(m.text());
    }
  });
}

/**
 * Waits until `page` shows file `name`, ready and painted (`paint`: the dataset key of the
 * paint waited for, `firstPaintMs` or `exactPaintMs`).
 */
export async function waitShown(page, name, { timeout = 60000, paint = 'firstPaintMs' } = {}) {
  await page.waitForFunction(([n, k]) => {
    const r = document.getElementById('memlens');
    return r && r.dataset.file === n && r.dataset.state === 'ready' && !!r.dataset[k];
  }, [name, paint], { timeout });
}

/** The summary strip of `page`: { device, metrics (data-metric → data-value), text }, or null. */
export async function summary(page) {
  return page.evaluate(() => {
    const s = document.querySelector('[data-testid=summary]');
    if (!s) return null;
    const m = {};
    for (const e of s.querySelectorAll('[data-metric]')) m[e.dataset.metric] = e.dataset.value;
    return { device: s.dataset.device, metrics: m, text: s.textContent };
  });
}

/** Opens `file` through the page's file input and waits until it is shown. */
export async function openFile(page, file, opts) {
  await page.setInputFiles('[data-testid=file-input]', file);
  await waitShown(page, path.basename(file), opts);
}

/** How many times the timeline canvas has drawn (its log keeps the last 50). */
export async function drawCount(page) {
  const log = await page.getAttribute('[data-testid=timeline-canvas]', 'data-draw-log');
  return log ? log.split(',').length : 0;
}

/** Runs `act` and waits for the timeline canvas to draw again. */
export async function redrawn(page, act) {
  const n = await drawCount(page);
  await act();
  await page.waitForFunction((k) => {
    const l = document.querySelector('[data-testid=timeline-canvas]')?.dataset.drawLog;
    return l && (l.split(',').length > k || l.split(',').length >= 50);
  }, n);
}
