//! memlens-web: the viewer. Two wasm entry points share this crate: `memlens-app` (the Yew page,
//! main thread) and `memlens-worker` (decoding and layout, in a Web Worker). Components only see
//! core's result types as the worker ships them (stats, layouts, states), never pickle or raw
//! values.
//!
//! Three rooms (`scripts/check_imports.py` holds the rules): `worker` (what runs in the Web
//! Worker: the loader, the model, layouts, the state history, the search index), `wire` (what
//! crosses: requests, reply headers, the generic packing, the history's shipped columns, the
//! clock) and `page` (the Yew app: reducer, views, canvas painter, the bridge to the worker).
//! The page imports no worker module, the worker no page module, and wire neither.

pub mod page;
pub mod wire;
pub mod worker;
