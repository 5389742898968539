//! The fixture language's own tests: numbers and frames, every form and protocol loading the
//! same, memo sharing, legacy shapes, errors that name the line, no panics on random text.

use crate::tokenize::{parse_frame, parse_int, parse_size};
use crate::{build, html_page, parse, FixtureError, Form, DEFAULT_CLOCK_STEP_US, DEFAULT_CLOCK_US};
use memlens_core::model::BlockState;
use memlens_core::trace::Action;

fn load(text: &str) -> memlens_core::Snapshot {
    let bytes = build(text).unwrap_or_else(|e| panic!("{e}"));
    memlens_core::load(&bytes).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn sizes_and_numbers() {
    assert_eq!(parse_size("4MiB"), Some(4 << 20));
    assert_eq!(parse_size("1.5MiB"), Some(3 << 19));
    assert_eq!(parse_size("512"), Some(512));
    assert_eq!(parse_size("0x200000"), Some(2 << 20));
    assert_eq!(parse_size("2KB"), Some(2000));
    assert_eq!(parse_size("1.0000001KiB"), None);
    assert_eq!(parse_size("-1"), None);
    assert_eq!(parse_size("4 MiB"), None);
    assert_eq!(parse_int("-0x10"), Some(-16));
    assert_eq!(parse_int("1_000"), Some(1000));
}

#[test]
fn frames_split_at_the_line_number() {
    let f = parse_frame("a.cpp:0:c10::foo(int, long)").unwrap_or_else(|| panic!("no frame"));
    assert_eq!(
        (f.filename.as_str(), f.line, f.name.as_str()),
        ("a.cpp", 0, "c10::foo(int, long)")
    );
    let f = parse_frame("C:/x.py:12:<module>").unwrap_or_else(|| panic!("no frame"));
    assert_eq!((f.filename.as_str(), f.line), ("C:/x.py", 12));
    assert!(parse_frame("train.py:forward").is_none());
}

#[test]
fn every_form_and_protocol_loads_the_same() {
    let text = "stack s train.py:10:forward|model.py:5:fwd\n\
                segment 0x7f0000000000 20MiB stream=0 frames=@s\n\
                block 4MiB allocated requested=4000000 frames=@s\n\
                block rest inactive\n\
                alloc a 0x7f0000000000 4000000 frames=@s\n\
                alloc b 0x7f0000400000 1MiB frames=@s\n\
                free b\n";
    let fx = parse(text).unwrap_or_else(|e| panic!("{e}"));
    for form in [
        Form::Snapshot,
        Form::Json,
        Form::TracePlot,
        Form::SegmentPlot,
    ] {
        for p in 2..=5 {
            let bytes = fx
                .clone()
                .with_protocol(p)
                .with_form(form)
                .to_bytes()
                .unwrap_or_else(|e| panic!("{e}"));
            let s = memlens_core::load(&bytes).unwrap_or_else(|e| panic!("{form:?} p{p}: {e}"));
            assert_eq!(s.segments.len(), 1);
            assert_eq!(s.blocks.len(), 2);
            assert_eq!(s.blocks[1].size_bytes, 16 << 20);
            assert_eq!(s.blocks[0].requested_size_bytes, 4_000_000);
            assert_eq!(s.trace.len(), 4);
            assert_eq!(s.trace.action[3], Action::FreeCompleted);
            assert_eq!(s.trace.time_us[1], DEFAULT_CLOCK_US + DEFAULT_CLOCK_STEP_US);
            assert_eq!(s.stacks.get(s.blocks[0].stack).len(), 2);
            assert!(s.warnings.is_empty(), "{:?}", s.warnings);
        }
    }
}

#[test]
fn shared_frame_lists_are_written_once() {
    let one = "stack s train.py:10:forward|model.py:5:fwd\nalloc a 0x1000 512 frames=@s\n";
    let two = format!("{one}alloc b 0x2000 512 frames=@s\nalloc c 0x3000 512 frames=train.py:10:forward|model.py:5:fwd\n");
    let a = build(one).unwrap_or_default();
    let b = build(&two).unwrap_or_default();
    // two more entries, each a dict of small ints and memo references: far less than the frames
    assert!(b.len() < a.len() + 2 * 60, "{} vs {}", b.len(), a.len());
    let s = load(&two);
    assert_eq!(s.trace.stack[0], s.trace.stack[2]);
    assert_eq!(s.stacks.get(s.trace.stack[0]).len(), 2);
}

#[test]
fn legacy_blocks_have_history_and_no_address() {
    let s = load("legacy\nsegment 0x7f0000000000 2MiB\nblock 1MiB allocated requested=1000000 frames=a.py:1:f\nblock rest inactive\nalloc 0x7f0000000000 1000000\n");
    assert!(s.blocks[0].legacy);
    assert_eq!(s.blocks[0].address, 0x7f00_0000_0000);
    assert_eq!(s.blocks[1].address, 0x7f00_0010_0000);
    assert_eq!(s.blocks[0].requested_size_bytes, 1_000_000);
    assert_eq!(s.trace.time_of(0), None);
    assert_eq!(s.blocks[0].state, BlockState::ActiveAllocated);
}

#[test]
fn errors_name_the_line() {
    let cases: &[(&str, FixtureError)] = &[
        (
            "\n\nfrobnicate",
            FixtureError::UnknownCommand {
                line: 3,
                word: "frobnicate".into(),
            },
        ),
        (
            "block 1MiB inactive",
            FixtureError::BlockOutsideSegment { line: 1 },
        ),
        (
            "free x",
            FixtureError::UnknownName {
                line: 1,
                name: "x".into(),
            },
        ),
        (
            "alloc a 0x10 4XiB",
            FixtureError::Bad {
                line: 1,
                what: "size",
                text: "4XiB".into(),
            },
        ),
        (
            "alloc a 0x10 4 colour=red",
            FixtureError::UnknownOption {
                line: 1,
                command: "alloc".into(),
                key: "colour".into(),
            },
        ),
        (
            "alloc a 0x10 4 frames=@nope",
            FixtureError::UnknownStack {
                line: 1,
                name: "nope".into(),
            },
        ),
        (
            "annotate a \"open",
            FixtureError::UnterminatedQuote { line: 1 },
        ),
        (
            "protocol 7",
            FixtureError::Bad {
                line: 1,
                what: "protocol (2..5)",
                text: "7".into(),
            },
        ),
        (
            "segment 0x0 1MiB\nblock 1MiB inactive\nblock rest inactive",
            FixtureError::Invalid {
                line: 3,
                what: "`block rest`: the blocks above already fill the segment of line 1".into(),
            },
        ),
        (
            "oom 1MiB",
            FixtureError::Missing {
                line: 1,
                command: "oom".into(),
                what: "device_free=",
            },
        ),
        (
            "snapshot 12",
            FixtureError::Extra {
                line: 1,
                command: "snapshot".into(),
                text: "12".into(),
            },
        ),
    ];
    for (text, want) in cases {
        assert_eq!(parse(text).err().as_ref(), Some(want), "{text}");
    }
}

#[test]
fn random_text_gives_errors_not_panics() {
    let words = [
        "segment",
        "block",
        "alloc",
        "free",
        "free_requested",
        "free_completed",
        "segment_map",
        "oom",
        "snapshot",
        "annotate",
        "event",
        "stack",
        "setting",
        "region",
        "device",
        "devices",
        "clock",
        "protocol",
        "form",
        "legacy",
        "a",
        "b",
        "rest",
        "allocated",
        "inactive",
        "pending_free",
        "0x7f00",
        "18446744073709551615",
        "1.5MiB",
        "-1",
        "99999999999999999999999",
        "9223372036854775807GiB",
        "frames=x.py:1:f|y.py:2:g",
        "frames=@s",
        "frames=",
        "device_free=1",
        "pool=1,-2",
        "stream=",
        "time=-5",
        "\"q",
        "#",
        "=",
        "==",
        "é",
        "expandable",
    ];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..3000 {
        let mut text = String::new();
        for _ in 0..(next() % 6) {
            for _ in 0..(next() % 7) {
                text.push_str(words[(next() % words.len() as u64) as usize]);
                text.push(if next() % 5 == 0 { '"' } else { ' ' });
            }
            text.push('\n');
        }
        if let Ok(fx) = parse(&text) {
            for form in [Form::Snapshot, Form::Json, Form::Segments] {
                let bytes = fx
                    .clone()
                    .with_form(form)
                    .to_bytes()
                    .unwrap_or_else(|e| panic!("{text:?}: {e}"));
                // whatever the text, the bytes are well-formed (a snapshot or a clean refusal)
                let _ = memlens_core::load(&bytes);
                assert!(
                    memlens_core::raw::decode(&bytes).is_ok(),
                    "{text:?} wrote undecodable {form:?}"
                );
            }
        }
    }
}

#[test]
fn html_is_padded_like_upstream() {
    for n in 0..6usize {
        let page = html_page(&vec![b'.'; n], "Active Memory Timeline");
        let inner = memlens_core::raw::html::extract_pickle(page.as_bytes()).unwrap_or_default();
        assert_eq!(inner.len() % 3, 0);
        assert!(inner.len() > n && inner.len() <= n + 3);
        let b64 = page
            .split("\"base64\": \"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("=");
        assert!(!b64.contains('='), "{b64}");
        assert!(page.contains("add_local_files(local_files, 'Active Memory Timeline')"));
    }
}
