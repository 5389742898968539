// The decoder's wasm against its native build on the same file, outside the browser: the
// `decode_bench` example built for wasm32-wasip1 and run under Node's V8 (the browser's wasm
// engine) in a fresh process per round, alternating with the native build, BENCH_REPS rounds
// (default 5). A wasm round decodes the file 3 times: the first decode runs while V8 compiles
// (baseline code first, the optimized tier once a function is hot: "cold"), the next two on
// the optimized code ("warm"). CPU time is the figure (the process's user + system, read from
// /proc/self/stat, for wasm Node's whole process: its compiler threads too); medians, and
// native / this.
//
//   rustup target add wasm32-wasip1
//   cargo build --release -p memlens-core --example decode_bench
//   cargo build --release -p memlens-core --example decode_bench --target wasm32-wasip1
//   node bench/wasm_node.mjs FILE
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NATIVE = path.join(ROOT, 'target/release/examples/decode_bench');
const WASM = path.join(ROOT, 'target/wasm32-wasip1/release/examples/decode_bench.wasm');

if (process.argv[2] === '--child') {
  // One wasm process: decode_bench.wasm FILE ROUNDS, the file's folder and /proc given to it.
  const { WASI } = await import('node:wasi');
  const [file, rounds] = process.argv.slice(3);
  const wasi = new WASI({
    version: 'preview1',
    args: ['decode_bench', `/data/${path.basename(file)}`, rounds],
    preopens: { '/data': path.dirname(path.resolve(file)), '/proc': '/proc' },
  });
  const module = await WebAssembly.compile(fs.readFileSync(WASM));
  wasi.start(await WebAssembly.instantiate(module, wasi.getImportObject()));
  process.exit(0);
}

const file = process.argv[2];
if (!file) {
  console.error('usage: node bench/wasm_node.mjs FILE');
  process.exit(2);
}
for (const f of [NATIVE, WASM]) {
  if (!fs.existsSync(f)) {
    console.error(`${f} is missing: see the build commands at the top of bench/wasm_node.mjs`);
    process.exit(2);
  }
}
const REPS = Number(process.env.BENCH_REPS ?? 5);
const cpuOf = (out) => [...out.matchAll(/^decode_ms [\d.]+ cpu_ms ([\d.]+)$/gm)].map((m) => Number(m[1]));
const median = (v) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)];
const got = { native: [], 'wasm cold': [], 'wasm warm': [] };
console.log(`decode of ${path.basename(file)} (${(fs.statSync(file).size / 1e6).toFixed(1)} MB), ${REPS} rounds`);
for (let r = 0; r < REPS; r++) {
  got.native.push(cpuOf(execFileSync(NATIVE, [file, '1'], { encoding: 'utf8' }))[0]);
  // (Node 20 may crash on exit after a WASI run that grew a large memory: the printed rounds
  // are what counts.)
  const child = spawnSync(process.execPath, ['--no-warnings', fileURLToPath(import.meta.url), '--child', file, '3'], { encoding: 'utf8' });
  const w = cpuOf(child.stdout);
  if (w.length !== 3) {
    console.error(`the wasm run printed ${w.length} rounds of 3: ${child.stderr}`);
    process.exit(1);
  }
  got['wasm cold'].push(w[0]);
  got['wasm warm'].push(median(w.slice(1)));
}
const nat = median(got.native);
for (const [k, v] of Object.entries(got)) {
  console.log(`${k}\tcpu ${v.join(' / ')} median ${median(v)} ms (native/this ${(nat / median(v)).toFixed(2)})`);
}
