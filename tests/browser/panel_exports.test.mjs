// The daily-use details of the viewer, end to end in headless Chromium:
// - a gzip-compressed snapshot (made here from a real one, and from a fixture under a plain
//   name) opens directly and shows the same summary as the pickle (`memlens stats --json`);
// - the `annotated` fixture (tests/fixtures/annotated.txt): `annotate` texts in the tooltip and
//   the stack panel of the allocation they name and as markers; `compile_context` and
//   `user_metadata` in the panel; the user's frame first and highlighted, C++ frames folded into
//   one line that opens on click, site-packages and project paths shortened with the full line on
//   hover, the copy-stack button; the MLU backend's settings variable and device names;
// - every number of the summary strip and the state view has a hover definition;
// - exports: the timeline as PNG and SVG (zoomed: the SVG's bands and rectangles = the canvas's,
//   the annotate marks in it; with the reserved and capacity lines and a search: the lines
//   where the canvas draws them, the capacity's words, the axes' labels, the outlines; dark in
//   the dark theme), the state map as PNG, a Diagnosis table as CSV (rows = the table's rows),
//   the event list as CSV (all or a range; header, sizes in bytes; the rows in view read as the
//   CSV says, at both ends of the list; a range outside the list refused), copy link;
// - the page's icon is inline, so no request fails.
// Screenshots go to tests/out/panel-*.png.
//
// Env: MEMLENS_BIN (default: <target>/release/memlens), CHROMIUM, MEMLENS_DIST as in
// viewer.test.mjs.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { openViewer, summary as summaryOf, openFile as open, statsJson, defaultDevice, skipOrFail, OUT, SNAPS,
  FIXTURES, DIST, MARGIN_LEFT, MARGIN_RIGHT, redrawn } from './harness.mjs';

const REAL = 'Wedsonlin__assignment2-systems__results_medium_1024_training_memory_snapshot.pickle';
const METRICS = ['reserved_bytes', 'allocated_bytes', 'active_bytes', 'inactive_split_bytes',
  'largest_free_block_bytes', 'timeline_peak_bytes', 'peak_reserved_bytes', 'trace_entries'];

let viewer, base, page, pageErrors, scratch;

const summary = () => summaryOf(page);

/** Opens `file` and waits for its exact layout. */
async function openFile(file) {
  await open(page, file, { paint: 'exactPaintMs' });
}

/** Moves over the plot until the tooltip matches `re`; returns that point. */
async function findBand(re = /./) {
  const box = await page.locator('[data-testid=timeline-canvas]').boundingBox();
  for (const fy of [0.95, 0.9, 0.85, 0.75, 0.6, 0.45, 0.3]) {
    for (let fx = 0.06; fx < 0.99; fx += 0.02) {
      const x = box.x + box.width * fx;
      const y = box.y + box.height * fy;
      await page.mouse.move(x, y);
      const tip = page.locator('[data-testid=tooltip]');
      if (await tip.count() && re.test(await tip.textContent())) return { x, y };
    }
  }
  return null;
}

before(async () => {
  viewer = await openViewer();
  ({ base, page, pageErrors } = viewer);
  scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'memlens-panel-'));
  await viewer.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base.replace(/\/memlens\/$/, '') });
  await page.goto(base);
  await page.waitForSelector('#memlens[data-state=empty]');
});

after(async () => {
  await viewer?.close();
  if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
});

