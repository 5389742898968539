//! Stage 0, the trace vocabulary: the lowest layer of core, imported by every stage above it and
//! importing none of them. String ids and the string table, frames and stacks, [`Action`], runs
//! of equal values, and the trace columns the decoder fills and the model owns.
//!
//! An *event index* is an index into one device's trace entries, 0-based, in file order
//! ([`crate::replay::EventIdx`]); a *row* is an index into all devices' entries
//! ([`TraceColumns`]) before the model groups them by device.

pub mod action;
pub mod columns;
pub mod runs;
pub mod stacks;
pub mod strings;

pub use action::Action;
pub(crate) use columns::TIME_NONE;
pub use columns::{EntryExtra, TraceColumns};
pub use runs::{Cursor, Runs, StrRuns};
pub use stacks::{Frame, FrameId, StackId, StackTable};
pub use strings::{StrId, StringTable};
