//! Worker → page, on the page: every message is decoded here once, header and payload, into a
//! typed [`Reply`], which then becomes a reducer action. Views send requests (through
//! `crate::page::bridge`) and never look at a message.

use crate::page::app_state::{Action, LayoutKey, SearchAnswer, SharedDiagnosis, SharedIcicle};
use crate::page::compare_state::CompareAction;
use crate::wire::clock::now_ms;
use crate::wire::history::{EventColumns, Shared, StateFrame};
use crate::wire::pack;
use crate::wire::protocol::{FileInfo, FromWorker, SearchHits, TooLarge, WantedState};
use memlens_core::colour::Colouring;
use memlens_core::layout::context::ElementContext;
use memlens_core::layout::TimelineLayout;
use memlens_core::state::events::EventList;
use std::rc::Rc;
use wasm_bindgen::JsValue;

/// A worker message, decoded.
pub enum Reply {
    Ready,
    /// The layout to warm the page's drawing code with.
    WarmUpLayout(TimelineLayout),
    Progress {
        id: u32,
        done: f64,
        total: f64,
    },
    Loaded {
        id: u32,
        info: FileInfo,
    },
    Failed {
        id: u32,
        message: String,
    },
    TooLarge {
        id: u32,
        offer: TooLarge,
    },
    Layout {
        key: LayoutKey,
        layout: TimelineLayout,
    },
    Context {
        key: LayoutKey,
        elem: u32,
        full: bool,
        ctx: Option<ElementContext>,
    },
    StateEvents(EventColumns),
    /// Always a reply to a state request (an empty frame when its columns were unreadable).
    State(StateFrame),
    /// A header-only reply (the analysis results) that is already its reducer action.
    Act(Action),
    Search(SearchAnswer),
}

/// A layout payload, with the page's side of its cost in the console.
fn unpack_layout(data: &JsValue) -> Result<TimelineLayout, String> {
    let t0 = now_ms();
    let u = pack::unpack::<TimelineLayout>(data)?;
    web_sys::console::log_1(
        &format!(
            "memlens: layout columns copied into the page in {:.0} ms, indices (level of detail, maxima) built in {:.0} ms",
            u.copy_ms,
            now_ms() - t0 - u.copy_ms
        )
        .into(),
    );
    Ok(u.value)
}

/// A layout reply: the layout, timed and logged, or the failure of its file.
fn layout_reply(data: &JsValue, key: LayoutKey, build_ms: f64) -> Reply {
    let t0 = now_ms();
    match unpack_layout(data) {
        Ok(layout) => {
            web_sys::console::log_1(
                &format!(
                    "memlens: layout of device {} ({:?}): {} elements, {} pieces; built in {build_ms:.0} ms (worker), unpacked in {:.0} ms",
                    key.device,
                    key.kind,
                    layout.len(),
                    layout.piece_count(),
                    now_ms() - t0
                )
                .into(),
            );
            Reply::Layout { key, layout }
        }
        Err(e) => Reply::Failed {
            id: key.file,
            message: format!("bad layout from the worker: {e}"),
        },
    }
}

/// The history's event list of file `id`'s `device`, logged.
fn event_columns(data: &JsValue, id: u32, device: u32) -> Result<EventColumns, String> {
    let ev = pack::unpack::<EventList>(data).map_err(|e| format!("memlens: {e}"))?;
    let mut list = ev.value;
    list.device = device;
    let ev = EventColumns { file: id, list };
    web_sys::console::log_1(
        &format!(
            "memlens: state history list of device {device}: {} entries (history built in {:.1} ms)",
            ev.len(),
            ev.meta.build_ms
        )
        .into(),
    );
    Ok(ev)
}

/// A state of the history (an empty one, logged, when it does not unpack).
fn state_frame(data: &JsValue, id: u32, device: u32, requested: WantedState) -> StateFrame {
    let frame = pack::unpack::<StateFrame>(data).map_or_else(
        |e| {
            web_sys::console::error_1(&format!("memlens: {e}").into());
            StateFrame::default()
        },
        |u| u.value,
    );
    StateFrame {
        file: id,
        device,
        requested,
        received_ms: now_ms(),
        ..frame
    }
}

/// The matches bitset of a search reply.
fn search_bits(data: &JsValue) -> Option<Vec<u64>> {
    pack::unpack::<SearchHits>(data).ok().map(|h| h.value.bits)
}

