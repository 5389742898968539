// End-to-end tests of the three offline ways to use memlens, in real headless Chromium (and in
// Debian's firefox-esr over WebDriver BiDi when it is installed):
//
// - dist/ served under a sub-path (/tools/memlens/): its Content-Security-Policy is in the page,
//   the app works under it, and the policy really blocks a fetch to another origin;
// - the single file (dist-single/memlens.html) opened by file:// from an empty folder, with
//   snapshots dropped on it and the built-in example opened;
// - `memlens html` reports opened by file://, already showing their snapshot in the chosen view;
// - `memlens serve` on 127.0.0.1 with files preloaded, and its refusal of a non-loopback bind.
//
// In each, the summary strip (`data-metric`/`data-value`) must equal `memlens stats --json`, and
// every request the browser makes is recorded: over file:// there must be none at all besides the
// page itself (blob:/data: URLs are not network), over http none outside the page's origin.
//
// Run after `bash scripts/serve.sh --build` (dist/ and dist-single/) and
// `cargo build --release -p memlens-cli`: (cd tests/browser && node --test --test-concurrency=1)
// Env: MEMLENS_BIN, MEMLENS_DIST (default dist/), MEMLENS_SINGLE (default
// dist-single/memlens.html), CHROMIUM (default /usr/bin/chromium), FIREFOX (default
// /usr/bin/firefox-esr; its tests are skipped with a notice when it is missing, and fail under
// MEMLENS_NO_SKIP=1 as in CI).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { Firefox, FIREFOX, NoAnswer } from './firefox-bidi.mjs';
import { serveDist, statsJson as stats, defaultDevice, skipOrFail, CHROMIUM_ARGS, DIST, SNAPS, FIXTURES,
  MEMLENS, ROOT } from './harness.mjs';

const SINGLE = path.resolve(process.env.MEMLENS_SINGLE || path.join(ROOT, 'dist-single/memlens.html'));
const PREFIX = '/tools/memlens/';
const METRICS = ['reserved_bytes', 'allocated_bytes', 'active_bytes', 'inactive_split_bytes',
  'largest_free_block_bytes', 'timeline_peak_bytes', 'peak_reserved_bytes', 'trace_entries'];

let browser;
let tmp;

// ---------- in-page functions: serialised into Chromium and Firefox alike ----------

/** The summary of `name` once it is shown and painted (painting skipped when it has no summary). */
function shownSummary(name) {
  const r = document.getElementById('memlens');
  if (!r || r.dataset.file !== name || r.dataset.state !== 'ready') return null;
  const s = document.querySelector('[data-testid=summary]');
  if (!s) return { device: null, metrics: {} };
  if (!r.dataset.firstPaintMs) return null;
  const metrics = {};
  for (const e of s.querySelectorAll('[data-metric]')) metrics[e.dataset.metric] = e.dataset.value;
  return { device: s.dataset.device, metrics };
}

/** Drops a file (bytes as base64) on the page, as a user dragging it from the desktop would. */
function dropFile({ name, b64 }) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  const dt = new DataTransfer();
  dt.items.add(new File([bytes], name));
  for (const type of ['dragenter', 'dragover', 'drop']) {
    document.body.dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
  }
  return true;
}

function clickExample() {
  const b = document.querySelector('[data-testid=open-example]') || document.querySelector('[data-testid=example-button]');
  b.click();
  return true;
}

function viewAndFiles() {
  const files = [...document.querySelectorAll('[data-testid=file-select] option')].map((o) => o.textContent);
  return { view: document.querySelector('[data-testid=view-select]')?.value, files, hash: location.hash };
}

// ---------- helpers ----------

function checkSummary(sum, dev, label) {
  assert.ok(sum, `${label}: not shown`);
  if (!dev) {
    assert.equal(sum.device, null, `${label}: a summary for a snapshot without devices`);
    return;
  }
  assert.equal(sum.device, String(dev.device), `${label}: summary device`);
  for (const k of METRICS) assert.equal(sum.metrics[k], String(dev[k]), `${label}: ${k}`);
}

