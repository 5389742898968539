// End-to-end tests of the Diagnosis view (`#view=diagnosis`) in real headless Chromium, against
// the built dist/ served on 127.0.0.1 (same harness as viewer.test.mjs):
//
// - real snapshots from ../shared/snapshots (skipped with a notice when absent) are opened with
//   view=diagnosis in the hash; once the worker's diagnosis arrives (data-verdict no longer
//   `pending`), the verdict kind and summary, the peak's bytes, allocations and event, the
//   first peak rows (frame, bytes) and every ledger bar equal `memlens diagnose --json` on the
//   same file (the worker and the CLI run the same core analysis);
// - a clickable peak row opens the Active Memory Timeline with the frame search set to that
//   frame; its match count equals the independent count (search_count.py) and is at least one;
// - an OOM from fragmentation (`memlens synth --workload oom-fragmentation`): the verdict is
//   `fragmentation`, the OOM row names the trace's oom entry, and clicking it opens the
//   Allocator State History at that entry;
// - the reverse of a frame opening its bands: a band pinned on the timeline is outlined in the
//   live-memory flamegraph (view switched, or "live memory here"): the outlined path equals its
//   alloc entry's stack read by stack_path.py, and the outlined cells run down it from the root;
// - build times of the diagnosis in the worker are printed, screenshots go to
//   tests/out/diagnosis-*.png.
//
// Run: (cd tests/browser && node --test --test-concurrency=1 diagnosis.test.mjs)   after
// `scripts/serve.sh --build` and `cargo build --release -p memlens-cli`.
// Env: MEMLENS_BIN (default: <target>/release/memlens), CHROMIUM, MEMLENS_DIST as in
// viewer.test.mjs.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { openViewer, memlens, requireMemlens, skipOrFail, OUT, SNAPS } from './harness.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
// Real snapshots with traces: a training step with memory from before the trace, a small
// inductor run, and a full step with optimizer states.
const REAL = [
  'Wedsonlin__assignment2-systems__results_medium_512_training_memory_snapshot.pickle',
  'drisspg__transformer_nuggets__test_data_mini_snapshot.pickle',
  'kkaitlyn111__cs336-a2-systems__memory_ctx128_fullstep.pickle',
];
/** Peak rows compared one by one. */
const TOP_ROWS = 5;
/** Rows the view shows per table (web/src/page/diagnosis.rs). */
const VIEW_ROWS = 15;

let viewer, base, page, foreign, pageErrors;

/** `memlens diagnose --json FILE`: { devices: [...] }. */
function diagnoseJson(file) {
  return JSON.parse(memlens(['diagnose', '--json', file]));
}

/** The independent count (Python) of what a frame search should match. */
function pyCount(file, device, frame) {
  return Number(execFileSync('python3', [path.join(HERE, 'search_count.py'), file, String(device), '', frame]).toString().trim());
}

/**
 * Opens `file` through the file input with `#file=<name>&view=diagnosis` set first (so the
 * page applies the hash when the file is ready), in a freshly loaded page, and waits for the
 * diagnosis to arrive. Returns what the view shows.
 */
async function openDiagnosis(file, timeout = 120000) {
  const name = path.basename(file);
  await page.goto('about:blank');
  await page.goto(`${base}#file=${encodeURIComponent(name)}&view=diagnosis`);
  await page.waitForSelector('#memlens[data-state=empty]');
  await page.setInputFiles('[data-testid=file-input]', file);
  try {
    await page.waitForFunction((n) => {
      const r = document.getElementById('memlens');
      const d = document.querySelector('[data-testid=diagnosis]');
      return r && r.dataset.file === n && r.dataset.state === 'ready' && d && d.dataset.verdict && d.dataset.verdict !== 'pending';
    }, name, { timeout });
  } catch (err) {
    const seen = await page.evaluate(() => JSON.stringify({
      root: document.getElementById('memlens')?.dataset,
      diagnosis: document.querySelector('[data-testid=diagnosis]')?.dataset ?? null,
      hash: location.hash,
    }));
    throw new Error(`no diagnosis shown for ${name}: ${seen}`, { cause: err });
  }
  assert.match(await page.evaluate(() => location.hash), /view=diagnosis/);
  return shown();
}

