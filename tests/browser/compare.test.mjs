// End-to-end tests of the Compare view (`#view=compare`) in real headless Chromium, against the
// built dist/ served on 127.0.0.1 (same harness as viewer.test.mjs):
//
// - two real snapshots (the 512 and 1024 training runs of one model, ../shared/snapshots) opened
//   one after the other: A = the first, B = the second; the peaks, the frame rows, the ledger
//   rows and the stack rows equal `memlens compare --json A B`, and each timeline's marked peak
//   equals its side;
// - both timelines share one x axis: a wheel zoom over A puts B at the same fraction of its
//   trace, a drag over B pans A the same way, a click on the totals chart moves both;
// - the cursor: the pointer over A stands for an event in each trace; what the view lists there
//   equals `memlens diagnose --json --at E` on each file (live totals, and per user frame and
//   per ledger class B minus A) and, by stack, compare_ref.py's reading of the two moments;
// - a frame row outlines its bands in both timelines: the match counts equal the independent
//   count of search_count.py on each file; its ↗ opens B on the timeline with the frame searched;
// - the hash names both sides, and a page opened on it compares them the other way round;
// - two devices of one file (`memlens synth --devices 2`) compare as A and B;
// - one file on the view: its worker holds its unasked work (the diagnosis) while the view
//   waits for a second, and leaving the view lets it go.
//
// Run: (cd tests/browser && node --test --test-concurrency=1 compare.test.mjs)   after
// `scripts/serve.sh --build` and `cargo build --release -p memlens-cli`.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { openViewer, memlens, skipOrFail, ROOT, OUT, SNAPS } from './harness.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const A = path.join(SNAPS, 'Wedsonlin__assignment2-systems__results_medium_512_training_memory_snapshot.pickle');
const B = path.join(SNAPS, 'Wedsonlin__assignment2-systems__results_medium_1024_training_memory_snapshot.pickle');

let viewer, base, page, foreign, pageErrors;

before(async () => {
  viewer = await openViewer({ viewport: { width: 1400, height: 1000 } });
  ({ base, page, foreign, pageErrors } = viewer);
});

after(async () => {
  await viewer?.close();
});

/** The independent count (Python) of what a frame search should match. */
function pyCount(file, device, frame) {
  return Number(execFileSync('python3', [path.join(HERE, 'search_count.py'), file, String(device), '', frame]).toString().trim());
}

/** Opens `files` one after the other on `hash`, and waits for the compared view, painted. */
async function openCompare(hash, files) {
  await page.goto('about:blank');
  await page.goto(`${base}${hash}`);
  await page.waitForSelector('#memlens[data-state=empty]');
  for (const f of files) {
    await page.setInputFiles('[data-testid=file-input]', f);
    await page.waitForFunction((n) => document.getElementById('memlens')?.dataset.file === n && document.getElementById('memlens').dataset.state === 'ready', path.basename(f), { timeout: 60000 });
  }
  await page.waitForSelector('[data-testid=compare][data-state=ready]', { timeout: 60000 });
  await page.waitForSelector('[data-testid=compare-timelines][data-painted-ms]', { timeout: 60000 });
}

/** Each track's data window (event space) and its trace length. */
async function windows() {
  return page.$$eval('[data-testid^=compare-track-] canvas[data-testid=timeline-canvas]', (cs) => cs.map((c) => c.dataset.window.split(',').map(Number)));
}

/** Trace entries of the device compared, per file (`memlens stats --json`). */
function entries(file, device) {
  return JSON.parse(memlens(['stats', '--json', file])).devices.find((d) => d.device === device).trace_entries;
}

/** B minus A per group (`key`: user frame, or ledger class), as core orders it (by absolute
 * change, then key), nonzero only. */
function groupDiff(a, b, key = 'frame') {
  const m = new Map();
  for (const g of a) m.set(g[key], { a: g.bytes, b: 0 });
  for (const g of b) m.set(g[key], { a: m.get(g[key])?.a ?? 0, b: g.bytes });
  return [...m].map(([k, v]) => ({ [key]: k, change: v.b - v.a }))
    .filter((r) => r.change !== 0)
    .sort((x, y) => Math.abs(y.change) - Math.abs(x.change) || (x[key] < y[key] ? -1 : x[key] > y[key] ? 1 : 0));
}