/** Snapshots to open: every fixture, and three real snapshots (largest, median, small). */
function snapshotsToOpen() {
  const fixtures = fs.readdirSync(FIXTURES).filter((f) => /\.(pickle|json|html)$/.test(f)).sort()
    .map((f) => path.join(FIXTURES, f));
  if (!fs.existsSync(SNAPS)) {
    console.log(`NOTICE: ${SNAPS} not found; only fixtures are opened`);
    return fixtures;
  }
  const real = fs.readdirSync(SNAPS).filter((f) => f.endsWith('.pickle'))
    .map((f) => path.join(SNAPS, f)).sort((a, b) => fs.statSync(b).size - fs.statSync(a).size);
  const picks = [real[0], real[Math.floor(real.length / 2)], real.find((f) => fs.statSync(f).size < 100000)];
  return [...fixtures, ...new Set(picks.filter(Boolean))];
}

function largestSnapshot() {
  if (!fs.existsSync(SNAPS)) return path.join(FIXTURES, 'p5_snapshot.pickle');
  return fs.readdirSync(SNAPS).filter((f) => f.endsWith('.pickle')).map((f) => path.join(SNAPS, f))
    .sort((a, b) => fs.statSync(b).size - fs.statSync(a).size)[0];
}

/** A fresh Chromium context recording every request, console error and CSP violation. */
async function watchedPage(isOwn) {
  const context = await browser.newContext({ viewport: { width: 1300, height: 800 } });
  const w = { context, requests: [], foreign: [], errors: [] };
  context.on('request', (r) => {
    w.requests.push(r.url());
    if (!isOwn(r.url())) w.foreign.push(r.url());
  });
  // Anything not the page's own is aborted, so a leak fails the test rather than the network.
  await context.route('**/*', (route) => (isOwn(route.request().url()) ? route.continue() : route.abort()));
  await context.addInitScript(() => {
    window.__cspViolations = [];
    document.addEventListener('securitypolicyviolation', (e) => {
      window.__cspViolations.push(`${e.effectiveDirective} ${e.blockedURI}`);
    });
  });
  w.page = await context.newPage();
  w.page.on('pageerror', (e) => w.errors.push(String(e)));
  w.page.on('console', (m) => { if (m.type() === 'error') w.errors.push(m.text()); });
  return w;
}

async function chromiumShown(page, name, timeout = 60000) {
  const h = await page.waitForFunction(shownSummary, name, { timeout });
  return h.jsonValue();
}

/** Over file://: the page's own file, then only blob:/data: (which never touch the network). */
function fileOnly(pageUrl) {
  return (u) => u === pageUrl || u.startsWith('blob:') || u.startsWith('data:');
}

function copyToEmptyFolder(file, name) {
  const dir = fs.mkdtempSync(path.join(tmp, 'alone-'));
  const to = path.join(dir, name);
  fs.copyFileSync(file, to);
  return to;
}

function memlensHtml(args) {
  const r = spawnSync(MEMLENS, ['html', ...args], { encoding: 'utf8' });
  assert.equal(r.status, 0, `memlens html ${args.join(' ')}: ${r.stderr}`);
  return r.stdout;
}

before(async () => {
  assert.ok(fs.existsSync(path.join(DIST, 'index.html')), `${DIST}/index.html is missing: run \`bash scripts/serve.sh --build\``);
  assert.ok(fs.existsSync(SINGLE), `${SINGLE} is missing: run \`bash scripts/serve.sh --build\``);
  assert.ok(fs.existsSync(MEMLENS), `${MEMLENS} is missing: cargo build --release -p memlens-cli`);
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'memlens-offline-'));
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
  });
});

