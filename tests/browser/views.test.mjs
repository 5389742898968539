// End-to-end tests of the timeline's display options, keys and theme in real headless Chromium,
// against the built dist/ (same harness as timeline.test.mjs), on the bundled example:
//
// - colour by size / ledger class: the drawn colours change, the legend lists the mode's values
//   and its swatches are the colours drawn; the URL hash keeps the mode and a page opened on it
//   colours the same way;
// - the capacity line: from the trace's `oom` entry it sits at device_free + reserved there
//   (capacity_ref.py reads it with Python's own unpickler), drawn in its colour on that row;
//   a GPU from the list moves it to that GPU's bytes, with the headroom at the peak beside it;
//   the reserved line raises the y range to the peak reserved;
// - the frame search as a regular expression finds what the substring search finds, and a bad
//   pattern is reported;
// - W/A/S/D zoom and pan the window; `?` lists every key; `m` twice or alt-drag measures between
//   two points (alt-drag without panning);
// - the filters leave bands out of the drawing;
// - dark theme: emulated `prefers-color-scheme: dark` gives a dark page with readable text
//   (contrast ≥ 4.5) and a dark plot; the toggle switches and is remembered after a reload.
// - every view (timeline, allocated, state, segments, settings, diagnosis, overview, compare) in
//   both themes: a screenshot each (tests/out/views-<theme>-<view>.png), every text of the page
//   at least 4.5:1 against what is behind it, the page's background of the theme, and no white
//   canvas in the dark.
// Screenshots of the timeline in both themes go to tests/out/ (views-light.png, views-dark.png).
//
// Run: (cd tests/browser && node --test --test-concurrency=1 views.test.mjs)   after
// `scripts/serve.sh --build`. Env: CHROMIUM, MEMLENS_DIST as in viewer.test.mjs.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { openViewer, watchPage, waitShown, redrawn, DIST, OUT, MARGIN_LEFT, MARGIN_RIGHT,
  MARGIN_TOP, MARGIN_BOTTOM } from './harness.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const CANVAS = '[data-testid=timeline-canvas]';

let viewer, base, context, page, pageErrors;

/** Distinct opaque colours (hex) in the plot area, with their pixel counts. */
async function plotColours(p) {
  return p.evaluate(([ml, mr, mt, mb]) => {
    const c = document.querySelector('[data-testid=timeline-canvas]');
    const dpr = c.width / c.clientWidth;
    const x = Math.round(ml * dpr), y = Math.round(mt * dpr);
    const w = c.width - x - Math.round(mr * dpr), h = c.height - y - Math.round(mb * dpr);
    const d = c.getContext('2d').getImageData(x, y, w, h).data;
    const out = {};
    for (let i = 0; i < d.length; i += 4) {
      if (d[i + 3] < 255) continue;
      const hex = '#' + [d[i], d[i + 1], d[i + 2]].map((v) => v.toString(16).padStart(2, '0')).join('');
      out[hex] = (out[hex] || 0) + 1;
    }
    return out;
  }, [MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM]);
}

async function windowOf(p) {
  return (await p.getAttribute(CANVAS, 'data-window')).split(',').map(Number);
}

/** Failed requests, with the page errors and console errors (`openViewer` watches its page). */
function watchResponses(p) {
  p.on('response', (r) => {
    if (r.status() >= 400) pageErrors.push(`${r.status()} ${r.url()}`);
  });
}

function watchErrors(p) {
  watchPage(p, pageErrors);
  watchResponses(p);
}

