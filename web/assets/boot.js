// Starts the memlens app. Trunk would start it from an inline <script>, which the page's
// Content-Security-Policy (`script-src 'self'`) forbids; this file is the page's own, and reads
// the content-hashed names of the app's JS and wasm from its own <script> tag (see Trunk.toml).
//
// Before the app's wasm is compiled, it starts what a page opened with its file (`?src=`)
// otherwise waits for one after the other (docs/BENCHMARKS.md, "Cold open"):
// - the worker's wasm, fetched (index.html preloads it) and compiled here once, while the app's
//   compiles; each worker (web/assets/worker_boot.js) is handed the compiled module;
// - the first worker, which the app takes over with the messages it sent meanwhile
//   (`memlensEarlyWorker`, web/src/page/bridge.rs);
// - the fetch of `?src=` (a file of this site only), which the app takes as the host's copy
//   (`memlensHost.fetch`; `null` when it failed, and the app fetches it again to say why).
{
  const workerWasm = './memlens-worker_bg.wasm';
  const workerModule = WebAssembly.compileStreaming(fetch(workerWasm)).catch(() => workerWasm);
  const makeWorker = () => {
    const worker = new Worker('./worker_boot.js', { name: 'memlens-worker' });
    workerModule.then((m) => worker.postMessage(m));
    return worker;
  };
  const src = new URLSearchParams(location.search).get('src');
  const srcUrl = URL.parse?.(src ?? '', document.baseURI) ?? null;
  let early = null;
  if (src && srcUrl?.origin === location.origin) {
    const blob = fetch(srcUrl)
      .then((r) => (r.ok ? r.blob() : null))
      .catch(() => null);
    early = { src, blob };
  }
  window.memlensHost = {
    makeWorker,
    fetch(url) {
      if (!early || url !== early.src) return null;
      const { blob } = early;
      early = null;
      return blob;
    },
  };

  const worker = makeWorker();
  const said = [];
  const keep = (e) => said.push(e.data);
  worker.addEventListener('message', keep);
  window.memlensEarlyWorker = {
    worker,
    take() {
      worker.removeEventListener('message', keep);
      return said.splice(0);
    },
  };
}
const tag = document.querySelector('script[data-memlens-js]');
const { default: init } = await import(tag.dataset.memlensJs);
await init({ module_or_path: tag.dataset.memlensWasm });
