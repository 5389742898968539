//! Fuzzes the decoder: arbitrary bytes through `memlens_core::load` (sniffing, pickle, JSON, HTML,
//! then the model) and the streaming paths (`PickleMachine::feed` with chunk sizes taken from the
//! input, and `Loader`), which must agree with the whole-buffer decode, and the plain opcode loop
//! (the trace-entry fast path off), which must give the same model or the same error; and the
//! parallel decode (`raw::pickle::parallel`, the input re-framed into frames of sizes taken
//! from the input so that it is cut in pieces), which must give the same model or error as the
//! one-thread decode. Never panics, never hangs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memlens_core::model::normalize;
use memlens_core::raw::pickle::{parallel, split};
use memlens_core::raw::{Encoding, PickleMachine, Progress};

mod common;

/// Feeds `body` to a fresh machine in chunks of `chunk` bytes, as a reader would.
fn feed_in_chunks(body: &[u8], chunk: usize) -> Result<bool, memlens_core::DecodeError> {
    let mut m = PickleMachine::default();
    let mut pending: Vec<u8> = Vec::new();
    let mut pos = 0usize;
    loop {
        let n = chunk.min(body.len() - pos);
        pending.extend_from_slice(&body[pos..pos + n]);
        pos += n;
        let eof = pos == body.len();
        match m.feed(&pending, eof)? {
            Progress::Done(_) => return Ok(m.result().is_some()),
            Progress::NeedMore(used) => {
                pending.drain(..used.min(pending.len()));
                if eof {
                    return Ok(false);
                }
            }
        }
    }
}

/// The whole-buffer decode and its model, as text, with the entry fast path on or off.
fn decode_text(body: &[u8], fast: bool) -> String {
    let mut m = PickleMachine::default();
    m.fast_entries = fast;
    match m.feed(body, true) {
        Ok(Progress::Done(_)) => {}
        Ok(Progress::NeedMore(_)) => return "need more".into(),
        Err(e) => return format!("error: {e}"),
    }
    let Some(top) = m.result() else {
        return "no result".into();
    };
    let nodes = m.arena.nodes.len();
    match normalize(
        m.arena,
        top,
        Encoding::Pickle {
            protocol: m.protocol,
        },
    ) {
        Ok(s) => format!("{nodes} {s:?}"),
        Err(e) => format!("{nodes} normalize error: {e}"),
    }
}

/// The model (or error) of a decode, as text.
fn model_text(r: parallel::Decoded) -> String {
    match r.and_then(|(a, v, p)| normalize(a, v, Encoding::Pickle { protocol: p })) {
        Ok(s) => format!("{s:?}"),
        Err(e) => format!("error: {e}"),
    }
}

/// `body` as protocol 4 with frames of about `size` bytes at opcode boundaries (as CPython's
/// framer cuts them), where its opcodes can be walked.
fn reframe(body: &[u8], size: usize) -> Option<Vec<u8>> {
    let mut out = vec![0x80, 4];
    let mut frame = Vec::new();
    let mut p = if body.starts_with(&[0x80]) { 2 } else { 0 };
    while p < body.len() {
        let end = split::opcode_end(body, p)?;
        if body[p] != 0x95 {
            frame.extend_from_slice(&body[p..end]);
        }
        if frame.len() >= size || end == body.len() {
            out.push(0x95);
            out.extend_from_slice(&(frame.len() as u64).to_le_bytes());
            out.append(&mut frame);
        }
        p = end;
    }
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let whole = memlens_core::load(data);
    if let Ok(s) = &whole {
        // the stats walk every table the model built
        let _ = memlens_core::snapshot_stats(s);
    }
    let Some((&first, body)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(first % 61) + 1;

    assert!(
        decode_text(body, true) == decode_text(body, false),
        "the entry fast path disagrees with the opcode loop"
    );

    if let Some(framed) = reframe(body, usize::from(first % 29) + 4) {
        assert!(
            model_text(parallel::decode_in_pieces(&framed, 2, 8))
                == model_text(PickleMachine::decode_all(&framed)),
            "the parallel decode disagrees with the one-thread decode"
        );
    }

    let all_at_once = PickleMachine::decode_all(body);
    let streamed = feed_in_chunks(body, chunk);
    assert_eq!(
        all_at_once.is_ok(),
        matches!(streamed, Ok(true)),
        "feed({chunk}) disagrees with decode_all"
    );

    let loaded = common::load_in_pieces(data, &[chunk], None);
    assert_eq!(
        whole.is_ok(),
        loaded.is_ok(),
        "Loader({chunk}) disagrees with load"
    );
});
