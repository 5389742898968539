//! The memory ledger: every live allocation gets one class — parameters, gradients, optimizer
//! state, activations, temporary, before the trace, or other — and the rule that decided it.
//! Rules, first match wins:
//! 1. no `alloc` entry in the trace → `before_trace`;
//! 2. the alloc entry's `user_metadata` (memory component tracking) names the class
//!    (`optim` → optimizer state, `grad` → gradients, `param`/`weight` → parameters,
//!    `activation` → activations, `temp` → temporary);
//! 3. freed within [`TEMPORARY_EVENTS`] events of its allocation → `temporary`;
//! 4. allocated inside an optimizer `step` → `optimizer_state`;
//! 5. allocated inside autograd's backward (and kept, rule 3 did not apply) → `gradients`;
//! 6. allocated inside a module's forward → `activations` (the rule says whether backward freed
//!    it, as saved tensors are, or not);
//! 7. allocated in a constructor, `.to()`/`.cuda()` (`Module._apply`) or `load_state_dict` →
//!    `parameters`;
//! 8. anything else → `other` (never guessed).
//!
//! Snapshots carry no `category` field today (none of the real ones does), so no rule reads it.

use super::frames::StackFacts;
use crate::model::Snapshot;
use crate::replay::Allocation;
use crate::trace::StrId;
use serde::{Deserialize, Serialize};

/// An allocation freed at most this many events after its `alloc` is a temporary.
pub const TEMPORARY_EVENTS: u32 = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    Parameters,
    Gradients,
    OptimizerState,
    Activations,
    Temporary,
    BeforeTrace,
    Other,
}

impl Class {
    pub const ALL: [Class; 7] = [
        Class::Parameters,
        Class::Gradients,
        Class::OptimizerState,
        Class::Activations,
        Class::Temporary,
        Class::BeforeTrace,
        Class::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::Parameters => "parameters",
            Class::Gradients => "gradients",
            Class::OptimizerState => "optimizer_state",
            Class::Activations => "activations",
            Class::Temporary => "temporary",
            Class::BeforeTrace => "before_trace",
            Class::Other => "other",
        }
    }
}

/// The rule that classified an allocation (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    BeforeTrace,
    Metadata(Class),
    ShortLived,
    OptimizerStep,
    BackwardKept,
    ForwardFreedInBackward,
    ForwardNotFreedInBackward,
    Setup,
    NoRule,
}

impl Rule {
    pub fn class(self) -> Class {
        match self {
            Rule::BeforeTrace => Class::BeforeTrace,
            Rule::Metadata(c) => c,
            Rule::ShortLived => Class::Temporary,
            Rule::OptimizerStep => Class::OptimizerState,
            Rule::BackwardKept => Class::Gradients,
            Rule::ForwardFreedInBackward | Rule::ForwardNotFreedInBackward => Class::Activations,
            Rule::Setup => Class::Parameters,
            Rule::NoRule => Class::Other,
        }
    }

    pub fn text(self) -> &'static str {
        match self {
            Rule::BeforeTrace => "no alloc entry in the trace (allocated before it started)",
            Rule::Metadata(_) => "user_metadata of the alloc entry",
            Rule::ShortLived => "freed within 32 events of its allocation",
            Rule::OptimizerStep => "allocated in an optimizer step",
            Rule::BackwardKept => "allocated in autograd's backward and kept",
            Rule::ForwardFreedInBackward => "allocated in a module's forward, freed in backward",
            Rule::ForwardNotFreedInBackward => {
                "allocated in a module's forward, not freed in backward"
            }
            Rule::Setup => "allocated in a constructor, .to()/.cuda() (_apply) or load_state_dict",
            Rule::NoRule => "no rule applies",
        }
    }
}

fn metadata_class(text: &str) -> Option<Class> {
    let t = text.to_ascii_lowercase();
    [
        ("optim", Class::OptimizerState),
        ("grad", Class::Gradients),
        ("param", Class::Parameters),
        ("weight", Class::Parameters),
        ("activation", Class::Activations),
        ("temp", Class::Temporary),
    ]
    .into_iter()
    .find(|(k, _)| t.contains(k))
    .map(|(_, c)| c)
}

/// Classifies allocations of one device (rows start at `rows_start` in the trace columns).
pub struct Classifier<'a> {
    pub s: &'a Snapshot,
    pub rows_start: u32,
    pub facts: StackFacts,
}