/** The Diagnosis view's numbers, rows and bars, as the DOM carries them. */
async function shown() {
  return page.evaluate(() => {
    const root = document.querySelector('[data-testid=diagnosis]');
    const metrics = {};
    for (const e of root.querySelectorAll('[data-metric]')) metrics[e.dataset.metric] = e.dataset.value;
    return {
      verdict: root.dataset.verdict,
      device: Number(root.dataset.device),
      buildMs: root.dataset.buildMs,
      kindText: root.querySelector('[data-testid=verdict-kind]')?.textContent,
      summary: root.querySelector('[data-testid=verdict-summary]')?.textContent,
      metrics,
      peakRows: [...root.querySelectorAll('tr[data-testid=peak-row]')].map((r) => ({
        frame: r.dataset.frame,
        bytes: r.querySelector('td[data-bytes]')?.dataset.bytes,
        clickable: r.classList.contains('clickable'),
      })),
      oomRows: [...root.querySelectorAll('tr[data-testid=oom-row]')].map((r) => Number(r.dataset.event)),
    };
  });
}

/** The CLI's diagnosis of the device the page shows. */
function cliDevice(cli, device, label) {
  const d = cli.devices.find((x) => x.device === device);
  assert.ok(d, `${label}: the page diagnoses device ${device}, memlens diagnose has ${cli.devices.map((x) => x.device)}`);
  return d;
}

/** Everything the view shows against `memlens diagnose --json`. */
function compare(view, d, label) {
  assert.equal(view.verdict, d.verdict.kind, `${label}: verdict kind`);
  assert.equal(view.kindText, d.verdict.kind.replace(/_/g, ' '), `${label}: verdict heading`);
  assert.equal(view.summary, d.verdict.summary, `${label}: verdict summary`);
  const m = view.metrics;
  assert.equal(m.peak_allocated_bytes, String(d.peak.allocated_bytes), `${label}: peak_allocated_bytes`);
  assert.equal(m.peak_allocations, String(d.peak.allocations), `${label}: peak_allocations`);
  if (d.peak.event === null || d.peak.event === undefined) {
    assert.equal(m.peak_event, undefined, `${label}: no peak_event when the peak is before the first event`);
  } else {
    assert.equal(m.peak_event, String(d.peak.event), `${label}: peak_event`);
  }
  assert.equal(view.peakRows.length, Math.min(VIEW_ROWS, d.peak.top.length), `${label}: peak rows`);
  const n = Math.min(TOP_ROWS, d.peak.top.length);
  assert.ok(n > 0, `${label}: memlens diagnose lists no frame at the peak`);
  for (let i = 0; i < n; i++) {
    assert.equal(view.peakRows[i].frame, d.peak.top[i].frame, `${label}: peak row ${i} frame`);
    assert.equal(view.peakRows[i].bytes, String(d.peak.top[i].bytes), `${label}: peak row ${i} bytes`);
    assert.equal(view.peakRows[i].clickable, !d.peak.top[i].frame.startsWith('('), `${label}: peak row ${i} clickable`);
  }
  // Ledger bars: one per class the CLI lists, plus reserved − requested, at the peak and at the end.
  for (const [which, rows, frag] of [['peak', d.ledger.peak, d.ledger.fragmentation_peak],
    ['end', d.ledger.end, d.ledger.fragmentation_end]]) {
    const want = {};
    for (const r of rows) want[`ledger_${which}_${r.class}`] = String(r.bytes);
    want[`ledger_${which}_fragmentation`] = String(Math.max(0, frag.reserved_bytes - frag.requested_bytes));
    const got = Object.fromEntries(Object.entries(m).filter(([k]) => k.startsWith(`ledger_${which}_`)));
    assert.deepEqual(got, want, `${label}: ledger bars (${which})`);
  }
}

