// End-to-end tests of the timeline's interactions in real headless Chromium, against the built
// dist/ served on 127.0.0.1 (same harness as viewer.test.mjs):
//
// - search by stack-frame text and by address: the count shown equals an independent count
//   (search_count.py reads the pickle with Python's own unpickler), the match rug is drawn, a
//   bad address says so, clearing removes it;
// - the x axis switches between event index and wall-clock time, and the URL hash keeps it;
// - shift-drag zooms to the dragged range (box zoom); a plain drag still pans;
// - speed, printed and never asserted: redraw times during zoom and pan, hover hit tests and
//   search times, on the real Wedsonlin snapshot and on a million-allocation `memlens synth`
//   trace, plus the time from choosing the file to the first painted timeline.
//
// Run: (cd tests/browser && node --test --test-concurrency=1)   after `scripts/serve.sh --build`.
// Env: MEMLENS_BIN, CHROMIUM, MEMLENS_DIST as in viewer.test.mjs.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { openViewer, openFile, waitShown, skipOrFail, DIST, OUT, SNAPS, MEMLENS, MARGIN_LEFT, MARGIN_RIGHT,
  MARGIN_TOP, MARGIN_BOTTOM } from './harness.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const WEDSONLIN = path.join(SNAPS, 'Wedsonlin__assignment2-systems__results_medium_1024_training_memory_snapshot.pickle');

let viewer, page, foreign, pageErrors, memlensLog;

/** The independent count (Python) of what a search should match. */
function pyCount(file, device, address, frame) {
  return Number(execFileSync('python3', [path.join(HERE, 'search_count.py'), file, String(device), address, frame]).toString().trim());
}

async function plotBox() {
  const b = await page.locator('[data-testid=timeline-canvas]').boundingBox();
  return { ...b, px: b.x + MARGIN_LEFT, py: b.y + MARGIN_TOP,
    pw: b.width - MARGIN_LEFT - MARGIN_RIGHT, ph: b.height - MARGIN_TOP - MARGIN_BOTTOM };
}

async function windowOf() {
  const w = await page.getAttribute('[data-testid=timeline-canvas]', 'data-window');
  return w.split(',').map(Number);
}

async function drawCount() {
  const log = await page.getAttribute('[data-testid=timeline-canvas]', 'data-draw-log');
  return log ? log.split(',').length : 0;
}

/** Waits until the canvas has drawn more than `n` times in all (the log keeps the last 50). */
async function waitDraw(n) {
  await page.waitForFunction((k) => {
    const l = document.querySelector('[data-testid=timeline-canvas]')?.dataset.drawLog;
    return l && (l.split(',').length > k || l.split(',').length >= 50);
  }, n);
}

/** Types into a search box and waits for the count (or an error) for that query. */
async function search(which, text) {
  await page.fill(`[data-testid=search-${which}]`, text);
  if (!text) return null;
  await page.waitForFunction(() => {
    const c = document.querySelector('[data-testid=search-count]');
    return c && (c.dataset.count !== undefined || c.dataset.error);
  });
  return page.$eval('[data-testid=search-count]', (c) => ({ count: c.dataset.count === undefined ? null : Number(c.dataset.count), error: !!c.dataset.error, text: c.textContent }));
}

/** Reddish pixels in the rug row (the top of the plot). */
async function rugPixels() {
  return page.evaluate(([ml, mt]) => {
    const c = document.querySelector('[data-testid=timeline-canvas]');
    const dpr = c.width / c.clientWidth;
    const d = c.getContext('2d').getImageData(0, Math.round((mt + 1.5) * dpr), c.width, 1).data;
    let n = 0;
    for (let i = Math.round(ml * dpr) * 4; i < d.length; i += 4) if (d[i] > 180 && d[i + 1] < 90 && d[i + 2] < 90) n++;
    return n;
  }, [MARGIN_LEFT, MARGIN_TOP]);
}

before(async () => {
  viewer = await openViewer({ strict: true });
  ({ page, foreign, pageErrors, log: memlensLog } = viewer);
  await page.goto(viewer.base);
  await page.click('[data-testid=open-example]');
  await waitShown(page, 'example.pickle');
});

after(async () => {
  await viewer?.close();
});

