//! The value stack and its marks: pushes with the growth out of line, and pops and peeks that
//! never reach below the last MARK.

use super::opcodes::opcode_name;
use super::PickleMachine;
use crate::error::DecodeError;
use crate::raw::value::{NodeId, Val};

/// `stack.push(v)` with the growth out of line and cold (-1 % instructions on a real trace).
#[inline(always)]
pub(super) fn push_val(stack: &mut Vec<Val>, v: Val) {
    if stack.len() == stack.capacity() {
        grow_stack(stack);
    }
    stack.push(v);
}

/// `push_val(stack, Val::Node(id))`, out of line: inlined, the compiler assembles the value
/// in a temporary and copies it whole, a store-forwarding stall on every EMPTY_DICT (perf:
/// ~10 % of the opcode loop); here the tag and id are stored straight into the slot.
#[inline(never)]
pub(super) fn push_node(stack: &mut Vec<Val>, id: u32) {
    push_val(stack, Val::Node(NodeId(id)));
}

#[cold]
#[inline(never)]
fn grow_stack(stack: &mut Vec<Val>) {
    stack.reserve(stack.len().max(64));
}

impl PickleMachine {
    pub(super) fn pop(&mut self, at: u64, op: u8) -> Result<Val, DecodeError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.malformed(at, format!("{} on an empty stack", opcode_name(op))));
        }
        self.stack
            .pop()
            .ok_or_else(|| self.malformed(at, "stack underflow"))
    }

    pub(super) fn pop_mark(&mut self, at: u64, op: u8) -> Result<usize, DecodeError> {
        self.marks
            .pop()
            .ok_or_else(|| self.malformed(at, format!("{} without a MARK", opcode_name(op))))
    }

    pub(super) fn top(&self, at: u64, op: u8) -> Result<Val, DecodeError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(self.malformed(at, format!("{} on an empty stack", opcode_name(op))));
        }
        self.stack
            .last()
            .copied()
            .ok_or_else(|| self.malformed(at, "empty stack"))
    }
}
