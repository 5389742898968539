// End-to-end tests of the built viewer (dist/) in real headless Chromium.
//
// - dist/ is served on 127.0.0.1 under a sub-path (/memlens/) by a tiny static server written
//   here, so the page must use relative URLs;
// - every request the browser makes is recorded, and anything not on 127.0.0.1 is aborted and
//   fails the run;
// - the example and every real snapshot in ../shared/snapshots are opened through the file
//   input, and the summary strip is checked against `memlens stats --json`;
// - a band is clicked and its stack read; a bad file is dropped and the banner checked;
//   screenshots go to tests/out/.
//
// Run: (cd tests/browser && npm install && node --test)   after `trunk build --release --offline`.
// Env: MEMLENS_BIN (default: <target>/release/memlens; `cargo build --release -p memlens-cli`), CHROMIUM (default
// /usr/bin/chromium), MEMLENS_DIST (default: <repo>/dist).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { openViewer, summary as summaryOf, statsJson, defaultDevice, skipOrFail, DIST, OUT, SNAPS, MEMLENS } from './harness.mjs';

const METRICS = ['reserved_bytes', 'allocated_bytes', 'active_bytes', 'inactive_split_bytes',
  'largest_free_block_bytes', 'timeline_peak_bytes', 'peak_reserved_bytes', 'trace_entries'];

let viewer, base, page, foreign, pageErrors;
const requests = [];

const summary = () => summaryOf(page);

function checkSummary(sum, dev, label) {
  assert.ok(sum, `${label}: no summary strip`);
  assert.equal(sum.device, String(dev.device), `${label}: summary device`);
  for (const k of METRICS) {
    assert.equal(sum.metrics[k], String(dev[k]), `${label}: ${k}`);
  }
}

/** Waits until `name` is the file shown and painted (or shown without a device to paint). */
async function waitShown(name, timeout = 60000) {
  await page.waitForFunction((n) => {
    const r = document.getElementById('memlens');
    if (!r || r.dataset.file !== n) return false;
    if (r.dataset.state !== 'ready') return false;
    return !!r.dataset.firstPaintMs || !document.querySelector('[data-testid=summary]');
  }, name, { timeout });
}

async function openFile(file) {
  await page.setInputFiles('[data-testid=file-input]', file);
  await waitShown(path.basename(file));
}

/** Moves over the plot until the tooltip shows; returns that point. */
async function findBand() {
  const box = await page.locator('[data-testid=timeline-canvas]').boundingBox();
  for (const fy of [0.92, 0.85, 0.75, 0.6, 0.45]) {
    for (let fx = 0.15; fx < 0.98; fx += 0.04) {
      const x = box.x + box.width * fx;
      const y = box.y + box.height * fy;
      await page.mouse.move(x, y);
      if (await page.locator('[data-testid=tooltip]').count()) return { x, y };
    }
  }
  return null;
}

