//! How an allocator state travels (see [`crate::columns`]): segments and blocks as two tables
//! of columns, `segment_pool_id` in the header. [`super::StateNumbers`] travels as its serde
//! form wherever it is sent.

use super::{SegmentKind, StateColumns};
use crate::columns::value::{decode_each, encode_each};
use crate::columns::{ColumnError, Value};
use crate::model::BlockState;
use crate::trace::StackId;
use std::borrow::Cow;

/// Codes in declaration order.
const SEGMENT_KINDS: [SegmentKind; 3] =
    [SegmentKind::Small, SegmentKind::Large, SegmentKind::Unknown];

impl Value for SegmentKind {
    type Prim = u8;
    fn encode(values: &[Self]) -> Cow<'_, [u8]> {
        encode_each(values, |&k| k as u8)
    }
    fn decode(prims: Vec<u8>) -> Option<Vec<Self>> {
        decode_each(prims, |p| SEGMENT_KINDS.get(usize::from(p)).copied())
    }
}

/// Codes in declaration order.
const BLOCK_STATES: [BlockState; 4] = [
    BlockState::ActiveAllocated,
    BlockState::ActivePendingFree,
    BlockState::Inactive,
    BlockState::Unknown,
];

impl Value for BlockState {
    type Prim = u8;
    fn encode(values: &[Self]) -> Cow<'_, [u8]> {
        encode_each(values, |&s| s as u8)
    }
    fn decode(prims: Vec<u8>) -> Option<Vec<Self>> {
        decode_each(prims, |p| BLOCK_STATES.get(usize::from(p)).copied())
    }
}

impl Value for StackId {
    type Prim = u32;
    fn encode(values: &[Self]) -> Cow<'_, [u32]> {
        encode_each(values, |s| s.0)
    }
    fn decode(prims: Vec<u32>) -> Option<Vec<Self>> {
        Some(prims.into_iter().map(StackId).collect())
    }
}

crate::impl_columns! {
    StateColumns {
        columns [segment_address, segment_size_bytes, segment_stream, segment_is_expandable, segment_kind, segment_stack, segment_blocks];
        columns [block_address, block_size_bytes, block_requested_size_bytes, block_state, block_stack, block_alloc_event];
        header [segment_pool_id];
        check = check_state_columns;
    }
}

/// One pool id per segment; the segments' block ranges follow each other inside the blocks.
fn check_state_columns(c: &StateColumns) -> Result<(), ColumnError> {
    if c.segment_pool_id.len() != c.segment_address.len() {
        return Err(ColumnError::Length("segment_address", "segment_pool_id"));
    }
    let mut end = 0u32;
    for r in &c.segment_blocks {
        if r.start < end || r.end as usize > c.block_address.len() {
            return Err(ColumnError::BadValue("segment_blocks"));
        }
        end = r.end;
    }
    Ok(())
}
