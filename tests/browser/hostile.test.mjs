// Hostile files dropped on the viewer, in real headless Chromium: every hostile input of core's
// robustness suite (crates/memlens-core/tests/robustness.rs) — each refused pickle opcode, a
// memo fan-out bomb, 10^6 levels of nesting (lists, marks, JSON), 2^60 length prefixes,
// truncations of a real snapshot at many points, seeded random bytes, 2 GiB of zeros, and
// files whose known keys are all of the wrong type — is generated here (nothing large is
// committed) and dropped, one after the other, on a page showing a real snapshot. Each must end
// in the banner naming the file within BOUND_MS, with no progress bar left and the snapshot
// still shown. Then a list of 2*10^8 `None`s (200 MB that needs more than the 4 GiB a wasm
// worker can have) kills the worker: the banner says so, a new worker starts, and the next good
// file opens normally while the one shown before still answers. A worker whose file failed is
// replaced, so the memory that file took is given back: after 3*10^7 `None`s (~1 GB of decoder
// values) the next file starts in a worker of a few MB. No page error anywhere.
//
// Run: (cd tests/browser && node --test --test-concurrency=1 hostile.test.mjs) after
// `scripts/serve.sh --build`. Env: CHROMIUM (default /usr/bin/chromium), MEMLENS_DIST.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openViewer, summary as summaryOf, waitShown, watchPage, skipOrFail, OUT, SNAPS } from './harness.mjs';

const REAL = 'Wedsonlin__assignment2-systems__results_medium_1024_training_memory_snapshot.pickle';
const OTHER = 'kkaitlyn111__cs336-a2-systems__memory_small_forward.pickle';
/** Each hostile drop ends in the banner within this (seconds, not minutes). */
const BOUND_MS = 15000;

let viewer, base, page, pageErrors;

/** The summary strip's numbers ({} when there is none). */
const summary = async () => (await summaryOf(page))?.metrics ?? {};

// ------------------------------------------------------------------ the inputs (as in robustness.rs)

/** xorshift64*, as the Rust suite's `Rng`: seeded, reproducible. */
function rng(seed) {
  let s = BigInt(seed);
  const M = (1n << 64n) - 1n;
  return () => {
    s ^= s >> 12n; s ^= (s << 25n) & M; s ^= s >> 27n;
    return Number(((s * 0x2545F4914F6CDD1Dn) & M) >> 56n);
  };
}

const u64 = (n) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(n)); return b; };
const u32 = (n) => { const b = Buffer.alloc(4); b.writeUInt32LE(n); return b; };

const REFUSED = [['GLOBAL', 0x63, 'os\nsystem\n'], ['STACK_GLOBAL', 0x93, ''], ['REDUCE', 0x52, ''],
  ['BUILD', 0x62, ''], ['NEWOBJ', 0x81, ''], ['NEWOBJ_EX', 0x92, ''], ['INST', 0x69, 'builtins\neval\n'],
  ['OBJ', 0x6f, ''], ['PERSID', 0x50, '0\n'], ['BINPERSID', 0x51, ''], ['EXT1', 0x82, '\x01'],
  ['EXT2', 0x83, '\x01\x00'], ['EXT4', 0x84, '\x01\x00\x00\x00'], ['NEXT_BUFFER', 0x97, ''],
  ['READONLY_BUFFER', 0x98, '']];

/** A list holding the previous list twice, `levels` deep: 2^levels leaves if expanded. */
function fanOutBomb(levels) {
  const parts = [Buffer.from([0x80, 4, 0x5d, 0x94])];
  for (let k = 1; k <= levels; k++) {
    parts.push(Buffer.from('0]\x94(', 'latin1'));
    for (let i = 0; i < 2; i++) parts.push(Buffer.from([0x6a]), u32(k - 1));
    parts.push(Buffer.from('e', 'latin1'));
  }
  parts.push(Buffer.from('.'));
  return Buffer.concat(parts);
}

