// Starts the memlens app. Trunk would start it from an inline <script>, which the page's
// Content-Security-Policy (`script-src 'self'`) forbids; this file is the page's own, and reads
// the content-hashed names of the app's JS and wasm from its own <script> tag (see Trunk.toml).
const tag = document.querySelector('script[data-memlens-js]');
const { default: init } = await import(tag.dataset.memlensJs);
await init({ module_or_path: tag.dataset.memlensWasm });
