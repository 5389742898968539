//! The decoder on hostile input: truncations, random and mutated bytes, every refused opcode,
//! 10^6 levels of nesting, memo fan-out bombs, absurd length prefixes, and the streaming API fed
//! in random chunks. Everything must come back as `Ok` or a `DecodeError`: no panic, no stack
//! overflow, no allocation sized by an untrusted length, no expansion of shared values.
//!
//! A counting global allocator (the one `unsafe` here, test-only) records the largest single
//! allocation made on a thread that asked for it, so "no big allocation" is checked, not hoped.
#![allow(unsafe_code)]

use memlens_core::model::normalize;
use memlens_core::raw::{Encoding, PickleMachine, Progress};
use memlens_core::write::PickleWriter;
use memlens_core::{load, snapshot_stats, DecodeError, Loader, Snapshot};
use memlens_fixture::{self as fixture, Form};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

// ------------------------------------------------------------------ allocation watch

struct Watch;

static LARGEST: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
}

fn note(size: usize) {
    if WATCHING.with(|w| w.get()) {
        LARGEST.fetch_max(size, Ordering::Relaxed);
    }
}

// SAFETY: every call is forwarded unchanged to the system allocator; `note` only reads a
// thread-local `Cell<bool>` (no destructor, no allocation) and updates an atomic.
unsafe impl GlobalAlloc for Watch {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Watch = Watch;

/// Runs `f` and returns its result with the largest single allocation it made (this thread).
/// Tests using it run one at a time (the maximum is global), hence the lock.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    LARGEST.store(0, Ordering::Relaxed);
    WATCHING.with(|w| w.set(true));
    let out = f();
    WATCHING.with(|w| w.set(false));
    (out, LARGEST.load(Ordering::Relaxed))
}

// ------------------------------------------------------------------ helpers