test('a .pickle.gz opens directly with the summary of the pickle', async (t) => {
  // A fixture, compressed under a plain name: recognised by content.
  const fixture = path.join(FIXTURES, 'p4_snapshot.pickle');
  const renamed = path.join(scratch, 'compressed.pickle');
  fs.writeFileSync(renamed, zlib.gzipSync(fs.readFileSync(fixture)));
  await openFile(renamed);
  const want = defaultDevice(statsJson(fixture));
  let sum = await summary();
  for (const k of METRICS) assert.equal(sum.metrics[k], String(want[k]), `fixture .gz: ${k}`);

  const real = path.join(SNAPS, REAL);
  if (!fs.existsSync(real)) return skipOrFail(t, `${real} not found`);
  const gz = path.join(scratch, `${REAL}.gz`);
  fs.writeFileSync(gz, zlib.gzipSync(fs.readFileSync(real)));
  await openFile(gz);
  const st = defaultDevice(statsJson(real));
  sum = await summary();
  assert.equal(sum.device, String(st.device));
  for (const k of METRICS) assert.equal(sum.metrics[k], String(st[k]), `real .gz: ${k}`);
  // The CLI reads the same .gz the same way.
  assert.deepEqual(statsJson(gz), statsJson(real));
  await page.screenshot({ path: path.join(OUT, 'panel-gzip.png') });

  // A damaged .gz is one clear error, not a hang.
  const cut = path.join(scratch, 'cut.pickle.gz');
  const bytes = fs.readFileSync(gz);
  fs.writeFileSync(cut, bytes.subarray(0, bytes.length >> 1));
  await page.setInputFiles('[data-testid=file-input]', cut);
  await page.waitForSelector('[data-testid=error]', { timeout: 30000 });
  assert.match(await page.textContent('[data-testid=error]'), /gzip|truncated/i);
  await page.click('[data-testid=error] button');
});

