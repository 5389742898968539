// The decoding worker's script (web/assets/boot.js starts it): wasm-bindgen's no-modules glue
// (its `wasm_bindgen` global), then the first message, which is the worker's wasm compiled by
// the page (a WebAssembly.Module, so that each worker instantiates it without fetching or
// compiling) or, where the page could not compile it, its URL; main() then answers `Ready`.
importScripts('./memlens-worker.js');
self.onmessage = (e) => {
  self.onmessage = null;
  wasm_bindgen({ module_or_path: e.data }).catch((err) => console.error('memlens worker:', err));
};