/** WCAG contrast ratio of two `rgb(...)` colours. */
function contrast(a, b) {
  const lum = (s) => {
    const [r, g, bl] = s.match(/\d+(\.\d+)?/g).slice(0, 3).map(Number).map((v) => {
      const c = v / 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * bl;
  };
  const [x, y] = [lum(a), lum(b)].sort((m, n) => n - m);
  return (x + 0.05) / (y + 0.05);
}

before(async () => {
  viewer = await openViewer();
  ({ base, context, page, pageErrors } = viewer);
  watchResponses(page);
  await page.emulateMedia({ colorScheme: 'light' });
  await page.goto(base);
  await page.click('[data-testid=open-example]');
  await waitShown(page, 'example.pickle');
});

after(async () => {
  await viewer?.close();
});

test('colour by size and by ledger class: drawn colours and legend change, the hash keeps it', async () => {
  const before = await plotColours(page);
  assert.equal(await page.getAttribute('[data-testid=legend]', 'data-by'), 'stack');
  await redrawn(page, () => page.selectOption('[data-testid=colour-by]', 'size'));
  await page.waitForSelector('[data-testid=legend][data-by=size]');
  await page.waitForFunction(() => /colour=size/.test(location.hash));
  // Let the redraw with the colouring land (the legend arrives with it).
  await page.waitForFunction(() => true);
  const sizeColours = await plotColours(page);
  const legend = await page.$$eval('[data-testid=legend] .legend-item', (els) => els.map((e) => ({ colour: e.dataset.colour, label: e.textContent })));
  assert.equal(legend.length, 8, 'the size ramp has 8 steps');
  assert.match(legend[0].label, /^≥ \d/);
  // Ramp colours are drawn, which upstream's palette never has.
  const drawnRamp = legend.filter((l) => (sizeColours[l.colour] || 0) > 20);
  // (The example's visible bands are its MiB-sized ones: the top of a 4 B … 6 MiB ramp.)
  assert.ok(drawnRamp.length >= 1, `ramp colours drawn: ${JSON.stringify(drawnRamp)}`);
  assert.ok(drawnRamp.every((l) => !(before[l.colour] > 0)), 'the ramp was not drawn before');
  assert.notDeepEqual(Object.keys(sizeColours).sort().slice(0, 5), Object.keys(before).sort().slice(0, 5));

  await redrawn(page, () => page.selectOption('[data-testid=colour-by]', 'ledger'));
  await page.waitForSelector('[data-testid=legend][data-by=ledger]');
  const classes = await page.$$eval('[data-testid=legend] .legend-item', (els) => els.map((e) => e.textContent));
  assert.deepEqual(classes, ['parameters', 'gradients', 'optimizer state', 'activations', 'temporary', 'before trace', 'other']);

  // A page opened on the hash colours the same way.
  const p2 = await context.newPage();
  watchErrors(p2);
  await p2.goto(base + '?src=example.pickle' + '#view=timeline&colour=size');
  await waitShown(p2, 'example.pickle');
  await p2.waitForSelector('[data-testid=legend][data-by=size]');
  assert.equal(await p2.$eval('[data-testid=colour-by]', (s) => s.value), 'size');
  await p2.close();
  await redrawn(page, () => page.selectOption('[data-testid=colour-by]', 'stack'));
});

test('capacity line: from the OOM entry at device_free + reserved, or a chosen GPU, with the headroom', async () => {
  const expected = Number(execFileSync('python3', [path.join(HERE, 'capacity_ref.py'), path.join(DIST, 'example.pickle'), '0']).toString().trim());
  assert.ok(expected > 0);
  // Off by default; from the trace's OOM when asked.
  assert.equal(await page.getAttribute(CANVAS, 'data-capacity-bytes'), null);
  await redrawn(page, () => page.selectOption('[data-testid=capacity]', 'trace'));
  await page.waitForFunction(() => /cap=trace/.test(location.hash));
  await page.waitForFunction(() => document.querySelector('[data-testid=timeline-canvas]').dataset.capacityBytes);
  assert.equal(Number(await page.getAttribute(CANVAS, 'data-capacity-bytes')), expected);
  assert.match(await page.textContent('[data-testid=capacity-text]'), /OOM.*: [\d.]+ MiB · headroom at peak [\d.]+ MiB/);
  // The line is drawn on its row, in the capacity colour (red), across the plot.
  const redOnRow = async () => page.evaluate(([ml]) => {
    const c = document.querySelector('[data-testid=timeline-canvas]');
    const dpr = c.width / c.clientWidth;
    const y = Math.round(Number(c.dataset.capacityPx) * dpr);
    const d = c.getContext('2d').getImageData(0, y, c.width, 1).data;
    let red = 0;
    for (let i = Math.round(ml * dpr) * 4; i < d.length; i += 4) if (d[i] > 170 && d[i + 1] < 90 && d[i + 2] < 90) red++;
    return red / (c.width - ml * dpr);
  }, [MARGIN_LEFT]);
  assert.ok(await redOnRow() > 0.5, 'the capacity line crosses the plot on its row');
  // y range includes it: the top of the scale is 5% above it.
  assert.equal(Number(await page.getAttribute(CANVAS, 'data-y-max-bytes')), Math.round(expected * 1.05));
  // The line is where a byte value is drawn: px = top + (1 − bytes / y max) × plot height.
  const b = await page.locator(CANVAS).boundingBox();
  const ph = b.height - MARGIN_TOP - MARGIN_BOTTOM;
  const px = Number(await page.getAttribute(CANVAS, 'data-capacity-px'));
  assert.ok(Math.abs(px - (MARGIN_TOP + ph * (1 - 1 / 1.05))) < 0.6, `capacity px ${px}`);

  // A GPU from the list: H100 80 GB.
  await redrawn(page, () => page.selectOption('[data-testid=capacity]', { label: 'H100 80 GB (79.65 GiB)' }));
  assert.equal(Number(await page.getAttribute(CANVAS, 'data-capacity-bytes')), 81559 * 2 ** 20);
  assert.match(await page.textContent('[data-testid=capacity-text]'), /^H100 80 GB: 79.65 GiB · headroom at peak 79.\d+ GiB/);
  await page.waitForFunction(() => /cap=H100_80_GB/.test(location.hash));
  // Typed in.
  await redrawn(page, () => page.selectOption('[data-testid=capacity]', 'typed'));
  await redrawn(page, () => page.fill('[data-testid=capacity-bytes]', '1 GiB').then(() => page.press('[data-testid=capacity-bytes]', 'Enter')));
  await page.waitForFunction(() => document.querySelector('[data-testid=timeline-canvas]').dataset.capacityBytes === String(2 ** 30));
  await redrawn(page, () => page.selectOption('[data-testid=capacity]', 'off'));
  assert.equal(await page.getAttribute(CANVAS, 'data-capacity-bytes'), null);

  // The reserved line: the y range covers the peak reserved (80 MiB here).
  await redrawn(page, () => page.check('[data-testid=reserved-line]'));
  await page.waitForFunction(() => Number(document.querySelector('[data-testid=timeline-canvas]').dataset.yMaxBytes) >= 80 * 2 ** 20 * 1.05 - 1);
  await page.waitForFunction(() => /reserved=1/.test(location.hash));
  await redrawn(page, () => page.selectOption('[data-testid=capacity]', 'trace'));
  await page.screenshot({ path: path.join(OUT, 'views-lines.png') });
  await redrawn(page, () => page.selectOption('[data-testid=capacity]', 'off'));
  await redrawn(page, () => page.uncheck('[data-testid=reserved-line]'));
});

test('frame search: a regular expression finds what the substring finds; a bad pattern is reported', async () => {
  const count = async () => {
    await page.waitForFunction(() => {
      const c = document.querySelector('[data-testid=search-count]');
      return c && (c.dataset.count !== undefined || c.dataset.error);
    });
    return page.$eval('[data-testid=search-count]', (c) => ({ count: c.dataset.count === undefined ? null : Number(c.dataset.count), error: c.dataset.error ? c.textContent : null }));
  };
  await page.fill('[data-testid=search-frame]', 'train.py');
  const plain = await count();
  assert.ok(plain.count > 0);
  await page.check('[data-testid=search-regex]');
  await page.fill('[data-testid=search-frame]', 'TRAIN\\.py');
  await page.waitForFunction(() => /re=1/.test(location.hash));
  assert.deepEqual(await count(), plain);
  await page.fill('[data-testid=search-frame]', 'train\\.py:\\d+:');
  assert.deepEqual(await count(), plain);
  await page.fill('[data-testid=search-frame]', 'train(');
  const bad = await count();
  assert.equal(bad.count, null);
  assert.match(bad.error, /not a regular expression/);
  await page.fill('[data-testid=search-frame]', '');
  await page.uncheck('[data-testid=search-regex]');
});

test('W/A/S/D zoom and pan; ? lists the keys; m twice or alt-drag measures', async () => {
  const b = await page.locator(CANVAS).boundingBox();
  await page.mouse.dblclick(b.x + b.width / 2, b.y + b.height / 2);
  await page.focus(CANVAS);
  const [a0, b0] = await windowOf(page);
  await redrawn(page, () => page.keyboard.press('w'));
  const [a1, b1] = await windowOf(page);
  assert.ok(b1 - a1 < (b0 - a0) * 0.85, `w zooms in: ${[a0, b0]} → ${[a1, b1]}`);
  await redrawn(page, () => page.keyboard.press('d'));
  const [a2, b2] = await windowOf(page);
  assert.ok(a2 > a1 && Math.abs((b2 - a2) - (b1 - a1)) < 1e-6, `d pans right: ${[a1, b1]} → ${[a2, b2]}`);
  await redrawn(page, () => page.keyboard.press('a'));
  const [a3] = await windowOf(page);
  assert.ok(a3 < a2, 'a pans left');
  await redrawn(page, () => page.keyboard.press('s'));
  const [a4, b4] = await windowOf(page);
  assert.ok(b4 - a4 > b1 - a1, 's zooms out');

  await page.keyboard.press('?');
  await page.waitForSelector('[data-testid=keys-overlay]');
  const keys = await page.$$eval('[data-testid=keys-overlay] tr', (rows) => rows.map((r) => r.dataset.key));
  for (const k of ['W / S', 'A / D', '+ / −', '← / →', '0 / Home', 'M', 'Esc', '?', 'wheel', 'drag', 'shift-drag', 'alt-drag', 'click', 'double-click']) {
    assert.ok(keys.includes(k), `the overlay lists ${k}`);
  }
  await page.screenshot({ path: path.join(OUT, 'views-keys.png') });
  await page.keyboard.press('Escape');
  assert.equal(await page.locator('[data-testid=keys-overlay]').count(), 0);

  // The ruler: m at two points; bytes = the y distance on the scale. (The plot is shorter now:
  // the zoomed window has the "what grew" panel under it.)
  const bz = await page.locator(CANVAS).boundingBox();
  const ph = bz.height - MARGIN_TOP - MARGIN_BOTTOM;
  const yMax = Number(await page.getAttribute(CANVAS, 'data-y-max-bytes'));
  await page.mouse.move(bz.x + MARGIN_LEFT + 100, bz.y + MARGIN_TOP + ph * 0.75);
  await page.keyboard.press('m');
  await page.mouse.move(bz.x + MARGIN_LEFT + 400, bz.y + MARGIN_TOP + ph * 0.25);
  await page.keyboard.press('m');
  await page.waitForSelector('[data-testid=ruler]');
  const bytes = Number(await page.getAttribute('[data-testid=ruler]', 'data-bytes'));
  assert.ok(Math.abs(bytes - yMax * 0.5) < yMax * 0.01, `ruler bytes ${bytes} vs ${yMax * 0.5}`);
  assert.ok(Number(await page.getAttribute('[data-testid=ruler]', 'data-events')) > 0);
  assert.match(await page.textContent('[data-testid=ruler]'), /^Δ [\d.]+ [KMG]?i?B · \d+ events?/);
  await page.screenshot({ path: path.join(OUT, 'views-ruler.png') });
  await page.keyboard.press('m');
  assert.equal(await page.locator('[data-testid=ruler]').count(), 0);
  // Alt-drag measures too (and does not pan): a quarter of the plot's height.
  const w0 = await windowOf(page);
  await page.mouse.move(bz.x + MARGIN_LEFT + 200, bz.y + MARGIN_TOP + ph * 0.6);
  await page.keyboard.down('Alt');
  await page.mouse.down();
  await page.mouse.move(bz.x + MARGIN_LEFT + 300, bz.y + MARGIN_TOP + ph * 0.35, { steps: 4 });
  await page.mouse.up();
  await page.keyboard.up('Alt');
  await page.waitForSelector('[data-testid=ruler]');
  const dragged = Number(await page.getAttribute('[data-testid=ruler]', 'data-bytes'));
  assert.ok(Math.abs(dragged - yMax * 0.25) < yMax * 0.01, `alt-drag ruler bytes ${dragged} vs ${yMax * 0.25}`);
  assert.deepEqual(await windowOf(page), w0, 'alt-drag does not pan');
  await page.focus(CANVAS);
  await page.keyboard.press('Escape');
  assert.equal(await page.locator('[data-testid=ruler]').count(), 0);
});

test('filters leave bands out: never freed, before the trace, under a size', async () => {
  const b = await page.locator(CANVAS).boundingBox();
  await page.mouse.dblclick(b.x + b.width / 2, b.y + b.height / 2);
  const bands = async () => Number(await page.getAttribute(CANVAS, 'data-bands'));
  const all = await bands();
  await redrawn(page, () => page.check('[data-testid=hide-never-freed]'));
  const freed = await bands();
  assert.ok(freed < all, `never freed hidden: ${all} → ${freed}`);
  await page.waitForFunction(() => /hide=never/.test(location.hash));
  await redrawn(page, () => page.uncheck('[data-testid=hide-never-freed]'));
  await redrawn(page, () => page.fill('[data-testid=min-size]', '4 MiB').then(() => page.press('[data-testid=min-size]', 'Enter')));
  await page.waitForFunction(() => /min=4194304/.test(location.hash));
  const big = await bands();
  assert.ok(big < all && big > 0, `under 4 MiB hidden: ${all} → ${big}`);
  await redrawn(page, () => page.fill('[data-testid=min-size]', '').then(() => page.press('[data-testid=min-size]', 'Enter')));
  assert.equal(await bands(), all);
});

test('dark theme: follows prefers-color-scheme, readable, toggled and remembered', async () => {
  await page.screenshot({ path: path.join(OUT, 'views-light.png') });
  const dark = await context.newPage();
  watchErrors(dark);
  await dark.emulateMedia({ colorScheme: 'dark' });
  await dark.goto(base);
  // Nothing remembered yet in this profile: the system's dark is followed.
  await dark.evaluate(() => localStorage.removeItem('memlens-theme'));
  await dark.reload();
  await dark.click('[data-testid=open-example]');
  await waitShown(dark, 'example.pickle');
  assert.equal(await dark.$eval('html', (e) => e.dataset.theme), 'dark');
  const look = await dark.evaluate(() => {
    const b = getComputedStyle(document.body);
    const m = getComputedStyle(document.querySelector('.metric-name'));
    return { bg: b.backgroundColor, fg: b.color, muted: m.color };
  });
  assert.ok(contrast(look.fg, 'rgb(255,255,255)') < 1.5, `dark page text is light: ${look.fg}`);
  assert.ok(contrast(look.fg, look.bg) >= 4.5, `text contrast ${contrast(look.fg, look.bg)}`);
  assert.ok(contrast(look.muted, look.bg) >= 4.5, `muted text contrast ${contrast(look.muted, look.bg)}`);
  // The plot: axis labels light on the dark page, no white background, bands drawn.
  const colours = await plotColours(dark);
  assert.ok(!colours['#ffffff'], 'no white in the dark plot');
  const axisLight = await dark.evaluate(([ml, mt]) => {
    const c = document.querySelector('[data-testid=timeline-canvas]');
    const dpr = c.width / c.clientWidth;
    const d = c.getContext('2d').getImageData(0, Math.round(mt * dpr), Math.round((ml - 4) * dpr), c.height - Math.round(mt * dpr)).data;
    let light = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 200 && d[i] > 170 && d[i + 1] > 170 && d[i + 2] > 170) light++;
    return light;
  }, [MARGIN_LEFT, MARGIN_TOP]);
  assert.ok(axisLight > 50, `light axis label pixels: ${axisLight}`);
  await dark.screenshot({ path: path.join(OUT, 'views-dark.png') });
  // The state map and the diagnosis (flamegraph, charts) in the dark theme: no white canvas.
  await dark.selectOption('[data-testid=view-select]', 'state');
  await dark.waitForSelector('[data-testid=state-view][data-switch-ms]', { timeout: 30000 });
  const whiteShare = (sel) => dark.$eval(sel, (c) => {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let white = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] > 245 && d[i + 1] > 245 && d[i + 2] > 245 && d[i + 3] > 200) white++;
    return white / (d.length / 4);
  });
  assert.ok(await whiteShare('[data-testid=state-canvas]') < 0.01, 'the state map has no white in the dark theme');
  await dark.screenshot({ path: path.join(OUT, 'views-dark-state.png') });
  await dark.selectOption('[data-testid=view-select]', 'diagnosis');
  await dark.waitForSelector('[data-testid=icicle]', { timeout: 60000 });
  await dark.screenshot({ path: path.join(OUT, 'views-dark-diagnosis.png'), fullPage: true });
  await dark.selectOption('[data-testid=view-select]', 'timeline');
  // The toggle switches to light and is remembered over the system's dark.
  await dark.click('[data-testid=theme-toggle]');
  assert.equal(await dark.$eval('html', (e) => e.dataset.theme), 'light');
  await dark.reload();
  await dark.waitForSelector('[data-testid=theme-toggle]');
  assert.equal(await dark.$eval('html', (e) => e.dataset.theme), 'light');
  await dark.evaluate(() => localStorage.removeItem('memlens-theme'));
  await dark.close();
});