/** Stack rows (`testid`) as {frame, frames, change}. */
async function stackRows(scope, testid) {
  return page.$$eval(`${scope} tr[data-testid=${testid}]`, (rs) => rs.map((r) => ({ frame: r.dataset.frame, frames: r.dataset.frames ? r.dataset.frames.split('\n') : [], change: Number(r.dataset.change) })));
}

/** A stack change of core or a reference as a stack row. */
const asRow = (c) => ({ frame: c.frame, frames: c.frames, change: c.change_bytes });

/** Asserts that both timelines show the same fraction of their traces. */
function sameFraction(w, n, label) {
  const f = w.map((win, i) => win.map((x) => x / (n[i] + 1)));
  assert.ok(Math.abs(f[0][0] - f[1][0]) < 1e-3 && Math.abs(f[0][1] - f[1][1]) < 1e-3, `${label}: A ${w[0]} of ${n[0] + 1}, B ${w[1]} of ${n[1] + 1}`);
}

test('Compare view: peaks = memlens compare --json, synced timelines, cursor diff = diagnose --at, highlight = search count', async (t) => {
  if (!fs.existsSync(A) || !fs.existsSync(B)) {
    skipOrFail(t, `${A} or ${B} missing: Compare view check`);
    return;
  }
  await openCompare('#view=compare', [A, B]);
  const shown = await page.$eval('[data-testid=compare]', (e) => ({ a: e.dataset.a, b: e.dataset.b, ad: Number(e.dataset.aDevice), bd: Number(e.dataset.bDevice) }));
  assert.deepEqual([shown.a, shown.b], [path.basename(A), path.basename(B)], 'A = the file opened first, B = the current one');
  const cli = JSON.parse(memlens(['compare', '--json', A, B])).devices.find((d) => d.device === shown.bd);
  assert.ok(cli, `memlens compare has device ${shown.bd}`);

  // Peaks: the table and the marks on the timelines.
  const peak = await page.$eval('[data-testid=compare-device]', (d) => ({ a: Number(d.dataset.aPeak), b: Number(d.dataset.bPeak), change: Number(d.dataset.change) }));
  assert.deepEqual(peak, { a: cli.a.timeline_peak_bytes, b: cli.b.timeline_peak_bytes, change: cli.peak_change_bytes });
  const marks = await page.$$eval('[data-testid^=compare-track-]', (ts) => ts.map((x) => Number(x.dataset.peakBytes)));
  assert.deepEqual(marks, [cli.a.timeline_peak_bytes, cli.b.timeline_peak_bytes], 'peaks marked on the timelines');
  const rows = await page.$$eval('tr[data-testid=compare-row]', (rs) => rs.map((r) => ({ frame: r.dataset.frame, change: Number(r.dataset.change) })));
  assert.ok(rows.length > 0, 'rows shown');
  assert.deepEqual(rows, cli.by_frame.filter((c) => c.change_bytes !== 0).slice(0, rows.length).map((c) => ({ frame: c.frame, change: c.change_bytes })));
  const classes = await page.$$eval('tr[data-testid=compare-class]', (rs) => rs.map((r) => ({ class: r.dataset.class, change: Number(r.dataset.change) })));
  assert.deepEqual(classes, cli.by_class.filter((c) => c.change_bytes !== 0).map((c) => ({ class: c.class, change: c.change_bytes })));
  const stacks = await stackRows('[data-testid=compare-device]', 'compare-stack-row');
  assert.ok(stacks.length > 0, 'stack rows shown');
  assert.deepEqual(stacks, cli.by_stack.map(asRow), 'stacks at the peaks = memlens compare --json by_stack');

  // Zoom over A: B shows the same fraction of its trace.
  const n = [entries(A, shown.ad), entries(B, shown.bd)];
  const before0 = await windows();
  sameFraction(before0, n, 'unzoomed');
  const canvas = (i) => page.$(`[data-testid=compare-track-${i}] canvas[data-testid=timeline-canvas]`);
  const boxA = await (await canvas('a')).boundingBox();
  await page.mouse.move(boxA.x + boxA.width * 0.4, boxA.y + boxA.height / 2);
  for (let i = 0; i < 4; i++) await page.mouse.wheel(0, -300);
  await page.waitForFunction((w) => {
    const cs = document.querySelectorAll('[data-testid^=compare-track-] canvas[data-testid=timeline-canvas]');
    return cs.length === 2 && cs[0].dataset.window !== w[0] && cs[1].dataset.window !== w[1];
  }, before0.map((w) => w.map((x) => x.toFixed(2)).join(',')));
  const zoomed = await windows();
  assert.ok(zoomed[0][1] - zoomed[0][0] < 0.5 * (n[0] + 1), `A zoomed in: ${zoomed[0]}`);
  sameFraction(zoomed, n, 'after a wheel zoom over A');

  // Drag over B: A pans the same way.
  const boxB = await (await canvas('b')).boundingBox();
  await page.mouse.move(boxB.x + boxB.width * 0.6, boxB.y + boxB.height / 2);
  await page.mouse.down();
  await page.mouse.move(boxB.x + boxB.width * 0.45, boxB.y + boxB.height / 2, { steps: 5 });
  await page.mouse.up();
  await page.waitForFunction((w) => document.querySelector('[data-testid=compare-track-a] canvas[data-testid=timeline-canvas]').dataset.window !== w, zoomed[0].map((x) => x.toFixed(2)).join(','));
  const panned = await windows();
  assert.ok(panned[0][0] > zoomed[0][0], `A panned right with B: ${zoomed[0]} → ${panned[0]}`);
  sameFraction(panned, n, 'after a drag over B');

  // The cursor over A: what is alive there in A and B = memlens diagnose --at.
  await page.mouse.move(boxA.x + boxA.width * 0.5, boxA.y + boxA.height / 2);
  await page.waitForSelector('[data-testid=compare-cursor][data-state=ready]', { timeout: 60000 });
  const cur = await page.$eval('[data-testid=compare-cursor]', (e) => ({
    ae: Number(e.dataset.aEvent), be: Number(e.dataset.bEvent), a: Number(e.dataset.aBytes), b: Number(e.dataset.bBytes),
    rows: [...e.querySelectorAll('tr[data-testid=compare-cursor-row]')].map((r) => ({ frame: r.dataset.frame, change: Number(r.dataset.change) })),
    classes: [...e.querySelectorAll('tr[data-testid=compare-cursor-class]')].map((r) => ({ class: r.dataset.class, change: Number(r.dataset.change) })),
  }));
  const curStacks = await stackRows('[data-testid=compare-cursor]', 'compare-cursor-stack-row');
  const lines = await page.$$eval('[data-testid^=compare-track-] [data-testid=cursor-line]', (ls) => ls.map((l) => getComputedStyle(l).display));
  assert.deepEqual(lines, ['block', 'block'], 'the cursor line shows in both timelines');
  assert.ok(Math.abs(cur.ae / n[0] - cur.be / n[1]) < 0.01, `same moment of both traces: A ${cur.ae}/${n[0]}, B ${cur.be}/${n[1]}`);
  const atA = JSON.parse(memlens(['diagnose', '--json', '--device', String(shown.ad), '--at', String(cur.ae), A])).devices[0].peak;
  const atB = JSON.parse(memlens(['diagnose', '--json', '--device', String(shown.bd), '--at', String(cur.be), B])).devices[0].peak;
  assert.equal(cur.a, atA.allocated_bytes, `A alive after entry ${cur.ae} = diagnose --at`);
  assert.equal(cur.b, atB.allocated_bytes, `B alive after entry ${cur.be} = diagnose --at`);
  assert.ok(cur.rows.length > 0, 'cursor rows shown');
  assert.deepEqual(cur.rows, groupDiff(atA.top, atB.top).slice(0, cur.rows.length), 'cursor rows = B minus A of diagnose --at by user frame');
  assert.ok(cur.classes.length > 0, 'cursor ledger rows shown');
  assert.deepEqual(cur.classes, groupDiff(atA.by_class, atB.by_class, 'class'), 'cursor ledger rows = B minus A of diagnose --at by class');
  const refAt = JSON.parse(execFileSync('python3', [path.join(ROOT, 'tests/python/compare_ref.py'), A, B, String(shown.ad), String(cur.ae), String(shown.bd), String(cur.be)]).toString());
  assert.deepEqual([refAt.a_bytes, refAt.b_bytes], [cur.a, cur.b], 'compare_ref.py reads the same moments');
  assert.ok(curStacks.length > 0, 'cursor stack rows shown');
  assert.deepEqual(curStacks, refAt.by_stack.map(asRow), 'cursor stack rows = compare_ref.py by_stack');
  await page.screenshot({ path: path.join(OUT, 'compare-timelines.png') });

  // A frame row outlines its bands in both timelines: as many as the frame search finds.
  const first = rows.find((r) => !r.frame.startsWith('('));
  await page.click(`tr[data-testid=compare-row][data-frame="${first.frame}"]`);
  await page.waitForFunction(() => [...document.querySelectorAll('[data-testid^=compare-track-]')].every((x) => x.dataset.matches !== undefined), null, { timeout: 60000 });
  const counts = await page.$$eval('[data-testid^=compare-track-]', (ts) => ts.map((x) => Number(x.dataset.matches)));
  assert.deepEqual(counts, [pyCount(A, shown.ad, first.frame), pyCount(B, shown.bd, first.frame)], `bands of ${first.frame}`);
  assert.ok(counts[0] + counts[1] > 0, 'something outlined');

  // The hash names both sides.
  const hash = await page.evaluate(() => location.hash);
  assert.ok(hash.includes(`a=${encodeURIComponent(path.basename(A))}`) && hash.includes(`file=${encodeURIComponent(path.basename(B))}`), hash);
  // ↗ opens B on the timeline with the frame searched.
  await page.click(`tr[data-testid=compare-row][data-frame="${first.frame}"] [data-testid=compare-open]`);
  await page.waitForFunction((nm) => /view=timeline/.test(location.hash) && document.getElementById('memlens')?.dataset.file === nm, path.basename(B));
  assert.equal(await page.inputValue('[data-testid=search-frame]'), first.frame);

  // A page opened on a hash compares the sides it names (here the other way round).
  await openCompare(`#view=compare&file=${encodeURIComponent(path.basename(A))}&a=${encodeURIComponent(path.basename(B))}`, [B, A]);
  const swapped = await page.$eval('[data-testid=compare]', (e) => [e.dataset.a, e.dataset.b]);
  assert.deepEqual(swapped, [path.basename(B), path.basename(A)], 'the hash decides A and B');
  assert.equal(await page.$eval('[data-testid=compare-device]', (d) => Number(d.dataset.change)), -cli.peak_change_bytes, 'swapped: the change changes sign');
});