fn fixture_text(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../tests/fixtures/{name}.txt"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn built(name: &str) -> Vec<u8> {
    fixture::build(&fixture_text(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn built_as(name: &str, form: Form, protocol: u8) -> Vec<u8> {
    let fx = fixture::parse(&fixture_text(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    fx.with_form(form)
        .with_protocol(protocol)
        .to_bytes()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// xorshift64*: a seeded, dependency-free PRNG (reproducible inputs).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Loads and, when that works, computes the stats (they walk every table the model built).
fn load_and_stats(bytes: &[u8]) -> Result<Snapshot, DecodeError> {
    let s = load(bytes)?;
    let _ = snapshot_stats(&s);
    Ok(s)
}

/// Feeds a pickle to the machine in chunks whose sizes `next_chunk` picks, keeping the unread
/// tail as a reader must, then normalises the result.
fn feed_chunks(
    bytes: &[u8],
    mut next_chunk: impl FnMut() -> usize,
) -> Result<Snapshot, DecodeError> {
    let mut m = PickleMachine::default();
    let mut pending: Vec<u8> = Vec::new();
    let mut pos = 0usize;
    loop {
        let n = next_chunk().clamp(1, bytes.len() - pos);
        pending.extend_from_slice(&bytes[pos..pos + n]);
        pos += n;
        let eof = pos == bytes.len();
        match m.feed(&pending, eof)? {
            Progress::Done(_) => break,
            Progress::NeedMore(used) => {
                assert!(
                    used <= pending.len(),
                    "NeedMore({used}) beyond the {} bytes fed",
                    pending.len()
                );
                pending.drain(..used);
                assert!(!eof, "NeedMore at end of input");
            }
        }
    }
    let top = m
        .result()
        .ok_or(DecodeError::NoStop { offset: m.offset() })?;
    let protocol = m.protocol;
    normalize(m.arena, top, Encoding::Pickle { protocol })
}

fn loader_chunks(
    bytes: &[u8],
    total: Option<u64>,
    mut next_chunk: impl FnMut() -> usize,
) -> Result<Snapshot, DecodeError> {
    let mut l = Loader::new(total);
    let mut pos = 0usize;
    while pos < bytes.len() {
        let n = next_chunk().clamp(1, bytes.len() - pos);
        l.push(&bytes[pos..pos + n])?;
        pos += n;
    }
    l.finish()
}

/// Everything the model holds, as text: two loads are the same iff these are equal.
fn fingerprint(s: &Snapshot) -> String {
    format!("{s:?}")
}

// ------------------------------------------------------------------ truncation

#[test]
fn every_prefix_of_a_pickle_is_an_error() {
    for name in ["p4_snapshot", "p2_snapshot", "torch20_legacy"] {
        let bytes = built(name);
        for n in 0..bytes.len() {
            let prefix = &bytes[..n];
            assert!(
                load_and_stats(prefix).is_err(),
                "{name}: prefix of {n} bytes loaded"
            );
            assert!(
                loader_chunks(prefix, None, || 7).is_err(),
                "{name}: Loader took a prefix of {n} bytes"
            );
            assert!(
                loader_chunks(prefix, Some(prefix.len() as u64), || 64).is_err(),
                "{name}: Loader(total) took a prefix of {n} bytes"
            );
        }
        assert!(
            load_and_stats(&bytes).is_ok(),
            "{name}: the whole file must load"
        );
    }
}

#[test]
fn every_prefix_of_json_and_html_is_an_error() {
    let json = built("json_snapshot");
    let end = json
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .unwrap_or(0);
    for n in 0..=end {
        assert!(
            load_and_stats(&json[..n]).is_err(),
            "JSON prefix of {n} bytes loaded"
        );
    }
    assert!(load_and_stats(&json).is_ok());

    let html = built("trace_plot_html");
    let text = String::from_utf8_lossy(&html);
    let b64_start = text.find("\"base64\": \"").unwrap_or(0) + "\"base64\": \"".len();
    let b64_end = b64_start + text[b64_start..].find('"').unwrap_or(0);
    // up to (not including) the closing quote of the base64 text, nothing can be loaded
    for n in 0..=b64_end {
        assert!(
            load_and_stats(&html[..n]).is_err(),
            "HTML prefix of {n} bytes loaded"
        );
    }
    assert!(load_and_stats(&html).is_ok());
}

// ------------------------------------------------------------------ random and mutated bytes

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let heads: [&[u8]; 5] = [
        b"",
        b"\x80\x04\x95",
        b"\x80\x02",
        b"{\"segments\": [",
        b"<!DOCTYPE html>\nconst local_files = [{\"base64\": \"",
    ];
    for i in 0..4000 {
        let head = heads[i % heads.len()];
        let len = rng.below(300);
        let mut bytes = head.to_vec();
        bytes.extend((0..len).map(|_| rng.next() as u8));
        if i % 3 == 0 {
            bytes.push(b'.');
        }
        let whole = load_and_stats(&bytes);
        if bytes.first() == Some(&0x80) {
            let chunked = loader_chunks(&bytes, None, || rng.below(9) + 1);
            assert_eq!(
                whole.is_ok(),
                chunked.is_ok(),
                "input {i}: Loader disagrees with load on {bytes:?}"
            );
        }
    }
}

#[test]
fn mutated_fixtures_never_panic() {
    let mut rng = Rng(42);
    let seeds = [
        built("p4_snapshot"),
        built("p2_snapshot"),
        built("torch20_legacy"),
        built("json_snapshot"),
    ];
    for i in 0..3000 {
        let mut bytes = seeds[i % seeds.len()].clone();
        for _ in 0..(1 + rng.below(4)) {
            let at = rng.below(bytes.len());
            match rng.below(4) {
                0 => bytes[at] = rng.next() as u8,
                1 => bytes[at] ^= 1 << rng.below(8),
                2 => {
                    bytes.remove(at);
                }
                _ => bytes.insert(at, rng.next() as u8),
            }
        }
        let whole = load_and_stats(&bytes);
        let chunked = loader_chunks(&bytes, Some(bytes.len() as u64), || rng.below(33) + 1);
        assert_eq!(
            whole.is_ok(),
            chunked.is_ok(),
            "mutation {i}: Loader disagrees with load"
        );
        if let (Ok(a), Ok(b)) = (&whole, &chunked) {
            assert_eq!(fingerprint(a), fingerprint(b), "mutation {i}");
        }
    }
}

// ------------------------------------------------------------------ refused opcodes

const REFUSED: &[(&str, u8)] = &[
    ("GLOBAL", b'c'),
    ("STACK_GLOBAL", 0x93),
    ("REDUCE", b'R'),
    ("BUILD", b'b'),
    ("NEWOBJ", 0x81),
    ("NEWOBJ_EX", 0x92),
    ("INST", b'i'),
    ("OBJ", b'o'),
    ("PERSID", b'P'),
    ("BINPERSID", b'Q'),
    ("EXT1", 0x82),
    ("EXT2", 0x83),
    ("EXT4", 0x84),
    ("NEXT_BUFFER", 0x97),
    ("READONLY_BUFFER", 0x98),
];

/// What a malicious pickle would put after the opcode (so the refusal comes before operands).
fn operands(op: u8) -> &'static [u8] {
    match op {
        b'c' => b"os\nsystem\n",
        b'i' => b"builtins\neval\n",
        b'P' => b"0\n",
        0x82 => b"\x01",
        0x83 => b"\x01\x00",
        0x84 => b"\x01\x00\x00\x00",
        _ => b"",
    }
}

#[test]
fn each_refused_opcode_is_named_with_its_offset() {
    for &(name, op) in REFUSED {
        // protocol 4, inside a frame, after a snapshot-like start
        let body: &[u8] = b"}\x94(\x8c\x08segments\x94]\x94\x8c\x08builtins\x94\x8c\x04eval\x94";
        let mut frame = body.to_vec();
        let offset = 2 + 9 + frame.len() as u64;
        frame.push(op);
        frame.extend_from_slice(operands(op));
        frame.extend_from_slice(b"u.");
        let mut p4 = vec![0x80, 4, 0x95];
        p4.extend_from_slice(&(frame.len() as u64).to_le_bytes());
        p4.extend_from_slice(&frame);
        // protocol 2, no frame, right after the first value
        let mut p2 = b"\x80\x02]q\x00".to_vec();
        p2.push(op);
        p2.extend_from_slice(operands(op));
        p2.push(b'.');
        for (bytes, at) in [(p4, offset), (p2, 5)] {
            let want = DecodeError::RefusedOpcode {
                name,
                opcode: op,
                offset: at,
            };
            assert_eq!(load(&bytes).err(), Some(want.clone()), "{name} via load");
            assert_eq!(
                PickleMachine::decode_all(&bytes).err(),
                Some(want.clone()),
                "{name} via decode_all"
            );
            assert_eq!(
                feed_chunks(&bytes, || 1).err(),
                Some(want.clone()),
                "{name} fed byte by byte"
            );
            let msg = want.to_string();
            assert!(
                msg.contains(name) && msg.contains(&format!("byte {at}")),
                "{msg}"
            );
            // in an HTML page the offset is the one inside the embedded pickle
            let html = fixture::html_page(&bytes, "Active Memory Timeline");
            assert_eq!(
                load(html.as_bytes()).err(),
                Some(want),
                "{name} inside HTML"
            );
        }
    }
}

// ------------------------------------------------------------------ deep nesting

const DEPTH: usize = 1_000_000;

/// Runs `f` on a thread with a 512 KiB stack: anything recursive over 10^6 levels overflows it.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(512 * 1024)
        .spawn(f)
        .unwrap_or_else(|e| panic!("spawn: {e}"))
        .join()
        .unwrap_or_else(|_| panic!("the small-stack thread panicked"))
}

#[test]
fn a_million_nested_lists_decode_and_drop_without_recursion() {
    on_small_stack(|| {
        // EMPTY_LIST x 10^6, then APPEND x (10^6 - 1): each list inside the one before
        let mut b = vec![0x80, 4];
        b.extend(std::iter::repeat_n(b']', DEPTH));
        b.extend(std::iter::repeat_n(b'a', DEPTH - 1));
        b.push(b'.');
        let (arena, top, _) = PickleMachine::decode_all(&b).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(arena.nodes.len(), DEPTH);
        // walk down iteratively: it really is 10^6 deep
        let (mut v, mut depth) = (top, 1usize);
        while let Some(next) = arena.seq(v).and_then(|mut i| i.next()) {
            v = next;
            depth += 1;
        }
        assert_eq!(depth, DEPTH);
        drop(arena); // flat: no recursive drop
                     // as a whole file it is not a snapshot, and says so
        assert!(matches!(load(&b), Err(DecodeError::NotASnapshot(_))));
    });
}

#[test]
fn a_million_marks_fail_or_decode_cleanly() {
    on_small_stack(|| {
        // MARK x 10^6, then LIST x 10^6: nested lists built through marks
        let mut b = vec![0x80, 2];
        b.extend(std::iter::repeat_n(b'(', DEPTH));
        b.extend(std::iter::repeat_n(b'l', DEPTH));
        b.push(b'.');
        let (arena, _, _) = PickleMachine::decode_all(&b).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(arena.nodes.len(), DEPTH);
        drop(arena);
        // marks never closed: STOP finds nothing above the last mark
        let mut b = vec![0x80, 2];
        b.extend(std::iter::repeat_n(b'(', DEPTH));
        b.push(b'.');
        assert!(
            matches!(load(&b), Err(DecodeError::Malformed { .. })),
            "{:?}",
            load(&b).err()
        );
        // a million frames of JSON nesting: serde_json's depth limit answers
        let mut j = vec![b'['; DEPTH];
        j.extend(std::iter::repeat_n(b']', DEPTH));
        assert!(matches!(load(&j), Err(DecodeError::Json(_))));
    });
}

#[test]
fn deep_nesting_where_the_model_looks_is_harmless() {
    on_small_stack(|| {
        // {"segments": [deep], "device_traces": [deep], "allocator_settings": deep}, where
        // deep is 10^6 nested lists shared by memo
        let mut b = vec![0x80, 4];
        b.extend(std::iter::repeat_n(b']', DEPTH));
        b.extend(std::iter::repeat_n(b'a', DEPTH - 1));
        b.extend_from_slice(b"\x94"); // memo 0 = the outermost list
        b.extend_from_slice(b"0}(\x8c\x08segments]h\x00a\x8c\x0ddevice_traces]h\x00a");
        b.extend_from_slice(b"\x8c\x12allocator_settingsh\x00\x8c\x0bhost_tracesh\x00u.");
        // nothing of the right type where the model looks: refused, naming what it found
        match load_and_stats(&b) {
            Err(DecodeError::NotASnapshot(m)) => {
                assert!(m.contains("segment 0 is a list, not a dict"), "{m}")
            }
            other => panic!("{:?}", other.map(|s| s.warnings)),
        }
    });
}

// ------------------------------------------------------------------ known keys, wrong types

/// `{"segments": .., "device_traces": ..}` as a protocol-4 pickle, each value written by `f`.
fn pickle_of(
    segments: impl FnOnce(&mut PickleWriter<Vec<u8>>) -> std::io::Result<()>,
    traces: impl FnOnce(&mut PickleWriter<Vec<u8>>) -> std::io::Result<()>,
) -> Vec<u8> {
    let mut w = PickleWriter::new(Vec::new(), 4);
    let written = (|| {
        w.begin_dict();
        w.str("segments")?;
        segments(&mut w)?;
        w.str("device_traces")?;
        traces(&mut w)?;
        w.end()?;
        Ok::<_, std::io::Error>(())
    })();
    written.unwrap_or_else(|e| panic!("{e}"));
    w.finish().unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_file_of_known_keys_of_the_wrong_type_is_refused() {
    let refused: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "JSON string and int",
            br#"{"segments": "nope", "device_traces": 5}"#.to_vec(),
            "'segments' is a string, not a list; 'device_traces' is an int, not a list",
        ),
        (
            "pickle string and int",
            pickle_of(|w| w.str("nope"), |w| w.int(5)),
            "'segments' is a string, not a list; 'device_traces' is an int, not a list",
        ),
        (
            "JSON lists of the wrong things",
            br#"{"segments": [1, "x"], "device_traces": [{"a": 1}]}"#.to_vec(),
            "segment 0 is an int, not a dict; segment 1 is a string, not a dict; device_traces[0] is a dict, not a list",
        ),
        (
            "JSON None and a dict",
            br#"{"segments": null, "device_traces": {"0": []}}"#.to_vec(),
            "'segments' is None, not a list",
        ),
        (
            "pickle trace lists without entries",
            pickle_of(
                |w| {
                    w.begin_list();
                    w.end().map(drop)
                },
                |w| {
                    w.begin_list();
                    w.begin_list();
                    w.int(1)?;
                    w.end()?;
                    w.end().map(drop)
                },
            ),
            "device_traces[0]: 1 entries are not trace entries",
        ),
    ];
    for (what, bytes, fragment) in &refused {
        match load_and_stats(bytes) {
            Err(e @ DecodeError::NotASnapshot(_)) => {
                let m = e.to_string();
                assert!(
                    m.starts_with("not a memory snapshot: no usable segment or trace entry ("),
                    "{what}: {m}"
                );
                assert!(m.contains(fragment), "{what}: want {fragment:?} in {m}");
                assert_eq!(m.lines().count(), 1, "{what}: {m}");
            }
            other => panic!("{what}: {:?}", other.map(|s| s.warnings)),
        }
        let chunked = loader_chunks(bytes, Some(bytes.len() as u64), || 3);
        assert!(
            matches!(chunked, Err(DecodeError::NotASnapshot(_))),
            "{what}: Loader"
        );
    }
    // many wrong segments: the first three are named, the rest counted
    let many = format!(r#"{{"segments": [{}]}}"#, vec!["1"; 50].join(","));
    match load(many.as_bytes()) {
        Err(e) => assert!(
            e.to_string()
                .ends_with("segment 2 is an int, not a dict; and 47 more)"),
            "{e}"
        ),
        Ok(s) => panic!("{:?}", s.warnings),
    }
}

#[test]
fn a_partly_wrong_file_opens_with_its_warnings() {
    let seg = r#"{"device": 0, "address": 4096, "total_size": 512, "stream": 0, "segment_type": "small", "blocks": [{"size": 512, "state": "inactive", "address": 4096}]}"#;
    let entry = r#"{"action": "alloc", "addr": 4096, "size": 512, "stream": 0, "frames": []}"#;
    let opens = [
        (
            format!(r#"{{"segments": [{seg}], "device_traces": 5}}"#),
            "'device_traces' is an int, not a list; ignored",
        ),
        (
            format!(r#"{{"segments": "nope", "device_traces": [[{entry}]]}}"#),
            "'segments' is a string, not a list; ignored",
        ),
        (
            format!(r#"{{"segments": [{seg}, 7], "device_traces": [[{entry}], 3]}}"#),
            "segment 1 is an int, not a dict; skipped",
        ),
    ];
    for (doc, warning) in &opens {
        let s = load_and_stats(doc.as_bytes()).unwrap_or_else(|e| panic!("{doc}: {e}"));
        assert!(
            s.warnings.iter().any(|w| w == warning),
            "{doc}: {:?}",
            s.warnings
        );
        assert!(!s.segments.is_empty() || !s.trace.is_empty());
    }
    // empty, but of the right types: an empty snapshot, no warning
    let s = load_and_stats(br#"{"segments": [], "device_traces": [[]]}"#)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
}

// ------------------------------------------------------------------ memo fan-out

/// A list holding the previous list twice, `levels` deep: 2^levels leaves if expanded.
fn fan_out_bomb(levels: u32) -> Vec<u8> {
    let mut b = vec![0x80, 4, b']', 0x94];
    for k in 1..=levels {
        b.extend_from_slice(b"0]\x94(");
        for _ in 0..2 {
            b.push(b'j');
            b.extend_from_slice(&(k - 1).to_le_bytes());
        }
        b.push(b'e');
    }
    b
}

#[test]
fn a_memo_fan_out_bomb_is_not_expanded() {
    let mut b = fan_out_bomb(100);
    b.push(b'.');
    let (arena, _, _) = PickleMachine::decode_all(&b).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(arena.nodes.len(), 101);

    // the same bomb everywhere the model and the stats read: segments, blocks, frames,
    // device_traces, allocator_settings, external_annotations, host_segments
    let mut b = fan_out_bomb(100);
    b.extend_from_slice(b"\x94"); // memo 101 = the bomb
    let bomb = b"j\x65\x00\x00\x00";
    b.extend_from_slice(b"0}(\x8c\x08segments](}(\x8c\x0atotal_sizeK\x01\x8c\x06blocks");
    b.extend_from_slice(bomb);
    b.extend_from_slice(b"\x8c\x06frames");
    b.extend_from_slice(bomb);
    b.extend_from_slice(b"u");
    b.extend_from_slice(bomb);
    b.extend_from_slice(b"e\x8c\x0ddevice_traces(");
    b.extend_from_slice(bomb);
    b.extend_from_slice(bomb);
    b.extend_from_slice(b"l");
    for key in [
        "allocator_settings",
        "external_annotations",
        "host_segments",
        "host_traces",
    ] {
        b.push(0x8c);
        b.push(key.len() as u8);
        b.extend_from_slice(key.as_bytes());
        b.extend_from_slice(bomb);
    }
    b.extend_from_slice(b"u.");
    let (s, largest) = largest_allocation(|| load_and_stats(&b));
    let s = s.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.segments.len(), 1);
    assert!(s.trace.is_empty());
    assert!(largest < 64 << 20, "largest allocation {largest} bytes");
}

#[test]
fn frame_lists_shared_by_many_entries_are_interned_once() {
    // 5000 frames in one stack, referenced by 15000 trace entries and 2000 blocks:
    // 8.5*10^7 frames if expanded; written once and shared by memo
    let mut t = String::from("stack deep ");
    for i in 0..5000 {
        if i > 0 {
            t.push('|');
        }
        t.push_str(&format!("layer{}.py:{}:forward", i % 97, i));
    }
    t.push('\n');
    t.push_str("segment 0x7f0000000000 2000MiB frames=@deep\n");
    for _ in 0..2000 {
        t.push_str("  block 1MiB allocated frames=@deep\n");
    }
    for i in 0..5000u64 {
        t.push_str(&format!(
            "alloc 0x{:x} 1MiB frames=@deep\nfree 0x{:x} 1MiB frames=@deep\n",
            0x7f00_0000_0000 + i * 0x10_0000,
            0x7f00_0000_0000 + i * 0x10_0000
        ));
    }
    for protocol in [2, 4] {
        let fx = fixture::parse(&t)
            .unwrap_or_else(|e| panic!("{e}"))
            .with_protocol(protocol);
        let bytes = fx.to_bytes().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            bytes.len() < 2 << 20,
            "{} bytes: frames were not shared",
            bytes.len()
        );
        let s = load_and_stats(&bytes).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.trace.len(), 15_000);
        assert_eq!(s.frames.len(), 5000);
        assert_eq!(s.stacks.len(), 2, "the empty stack and the one deep stack");
        assert!(s.trace.stack.iter().all(|&st| st == s.trace.stack[0]));
        assert!(s.blocks.iter().all(|b| b.stack == s.trace.stack[0]));
    }
}

// ------------------------------------------------------------------ absurd lengths

#[test]
fn absurd_length_prefixes_fail_without_allocating() {
    let huge8: [u64; 4] = [u64::MAX, 1 << 62, 1 << 40, 0x7fff_ffff_ffff_ffff];
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();
    for (name, op) in [
        ("BINUNICODE8", 0x8du8),
        ("BINBYTES8", 0x8e),
        ("BYTEARRAY8", 0x96),
    ] {
        for n in huge8 {
            let mut b = vec![0x80, 5, op];
            b.extend_from_slice(&n.to_le_bytes());
            b.extend_from_slice(b"abc.");
            cases.push((format!("{name} {n}"), b));
        }
    }
    for (name, op) in [
        ("BINUNICODE", b'X'),
        ("BINBYTES", b'B'),
        ("BINSTRING", b'T'),
    ] {
        let mut b = vec![0x80, 2, op];
        b.extend_from_slice(&u32::MAX.to_le_bytes());
        b.extend_from_slice(b"abc.");
        cases.push((format!("{name} 2^32-1"), b));
    }
    for n in [i32::MAX, 1 << 30, -1] {
        let mut b = vec![0x80, 2, 0x8b];
        b.extend_from_slice(&n.to_le_bytes());
        b.extend_from_slice(b"\x01\x02.");
        cases.push((format!("LONG4 {n}"), b));
    }
    // a FRAME announcing more than there is
    let mut b = vec![0x80, 4, 0x95];
    b.extend_from_slice(&u64::MAX.to_le_bytes());
    b.extend_from_slice(b"}.");
    cases.push(("FRAME 2^64-1 then a tiny pickle".into(), b));
    for (what, bytes) in &cases {
        let ((whole, fed, loaded), largest) = largest_allocation(|| {
            let whole = load(bytes);
            let fed = feed_chunks(bytes, || 3);
            let loaded = loader_chunks(bytes, None, || 5);
            (whole, fed, loaded)
        });
        if what.starts_with("FRAME") {
            // FRAME lengths are advisory; the pickle inside is complete
            assert!(
                matches!(whole, Err(DecodeError::NotASnapshot(_))),
                "{what}: {whole:?}"
            );
        } else {
            assert!(whole.is_err(), "{what}: loaded");
            assert!(fed.is_err(), "{what}: fed");
            assert!(loaded.is_err(), "{what}: Loader");
        }
        assert!(
            largest < 1 << 20,
            "{what}: allocated {largest} bytes at once"
        );
    }
}

// ------------------------------------------------------------------ streaming = whole

/// A fixture big enough for multiple 64 KiB FRAMEs, LONG_BINPUT/LONG_BINGET (memo > 255),
/// APPENDS/SETITEMS batches of 1000, and BINUNICODE strings over 255 bytes.
fn large_fixture() -> String {
    let mut t = String::new();
    for s in 0..400 {
        let long = "x".repeat(if s % 50 == 0 { 300 } else { 1 });
        t.push_str(&format!("stack s{s} \"train{long}.py:{s}:step|model.py:{}:forward|torch/nn/modules/module.py:1747:_call_impl\"\n", s % 7));
    }
    for d in 0..2u64 {
        t.push_str(&format!(
            "device {d}\nsegment 0x7f{d}000000000 1200MiB frames=@s{d}\n"
        ));
        for i in 0..1200u64 {
            let state = ["allocated", "inactive", "pending_free"][(i % 3) as usize];
            t.push_str(&format!(
                "  block 1MiB {state} requested={} frames=@s{}\n",
                1_000_000 + i,
                i % 400
            ));
        }
        for i in 0..1500u64 {
            let addr = 0x7f00_0000_0000 + (d << 36) + i * 0x10_0000;
            t.push_str(&format!(
                "alloc a{i} 0x{addr:x} {} frames=@s{} stream={}\n",
                4096 + i,
                (i * 7) % 400,
                i % 3
            ));
            if i % 2 == 0 {
                t.push_str(&format!("free a{i}\n"));
            }
        }
    }
    t
}

#[test]
fn streaming_in_random_chunks_equals_whole_decode() {
    let mut rng = Rng(7);
    let mut inputs: Vec<(String, Vec<u8>)> = Vec::new();
    let large = fixture::parse(&large_fixture()).unwrap_or_else(|e| panic!("{e}"));
    for p in 2..=5 {
        inputs.push((
            format!("large p{p}"),
            large
                .clone()
                .with_protocol(p)
                .to_bytes()
                .unwrap_or_default(),
        ));
        inputs.push((
            format!("p4_snapshot as p{p}"),
            built_as("p4_snapshot", Form::Snapshot, p),
        ));
    }
    for name in [
        "torch20_legacy",
        "segments_list",
        "multi_device",
        "oddities",
        "actions",
    ] {
        inputs.push((name.to_string(), built(name)));
    }
    let large_p4 = inputs.first().map(|(_, b)| b.len()).unwrap_or(0);
    assert!(
        large_p4 > 200 * 1024,
        "the large fixture must span several FRAMEs ({large_p4} bytes)"
    );
    for (what, bytes) in &inputs {
        let whole = load_and_stats(bytes).unwrap_or_else(|e| panic!("{what}: {e}"));
        let want = fingerprint(&whole);
        for round in 0..6 {
            let max = [1usize, 2, 9, 100, 4096, 70_000][round];
            let fed = feed_chunks(bytes, || rng.below(max) + 1)
                .unwrap_or_else(|e| panic!("{what}: feed: {e}"));
            assert_eq!(
                fingerprint(&fed),
                want,
                "{what}: feed with chunks up to {max}"
            );
            let total = if round % 2 == 0 {
                Some(bytes.len() as u64)
            } else {
                None
            };
            let loaded = loader_chunks(bytes, total, || rng.below(max) + 1)
                .unwrap_or_else(|e| panic!("{what}: Loader: {e}"));
            assert_eq!(
                fingerprint(&loaded),
                want,
                "{what}: Loader with chunks up to {max}"
            );
        }
    }
    // 400 distinct frames (each a memoized dict) push the memo past 255: LONG_BINPUT/GET
    let s = load(&inputs[0].1).unwrap_or_else(|e| panic!("{e}"));
    assert!(s.frames.len() >= 400);
    assert_eq!(s.trace.len(), 2 * (1500 + 2 * 750));
    assert_eq!(s.blocks.len(), 2400);
}

/// Chunks larger than the loader's first stitch (4 KiB) with opcodes longer than that cut at
/// their boundaries: the leftover is finished by doubling bites of the next chunk.
#[test]
fn long_opcodes_cut_by_large_chunks_load_the_same() {
    let long = "x".repeat(50_000);
    let mut text = format!("stack big {long}.py:1:f|train.py:2:step\n");
    for i in 0..400u64 {
        text.push_str(&format!(
            "alloc t{i} {:#x} {}KiB frames=@big\n",
            0x7f00_0000_0000u64 + i * 0x10_0000,
            1 + i % 7
        ));
        if i % 3 == 0 {
            text.push_str(&format!("free t{i}\n"));
        }
    }
    let bytes = match memlens_fixture::build(&text) {
        Ok(b) => b,
        Err(e) => panic!("fixture: {e}"),
    };
    let whole = match memlens_core::load(&bytes) {
        Ok(s) => fingerprint(&s),
        Err(e) => panic!("whole load: {e}"),
    };
    for chunk in [4095, 4097, 6000, 20_000, 70_000] {
        for total in [None, Some(bytes.len() as u64)] {
            match loader_chunks(&bytes, total, || chunk) {
                Ok(s) => assert_eq!(fingerprint(&s), whole, "chunks of {chunk}"),
                Err(e) => panic!("chunks of {chunk}: {e}"),
            }
        }
    }
}
