// Many files at once in real headless Chromium (web/src/page/worker_pool.rs): files chosen
// together are decoded in parallel, one per decoding worker, and a file that fails does not stop
// the others.
//
// - 8 synthetic snapshots (`memlens synth`, different seeds) and one file of garbage chosen in
//   one go on `?workers=3#view=overview`: exactly 3 workers run, the 8 files open (the overview's
//   peaks equal `memlens stats --json`), and the garbage gives one error naming it;
// - 4 snapshots and a file whose decoding kills its worker (a list of 200 million `None`s: the
//   wasm allocator aborts) chosen together: the banner names that file, the 4 others open, the
//   dead worker is replaced (still 2 workers), and a file opened afterwards opens.
//
// Run: (cd tests/browser && node --test --test-concurrency=1 many_files.test.mjs)   after
// `scripts/serve.sh --build` and `cargo build --release -p memlens-cli`.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { serveDist, launchChromium } from './harness.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '../..');
const DIST = process.env.MEMLENS_DIST || path.join(ROOT, 'dist');
const OUT = path.join(ROOT, 'tests/out');
const PREFIX = '/memlens/';
const TARGET = process.env.CARGO_TARGET_DIR || path.join(ROOT, 'target');
const MEMLENS = process.env.MEMLENS_BIN || path.join(TARGET, 'release/memlens');

let server, base, context, page, dir;
const pageErrors = [];

function memlens(args) {
  if (!fs.existsSync(MEMLENS)) {
    throw new Error(`${MEMLENS} is missing: run \`cargo build --release -p memlens-cli\` first (scripts/test.sh does)`);
  }
  return execFileSync(MEMLENS, args, { maxBuffer: 1 << 28 }).toString();
}

/** `n` synthetic snapshots named rank_K.pickle (seed K), written once into `dir`. */
function ranks(n) {
  return Array.from({ length: n }, (_, k) => {
    const f = path.join(dir, `rank_${k}.pickle`);
    if (!fs.existsSync(f)) memlens(['synth', '-q', '--workload', 'training', '--events', '20000', '--seed', String(k + 1), '-o', f]);
    return f;
  });
}

before(async () => {
  assert.ok(fs.existsSync(path.join(DIST, 'index.html')), 'dist/ is missing: run `scripts/serve.sh --build` first');
  fs.mkdirSync(OUT, { recursive: true });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'memlens-many-'));
  ({ server, base } = await serveDist(DIST, PREFIX));
  context = await launchChromium({ width: 1400, height: 900 });
  await context.route('**/*', (route) => (/^http:\/\/127\.0\.0\.1:\d+\//.test(route.request().url())
    ? route.continue() : route.abort()));
  page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') pageErrors.push(m.text()); });
});

