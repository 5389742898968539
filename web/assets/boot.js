// Starts the memlens app. Trunk would start it from an inline <script>, which the page's
// Content-Security-Policy (`script-src 'self'`) forbids; this file is the page's own, and reads
// the content-hashed names of the app's JS and wasm from its own <script> tag (see Trunk.toml).
//
// The decoding worker starts first, so that its wasm loads and compiles while the app's does
// (a page opened with its file, `?src=`, otherwise waits for one after the other); the app takes
// it over with the messages it sent meanwhile (`memlensEarlyWorker`, web/src/page/bridge.rs).
{
  const worker = new Worker('./memlens-worker_loader.js');
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
const tag = document.querySelector('script[data-memlens-js]');
const { default: init } = await import(tag.dataset.memlensJs);
await init({ module_or_path: tag.dataset.memlensWasm });