/** [name, bytes, a fragment the banner must show] */
function hostileInputs() {
  const out = [];
  for (const [name, op, operands] of REFUSED) {
    out.push([`refused-${name}.pickle`, Buffer.concat([Buffer.from('\x80\x02]q\x00', 'latin1'), Buffer.from([op]),
      Buffer.from(operands + '.', 'latin1')]), `refused pickle opcode ${name}`]);
  }
  out.push(['memo-bomb.pickle', fanOutBomb(100), 'not a memory snapshot']);
  const D = 1_000_000;
  out.push(['nested-lists.pickle', Buffer.concat([Buffer.from([0x80, 4]), Buffer.alloc(D, 0x5d),
    Buffer.alloc(D - 1, 0x61), Buffer.from('.')]), 'not a memory snapshot']);
  out.push(['nested-marks.pickle', Buffer.concat([Buffer.from([0x80, 2]), Buffer.alloc(D, 0x28), Buffer.from('.')]),
    'malformed pickle']);
  out.push(['nested.json', Buffer.concat([Buffer.alloc(D, 0x5b), Buffer.alloc(D, 0x5d)]), 'invalid JSON']);
  for (const [name, op] of [['BINUNICODE8', 0x8d], ['BINBYTES8', 0x8e], ['BYTEARRAY8', 0x96]]) {
    out.push([`length-2e60-${name}.pickle`, Buffer.concat([Buffer.from([0x80, 5, op]), u64(1n << 60n),
      Buffer.from('abc.')]), 'larger than the input']);
  }
  out.push(['frame-2e60.pickle', Buffer.concat([Buffer.from([0x80, 4, 0x95]), u64(1n << 60n), Buffer.from('}.')]),
    'not a memory snapshot']);
  const real = fs.readFileSync(path.join(SNAPS, REAL));
  for (let i = 1; i <= 12; i++) {
    const n = Math.floor(real.length * i / 13) + i;
    out.push([`truncated-${n}.pickle`, real.subarray(0, n), 'truncated']);
  }
  const next = rng(0x9E3779B97F4A7C15n);
  const heads = [[], [0x80, 4, 0x95], [0x80, 2], [...Buffer.from('{"segments": [')]];
  for (let i = 0; i < 8; i++) {
    const body = Buffer.alloc(65536);
    for (let j = 0; j < body.length; j++) body[j] = next();
    out.push([`random-${i}.bin`, Buffer.concat([Buffer.from(heads[i % heads.length]), body]), '']);
  }
  out.push(['wrong-types.json', Buffer.from('{"segments": "nope", "device_traces": 5}'),
    "'segments' is a string, not a list"]);
  out.push(['wrong-types.pickle', Buffer.concat([Buffer.from([0x80, 4, 0x7d, 0x94, 0x28, 0x8c, 8]),
    Buffer.from('segments'), Buffer.from([0x94, 0x8c, 4]), Buffer.from('nope'), Buffer.from([0x94, 0x8c, 13]),
    Buffer.from('device_traces'), Buffer.from([0x94, 0x4b, 5, 0x75, 0x2e])]), "'device_traces' is an int, not a list"]);
  return out;
}

// ------------------------------------------------------------------ the page

/** Drops a file on the page: a Buffer, or `{nones: n}` (a list of n `None`s, built in the page). */
async function drop(name, content, on = page) {
  const arg = Buffer.isBuffer(content) ? { b64: content.toString('base64') } : content;
  await on.evaluate(({ name, arg }) => {
    let parts;
    if (arg.b64 !== undefined) {
      const bin = atob(arg.b64);
      const u = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) u[i] = bin.charCodeAt(i);
      parts = [u];
    } else {
      // protocol 2: EMPTY_LIST, MARK, n x NONE, APPENDS, STOP
      parts = [new Uint8Array([0x80, 2, 0x5d, 0x28]), new Uint8Array(arg.nones).fill(0x4e), new Uint8Array([0x65, 0x2e])];
    }
    const dt = new DataTransfer();
    dt.items.add(new File(parts, name));
    document.body.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  }, { name, arg });
}

/** Waits for the banner naming `name`; returns its text and the time it took. */
async function banner(name, timeout = BOUND_MS, on = page) {
  const t0 = Date.now();
  await on.waitForFunction((n) => [...document.querySelectorAll('[role=alert]')]
    .some((e) => e.textContent.includes(n)), name, { timeout });
  const text = await on.$eval('[role=alert] span', (e) => e.textContent);
  return { text, ms: Date.now() - t0 };
}

before(async () => {
  viewer = await openViewer({ strict: true });
  ({ base, page, pageErrors } = viewer);
});

after(async () => {
  await viewer?.close();
});

