//! The worker's side of the colour modes: the ledger class and `user_metadata` need the
//! snapshot, which lives here, so every colouring (`memlens_core::colour`) is computed here and
//! the page gets a palette index per element and the legend.

use crate::wire::clock::now_ms;
use crate::wire::pack;
use crate::wire::protocol::FromWorker;
use memlens_core::colour::{colour, ColourBy, Colouring};
use memlens_core::layout::{TimelineKind, TimelineLayout};
use memlens_core::Snapshot;

/// Answers a `Colours` request (`file`: the snapshot and the layout coloured; `None` when the
/// file is gone, answered with no colouring so the page keeps upstream's).
pub fn send_colouring(
    file: Option<(&Snapshot, &TimelineLayout)>,
    id: u32,
    device: u32,
    kind: TimelineKind,
    by: ColourBy,
) {
    let t0 = now_ms();
    let c: Option<Colouring> = file.map(|(snap, l)| colour(snap, device, l, by));
    let msg = FromWorker::Colours {
        id,
        device,
        kind,
        by,
        build_ms: now_ms() - t0,
    };
    match c {
        Some(c) => pack::reply_with(&msg, &c),
        None => pack::reply(&msg),
    }
    .post();
}
