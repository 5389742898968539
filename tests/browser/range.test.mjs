// Part of a trace in the viewer, in real headless Chromium: a page opened with `#range=last:N`
// (or an event range) opens each file with only that part of each device's trace, and its
// summary strip equals `memlens stats --json --last N` of the same file (the allocator state
// outside the part stays exact: the final segments are the file's); the range stays in the
// hash and is shown in the header; a range that cannot be read ends in the banner. The rows
// outside the part go while the file is decoded (core's `range::PartLoader`, whose core test
// shows it gives the model of cutting the whole one afterwards): on a file of 1M events,
// `#range=last:2000` gives the CLI's numbers without the whole trace's columns in the worker's
// memory. A file whose first chunks foretell a decode past the worker's limit (lowered by the
// page's `?limit_mb=` test hook) is refused with a prompt offering its last N events (as many
// as fit); choosing them opens that part with `memlens stats --last N`'s numbers. The same
// file gzipped is refused the same way, on the decompressed size its first chunks foretell.
//
// Run: (cd tests/browser && node --test --test-concurrency=1 range.test.mjs) after
// `scripts/serve.sh --build`. Env: MEMLENS_BIN (default: <target>/release/memlens, `cargo build
// --release -p memlens-cli`), CHROMIUM, MEMLENS_DIST.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import zlib from 'node:zlib';
import { openViewer, watchPage, waitShown, statsJson, memlens, skipOrFail, SNAPS } from './harness.mjs';

const REAL = 'Wedsonlin__assignment2-systems__results_medium_1024_training_memory_snapshot.pickle';
const METRICS = ['reserved_bytes', 'allocated_bytes', 'active_bytes', 'timeline_peak_bytes',
  'peak_reserved_bytes', 'trace_entries'];

let viewer;
const pageErrors = [];

async function openPage(hash) {
  const page = await viewer.context.newPage();
  watchPage(page, pageErrors);
  await page.goto(`${viewer.base}${hash}`);
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
  await waitShown(page, REAL);
}

before(async () => {
  viewer = await openViewer({ strict: true });
});

after(async () => {
  await viewer?.close();
});

test('#range= opens part of each trace, with the numbers of memlens --last/--range', async (t) => {
  const file = path.join(SNAPS, REAL);
  if (!fs.existsSync(file)) { skipOrFail(t, `${SNAPS} not found`); return; }
  for (const [range, args] of [['last:300', ['--last', '300']], ['1000..2500', ['--range', '1000..2500']]]) {
    const page = await openPage(`#range=${encodeURIComponent(range)}`);
    await openReal(page);
    const want = statsJson(...args, file).devices[0];
    const got = await summary(page);
    for (const k of METRICS) assert.equal(got[k], String(want[k]), `${range}: ${k}`);
    assert.equal(await page.textContent('[data-testid=range]'), `part: ${range}`);
    assert.ok((await page.evaluate(() => location.hash)).includes(`range=${encodeURIComponent(range)}`));
    await page.close();
  }
  // the whole file has more entries and the same final segments as its last part
  const whole = statsJson(file).devices[0];
  assert.ok(whole.trace_entries > 300);
  assert.equal(statsJson('--last', '300', file).devices[0].reserved_bytes, whole.reserved_bytes);
});

test('#range=last:N keeps only N rows while decoding: same numbers, less worker memory', async () => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'memlens-range-')), 'long.pickle');
  memlens(['synth', '-q', '--workload', 'training', '--events', '1000000', '--seed', '3', '-o', file]);
  const memory = async (page) => Number(await page.getAttribute('[data-model-memory-bytes]', 'data-model-memory-bytes'))
    - Number(await page.getAttribute('[data-memory-before-bytes]', 'data-memory-before-bytes'));
  const open = async (hash) => {
    const page = await openPage(hash);
    await page.setInputFiles('[data-testid=file-input]', file);
    await waitShown(page, 'long.pickle');
    return page;
  };
  const whole = await open('');
  const wholeBytes = await memory(whole);
  await whole.close();
  const part = await open(`#range=${encodeURIComponent('last:2000')}`);
  const partBytes = await memory(part);
  const want = statsJson('--last', '2000', file).devices[0];
  const got = await summary(part);
  for (const k of METRICS) assert.equal(got[k], String(want[k]), `last:2000: ${k}`);
  await part.close();
  if (process.env.MEMLENS_E2E_VERBOSE) console.log(`worker memory added: whole ${wholeBytes} B, last:2000 ${partBytes} B`);
  // The trace columns cost 29 B an entry; the pickle's memo (4 B a memoized object) is still
  // read whole, so the saving is below that: at least 12 B an entry.
  const entries = statsJson(file).devices[0].trace_entries;
  assert.ok(wholeBytes - partBytes >= 12 * entries,
    `last:2000 took ${partBytes} B of worker memory, the whole file (${entries} entries) ${wholeBytes} B`);
  fs.rmSync(path.dirname(file), { recursive: true, force: true });
});