test('Compare view: two devices of one file', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'memlens-compare-'));
  const file = path.join(dir, 'two_devices.pickle');
  memlens(['synth', '--workload', 'training', '--devices', '2', '--events', '20000', '--seed', '7', '-q', '-o', file]);
  await openCompare('#view=compare', [file]);
  const shown = await page.$eval('[data-testid=compare]', (e) => ({ a: e.dataset.a, b: e.dataset.b, ad: Number(e.dataset.aDevice), bd: Number(e.dataset.bDevice) }));
  assert.equal(shown.a, shown.b, 'one file on both sides');
  assert.notEqual(shown.ad, shown.bd, 'two devices');
  const stats = JSON.parse(memlens(['stats', '--json', file])).devices;
  const peak = await page.$eval('[data-testid=compare-device]', (d) => ({ a: Number(d.dataset.aPeak), b: Number(d.dataset.bPeak) }));
  const of = (d) => stats.find((x) => x.device === d).timeline_peak_bytes;
  assert.deepEqual(peak, { a: of(shown.ad), b: of(shown.bd) }, 'each device at its own peak');
  // Pick B = A's device: the sides swap.
  await page.selectOption('[data-testid=compare-b]', { label: `two_devices.pickle · cuda:${shown.ad}` });
  await page.waitForFunction((d) => Number(document.querySelector('[data-testid=compare]')?.dataset.bDevice) === d && document.querySelector('[data-testid=compare]')?.dataset.state === 'ready', shown.ad);
  const picked = await page.$eval('[data-testid=compare]', (e) => [Number(e.dataset.aDevice), Number(e.dataset.bDevice)]);
  assert.deepEqual(picked, [shown.bd, shown.ad], 'swapped devices');
  const swapped = await page.$eval('[data-testid=compare-device]', (d) => ({ a: Number(d.dataset.aPeak), b: Number(d.dataset.bPeak) }));
  assert.deepEqual(swapped, { a: of(shown.bd), b: of(shown.ad) });
  fs.rmSync(dir, { recursive: true, force: true });
});

