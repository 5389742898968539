//! memlens-web: the viewer. Two wasm entry points share this crate: `memlens-app` (the Yew page,
//! main thread) and `memlens-worker` (decoding and layout, in a Web Worker). Components only see
//! core's result types as the worker ships them (stats, layouts, states), never pickle or raw
//! values.

pub mod app;
pub mod bridge;
pub mod canvas;
pub mod clock;
pub mod event_list;
pub mod panels;
pub mod protocol;
pub mod reply;
pub mod search;
pub mod search_worker;
pub mod state;
pub mod state_canvas;
pub mod state_data;
pub mod state_view;
pub mod state_worker;
pub mod timeline;
pub mod warm_up;
pub mod wire;
pub mod worker;