function stat(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p) => s[Math.min(s.length - 1, Math.floor(p * (s.length - 1)))];
  return `median ${q(0.5).toFixed(1)} ms, p90 ${q(0.9).toFixed(1)} ms, max ${s[s.length - 1].toFixed(1)} ms (${s.length} samples)`;
}

/** Zooms and pans like a user and returns the draw times it caused. */
async function zoomAndPan() {
  const b = await plotBox();
  await page.mouse.move(b.px + b.pw * 0.5, b.py + b.ph * 0.5);
  await page.mouse.dblclick(b.px + b.pw * 0.5, b.py + b.ph * 0.5);
  const start = await drawCount();
  let n = start;
  const step = async (fn) => { await fn(); await waitDraw(n); n = Math.min(50, await drawCount()); };
  for (let i = 0; i < 6; i++) await step(() => page.mouse.wheel(0, -400));
  for (let i = 0; i < 6; i++) {
    await page.mouse.move(b.px + b.pw * 0.6, b.py + b.ph * 0.5);
    await page.mouse.down();
    await step(() => page.mouse.move(b.px + b.pw * 0.3, b.py + b.ph * 0.5, { steps: 1 }));
    await page.mouse.up();
  }
  for (let i = 0; i < 6; i++) await step(() => page.mouse.wheel(0, 400));
  const log = (await page.getAttribute('[data-testid=timeline-canvas]', 'data-draw-log')).split(',').map(Number);
  return log.slice(-Math.min(18, log.length));
}

/** Hover hit-test times over a grid of points. */
async function hoverTimes() {
  const b = await plotBox();
  const out = [];
  for (let i = 0; i < 30; i++) {
    await page.mouse.move(b.px + b.pw * ((i % 10) + 0.5) / 10, b.py + b.ph * (0.3 + 0.2 * Math.floor(i / 10)));
    const v = await page.getAttribute('[data-testid=timeline-canvas]', 'data-hit-ms');
    if (v) out.push(Number(v));
  }
  return out;
}

test('search by frame text and by address: counts match an independent count', async () => {
  const example = path.join(DIST, 'example.pickle');
  // Red pixels along the top before a search (an `oom` marker line crosses it).
  const redBefore = await rugPixels();
  let r = await search('frame', 'train.py');
  assert.equal(r.count, pyCount(example, 0, '', 'train.py'));
  assert.ok(r.count > 0);
  assert.match(r.text, /match/);
  // Matches are marked on the rug along the top of the plot.
  await page.waitForFunction((n) => {
    const c = document.querySelector('[data-testid=timeline-canvas]');
    const dpr = c.width / c.clientWidth;
    const d = c.getContext('2d').getImageData(0, Math.round(19.5 * dpr), c.width, 1).data;
    let red = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] > 180 && d[i + 1] < 90 && d[i + 2] < 90) red++;
    return red > n + 10;
  }, redBefore);
  await page.screenshot({ path: path.join(OUT, 'search-frame.png') });
  r = await search('frame', 'no-such-frame-anywhere');
  assert.equal(r.count, 0);
  await search('frame', '');

  // An address from a band's tooltip: every use of that address matches.
  const b = await plotBox();
  let label = null;
  for (let fx = 0.1; fx < 1 && !label; fx += 0.05) {
    await page.mouse.move(b.px + b.pw * fx, b.py + b.ph * 0.9);
    const t = await page.locator('[data-testid=tooltip]').count() ? await page.textContent('[data-testid=tooltip]') : '';
    label = (t.match(/b'([0-9a-f]+)_\d+/) || [])[1] || null;
  }
  assert.ok(label, 'no band with a tooltip found');
  r = await search('address', `0x${label}`);
  assert.equal(r.count, pyCount(example, 0, label, ''));
  assert.ok(r.count >= 1);
  // Both boxes: an allocation must match both.
  r = await search('frame', 'train');
  assert.equal(r.count, pyCount(example, 0, label, 'train'));
  await search('frame', '');
  r = await search('address', 'not-hex');
  assert.ok(r.error, 'a bad address is reported');
  await search('address', '');
  assert.equal(await page.locator('[data-testid=search-count]').count(), 0);
  await page.waitForFunction((n) => {
    const c = document.querySelector('[data-testid=timeline-canvas]');
    const d = c.getContext('2d').getImageData(0, Math.round(19.5 * c.width / c.clientWidth), c.width, 1).data;
    let red = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] > 180 && d[i + 1] < 90 && d[i + 2] < 90) red++;
    return red <= n;
  }, redBefore);
});

