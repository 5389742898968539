//! Parallel decoding of one pickle (`raw::pickle::parallel`) against the one-thread decoder:
//! every fixture at protocols 4 and 5 and every real snapshot in `../shared/snapshots`, each as
//! written and re-framed into small frames of random sizes (so pieces start anywhere: inside a
//! batch of entries, inside an entry, inside the segments), and mutated copies (truncated, bytes
//! changed), decode to the same model or fail with the same error; the one-thread decoder is
//! fed whole and in random chunks.

use memlens_core::model::normalize;
use memlens_core::raw::pickle::parallel::decode_counted;
use memlens_core::raw::pickle::split::{opcode_end, split};
use memlens_core::raw::{self, Encoding};
use memlens_core::Loader;
use memlens_fixture as fixture;

/// The model as text, or the error.
fn model(r: Result<(raw::Arena, raw::Val, u8), memlens_core::DecodeError>) -> String {
    match r.and_then(|(a, v, p)| normalize(a, v, Encoding::Pickle { protocol: p })) {
        Ok(s) => format!("{s:?}"),
        Err(e) => format!("error: {e}"),
    }
}

/// The one-thread decoder fed in chunks of `chunk` bytes (through the loader).
fn chunked(bytes: &[u8], chunk: usize) -> String {
    let mut l = Loader::new(Some(bytes.len() as u64));
    for c in bytes.chunks(chunk.max(1)) {
        if let Err(e) = l.push(c) {
            return format!("error: {e}");
        }
    }
    match l.finish() {
        Ok(s) => format!("{s:?}"),
        Err(e) => format!("error: {e}"),
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// `bytes` (protocol 4+) with its frames replaced by frames of random sizes around `size`
/// bytes, cut at opcode boundaries as CPython's framer cuts; `None` where it cannot be walked.
fn reframe(bytes: &[u8], size: usize, rng: &mut Rng) -> Option<Vec<u8>> {
    if bytes.len() < 2 || bytes[0] != 0x80 || bytes[1] < 4 {
        return None;
    }
    let mut ops: Vec<&[u8]> = Vec::new();
    let mut p = 2;
    while p < bytes.len() {
        let end = opcode_end(bytes, p)?;
        if bytes[p] != 0x95 {
            ops.push(&bytes[p..end]);
        }
        if bytes[p] == b'.' {
            break;
        }
        p = end;
    }
    let mut out = bytes[..2].to_vec();
    let mut i = 0;
    while i < ops.len() {
        let want = 1 + rng.below(2 * size);
        let mut frame = Vec::new();
        while i < ops.len() && frame.len() < want {
            frame.extend_from_slice(ops[i]);
            i += 1;
        }
        out.push(0x95);
        out.extend_from_slice(&(frame.len() as u64).to_le_bytes());
        out.extend_from_slice(&frame);
    }
    Some(out)
}

/// Parallel (2 and 3 threads, pieces of `piece` bytes) == one thread, whole and chunked; the
/// share of the input decoded by pieces on their own and joined.
fn same(what: &str, bytes: &[u8], piece: usize, rng: &mut Rng) -> f64 {
    let one = model(raw::pickle::PickleMachine::decode_all(bytes));
    let chunk = 1 + rng.below(5000);
    assert_eq!(
        chunked(bytes, chunk),
        one,
        "{what}: chunks of {chunk} differ from whole"
    );
    let mut share = 0.0;
    for threads in [2, 3] {
        let (r, joined) = decode_counted(bytes, threads, piece);
        share = joined as f64 / bytes.len() as f64;
        let par = model(r);
        if par != one {
            let at = par
                .bytes()
                .zip(one.bytes())
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            let from = at.saturating_sub(300);
            panic!(
                "{what} ({threads} threads, pieces of {piece}): parallel differs at {at}:\nparallel: {}\none:      {}",
                par.get(from..(at + 300).min(par.len())).unwrap_or(""),
                one.get(from..(at + 300).min(one.len())).unwrap_or("")
            );
        }
    }
    share
}

fn fixtures() -> Vec<(String, Vec<u8>)> {
    fixture::fixture_pickles(4..=5)
}

fn real_snapshots() -> Vec<(String, Vec<u8>)> {
    fixture::shared_snapshot_bytes()
}

#[test]
fn fixtures_decode_the_same_in_pieces() {
    let inputs = fixtures();
    assert!(inputs.len() >= 20, "only {} fixture pickles", inputs.len());
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut split_ones = 0;
    let mut shares = Vec::new();
    for (what, bytes) in &inputs {
        for size in [40, 300] {
            let b = reframe(bytes, size, &mut rng).unwrap_or_else(|| panic!("{what}: reframe"));
            split_ones += (split(&b, size).len() > 2) as usize;
            shares.push(same(&format!("{what} frames ~{size}"), &b, size, &mut rng));
        }
    }
    assert!(
        split_ones >= inputs.len(),
        "only {split_ones} inputs were cut in pieces"
    );
    shares.sort_by(f64::total_cmp);
    let median = shares[shares.len() / 2];
    assert!(median > 0.3, "median share decoded in pieces {median:.2}");
}

#[test]
fn real_snapshots_decode_the_same_in_pieces() {
    let inputs = real_snapshots();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (what, bytes) in &inputs {
        assert!(
            split(bytes, 64 << 10).len() > 1 || bytes.len() < 200_000,
            "{what}: not cut"
        );
        let share = same(what, bytes, 64 << 10, &mut rng);
        // (Piece 0 and what the join runs itself are not counted.)
        let pieces = split(bytes, 64 << 10).len();
        eprintln!("{what}: {pieces} pieces, {:.0} % joined", 100.0 * share);
        assert!(
            pieces < 4 || share > 0.5,
            "{what}: only {share:.2} decoded in pieces"
        );
        same(what, bytes, 300 << 10, &mut rng);
        let b = reframe(bytes, 2000, &mut rng).unwrap_or_else(|| panic!("{what}: reframe"));
        same(&format!("{what} frames ~2000"), &b, 20_000, &mut rng);
    }
}

/// Truncated copies and copies with bytes changed: the same model or the same error.
#[test]
fn mutated_copies_decode_or_fail_the_same_in_pieces() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut inputs: Vec<(String, Vec<u8>)> = fixtures().into_iter().step_by(3).collect();
    if let Some(real) = real_snapshots().into_iter().min_by_key(|(_, b)| b.len()) {
        inputs.push(real);
    }
    const OPS: &[u8] = b"hjKMJNu}]e(\x8a\x8c\x94\x88\x89GX\x95sqa0.2t";
    for (what, bytes) in &inputs {
        let Some(b) = reframe(bytes, 200, &mut rng) else {
            continue;
        };
        for round in 0..24 {
            let mut m = b.clone();
            if round % 4 == 0 {
                m.truncate(2 + rng.below(m.len() - 2));
            } else {
                for _ in 0..1 + rng.below(3) {
                    let at = 2 + rng.below(m.len() - 2);
                    m[at] = match rng.below(2) {
                        0 => OPS[rng.below(OPS.len())],
                        _ => rng.next() as u8,
                    };
                }
            }
            same(&format!("{what} mutation {round}"), &m, 200, &mut rng);
        }
    }
}