test('annotations, the user frame first, folded C++ frames, copy stack, backend names', async () => {
  const file = path.join(FIXTURES, 'annotated.pickle');
  await openFile(file);
  // Cambricon's variable: devices are mlu:N and the settings view names it.
  const dev = await page.textContent('[data-testid=device-select] option');
  assert.match(dev, /^mlu:0 /);

  const at = await findBand(/activation checkpoint/);
  assert.ok(at, 'no band whose tooltip shows its annotation');
  const tip = await page.textContent('[data-testid=tooltip]');
  assert.match(tip, /annotation: activation checkpoint: layer1/);
  assert.doesNotMatch(tip, /scratch for attention/, 'another allocation\'s annotation');
  await page.screenshot({ path: path.join(OUT, 'panel-annotation-tooltip.png') });
  await page.mouse.click(at.x, at.y);
  await page.waitForSelector('[data-testid=stack-panel] [data-testid=frames]');
  const panel = await page.textContent('[data-testid=stack-panel]');
  assert.match(panel, /Annotation \(event \d+\): activation checkpoint: layer1/);
  assert.match(panel, /Compile context: compiled fn forward \(graph 0\)/);
  assert.match(panel, /User metadata: layer1\.weight/);

  // The user's frame leads, highlighted, its path shortened, the full line on hover.
  const lead = page.locator('[data-testid=frames] > [data-testid=user-frame]');
  assert.equal(await lead.count(), 1);
  assert.equal((await lead.textContent()).trim(), 'model.py:30:forward');
  assert.equal(await lead.getAttribute('title'), '/home/alice/project/src/model.py:30:forward');
  const first = await page.evaluate(() => document.querySelector('[data-testid=frames]').firstElementChild.dataset.testid);
  assert.equal(first, 'user-frame');
  // The five C++ frames are one closed line that opens on click.
  const fold = page.locator('[data-testid=native-frames]');
  assert.equal(await fold.count(), 1);
  assert.equal((await fold.locator('summary').textContent()).trim(), '5 C++ frames');
  assert.equal(await fold.evaluate((d) => d.open), false);
  await fold.locator('summary').click();
  assert.equal(await fold.evaluate((d) => d.open), true);
  assert.match(await fold.textContent(), /at::native::addmm_out_cuda_impl/);
  // site-packages paths are cut after site-packages/.
  const texts = await page.$$eval('[data-testid=frames] [data-testid=frame]', (e) => e.map((x) => [x.textContent, x.title]));
  assert.ok(texts.some(([s, full]) => s === 'torch/nn/modules/linear.py:125:forward'
    && full === '/opt/conda/lib/python3.11/site-packages/torch/nn/modules/linear.py:125:forward'), JSON.stringify(texts));
  await page.screenshot({ path: path.join(OUT, 'panel-stack.png') });

  // Copy stack: the text form, full paths.
  await page.click('[data-testid=copy-stack]');
  await page.waitForSelector('[data-testid=copy-stack][data-copied=true]');
  const copied = await page.evaluate(() => navigator.clipboard.readText());
  assert.match(copied, /^b'7fb300000000_\d+ 4000000 bytes/);
  assert.match(copied, /\/home\/alice\/project\/src\/model\.py:30:forward/);
  assert.match(copied, /c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc/);

  // The settings view names the backend's variable.
  await page.selectOption('[data-testid=view-select]', 'settings');
  await page.waitForSelector('[data-testid=alloc-conf]');
  assert.equal(await page.getAttribute('[data-testid=alloc-conf]', 'data-var'), 'PYTORCH_MLU_ALLOC_CONF');
  assert.match(await page.textContent('[data-testid=alloc-conf]'), /expandable_segments:True,max_split_size_mb:256/);
  await page.selectOption('[data-testid=view-select]', 'timeline');
});

test('every number of the summary strip and the state view explains itself', async () => {
  const real = fs.existsSync(path.join(SNAPS, REAL)) ? path.join(SNAPS, REAL) : path.join(FIXTURES, 'p4_snapshot.pickle');
  await openFile(real);
  const strip = await page.$$eval('[data-testid=summary] [data-metric]', (e) => e.map((x) => ({
    key: x.dataset.metric, value: x.dataset.value, def: x.dataset.definition || '', title: x.title || '' })));
  assert.ok(strip.length >= 9);
  for (const m of strip) {
    assert.ok(m.def.length > 20, `${m.key}: no definition`);
    assert.ok(m.title.startsWith(m.def), `${m.key}: the hover text is not its definition`);
  }
  const v = Object.fromEntries(strip.map((m) => [m.key, BigInt(m.value)]));
  assert.equal(v.reserved_minus_allocated_bytes, v.reserved_bytes - v.allocated_bytes);

  await page.selectOption('[data-testid=view-select]', 'state');
  await page.waitForSelector('[data-testid=state-numbers] [data-metric]', { timeout: 30000 });
  const state = await page.$$eval('[data-testid=state-numbers] [data-metric]', (e) => e.map((x) => ({
    key: x.dataset.metric, def: x.dataset.definition || '', title: x.title || '' })));
  for (const m of state) assert.ok(m.def.length > 20 && m.title.startsWith(m.def), `${m.key}: no definition`);
  const frag = state.find((m) => m.key === 'state_fragmentation_pct');
  assert.match(frag.def, /1 − largest free block ÷ free bytes/);
  assert.ok(state.some((m) => m.key === 'state_reserved_minus_allocated_bytes'));
  await page.hover('[data-testid=state-numbers] [data-metric=state_fragmentation_pct]');
  await page.screenshot({ path: path.join(OUT, 'panel-definitions.png') });
  await page.selectOption('[data-testid=view-select]', 'timeline');
});

/** Clicks `selector` (or runs `act`) and returns the downloaded file's name and bytes. */
async function download(act) {
  const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 30000 }), act()]);
  const p = await dl.path();
  return { name: dl.suggestedFilename(), bytes: fs.readFileSync(p) };
}