after(async () => {
  await browser?.close();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

// ---------- dist/ on a static server under a sub-path ----------

test('dist/: the built page carries a CSP that allows only its own files', () => {
  const html = fs.readFileSync(path.join(DIST, 'index.html'), 'utf8');
  const m = html.match(/<meta http-equiv="Content-Security-Policy" content="([^"]+)"/);
  assert.ok(m, 'no CSP meta in dist/index.html');
  const csp = Object.fromEntries(m[1].split(';').map((d) => d.trim().split(/\s+/)).map(([k, ...v]) => [k, v]));
  assert.deepEqual(csp['default-src'], ["'self'"]);
  assert.deepEqual(csp['script-src'], ["'self'", "'wasm-unsafe-eval'"]);
  assert.deepEqual(csp['connect-src'], ["'self'"]);
  assert.deepEqual(csp['object-src'], ["'none'"]);
  assert.doesNotMatch(m[1], /https?:|\*|'unsafe-eval'|ws:/, 'no remote source, wildcard or eval');
  // The CSP comes before anything that loads; every URL in the page is relative.
  assert.ok(html.indexOf('Content-Security-Policy') < html.search(/<(script|link)\b/));
  assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
  for (const [, u] of html.matchAll(/(?:src|href)="([^"]*)"/g)) assert.match(u, /^\.\//, `not relative: ${u}`);
});

test('dist/ under /tools/memlens/: works under its CSP, and the CSP blocks other origins', async () => {
  const { server, base } = await serveDist(DIST, PREFIX);
  const origin = new URL(base).origin;
  const w = await watchedPage((u) => u.startsWith(`${origin}/`));
  try {
    await w.page.goto(`${origin}${PREFIX}`);
    await w.page.waitForSelector('#memlens[data-state=empty]');
    await w.page.evaluate(clickExample);
    checkSummary(await chromiumShown(w.page, 'example.pickle'), defaultDevice(stats(path.join(DIST, 'example.pickle'))), 'dist example');
    const file = path.join(FIXTURES, 'p4_snapshot.pickle');
    await w.page.evaluate(dropFile, { name: 'p4_snapshot.pickle', b64: fs.readFileSync(file).toString('base64') });
    checkSummary(await chromiumShown(w.page, 'p4_snapshot.pickle'), defaultDevice(stats(file)), 'dist drop');
    assert.deepEqual(await w.page.evaluate(() => window.__cspViolations), [], 'the app needs nothing its CSP forbids');
    assert.ok(w.requests.some((u) => u.endsWith('.wasm')), 'the wasm came from the server');
    const outside = w.requests.filter((u) => !u.startsWith(`${origin}${PREFIX}`) && u !== `${origin}/favicon.ico`);
    assert.deepEqual(outside, [], 'every file came from the sub-path');

    // The policy is enforced: a fetch to another origin is refused before any request exists.
    const r = await w.page.evaluate(() => fetch('http://192.0.2.1/phone-home').then(() => 'sent', (e) => `refused: ${e}`));
    assert.match(r, /^refused/);
    const v = await w.page.evaluate(() => window.__cspViolations);
    assert.deepEqual(v, ['connect-src http://192.0.2.1/phone-home']);
    // ?src= of another origin is refused by the app itself, with a message.
    await w.page.goto(`${origin}${PREFIX}?src=${encodeURIComponent('http://192.0.2.1/x.pickle')}`);
    const banner = await w.page.waitForSelector('[role=alert]');
    assert.match(await banner.textContent(), /only files of this site/);
    assert.deepEqual(w.foreign, [], 'no request left the page\'s origin');
    assert.deepEqual(w.errors.filter((e) => !/192\.0\.2\.1/.test(e)), []);
  } finally {
    await w.context.close();
    server.close();
  }
});

// ---------- the single file, from disk ----------

test('memlens html -o writes exactly the single-file viewer', () => {
  const out = path.join(tmp, 'viewer.html');
  const msg = memlensHtml(['-o', out]);
  assert.match(msg, /^wrote .*viewer\.html: /);
  assert.ok(fs.readFileSync(out).equals(fs.readFileSync(SINGLE)), 'memlens html -o differs from dist-single/memlens.html: rebuild memlens after the viewer');
});

test('single file by file://: drop snapshots, open the example, no network at all', async () => {
  const page1 = copyToEmptyFolder(SINGLE, 'memlens.html');
  const url = pathToFileURL(page1).href;
  const w = await watchedPage(fileOnly(url));
  try {
    await w.page.goto(url);
    await w.page.waitForSelector('#memlens[data-state=empty]');
    for (const file of snapshotsToOpen()) {
      const name = path.basename(file);
      await w.page.evaluate(dropFile, { name, b64: fs.readFileSync(file).toString('base64') });
      checkSummary(await chromiumShown(w.page, name), defaultDevice(stats(file)), `file:// drop ${name}`);
    }
    await w.page.evaluate(clickExample);
    checkSummary(await chromiumShown(w.page, 'example.pickle'), defaultDevice(stats(path.join(DIST, 'example.pickle'))), 'file:// example');
    assert.ok(w.page.workers().some((wk) => wk.url().startsWith('blob:')), 'the worker runs from a blob: URL');
    assert.deepEqual(await w.page.evaluate(() => window.__cspViolations), [], 'the app needs nothing its CSP forbids');
    assert.deepEqual(w.errors, []);
    // The policy is enforced: the page may not fetch at all, not even a file next to it.
    const r = await w.page.evaluate(() => Promise.all(['http://192.0.2.1/phone-home', 'example.pickle']
      .map((u) => fetch(u).then(() => 'sent', (e) => `refused: ${e}`))));
    assert.ok(r.every((x) => x.startsWith('refused')), String(r));
    const v = await w.page.evaluate(() => window.__cspViolations);
    // (Chromium reports a blocked file: URL as just `file`.)
    assert.equal(v.length, 2, String(v));
    assert.equal(v[0], 'connect-src http://192.0.2.1/phone-home');
    assert.match(v[1], /^connect-src file\b/);
    assert.deepEqual(w.foreign, [], 'no request but the page itself');
  } finally {
    await w.context.close();
  }
});

// ---------- memlens html reports, from disk ----------

test('memlens html reports by file://: snapshot loaded, chosen view, no network at all', async () => {
  const big = largestSnapshot();
  const cases = [
    { files: [big], view: 'segments' },
    { files: [path.join(FIXTURES, 'p5_snapshot.pickle')], view: null },
    { files: [path.join(FIXTURES, 'json_snapshot.json'), path.join(FIXTURES, 'trace_plot_html.html')], view: 'timeline' },
  ];
  const viewerBytes = fs.statSync(SINGLE).size;
  for (const [i, c] of cases.entries()) {
    const out = path.join(fs.mkdtempSync(path.join(tmp, 'report-')), `report${i}.html`);
    const msg = memlensHtml([...c.files, '-o', out, ...(c.view ? ['--view', c.view] : [])]);
    assert.match(msg, /embedded as .* of gzip\+base64 \(\d+\.\d% of the file\)/);
    console.log(msg.trim());
    const raw = c.files.reduce((n, f) => n + fs.statSync(f).size, 0);
    const embedded = fs.statSync(out).size - viewerBytes;
    if (raw > 100000) assert.ok(embedded < raw, `embedded ${embedded} bytes for ${raw} bytes of snapshot`);
    const url = pathToFileURL(out).href;
    const w = await watchedPage(fileOnly(url));
    try {
      await w.page.goto(url);
      const last = c.files[c.files.length - 1];
      checkSummary(await chromiumShown(w.page, path.basename(last)), defaultDevice(stats(last)), `report ${path.basename(last)}`);
      const vf = await w.page.evaluate(viewAndFiles);
      assert.equal(vf.view, c.view || 'timeline');
      if (c.files.length > 1) assert.deepEqual(vf.files, c.files.map((f) => path.basename(f)));
      assert.deepEqual(w.foreign, [], 'no request but the page itself');
      assert.deepEqual(await w.page.evaluate(() => window.__cspViolations), []);
      assert.deepEqual(w.errors, []);
    } finally {
      await w.context.close();
    }
  }
});

// ---------- memlens serve ----------

function startServe(args) {
  const proc = spawn(MEMLENS, ['serve', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const url = new Promise((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/at (http:\/\/127\.0\.0\.1:\d+\/)/);
      if (m) resolve(m[1]);
    });
    proc.on('exit', (code) => reject(new Error(`memlens serve exited ${code}: ${out}`)));
  });
  return { proc, url };
}

