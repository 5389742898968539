//! Colourings on small JSON snapshots: each mode gives the index and legend its rule says.

use super::*;
use crate::layout::paint::Style;
use crate::layout::{
    render_timeline, BandFilter, RecordingPainter, RenderOptions, TimelineKind, Viewport,
};

fn layout_of(entries: &str) -> (Snapshot, TimelineLayout) {
    let text = format!(r#"{{"segments":[],"device_traces":[[{entries}]]}}"#);
    let snap = crate::load(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    let l = TimelineLayout::build(&snap, 0, TimelineKind::Active);
    (snap, l)
}

fn alloc(addr: u64, size: u64, stream: u64, meta: &str) -> String {
    format!(
        r#"{{"action":"alloc","addr":{addr},"size":{size},"stream":{stream},"user_metadata":"{meta}","frames":[{{"filename":"/x/model.py","line":1,"name":"fwd"}}]}}"#
    )
}

fn free(addr: u64, size: u64) -> String {
    format!(r#"{{"action":"free_completed","addr":{addr},"size":{size},"stream":0}}"#)
}

#[test]
fn stack_is_element_number_mod_ten() {
    let e: Vec<String> = (0..12).map(|i| alloc(i * 4096, 512, 0, "")).collect();
    let (s, l) = layout_of(&e.join(","));
    let c = colour(&s, 0, &l, ColourBy::Stack);
    assert_eq!(c.index, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]);
}

#[test]
fn stream_colours_by_bytes_held_and_names_the_streams() {
    let e = [
        alloc(0, 100, 7, ""),
        alloc(4096, 1000, 0, ""),
        alloc(8192, 10, 7, ""),
    ];
    let (s, l) = layout_of(&e.join(","));
    let c = colour(&s, 0, &l, ColourBy::Stream);
    // Stream 0 holds more bytes: first colour.
    assert_eq!(c.index, [1, 0, 1]);
    let labels: Vec<&str> = c.legend.iter().map(|l| l.label.as_str()).collect();
    assert_eq!(labels, ["default stream", "stream 0x7"]);
}

#[test]
fn more_than_ten_values_share_the_last_colour() {
    let e: Vec<String> = (0..12)
        .map(|i| alloc(i * 4096, 1000 - i, 0, &format!("tag{i}")))
        .collect();
    let (s, l) = layout_of(&e.join(","));
    let c = colour(&s, 0, &l, ColourBy::Metadata);
    assert_eq!(c.index, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9]);
    assert_eq!(c.legend.len(), 10);
    assert_eq!(c.legend[0].label, "tag0");
    assert_eq!(c.legend[9].label, "3 others");
}

#[test]
fn size_and_age_are_ramps_from_dark_to_light() {
    let e = [
        alloc(0, 1 << 10, 0, ""),
        alloc(1 << 20, 1 << 20, 0, ""),
        alloc(1 << 30, 1 << 30, 0, ""),
    ];
    let (s, l) = layout_of(&e.join(","));
    let c = colour(&s, 0, &l, ColourBy::Size);
    let first = CATEGORICAL_LEN;
    let last = CATEGORICAL_LEN + RAMP_LEN - 1;
    assert_eq!(c.index, [first, first + RAMP_LEN / 2, last]);
    assert_eq!(c.legend.len(), RAMP_LEN as usize);
    assert_eq!(c.legend[0].label, "≥ 1 KiB");
    let a = colour(&s, 0, &l, ColourBy::Age);
    assert!(a.index.windows(2).all(|w| w[0] <= w[1]), "{:?}", a.index);
    assert_eq!(a.index.first(), Some(&first));
}

#[test]
fn ledger_colours_follow_the_classifier() {
    // A temporary (freed at once), a `grad` by user_metadata, and one held before the trace.
    let e = [
        alloc(0, 4096, 0, ""),
        free(0, 4096),
        alloc(8192, 4096, 0, "grad of w"),
        free(1 << 20, 4096),
    ];
    let (s, l) = layout_of(&e.join(","));
    let c = colour(&s, 0, &l, ColourBy::Ledger);
    let class_at = |e: usize| c.legend[c.index[e] as usize].label.clone();
    let by_addr = |a: u64| {
        (0..l.elements.len())
            .find(|&e| l.elements.addr[e] == a)
            .unwrap_or_else(|| panic!("no element at {a:#x}"))
    };
    assert_eq!(class_at(by_addr(0)), "temporary");
    assert_eq!(class_at(by_addr(8192)), "gradients");
    assert_eq!(class_at(by_addr(1 << 20)), "before trace");
}

#[test]
fn keys_round_trip() {
    for c in ColourBy::ALL {
        assert_eq!(ColourBy::from_key(c.key()), Some(c));
    }
    assert_eq!(ColourBy::from_key("nope"), None);
}

#[test]
fn the_renderer_draws_each_band_in_its_colour_and_leaves_out_the_filtered() {
    // Two big allocations: one freed, one never freed.
    let e = [
        alloc(0, 1 << 20, 0, ""),
        alloc(1 << 20, 1 << 20, 7, ""),
        free(0, 1 << 20),
    ];
    let (s, l) = layout_of(&e.join(","));
    let c = colour(&s, 0, &l, ColourBy::Stream);
    let vp = Viewport::fit(&l, 0.0, l.x_end() as f64, 300.0, 200.0);
    let draw = |filter: BandFilter| {
        let mut p = RecordingPainter::default();
        let opts = RenderOptions {
            colours: Some(&c.index),
            filter,
            ..Default::default()
        };
        render_timeline(&l, &vp, opts, &mut p);
        p
    };
    let p = draw(BandFilter::default());
    assert!(!p.of(Style::Band(c.index[0])).is_empty());
    assert!(!p.of(Style::Band(c.index[1])).is_empty());
    assert_ne!(c.index[0], c.index[1]);
    let p = draw(BandFilter {
        hide_never_freed: true,
        ..Default::default()
    });
    assert!(p.of(Style::Band(c.index[1])).is_empty());
    assert!(!p.of(Style::Band(c.index[0])).is_empty());
    let p = draw(BandFilter {
        min_size_bytes: 2 << 20,
        ..Default::default()
    });
    assert_eq!(p.count(), p.of(Style::Thin).len());
}