test('one file on the Compare view: its worker holds the unasked diagnosis until the view is left', async () => {
  await page.goto('about:blank');
  await page.goto(`${base}#view=compare`);
  await page.waitForSelector('#memlens[data-state=empty]');
  await page.setInputFiles('[data-testid=file-input]', A);
  await page.waitForSelector('#memlens[data-state=ready] [data-testid=compare][data-state=need-two]', { timeout: 60000 });
  // Held: the view waits for a second file, and the worker's unasked work waits with it.
  await page.waitForTimeout(1500);
  assert.equal(await page.$eval('#memlens', (e) => e.dataset.diagnosisMs ?? null), null, 'no diagnosis while the Compare view waits');
  // Leaving the view lets it go: the Diagnosis view shows the default device's (sent unasked).
  await page.selectOption('[data-testid=view-select]', 'diagnosis');
  await page.waitForSelector('#memlens[data-diagnosis-ms] [data-testid=diagnosis][data-verdict]', { timeout: 60000 });
  const cli = JSON.parse(memlens(['diagnose', '--json', A]));
  const verdict = await page.$eval('[data-testid=diagnosis]', (e) => e.dataset.verdict);
  assert.equal(verdict, cli.devices[0].verdict.kind, 'the verdict = memlens diagnose');
});

