//! Fuzzes the streaming decode at random boundaries: the input's first byte says how many of
//! the bytes after it are chunk sizes (1–16, each 0–255, used in turn), the rest is the file.
//! `PickleMachine::feed` (keeping the unread tail, as a reader must) and `Loader::push` fed in
//! those pieces must give exactly the model (or an error exactly when) the whole-buffer decode
//! (`PickleMachine::decode_all`, `memlens_core::load`) gives.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memlens_core::model::normalize;
use memlens_core::raw::{Encoding, PickleMachine, Progress};
use memlens_core::{DecodeError, Snapshot};

mod common;

/// The model of a decode as text (its `Debug`), or `None` for an error.
fn model_text(r: Result<Snapshot, DecodeError>) -> Option<String> {
    r.ok().map(|s| format!("{s:?}"))
}

/// The pickle machine's model after feeding `body` in pieces of `sizes` (cycled).
fn fed_in_pieces(body: &[u8], sizes: &[usize]) -> Result<Snapshot, DecodeError> {
    let mut m = PickleMachine::default();
    let mut pending: Vec<u8> = Vec::new();
    let (mut pos, mut i) = (0usize, 0usize);
    loop {
        let n = sizes[i % sizes.len()].min(body.len() - pos);
        i += 1;
        pending.extend_from_slice(&body[pos..pos + n]);
        pos += n;
        let eof = pos == body.len();
        match m.feed(&pending, eof)? {
            Progress::Done(_) => break,
            Progress::NeedMore(used) => {
                pending.drain(..used.min(pending.len()));
                if eof {
                    break;
                }
            }
        }
    }
    let top = m
        .result()
        .ok_or(DecodeError::NoStop { offset: m.offset() })?;
    let protocol = m.protocol;
    normalize(m.arena, top, Encoding::Pickle { protocol })
}

/// The whole-buffer decode of the pickle machine, normalised.
fn decoded_whole(body: &[u8]) -> Result<Snapshot, DecodeError> {
    let (a, v, protocol) = PickleMachine::decode_all(body)?;
    normalize(a, v, Encoding::Pickle { protocol })
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let k = (usize::from(first % 16) + 1).min(rest.len());
    let (size_bytes, body) = rest.split_at(k);
    let mut sizes: Vec<usize> = size_bytes.iter().map(|&b| usize::from(b)).collect();
    // at least one piece that moves forward, so that the feeding ends
    if sizes.iter().all(|&s| s == 0) {
        sizes.push(1);
    }

    let whole = model_text(decoded_whole(body));
    assert!(
        model_text(fed_in_pieces(body, &sizes)) == whole,
        "feed in pieces {sizes:?} disagrees with decode_all"
    );

    let loaded = model_text(memlens_core::load(body));
    for total in [None, Some(body.len() as u64)] {
        assert!(
            model_text(common::load_in_pieces(body, &sizes, total)) == loaded,
            "Loader in pieces {sizes:?} (total {total:?}) disagrees with load"
        );
    }
});