before(async () => {
  viewer = await openViewer({ viewport: { width: 1400, height: 900 } });
  ({ base, page, foreign, pageErrors } = viewer);
});

after(async () => {
  await viewer?.close();
});

for (const [i, name] of REAL.entries()) {
  test(`real snapshot ${name}: verdict, peak, peak rows and ledger equal memlens diagnose`, async (t) => {
    const file = path.join(SNAPS, name);
    if (!fs.existsSync(file)) {
      skipOrFail(t, `${file} not found: Diagnosis view checks on a real snapshot`);
      return;
    }
    const cli = diagnoseJson(file);
    const view = await openDiagnosis(file);
    const d = cliDevice(cli, view.device, name);
    compare(view, d, name);
    console.log(`diagnosis ${name}: ${view.verdict}, peak ${view.metrics.peak_allocated_bytes} bytes in ${view.metrics.peak_allocations} allocations, built in ${view.buildMs} ms (worker)`);
    await page.screenshot({ path: path.join(OUT, `diagnosis-real-${i}.png`), fullPage: true });

    // Opened on the timeline first, then switched: the same diagnosis.
    await page.selectOption('[data-testid=view-select]', 'timeline');
    await page.waitForSelector('[data-testid=timeline-canvas]');
    await page.selectOption('[data-testid=view-select]', 'diagnosis');
    await page.waitForFunction(() => /view=diagnosis/.test(location.hash));
    await page.waitForFunction(() => {
      const v = document.querySelector('[data-testid=diagnosis]')?.dataset.verdict;
      return v && v !== 'pending';
    });
    compare(await shown(), d, `${name} (after switching views)`);
  });
}

test('a peak row opens the timeline with that frame searched', async (t) => {
  const present = REAL.map((n) => path.join(SNAPS, n)).filter((f) => fs.existsSync(f));
  if (!present.length) {
    skipOrFail(t, `none of ${REAL.join(', ')} in ${SNAPS}: peak row → timeline check`);
    return;
  }
  for (const file of present) {
    const name = path.basename(file);
    const view = await openDiagnosis(file);
    const idx = view.peakRows.findIndex((r) => r.clickable);
    assert.ok(idx >= 0, `${name}: no clickable peak row (frames: ${view.peakRows.map((r) => r.frame).join(' | ')})`);
    const frame = view.peakRows[idx].frame;
    // Rows naming no frame, `(allocated before the trace)` and the like, do nothing.
    const inert = view.peakRows.findIndex((r) => !r.clickable);
    if (inert >= 0) {
      await page.locator('tr[data-testid=peak-row]').nth(inert).click();
      await page.waitForTimeout(100);
      assert.match(await page.evaluate(() => location.hash), /view=diagnosis/, `${name}: clicking ${view.peakRows[inert].frame} stays`);
    }
    await page.locator('tr[data-testid=peak-row]').nth(idx).click();
    await page.waitForFunction(() => /view=timeline/.test(location.hash));
    await page.waitForSelector('[data-testid=timeline-canvas]');
    assert.equal(await page.inputValue('[data-testid=search-frame]'), frame, `${name}: the frame search holds the row's frame`);
    assert.equal(await page.inputValue('[data-testid=search-address]'), '', `${name}: no address search`);
    await page.waitForFunction(() => {
      const c = document.querySelector('[data-testid=search-count]');
      return c && (c.dataset.count !== undefined || c.dataset.error);
    }, null, { timeout: 60000 });
    const r = await page.$eval('[data-testid=search-count]', (c) => ({ count: c.dataset.count === undefined ? null : Number(c.dataset.count), error: c.dataset.error ? c.textContent : null }));
    assert.equal(r.error, null, `${name}: search "${frame}" failed`);
    assert.ok(r.count >= 1, `${name}: search "${frame}" matches nothing`);
    assert.equal(r.count, pyCount(file, view.device, frame), `${name}: search "${frame}" count against search_count.py`);
    console.log(`diagnosis ${name}: row "${frame}" → timeline, ${r.count} matches`);
    await page.screenshot({ path: path.join(OUT, `diagnosis-to-timeline-${REAL.indexOf(name)}.png`) });
  }
});

