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
    /// The states asked for, as stored by the pass, sorted by position; the last one is the
    /// state after the last entry (always kept).
    kept: Vec<Checkpoint>,
    /// The kept state read last, restored from `kept[shown]`: states are restored one at a time
    /// into the same `State` as they are read, not all at once.
    current: State,
    shown: Option<usize>,
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
        let mut current = State::empty(id);
        current.derived = true;
        SampledStates {
            device,
            events,
            kept,
            current,
            shown: None,
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
    pub fn state_at(&mut self, event: Option<usize>) -> &State {
        let pos = position(event, self.events);
        let k = self.kept.partition_point(|c| c.pos < pos);
        let nearest = match k
            .checked_sub(1)
            .and_then(|i| self.kept.get(i).map(|b| (i, b)))
        {
            Some((i, b)) => {
                let above = self.kept.get(k).map_or(usize::MAX, |c| c.pos);
                if pos - b.pos <= above.saturating_sub(pos) {
                    i
                } else {
                    k
                }
            }
            None => k,
        };
        let k = nearest.min(self.kept.len().saturating_sub(1));
        if self.shown != Some(k) {
            if let Some(c) = self.kept.get(k) {
                c.restore(&mut self.current);
                self.current.oom = self.current.event().and_then(|e| {
                    let i = self
                        .ooms
                        .binary_search_by_key(&(e as u32), |(x, _, _)| *x)
                        .ok()?;
                    self.ooms.get(i).map(|&(_, req, dev)| (req, dev))
                });
                self.shown = Some(k);
            }
        }
        &self.current
    }
}
