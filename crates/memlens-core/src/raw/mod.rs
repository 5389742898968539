//! Stage 1, raw: bytes → values. The input form is detected from content (pickle of any
//! protocol, JSON, `_memory_viz` HTML), never from a file name.

mod dropped;
mod frames;
pub mod html;
pub mod intern;
pub mod json;
pub mod pickle;
pub mod value;
pub mod window;

use crate::error::DecodeError;
pub use pickle::{PickleMachine, Progress};
pub use value::{Arena, Node, NodeId, RowExtra, RowId, Val};
pub use window::{RowWindow, DROP_EVERY_ROWS};

/// How the input was encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Pickle {
        protocol: u8,
    },
    Json,
    /// `_memory_viz` HTML holding a pickle.
    Html {
        protocol: u8,
    },
}

impl std::fmt::Display for Encoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Encoding::Pickle { protocol } => write!(f, "pickle protocol {protocol}"),
            Encoding::Json => write!(f, "JSON"),
            Encoding::Html { protocol } => {
                write!(f, "_memory_viz HTML (pickle protocol {protocol})")
            }
        }
    }
}

/// What the first bytes say the input is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniff {
    Pickle,
    Json,
    Html,
}

pub fn sniff(bytes: &[u8]) -> Result<Sniff, DecodeError> {
    let first = bytes.iter().copied().find(|b| !b.is_ascii_whitespace());
    match first {
        None if bytes.is_empty() => Err(DecodeError::Empty),
        None => Err(DecodeError::NotASnapshot("only whitespace".into())),
        Some(0x1f) if bytes.get(1) == Some(&0x8b) => Err(DecodeError::NotASnapshot(
            "gzip-compressed file: decompress it first (gunzip)".into(),
        )),
        Some(b'{') | Some(b'[') => Ok(Sniff::Json),
        Some(b'<') => Ok(Sniff::Html),
        Some(0xef) if bytes.starts_with(&[0xef, 0xbb, 0xbf]) => sniff(&bytes[3..]),
        _ => {
            if html::looks_like_html(bytes) {
                Ok(Sniff::Html)
            } else {
                Ok(Sniff::Pickle)
            }
        }
    }
}

/// Decodes a whole input held in memory.
pub fn decode(bytes: &[u8]) -> Result<(Arena, Val, Encoding), DecodeError> {
    match sniff(bytes)? {
        Sniff::Json => {
            let (a, v) = json::decode_json(bytes)?;
            Ok((a, v, Encoding::Json))
        }
        Sniff::Html => {
            let inner = html::extract_pickle(bytes)?;
            let (a, v, protocol) = PickleMachine::decode_all(&inner)?;
            Ok((a, v, Encoding::Html { protocol }))
        }
        Sniff::Pickle => {
            let (a, v, protocol) = PickleMachine::decode_all(bytes)?;
            Ok((a, v, Encoding::Pickle { protocol }))
        }
    }
}