test('an OOM from fragmentation: verdict, OOM row, and the row opens the state at that entry', async (t) => {
  const file = path.join(os.tmpdir(), 'memlens-e2e-diagnosis-oom-fragmentation.pickle');
  requireMemlens();
  try {
    memlens(['synth', '-q', '--workload', 'oom-fragmentation', '--events', '20000', '--seed', '0', '-o', file]);
  } catch (err) {
    skipOrFail(t, `memlens synth --workload oom-fragmentation failed: ${err.message}`);
    return;
  }
  const cli = diagnoseJson(file);
  const view = await openDiagnosis(file);
  const d = cliDevice(cli, view.device, 'oom-fragmentation');
  assert.equal(view.verdict, 'fragmentation');
  compare(view, d, 'oom-fragmentation');
  assert.ok(d.ooms.length >= 1, 'memlens diagnose finds the OOM');
  assert.deepEqual(view.oomRows, d.ooms.map((o) => o.event), 'one OOM row per OOM, with its event');
  assert.equal(view.metrics.oom_requested_bytes, String(d.ooms[d.ooms.length - 1].requested_bytes));
  // The OOM is the trace's `oom` entry (device-local index).
  const ev = view.oomRows[0];
  const action = execFileSync('python3', ['-c',
    'import pickle,sys; d=pickle.load(open(sys.argv[1],"rb")); print(d["device_traces"][int(sys.argv[2])][int(sys.argv[3])]["action"])',
    file, String(view.device), String(ev)]).toString().trim();
  assert.equal(action, 'oom', `entry ${ev} of device ${view.device}`);
  console.log(`diagnosis oom-fragmentation: ${view.verdict}, OOM at entry ${ev}, built in ${view.buildMs} ms (worker)`);
  await page.screenshot({ path: path.join(OUT, 'diagnosis-oom.png'), fullPage: true });

  await page.click(`tr[data-testid=oom-row][data-event="${ev}"]`);
  await page.waitForFunction((e) => /view=state/.test(location.hash) && new RegExp(`event=${e}(&|$)`).test(location.hash), ev, { timeout: 30000 });
  try {
    await page.waitForFunction((e) => {
      const v = document.querySelector('[data-testid=state-view]');
      const n = document.querySelector('[data-testid=state-numbers]');
      return v && v.dataset.event === e && v.dataset.paintedEvent === e && n && n.dataset.event === e;
    }, String(ev), { timeout: 60000 });
  } catch (err) {
    const seen = await page.evaluate(() => JSON.stringify({
      view: document.querySelector('[data-testid=state-view]')?.dataset,
      numbers: document.querySelector('[data-testid=state-numbers]')?.dataset,
      hash: location.hash,
    }));
    throw new Error(`state after OOM entry ${ev} not shown: ${seen}`, { cause: err });
  }
  // The selected entry is the OOM, with its numbers.
  assert.match(await page.textContent('.ev-row.selected'), /OOM/);
  await page.waitForSelector('[data-testid=state-oom]');
  const req = await page.$eval('[data-testid=state-oom] [data-metric=state_oom_requested_bytes]', (e) => e.dataset.value);
  assert.equal(req, String(d.ooms[0].requested_bytes));
  await page.screenshot({ path: path.join(OUT, 'diagnosis-oom-state.png') });
  // "live memory" shows the state's entry as a flamegraph in the Diagnosis view, as wide as
  // what `memlens diagnose --at` finds alive there.
  await page.click('[data-testid=state-live-memory]');
  await page.waitForFunction((e) => /view=diagnosis/.test(location.hash) && document.querySelector('[data-testid=icicle]')?.dataset.event === String(e), ev, { timeout: 60000 });
  const total = await page.$eval('[data-testid=icicle]', (e) => Number(e.dataset.totalBytes));
  const at = cliDevice(JSON.parse(memlens(['diagnose', '--json', '--at', String(ev), file])), view.device, 'oom-fragmentation');
  assert.equal(total, at.peak.allocated_bytes, `flamegraph after the OOM entry ${ev} = memlens diagnose --at`);
  fs.rmSync(file, { force: true });
});

