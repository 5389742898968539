// The cache headers of the two servers of the built viewer: tests/browser/harness.mjs's
// serveDist (the tests and bench/browser.mjs) and scripts/serve_dist.py (scripts/serve.sh) give
// each kind of file the same Cache-Control: Trunk's content-hashed app files kept a year
// (immutable), the page, the bootstraps and the worker's unhashed files revalidated (no-cache,
// a 304 while unchanged), anything else (snapshots, the example) not kept (no-store).
//
// Run after `bash scripts/serve.sh --build`: (cd tests/browser && node --test cache_headers.test.mjs)

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { serveDist, DIST, ROOT } from './harness.mjs';

const YEAR = 'public, max-age=31536000, immutable';
let node, python;

async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

before(async () => {
  assert.ok(fs.existsSync(path.join(DIST, 'index.html')), `${DIST} missing: run scripts/serve.sh --build`);
  node = await serveDist(DIST, '/memlens/');
  const port = await freePort();
  const proc = spawn('python3', [path.join(ROOT, 'scripts/serve_dist.py'), String(port), DIST], { stdio: 'ignore' });
  python = { proc, base: `http://127.0.0.1:${port}/` };
  for (let i = 0; i < 100; i++) {
    if (await fetch(python.base).then(() => true, () => false)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('scripts/serve_dist.py did not start');
});

after(() => {
  node?.server.close();
  python?.proc.kill();
});

test('both servers give each kind of file the same Cache-Control, and revalidate with a 304', async () => {
  const names = fs.readdirSync(DIST);
  const hashed = names.filter((n) => /-[0-9a-f]{16}(_bg)?\.(js|wasm|css)$/.test(n));
  assert.ok(hashed.some((n) => n.endsWith('_bg.wasm')) && hashed.some((n) => n.endsWith('.css')), `${hashed}`);
  const want = [
    ...hashed.map((n) => [n, YEAR]),
    ['', 'no-cache'], ['index.html', 'no-cache'], ['boot.js', 'no-cache'],
    ['memlens-worker_bg.wasm', 'no-cache'], ['favicon.svg', 'no-cache'],
    ['example.pickle', 'no-store'],
  ];
  for (const { base } of [node, python]) {
    for (const [name, policy] of want) {
      const r = await fetch(base + name);
      assert.equal(r.status, 200, `${base}${name}`);
      assert.equal(r.headers.get('cache-control'), policy, `${base}${name}`);
      await r.arrayBuffer();
    }
    const first = await fetch(base + 'memlens-worker_bg.wasm');
    assert.equal(first.headers.get('content-type'), 'application/wasm');
    await first.arrayBuffer();
    const again = await fetch(base + 'memlens-worker_bg.wasm', { headers: { 'if-modified-since': first.headers.get('last-modified') } });
    assert.equal(again.status, 304, `${base}: unchanged worker wasm revalidated`);
  }
});