impl Reply {
    /// Decodes a message; `Err` for one that is not a reply to act on (logged by the caller).
    pub fn decode(data: &JsValue) -> Result<Reply, String> {
        Ok(match pack::header::<FromWorker>(data)? {
            FromWorker::Ready => Reply::Ready,
            FromWorker::WarmUpLayout => Reply::WarmUpLayout(unpack_layout(data)?),
            FromWorker::Progress { id, done, total } => Reply::Progress { id, done, total },
            FromWorker::Loaded { id, info } => Reply::Loaded { id, info },
            FromWorker::Partial { id, info } => {
                let layout = match info.device {
                    Some(_) => Some(Rc::new(unpack_layout(data)?)),
                    None => None,
                };
                Reply::Act(Action::Partial { id, info, layout })
            }
            FromWorker::Failed { id, message } => Reply::Failed { id, message },
            FromWorker::TooLarge { id, offer } => Reply::TooLarge { id, offer },
            FromWorker::Layout {
                id,
                device,
                kind,
                build_ms,
            } => layout_reply(
                data,
                LayoutKey {
                    file: id,
                    device,
                    kind,
                },
                build_ms,
            ),
            FromWorker::Context {
                id,
                device,
                kind,
                elem,
                full,
                ctx,
            } => Reply::Context {
                key: LayoutKey {
                    file: id,
                    device,
                    kind,
                },
                elem,
                full,
                ctx,
            },
            FromWorker::StateEvents { id, device } => {
                Reply::StateEvents(event_columns(data, id, device)?)
            }
            FromWorker::State {
                id,
                device,
                requested,
            } => Reply::State(state_frame(data, id, device, requested)),
            FromWorker::Diagnosis {
                id,
                device,
                build_ms,
                diagnosis,
            } => Reply::Act(Action::Diagnosis {
                file: id,
                device,
                diagnosis: SharedDiagnosis {
                    diagnosis: Rc::new(*diagnosis),
                    build_ms,
                    received_ms: now_ms(),
                },
            }),
            FromWorker::PeakGroups { side, groups } => Reply::Act(Action::Compare(
                CompareAction::Peak(side, groups.map(|g| Rc::new(*g))),
            )),
            FromWorker::MomentGroups {
                side,
                event,
                groups,
            } => Reply::Act(Action::Compare(CompareAction::Moment(
                side,
                event,
                groups.map(|g| Rc::new(*g)),
            ))),
            FromWorker::Between { id, between } => {
                Reply::Act(Action::Between(id, Rc::new(*between)))
            }
            FromWorker::Icicle {
                id,
                device,
                callers_of,
                mark,
                mark_path,
                icicle,
            } => Reply::Act(Action::Icicle(SharedIcicle {
                file: id,
                device,
                callers_of,
                mark,
                mark_path: mark_path.map(Rc::new),
                icicle: Rc::new(*icicle),
            })),
            FromWorker::Colours {
                id,
                device,
                kind,
                by,
                build_ms: _,
            } => Reply::Act(Action::Colouring {
                key: LayoutKey {
                    file: id,
                    device,
                    kind,
                },
                by,
                colouring: pack::unpack::<Colouring>(data)
                    .ok()
                    .map(|u| Rc::new(u.value)),
            }),
            FromWorker::Search {
                id,
                device,
                kind,
                seq,
                count,
                error,
                search_ms,
            } => {
                let bits = error.is_none().then(|| search_bits(data)).flatten();
                Reply::Search(SearchAnswer {
                    key: LayoutKey {
                        file: id,
                        device,
                        kind,
                    },
                    seq,
                    count,
                    error,
                    bits,
                    search_ms,
                })
            }
        })
    }

    /// The reducer action this reply is (`None`: the bridge acts on it itself).
    pub fn into_action(self) -> Option<Action> {
        Some(match self {
            Reply::Ready | Reply::WarmUpLayout(_) => return None,
            Reply::Progress { id, done, total } => Action::Progress { id, done, total },
            Reply::Loaded { id, info } => Action::Loaded { id, info },
            Reply::Failed { id, message } => Action::Failed { id, message },
            Reply::TooLarge { id, offer } => Action::TooLarge { id, offer },
            Reply::Layout { key, layout } => Action::Layout {
                key,
                layout: Rc::new(layout),
            },
            Reply::Context {
                key,
                elem,
                full,
                ctx,
            } => Action::Context {
                key,
                elem,
                full,
                ctx,
            },
            Reply::StateEvents(ev) => Action::StateEvents(Shared(Rc::new(ev))),
            Reply::Act(a) => a,
            Reply::State(f) => Action::StateFrame(Shared(Rc::new(f))),
            Reply::Search(a) => Action::SearchResult(a),
        })
    }
}
