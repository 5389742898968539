// Part of a trace in the viewer, in real headless Chromium: a page opened with `#range=last:N`
// (or an event range) opens each file with only that part of each device's trace, and its
// summary strip equals `memlens stats --json --last N` of the same file (the allocator state
// outside the part stays exact: the final segments are the file's); the range stays in the
// hash and is shown in the header; a range that cannot be read ends in the banner.
//
// Run: (cd tests/browser && node --test --test-concurrency=1 range.test.mjs) after
// `scripts/serve.sh --build`. Env: MEMLENS_BIN (default: <target>/release/memlens, built if
// missing), CHROMIUM, MEMLENS_DIST.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { serveDist, launchChromium, skipOrFail } from './harness.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '../..');
const DIST = process.env.MEMLENS_DIST || path.join(ROOT, 'dist');
const SNAPS = path.resolve(ROOT, '../shared/snapshots');
const PREFIX = '/memlens/';
const TARGET = process.env.CARGO_TARGET_DIR || path.join(ROOT, 'target');
const MEMLENS = process.env.MEMLENS_BIN || path.join(TARGET, 'release/memlens');
const REAL = 'Wedsonlin__assignment2-systems__results_medium_1024_training_memory_snapshot.pickle';
const METRICS = ['reserved_bytes', 'allocated_bytes', 'active_bytes', 'timeline_peak_bytes',
  'peak_reserved_bytes', 'trace_entries'];

let server, base, context;
const pageErrors = [];

function stats(args) {
  if (!fs.existsSync(MEMLENS)) {
    execFileSync('cargo', ['build', '--release', '-p', 'memlens-cli'], { cwd: ROOT, stdio: 'inherit' });
  }
  return JSON.parse(execFileSync(MEMLENS, ['stats', '--json', ...args], { maxBuffer: 1 << 28 }).toString());
}

async function openPage(hash) {
  const page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') pageErrors.push(m.text()); });
  await page.goto(`${base}${hash}`);
  await page.waitForSelector('#memlens[data-state=empty]');
  return page;
}

async function summary(page) {
  return page.evaluate(() => {
    const m = {};
    for (const e of document.querySelectorAll('[data-testid=summary] [data-metric]')) m[e.dataset.metric] = e.dataset.value;
    return m;
  });
}

async function openReal(page) {
  await page.setInputFiles('[data-testid=file-input]', path.join(SNAPS, REAL));
  await page.waitForFunction((n) => {
    const r = document.getElementById('memlens');
    return r && r.dataset.file === n && r.dataset.state === 'ready' && !!r.dataset.firstPaintMs;
  }, REAL, { timeout: 60000 });
}

before(async () => {
  assert.ok(fs.existsSync(path.join(DIST, 'index.html')), 'dist/ is missing: run `scripts/serve.sh --build` first');
  ({ server, base } = await serveDist(DIST, PREFIX));
  context = await launchChromium({ width: 1400, height: 860 });
  await context.route('**/*', (route) => (/^http:\/\/127\.0\.0\.1:\d+\//.test(route.request().url())
    ? route.continue() : route.abort()));
});

after(async () => {
  await context?.close();
  server?.close();
});

test('#range= opens part of each trace, with the numbers of memlens --last/--range', async (t) => {
  const file = path.join(SNAPS, REAL);
  if (!fs.existsSync(file)) { skipOrFail(t, `${SNAPS} not found`); return; }
  for (const [range, args] of [['last:300', ['--last', '300']], ['1000..2500', ['--range', '1000..2500']]]) {
    const page = await openPage(`#range=${encodeURIComponent(range)}`);
    await openReal(page);
    const want = stats([...args, file]).devices[0];
    const got = await summary(page);
    for (const k of METRICS) assert.equal(got[k], String(want[k]), `${range}: ${k}`);
    assert.equal(await page.textContent('[data-testid=range]'), `part: ${range}`);
    assert.ok((await page.evaluate(() => location.hash)).includes(`range=${encodeURIComponent(range)}`));
    await page.close();
  }
  // the whole file has more entries and the same final segments as its last part
  const whole = stats([file]).devices[0];
  assert.ok(whole.trace_entries > 300);
  assert.equal(stats(['--last', '300', file]).devices[0].reserved_bytes, whole.reserved_bytes);
});

test('a range that cannot be read ends in the banner', async (t) => {
  if (!fs.existsSync(path.join(SNAPS, REAL))) { skipOrFail(t, `${SNAPS} not found`); return; }
  const page = await openPage('#range=900..100');
  await page.setInputFiles('[data-testid=file-input]', path.join(SNAPS, REAL));
  await page.waitForSelector('[role=alert]', { timeout: 30000 });
  assert.match(await page.textContent('[role=alert] span'), /empty range 900\.\.100: FROM is past TO: Wedsonlin/);
  await page.close();
});

test('no page errors', () => {
  assert.deepEqual(pageErrors, []);
});
