// memlens single-file bootstrap. scripts/single_file.py appends this to the app's wasm-bindgen
// module inside the one <script type="module"> of dist-single/memlens.html, and replaces
// __MEMLENS_INIT__ with the module's init function. Everything the page needs is in the page:
// the app's wasm, the worker's JS and wasm, and the example travel as gzip+base64 data blocks
// (<script type="application/octet-stream">, never executed), unpacked here with the browser's
// own DecompressionStream. No request is made, so the file works from file:// and offline.
//
// It sets `window.memlensHost` (and `memlensEarlyWorker`, the worker started before the app)
// before the app starts (see web/src/page/bridge.rs):
//   makeWorker()  the decoding worker, from a Blob URL, handed its wasm (compiled here once)
//                 in the first message;
//   fetch(url)    the embedded copy of a file the app would fetch (the example), or null;
//   preload()     the files to open at start: `memlens html` reports embed them as data blocks,
//                 `memlens serve` lists URLs of its own origin.
// The preload block may also name the view to start in (`memlens html --view`).
try {
  const block = (id) => {
    const el = document.getElementById(id);
    if (!el) throw new Error(`this page lacks its embedded part "${id}"`);
    return el;
  };
  const decodeBase64 = (text) => {
    if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(text.trim());
    const bin = atob(text.trim());
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  };
  const unpack = (id) => {
    const packed = new Blob([decodeBase64(block(id).textContent)]);
    return new Response(packed.stream().pipeThrough(new DecompressionStream('gzip'))).blob();
  };

  // Runs first inside the worker: wait for the wasm (the module compiled by the page, or its
  // bytes where the page could not compile it), then start wasm-bindgen's no-modules glue (its
  // `wasm_bindgen` global), whose main() answers `Ready`.
  const workerBoot = `
self.onmessage = (e) => {
  self.onmessage = null;
  wasm_bindgen({ module_or_path: e.data }).catch((err) => console.error('memlens worker:', err));
};`;
  // The worker's wasm is compiled once, here, while the app's compiles (as boot.js does), and
  // each worker is handed the module: no copy of the bytes and no compile per worker.
  const workerModule = unpack('memlens-worker-wasm')
    .then((b) => b.arrayBuffer())
    .then((bytes) => WebAssembly.compile(bytes).catch(() => bytes));
  const [workerJs, appWasm] = await Promise.all([
    unpack('memlens-worker-js').then((b) => b.text()),
    unpack('memlens-app-wasm').then((b) => b.arrayBuffer()),
  ]);
  const workerUrl = URL.createObjectURL(new Blob([workerJs, workerBoot], { type: 'text/javascript' }));
  const makeWorker = () => {
    const w = new Worker(workerUrl, { name: 'memlens-worker' });
    workerModule.then((m) => w.postMessage(m));
    return w;
  };
  // The worker starts now, while the app's wasm compiles; the app takes it over with the
  // messages it sent meanwhile (as in boot.js).
  {
    const worker = makeWorker();
    const early = [];
    const keep = (e) => early.push(e.data);
    worker.addEventListener('message', keep);
    window.memlensEarlyWorker = {
      worker,
      take() {
        worker.removeEventListener('message', keep);
        return early.splice(0);
      },
    };
  }

  const preload = JSON.parse(block('memlens-preload').textContent || 'null') || {};
  if (typeof preload.view === 'string' && !location.hash) {
    history.replaceState(null, '', `#view=${encodeURIComponent(preload.view)}`);
  }
  window.memlensHost = {
    makeWorker,
    fetch(url) {
      return url === 'example.pickle' ? unpack('memlens-example') : null;
    },
    preload() {
      return (preload.files || []).map((f) => (typeof f.url === 'string'
        ? { name: f.name, url: f.url }
        : { name: f.name, blob: unpack(f.block) }));
    },
  };
  await __MEMLENS_INIT__({ module_or_path: appWasm });
} catch (err) {
  console.error('memlens:', err);
  const p = document.createElement('p');
  p.setAttribute('role', 'alert');
  p.textContent = `memlens could not start in this browser: ${err}`;
  document.body.append(p);
}