/** Parses an SVG in the page: rectangles per group class, and the plot's data attributes. */
async function readSvg(text) {
  return page.evaluate((t) => {
    const d = new DOMParser().parseFromString(t, 'image/svg+xml');
    if (d.querySelector('parsererror')) return { error: d.querySelector('parsererror').textContent };
    const plot = d.querySelector('g.plot');
    const count = (sel) => [...plot.querySelectorAll(sel)].reduce((n, g) => n + g.querySelectorAll('rect').length, 0);
    return {
      bands: Number(plot.dataset.bands), rects: Number(plot.dataset.rects), bandRectsAttr: Number(plot.dataset.bandRects),
      bandRects: count('g.band, g.band-before-trace, g.pool-envelope'), allRects: plot.querySelectorAll('rect').length,
      annotate: count('g.marker-annotate'),
    };
  }, text);
}

test('exports: timeline PNG and SVG at the drawn zoom, state PNG, table CSV, copy link', async () => {
  const real = fs.existsSync(path.join(SNAPS, REAL)) ? path.join(SNAPS, REAL) : path.join(FIXTURES, 'p4_snapshot.pickle');
  await openFile(real);
  const canvas = page.locator('[data-testid=timeline-canvas]');
  const box = await canvas.boundingBox();
  await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2);
  await page.mouse.wheel(0, -400);
  await page.waitForFunction(() => /x0=/.test(location.hash));
  await page.waitForTimeout(300);
  const drawn = await canvas.evaluate((c) => ({ bands: Number(c.dataset.bands), rects: Number(c.dataset.rects), w: c.width, h: c.height }));
  assert.ok(drawn.bands > 0);

  const svgFile = await download(() => page.click('[data-testid=export-svg]'));
  assert.match(svgFile.name, /-timeline\.svg$/);
  const svg = await readSvg(svgFile.bytes.toString());
  assert.equal(svg.error, undefined);
  assert.equal(svg.bands, drawn.bands, 'bands in the SVG = bands drawn on the canvas');
  assert.equal(svg.rects, drawn.rects, 'rectangles in the SVG = rectangles drawn');
  assert.equal(svg.allRects, drawn.rects);
  assert.equal(svg.bandRects, svg.bandRectsAttr);
  fs.writeFileSync(path.join(OUT, 'panel-export-timeline.svg'), svgFile.bytes);

  const png = await download(() => page.click('[data-testid=export-png]'));
  assert.match(png.name, /-timeline\.png$/);
  assert.equal(png.bytes.subarray(1, 4).toString(), 'PNG');
  assert.equal(png.bytes.readUInt32BE(16), drawn.w, 'the PNG is the canvas');
  assert.equal(png.bytes.readUInt32BE(20), drawn.h);
  fs.writeFileSync(path.join(OUT, 'panel-export-timeline.png'), png.bytes);

  // Copy link: the page's address with its hash (the view state).
  await page.click('[data-testid=copy-link]');
  await page.waitForSelector('[data-testid=copy-link][data-copied=true]');
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), await page.evaluate(() => location.href));

  // The state map as PNG.
  await page.selectOption('[data-testid=view-select]', 'state');
  await page.waitForSelector('[data-testid=state-numbers] [data-metric]', { timeout: 30000 });
  await page.waitForTimeout(300);
  const statePng = await download(() => page.click('[data-testid=export-png]'));
  assert.match(statePng.name, /-state\.png$/);
  assert.equal(statePng.bytes.subarray(1, 4).toString(), 'PNG');
  fs.writeFileSync(path.join(OUT, 'panel-export-state.png'), statePng.bytes);

  // A Diagnosis table as CSV: as many rows as the table.
  await page.selectOption('[data-testid=view-select]', 'diagnosis');
  await page.waitForSelector('main.content table tr', { timeout: 60000 });
  await page.focus('[data-testid=export-csv]');
  const labels = await page.$$eval('[data-testid=export-csv] option', (o) => o.map((x) => x.textContent));
  assert.ok(labels.length >= 2, `tables listed: ${labels}`);
  const want = await page.$$eval('main.content table', (t) => t.map((x) => x.querySelectorAll('tr').length));
  const csv = await download(() => page.selectOption('[data-testid=export-csv]', { index: 1 }));
  assert.match(csv.name, /-diagnosis-.+\.csv$/);
  const lines = csv.bytes.toString().trimEnd().split('\n');
  assert.equal(lines.length, want[0], 'CSV rows = table rows');
  assert.ok(lines[0].split(',').length >= 2);
  await page.screenshot({ path: path.join(OUT, 'panel-exports.png') });
  await page.selectOption('[data-testid=view-select]', 'timeline');
});

