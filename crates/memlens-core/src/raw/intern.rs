//! The tables behind frame and stack interning (`raw::frames` walks the decoded values): frames
//! and stacks by content, stacks by the frame-dict nodes of their list, and the frames and
//! stacks standing for an earlier piece's values in a parallel decode. Knows no arena value.

use crate::trace::StrId;
use crate::trace::{Frame, FrameId, StackId, StackTable};
use rustc_hash::FxHashMap;

/// The interned frames and stacks of one document.
#[derive(Debug, Clone)]
pub struct StackInterner {
    pub frames: Vec<Frame>,
    frame_index: FxHashMap<Frame, FrameId>,
    pub stacks: StackTable,
    stack_index: FxHashMap<Box<[FrameId]>, StackId>,
    /// Stacks by the frame-dict nodes their list holds: a fresh list of memo-shared frame dicts
    /// (most fresh lists) is found without looking at a single frame.
    pub(super) stack_by_nodes: FxHashMap<Box<[u32]>, StackId>,
    pub(super) scratch: Vec<FrameId>,
    pub(super) scratch_nodes: Vec<u32>,
    /// How many frames there were when each stack was made (by stack id): the order the join
    /// of a parallel decode replays (see `raw::pickle::join`).
    pub(crate) frames_at_stack: Vec<u32>,
    /// Frames and stacks standing for a value of an earlier piece ([`Node::Ext`]), by memo
    /// key, in the order they were made (parallel decoding only).
    pub(crate) ext_frames: Vec<(FrameId, u64)>,
    pub(crate) ext_stacks: Vec<(StackId, u64)>,
    ext_frame_of: FxHashMap<u64, FrameId>,
    ext_stack_of: FxHashMap<u64, StackId>,
}

impl Default for StackInterner {
    fn default() -> Self {
        let mut stack_index = FxHashMap::default();
        stack_index.insert(Box::<[FrameId]>::from([]), StackId::EMPTY);
        StackInterner {
            frames: Vec::new(),
            frame_index: FxHashMap::default(),
            stacks: StackTable::default(),
            stack_index,
            stack_by_nodes: FxHashMap::default(),
            scratch: Vec::new(),
            scratch_nodes: Vec::new(),
            frames_at_stack: vec![0],
            ext_frames: Vec::new(),
            ext_stacks: Vec::new(),
            ext_frame_of: FxHashMap::default(),
            ext_stack_of: FxHashMap::default(),
        }
    }
}

/// Field ids of a frame dict (interned with the other known keys).
#[derive(Debug, Clone, Copy)]
pub struct FrameKeys {
    pub filename: StrId,
    pub line: StrId,
    pub name: StrId,
}

impl StackInterner {
    /// The id of a frame, by content.
    pub(crate) fn frame_id(&mut self, fr: Frame) -> FrameId {
        match self.frame_index.get(&fr) {
            Some(&id) => id,
            None => {
                let id = FrameId(self.frames.len() as u32);
                self.frames.push(fr);
                self.frame_index.insert(fr, id);
                id
            }
        }
    }

    /// The id of a stack, by its frames.
    pub(crate) fn stack_id(&mut self, frames: &[FrameId]) -> StackId {
        match self.stack_index.get(frames) {
            Some(&id) => id,
            None => {
                let id = self.stacks.push(frames);
                self.stack_index.insert(frames.into(), id);
                self.frames_at_stack.push(self.frames.len() as u32);
                id
            }
        }
    }

    /// The frame standing for the frame dict memoized under `key` in an earlier piece.
    pub(super) fn ext_frame(&mut self, key: u64) -> FrameId {
        if let Some(&f) = self.ext_frame_of.get(&key) {
            return f;
        }
        let id = FrameId(self.frames.len() as u32);
        self.frames.push(Frame {
            filename: StrId::EMPTY,
            line: 0,
            name: StrId::EMPTY,
        });
        self.ext_frames.push((id, key));
        self.ext_frame_of.insert(key, id);
        id
    }

    /// The stack standing for the `frames` list memoized under `key` in an earlier piece.
    pub(super) fn ext_stack(&mut self, key: u64) -> StackId {
        if let Some(&s) = self.ext_stack_of.get(&key) {
            return s;
        }
        let id = self.stacks.push(&[]);
        self.frames_at_stack.push(self.frames.len() as u32);
        self.ext_stacks.push((id, key));
        self.ext_stack_of.insert(key, id);
        id
    }
}