before(async () => {
  viewer = await openViewer({ strict: true });
  ({ base, page, foreign, pageErrors } = viewer);
  viewer.context.on('request', (r) => {
    requests.push(r.url());
    if (!/^http:\/\/127\.0\.0\.1:\d+\//.test(r.url()) && !r.url().startsWith('blob:') && !r.url().startsWith('data:')) foreign.push(r.url());
  });
});

after(async () => {
  await viewer?.close();
});

test('empty state says nothing leaves the machine', async () => {
  await page.goto(base);
  await page.waitForSelector('#memlens[data-state=empty]');
  const text = await page.textContent('[data-testid=empty]');
  assert.match(text, /Nothing leaves this machine/);
  const views = await page.$$eval('[data-testid=view-select] option', (o) => o.map((x) => x.textContent));
  assert.deepEqual(views, ['Active Memory Timeline', 'Allocated Memory (incl. Private Pools)',
    'Allocator State History', 'Active Cached Segment Timeline', 'Allocator Settings', 'Diagnosis', 'Files overview (ranks)', 'Compare two files']);
  await page.screenshot({ path: path.join(OUT, 'empty.png') });
});

test('built-in example: summary, band click, stack, hash, views', async () => {
  await page.click('[data-testid=open-example]');
  await waitShown('example.pickle');
  const st = statsJson(path.join(DIST, 'example.pickle'));
  checkSummary(await summary(), defaultDevice(st), 'example');
  const hash = await page.evaluate(() => location.hash);
  assert.match(hash, /file=example\.pickle/);
  assert.match(hash, /device=0/);
  assert.match(hash, /view=timeline/);

  const at = await findBand();
  assert.ok(at, 'no band found under the pointer');
  const tip = await page.textContent('[data-testid=tooltip]');
  assert.match(tip, /b'[0-9a-f]+_\d+ .*bytes/);
  assert.match(tip, /alive /);
  await page.mouse.click(at.x, at.y);
  await page.waitForSelector('[data-testid=stack-panel] .ctx-head');
  const panel = await page.textContent('[data-testid=stack-panel]');
  assert.match(panel, /alive /);
  const frames = await page.locator('[data-testid=stack-panel] [data-testid=frames]').textContent();
  assert.ok(frames.trim().length > 0, 'empty stack');
  assert.match(frames, /train\.py/);
  assert.doesNotMatch(frames, /ceval\.c/, 'interpreter frames are filtered');
  await page.screenshot({ path: path.join(OUT, 'example-timeline.png') });

  // Full stack shows the hidden frames.
  await page.check('[data-testid=stack-panel] input[type=checkbox]');
  await page.waitForFunction(() => /ceval\.c/.test(document.querySelector('[data-testid=frames]')?.textContent || ''));

  // Zoom with the wheel: the window (and the hash) change; double-click resets.
  const box = await page.locator('[data-testid=timeline-canvas]').boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.wheel(0, -600);
  await page.waitForFunction(() => /x0=/.test(location.hash));
  await page.screenshot({ path: path.join(OUT, 'example-zoomed.png') });
  await page.mouse.dblclick(box.x + box.width / 2, box.y + box.height / 2);
  await page.waitForFunction(() => !/x0=/.test(location.hash));

  // The hash drives the view.
  await page.evaluate(() => { location.hash = '#file=example.pickle&device=0&view=segments&x0=50&x1=300'; });
  await page.waitForFunction(() => document.querySelector('[data-testid=view-select]').value === 'segments');
  await page.waitForFunction(() => /x0=50&x1=300/.test(location.hash));
  await page.screenshot({ path: path.join(OUT, 'example-segments.png') });
  await page.selectOption('[data-testid=view-select]', 'settings');
  assert.match(await page.textContent('[data-testid=settings]'), /max_split_size/);
  await page.selectOption('[data-testid=view-select]', 'timeline');
  await page.waitForSelector('[data-testid=timeline-canvas]');
});

test('real snapshots: summary matches `memlens stats --json`', async (t) => {
  if (!fs.existsSync(SNAPS)) {
    skipOrFail(t, `${SNAPS} not found: real-snapshot checks`);
    return;
  }
  const files = fs.readdirSync(SNAPS).filter((f) => f.endsWith('.pickle')).sort();
  assert.ok(files.length > 0);
  const timings = [];
  for (const f of files) {
    const file = path.join(SNAPS, f);
    const st = statsJson(file);
    await openFile(file);
    const ms = await page.evaluate(() => Number(document.getElementById('memlens').dataset.firstPaintMs || NaN));
    timings.push([f, fs.statSync(file).size, ms]);
    const dev = defaultDevice(st);
    if (!dev) continue;
    checkSummary(await summary(), dev, f);
    // Every other device through the selector.
    for (const d of st.devices) {
      if (d.device === dev.device) continue;
      await page.selectOption('[data-testid=device-select]', String(d.device));
      await page.waitForFunction((x) => document.querySelector('[data-testid=summary]')?.dataset.device === x, String(d.device));
      checkSummary(await summary(), d, `${f} device ${d.device}`);
    }
    if (f.startsWith('Wedsonlin__assignment2-systems__results_medium_1024')) {
      await page.screenshot({ path: path.join(OUT, 'wedsonlin-1024.png') });
      const at = await findBand();
      assert.ok(at, `${f}: no band under the pointer`);
      await page.mouse.click(at.x, at.y);
      await page.waitForSelector('[data-testid=stack-panel] .ctx-head');
      await page.screenshot({ path: path.join(OUT, 'wedsonlin-1024-pinned.png') });
    }
  }
  for (const [f, size, ms] of timings) console.log(`first paint ${ms.toFixed(1)} ms  ${size} bytes  ${f}`);
  fs.writeFileSync(path.join(OUT, 'first-paint.json'), JSON.stringify(timings, null, 1));
});

test('a bad file shows one banner and the app stays usable', async () => {
  await page.evaluate(() => {
    const dt = new DataTransfer();
    dt.items.add(new File([new Uint8Array([0x80, 0x04, 0x95, 0x01, 0x02])], 'broken.pickle'));
    document.body.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  });
  const banner = page.locator('[role=alert]');
  await banner.waitFor();
  assert.match(await banner.textContent(), /broken\.pickle/);
  assert.equal(await page.locator('[role=alert]').count(), 1);
  // Still showing the previous file, still drawable.
  assert.equal(await page.getAttribute('#memlens', 'data-state'), 'ready');
  assert.ok(await summary());
  await page.screenshot({ path: path.join(OUT, 'bad-file.png') });
});

/** A synthetic snapshot from `memlens synth` (null when this memlens has no synth). */
function synth(events, file) {
  try {
    execFileSync(MEMLENS, ['synth', '--workload', 'training', '--events', String(events), '-o', file, '-q']);
    return file;
  } catch {
    return null;
  }
}

test('large file: progress bar with bytes, and cancel', async (t) => {
  // Large enough that decoding is still going on when the test clicks cancel, on an idle machine too.
  const file = synth(2000000, path.join(os.tmpdir(), 'memlens-e2e-cancel.pickle'));
  if (!file) { skipOrFail(t, 'memlens synth not available'); return; }
  const before = await page.getAttribute('#memlens', 'data-file');
  await page.setInputFiles('[data-testid=file-input]', file);
  await page.waitForSelector('[data-testid=progress]');
  // Bytes processed, out of the file's size, while decoding goes on.
  await page.waitForFunction(() => /[1-9][\d.]* MiB of [\d.]+ MiB processed/.test(document.querySelector('[data-testid=progress]')?.textContent || ''));
  const bar = await page.$eval('[data-testid=progress] progress', (p) => [Number(p.value), Number(p.max)]);
  // Cancel at once (a screenshot first would give the decoder time to finish), then check.
  await page.click('[data-testid=cancel]');
  assert.ok(bar[0] > 0 && bar[0] < bar[1], `progress ${bar}`);
  assert.equal(bar[1], fs.statSync(file).size);
  await page.waitForFunction((b) => document.getElementById('memlens').dataset.file === b, before);
  assert.equal(await page.getAttribute('#memlens', 'data-state'), 'ready');
  assert.equal(await page.locator('[data-testid=progress]').count(), 0);
  fs.rmSync(file, { force: true });
});

test('large file: time to first paint', async (t) => {
  const file = synth(1000000, path.join(os.tmpdir(), 'memlens-e2e-1m.pickle'));
  if (!file) { skipOrFail(t, 'memlens synth not available'); return; }
  await page.setInputFiles('[data-testid=file-input]', file);
  await waitShown(path.basename(file), 120000);
  const ms = await page.evaluate(() => Number(document.getElementById('memlens').dataset.firstPaintMs));
  console.log(`first paint ${ms.toFixed(0)} ms  ${fs.statSync(file).size} bytes  synth training 1M events`);
  checkSummary(await summary(), defaultDevice(statsJson(file)), 'synth 1M');
  // Redraw after a zoom, timed in the page.
  const box = await page.locator('[data-testid=timeline-canvas]').boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  await page.mouse.wheel(0, -300);
  await page.screenshot({ path: path.join(OUT, 'synth-1m.png') });
  fs.rmSync(file, { force: true });
});

test('?src= opens a file hosted next to the page', async () => {
  await page.goto(`${base}?src=example.pickle#view=segments`);
  await waitShown('example.pickle');
  assert.equal(await page.$eval('[data-testid=view-select]', (s) => s.value), 'segments');
});

test('no request left 127.0.0.1, and no page errors', async () => {
  assert.ok(requests.length > 0);
  assert.deepEqual(foreign, []);
  assert.deepEqual(pageErrors, []);
});