test('the live-memory flamegraph: its width is the live total at the peak and at a picked moment, and a frame opens the timeline', async (t) => {
  const file = path.join(SNAPS, REAL[0]);
  if (!fs.existsSync(file)) {
    skipOrFail(t, `${file} missing: flamegraph check`);
    return;
  }
  const name = path.basename(file);
  const view = await openDiagnosis(file);
  const d = cliDevice(diagnoseJson(file), view.device, name);
  const icicle = async () => {
    await page.waitForSelector('[data-testid=icicle]', { timeout: 60000 });
    return page.$eval('[data-testid=icicle]', (e) => ({ total: Number(e.dataset.totalBytes), event: e.dataset.event === undefined ? null : Number(e.dataset.event), nodes: Number(e.dataset.nodes) }));
  };
  const atPeak = await icicle();
  assert.equal(atPeak.event, d.peak.event, `${name}: the flamegraph shows the peak`);
  assert.equal(atPeak.total, d.peak.allocated_bytes, `${name}: flamegraph total = live total at the peak`);
  assert.ok(atPeak.nodes > 0, `${name}: flamegraph has nodes`);
  // Pick a moment on the fragmentation chart (its left quarter): the flamegraph follows, and
  // its total is what `memlens diagnose --at` reports alive there.
  const chart = page.locator('[data-testid=fragmentation] svg');
  const box = await chart.boundingBox();
  await chart.click({ position: { x: box.width * 0.25, y: box.height / 2 } });
  try {
    await page.waitForFunction((p) => {
      const e = document.querySelector('[data-testid=icicle]');
      return e && e.dataset.event !== undefined && Number(e.dataset.event) !== p;
    }, d.peak.event, { timeout: 60000 });
  } catch (err) {
    const seen = await page.evaluate(() => JSON.stringify({ hash: location.hash, flame: document.querySelector('[data-testid=live-flame]')?.textContent?.slice(0, 200), icicle: document.querySelector('[data-testid=icicle]')?.dataset ?? null }));
    throw new Error(`${name}: the flamegraph did not move to the picked moment (chart box ${JSON.stringify(box)}): ${seen}`, { cause: err });
  }
  const picked = await icicle();
  const at = cliDevice(JSON.parse(memlens(['diagnose', '--json', '--at', String(picked.event), file])), view.device, name);
  assert.equal(picked.total, at.peak.allocated_bytes, `${name}: flamegraph total at event ${picked.event} = memlens diagnose --at`);
  console.log(`diagnosis ${name}: flamegraph at the peak ${atPeak.total} bytes (${atPeak.nodes} nodes), at event ${picked.event} ${picked.total} bytes`);
  await page.click('[data-testid=flame-to-peak]');
  await page.waitForFunction((p) => document.querySelector('[data-testid=icicle]')?.dataset.event === String(p), d.peak.event);
  // Click the widest top-level frame that names a frame: the timeline opens with it searched.
  const canvas = page.locator('[data-testid=icicle] canvas');
  // Shift-click inverts the flamegraph for that frame: who calls it, as wide as what it holds.
  const cw = (await canvas.boundingBox()).width;
  let rootFrame = '';
  let rx = 5;
  for (; rx < cw; rx += 20) {
    await canvas.hover({ position: { x: rx, y: 8 } });
    rootFrame = (await page.textContent('[data-testid=icicle-hover]')).split(' — ')[0].trim();
    if (rootFrame && !rootFrame.startsWith('(')) break;
  }
  assert.ok(rootFrame && !rootFrame.startsWith('('), `${name}: a top-level frame to invert`);
  {
    await canvas.click({ position: { x: rx, y: 8 }, modifiers: ['Shift'] });
    await page.waitForFunction((f) => document.querySelector('[data-testid=live-flame] h3')?.textContent.includes(`Who calls ${f}`), rootFrame, { timeout: 60000 });
    const inv = await icicle();
    assert.ok(inv.total > 0 && inv.total <= atPeak.total, `${name}: callers of ${rootFrame} hold ${inv.total} of ${atPeak.total}`);
    await page.click('[data-testid=flame-all]');
    await page.waitForFunction(() => !document.querySelector('[data-testid=flame-all]'));
    assert.equal((await icicle()).total, atPeak.total, `${name}: back to all frames`);
    console.log(`diagnosis ${name}: callers of ${rootFrame} hold ${inv.total} bytes`);
  }
  await canvas.hover({ position: { x: 5, y: 8 } });
  const hovered = await page.textContent('[data-testid=icicle-hover]');
  assert.ok(hovered.trim().length > 0, `${name}: hovering names a frame`);
  await canvas.click({ position: { x: 5, y: 8 } });
  if (!hovered.startsWith('(')) {
    await page.waitForFunction(() => /view=timeline/.test(location.hash));
    const frame = hovered.split(' — ')[0];
    assert.equal(await page.inputValue('[data-testid=search-frame]'), frame, `${name}: the frame search holds the clicked frame`);
  }
  await page.screenshot({ path: path.join(OUT, 'diagnosis-flame.png') });
});

