//! What a stack says about an allocation: its *user frame* (the line of the user's program that
//! asked for the memory) and the phase of training it ran in (forward, backward, optimizer
//! step, parameter set-up). Both are read once per distinct stack and cached.
//!
//! User frame: over the stack innermost first (torch's order), the first frame whose filename
//! ends in `.py` and has no path component `torch`; else the innermost frame upstream's frame
//! filter shows (the stack panel's and the search's: `unwind::unwind` and interpreter frames
//! hidden, so a C++-only stack is named by its allocator or operator frame); else the
//! innermost frame; written
//! `filename:line:name` with the filename as recorded. An empty stack is [`NO_STACK`]; an
//! allocation with no `alloc` entry is [`BEFORE_TRACE`] (decided by the caller, not here).

pub use crate::flame::{is_user_file, user_frame};
use crate::model::Snapshot;
use crate::replay::Allocation;
use crate::trace::{FrameId, StackId};
use rustc_hash::FxHashMap;

/// Group of allocations that have no `alloc` entry in the trace.
pub const BEFORE_TRACE: &str = "(allocated before the trace)";
/// Group of allocations whose `alloc` entry recorded no frames.
pub const NO_STACK: &str = "(no stack)";

/// Where in a training step a stack ran (any frame of the stack decides).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Phase {
    /// Inside autograd's backward (engine frames, `backward`, `_engine_run_backward`).
    pub backward: bool,
    /// Inside an optimizer's `step` (a `step` frame in a file whose path names `optim`, or
    /// torch's Adam/SGD kernels' Python wrappers).
    pub optimizer: bool,
    /// Inside a module's `forward` (`forward`, or `nn/modules/module.py` `_call_impl`).
    pub forward: bool,
    /// Parameter set-up: a constructor (`__init__`), `Module._apply` (`.to()`, `.cuda()`),
    /// `load_state_dict`, `reset_parameters`.
    pub setup: bool,
}

/// `filename:line:name` of a frame.
pub fn frame_label(s: &Snapshot, f: FrameId) -> String {
    match s.frame(f) {
        Some(fr) => format!("{}:{}:{}", s.str(fr.filename), fr.line, s.str(fr.name)),
        None => NO_STACK.to_string(),
    }
}

fn frame_phase(file: &str, name: &str) -> Phase {
    let in_optim = file.contains("optim");
    Phase {
        backward: name == "backward"
            || name == "_engine_run_backward"
            || name.contains("autograd::Engine")
            || name.contains("autograd::engine")
            || name.starts_with("torch::autograd::") && name.contains("apply"),
        optimizer: (name == "step" && in_optim)
            || matches!(
                name,
                "_single_tensor_adam"
                    | "_multi_tensor_adam"
                    | "_fused_adam"
                    | "_single_tensor_adamw"
                    | "_multi_tensor_adamw"
                    | "_fused_adamw"
                    | "_single_tensor_sgd"
                    | "_multi_tensor_sgd"
            ),
        forward: name == "forward" || (name == "_call_impl" && file.ends_with("module.py")),
        setup: matches!(
            name,
            "__init__"
                | "_apply"
                | "load_state_dict"
                | "_load_from_state_dict"
                | "reset_parameters"
        ),
    }
}

/// Per-stack facts, computed once per distinct stack.
#[derive(Default)]
pub struct StackFacts {
    labels: FxHashMap<StackId, u32>,
    phases: FxHashMap<StackId, Phase>,
    /// Distinct user-frame labels; a stack's group is an index into this.
    pub names: Vec<String>,
    by_name: FxHashMap<String, u32>,
}

impl StackFacts {
    /// Index into [`StackFacts::names`] of a label, added if new.
    pub fn intern(&mut self, label: &str) -> u32 {
        if let Some(&i) = self.by_name.get(label) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(label.to_string());
        self.by_name.insert(label.to_string(), i);
        i
    }

    /// The user-frame group of a stack.
    pub fn group(&mut self, s: &Snapshot, stack: StackId) -> u32 {
        if let Some(&g) = self.labels.get(&stack) {
            return g;
        }
        let label =
            user_frame(s, stack).map_or_else(|| NO_STACK.to_string(), |f| frame_label(s, f));
        let g = self.intern(&label);
        self.labels.insert(stack, g);
        g
    }

    /// The user-frame group of an allocation: [`BEFORE_TRACE`] when the trace has no `alloc`
    /// for it, else its stack's group.
    pub fn allocation_group(&mut self, s: &Snapshot, a: &Allocation) -> u32 {
        match a.alloc_event {
            None => self.intern(BEFORE_TRACE),
            Some(_) => self.group(s, a.stack),
        }
    }

    /// The training phase a stack ran in.
    pub fn phase(&mut self, s: &Snapshot, stack: StackId) -> Phase {
        if let Some(&p) = self.phases.get(&stack) {
            return p;
        }
        let mut p = Phase::default();
        for &f in s.stacks.get(stack) {
            if let Some(fr) = s.frame(f) {
                let q = frame_phase(s.str(fr.filename), s.str(fr.name));
                p.backward |= q.backward;
                p.optimizer |= q.optimizer;
                p.forward |= q.forward;
                p.setup |= q.setup;
            }
        }
        self.phases.insert(stack, p);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::is_user_file;

    #[test]
    fn user_files_are_python_outside_torch() {
        assert!(is_user_file("/home/u/model.py"));
        assert!(is_user_file("train.py"));
        assert!(!is_user_file(
            "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py"
        ));
        assert!(!is_user_file("C:\\py\\torch\\functional.py"));
        assert!(is_user_file("/src/torchvision_utils/x.py"));
        assert!(!is_user_file("??"));
        assert!(!is_user_file("CUDACachingAllocator.cpp"));
    }
}