test('exports: the annotated fixture\'s SVG holds its two annotate marks', async () => {
  await openFile(path.join(FIXTURES, 'annotated.pickle'));
  const svgFile = await download(() => page.click('[data-testid=export-svg]'));
  const svg = await readSvg(svgFile.bytes.toString());
  assert.equal(svg.annotate, 2);
  const drawn = await page.locator('[data-testid=timeline-canvas]').evaluate((c) => Number(c.dataset.bands));
  assert.equal(svg.bands, drawn);
});

/** What the exported SVG draws besides the bands: lines, labels, outlines, background. */
async function readSvgDecorations(text) {
  return page.evaluate((t) => {
    const d = new DOMParser().parseFromString(t, 'image/svg+xml');
    const plot = d.querySelector('g.plot');
    const rectsOf = (sel) => [...plot.querySelectorAll(sel)].flatMap((g) => [...g.querySelectorAll('rect')]
      .map((r) => ({ x: Number(r.getAttribute('x')), y: Number(r.getAttribute('y')), w: Number(r.getAttribute('width')), h: Number(r.getAttribute('height')) })));
    const texts = (cls) => [...d.querySelectorAll(`text.${cls}`)].map((e) => ({
      text: e.textContent, x: Number(e.getAttribute('x')), y: Number(e.getAttribute('y')), fill: e.getAttribute('fill'),
      inPlot: plot.contains(e) }));
    const lineRects = rectsOf('g.reserved-line, g.capacity-line').length;
    return {
      background: d.querySelector('rect.background')?.getAttribute('fill'),
      reserved: rectsOf('g.reserved-line'), capacity: rectsOf('g.capacity-line'),
      capacityFill: plot.querySelector('g.capacity-line')?.getAttribute('fill'),
      match: rectsOf('g.match').length, matchRug: rectsOf('g.match-rug').length,
      plotRectsBesidesLines: plot.querySelectorAll('rect').length - lineRects,
      bands: Number(plot.dataset.bands), rects: Number(plot.dataset.rects),
      axisY: texts('axis-y'), axisX: texts('axis-x'), caption: texts('axis-caption'),
      capacityLabel: texts('capacity-label'), traceStart: texts('trace-start-label'),
      grid: d.querySelectorAll('line.grid').length, ticks: d.querySelectorAll('rect.tick').length,
      traceStartLine: plot.querySelectorAll('line.trace-start').length,
    };
  }, text);
}

