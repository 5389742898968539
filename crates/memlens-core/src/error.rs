//! Errors of the decoder and the model: specific variants, one line each, no file names
//! (the edge that knows the file appends it last).

use thiserror::Error;

/// Why a byte stream could not be read as a snapshot.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum DecodeError {
    #[error("empty input")]
    Empty,
    #[error("pickle truncated at byte {offset} (inside {opcode})")]
    Truncated { offset: u64, opcode: &'static str },
    #[error("pickle ended without STOP at byte {offset}")]
    NoStop { offset: u64 },
    #[error("refused pickle opcode {name} (0x{opcode:02x}) at byte {offset}: memlens never imports or executes code from a snapshot")]
    RefusedOpcode {
        name: &'static str,
        opcode: u8,
        offset: u64,
    },
    #[error("unknown pickle opcode 0x{opcode:02x} at byte {offset}")]
    UnknownOpcode { opcode: u8, offset: u64 },
    #[error("unsupported pickle protocol {protocol} at byte {offset}")]
    UnsupportedProtocol { protocol: u8, offset: u64 },
    #[error("malformed pickle at byte {offset}: {what}")]
    Malformed { offset: u64, what: String },
    #[error("memo key {key} not found at byte {offset}")]
    MissingMemo { key: u64, offset: u64 },
    #[error("length {len} at byte {offset} is larger than the input")]
    AbsurdLength { len: u64, offset: u64 },
    #[error("invalid JSON: {0}")]
    Json(String),
    #[error("HTML file holds no embedded snapshot (no `local_files` base64 pickle found)")]
    HtmlWithoutSnapshot,
    #[error("invalid base64 in HTML-embedded snapshot: {0}")]
    Base64(String),
    #[error("not a memory snapshot: {0}")]
    NotASnapshot(String),
    #[error("decoding cancelled")]
    Cancelled,
}
