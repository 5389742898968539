// The picture of a file while it loads, in real headless Chromium: a `memlens synth` trace opened
// on a page with `?read_pause_ms=N` (the worker pauses after each chunk it reads, so a 15 MB
// file loads as slowly as a large one):
// - the timeline shows the trace read so far (`data-layout=partial`, the note's `data-events`)
//   while the page still says `loading`, and its event count grows;
// - zoom (wheel) and pan (drag) work on it during the load;
// - when the file is read, its own layout replaces the picture and the window set during the
//   load stays (canvas `data-window`, the URL hash); the picture was painted before it.
//
// Run: (cd tests/browser && node --test --test-concurrency=1 progressive.test.mjs) after
// `scripts/serve.sh --build` and `cargo build --release -p memlens-cli`.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { openViewer, memlens, OUT, MARGIN_LEFT, MARGIN_TOP } from './harness.mjs';

let viewer;

before(async () => {
  viewer = await openViewer();
});

after(async () => {
  await viewer?.close();
});

const CANVAS = '[data-testid=timeline-canvas]';

async function windowOf(page) {
  return (await page.getAttribute(CANVAS, 'data-window')).split(',').map(Number);
}

async function loadState(page) {
  return page.evaluate(() => {
    const r = document.getElementById('memlens');
    const p = document.querySelector('[data-testid=partial]');
    return { state: r.dataset.state, layout: r.dataset.layout, events: p ? Number(p.dataset.events) : null };
  });
}

test('the trace so far is drawn while the file loads, interactive, and the window survives', async () => {
  const file = path.join(OUT, 'progressive-synth.pickle');
  if (!fs.existsSync(file)) {
    memlens(['synth', '-q', '--workload', 'training', '--events', '100000', '--seed', '3', '-o', file]);
  }
  const page = await viewer.context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${viewer.base}?read_pause_ms=700`);
  await page.waitForSelector('#memlens[data-state=empty]');
  await page.setInputFiles('[data-testid=file-input]', file);

  // A picture of the trace so far, while the page still says loading.
  await page.waitForSelector('#memlens[data-layout=partial] [data-testid=partial]', { timeout: 30000 });
  const first = await loadState(page);
  assert.equal(first.state, 'loading', 'the first picture came before the file was read');
  assert.ok(first.events > 0, `the first picture has events (${first.events})`);
  await page.waitForSelector(CANVAS);

  // Zoom in with the wheel around the plot's middle, then pan by dragging, during the load.
  const box = await page.locator(CANVAS).boundingBox();
  const cx = box.x + MARGIN_LEFT + (box.width - MARGIN_LEFT) / 2, cy = box.y + MARGIN_TOP + 60;
  const whole = await windowOf(page);
  await page.mouse.move(cx, cy);
  await page.mouse.wheel(0, -600);
  await page.waitForFunction(([sel, w]) => document.querySelector(sel)?.dataset.window !== w,
    [CANVAS, whole.map((x) => x.toFixed(2)).join(',')]);
  const zoomed = await windowOf(page);
  assert.ok(zoomed[1] - zoomed[0] < whole[1] - whole[0], `zoomed in: ${zoomed} inside ${whole}`);
  await page.mouse.move(cx, cy);
  await page.mouse.down();
  await page.mouse.move(cx - 150, cy, { steps: 5 });
  await page.mouse.up();
  const panned = await windowOf(page);
  assert.ok(panned[0] > zoomed[0], `dragged left shows later events: ${panned} after ${zoomed}`);
  const during = await loadState(page);
  assert.equal(during.state, 'loading', 'zoom and pan happened during the load');

  // The count grows while loading.
  await page.waitForFunction((n) => Number(document.querySelector('[data-testid=partial]')?.dataset.events) > n
    || document.getElementById('memlens').dataset.state === 'ready', first.events, { timeout: 30000 });
  const later = await loadState(page);
  assert.equal(later.state, 'loading', 'a second picture came before the file was read');
  assert.ok(later.events > first.events, `events grew: ${first.events} → ${later.events}`);

  // The file's own layout replaces it; the window is the one set during the load.
  await page.waitForFunction(() => {
    const r = document.getElementById('memlens');
    return r.dataset.state === 'ready' && !!r.dataset.firstPaintMs;
  }, null, { timeout: 60000 });
  const done = await page.evaluate(() => {
    const r = document.getElementById('memlens');
    return { layout: r.dataset.layout, partialMs: Number(r.dataset.partialPaintMs), firstMs: Number(r.dataset.firstPaintMs),
      note: !!document.querySelector('[data-testid=partial]') };
  });
  assert.notEqual(done.layout, 'partial');
  assert.equal(done.note, false, 'the note goes with the picture');
  assert.ok(done.partialMs > 0 && done.partialMs < done.firstMs, `picture at ${done.partialMs} ms, file at ${done.firstMs} ms`);
  assert.deepEqual(await windowOf(page), panned, 'the window set during the load stays');
  await page.waitForFunction(() => /x0=/.test(location.hash));
  const hash = await page.evaluate(() => location.hash);
  const [x0, x1] = [/x0=([\d.]+)/.exec(hash)[1], /x1=([\d.]+)/.exec(hash)[1]].map(Number);
  assert.ok(Math.abs(x0 - panned[0]) < 0.02 && Math.abs(x1 - panned[1]) < 0.02, `hash ${hash} keeps ${panned}`);
  assert.deepEqual(errors, []);
  await page.close();
});