test('every hostile input ends in the banner, and the file shown stays', async (t) => {
  if (!fs.existsSync(path.join(SNAPS, REAL))) { skipOrFail(t, `${SNAPS} not found`); return; }
  await page.goto(base);
  await page.waitForSelector('#memlens[data-state=empty]');
  await page.setInputFiles('[data-testid=file-input]', path.join(SNAPS, REAL));
  await waitShown(page, REAL);
  const shown = await summary();
  assert.ok(shown.trace_entries > 0, JSON.stringify(shown));
  const times = [];
  // 2 GiB of zeros: a sparse file, opened through the file input (a drop would copy it)
  const zeros = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'memlens-hostile-')), 'zeros-2GiB.bin');
  fs.closeSync(fs.openSync(zeros, 'w'));
  fs.truncateSync(zeros, 2 ** 31);
  const inputs = [...hostileInputs(), [path.basename(zeros), { path: zeros }, 'unknown pickle opcode 0x00 at byte 0']];
  for (const [name, bytes, fragment] of inputs) {
    if (bytes.path) await page.setInputFiles('[data-testid=file-input]', bytes.path);
    else await drop(name, bytes);
    const { text, ms } = await banner(name);
    times.push([name, ms]);
    assert.ok(text.includes(fragment), `${name}: want ${JSON.stringify(fragment)} in ${JSON.stringify(text)}`);
    assert.ok(text.trim().endsWith(name), `${name}: the file comes last: ${text}`);
    assert.equal(await page.locator('[data-testid=progress]').count(), 0, `${name}: a progress bar is left`);
    assert.equal(await page.getAttribute('#memlens', 'data-file'), REAL, `${name}: the file shown changed`);
  }
  times.sort((a, b) => b[1] - a[1]);
  console.log(`${inputs.length} hostile inputs, slowest to the banner: ${times.slice(0, 4).map(([n, ms]) => `${n} ${ms} ms`).join(', ')}`);
  assert.deepEqual(await summary(), shown, 'the file shown kept its numbers');
  await page.screenshot({ path: path.join(OUT, 'hostile.png') });
  fs.rmSync(path.dirname(zeros), { recursive: true, force: true });
});

test('a worker that runs out of memory is reported and replaced; the next file opens', async (t) => {
  if (!fs.existsSync(path.join(SNAPS, OTHER))) { skipOrFail(t, `${SNAPS} not found`); return; }
  const shown = await summary();
  const name = 'nones-200M.pickle';
  await drop(name, { nones: 200_000_000 });
  const { text, ms } = await banner(name, 60000);
  console.log(`out of memory in the worker: banner after ${ms} ms: ${text}`);
  assert.match(text, /decoding worker stopped/);
  assert.equal(await page.locator('[data-testid=progress]').count(), 0);
  // the snapshot shown before answers from the new worker: its state history
  assert.equal(await page.getAttribute('#memlens', 'data-file'), REAL);
  assert.deepEqual(await summary(), shown);
  await page.selectOption('[data-testid=view-select]', 'state');
  await page.waitForFunction(() => {
    const v = document.querySelector('[data-testid=state-view]');
    const n = document.querySelector('[data-testid=state-numbers]');
    return v && v.dataset.paintedEvent !== undefined && n && n.querySelector('[data-metric=state_reserved_bytes]');
  }, null, { timeout: 30000 });
  await page.selectOption('[data-testid=view-select]', 'timeline');
  // and the next good file opens normally
  await page.setInputFiles('[data-testid=file-input]', path.join(SNAPS, OTHER));
  await waitShown(page, OTHER);
  assert.ok((await summary()).trace_entries > 0);
});

test('a file that fails gives back the memory it took: the next one starts in a fresh worker', async (t) => {
  if (!fs.existsSync(path.join(SNAPS, OTHER))) { skipOrFail(t, `${SNAPS} not found`); return; }
  // one worker, so the next file goes where the failed one was decoded
  const p = await viewer.context.newPage();
  watchPage(p, pageErrors);
  await p.goto(`${base}?workers=1`);
  await p.waitForSelector('#memlens[data-state=empty]');
  // 3*10^7 `None`s in a list: ~1 GB of decoder values before the file is found to be no
  // snapshot (a wasm memory never shrinks: the worker that read it stays that large)
  const name = 'nones-30M.pickle';
  await drop(name, { nones: 30_000_000 }, p);
  const { text, ms } = await banner(name, 60000, p);
  assert.match(text, /not a memory snapshot/, text);
  await p.setInputFiles('[data-testid=file-input]', path.join(SNAPS, OTHER));
  await waitShown(p, OTHER);
  const before = Number(await p.getAttribute('[data-memory-before-bytes]', 'data-memory-before-bytes'));
  const model = Number(await p.getAttribute('[data-model-memory-bytes]', 'data-model-memory-bytes'));
  console.log(`failed after ${ms} ms; the next file's worker held ${(before / 1e6).toFixed(1)} MB before it, ${(model / 1e6).toFixed(1)} MB with its model`);
  assert.ok(before > 0 && before < 64e6, `the next file's worker held ${before} B before it`);
  await p.close();
});

test('no page errors', () => {
  assert.deepEqual(pageErrors, []);
});
