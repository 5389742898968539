//! Frames and stacks: a [`Frame`] is torch's `{filename, line, name}`, a [`StackId`] names one
//! distinct list of frames (innermost first) in the [`StackTable`].

use super::strings::StrId;

/// Index into [`crate::model::Snapshot::frames`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameId(pub u32);

/// Index into [`Snapshot::stacks`]. `StackId::EMPTY` is the empty stack (no frames recorded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct StackId(pub u32);

impl StackId {
    pub const EMPTY: StackId = StackId(0);
}

/// The index, as a number.
impl std::fmt::Display for StackId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// One stack frame, as torch writes it (`{filename, line, name}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Frame {
    pub filename: StrId,
    pub line: i64,
    pub name: StrId,
}

/// Interned stacks, innermost frame first (torch's order).
#[derive(Debug, Clone)]
pub struct StackTable {
    offsets: Vec<u32>,
    frames: Vec<FrameId>,
}

impl Default for StackTable {
    fn default() -> Self {
        StackTable {
            offsets: vec![0, 0],
            frames: Vec::new(),
        }
    }
}

impl StackTable {
    pub fn get(&self, id: StackId) -> &[FrameId] {
        let i = id.0 as usize;
        match (self.offsets.get(i), self.offsets.get(i + 1)) {
            (Some(&a), Some(&b)) => self.frames.get(a as usize..b as usize).unwrap_or(&[]),
            _ => &[],
        }
    }
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }
    pub fn is_empty(&self) -> bool {
        self.len() <= 1
    }
    /// Frame ids held over all stacks.
    pub fn frame_refs(&self) -> usize {
        self.frames.len()
    }
    pub(crate) fn push(&mut self, frames: &[FrameId]) -> StackId {
        let id = StackId((self.offsets.len() - 1) as u32);
        self.frames.extend_from_slice(frames);
        self.offsets.push(self.frames.len() as u32);
        id
    }
}