test('exports: the SVG shows the reserved and capacity lines, their words, the axes and the search outlines', async () => {
  await openFile(path.join(DIST, 'example.pickle'));
  await redrawn(page, () => page.check('[data-testid=reserved-line]'));
  await redrawn(page, () => page.selectOption('[data-testid=capacity]', 'trace'));
  await page.waitForFunction(() => document.querySelector('[data-testid=timeline-canvas]').dataset.capacityBytes);
  await redrawn(page, () => page.fill('[data-testid=search-frame]', 'train.py'));
  await page.waitForSelector('[data-testid=search-count][data-count]');
  const found = Number(await page.getAttribute('[data-testid=search-count]', 'data-count'));
  assert.ok(found > 0);
  await page.waitForTimeout(300);
  const canvas = await page.locator('[data-testid=timeline-canvas]').evaluate((c) => ({
    bands: Number(c.dataset.bands), rects: Number(c.dataset.rects), capPx: Number(c.dataset.capacityPx),
    capBytes: Number(c.dataset.capacityBytes), width: c.clientWidth }));
  const words = (await page.textContent('[data-testid=capacity-text]')).trim();

  const file = await download(() => page.click('[data-testid=export-svg]'));
  const svg = await readSvgDecorations(file.bytes.toString());
  fs.writeFileSync(path.join(OUT, 'panel-export-lines.svg'), file.bytes);
  assert.equal(svg.bands, canvas.bands);
  assert.equal(svg.rects, canvas.rects);
  assert.equal(svg.plotRectsBesidesLines, canvas.rects, 'the plot holds the drawn rectangles and the two lines');
  // The capacity line: one 2 px rectangle centred on the canvas's row, across the plot.
  assert.equal(svg.capacity.length, 1);
  const cap = svg.capacity[0];
  assert.ok(Math.abs(cap.y + cap.h / 2 - canvas.capPx) < 0.02, `capacity at ${cap.y + cap.h / 2} vs canvas ${canvas.capPx}`);
  assert.equal(cap.w, canvas.width - MARGIN_LEFT - MARGIN_RIGHT);
  // Its words (name, bytes, headroom at the peak), bold, right-aligned above it.
  assert.equal(svg.capacityLabel.length, 1);
  assert.equal(svg.capacityLabel[0].text, words);
  assert.ok(Math.abs(svg.capacityLabel[0].y - (canvas.capPx - 3)) < 0.06 || Math.abs(svg.capacityLabel[0].y - (canvas.capPx + 3)) < 0.06);
  assert.equal(svg.capacityLabel[0].inPlot, false);
  // The reserved step line.
  assert.ok(svg.reserved.length >= 2, `reserved line: ${svg.reserved.length} rectangles`);
  // The search's outlines and its rug.
  assert.ok(svg.match > 0, 'search outlines');
  assert.ok(svg.matchRug > 0, 'search rug');
  // Axes: byte labels with a grid line each, x labels with a tick each, the caption; the start
  // of the trace (the window starts before it).
  assert.ok(svg.axisY.length >= 3);
  assert.equal(svg.grid, svg.axisY.length);
  for (const t of svg.axisY) assert.match(t.text, /^\d+(\.\d+)? (B|KiB|MiB|GiB)$/);
  assert.ok(svg.axisX.length >= 2);
  assert.equal(svg.ticks, svg.axisX.length);
  assert.deepEqual(svg.caption.map((c) => c.text), ['event']);
  assert.equal(svg.traceStart.length, 1);
  assert.equal(svg.traceStartLine, 1);

  // In the dark theme the file is dark too, with the canvas's light text.
  // (A theme change mounts the view again: a new canvas draws.)
  const themed = async (theme) => {
    await page.click('[data-testid=theme-toggle]');
    await page.waitForFunction((t) => document.documentElement.dataset.theme === t
      && document.querySelector('[data-testid=timeline-canvas]')?.dataset.drawLog, theme);
  };
  await themed('dark');
  const dark = await readSvgDecorations((await download(() => page.click('[data-testid=export-svg]'))).bytes.toString());
  assert.equal(dark.background, '#1e1f24');
  assert.equal(dark.axisY[0].fill, '#d6d6dc');
  assert.equal(dark.capacityFill, '#ff6b5b');
  await themed('light');
  await page.evaluate(() => localStorage.removeItem('memlens-theme'));
  await redrawn(page, () => page.fill('[data-testid=search-frame]', ''));
  await redrawn(page, () => page.selectOption('[data-testid=capacity]', 'off'));
  await redrawn(page, () => page.uncheck('[data-testid=reserved-line]'));
});

/** The event list's rows in the DOM: index and text. */
async function listedRows() {
  return page.$$eval('[data-testid=event-list] .ev-row', (rows) => rows.map((r) => ({
    event: Number(r.dataset.event), text: r.textContent })));
}