impl<'a> Classifier<'a> {
    pub fn new(s: &'a Snapshot, device: u32) -> Classifier<'a> {
        Classifier {
            s,
            rows_start: s.device_rows(device).start,
            facts: StackFacts::default(),
        }
    }

    fn row(&self, event: u32) -> usize {
        (self.rows_start + event) as usize
    }

    /// The rule (hence the class) of one allocation.
    pub fn classify(&mut self, a: &Allocation) -> Rule {
        let Some(alloc) = a.alloc_event else {
            return Rule::BeforeTrace;
        };
        let t = &self.s.trace;
        let meta = t.user_metadata.get(self.row(alloc)).copied();
        if let Some(c) = meta
            .filter(|&m| m != StrId::EMPTY)
            .and_then(|m| metadata_class(self.s.str(m)))
        {
            return Rule::Metadata(c);
        }
        if a.free_event.is_some_and(|f| f - alloc <= TEMPORARY_EVENTS) {
            return Rule::ShortLived;
        }
        let p = self.facts.phase(self.s, a.stack);
        if p.optimizer {
            return Rule::OptimizerStep;
        }
        if p.backward {
            return Rule::BackwardKept;
        }
        if p.forward {
            let freed_in_backward = a.free_event.is_some_and(|f| {
                let stack = t.stack.get(self.row(f)).copied().unwrap_or_default();
                self.facts.phase(self.s, stack).backward
            });
            return if freed_in_backward {
                Rule::ForwardFreedInBackward
            } else {
                Rule::ForwardNotFreedInBackward
            };
        }
        if p.setup {
            return Rule::Setup;
        }
        Rule::NoRule
    }
}

/// Bytes decided by one rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleBytes {
    pub rule: String,
    pub bytes: u64,
    pub allocations: u64,
}

/// One class of the ledger at a moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassRow {
    pub class: Class,
    pub bytes: u64,
    pub allocations: u64,
    /// Share of the live total at the moment (0 to 1).
    pub share: f64,
    /// The rules that decided these bytes, largest first, joined by "; ".
    pub rule: String,
    pub rules: Vec<RuleBytes>,
    /// Its largest user frames (at most [`CLASS_FRAMES`]), largest first.
    pub frames: Vec<FrameBytes>,
}

/// Frames listed per class.
pub const CLASS_FRAMES: usize = 5;

/// Bytes of one user frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameBytes {
    pub frame: String,
    pub bytes: u64,
}

/// Sums `(rule, bytes, user-frame group)` triples into one row per class, classes in
/// [`Class::ALL`] order, empty classes left out; `names` are the groups' frames.
pub fn class_rows(
    items: impl Iterator<Item = (Rule, u64, u32)>,
    names: &[String],
    total_bytes: u64,
) -> Vec<ClassRow> {
    let mut by_rule: Vec<(Rule, u64, u64)> = Vec::new();
    let mut frames: rustc_hash::FxHashMap<(Class, u32), u64> = Default::default();
    for (rule, bytes, group) in items {
        *frames.entry((rule.class(), group)).or_default() += bytes;
        match by_rule.iter_mut().find(|(r, _, _)| *r == rule) {
            Some(e) => {
                e.1 += bytes;
                e.2 += 1;
            }
            None => by_rule.push((rule, bytes, 1)),
        }
    }
    by_rule.sort_by(|a, b| b.1.cmp(&a.1).then(a.2.cmp(&b.2)));
    Class::ALL
        .iter()
        .filter_map(|&class| {
            let rules: Vec<RuleBytes> = by_rule
                .iter()
                .filter(|(r, _, _)| r.class() == class)
                .map(|&(r, bytes, allocations)| RuleBytes {
                    rule: r.text().to_string(),
                    bytes,
                    allocations,
                })
                .collect();
            if rules.is_empty() {
                return None;
            }
            let bytes: u64 = rules.iter().map(|r| r.bytes).sum();
            let mut top: Vec<FrameBytes> = frames
                .iter()
                .filter(|((c, _), _)| *c == class)
                .map(|(&(_, g), &bytes)| FrameBytes {
                    frame: names.get(g as usize).cloned().unwrap_or_default(),
                    bytes,
                })
                .collect();
            top.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.frame.cmp(&b.frame)));
            top.truncate(CLASS_FRAMES);
            Some(ClassRow {
                class,
                bytes,
                allocations: rules.iter().map(|r| r.allocations).sum(),
                share: super::share(bytes, total_bytes),
                rule: rules
                    .iter()
                    .map(|r| r.rule.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
                rules,
                frames: top,
            })
        })
        .collect()
}
