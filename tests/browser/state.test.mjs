// End-to-end tests of the Allocator State History view in real headless Chromium.
//
// - a real snapshot from ../shared/snapshots is opened (skipped with a notice when absent), the
//   view is opened from the timeline, and states are reached by URL hash, by keys and by the
//   peak button; the per-state numbers (`data-metric="state_<key>"`) are compared with an
//   independent python reading (tests/python/state_ref.py);
// - a block is hovered and clicked and its stack read in the shared stack panel; the pin
//   carries over to the timeline and back;
// - the event list stays virtualized (a few dozen rows in the DOM for any trace length), also
//   for a one-million-entry `memlens synth` trace; an `oom` entry shows its numbers;
// - times (history build, switch from the timeline, seek) are printed, and screenshots go to
//   tests/out/state-*.png.
//
// Run: (cd tests/browser && npm install && node --test --test-concurrency=1 state.test.mjs)
// after `scripts/serve.sh --build`. Env: MEMLENS_BIN (default: <target>/release/memlens, built
// if missing), CHROMIUM (default /usr/bin/chromium).

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { openViewer, waitShown, memlens, statsJson, defaultDevice, skipOrFail, ROOT, DIST, OUT,
  SNAPS } from './harness.mjs';

const STATE_REF = path.join(ROOT, 'tests/python/state_ref.py');
const REAL = 'Wedsonlin__assignment2-systems__results_medium_1024_training_memory_snapshot.pickle';
const KEYS = ['allocated_bytes', 'requested_bytes', 'reserved_bytes', 'inactive_split_bytes',
  'largest_free_block_bytes'];

let viewer, base, page, pageErrors, foreign;

before(async () => {
  viewer = await openViewer({ viewport: { width: 1500, height: 900 } });
  ({ base, page, pageErrors, foreign } = viewer);
  await page.goto(base);
  await page.waitForSelector('#memlens[data-state=empty]');
});

after(async () => {
  await viewer?.close();
});

/** The independent python reading of the numbers after `events` of `device`. */
function stateRef(file, device, events) {
  const out = execFileSync('python3', [STATE_REF, file, String(device), ...events.map(String)],
    { maxBuffer: 1 << 28 });
  return JSON.parse(out.toString());
}

/** Waits until the state after `event` is painted and its numbers are shown. */
async function waitState(event, timeout = 30000) {
  try {
    await page.waitForFunction((e) => {
      const v = document.querySelector('[data-testid=state-view]');
      const n = document.querySelector('[data-testid=state-numbers]');
      return v && v.dataset.event === e && v.dataset.paintedEvent === e && n && n.dataset.event === e;
    }, String(event), { timeout });
  } catch (err) {
    const seen = await page.evaluate(() => JSON.stringify({
      view: document.querySelector('[data-testid=state-view]')?.dataset,
      numbers: document.querySelector('[data-testid=state-numbers]')?.dataset,
      hash: location.hash,
    }));
    throw new Error(`state after event ${event} not shown: ${seen}`, { cause: err });
  }
}

async function stateNumbers() {
  return page.evaluate(() => {
    const m = {};
    for (const e of document.querySelectorAll('[data-testid=state-numbers] [data-metric]')) m[e.dataset.metric] = e.dataset.value;
    return m;
  });
}

/** The numbers of the state shown against the python reading for `event`. */
function checkNumbers(nums, ref, event, label) {
  const r = ref.events[String(event)];
  assert.ok(r, `${label}: no python reading for event ${event}`);
  assert.equal(nums.state_requested_bytes, String(r.requested_bytes), `${label}: requested after ${event}`);
  assert.equal(nums.state_reserved_bytes, String(r.reserved_bytes), `${label}: reserved after ${event}`);
  for (const k of KEYS) assert.match(nums[`state_${k}`] ?? '', /^\d+$/, `${label}: state_${k} is an exact integer`);
  assert.ok(Number(nums.state_allocated_bytes) <= Number(nums.state_reserved_bytes), `${label}: allocated <= reserved`);
  assert.ok(Number(nums.state_largest_free_block_bytes) <= Number(nums.state_reserved_bytes) - Number(nums.state_allocated_bytes),
    `${label}: largest free block fits the free bytes`);
}