test('memlens serve: 127.0.0.1 with files preloaded; a non-loopback bind is refused', async () => {
  const refused = spawnSync(MEMLENS, ['serve', '--bind', '0.0.0.0', '--port', '0', path.join(FIXTURES, 'p4_snapshot.pickle')], { encoding: 'utf8', timeout: 20000 });
  assert.equal(refused.status, 2);
  assert.match(refused.stderr, /^memlens: refusing to listen on 0\.0\.0\.0: .*--allow-remote/);

  const files = [largestSnapshot(), path.join(FIXTURES, 'p4_snapshot.pickle')];
  const s = startServe([...files, '--port', '0']);
  try {
    const base = await s.url;
    const origin = new URL(base).origin;
    const w = await watchedPage((u) => u.startsWith(`${origin}/`) || u.startsWith('blob:'));
    try {
      await w.page.goto(base);
      // Both open; the last is shown; the first through the file selector.
      checkSummary(await chromiumShown(w.page, path.basename(files[1])), defaultDevice(stats(files[1])), 'serve second file');
      await w.page.waitForFunction(() => document.querySelectorAll('[data-testid=file-select] option').length === 2);
      await w.page.selectOption('[data-testid=file-select]', { label: path.basename(files[0]) });
      checkSummary(await chromiumShown(w.page, path.basename(files[0])), defaultDevice(stats(files[0])), 'serve first file');
      assert.ok(w.requests.some((u) => u.includes('/files/0/')), 'the page fetched the served file');
      assert.deepEqual(w.foreign, []);
      assert.deepEqual(await w.page.evaluate(() => window.__cspViolations), []);
      assert.deepEqual(w.errors.filter((e) => !/favicon/.test(e)), []);
    } finally {
      await w.context.close();
    }
  } finally {
    s.proc.kill();
  }
});

