//! The Compare view's answers, one side at a time (the page combines two, so the sides' files
//! may sit in different workers): a (file, device) side at its timeline peak, and after an
//! event (the cursor), grouped by core's `analysis::compare`. The allocation tables of the
//! sides asked about are kept ([`Replays`]), so moving the cursor costs a walk of the live set,
//! not a replay. Every request is answered (`None` when the file is gone), so the view never
//! waits forever.

use crate::wire::pack;
use crate::wire::protocol::{CompareSide, FromWorker};
use memlens_core::analysis::compare::{moment_groups, peak_groups};
use memlens_core::replay::{replay_device, Replay};
use memlens_core::Snapshot;
use std::collections::HashMap;

/// Allocation tables of the sides asked about, by side.
#[derive(Default)]
pub struct Replays(HashMap<CompareSide, Replay>);

impl Replays {
    /// Forgets a closed file's tables.
    pub fn forget(&mut self, file: u32) {
        self.0.retain(|k, _| k.file != file);
    }
}

/// Posts `side` at its timeline peak.
pub fn send_peak(side: CompareSide, snap: Option<&Snapshot>) {
    let groups = snap.map(|s| Box::new(peak_groups(s, side.device)));
    pack::reply(&FromWorker::PeakGroups { side, groups }).post();
}

/// Posts what is alive after `event` on `side`, by user frame.
pub fn send_moment(
    replays: &mut Replays,
    side: CompareSide,
    snap: Option<&Snapshot>,
    event: Option<u32>,
) {
    let groups = snap.map(|s| {
        let r = replays
            .0
            .entry(side)
            .or_insert_with(|| replay_device(s, side.device));
        Box::new(moment_groups(s, r, event))
    });
    pack::reply(&FromWorker::MomentGroups {
        side,
        event,
        groups,
    })
    .post();
}
