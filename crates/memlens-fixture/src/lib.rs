//! memlens-fixture: test support, never a dependency of the production crates (memlens-core,
//! the `memlens` binary, the web app), only a dev-dependency of their tests.
//!
//! The fixture builder: a small line-oriented text form that reads like the data and writes real
//! snapshot bytes (through `memlens_core::write::PickleWriter`, so pickles look like CPython's),
//! so tests need no binary files and every input form torch produces can be made on demand.
//! [`build`] gives bytes, which tests decode with the loader they test (also core's own unit
//! tests: bytes, unlike core types, are the same whichever copy of core made them).
//!
//! ```text
//! # comments run to the end of a line
//! protocol 4                   # 2 | 3 | 4 | 5 (default 4)
//! form snapshot                # snapshot | segments | json | trace_plot | segment_plot
//! stack fwd train.py:10:forward|model.py:5:fwd      # a named stack, innermost frame first
//! segment 0x7f0000000000 20MiB stream=0 pool=0,0 frames=@fwd
//!   block 4MiB allocated requested=4000000 frames=@fwd
//!   block rest inactive        # `rest`: what is left of the segment
//! alloc a 0x7f0000000000 4MiB frames=@fwd
//! free a                       # free_requested + free_completed
//! ```
//!
//! Directives: `protocol N`, `form F`, `legacy` (torch 2.0 shapes: blocks without `address`/
//! `frames` but with `history: [{addr, real_size, frames}]`, segments without `segment_pool_id`/
//! `is_expandable`/`frames`, trace entries without `time_us`), `no_time_us`, `devices N`
//! (length of `device_traces`), `device N` (device of the lines that follow), `clock START
//! [STEP]` (the automatic `time_us`), `stack NAME FRAMES`, `setting KEY VALUE`
//! (`allocator_settings`), `region START|END NAME` (`external_annotations`).
//!
//! Data: `segment ADDR SIZE` with `device= stream= pool=A,B type=large|small expandable
//! frames=`, then indented or not, `block SIZE|rest STATE` with `requested= frames= addr=`
//! (STATE: `allocated`, `pending_free`, `inactive` or a full torch name). Trace lines: `alloc
//! [NAME] ADDR SIZE`, `free NAME|ADDR SIZE`, `free_requested …`, `free_completed …`,
//! `segment_alloc|segment_free|segment_map|segment_unmap ADDR SIZE`, `oom SIZE device_free=N`,
//! `snapshot`, `annotate NAME|ADDR TEXT`, `event ACTION [ADDR [SIZE]]` (any action name); all take
//! `stream= time= frames= ctx= meta= device=`. Frames are `file:line:function` joined by `|`
//! (quote the value when a name has spaces) or `@NAME`; identical frame lists and frames are
//! written once and shared by memo, as torch's `py_symbolize` does.
//!
//! Beside it, [`shared_snapshots`]: the real snapshots in `../shared/snapshots` that tests run
//! over, skipped with a notice when absent unless `MEMLENS_NO_SKIP=1`.
//!
//! Modules: `tokenize` (the words of a line), `parse` (lines into a [`Fixture`]), `document`
//! (the parsed fixture and its [`Options`]), `write` (the document in each [`Form`]), `sink`
//! (pickle and JSON output), `snapshots` (the shared real snapshots).

mod document;
mod error;
mod files;
mod parse;
mod sink;
mod snapshots;
mod tokenize;
mod tools;
mod write;

pub use document::{Fixture, Form, Options, DEFAULT_CLOCK_STEP_US, DEFAULT_CLOCK_US};
pub use error::FixtureError;
pub use files::{fixture_pickles, fixture_texts, fixtures_dir, shared_snapshot_bytes};
pub use snapshots::{shared_snapshots, shared_snapshots_dir, NO_SKIP_VAR, SNAPSHOTS_DIR_VAR};
pub use tools::python;
pub use write::html_page;

/// Parses `text` and writes it: the one call most tests need.
pub fn build(text: &str) -> Result<Vec<u8>, FixtureError> {
    parse(text)?.to_bytes()
}

/// Parses a fixture text (see the crate doc).
pub fn parse(text: &str) -> Result<Fixture, FixtureError> {
    parse::Parser::default().run(text)
}

#[cfg(test)]
mod tests;