function hashOf(name, device, event) {
  return `#file=${encodeURIComponent(name)}&device=${device}&view=state&event=${event}`;
}

async function attr(sel, name) {
  return page.$eval(sel, (e, n) => e.getAttribute(n), name);
}

/** Moves over the map until the tooltip shows an allocation; returns that point. */
async function findBlock() {
  const box = await page.locator('[data-testid=state-canvas]').boundingBox();
  for (let fy = 0.04; fy < 0.95; fy += 0.025) {
    for (let fx = 0.03; fx < 0.97; fx += 0.03) {
      const x = box.x + box.width * fx;
      const y = box.y + box.height * fy;
      await page.mouse.move(x, y);
      const tip = page.locator('[data-testid=state-tooltip]');
      if (await tip.count() && /allocation/.test(await tip.textContent())) return { x, y };
    }
  }
  return null;
}

test('real snapshot: states by URL, keys and peak match the python reading; stack; link', async (t) => {
  const file = path.join(SNAPS, REAL);
  if (!fs.existsSync(file)) {
    skipOrFail(t, `${file} not found: Allocator State History checks on a real snapshot`);
    return;
  }
  const st = statsJson(file);
  const dev = defaultDevice(st);
  const n = dev.trace_entries;
  await page.setInputFiles('[data-testid=file-input]', file);
  await waitShown(page, REAL, { timeout: 120000 });

  // Switch from the timeline: the last state, painted; timed in the page.
  await page.selectOption('[data-testid=view-select]', 'state');
  await page.waitForSelector('[data-testid=state-view][data-switch-ms]', { timeout: 30000 });
  await waitState(n - 1);
  const switchMs = Number(await attr('[data-testid=state-view]', 'data-switch-ms'));
  const buildMs = await attr('[data-testid=state-view]', 'data-build-ms');
  console.log(`state view: switch from the timeline ${switchMs.toFixed(1)} ms, history build ${buildMs ?? 'done before (after load)'} ms  ${REAL}`);
  assert.match(await page.evaluate(() => location.hash), /view=state/);
  assert.equal(await page.locator('[data-testid=view-select] option:checked').textContent(), 'Allocator State History');
  await page.screenshot({ path: path.join(OUT, 'state-last.png') });

  // The event list is virtualized: a few dozen rows in the DOM for the whole trace.
  assert.equal(await attr('[data-testid=event-list]', 'data-rows'), String(n));
  const rows = await page.locator('.ev-row').count();
  assert.ok(rows > 5 && rows < 120, `${rows} rows in the DOM`);
  assert.match(await page.locator('.ev-row.selected').textContent(), new RegExp(`^\\s*${n - 1} `));

  // Events to check: by hash, by keys, the peak and a spread.
  const page0 = 100;
  const spread = [0, 1, 2, 17, 1234, Math.floor(n / 3), Math.floor(n / 2), n - 2];
  const ref = stateRef(file, dev.device, [...spread, page0, page0 + 1, page0 + 2, page0 + 3, n - 1,
    ...Array.from({ length: 200 }, (_, i) => page0 + 3 + i)]);
  assert.equal(ref.n_events, n);

  // After the last entry the state is the file's own: every number equals `memlens stats`.
  const last = await stateNumbers();
  checkNumbers(last, ref, n - 1, 'last');
  for (const k of KEYS) assert.equal(last[`state_${k}`], String(ref.last[k]), `last: ${k} equals the file's`);
  for (const k of ['allocated_bytes', 'inactive_split_bytes', 'largest_free_block_bytes', 'reserved_bytes']) {
    assert.equal(last[`state_${k}`], String(dev[k]), `last: ${k} equals memlens stats`);
  }

  // By URL hash (the file is already loaded: hashchange).
  const seeks = [];
  for (const e of spread) {
    await page.evaluate((h) => { location.hash = h; }, hashOf(REAL, dev.device, e));
    await waitState(e);
    checkNumbers(await stateNumbers(), ref, e, `hash event ${e}`);
    seeks.push(Number(await attr('[data-testid=state-view]', 'data-seek-ms')));
  }
  console.log(`state view: seek by URL (select → painted) ${seeks.map((s) => s.toFixed(1)).join(', ')} ms; worker seek ${await attr('[data-testid=state-view]', 'data-worker-seek-ms')} ms`);
  await page.screenshot({ path: path.join(OUT, 'state-hash.png') });

  // By keys, from event 100; the hash follows with replaceState (no history entries).
  await page.evaluate((h) => { location.hash = h; }, hashOf(REAL, dev.device, page0));
  await waitState(page0);
  const histLen = await page.evaluate(() => history.length);
  await page.click('.ev-row.selected');
  for (let i = 1; i <= 3; i++) {
    await page.keyboard.press('ArrowDown');
    await waitState(page0 + i);
    checkNumbers(await stateNumbers(), ref, page0 + i, `ArrowDown to ${page0 + i}`);
  }
  await page.waitForFunction((e) => location.hash.endsWith(`event=${e}`), page0 + 3);
  assert.equal(await page.evaluate(() => history.length), histLen, 'stepping adds no history entries');
  await page.keyboard.press('PageDown');
  const afterPage = Number(await page.waitForFunction((s) => {
    const v = document.querySelector('[data-testid=state-view]');
    return v && Number(v.dataset.event) > s && v.dataset.paintedEvent === v.dataset.event ? v.dataset.event : null;
  }, page0 + 3).then((h) => h.jsonValue()));
  assert.ok(afterPage > page0 + 10 && afterPage < page0 + 3 + 200, `PageDown went to ${afterPage}`);
  await waitState(afterPage);
  checkNumbers(await stateNumbers(), ref, afterPage, `PageDown to ${afterPage}`);
  await page.keyboard.press('ArrowUp');
  await waitState(afterPage - 1);
  checkNumbers(await stateNumbers(), ref, afterPage - 1, 'ArrowUp');
  await page.keyboard.press('Home');
  await waitState(0);
  checkNumbers(await stateNumbers(), ref, 0, 'Home');
  assert.equal(await page.locator('.ev-row[data-event="0"].selected').count(), 1);
  await page.keyboard.press('End');
  await waitState(n - 1);
  checkNumbers(await stateNumbers(), ref, n - 1, 'End');

  // Held key: 40 steps as fast as the keyboard sends them; the last one wins.
  await page.keyboard.press('Home');
  await waitState(0);
  for (let i = 0; i < 40; i++) await page.keyboard.press('ArrowDown');
  await waitState(40);

  // The peak button goes to the timeline's peak.
  await page.click('[data-testid=state-peak]');
  await waitState(ref.peak_event);
  const peakRef = stateRef(file, dev.device, [ref.peak_event]);
  checkNumbers(await stateNumbers(), peakRef, ref.peak_event, 'peak');
  assert.equal(await page.locator('.ev-row.selected.peak').count(), 1);
  await page.screenshot({ path: path.join(OUT, 'state-peak.png') });

  // Jump to a time: 0 s after the first entry is entry 0 (or the last one at that time).
  await page.fill('[data-testid=state-time]', '0');
  await page.click('[data-testid=state-time-go]');
  await page.waitForFunction(() => Number(document.querySelector('[data-testid=state-view]').dataset.event) < 50);

  // Hover a block: its allocation in the tooltip; click: its stack in the panel.
  await page.evaluate((h) => { location.hash = h; }, hashOf(REAL, dev.device, ref.peak_event));
  await waitState(ref.peak_event);
  const at = await findBlock();
  assert.ok(at, 'no block under the pointer');
  const tip = await page.textContent('[data-testid=state-tooltip]');
  assert.match(tip, /b'[0-9a-f]+ .*\(\d+ bytes\) allocation/);
  assert.match(tip, /requested .*\(\d+ bytes\), rounding waste/);
  assert.match(tip, /active_allocated|active_pending_free/);
  await page.screenshot({ path: path.join(OUT, 'state-hover.png') });
  await page.mouse.click(at.x, at.y);
  await page.waitForSelector('[data-testid=stack-panel] .ctx-head', { timeout: 15000 });
  const head = await page.textContent('[data-testid=stack-panel] .ctx-head');
  const addr = tip.match(/b'([0-9a-f]+)/)[1];
  assert.match(head, new RegExp(`b'${addr}_\\d+`), 'the panel shows the hovered block');
  const frames = await page.locator('[data-testid=stack-panel] [data-testid=frames]').textContent();
  assert.ok(frames.trim().length > 0, 'empty stack');
  assert.doesNotMatch(frames, /ceval\.c/, 'interpreter frames are filtered');
  await page.screenshot({ path: path.join(OUT, 'state-pinned.png') });

  // Link: the pin carries to the timeline (same element in the panel) ...
  await page.selectOption('[data-testid=view-select]', 'timeline');
  await page.waitForSelector('[data-testid=timeline-canvas]');
  await page.waitForFunction((h) => document.querySelector('[data-testid=stack-panel] .ctx-head')?.textContent === h, head);
  await page.screenshot({ path: path.join(OUT, 'state-linked-timeline.png') });
  // ... and back: the state view opens at the pinned allocation's alloc.
  const alive = await page.textContent('[data-testid=stack-panel]');
  const from = alive.match(/alive event (\d+) →/);
  await page.selectOption('[data-testid=view-select]', 'state');
  if (from) {
    await waitState(Number(from[1]));
    assert.match(await page.evaluate(() => location.hash), new RegExp(`event=${from[1]}$`));
  }
  await page.waitForFunction((h) => document.querySelector('[data-testid=stack-panel] .ctx-head')?.textContent === h, head);

  // Selecting an entry that allocates pins that allocation (its band on the timeline).
  const allocRow = await page.evaluate(() => {
    for (const r of document.querySelectorAll('.ev-row')) if (/^\s*\d+ alloc /.test(r.textContent)) return Number(r.dataset.event);
    return null;
  });
  if (allocRow !== null) {
    await page.click(`.ev-row[data-event="${allocRow}"]`);
    await waitState(allocRow);
    await page.waitForFunction((e) => new RegExp(`alive event ${e} →`).test(document.querySelector('[data-testid=stack-panel]')?.textContent || ''), allocRow);
    await page.selectOption('[data-testid=view-select]', 'timeline');
    await page.waitForFunction((e) => new RegExp(`alive event ${e} →`).test(document.querySelector('[data-testid=stack-panel]')?.textContent || ''), allocRow);
    await page.selectOption('[data-testid=view-select]', 'state');
    await waitState(allocRow);
  }

  // Zoom with the wheel and pan: the map redraws (and a hover still finds blocks).
  const box = await page.locator('[data-testid=state-canvas]').boundingBox();
  await page.mouse.move(box.x + box.width * 0.3, box.y + box.height * 0.2);
  await page.mouse.wheel(0, -900);
  await page.waitForTimeout(200);
  await page.screenshot({ path: path.join(OUT, 'state-zoomed.png') });
  assert.deepEqual(pageErrors, []);
});

test('an oom entry shows requested vs largest free block vs total free', async (t) => {
  const file = path.join(os.tmpdir(), 'memlens-e2e-oom.pickle');
  try {
    memlens(['synth', '--workload', 'oom', '--events', '6000', '-o', file, '-q']);
  } catch {
    skipOrFail(t, 'memlens synth not available');
    return;
  }
  const st = statsJson(file);
  const dev = defaultDevice(st);
  await page.selectOption('[data-testid=view-select]', 'timeline');
  await page.setInputFiles('[data-testid=file-input]', file);
  await waitShown(page, path.basename(file), { timeout: 120000 });
  await page.selectOption('[data-testid=view-select]', 'state');
  await waitState(dev.trace_entries - 1);
  const count = await page.textContent('[data-testid=state-oom-count]');
  assert.match(count, /^[1-9]\d* OOMs?$/, 'the synth oom workload records an oom');
  await page.keyboard.press('Home');
  await waitState(0);
  await page.click('[data-testid=state-next-oom]');
  const ev = Number(await page.waitForFunction(() => {
    const v = document.querySelector('[data-testid=state-view]');
    return v && v.dataset.event !== '0' && v.dataset.paintedEvent === v.dataset.event ? v.dataset.event : null;
  }).then((h) => h.jsonValue()));
  await waitState(ev);
  assert.match(await page.textContent('.ev-row.selected'), /OOM \(requested .* bytes\), Device has .* memory free\)/);
  await page.waitForSelector('[data-testid=state-oom]');
  const o = await page.evaluate(() => {
    const m = {};
    for (const e of document.querySelectorAll('[data-testid=state-oom] [data-metric]')) m[e.dataset.metric] = Number(e.dataset.value);
    return m;
  });
  const nums = await stateNumbers();
  const ref = stateRef(file, dev.device, [ev]);
  checkNumbers(nums, ref, ev, 'oom');
  // The request is the oom entry's size; the free numbers are the state's.
  const trace = JSON.parse(execFileSync('python3', ['-c',
    'import pickle,sys,json; d=pickle.load(open(sys.argv[1],"rb")); e=d["device_traces"][int(sys.argv[2])][int(sys.argv[3])]; print(json.dumps([e["action"], e["size"], e.get("device_free")]))',
    file, String(dev.device), String(ev)]).toString());
  assert.equal(trace[0], 'oom');
  assert.equal(o.state_oom_requested_bytes, trace[1]);
  if (trace[2] !== null && trace[2] !== undefined) assert.equal(o.state_oom_device_free_bytes, trace[2]);
  assert.equal(String(o.state_oom_largest_free_block_bytes), nums.state_largest_free_block_bytes);
  assert.ok(o.state_oom_total_free_bytes >= o.state_oom_largest_free_block_bytes);
  assert.equal(o.state_oom_total_free_bytes, Number(nums.state_reserved_bytes) - Number(nums.state_active_bytes));
  await page.screenshot({ path: path.join(OUT, 'state-oom.png') });
  fs.rmSync(file, { force: true });
});

test('a million entries: the list stays virtualized, End and seeks stay fast', async (t) => {
  const file = path.join(os.tmpdir(), 'memlens-e2e-state-1m.pickle');
  try {
    memlens(['synth', '--workload', 'training', '--events', '1000000', '-o', file, '-q']);
  } catch {
    skipOrFail(t, 'memlens synth not available');
    return;
  }
  const dev = defaultDevice(statsJson(file));
  const n = dev.trace_entries;
  await page.selectOption('[data-testid=view-select]', 'timeline');
  await page.setInputFiles('[data-testid=file-input]', file);
  await waitShown(page, path.basename(file), { timeout: 180000 });
  await page.selectOption('[data-testid=view-select]', 'state');
  await page.waitForSelector('[data-testid=state-view][data-switch-ms]', { timeout: 60000 });
  await waitState(n - 1, 60000);
  // The last state is painted from the file's segments first; the event list comes with the
  // history, whose build takes seconds on a slow machine.
  await page.waitForSelector('[data-testid=event-list]', { timeout: 120000 });
  const switchMs = await attr('[data-testid=state-view]', 'data-switch-ms');
  const buildMs = await attr('[data-testid=state-view]', 'data-build-ms');
  assert.equal(await attr('[data-testid=event-list]', 'data-rows'), String(n));
  const rows = await page.locator('.ev-row').count();
  assert.ok(rows < 120, `${rows} rows in the DOM for ${n} entries`);
  // Scroll to the middle: the rows there are rendered.
  await page.$eval('[data-testid=event-list]', (l) => { l.scrollTop = l.scrollHeight / 2; });
  await page.waitForFunction((half) => {
    const f = Number(document.querySelector('[data-testid=event-list]').dataset.firstRow);
    return Math.abs(f - half) < half * 0.02;
  }, Math.floor(n / 2));
  const mid = await page.locator('.ev-row').first().getAttribute('data-event');
  assert.ok(Math.abs(Number(mid) - n / 2) < n * 0.02, `first row ${mid} after scrolling to the middle`);
  // Random states by hash; the numbers follow the python reading.
  const events = [0, 123457, Math.floor(n / 2) + 1, n - 7];
  const ref = stateRef(file, dev.device, events);
  const seeks = [];
  for (const e of events) {
    await page.evaluate((h) => { location.hash = h; }, hashOf(path.basename(file), dev.device, e));
    await waitState(e);
    checkNumbers(await stateNumbers(), ref, e, `1M event ${e}`);
    seeks.push(`${Number(await attr('[data-testid=state-view]', 'data-seek-ms')).toFixed(1)}/${Number(await attr('[data-testid=state-view]', 'data-worker-seek-ms')).toFixed(2)}`);
  }
  console.log(`state view, synth 1M (${n} entries): switch ${switchMs} ms, history build ${buildMs ?? 'done after load'} ms, seek page/worker ${seeks.join(', ')} ms`);
  await page.screenshot({ path: path.join(OUT, 'state-synth-1m.png') });

  // Opened straight into the state view: the last state is read from the file's segments and
  // painted before the history is built; the history, once built, shows the same state.
  await page.goto('about:blank');
  await page.goto(`${base}#view=state`);
  await page.waitForSelector('#memlens[data-state=empty]');
  await page.setInputFiles('[data-testid=file-input]', file);
  await waitState(n - 1, 180000);
  assert.equal(await attr('[data-testid=state-view]', 'data-state-source'), 'file');
  const lastRef = stateRef(file, dev.device, [n - 2, n - 1]);
  const fromFile = await stateNumbers();
  checkNumbers(fromFile, lastRef, n - 1, '1M last state from the file');
  await page.evaluate((h) => { location.hash = h; }, hashOf(path.basename(file), dev.device, n - 2));
  await waitState(n - 2, 120000);
  assert.equal(await attr('[data-testid=state-view]', 'data-state-source'), 'history');
  checkNumbers(await stateNumbers(), lastRef, n - 2, '1M state before the last');
  await page.evaluate((h) => { location.hash = h; }, hashOf(path.basename(file), dev.device, n - 1));
  await waitState(n - 1);
  assert.equal(await attr('[data-testid=state-view]', 'data-state-source'), 'history');
  assert.deepEqual(await stateNumbers(), fromFile, 'the history\'s last state = the one read from the file');
  assert.equal(await attr('[data-testid=event-list]', 'data-rows'), String(n));
  // The timeline layout came too (asked by the page): selecting an alloc entry pins its band.
  const allocRow = await page.evaluate(() => {
    for (const r of document.querySelectorAll('.ev-row')) if (/^\s*\d+ alloc /.test(r.textContent)) return Number(r.dataset.event);
    return null;
  });
  assert.ok(allocRow !== null, 'no alloc entry in view');
  await page.click(`.ev-row[data-event="${allocRow}"]`);
  await waitState(allocRow);
  await page.waitForFunction((e) => new RegExp(`alive event ${e} →`).test(document.querySelector('[data-testid=stack-panel]')?.textContent || ''), allocRow, { timeout: 60000 });
  fs.rmSync(file, { force: true });
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(foreign, []);
});

test('a link opens that state: ?src= with view=state&event=i in the hash', async () => {
  const file = path.join(DIST, 'example.pickle');
  const dev = defaultDevice(statsJson(file));
  const e = Math.min(7, dev.trace_entries - 1);
  await page.goto(`${base}?src=example.pickle${hashOf('example.pickle', dev.device, e)}`);
  await waitState(e, 60000);
  assert.equal(await page.$eval('[data-testid=view-select]', (s) => s.value), 'state');
  checkNumbers(await stateNumbers(), stateRef(file, dev.device, [e]), e, 'example by link');
  assert.match(await page.evaluate(() => location.hash), new RegExp(`view=state&event=${e}$`));
  assert.equal(await page.locator('.ev-row.selected').getAttribute('data-event'), String(e));
  assert.deepEqual(pageErrors, []);
});
