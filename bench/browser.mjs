// Browser half of the benchmark suite (run by bench/run.sh --browser, or alone):
// for each input, headless Chromium opens the built viewer (dist/, served on 127.0.0.1), chooses
// the file in the page's own file input, and reports
//   decode_ms      the worker's decode + model time (the page's "decoded in N ms"),
//   first_paint_ms file chosen → first painted timeline (the page's data-first-paint-ms; for a
//                  trace over 200k events that frame comes from the sampled preview layout),
//   exact_ms       file chosen → first frame drawn from the exact layout (data-exact-paint-ms),
//   model_MB       the worker's wasm memory once the model is built (data-model-memory-bytes),
//   load_MB        what loading the file added to it (minus data-memory-before-bytes: the code,
//                  its static data and the warm-up's reused heap, ~3 MB),
//   tab_MB         resident memory of the renderer process (page, worker, both wasm memories)
//                  once the exact layout is drawn,
//   draw_ms        median and worst canvas redraw (the canvas's own data-draw-log) over 20
//                  wheel zooms and drag pans,
//   frame_ms       median and worst time from such an event to the next frame.
// BENCH_VIEW=state: instead, file chosen → first state painted in the Allocator State History
// (state_paint_ms), and → its event list shown (list_ms, which waits for the history build).
// BENCH_VIEW=diagnosis: file chosen → first paint of the timeline (first_paint_ms) and → the
// default device's diagnosis received (diagnosis_ms, the root's data-diagnosis-ms; the worker
// computes it after the first paint), and their difference (after_paint_ms).
// BENCH_VIEW=progressive: file chosen → first picture of the trace so far (partial_ms, the
// page's data-partial-paint-ms), → first paint of the file's own layout (first_paint_ms) and →
// its exact layout (exact_ms), BENCH_REPS (default 5) runs alternating with `?pictures=0` (no
// pictures while the file is read: the before), medians and the ratio of first paints.
// BENCH_VIEW=worker_memory: each file dropped on a fresh idle page, BENCH_REPS times: the
// renderer's resident memory before, at its peak and once settled (see there).
// BENCH_VIEW=cold: the file opened with the page (`?src=`) against dropped on an idle page,
// on a first and a repeat visit (see there). BENCH_VIEW=single: the same for the single-file
// viewer (a `memlens html` report opened from disk, see there).
// BENCH_VIEW=compare A B: the Compare view painted (both files chosen together on
// #view=compare → both timelines painted, the view's data-painted-ms) against the larger file
// opened alone (→ its first paint), for one or several built viewers (BENCH_DISTS),
// BENCH_REPS (default 5) alternating rounds; wall and renderer CPU time (also per thread: the
// page's main thread, the busiest worker, the other threads), medians and ratios; the painted
// attribute awaited without polling, and how many workers had warmed up when the files were chosen.
// BENCH_VIEW=decode FILE: the worker's wasm decode of FILE against the native decode, for one
// or several built viewers (BENCH_DISTS), BENCH_REPS alternating rounds, medians and ratios.
// BENCH_VIEW=files F1..FN: N files to a painted Files overview (all rows shown): all chosen at
// once (parallel workers), all at once with ?workers=1 (one worker), and one after another
// (each chosen when the previous is ready), BENCH_REPS alternating runs, medians and ratios.
// BENCH_VIEW=limits F1..FN: each file with the size check off and on: opens whole, dies, or
// is refused and opened in part; time, peak tab memory, model memory (see the mode below).
// BENCH_VIEW=idle (no FILE): what an idle page costs: each of BENCH_DISTS (comma-separated
// built viewers, default MEMLENS_DIST) opened BENCH_REPS times, alternating, and left idle for
// BENCH_IDLE_MS: CPU ms of its renderer threads from navigation on, and of their DedicatedWorker
// threads (the workers' start and warm-up); medians, and the workers' warm-up log lines.
// Each file is chosen BENCH_IDLE_MS (default 2000) after the page has loaded, as a user would.
// Usage: node bench/browser.mjs FILE...      (env MEMLENS_DIST, CHROMIUM, BENCH_IDLE_MS, BENCH_REPS;
//                                            BENCH_CONSOLE=1 prints the page's console on stderr,
//                                            BENCH_THREADS=1 each renderer thread's CPU time)
import path from 'node:path';
import fs from 'node:fs';
import os from 'node:os';
import { execSync, execFileSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..');
// playwright-core lives in tests/browser/node_modules; the harness imports it from there.
const require = createRequire(path.join(ROOT, 'tests/browser/package.json'));
require.resolve('playwright-core');
const { serveDist, launchChromium } = await import(path.join(ROOT, 'tests/browser/harness.mjs'));

const DIST = path.resolve(process.env.MEMLENS_DIST || path.join(ROOT, 'dist'));
const files = process.argv.slice(2);
if (!files.length && process.env.BENCH_VIEW !== 'idle') { console.error('usage: node bench/browser.mjs FILE...'); process.exit(2); }
if (!fs.existsSync(path.join(DIST, 'index.html'))) { console.error(`${DIST}/index.html missing: run scripts/serve.sh --build`); process.exit(2); }

const { server, base } = await serveDist(DIST, '/memlens/');
const context = await launchChromium({ width: 1400, height: 860 });
// Memory of the tab: resident memory of this browser's renderer processes (one page is open at
// a time; the page, its worker and both wasm memories live there), in MB.
function memoryMB() {
  const kb = renderers().reduce((a, p) => {
    try { return a + Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${p}/status`, 'utf8'))[1]); } catch { return a; }
  }, 0);
  return (kb / 1024).toFixed(0);
}
const TICK_MS = 1000 / Number(execSync('getconf CLK_TCK', { encoding: 'utf8' }));
/** The processes under `root`, all generations. */
function descendants(root) {
  const kids = new Map();
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const ppid = Number(fs.readFileSync(`/proc/${d}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ')[1]);
      if (!kids.has(ppid)) kids.set(ppid, []);
      kids.get(ppid).push(Number(d));
    } catch { /* gone */ }
  }
  const out = [];
  const walk = (p) => { for (const k of kids.get(p) ?? []) { out.push(k); walk(k); } };
  walk(root);
  return out;
}
/** Renderers of the browser this script started (other browsers on the machine are not ours). */
function renderers() {
  return descendants(process.pid).filter((p) => {
    try { return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('--type=renderer'); } catch { return false; }
  });
}
// CPU ms of each of this browser's renderer processes (utime + stime from /proc/PID/stat), by pid.
function rendererCpu() {
  const m = new Map();
  for (const pid of renderers()) {
    try {
      const st = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      m.set(pid, (Number(st[11]) + Number(st[12])) * TICK_MS);
    } catch (e) { /* gone */ }
  }
  return m;
}
/** CPU ms the renderer processes used since `before` (a rendererCpu()). */
function cpuSince(before) {
  let used = 0;
  for (const [pid, c] of rendererCpu()) used += c - (before.get(pid) ?? 0);
  return used;
}
// CPU ms of each thread of the renderer processes, by "pid/tid", with its name (the page's
// main thread, a DedicatedWorker, the compositor...).
function rendererThreads() {
  const m = new Map();
  for (const pid of rendererCpu().keys()) {
    let tids = [];
    try { tids = fs.readdirSync(`/proc/${pid}/task`); } catch (e) { continue; }
    for (const tid of tids) {
      try {
        const raw = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const name = raw.slice(raw.indexOf('(') + 1, raw.lastIndexOf(')'));
        const st = raw.slice(raw.lastIndexOf(') ') + 2).split(' ');
        m.set(`${pid}/${tid}`, { name, cpu: (Number(st[11]) + Number(st[12])) * TICK_MS, sys: Number(st[12]) * TICK_MS, minflt: Number(st[7]) });
      } catch (e) { /* gone */ }
    }
  }
  return m;
}
/**
 * CPU ms each renderer thread used since `before` (a rendererThreads()): the page's main thread
 * (`main`), the busiest worker thread (`worker_max`: on free cores, the decode that the view
 * waits for) and all worker threads (`workers`).
 */
function threadCpuSince(before) {
  const out = { main: 0, worker_max: 0, workers: 0, workers_sys: 0, workers_faults: 0 };
  for (const [k, t] of rendererThreads()) {
    const used = t.cpu - (before.get(k)?.cpu ?? 0);
    if (process.env.BENCH_THREADS && used > 0) console.error(`    thread ${k} ${t.name}: ${used.toFixed(0)} ms`);
    if (/^(CrRendererMain|chrom)/.test(t.name)) out.main += used;
    if (/^DedicatedWorker/.test(t.name)) {
      out.workers += used;
      out.workers_sys += t.sys - (before.get(k)?.sys ?? 0);
      out.workers_faults += t.minflt - (before.get(k)?.minflt ?? 0);
      out.worker_max = Math.max(out.worker_max, used);
    }
  }
  return out;
}
const IDLE_MS = Number(process.env.BENCH_IDLE_MS ?? 2000);
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)]; };
/** A fresh page of `url`, idle for IDLE_MS, then FILE chosen: ms from the choice to the first
 * paint (the page's data-first-paint-ms). The page is closed. */