/** Ready marks of views that draw after they open (others are ready when shown). */
const READY = {
  timeline: '[data-testid=timeline-canvas][data-draw-log]',
  allocated: '[data-testid=timeline-canvas][data-draw-log]',
  segments: '[data-testid=timeline-canvas][data-draw-log]',
  state: '[data-testid=state-view][data-switch-ms]',
  diagnosis: '[data-testid=icicle]',
};

/** Texts of the view whose contrast with what is behind them is below 4.5 (disabled controls
 *  are exempt, as in WCAG), and the page's background. */
async function lowContrast(p) {
  return p.evaluate(() => {
    const rgba = (s) => { const v = s.match(/[\d.]+/g).map(Number); return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1]; };
    const lum = ([r, g, b]) => [r, g, b].map((v) => { const c = v / 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; })
      .reduce((a, c, i) => a + c * [0.2126, 0.7152, 0.0722][i], 0);
    const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((m, n) => n - m); return (x + 0.05) / (y + 0.05); };
    const behind = (el) => {
      for (let e = el; e; e = e.parentElement) {
        const c = rgba(getComputedStyle(e).backgroundColor);
        if (c[3] > 0.5) return c;
      }
      const root = rgba(getComputedStyle(document.documentElement).backgroundColor);
      return root[3] > 0.5 ? root : [255, 255, 255, 1];
    };
    const low = [];
    for (const el of document.querySelectorAll('#memlens *')) {
      const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
      if (!own || el.closest(':disabled, option, .tooltip') || !el.getClientRects().length) continue;
      const st = getComputedStyle(el);
      if (st.visibility === 'hidden' || Number(st.opacity) === 0) continue;
      const bg = behind(el);
      const f = rgba(st.color);
      const fg = [0, 1, 2].map((i) => f[i] * f[3] + bg[i] * (1 - f[3]));
      const r = ratio(fg, bg);
      if (r < 4.5) low.push(`${el.tagName.toLowerCase()}.${el.className} "${el.textContent.trim().slice(0, 30)}" ${r.toFixed(2)}`);
    }
    // The page's background: the body's, else the root's, else the browser's white.
    const page = [document.body, document.documentElement].map((e) => rgba(getComputedStyle(e).backgroundColor))
      .find((c) => c[3] > 0.5) || [255, 255, 255, 1];
    return { low, background: `rgb(${page.slice(0, 3).join(', ')})` };
  });
}