/** A CSV row of the event list as the list writes it (core's `EventList::line`). */
function listLine(row) {
  const size = (b) => `(${b} bytes)`;
  if (row.action === 'oom') return new RegExp(`^OOM \\(requested .*${size(row.size_bytes).replace(/[()]/g, '\\$&')}`);
  if (row.action === 'snapshot') return /^snapshot$/;
  const kind = /^segment_/.test(row.action) ? 's' : 'b';
  const label = `${kind}'${row.address.replace(/^0x/, '')}_${row.version}`;
  return new RegExp(`^${row.action} +${label} +\\S+ \\(${row.size_bytes} bytes\\)`);
}

function parseCsv(text) {
  const [head, ...lines] = text.trimEnd().split('\n');
  const cols = head.split(',');
  return { cols, rows: lines.map((l) => Object.fromEntries(l.split(',').map((v, i) => [cols[i], v]))) };
}

test('exports: the event list as CSV, all of it or a range, rows as the list shows them', async () => {
  const real = fs.existsSync(path.join(SNAPS, REAL)) ? path.join(SNAPS, REAL) : path.join(DIST, 'example.pickle');
  await openFile(real);
  await page.selectOption('[data-testid=view-select]', 'state');
  await page.waitForSelector('[data-testid=event-list][data-rows]', { timeout: 60000 });
  const n = Number(await page.getAttribute('[data-testid=event-list]', 'data-rows'));
  assert.ok(n > 10);

  const all = await download(() => page.click('[data-testid=event-csv]'));
  assert.match(all.name, /-events\.csv$/);
  const csv = parseCsv(all.bytes.toString());
  assert.deepEqual(csv.cols, ['event', 'action', 'address', 'version', 'size_bytes', 'stream', 'time_us', 'device_free_bytes']);
  assert.equal(csv.rows.length, n, 'a CSV row per entry');
  csv.rows.forEach((r, i) => assert.equal(Number(r.event), i));
  // The rows in view, at the start and at the end of the list, read as the CSV says.
  const check = async () => {
    const shown = await listedRows();
    assert.ok(shown.length > 5);
    for (const s of shown) {
      const r = csv.rows[s.event];
      const text = s.text.replace(/^\s*\d+ /, '').replace(/\s+\(stream \d+\)$/, '');
      assert.match(text, listLine(r), `entry ${s.event}: ${JSON.stringify(r)}`);
      if (r.stream !== '0') assert.match(s.text, new RegExp(`\\(stream ${r.stream}\\)`));
    }
  };
  await check();
  await page.click('[data-testid=state-last]');
  await page.waitForFunction((k) => Number(document.querySelector('[data-testid=event-list]').dataset.firstRow) > k - 100, n);
  await check();
  // Sizes in whole bytes, times in whole µs, as the column names say.
  assert.ok(csv.rows.every((r) => /^\d+$/.test(r.size_bytes)));
  assert.ok(csv.rows.every((r) => r.time_us === '' || /^\d+$/.test(r.time_us)));

  // A range: those rows, the same as in the whole file, named after it.
  await page.fill('[data-testid=event-csv-range]', '5-9');
  const part = await download(() => page.click('[data-testid=event-csv]'));
  assert.match(part.name, /-events-5-9\.csv$/);
  const p = parseCsv(part.bytes.toString());
  assert.deepEqual(p.rows, csv.rows.slice(5, 10));
  // A range outside the list is marked, and nothing is saved.
  await page.fill('[data-testid=event-csv-range]', `3-${n}`);
  let saved = false;
  page.once('download', () => { saved = true; });
  await page.click('[data-testid=event-csv]');
  await page.waitForSelector('[data-testid=event-csv-range].bad');
  await page.waitForTimeout(500);
  assert.equal(saved, false);
  await page.fill('[data-testid=event-csv-range]', '');
  await page.screenshot({ path: path.join(OUT, 'panel-event-csv.png') });
  await page.selectOption('[data-testid=view-select]', 'timeline');
});

test('no page errors', () => {
  assert.deepEqual(pageErrors, []);
});
