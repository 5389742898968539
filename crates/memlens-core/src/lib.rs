//! memlens-core: PyTorch CUDA memory snapshots, decoded and modelled, with no web dependencies.
//!
//! bytes → [`raw`] (streaming pickle machine, JSON, `_memory_viz` HTML) → [`model`] (interned,
//! columnar, immutable) → stats, layouts and diagnosis. Builds natively and for wasm32.

pub mod analysis;
pub mod colour;
pub mod columns;
pub mod error;
pub mod estimate;
pub mod flame;
pub mod layout;
pub mod loader;
pub mod model;
pub mod range;
pub mod raw;
pub mod replay;
pub mod state;
pub mod trace;
pub mod view;
pub mod write;

pub use error::DecodeError;
pub use loader::{load_reader, LoadError, Loader};
pub use model::stats::{device_stats, snapshot_stats, DeviceStats, SnapshotStats};
pub use model::Snapshot;

/// Decodes and normalises a whole snapshot held in memory.
pub fn load(bytes: &[u8]) -> Result<Snapshot, DecodeError> {
    let (arena, top, enc) = raw::decode(bytes)?;
    model::normalize(arena, top, enc)
}

/// [`load`], decoding a framed pickle (protocol 4+) on up to `threads` threads
/// (`raw::pickle::parallel`): the same snapshot, or the same error.
pub fn load_parallel(bytes: &[u8], threads: usize) -> Result<Snapshot, DecodeError> {
    if raw::sniff(bytes)? != raw::Sniff::Pickle {
        return load(bytes);
    }
    let (arena, top, protocol) = raw::pickle::parallel::decode_parallel(bytes, threads)?;
    model::normalize(arena, top, raw::Encoding::Pickle { protocol })
}