test('a range selected on a fixture lists exactly the reference growth (between_ref.py, diagnose --between)', async () => {
  const file = path.join(ROOT, 'tests/fixtures/bin/p2_snapshot.pickle');
  await page.goto('about:blank');
  await page.goto(`${base}#view=timeline`);
  await page.waitForSelector('#memlens[data-state=empty]');
  await page.setInputFiles('[data-testid=file-input]', file);
  await page.waitForSelector('#memlens[data-state=ready][data-layout=exact]', { timeout: 60000 });
  const c = await page.$('canvas[data-testid=timeline-canvas]');
  const box = await c.boundingBox();
  // Shift-drag: select a range (box zoom); the panel lists what grew between its ends.
  const y = box.y + box.height / 2;
  await page.keyboard.down('Shift');
  await page.mouse.move(box.x + 76 + (box.width - 88) * 0.2, y);
  await page.mouse.down();
  await page.mouse.move(box.x + 76 + (box.width - 88) * 0.8, y, { steps: 6 });
  await page.mouse.up();
  await page.keyboard.up('Shift');
  await page.waitForSelector('[data-testid=grew][data-state=ready]', { timeout: 60000 });
  const g = await page.$eval('[data-testid=grew]', (e) => ({ from: Number(e.dataset.from), to: Number(e.dataset.to), net: Number(e.dataset.netBytes) }));
  assert.ok(g.to > g.from, `a range: ${g.from}..${g.to}`);
  const rows = await page.$$eval('tr[data-testid=grew-row]', (rs) => rs.map((r) => ({ frame: r.dataset.frame, change: Number(r.dataset.change) })));
  const ref = JSON.parse(execFileSync('python3', [path.join(ROOT, 'tests/python/between_ref.py'), file, '0', String(g.from), String(g.to)]).toString());
  assert.ok(ref.by_frame.length > 1, `the reference finds growth in ${g.from}..${g.to}`);
  assert.deepEqual(rows, ref.by_frame.map((c) => ({ frame: c.frame, change: c.change_bytes })), 'every row, exactly the reference');
  assert.equal(g.net, ref.to_bytes - ref.from_bytes);
  const stacks = await page.$$eval('tr[data-testid=grew-stack-row]', (rs) => rs.map((r) => ({ frame: r.dataset.frame, frames: r.dataset.frames ? r.dataset.frames.split('\n') : [], change: Number(r.dataset.change) })));
  assert.ok(stacks.length > 0, 'the panel lists stacks');
  assert.deepEqual(stacks, ref.by_stack.slice(0, 10).map((c) => ({ frame: c.frame, frames: c.frames, change: c.change_bytes })), 'by stack: exactly the reference');
  const cli = JSON.parse(memlens(['diagnose', '--json', '--between', String(g.from), String(g.to), file])).devices[0];
  assert.deepEqual(cli.by_frame.map((c) => ({ frame: c.frame, change: c.change_bytes })), rows, 'and the CLI agrees');
});

test('no request left 127.0.0.1, and no page errors', async () => {
  assert.deepEqual(foreign, []);
  assert.deepEqual(pageErrors, []);
});