after(async () => {
  await context?.close();
  server?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** Opens the page on `query`#view=overview, idle and empty. */
async function fresh(query) {
  await page.goto('about:blank');
  await page.goto(`${base}${query}#view=overview`);
  await page.waitForSelector('#memlens[data-state=empty]');
}

/** Waits until the overview lists the files `names` (one device each) and no progress bar is left. */
async function overviewOf(names, timeout = 120000) {
  await page.waitForFunction((ns) => {
    const shown = [...document.querySelectorAll('tr[data-testid=overview-row]')].map((r) => r.dataset.file);
    return ns.every((n) => shown.includes(n)) && document.querySelectorAll('[data-testid=progress]').length === 0;
  }, names, { timeout });
  return page.$$eval('tr[data-testid=overview-row]', (rs) => rs.map((r) => ({ file: r.dataset.file, device: Number(r.dataset.device), peak: Number(r.dataset.peak) })));
}

/** The page's workers, once there are `n` (a worker started just now is listed a little later) or after 10 s. */
async function workers(n) {
  for (let t = 0; page.workers().length !== n && t < 40; t++) await page.waitForTimeout(250);
  return page.workers().length;
}

/** The error banner's texts. */
async function alerts() {
  return page.$$eval('[role=alert] span', (es) => es.map((e) => e.textContent.trim()));
}

test('8 files and a bad one chosen together: 3 workers decode them, 8 open, one error names the bad file', async () => {
  const files = ranks(8);
  const bad = path.join(dir, 'bad.pickle');
  fs.writeFileSync(bad, Buffer.from('this is not a snapshot at all\n'.repeat(100)));
  await fresh('?workers=3');
  await page.setInputFiles('[data-testid=file-input]', [...files.slice(0, 4), bad, ...files.slice(4)]);
  const names = files.map((f) => path.basename(f));
  const rows = await overviewOf(names);
  await page.waitForFunction(() => document.querySelectorAll('[role=alert]').length > 0);
  const texts = await alerts();
  assert.equal(texts.length, 1, `one error: ${JSON.stringify(texts)}`);
  assert.ok(texts[0].endsWith('bad.pickle'), `the error names the bad file: ${texts[0]}`);
  for (const n of names) assert.ok(!texts[0].includes(n), `${n} is not blamed: ${texts[0]}`);
  assert.equal(await workers(3), 3, 'as many decoding workers as asked, no more');
  assert.deepEqual(rows.map((r) => r.file).sort(), [...names].sort(), 'each good file opened once');
  const stats = memlens(['stats', '--json', ...files]).trim().split('\n').map((l) => JSON.parse(l));
  for (const [i, f] of files.entries()) {
    const want = stats[i].devices;
    const got = rows.filter((r) => r.file === path.basename(f));
    assert.deepEqual(got.map((r) => [r.device, r.peak]), want.map((d) => [d.device, d.timeline_peak_bytes]), `${path.basename(f)}: peaks = memlens stats`);
  }
  await page.screenshot({ path: path.join(OUT, 'many-files.png') });
});

test('a file that kills its worker among files decoding in parallel: it alone fails, the worker is replaced', async () => {
  const files = ranks(4);
  // protocol 2: EMPTY_LIST, MARK, 200 million NONE, APPENDS, STOP: the list outgrows wasm memory
  const killer = path.join(dir, 'nones-200M.pickle');
  const fd = fs.openSync(killer, 'w');
  fs.writeSync(fd, Buffer.from([0x80, 2, 0x5d, 0x28]));
  const chunk = Buffer.alloc(1 << 24, 0x4e);
  for (let i = 0; i < 200_000_000 / chunk.length; i++) fs.writeSync(fd, chunk);
  fs.writeSync(fd, Buffer.alloc(200_000_000 % chunk.length, 0x4e));
  fs.writeSync(fd, Buffer.from([0x65, 0x2e]));
  fs.closeSync(fd);
  await fresh('?workers=2');
  await page.setInputFiles('[data-testid=file-input]', [files[0], killer, ...files.slice(1)]);
  const names = files.map((f) => path.basename(f));
  const rows = await overviewOf(names);
  await page.waitForFunction(() => [...document.querySelectorAll('[role=alert]')].some((e) => e.textContent.includes('nones-200M.pickle')), null, { timeout: 60000 });
  const texts = await alerts();
  assert.equal(texts.length, 1, `one error: ${JSON.stringify(texts)}`);
  assert.match(texts[0], /decoding worker stopped/);
  assert.ok(texts[0].endsWith('nones-200M.pickle'), `the error names the file: ${texts[0]}`);
  assert.deepEqual([...new Set(rows.map((r) => r.file))].sort(), [...names].sort());
  assert.equal(await workers(2), 2, 'the dead worker was replaced, no worker more');
  // the files stay usable (those of the replaced worker were opened again there), and the next file opens
  await page.click(`tr[data-testid=overview-row][data-file="${names[1]}"]`);
  await page.waitForSelector('[data-testid=timeline-canvas]');
  const next = ranks(5)[4];
  await page.setInputFiles('[data-testid=file-input]', next);
  await page.waitForFunction((n) => {
    const r = document.getElementById('memlens');
    return r && r.dataset.file === n && r.dataset.state === 'ready' && !!r.dataset.firstPaintMs;
  }, path.basename(next), { timeout: 60000 });
  fs.rmSync(killer, { force: true });
});

test('no page errors', () => {
  assert.deepEqual(pageErrors, []);
});