test('x axis: event index or wall-clock time, kept in the URL hash', async () => {
  const canvas = '[data-testid=timeline-canvas]';
  assert.equal(await page.getAttribute(canvas, 'data-axis'), 'events');
  const before = await page.$eval(canvas, (c) => c.toDataURL());
  await page.selectOption('[data-testid=x-axis]', 'time');
  await page.waitForFunction(() => document.querySelector('[data-testid=timeline-canvas]').dataset.axis === 'time');
  await page.waitForFunction(() => /axis=time/.test(location.hash));
  assert.match(await page.textContent('[data-testid=time-origin]'), /0 s = \d{4}-\d\d-\d\dT/);
  const after = await page.$eval(canvas, (c) => c.toDataURL());
  assert.notEqual(before, after, 'the plot is redrawn on the time axis');
  await page.screenshot({ path: path.join(OUT, 'time-axis.png') });
  // The hash drives it back.
  await page.evaluate(() => { location.hash = location.hash.replace('&axis=time', ''); });
  await page.waitForFunction(() => document.querySelector('[data-testid=timeline-canvas]').dataset.axis === 'events');
  assert.equal(await page.$eval('[data-testid=x-axis]', (s) => s.value), 'events');
});

test('shift-drag zooms to the dragged range; a plain drag pans', async () => {
  const b = await plotBox();
  await page.mouse.dblclick(b.px + b.pw / 2, b.py + b.ph / 2);
  await page.waitForFunction(() => !/x0=/.test(location.hash));
  const [a0, a1] = await windowOf();
  await page.keyboard.down('Shift');
  await page.mouse.move(b.px + b.pw * 0.2, b.py + b.ph * 0.5);
  await page.mouse.down();
  await page.mouse.move(b.px + b.pw * 0.3, b.py + b.ph * 0.5, { steps: 3 });
  await page.mouse.move(b.px + b.pw * 0.4, b.py + b.ph * 0.5, { steps: 3 });
  assert.equal(await page.locator('[data-testid=zoom-box]').count(), 1, 'the box shows while dragging');
  await page.screenshot({ path: path.join(OUT, 'box-zoom-drag.png') });
  await page.mouse.up();
  await page.keyboard.up('Shift');
  await page.waitForFunction(() => /x0=/.test(location.hash));
  const [z0, z1] = await windowOf();
  const span = a1 - a0;
  assert.ok(Math.abs(z0 - (a0 + 0.2 * span)) < 0.02 * span + 1, `box start ${z0}`);
  assert.ok(Math.abs(z1 - (a0 + 0.4 * span)) < 0.02 * span + 1, `box end ${z1}`);
  assert.equal(await page.locator('[data-testid=zoom-box]').count(), 0);
  // A plain drag to the right moves the window left by the same share, width unchanged.
  await page.mouse.move(b.px + b.pw * 0.5, b.py + b.ph * 0.5);
  await page.mouse.down();
  await page.mouse.move(b.px + b.pw * 0.6, b.py + b.ph * 0.5, { steps: 4 });
  await page.mouse.up();
  await page.waitForFunction((z) => Number(document.querySelector('[data-testid=timeline-canvas]').dataset.window.split(',')[0]) < z, z0);
  const [p0, p1] = await windowOf();
  assert.ok(Math.abs((p1 - p0) - (z1 - z0)) < 0.01 * (z1 - z0) + 0.05, 'pan keeps the width');
  assert.ok(Math.abs((z0 - p0) - 0.1 * (z1 - z0)) < 0.02 * (z1 - z0) + 0.05, `pan by a tenth: ${z0} → ${p0}`);
  await page.screenshot({ path: path.join(OUT, 'box-zoomed.png') });
});

