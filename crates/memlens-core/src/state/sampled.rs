//! States at a few chosen events without the whole history: the same backward pass as
//! [`AllocatorHistory`](super::AllocatorHistory) (so the same decisions and the same states), but
//! it keeps only the states asked for, instead of periodic checkpoints that a seek replays ops
//! from. For readers that know up front which events they need (the diagnosis: its peak, the
//! end, ≤ 256 samples, every `oom`), this skips the checkpoints' copies and any later seek.

use super::build::{self, NoOps, Passed};
use super::{Checkpoint, Diagnostics, State};
use crate::model::Snapshot;
use crate::replay::Replay;

/// The states of one device after the events chosen when it was built.
#[derive(Debug, Clone)]
pub struct SampledStates {
    device: u32,
    events: usize,
    /// The states asked for before the last one, sorted by position.
    earlier: Vec<State>,
    /// The state after the last entry (always kept).
    last: State,
    ooms: Vec<(u32, u64, Option<u64>)>,
    diag: Diagnostics,
}

/// Position of the state after `event` (`None`: before the first entry; clamped to the end), as
/// [`AllocatorHistory::seek`](super::AllocatorHistory::seek) counts it.
fn position(event: Option<usize>, events: usize) -> usize {
    event.map_or(0, |e| e.saturating_add(1)).min(events)
}

impl SampledStates {
    /// Reconstructs the states of the replay's device after the events that `choose` returns.
    /// `choose` sees the final state (read from the file's segments), the number of trace
    /// entries and the event indices of the `oom` entries.
    pub fn new(
        s: &Snapshot,
        replay: &Replay,
        choose: impl FnOnce(&State, usize, &[usize]) -> Vec<Option<usize>>,
    ) -> SampledStates {
        let pass = build::prepare(s, replay, |_| NoOps);
        let (id, device, events) = (pass.id, pass.device, pass.events());
        let oom_events: Vec<usize> = pass.oom_events().collect();
        let mut wanted: Vec<usize> = choose(&pass.st, events, &oom_events)
            .into_iter()
            .map(|e| position(e, events))
            .collect();
        // The final state is always kept, so that every lookup has an answer.
        wanted.push(events);
        wanted.sort_unstable();
        wanted.dedup();
        let mut kept: Vec<Checkpoint> = Vec::with_capacity(wanted.len());
        kept.push(Checkpoint::of(&pass.st));
        // The pass visits falling positions: `next` counts the wanted ones not yet passed.
        let mut next = wanted.len();
        let passed: Passed<NoOps> = pass.run(|st| {
            while next > 0 && wanted[next - 1] > st.pos {
                next -= 1;
            }
            if next > 0 && wanted[next - 1] == st.pos {
                kept.push(Checkpoint::of(st));
            }
        });
        kept.reverse();
        passed.patch(&mut kept);
        let mut states: Vec<State> = kept
            .iter()
            .map(|c| {
                let mut st = State::empty(id);
                st.derived = true;
                c.restore(&mut st);
                st.oom = st
                    .event()
                    .and_then(|e| {
                        passed
                            .ooms
                            .binary_search_by_key(&(e as u32), |(x, _, _)| *x)
                            .ok()
                    })
                    .and_then(|k| passed.ooms.get(k))
                    .map(|&(_, req, dev)| (req, dev));
                st
            })
            .collect();
        let last = states.pop().unwrap_or_else(|| State::empty(id));
        SampledStates {
            device,
            events,
            earlier: states,
            last,
            ooms: passed.ooms,
            diag: passed.diag,
        }
    }

    pub fn device(&self) -> u32 {
        self.device
    }

    /// Number of trace entries of the device.
    pub fn events(&self) -> usize {
        self.events
    }

    /// Event indices of the `oom` entries.
    pub fn ooms(&self) -> impl Iterator<Item = usize> + '_ {
        self.ooms.iter().map(|(e, _, _)| *e as usize)
    }

    pub fn diagnostics(&self) -> &Diagnostics {
        &self.diag
    }

    /// The state after `event` (`None`: before the first entry; past the end: the last) if it
    /// was chosen, else the nearest one kept (the last state always is).
    pub fn state_at(&self, event: Option<usize>) -> &State {
        let pos = position(event, self.events);
        let k = self.earlier.partition_point(|st| st.pos < pos);
        let above = self.earlier.get(k).unwrap_or(&self.last);
        match k.checked_sub(1).and_then(|i| self.earlier.get(i)) {
            Some(b) if pos - b.pos <= above.pos.saturating_sub(pos) => b,
            _ => above,
        }
    }
}
