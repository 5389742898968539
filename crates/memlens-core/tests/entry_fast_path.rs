//! The trace-entry fast path (`raw::pickle::entry`) against the plain opcode loop: every
//! fixture at every protocol, the real snapshots in `../shared/snapshots`, and mutated copies
//! of them decode to the same model (or fail with the same error) both ways, whole and in
//! chunks, and leave the same number of arena nodes and rows behind.

use memlens_core::model::normalize;
use memlens_core::raw::{Encoding, PickleMachine, Progress};
use memlens_fixture as fixture;

/// Decodes a pickle fed in chunks of `chunk` bytes (0: whole); the model as text, plus the
/// arena's node and row counts, or the error.
fn decode(bytes: &[u8], fast: bool, chunk: usize) -> String {
    let mut m = PickleMachine::default();
    m.fast_entries = fast;
    m.set_total_len(bytes.len() as u64);
    let chunk = if chunk == 0 {
        bytes.len().max(1)
    } else {
        chunk
    };
    let mut pending: Vec<u8> = Vec::new();
    let mut pos = 0usize;
    loop {
        let n = chunk.min(bytes.len() - pos);
        pending.extend_from_slice(&bytes[pos..pos + n]);
        pos += n;
        let eof = pos == bytes.len();
        match m.feed(&pending, eof) {
            Ok(Progress::Done(_)) => break,
            Ok(Progress::NeedMore(used)) => {
                pending.drain(..used);
                if eof {
                    return "NeedMore at end of input".into();
                }
            }
            Err(e) => return format!("error: {e}"),
        }
    }
    let Some(top) = m.result() else {
        return "no result".into();
    };
    let counts = format!("nodes {} rows {}", m.arena.nodes.len(), m.arena.rows.len());
    match normalize(
        m.arena,
        top,
        Encoding::Pickle {
            protocol: m.protocol,
        },
    ) {
        Ok(s) => format!("{counts}\n{s:?}"),
        Err(e) => format!("{counts}\nnormalize error: {e}"),
    }
}

fn same_both_ways(what: &str, bytes: &[u8]) {
    let slow = decode(bytes, false, 0);
    for chunk in [0, 1000, 4096] {
        let fast = decode(bytes, true, chunk);
        if fast != slow {
            let at = fast
                .bytes()
                .zip(slow.bytes())
                .position(|(a, b)| a != b)
                .unwrap_or(fast.len().min(slow.len()));
            let from = at.saturating_sub(200);
            panic!(
                "{what} (chunks of {chunk}): fast path differs at byte {at}:\nfast: {}\nslow: {}",
                fast.get(from..(at + 200).min(fast.len())).unwrap_or(""),
                slow.get(from..(at + 200).min(slow.len())).unwrap_or("")
            );
        }
    }
}

fn fixtures() -> Vec<(String, Vec<u8>)> {
    fixture::fixture_pickles(2..=5)
}

fn real_snapshots() -> Vec<(String, Vec<u8>)> {
    fixture::shared_snapshot_bytes()
}

#[test]
fn fixtures_decode_the_same_with_and_without_the_fast_path() {
    let inputs = fixtures();
    assert!(inputs.len() >= 40, "only {} fixture pickles", inputs.len());
    for (what, bytes) in &inputs {
        same_both_ways(what, bytes);
    }
}

#[test]
fn real_snapshots_decode_the_same_with_and_without_the_fast_path() {
    for (what, bytes) in &real_snapshots() {
        same_both_ways(what, bytes);
    }
}

/// Mutations inside entries: the fast path must give up, or agree, wherever a byte changes.
#[test]
fn mutated_entries_decode_or_fail_the_same_both_ways() {
    let mut inputs = fixtures();
    if let Some(real) = real_snapshots().into_iter().min_by_key(|(_, b)| b.len()) {
        inputs.push(real);
    }
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Bytes an entry is made of, so that mutations make other valid-looking entries.
    const OPS: &[u8] = b"hjKMJNu}]e(\x8a\x8c\x94\x88\x89GX\x95sq2";
    for (what, bytes) in &inputs {
        // Mutate only around trace entries (where EMPTY_DICT MEMOIZE MARK starts one).
        let starts: Vec<usize> = bytes
            .windows(3)
            .enumerate()
            .filter(|(_, w)| *w == b"}\x94(")
            .map(|(i, _)| i)
            .collect();
        if starts.is_empty() {
            continue;
        }
        for _ in 0..40 {
            let mut b = bytes.clone();
            for _ in 0..3 {
                let s = starts[(next() % starts.len() as u64) as usize];
                let at = (s + 3 + (next() % 40) as usize).min(b.len() - 1);
                b[at] = if next() % 2 == 0 {
                    OPS[(next() % OPS.len() as u64) as usize]
                } else {
                    next() as u8
                };
            }
            let slow = decode(&b, false, 0);
            let fast = decode(&b, true, 0);
            assert!(fast == slow, "{what}: a mutation decodes differently");
        }
    }
}