test('every view in both themes: a screenshot each, readable text, no white canvas in the dark', async () => {
  const views = await page.$$eval('[data-testid=view-select] option', (o) => o.map((x) => x.value));
  assert.ok(views.length >= 8, `views: ${views}`);
  const unreadable = [];
  for (const theme of ['light', 'dark']) {
    const p = await context.newPage();
    watchErrors(p);
    await p.emulateMedia({ colorScheme: theme });
    await p.goto(base + '?src=example.pickle');
    await p.evaluate(() => localStorage.removeItem('memlens-theme'));
    await p.reload();
    await waitShown(p, 'example.pickle');
    assert.equal(await p.$eval('html', (e) => e.dataset.theme), theme);
    for (const view of views) {
      await p.selectOption('[data-testid=view-select]', view);
      await p.waitForFunction((v) => new RegExp(`view=${v}`).test(location.hash) || v === 'timeline', view);
      if (READY[view]) await p.waitForSelector(READY[view], { timeout: 60000 });
      await p.waitForTimeout(300);
      await p.screenshot({ path: path.join(OUT, `views-${theme}-${view}.png`), fullPage: true });
      const { low, background } = await lowContrast(p);
      unreadable.push(...low.map((l) => `${theme} ${view}: ${l}`));
      const [r, g, b] = background.match(/\d+/g).map(Number);
      assert.ok(theme === 'dark' ? r + g + b < 150 : r + g + b > 600, `${theme} ${view}: background ${background}`);
      if (theme === 'dark') {
        // (The overview's window is outlined in white on purpose.)
        const white = await p.$$eval('main.content canvas:not([data-testid=overview])', (cs) => cs.map((c) => {
          if (!c.width || !c.height) return 0;
          const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          let n = 0;
          for (let i = 0; i < d.length; i += 4) if (d[i] > 245 && d[i + 1] > 245 && d[i + 2] > 245 && d[i + 3] > 200) n++;
          return n / (d.length / 4);
        }));
        for (const w of white) assert.ok(w < 0.01, `${view}: a canvas ${Math.round(w * 100)} % white in the dark theme`);
      }
    }
    await p.close();
  }
  assert.deepEqual(unreadable, [], 'texts below 4.5:1 against their background');
});

test('no page errors', () => {
  assert.deepEqual(pageErrors, []);
});