// ---------- Firefox (Debian's firefox-esr, WebDriver BiDi) ----------

test('firefox: single file by file:// (drop, example) and a report, no network at all', async (t) => {
  if (!fs.existsSync(FIREFOX)) {
    skipOrFail(t, `${FIREFOX} not found (apt-get install firefox-esr)`);
    return;
  }
  // A command firefox leaves unanswered (NoAnswer) is the browser's, not the page's: the whole
  // scenario runs once more in a new browser, and the first try is reported. Any other failure
  // (a wrong summary, a request, a page error, a timed-out wait) fails at once.
  try {
    await firefoxScenario();
  } catch (e) {
    if (!(e instanceof NoAnswer)) throw e;
    t.diagnostic(`${e.message}; running the scenario again in a new firefox`);
    await firefoxScenario();
  }
});

async function firefoxScenario() {
  const ff = await Firefox.launch();
  try {
    const page1 = copyToEmptyFolder(SINGLE, 'memlens.html');
    const url = pathToFileURL(page1).href;
    await ff.goto(url);
    await ff.waitFor(() => document.getElementById('memlens')?.dataset.state === 'empty');
    for (const file of [path.join(FIXTURES, 'p4_snapshot.pickle'), largestSnapshot()]) {
      const name = path.basename(file);
      await ff.evaluate(dropFile, { name, b64: fs.readFileSync(file).toString('base64') });
      checkSummary(await ff.waitFor(shownSummary, name), defaultDevice(stats(file)), `firefox drop ${name}`);
    }
    await ff.evaluate(clickExample);
    checkSummary(await ff.waitFor(shownSummary, 'example.pickle'), defaultDevice(stats(path.join(DIST, 'example.pickle'))), 'firefox example');

    const snap = largestSnapshot();
    const report = path.join(fs.mkdtempSync(path.join(tmp, 'ff-report-')), 'report.html');
    memlensHtml([snap, '-o', report, '--view', 'segments']);
    const rurl = pathToFileURL(report).href;
    await ff.goto(rurl);
    checkSummary(await ff.waitFor(shownSummary, path.basename(snap)), defaultDevice(stats(snap)), 'firefox report');
    assert.equal((await ff.evaluate(viewAndFiles)).view, 'segments');

    const own = (u) => u === url || u === rurl || u.startsWith('blob:') || u.startsWith('data:') || u === 'about:blank';
    assert.deepEqual(ff.requests.filter((u) => !own(u)), [], 'no request but the pages themselves');
    assert.deepEqual(ff.errors, []);
  } finally {
    await ff.close();
  }
}