test('many ranks: the files overview lists every file with its stats and verdict, marks the outlier, and opens a row', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'memlens-ranks-'));
  // Three equal ranks and one that runs another model (seed 6: a 3.5× larger peak).
  const base0 = path.join(dir, 'rank_0.pickle');
  memlens(['synth', '-q', '--workload', 'training', '--events', '8000', '--seed', '3', '-o', base0]);
  const files = [base0];
  for (const r of [1, 2]) {
    const f = path.join(dir, `rank_${r}.pickle`);
    fs.copyFileSync(base0, f);
    files.push(f);
  }
  const big = path.join(dir, 'rank_3.pickle');
  memlens(['synth', '-q', '--workload', 'training', '--events', '8000', '--seed', '6', '-o', big]);
  files.push(big);
  await page.goto('about:blank');
  await page.goto(`${base}#view=overview`);
  await page.waitForSelector('#memlens[data-state=empty]');
  await page.setInputFiles('[data-testid=file-input]', files);
  await page.waitForFunction((n) => {
    const o = document.querySelector('[data-testid=overview]');
    const v = [...document.querySelectorAll('[data-testid=overview-verdict]')].map((e) => e.textContent);
    return o && Number(o.dataset.rows) === n && v.every((x) => x !== '–');
  }, files.length, { timeout: 120000 });
  const rows = await page.$$eval('tr[data-testid=overview-row]', (rs) => rs.map((r) => ({
    file: r.dataset.file, device: Number(r.dataset.device), peak: Number(r.dataset.peak), outlier: r.dataset.outlier === 'true',
    verdict: r.querySelector('[data-testid=overview-verdict]').textContent,
  })));
  assert.deepEqual(rows.map((r) => r.file).sort(), files.map((f) => path.basename(f)).sort());
  for (const r of rows) {
    const st = JSON.parse(memlens(['stats', '--json', path.join(dir, r.file)])).devices.find((d) => d.device === r.device);
    assert.equal(r.peak, st.timeline_peak_bytes, `${r.file}: peak = memlens stats`);
    const dg = cliDevice(diagnoseJson(path.join(dir, r.file)), r.device, r.file);
    assert.equal(r.verdict, dg.verdict.kind, `${r.file}: verdict = memlens diagnose`);
  }
  assert.deepEqual(rows.filter((r) => r.outlier).map((r) => r.file), ['rank_3.pickle'], `the larger rank is the one outlier: ${JSON.stringify(rows)}`);
  await page.screenshot({ path: path.join(OUT, 'overview.png') });
  await page.click('tr[data-testid=overview-row][data-file="rank_3.pickle"]');
  await page.waitForFunction(() => /view=timeline/.test(location.hash) && /file=rank_3\.pickle/.test(location.hash));
  await page.waitForSelector('[data-testid=timeline-canvas]');
  fs.rmSync(dir, { recursive: true, force: true });
});