/** Opens `file` (the snapshot `plain`, or it gzipped) under ?limit_mb=24: refused with an offer,
 *  whose last N events then open with `memlens stats --last N`'s numbers of `plain`; the
 *  estimate of the prompt. */
async function refusedThenPart(file, plain) {
  const name = path.basename(file);
  // the page's test hook lowers the limit from ~2 GB of decoder memory to 24 MB
  const page = await viewer.context.newPage();
  watchPage(page, pageErrors);
  await page.goto(`${viewer.base}?limit_mb=24`);
  await page.waitForSelector('#memlens[data-state=empty]');
  const t0 = Date.now();
  await page.setInputFiles('[data-testid=file-input]', file);
  const prompt = await page.waitForSelector('[data-testid=too-large]', { timeout: 60000 });
  const text = await prompt.textContent();
  assert.ok(text.includes(`${name} (`) && text.includes('is too large to open whole here'), text);
  const fits = Number(await prompt.getAttribute('data-last-fits'));
  const estimated = Number(await prompt.getAttribute('data-estimated-bytes'));
  if (process.env.MEMLENS_E2E_VERBOSE) console.log(`${name}: estimated ${estimated} B, ${fits} fit`);
  assert.ok(estimated > 24e6, `${name}: estimated ${estimated} B`);
  assert.ok(fits > 0 && fits < 400000, `${name}: ${fits} events fit`);
  assert.equal(Number(await page.inputValue('[data-testid=too-large-last]')), fits);
  // nothing left loading, no file shown, no error banner
  assert.equal(await page.$('[data-testid=error]'), null);
  assert.equal(await page.getAttribute('#memlens', 'data-state'), 'empty');
  const n = Math.min(fits, 3000);
  await page.fill('[data-testid=too-large-last]', String(n));
  await page.click('[data-testid=open-last]');
  await waitShown(page, name);
  const ms = Date.now() - t0;
  const want = statsJson('--last', String(n), plain).devices[0];
  const got = await summary(page);
  for (const k of METRICS) assert.equal(got[k], String(want[k]), `${name} last:${n}: ${k}`);
  assert.equal(await page.textContent('[data-testid=range]'), `part: last:${n}`);
  assert.ok((await page.evaluate(() => location.hash)).includes(`range=${encodeURIComponent(`last:${n}`)}`));
  assert.equal(await page.$('[data-testid=too-large]'), null);
  if (process.env.MEMLENS_E2E_VERBOSE) console.log(`${name} refused (estimate ${estimated} B, ${fits} fit), last:${n} shown ${ms} ms after the drop`);
  await page.close();
  return estimated;
}

test('a file past the size limit is refused at once with an offer; its last N events open with the CLI\'s numbers; gzipped, the same', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'memlens-limit-'));
  const file = path.join(dir, 'big.pickle');
  memlens(['synth', '-q', '--workload', 'training', '--events', '400000', '--seed', '4', '-o', file]);
  const plain = await refusedThenPart(file, file);
  // a .gz is checked on the decompressed size its first chunks foretell (erring high)
  const gz = path.join(dir, 'big.pickle.gz');
  fs.writeFileSync(gz, zlib.gzipSync(fs.readFileSync(file)));
  const zipped = await refusedThenPart(gz, file);
  assert.ok(zipped >= 0.9 * plain && zipped < 2 * plain, `estimate of the .gz ${zipped} B, of the pickle ${plain} B`);
  fs.rmSync(dir, { recursive: true, force: true });
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