test('Allocated Memory (incl. Private Pools): pool envelopes with their allocations inside', async () => {
  // The core test's snapshot (layout/tests.rs): pool (1, 42) reserves 4 KiB, 12 KiB while an
  // extra segment lives (events 5 and 6); default-pool allocations sit above its envelope.
  const file = path.join(os.tmpdir(), 'memlens-e2e-pools.json');
  fs.writeFileSync(file, JSON.stringify({
    segments: [
      { device: 0, address: 65536, total_size: 4096, stream: 0, segment_pool_id: [1, 42], blocks: [
        { address: 65536, size: 1024, requested_size: 0, state: 'inactive', frames: [] },
        { address: 66560, size: 512, requested_size: 500, state: 'active_allocated', frames: [] },
        { address: 67072, size: 2560, requested_size: 0, state: 'inactive', frames: [] }] },
      { device: 0, address: 1048576, total_size: 1024, stream: 0, segment_pool_id: [0, 0], blocks: [
        { address: 1048576, size: 256, requested_size: 100, state: 'active_allocated', frames: [] },
        { address: 1048832, size: 768, requested_size: 50, state: 'active_allocated', frames: [] }] }],
    device_traces: [[
      { action: 'alloc', addr: 1048576, size: 100, stream: 0, time_us: 1 },
      { action: 'alloc', addr: 65536, size: 1000, stream: 0, time_us: 2 },
      { action: 'alloc', addr: 1048832, size: 50, stream: 0, time_us: 3 },
      { action: 'alloc', addr: 66560, size: 500, stream: 0, time_us: 4 },
      { action: 'free_completed', addr: 65536, size: 1000, stream: 0, time_us: 5 },
      { action: 'segment_alloc', addr: 131072, size: 8192, stream: 0, time_us: 6, pool_id: [1, 42] },
      { action: 'segment_free', addr: 131072, size: 8192, stream: 0, time_us: 7, pool_id: [1, 42] }]],
  }));
  await openFile(page, file);
  await page.selectOption('[data-testid=view-select]', 'allocated');
  await page.waitForFunction(() => /view=allocated/.test(location.hash));
  // x = 6 (event 5) to 7: the envelope is 12 KiB; its lower part holds the pool's allocation.
  await page.evaluate(() => { location.hash = location.hash.replace(/&x0=[^&]*&x1=[^&]*/, '') + '&x0=5&x1=8'; });
  await page.waitForFunction(() => document.querySelector('[data-testid=timeline-canvas]')?.dataset.window === '5.00,8.00');
  const b = await plotBox();
  const tipAt = async (fx, fy) => {
    await page.mouse.move(b.px + b.pw * fx, b.py + b.ph * fy);
    return await page.locator('[data-testid=tooltip]').count() ? page.textContent('[data-testid=tooltip]') : '';
  };
  // Plot y: 0 at the bottom, 1.05 × 12438 bytes at the top; x = 6.5 is half-way.
  const fyOf = (bytes) => 1 - bytes / (12438 * 1.05);
  const envelope = await tipAt(0.5, fyOf(6000));
  assert.match(envelope, /private pool \(1, 42\) stream 0 12 KiB \(12288 bytes\)/);
  const inside = await tipAt(0.5, fyOf(250));
  assert.match(inside, /b'10400_0 500 B/);
  assert.match(inside, /private pool \(1, 42\)/);
  const above = await tipAt(0.5, fyOf(12288 + 100 + 25));
  assert.match(above, /b'100100_0 50 B/);
  await page.screenshot({ path: path.join(OUT, 'allocated-pools.png') });
  await page.selectOption('[data-testid=view-select]', 'timeline');
  fs.rmSync(file, { force: true });
});

test('real snapshot (Wedsonlin 1024): search count, redraw and hover timings', async (t) => {
  if (!fs.existsSync(WEDSONLIN)) {
    skipOrFail(t, `${WEDSONLIN} not found`);
    return;
  }
  await openFile(page, WEDSONLIN);
  const fp = await page.evaluate(() => Number(document.getElementById('memlens').dataset.firstPaintMs));
  console.log(`Wedsonlin 1024 (${fs.statSync(WEDSONLIN).size} bytes): first paint ${fp.toFixed(0)} ms`);
  const r = await search('frame', 'forward');
  assert.equal(r.count, pyCount(WEDSONLIN, 0, '', 'forward'));
  console.log(`  search "forward": ${r.text}`);
  await page.screenshot({ path: path.join(OUT, 'wedsonlin-search.png') });
  await search('frame', '');
  console.log(`  redraw during zoom/pan: ${stat(await zoomAndPan())}`);
  const h = await hoverTimes();
  if (h.length) console.log(`  hover hit test: ${stat(h)}`);
});

test('a million allocations: first paint, redraw, hover and search timings', async (t) => {
  const file = path.join(os.tmpdir(), 'memlens-e2e-timeline-1m.pickle');
  try {
    execFileSync(MEMLENS, ['synth', '--workload', 'training', '--events', '1000000', '--seed', '1', '-o', file, '-q']);
  } catch {
    skipOrFail(t, 'memlens synth not available');
    return;
  }
  memlensLog.length = 0;
  await openFile(page, file, { timeout: 120000 });
  const fp = await page.evaluate(() => Number(document.getElementById('memlens').dataset.firstPaintMs));
  // A trace this long is first drawn from the sampled preview layout, then from the exact one.
  assert.ok(memlensLog.some((l) => /first painted \d+ ms after it was chosen \(preview layout\)/.test(l)), memlensLog.join('\n'));
  await page.waitForFunction(() => document.getElementById('memlens').dataset.layout === 'exact', null, { timeout: 120000 });
  const exact = await page.evaluate(() => Number(document.getElementById('memlens').dataset.exactPaintMs));
  assert.ok(exact >= fp, `exact layout painted at ${exact} ms, before the first paint at ${fp} ms`);
  const decoded = ((await page.textContent('.toolbar')).match(/decoded in (\d+) ms/) || [])[1];
  console.log(`synth 1M events (${fs.statSync(file).size} bytes): first paint ${fp.toFixed(0)} ms (preview layout; decode ${decoded} ms), exact layout painted at ${exact.toFixed(0)} ms`);
  // The worker's memory: what it held before the file, and after the model was built.
  const mem = await page.$eval('[data-model-memory-bytes]', (e) => ({ model: Number(e.dataset.modelMemoryBytes), before: Number(e.dataset.memoryBeforeBytes) }));
  assert.ok(mem.before > 0 && mem.model > mem.before, JSON.stringify(mem));
  // Of the decode's time, what it waited for the file's reads (a plain pickle: measured).
  const waited = Number(await page.getAttribute('[data-read-wait-ms]', 'data-read-wait-ms'));
  assert.ok(waited >= 0 && waited <= Number(decoded), `waited ${waited} ms of a ${decoded} ms decode`);
  console.log(`  worker memory: ${(mem.before / 1e6).toFixed(1)} MB before the file, ${(mem.model / 1e6).toFixed(1)} MB with the model (${((mem.model - mem.before) / fs.statSync(file).size).toFixed(2)}× the file added)`);
  for (const l of memlensLog) console.log(`  ${l}`);
  const d = await page.$eval('[data-testid=timeline-canvas]', (c) => ({ ...c.dataset }));
  console.log(`  full zoom-out draw ${d.drawMs} ms (bands ${d.renderMs} ms, of which canvas calls ${d.paintMs} ms): ${d.bands} bands drawn one by one, ${d.rects} rects`);
  console.log(`  redraw during zoom/pan: ${stat(await zoomAndPan())}`);
  const h = await hoverTimes();
  if (h.length) console.log(`  hover hit test: ${stat(h)}`);
  const r = await search('frame', 'forward');
  assert.ok(r.count > 0);
  console.log(`  search "forward": ${r.text}`);
  const r2 = await search('address', '7f');
  console.log(`  search address "7f" + "forward": ${r2.text}`);
  await page.waitForTimeout(300);
  await page.screenshot({ path: path.join(OUT, 'synth-1m-search.png') });
  await search('address', '');
  await search('frame', '');
  await page.selectOption('[data-testid=x-axis]', 'time');
  await page.waitForFunction(() => document.querySelector('[data-testid=timeline-canvas]').dataset.axis === 'time');
  console.log(`  time axis: redraw during zoom/pan: ${stat(await zoomAndPan())}`);
  await page.screenshot({ path: path.join(OUT, 'synth-1m-time.png') });
  await page.selectOption('[data-testid=x-axis]', 'events');
  fs.rmSync(file, { force: true });
});

test('no request left 127.0.0.1, and no page errors', async () => {
  assert.deepEqual(foreign, []);
  assert.deepEqual(pageErrors, []);
});