test('a zoomed timeline lists what grew between its ends, as memlens diagnose --between', async (t) => {
  const file = path.join(SNAPS, REAL[0]);
  if (!fs.existsSync(file)) {
    skipOrFail(t, `${file} missing: what-grew check`);
    return;
  }
  const name = path.basename(file);
  await page.goto('about:blank');
  await page.goto(`${base}#file=${encodeURIComponent(name)}&view=timeline&x0=100.4&x1=3485.7`);
  await page.waitForSelector('#memlens[data-state=empty]');
  await page.setInputFiles('[data-testid=file-input]', file);
  await page.waitForSelector('[data-testid=grew][data-state=ready]', { timeout: 60000 });
  const g = await page.$eval('[data-testid=grew]', (e) => ({ from: Number(e.dataset.from), to: Number(e.dataset.to), net: Number(e.dataset.netBytes) }));
  assert.deepEqual([g.from, g.to], [100, 3485], 'the window\'s ends, as events');
  const cli = JSON.parse(memlens(['diagnose', '--json', '--between', '100', '3485', file])).devices[0];
  assert.equal(g.net, cli.to_bytes - cli.from_bytes, `${name}: net change`);
  const rows = await page.$$eval('tr[data-testid=grew-row]', (rs) => rs.map((r) => ({ frame: r.dataset.frame, change: Number(r.dataset.change) })));
  assert.deepEqual(rows, cli.by_frame.slice(0, rows.length).map((c) => ({ frame: c.frame, change: c.change_bytes })), `${name}: rows`);
  assert.ok(rows.length > 0, `${name}: something grew`);
  await page.click('tr[data-testid=grew-row].clickable');
  await page.waitForFunction((f) => document.querySelector('[data-testid=search-frame]')?.value === f, rows[0].frame.startsWith('(') ? rows[1].frame : rows[0].frame);
  await page.screenshot({ path: path.join(OUT, 'grew.png') });
});

/** Finds a band under the pointer on the timeline canvas and clicks it (pins it). */
async function pinBand(name) {
  await page.waitForFunction(() => document.getElementById('memlens')?.dataset.layout === 'exact');
  await page.waitForSelector('[data-testid=timeline-canvas]');
  const box = await page.locator('[data-testid=timeline-canvas]').boundingBox();
  let at = null;
  for (const fy of [0.92, 0.8, 0.6, 0.4]) {
    for (let fx = 0.1; fx < 0.98 && !at; fx += 0.04) {
      await page.mouse.move(box.x + box.width * fx, box.y + box.height * fy);
      if (await page.locator('[data-testid=tooltip]').count()) at = { x: box.x + box.width * fx, y: box.y + box.height * fy };
    }
    if (at) break;
  }
  assert.ok(at, `${name}: no band under the pointer`);
  await page.mouse.click(at.x, at.y);
  await page.waitForSelector('[data-testid=stack-live-memory]');
}

