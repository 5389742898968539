//! The page (main thread): the reducer ([`app_state`]), the app and its views (timeline, Allocator
//! State History, panels, search), the canvas painter, and the bridge that starts the worker and
//! turns each of its replies into one reducer action ([`reply`]).

pub mod app;
pub mod app_state;
pub mod bridge;
pub mod canvas;
pub mod compare_state;
pub mod compare_timelines;
pub mod compare_view;
pub mod diagnosis;
pub mod event_csv;
pub mod event_list;
pub mod exports;
pub mod grew;
pub mod history_canvas;
pub mod history_view;
pub mod icicle;
pub mod overview;
pub mod panels;
pub mod pointer;
pub mod reply;
pub mod search;
pub mod stack_frames;
pub mod theme;
pub mod timeline;
pub mod timeline_options;
pub mod too_large;
pub mod url;
pub mod view_options;
pub mod worker_pool;