async function dropOnIdle(ctx, url, f) {
  const page = await ctx.newPage();
  await page.goto(url);
  await page.waitForSelector('#memlens[data-state=empty]');
  await page.waitForTimeout(IDLE_MS);
  await page.setInputFiles('[data-testid=file-input]', f);
  await page.waitForFunction(() => !!document.getElementById('memlens').dataset.firstPaintMs, null, { timeout: 600000 });
  const ms = await page.evaluate(() => Number(document.getElementById('memlens').dataset.firstPaintMs));
  await page.close();
  return ms;
}
if (process.env.BENCH_VIEW === 'state') {
  // The Allocator State History opened first (view=state in the hash): file chosen → the state
  // view has painted a state (its data-painted-event), timed from here with 5 ms polling.
  console.log(['input', 'MB', 'decode_ms', 'state_paint_ms', 'list_ms'].join('\t'));
  for (const f of files) {
    const page = await context.newPage();
    if (process.env.BENCH_CONSOLE) page.on('console', (m) => console.error(`  [${Date.now() % 100000}] ${m.text()}`));
    await page.goto(base + '#view=state');
    await page.waitForSelector('#memlens[data-state=empty]');
    await page.waitForTimeout(IDLE_MS);
    const t0 = Date.now();
    await page.setInputFiles('[data-testid=file-input]', f);
    await page.waitForFunction(() => !!document.querySelector('[data-testid=state-view]')?.dataset.paintedEvent, null, { timeout: 600000, polling: 5 });
    const ms = Date.now() - t0;
    const m = /decoded in (\d+) ms/.exec(await page.evaluate(() => document.body.innerText));
    // Then the event list beside it (its reply waits for the history build).
    await page.waitForFunction(() => Number(document.querySelector('[data-testid=event-list]')?.dataset.rows) > 0, null, { timeout: 600000, polling: 5 });
    const listMs = Date.now() - t0;
    console.log([path.basename(f).slice(0, 40), (fs.statSync(f).size / 1e6).toFixed(1), m ? m[1] : '?', ms, listMs].join('\t'));
    await page.close();
  }
  await context.close();
  server.close();
  process.exit(0);
}
if (process.env.BENCH_VIEW === 'cold') {
  // A page opened with its file already chosen (`?src=`, as `memlens serve` and reports do),
  // against the same file dropped on an idle page; BENCH_RUNS (default 5) rounds, each running
  // each of BENCH_DISTS (comma-separated built viewers, default MEMLENS_DIST) served with each
  // of BENCH_CACHE (`on`: the cache headers of harness.mjs's cacheControl, `off`: no-store;
  // default on) in turn, in a fresh browser profile: a first visit (`?src=`), the drop on an
  // idle page, then a repeat visit (`?src=` again, same profile: what the browser kept, the
  // compiled wasm included, is used). Per build, medians of:
  //   drop_ms  file chosen → first paint (the page's data-first-paint-ms);
  //   cold_ms  first visit: navigation → first paint (performance.now() when
  //            data-first-paint-ms appears, 5 ms polling), loading and compiling included;
  //   ratio    cold_ms / drop_ms; cold_opened_ms: the app's start → first paint (its
  //            data-first-paint-ms); cold_decode_ms: the worker's decode then;
  //   cold_cpu_ms  CPU time of the renderer processes from navigation to first paint (page,
  //            workers, compiles), steadier than wall time on a loaded machine;
  //   repeat_ms, repeat_ratio, repeat_cpu_ms  the same for the repeat visit.
  const runs = Number(process.env.BENCH_RUNS ?? 5);
  const dists = (process.env.BENCH_DISTS || DIST).split(',').map((d) => path.resolve(d));
  const caches = (process.env.BENCH_CACHE || 'on').split(',');
  const served = [];
  for (const d of dists) {
    fs.mkdirSync(path.join(d, 'bench-cold'), { recursive: true });
    for (const c of caches) {
      const name = path.basename(d) + (caches.length > 1 ? `/cache-${c}` : '');
      served.push({ dir: d, name, ...(await serveDist(d, '/memlens/', { cache: c === 'on' })) });
    }
  }
  console.log(['input', 'MB', 'build', 'drop_ms', 'cold_ms', 'ratio', 'cold_opened_ms', 'cold_decode_ms', 'cold_cpu_ms', 'repeat_ms', 'repeat_ratio', 'repeat_cpu_ms'].join('\t'));
  // Navigation to `url` → first paint: [wall ms, app start → paint ms, decode ms, CPU ms].
  const coldOpen = async (ctx, url) => {
    const page = await ctx.newPage();
    if (process.env.BENCH_CONSOLE) page.on('console', (m) => console.error(`  [${Date.now() % 100000}] ${m.text()}`));
    const before = rendererCpu();
    await page.goto(url, { waitUntil: 'commit' });
    await page.waitForFunction(() => !!document.getElementById('memlens')?.dataset.firstPaintMs, null, { timeout: 600000, polling: 5 });
    const used = cpuSince(before);
    const r = await page.evaluate(() => [performance.now(), Number(document.getElementById('memlens').dataset.firstPaintMs), Number(/decoded in (\d+) ms/.exec(document.body.innerText)?.[1])]);
    await page.close();
    return [...r, used];
  };
  for (const f of files) {
    const name = path.basename(f);
    for (const d of dists) fs.copyFileSync(f, path.join(d, 'bench-cold', name));
    const got = served.map(() => ({ drop: [], cold: [], opened: [], decodes: [], cpu: [], repeat: [], repeatCpu: [] }));
    for (let i = 0; i < runs; i++) {
      for (const [k, s] of served.entries()) {
        const g = got[k];
        const ctx = await launchChromium({ width: 1400, height: 860 });
        const url = `${s.base}?src=bench-cold/${encodeURIComponent(name)}`;
        const first = await coldOpen(ctx, url);
        g.drop.push(await dropOnIdle(ctx, s.base, f));
        const again = await coldOpen(ctx, url);
        await ctx.close();
        g.cold.push(first[0]);
        g.opened.push(first[1]);
        g.decodes.push(first[2]);
        g.cpu.push(first[3]);
        g.repeat.push(again[0]);
        g.repeatCpu.push(again[3]);
        console.error(`  ${s.name} round ${i + 1}: drop ${g.drop.at(-1).toFixed(0)} first ${first[0].toFixed(0)} (opened ${first[1].toFixed(0)}, decode ${first[2]}, cpu ${first[3].toFixed(0)}) repeat ${again[0].toFixed(0)} (cpu ${again[3].toFixed(0)}) ms`);
      }
    }
    for (const [k, s] of served.entries()) {
      const g = got[k];
      const d = median(g.drop);
      const c = median(g.cold);
      const r = median(g.repeat);
      console.log([name.slice(0, 40), (fs.statSync(f).size / 1e6).toFixed(1), s.name, d.toFixed(0), c.toFixed(0), (c / d).toFixed(2), median(g.opened).toFixed(0), median(g.decodes).toFixed(0), median(g.cpu).toFixed(0), r.toFixed(0), (r / d).toFixed(2), median(g.repeatCpu).toFixed(0)].join('\t'));
    }
  }
  for (const d of dists) fs.rmSync(path.join(d, 'bench-cold'), { recursive: true, force: true });
  for (const s of served) s.server.close();
  await context.close();
  server.close();
  process.exit(0);
}
if (process.env.BENCH_VIEW === 'single') {
  // The single-file viewer (`memlens html` reports): a report of FILE opened from disk
  // (file://) against FILE dropped on the viewer idle for BENCH_IDLE_MS, for each of
  // BENCH_SINGLES (comma-separated single-file viewers, default dist-single/memlens.html) in
  // turn, BENCH_RUNS (default 5) rounds. The report is the one `memlens html FILE` writes
  // (MEMLENS_BIN, default target/release/memlens), its preload moved into each viewer. Per
  // viewer, medians of drop_ms (file chosen → first paint), cold_ms (navigation → first paint),
  // their ratio, cold_opened_ms (the app's start → first paint) and cold_cpu_ms (renderer CPU).
  const runs = Number(process.env.BENCH_RUNS ?? 5);
  const singles = (process.env.BENCH_SINGLES || path.join(ROOT, 'dist-single/memlens.html')).split(',').map((d) => path.resolve(d));
  const bin = process.env.MEMLENS_BIN || path.join(ROOT, 'target/release/memlens');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'memlens-single-'));
  const SLOT = '<script type="application/json" id="memlens-preload">null</script>\n';
  console.log(['input', 'MB', 'viewer', 'drop_ms', 'cold_ms', 'ratio', 'cold_opened_ms', 'cold_cpu_ms'].join('\t'));
  for (const f of files) {
    const made = path.join(tmp, 'made.html');
    execFileSync(bin, ['html', f, '-o', made]);
    const made_html = fs.readFileSync(made, 'utf8');
    const from = made_html.indexOf('<script type="application/json" id="memlens-preload">');
    const to = made_html.indexOf('<script type="application/octet-stream" id="memlens-worker-js">');
    if (from < 0 || to < from) throw new Error('no preload in the report memlens html wrote');
    const preload = made_html.slice(from, to);
    const pages = singles.map((v, k) => {
      const viewer = fs.readFileSync(v, 'utf8');
      if (!viewer.includes(SLOT)) throw new Error(`${v}: no preload slot`);
      const report = path.join(tmp, `report-${k}.html`);
      fs.writeFileSync(report, viewer.replace(SLOT, preload));
      return { name: `${path.basename(path.dirname(v))}/${path.basename(v)}`, viewer: pathToFileURL(v).href, report: pathToFileURL(report).href };
    });
    const got = pages.map(() => ({ drop: [], cold: [], opened: [], cpu: [] }));
    for (let i = 0; i < runs; i++) {
      for (const [k, p] of pages.entries()) {
        const g = got[k];
        const page = await context.newPage();
        const before = rendererCpu();
        await page.goto(p.report, { waitUntil: 'commit' });
        await page.waitForFunction(() => !!document.getElementById('memlens')?.dataset.firstPaintMs, null, { timeout: 600000, polling: 5 });
        const used = cpuSince(before);
        const r = await page.evaluate(() => [performance.now(), Number(document.getElementById('memlens').dataset.firstPaintMs)]);
        await page.close();
        g.cold.push(r[0]);
        g.opened.push(r[1]);
        g.cpu.push(used);
        g.drop.push(await dropOnIdle(context, p.viewer, f));
        console.error(`  ${p.name} round ${i + 1}: drop ${g.drop.at(-1).toFixed(0)} cold ${r[0].toFixed(0)} (opened ${r[1].toFixed(0)}, cpu ${g.cpu.at(-1).toFixed(0)}) ms`);
      }
    }
    for (const [k, p] of pages.entries()) {
      const g = got[k];
      const d = median(g.drop);
      const c = median(g.cold);
      console.log([path.basename(f).slice(0, 40), (fs.statSync(f).size / 1e6).toFixed(1), p.name, d.toFixed(0), c.toFixed(0), (c / d).toFixed(2), median(g.opened).toFixed(0), median(g.cpu).toFixed(0)].join('\t'));
    }
  }
  fs.rmSync(tmp, { recursive: true, force: true });
  await context.close();
  server.close();
  process.exit(0);
}
if (process.env.BENCH_VIEW === 'limits') {
  // What the page does with each file, one fresh page at a time: with the size check off
  // (`?limit_mb=` past any file) and with the worker's own limit. For each: the outcome
  // (whole: painted; died: the worker-stopped banner; refused: the too-large prompt, whose
  // offer of the last N events is then taken: part), file chosen → first paint or prompt
  // (ms), the renderer's peak resident memory while loading (tab_peak_MB, sampled every
  // 250 ms), the worker's wasm memory once the model is built (model_MB), the decoder memory
  // the worker estimated and the entries offered, and file chosen → the first picture of the
  // trace so far (picture_ms, issue 17's progressive picture; empty when none was drawn).
  const TIMEOUT = Number(process.env.BENCH_TIMEOUT_MS ?? 900000);
  console.log(['input', 'MB', 'check', 'outcome', 'ms', 'picture_ms', 'tab_peak_MB', 'model_MB', 'estimate_MB', 'part', 'part_ms', 'part_tab_peak_MB'].join('\t'));
  const outcome = (page) => page.waitForFunction(() => {
    const root = document.getElementById('memlens');
    if (root?.dataset.firstPaintMs) return 'whole';
    if (document.querySelector('[data-testid=too-large]')) return 'refused';
    const e = document.querySelector('[data-testid=error]');
    return e ? `failed: ${e.textContent.slice(0, 80)}` : false;
  }, null, { timeout: TIMEOUT, polling: 100 }).then((h) => h.jsonValue(), () => 'timeout');
  const sampled = async (run) => {
    let peak = 0;
    const timer = setInterval(() => { const m = Number(memoryMB()); if (m > peak) peak = m; }, 250);
    try { return [await run(), peak]; } finally { clearInterval(timer); }
  };
  for (const f of files) {
    for (const check of (process.env.BENCH_CHECKS ?? 'off,on').split(',')) {
      const page = await context.newPage();
      const errors = [];
      page.on('pageerror', (e) => errors.push(String(e)));
      if (process.env.BENCH_CONSOLE) page.on('console', (m) => console.error(`  [${Date.now() % 100000}] ${m.text()}`));
      await page.goto(`${base}${check === 'off' ? '?limit_mb=1e9' : ''}`);
      await page.waitForSelector('#memlens[data-state=empty]');
      const t0 = Date.now();
      await page.setInputFiles('[data-testid=file-input]', f);
      const [out, peak] = await sampled(() => outcome(page));
      const ms = Date.now() - t0;
      const attr = (sel, a) => page.getAttribute(sel, a, { timeout: 1000 }).catch(() => null);
      const model = await attr('[data-model-memory-bytes]', 'data-model-memory-bytes');
      const est = await attr('[data-testid=too-large]', 'data-estimated-bytes');
      const picture = await attr('#memlens', 'data-partial-paint-ms');
      let part = '', partMs = '', partPeak = '';
      if (out === 'refused') {
        part = `last:${await attr('[data-testid=too-large]', 'data-last-fits')}`;
        const t1 = Date.now();
        await page.click('[data-testid=open-last]');
        await page.waitForSelector('[data-testid=too-large]', { state: 'detached' });
        const [o2, p2] = await sampled(() => outcome(page));
        partMs = o2 === 'whole' ? String(Date.now() - t1) : o2;
        partPeak = String(p2);
      }
      console.log([path.basename(f).slice(0, 40), (fs.statSync(f).size / 1e6).toFixed(0), check, out + (errors.length ? ` (${errors.length} page errors)` : ''), ms,
        picture ? Number(picture).toFixed(0) : '', peak,
        model ? (Number(model) / 1e6).toFixed(0) : '', est ? (Number(est) / 1e6).toFixed(0) : '', part, partMs, partPeak].join('\t'));
      await page.close();
    }
  }
  await context.close();
  server.close();
  process.exit(0);
}
const REPS = Number(process.env.BENCH_REPS ?? 5);
if (process.env.BENCH_VIEW === 'idle') {
  const dists = (process.env.BENCH_DISTS || DIST).split(',').map((d) => path.resolve(d));
  const got = [];
  for (const d of dists) got.push({ name: path.basename(d), ...(await serveDist(d, '/memlens/')), all: [], workers: [] });
  for (let r = 0; r < REPS; r++) {
    for (const g of got) {
      const page = await context.newPage();
      const logs = [];
      page.on('console', (m) => { if (/warm/.test(m.text())) logs.push(m.text()); });
      const before = rendererThreads();
      await page.goto(g.base);
      await page.waitForSelector('#memlens[data-state=empty]');
      await page.waitForTimeout(IDLE_MS);
      let all = 0;
      for (const [k, t] of rendererThreads()) all += t.cpu - (before.get(k)?.cpu ?? 0);
      const { workers } = threadCpuSince(before);
      g.all.push(all);
      g.workers.push(workers);
      console.error(`  ${g.name} round ${r + 1}: renderers ${all.toFixed(0)} ms, workers ${workers.toFixed(0)} ms; ${logs.join(' | ')}`);
      await page.close();
    }
  }
  for (const g of got) {
    console.log(`${g.name}\trenderers ${g.all.map((x) => x.toFixed(0)).join(' / ')} median ${median(g.all).toFixed(0)} ms`
      + `\tworkers ${g.workers.map((x) => x.toFixed(0)).join(' / ')} median ${median(g.workers).toFixed(0)} ms`);
    g.server.close();
  }
  await context.close();
  server.close();
  process.exit(0);
}
/** A fresh page on `hash` (with `query`), idle for BENCH_IDLE_MS. */
async function freshPage(hash, query = '') {
  const page = await context.newPage();
  if (process.env.BENCH_CONSOLE) page.on('console', (m) => console.error(`  [${Date.now() % 100000}] ${m.text()}`));
  await page.goto(`${base}${query}${hash}`);
  await page.waitForSelector('#memlens[data-state=empty]');
  await page.waitForTimeout(IDLE_MS);
  return page;
}
/** Runs each of `modes` (name → async () => ms) REPS times, alternating; prints medians. */
async function alternate(modes) {
  const got = Object.fromEntries(Object.keys(modes).map((k) => [k, []]));
  for (let r = 0; r < REPS; r++) {
    for (const [k, run] of Object.entries(modes)) got[k].push(await run());
  }
  for (const [k, v] of Object.entries(got)) console.log(`${k}\t${v.map((x) => x.toFixed(0)).join(' / ')}\tmedian ${median(v).toFixed(0)} ms`);
  return Object.fromEntries(Object.entries(got).map(([k, v]) => [k, median(v)]));
}
if (process.env.BENCH_VIEW === 'decode') {
  // The worker's wasm decode of one file (the page's "decoded in N ms": Blob chunks read and
  // copied into wasm memory, decoded, the model built) against the native decode of the same
  // file (BENCH_NATIVE, default the release `decode_bench` example: the same Loader, the file
  // streamed in 1 MiB chunks, then the summary the worker computes before it answers, unless
  // BENCH_NATIVE_STATS=0), BENCH_REPS rounds alternating native and each of BENCH_DISTS
  // (comma-separated built viewers, default MEMLENS_DIST; `DIR?QUERY` opens that build's page with
  // the query). Wall time, and CPU time (native: the
  // process's; browser: the renderer processes' from file chosen to decoded, which holds the
  // worker, plus the page's work meanwhile), the steadier one on a loaded machine, the
  // renderers' worker threads' CPU time (the decode, and the stats and first layout the worker
  // computes right after it, until the page shows "decoded"), and busy
  // time (browser: the worker's decode_ms less the time it waited for the file's reads,
  // data-read-wait-ms; native: its wall time), the decode's own; medians, and each build's
  // throughput as a share of native (native / this).
  const f = files[0];
  const native = process.env.BENCH_NATIVE ?? path.join(ROOT, 'target/release/examples/decode_bench');
  // An entry may end in a query for the page (`dist?pictures=0`): the same build, another arm.
  const dists = (process.env.BENCH_DISTS || DIST).split(',').map((d) => {
    const [dir, query] = d.split('?');
    return { dir: path.resolve(dir), query: query ? `?${query}` : '' };
  });
  const served = [];
  for (const d of dists) {
    const s = await serveDist(d.dir, '/memlens/');
    served.push({ name: path.basename(d.dir) + d.query, ...s, base: s.base + d.query });
  }
  const wall = Object.fromEntries([['native', []], ...served.map((s) => [s.name, []])]);
  const cpu = Object.fromEntries(Object.keys(wall).map((k) => [k, []]));
  const busy = Object.fromEntries(Object.keys(wall).map((k) => [k, []]));
  const wcpu = Object.fromEntries(Object.keys(wall).map((k) => [k, []]));
  // The worker threads' system CPU and minor page faults (browser builds only).
  const wsys = Object.fromEntries(Object.keys(wall).map((k) => [k, []]));
  const wfaults = Object.fromEntries(Object.keys(wall).map((k) => [k, []]));
  console.log(`decode of ${path.basename(f)} (${(fs.statSync(f).size / 1e6).toFixed(1)} MB), ${REPS} rounds`);
  for (let r = 0; r < REPS; r++) {
    const out = execSync(`${native} ${JSON.stringify(f)} 1${process.env.BENCH_NATIVE_STATS === '0' ? '' : ' --stats'}`, { encoding: 'utf8' });
    const nm = /decode_ms ([\d.]+) cpu_ms ([\d.]+)/.exec(out);
    wall.native.push(Number(nm[1]));
    cpu.native.push(Number(nm[2]));
    busy.native.push(Number(nm[1]));
    wcpu.native.push(Number(nm[2]));
    for (const s of served) {
      const page = await context.newPage();
      await page.goto(s.base);
      await page.waitForSelector('#memlens[data-state=empty]');
      await page.waitForTimeout(IDLE_MS);
      const before = rendererCpu();
      const threadsBefore = rendererThreads();
      await page.setInputFiles('[data-testid=file-input]', f);
      await page.waitForFunction(() => /decoded in \d+ ms/.test(document.body.innerText), null, { timeout: 600000, polling: 10 });
      const threads = threadCpuSince(threadsBefore);
      const workerUsed = threads.workers;
      const used = cpuSince(before);
      const ms = Number(/decoded in (\d+) ms/.exec(await page.evaluate(() => document.body.innerText))[1]);
      const waited = Number(await page.getAttribute('[data-read-wait-ms]', 'data-read-wait-ms'));
      wall[s.name].push(ms);
      cpu[s.name].push(used);
      busy[s.name].push(ms - waited);
      wcpu[s.name].push(workerUsed);
      wsys[s.name].push(threads.workers_sys);
      wfaults[s.name].push(threads.workers_faults);
      await page.close();
    }
  }
  const nat = { wall: median(wall.native), cpu: median(cpu.native) };
  for (const k of Object.keys(wall)) {
    const w = median(wall[k]);
    const c = median(cpu[k]);
    const b = median(busy[k]);
    const wc = median(wcpu[k]);
    console.log(`${k}\twall ${wall[k].map((x) => x.toFixed(0)).join(' / ')} median ${w.toFixed(0)} ms (native/this ${(nat.wall / w).toFixed(2)})`
      + `\tcpu ${cpu[k].map((x) => x.toFixed(0)).join(' / ')} median ${c.toFixed(0)} ms (native/this ${(nat.cpu / c).toFixed(2)})`
      + `\tworker cpu ${wcpu[k].map((x) => x.toFixed(0)).join(' / ')} median ${wc.toFixed(0)} ms (native/this ${(nat.cpu / wc).toFixed(2)})`
      + (wsys[k].length ? `\tworker system cpu median ${median(wsys[k]).toFixed(0)} ms, minor faults median ${median(wfaults[k]).toFixed(0)}` : '')
      + `\tbusy ${busy[k].map((x) => x.toFixed(0)).join(' / ')} median ${b.toFixed(0)} ms (native/this ${(nat.wall / b).toFixed(2)})`);
  }
  await context.close();
  for (const s of served) s.server.close();
  server.close();
  process.exit(0);
}
if (process.env.BENCH_VIEW === 'worker_memory') {
  // What one decoding worker holds at its peak: each file dropped on a fresh, idle page
  // (#view=timeline); the resident memory of this browser's renderer processes (the page and its
  // workers are threads of one) sampled every 20 ms from before the drop until the worker's
  // background work is done (exact layout drawn, then no growth for 3 s). Reported in MB:
  //   before     idle page with its warm workers (the first and the spare);
  //   peak_add   the highest sample minus `before`: the decoding worker's peak (its wasm memory,
  //              the file's chunks in flight) plus the page's copy of one layout;
  //   settled    what stays added once all is built (the worker's wasm memory never shrinks);
  //   model      the worker's wasm memory once the model is built (data-model-memory-bytes).
  const rssMB = (pids) => pids.reduce((a, p) => {
    try { return a + Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${p}/status`, 'utf8'))[1]) / 1024; } catch { return a; }
  }, 0);
  console.log(['input', 'MB', 'before_MB', 'peak_add_MB', 'settled_add_MB', 'model_MB'].join('\t'));
  for (const f of files) {
    for (let r = 0; r < REPS; r++) {
      const page = await freshPage('#view=timeline');
      const pids = renderers();
      const before = rssMB(pids);
      let peak = before;
      let last = before;
      let stableSince = Date.now();
      let exact = false;
      await page.setInputFiles('[data-testid=file-input]', f);
      for (;;) {
        await new Promise((res) => setTimeout(res, 20));
        const now = rssMB(pids);
        peak = Math.max(peak, now);
        if (Math.abs(now - last) > 0.01 * last) stableSince = Date.now();
        last = now;
        exact ||= await page.evaluate(() => !!document.getElementById('memlens')?.dataset.exactPaintMs);
        if (exact && Date.now() - stableSince > 3000) break;
      }
      const model = await page.evaluate(() => Number(document.querySelector('[data-model-memory-bytes]')?.dataset.modelMemoryBytes) / 1048576);
      console.log([path.basename(f).slice(0, 40), (fs.statSync(f).size / 1e6).toFixed(1), before.toFixed(0), (peak - before).toFixed(0), (last - before).toFixed(0), model.toFixed(0)].join('\t'));
      await page.close();
    }
  }
  await context.close();
  server.close();
  process.exit(0);
}
if (process.env.BENCH_VIEW === 'compare') {
  // For each build of BENCH_DISTS (comma-separated, default MEMLENS_DIST), BENCH_REPS rounds
  // alternating builds and modes: the larger file alone on #view=timeline (→ its first paint)
  // and both files chosen together on #view=compare (→ both timelines painted, the view's
  // data-painted-ms). Wall (the page's own figure) and CPU time of the renderer processes (the
  // page and its workers) from file chosen to painted; medians and each build's ratio.
  const larger = [...files].sort((a, b) => fs.statSync(b).size - fs.statSync(a).size)[0];
  const dists = (process.env.BENCH_DISTS || DIST).split(',').map((d) => path.resolve(d));
  const served = [];
  for (const d of dists) served.push({ name: path.basename(d), ...(await serveDist(d, '/memlens/')) });
  console.log(`compare ${files.map((f) => path.basename(f)).join(' vs ')}; alone: ${path.basename(larger)}; ${REPS} rounds`);
  // Both modes are timed alike: the same idle page (its workers warm: each logs its warm-up,
  // counted here), and the painted attribute awaited with a MutationObserver in the page rather
  // than polled (polling every 5 ms would add work on the page's main thread while the
  // workers decode, which weighs on the Compare view's two decodes but not on one file's).
  const painted = async (s, hash, input, sel, attr) => {
    const page = await context.newPage();
    let warm = 0;
    page.on('console', (m) => {
      if (/memlens worker: warmed up/.test(m.text())) warm++;
      if (process.env.BENCH_CONSOLE) console.error(`  [${Date.now() % 100000}] ${m.text()}`);
    });
    await page.goto(s.base + hash);
    await page.waitForSelector('#memlens[data-state=empty]');
    await page.waitForTimeout(IDLE_MS);
    const warmAtChoice = warm;
    await page.evaluate(([q, a]) => {
      window.benchPainted = new Promise((resolve) => {
        const done = () => !!document.querySelector(q)?.getAttribute(a);
        const mo = new MutationObserver(() => { if (done()) { mo.disconnect(); resolve(); } });
        mo.observe(document.documentElement, { attributes: true, childList: true, subtree: true });
      });
    }, [sel, attr]);
    const before = rendererCpu();
    const threads = rendererThreads();
    await page.setInputFiles('[data-testid=file-input]', input);
    await page.evaluate(() => window.benchPainted);
    const used = cpuSince(before);
    const t = threadCpuSince(threads);
    const ms = await page.evaluate(([q, a]) => Number(document.querySelector(q).getAttribute(a)), [sel, attr]);
    await page.close();
    return { ms, cpu: used, warm: warmAtChoice, ...t };
  };
  const got = {};
  for (let r = 0; r < REPS; r++) {
    for (const s of served) {
      for (const [mode, run] of [
        ['alone', () => painted(s, '#view=timeline', larger, '#memlens', 'data-first-paint-ms')],
        ['compare', () => painted(s, '#view=compare', files, '[data-testid=compare-timelines]', 'data-painted-ms')],
      ]) {
        const k = `${s.name}\t${mode}`;
        (got[k] ??= []).push(await run());
      }
    }
  }
  const fmt = (v, f) => `${v.map((x) => x[f].toFixed(0)).join(' / ')} median ${median(v.map((x) => x[f])).toFixed(0)} ms`;
  for (const [k, v] of Object.entries(got)) {
    console.log(`${k}\twall ${fmt(v, 'ms')}\tcpu ${fmt(v, 'cpu')}\tworkers warm when chosen: ${v.map((x) => x.warm).join(' / ')}`);
    for (const x of v) x.other = x.cpu - x.main - x.workers;
    console.log(`${k}\tcpu of threads: page main ${fmt(v, 'main')}; busiest worker ${fmt(v, 'worker_max')}; all workers ${fmt(v, 'workers')}; the renderers' other threads ${fmt(v, 'other')}`);
  }
  for (const s of served) {
    const m = (mode, f) => median(got[`${s.name}\t${mode}`].map((x) => x[f]));
    const r = (f) => (m('compare', f) / m('alone', f)).toFixed(2);
    console.log(`${s.name}\tratio compare/alone: wall ${r('ms')}, cpu ${r('cpu')}, page main thread cpu ${r('main')}, busiest worker cpu ${r('worker_max')}`);
  }
  await context.close();
  for (const s of served) s.server.close();
  server.close();
  process.exit(0);
}
if (process.env.BENCH_VIEW === 'files') {
  const rowsShown = (page, n) => page.waitForFunction((k) => Number(document.querySelector('.overview')?.dataset.rows) >= k, n, { timeout: 600000, polling: 5 });
  const all = async (query) => {
    const page = await freshPage('#view=overview', query);
    const t0 = Date.now();
    await page.setInputFiles('[data-testid=file-input]', files);
    await rowsShown(page, files.length);
    const ms = Date.now() - t0;
    await page.close();
    return ms;
  };
  console.log(`${files.length} files, ${(files.reduce((a, f) => a + fs.statSync(f).size, 0) / 1e6).toFixed(0)} MB, to a painted Files overview`);
  const m = await alternate({
    parallel_workers: () => all(''),
    one_worker: () => all('?workers=1'),
    one_after_another: async () => {
      const page = await freshPage('#view=overview');
      const t0 = Date.now();
      for (const f of files) {
        await page.setInputFiles('[data-testid=file-input]', f);
        await page.waitForFunction((n) => document.getElementById('memlens')?.dataset.file === n && document.getElementById('memlens').dataset.state === 'ready', path.basename(f), { timeout: 600000, polling: 5 });
      }
      await rowsShown(page, files.length);
      const ms = Date.now() - t0;
      await page.close();
      return ms;
    },
  });
  console.log(`ratio parallel/one-after-another ${(m.parallel_workers / m.one_after_another).toFixed(2)}, parallel/one-worker ${(m.parallel_workers / m.one_worker).toFixed(2)}`);
  await context.close();
  server.close();
  process.exit(0);
}
if (process.env.BENCH_VIEW === 'progressive') {
  const reps = Number(process.env.BENCH_REPS ?? 5);
  console.log(['input', 'MB', 'arm', 'partial_ms', 'first_paint_ms', 'exact_ms'].join('\t'));
  for (const f of files) {
    const runs = { before: [], after: [] };
    for (let r = 0; r < 2 * reps; r++) {
      const arm = r % 2 === 0 ? 'before' : 'after';
      const page = await context.newPage();
      await page.goto(base + (arm === 'before' ? '?pictures=0' : ''));
      await page.waitForSelector('#memlens[data-state=empty]');
      await page.waitForTimeout(IDLE_MS);
      await page.setInputFiles('[data-testid=file-input]', f);
      await page.waitForFunction(() => !!document.getElementById('memlens').dataset.exactPaintMs, null, { timeout: 600000, polling: 5 });
      const d = await page.evaluate(() => ({ ...document.getElementById('memlens').dataset }));
      const row = { partial: Number(d.partialPaintMs || NaN), first: Number(d.firstPaintMs), exact: Number(d.exactPaintMs) };
      runs[arm].push(row);
      console.log([path.basename(f).slice(0, 40), (fs.statSync(f).size / 1e6).toFixed(1), arm,
        row.partial.toFixed(0), row.first.toFixed(0), row.exact.toFixed(0)].join('\t'));
      await page.close();
    }
    const med = (arm, k) => median(runs[arm].map((x) => x[k]));
    console.log(`${path.basename(f)}: medians before first ${med('before', 'first').toFixed(0)} exact ${med('before', 'exact').toFixed(0)} ms; `
      + `after picture ${med('after', 'partial').toFixed(0)} first ${med('after', 'first').toFixed(0)} exact ${med('after', 'exact').toFixed(0)} ms; `
      + `first paint after/before ${(med('after', 'first') / med('before', 'first')).toFixed(3)}`);
  }
  await context.close();
  server.close();
  process.exit(0);
}
if (process.env.BENCH_VIEW === 'diagnosis') {
  console.log(['input', 'MB', 'decode_ms', 'first_paint_ms', 'diagnosis_ms', 'after_paint_ms'].join('\t'));
  for (const f of files) {
    const page = await context.newPage();
    if (process.env.BENCH_CONSOLE) page.on('console', (m) => console.error(`  [${Date.now() % 100000}] ${m.text()}`));
    await page.goto(base);
    await page.waitForSelector('#memlens[data-state=empty]');
    await page.waitForTimeout(IDLE_MS);
    await page.setInputFiles('[data-testid=file-input]', f);
    await page.waitForFunction(() => !!document.getElementById('memlens').dataset.diagnosisMs, null, { timeout: 600000, polling: 5 });
    const root = await page.evaluate(() => ({ ...document.getElementById('memlens').dataset }));
    const m = /decoded in (\d+) ms/.exec(await page.evaluate(() => document.body.innerText));
    const fp = Number(root.firstPaintMs);
    const dg = Number(root.diagnosisMs);
    console.log([path.basename(f).slice(0, 40), (fs.statSync(f).size / 1e6).toFixed(1), m ? m[1] : '?', fp.toFixed(0), dg.toFixed(0), (dg - fp).toFixed(0)].join('\t'));
    await page.close();
  }
  await context.close();
  server.close();
  process.exit(0);
}
console.log(['input', 'MB', 'decode_ms', 'first_paint_ms', 'exact_ms', 'model_MB', 'load_MB', 'tab_MB', 'draw_median_ms', 'draw_worst_ms', 'frame_median_ms', 'frame_worst_ms'].join('\t'));
for (const f of files) {
  const page = await context.newPage();
  if (process.env.BENCH_CONSOLE) page.on('console', (m) => console.error(`  [${Date.now() % 100000}] ${m.text()}`));
  await page.goto(base);
  await page.waitForSelector('#memlens[data-state=empty]');
  // A user takes a moment between opening the page and dropping a file; the worker uses it to
  // run its code on a small generated snapshot, in rounds (web/src/worker/warming.rs).
  await page.waitForTimeout(IDLE_MS);
  await page.setInputFiles('[data-testid=file-input]', f);
  await page.waitForFunction(() => !!document.getElementById('memlens').dataset.firstPaintMs, null, { timeout: 600000 });
  const firstPaint = await page.evaluate(() => Number(document.getElementById('memlens').dataset.firstPaintMs));
  await page.waitForFunction(() => !!document.getElementById('memlens').dataset.exactPaintMs, null, { timeout: 600000 });
  const exactPaint = await page.evaluate(() => Number(document.getElementById('memlens').dataset.exactPaintMs));
  const heapMB = memoryMB();
  const modelMB = await page.evaluate(() => Number(document.querySelector('[data-model-memory-bytes]')?.dataset.modelMemoryBytes || 0) / 1e6);
  const beforeMB = await page.evaluate(() => Number(document.querySelector('[data-memory-before-bytes]')?.dataset.memoryBeforeBytes || 0) / 1e6);
  const status = await page.evaluate(() => document.body.innerText);
  const m = /decoded in (\d+) ms/.exec(status);
  const canvas = page.locator('[data-testid=timeline-canvas]');
  const box = await canvas.boundingBox();
  const times = [];
  for (let i = 0; i < 20; i++) {
    const t = await page.evaluate(({ x, y, i }) => new Promise((resolve) => {
      const c = document.elementFromPoint(x, y);
      const t0 = performance.now();
      if (i % 2 === 0) {
        c.dispatchEvent(new WheelEvent('wheel', { deltaY: i < 10 ? -120 : 120, clientX: x, clientY: y, bubbles: true, cancelable: true }));
      } else {
        c.dispatchEvent(new MouseEvent('mousedown', { clientX: x, clientY: y, bubbles: true, button: 0 }));
        c.dispatchEvent(new MouseEvent('mousemove', { clientX: x + 40, clientY: y, bubbles: true, buttons: 1 }));
        c.dispatchEvent(new MouseEvent('mouseup', { clientX: x + 40, clientY: y, bubbles: true, button: 0 }));
      }
      requestAnimationFrame(() => requestAnimationFrame(() => resolve(performance.now() - t0)));
    }), { x: box.x + box.width * 0.5, y: box.y + box.height * 0.5, i });
    times.push(t);
  }
  // The canvas logs its last 50 draw times (ms) in data-draw-log.
  const draws = ((await canvas.getAttribute('data-draw-log')) || '').split(',').filter(Boolean).map(Number).slice(-20);
  const mb = (fs.statSync(f).size / 1e6).toFixed(1);
  console.log([path.basename(f).slice(0, 40), mb, m ? m[1] : '?', firstPaint.toFixed(0), exactPaint.toFixed(0), modelMB.toFixed(0), (modelMB - beforeMB).toFixed(1), heapMB,
    draws.length ? median(draws).toFixed(1) : '?', draws.length ? Math.max(...draws).toFixed(1) : '?',
    median(times).toFixed(1), Math.max(...times).toFixed(1)].join('\t'));
  await page.close();
}
await context.close();
server.close();