/** The icicle's outline of the pinned band: its allocation's path and the cells drawn along it. */
async function flameMark(name) {
  try {
    await page.waitForFunction(() => document.querySelector('[data-testid=icicle]')?.dataset.markPath !== undefined, null, { timeout: 60000 });
  } catch (err) {
    const seen = await page.evaluate(() => JSON.stringify({ hash: location.hash, icicle: document.querySelector('[data-testid=icicle]')?.dataset ?? null }));
    throw new Error(`${name}: the flamegraph outlines no pinned band: ${seen}`, { cause: err });
  }
  return page.$eval('[data-testid=icicle]', (e) => ({
    event: e.dataset.event === undefined ? null : Number(e.dataset.event),
    path: JSON.parse(e.dataset.markPath),
    cells: JSON.parse(e.dataset.markedFrames),
  }));
}

test('a pinned band opens live memory right after its allocation, its stack outlined in the flamegraph', async (t) => {
  const file = path.join(SNAPS, REAL[1]);
  if (!fs.existsSync(file)) {
    skipOrFail(t, `${file} missing: pinned band → flamegraph check`);
    return;
  }
  const name = path.basename(file);
  await page.goto('about:blank');
  await page.goto(`${base}#file=${encodeURIComponent(name)}&view=timeline`);
  await page.waitForSelector('#memlens[data-state=empty]');
  await page.setInputFiles('[data-testid=file-input]', file);
  // Pinned, then the view switched to Diagnosis: the flamegraph at the peak outlines its stack.
  await pinBand(name);
  await page.selectOption('[data-testid=view-select]', 'diagnosis');
  await page.waitForFunction(() => {
    const v = document.querySelector('[data-testid=diagnosis]')?.dataset.verdict;
    return v && v !== 'pending';
  }, null, { timeout: 60000 });
  const device = Number(await page.$eval('[data-testid=diagnosis]', (e) => e.dataset.device));
  const atPeak = await flameMark(name);
  // Back on the timeline, the same band pinned: "live memory here" opens the flamegraph right
  // after its alloc, where it is alive, so its path is drawn.
  await page.selectOption('[data-testid=view-select]', 'timeline');
  await pinBand(name);
  await page.click('[data-testid=stack-live-memory]');
  await page.waitForFunction(() => /view=diagnosis/.test(location.hash) && document.querySelector('[data-testid=icicle]')?.dataset.event !== undefined, null, { timeout: 60000 });
  const ic = await page.$eval('[data-testid=icicle]', (e) => ({ total: Number(e.dataset.totalBytes), event: Number(e.dataset.event) }));
  const cli = JSON.parse(memlens(['diagnose', '--json', '--at', String(ic.event), file])).devices[0];
  assert.equal(ic.total, cli.peak.allocated_bytes, `${name}: flamegraph after event ${ic.event} = memlens diagnose --at`);
  const here = await flameMark(name);
  assert.equal(here.event, ic.event);
  // The allocation's stack, read independently from the pickle at its alloc entry.
  const want = JSON.parse(execFileSync('python3', [path.join(HERE, 'stack_path.py'), file, String(device), String(ic.event)]).toString());
  assert.deepEqual(here.path, want, `${name}: the outlined path is the stack of the alloc at event ${ic.event}`);
  assert.deepEqual(atPeak.path, want, `${name}: the same path in the flamegraph at the peak`);
  // The outlined cells run down that path from the root (as deep as cells are drawn; the
  // allocation is alive there, so at least its root frame's cell).
  assert.ok(here.cells.length >= 1, `${name}: no cell outlined after event ${ic.event}: ${JSON.stringify(here)}`);
  assert.deepEqual(here.cells, want.slice(0, here.cells.length), `${name}: outlined cells after event ${ic.event}`);
  assert.deepEqual(atPeak.cells, want.slice(0, atPeak.cells.length), `${name}: outlined cells at the peak`);
  console.log(`diagnosis ${name}: pinned band (alloc at event ${ic.event}) outlined in ${here.cells.length} of ${want.length} cells, ${atPeak.cells.length} at the peak`);
  await page.screenshot({ path: path.join(OUT, 'diagnosis-flame-mark.png') });
});

test('no request left 127.0.0.1, and no page errors', async () => {
  assert.deepEqual(foreign, []);
  assert.deepEqual(pageErrors, []);
});
