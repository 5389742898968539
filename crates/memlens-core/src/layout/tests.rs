//! Layout tests: stacking, pairing, level of detail and hit testing on small JSON snapshots,
//! plus brute-force invariants on every real snapshot in `../shared/snapshots`.

use super::context::{element_context, tooltip};
use super::render::{BIG_PX, THIN_PX};
use super::*;
use crate::Snapshot;

fn snap(text: &str) -> Snapshot {
    match crate::load(text.as_bytes()) {
        Ok(s) => s,
        Err(e) => panic!("test snapshot does not load: {e}"),
    }
}

fn entry(action: &str, addr: u64, size: u64) -> String {
    format!(
        r#"{{"action":"{action}","addr":{addr},"size":{size},"stream":0,"time_us":{addr},"frames":[{{"filename":"/x/model.py","line":{size},"name":"fwd"}}]}}"#
    )
}

fn trace(entries: &[(&str, u64, u64)], segments: &str) -> Snapshot {
    let e: Vec<String> = entries
        .iter()
        .map(|(a, addr, size)| entry(a, *addr, *size))
        .collect();
    snap(&format!(
        r#"{{"segments":[{segments}],"device_traces":[[{}]]}}"#,
        e.join(",")
    ))
}

/// Bottom offset of every element alive at `x`, recomputed from scratch: the sum of the sizes
/// of the live elements below it in stack order.
fn brute_offsets(l: &TimelineLayout, x: u32) -> Vec<(usize, u64)> {
    let el = &l.elements;
    let mut y = 0u64;
    let mut out = Vec::new();
    for e in 0..l.len() {
        if el.start_x[e] <= x && x < el.end_x[e] {
            out.push((e, y));
            y += el.size_bytes[e];
        }
    }
    out
}

/// Totals are exact; offsets are within the piece tolerance (exact below 16 MiB, where neither
/// the tolerance nor `f32` loses anything), and every alive element is hit where it is drawn.
fn check_invariants(l: &TimelineLayout, every: u32) {
    let mut x = 0;
    while x <= l.n_events {
        let live = brute_offsets(l, x);
        let total: u64 = live.iter().map(|&(e, _)| l.elements.size_bytes[e]).sum();
        assert_eq!(l.total_bytes[x as usize], total, "total at x={x}");
        // Hit tests on up to ~16 of the live bands per x (they are the slow part in debug).
        let stride = live.len() / 16 + 1;
        for (i, (e, y)) in live.into_iter().enumerate() {
            let size = l.elements.size_bytes[e];
            let tol = timeline::piece_tolerance(y, size) as f64 + (y as f64) * 1e-7;
            let got = l.offset_at(e, x as f64);
            assert!(
                got.is_some_and(|g| (g - y as f64).abs() <= tol),
                "offset of element {e} at x={x}: {got:?}, exact {y}"
            );
            // Bands taller than the tolerance are hit where they are drawn.
            if let Some(g) = got.filter(|_| size as f64 > 4.0 * tol && i % stride == 0) {
                let mid = g + size as f64 / 2.0;
                assert_eq!(
                    l.hit(x as f64 + 0.5, mid),
                    Some(e),
                    "hit at x={x}, y={mid} (size {size}, exact bottom {y}, total {total})"
                );
            }
        }
        x += every;
    }
}

#[test]
fn free_slides_the_bands_above_down() {
    let s = trace(
        &[
            ("alloc", 0x100, 100),
            ("alloc", 0x200, 200),
            ("alloc", 0x300, 50),
            ("free_requested", 0x100, 100),
            ("free_completed", 0x100, 100),
        ],
        "",
    );
    let l = TimelineLayout::build(&s, 0, TimelineKind::Active);
    assert_eq!(l.n_events, 5);
    assert_eq!(l.len(), 3);
    assert_eq!(l.elements.start_x, [1, 2, 3]);
    assert_eq!(l.elements.end_x, [5, 6, 6]);
    assert_eq!(l.total_bytes, [0, 100, 300, 350, 350, 250]);
    // b sat on a (100) and drops to 0 at the free; c drops from 300 to 200.
    assert_eq!(l.offset_at(1, 4.0), Some(100.0));
    assert_eq!(l.offset_at(1, 5.0), Some(0.0));
    assert_eq!(l.offset_at(2, 5.5), Some(200.0));
    assert_eq!(l.offset_at(0, 5.0), None);
    assert_eq!(l.piece_count(), 3 + 2);
    check_invariants(&l, 1);
    assert_eq!(l.max_total(0.0, 6.0), 350);
    assert_eq!(l.max_total(4.5, 6.0), 350);
    assert_eq!(l.max_total(5.0, 6.0), 250);
}

#[test]
fn memory_from_before_the_trace_starts_at_the_left_edge() {
    // 0x900 is freed but never allocated in the trace; 0x500 is active in the segments and never
    // traced (ghost); 0x100 is allocated and still live (so not a ghost).
    let segs = r#"{"device":0,"address":1280,"total_size":4096,"stream":0,"blocks":[
        {"address":1280,"size":512,"requested_size":500,"state":"active_allocated","frames":[]},
        {"address":1792,"size":3584,"requested_size":0,"state":"inactive","frames":[]}]},
      {"device":0,"address":256,"total_size":1024,"stream":0,"blocks":[
        {"address":256,"size":1024,"requested_size":64,"state":"active_allocated","frames":[]}]}"#;
    let s = trace(&[("alloc", 0x100, 64), ("free_completed", 0x900, 30)], segs);
    let l = TimelineLayout::build(&s, 0, TimelineKind::Active);
    assert_eq!(
        l.elements.kind,
        [
            ElementKind::Allocation(Origin::Untraced),
            ElementKind::Allocation(Origin::UnmatchedFree),
            ElementKind::TRACED
        ]
    );
    assert_eq!(l.elements.start_x, [0, 0, 1]);
    assert_eq!(l.elements.end_x, [3, 2, 3]);
    assert_eq!(l.elements.size_bytes, [500, 30, 64]);
    assert_eq!(l.total_bytes, [530, 594, 564]);
    check_invariants(&l, 1);
    let t = tooltip(&l, TimelineKind::Active, 0).unwrap_or_default();
    assert!(t.contains("ghost block"), "{t}");
    let c = element_context(&s, 0, &l, TimelineKind::Active, 1, false).unwrap_or_default();
    assert_eq!(c.alive, "before the trace → event 1");
    assert!(c.notes.iter().any(|n| n.contains("alloc not recorded")));
    assert_eq!(c.frames, ["/x/model.py:30:fwd"]);
}

#[test]
fn address_reuse_gets_a_new_version() {
    let s = trace(
        &[
            ("alloc", 0x100, 8),
            ("free_completed", 0x100, 8),
            ("alloc", 0x100, 16),
            ("free_completed", 0x100, 16),
        ],
        "",
    );
    let l = TimelineLayout::build(&s, 0, TimelineKind::Active);
    assert_eq!(l.elements.version, [0, 1]);
    let c = element_context(&s, 0, &l, TimelineKind::Active, 1, false).unwrap_or_default();
    assert_eq!(c.label, "b'100_1");
    assert_eq!(c.alive, "event 2 → event 3");
    assert_eq!(c.alloc_time_us, Some(0x100));
    // Stack lookups keep working once the geometry is dropped (what the worker keeps).
    let mut stripped = l.clone();
    stripped.strip_geometry();
    assert!(l.has_geometry() && !stripped.has_geometry());
    assert_eq!(
        element_context(&s, 0, &stripped, TimelineKind::Active, 1, false),
        Some(c)
    );
}

#[test]
fn segments_follow_map_and_unmap() {
    // Expandable segment: map 0x1000+4096, map 0x2000+4096, unmap the middle 0x1800..0x2800.
    let s = trace(
        &[
            ("segment_map", 0x1000, 4096),
            ("segment_map", 0x2000, 4096),
            ("segment_unmap", 0x1800, 4096),
            ("segment_alloc", 0x9000, 100),
            ("segment_free", 0x9000, 100),
        ],
        "",
    );
    let l = TimelineLayout::build(&s, 0, TimelineKind::Segments);
    assert_eq!(l.total_bytes, [0, 4096, 8192, 4096, 4196, 4096]);
    // The two remainders (0x1000..0x1800 and 0x2800..0x3000) live to the end.
    let mut alive_at_end: Vec<u64> = (0..l.len())
        .filter(|&e| l.elements.end_x[e] == l.x_end())
        .map(|e| l.elements.addr[e])
        .collect();
    alive_at_end.sort();
    assert_eq!(alive_at_end, [0x1000, 0x2800]);
    check_invariants(&l, 1);
}

#[test]
fn hit_test_finds_the_band_under_the_pointer() {
    let s = trace(
        &[
            ("alloc", 0x100, 100),
            ("alloc", 0x200, 200),
            ("free_completed", 0x100, 100),
        ],
        "",
    );
    let l = TimelineLayout::build(&s, 0, TimelineKind::Active);
    assert_eq!(l.hit(2.5, 50.0), Some(0));
    assert_eq!(l.hit(2.5, 150.0), Some(1));
    assert_eq!(l.hit(3.5, 150.0), Some(1));
    assert_eq!(l.hit(3.5, 250.0), None);
    assert_eq!(l.hit(0.5, 10.0), None);
    assert_eq!(l.hit(2.5, -1.0), None);
    // Through the viewport: pixel → data → element.
    let vp = Viewport::new(0.0, 4.0, 0.0, 400.0, 400.0, 400.0);
    let (x, y) = (vp.x_data(250.0), vp.y_data(400.0 - 150.0));
    assert_eq!(l.hit(x, y), Some(1));
}

#[test]
fn rectangles_match_the_geometry() {
    let s = trace(
        &[
            ("alloc", 0x100, 100),
            ("alloc", 0x200, 200),
            ("free_completed", 0x100, 100),
        ],
        "",
    );
    let l = TimelineLayout::build(&s, 0, TimelineKind::Active);
    let vp = Viewport::new(0.0, 4.0, 0.0, 400.0, 400.0, 400.0);
    let mut p = RecordingPainter::default();
    let st = render_timeline(
        &l,
        &vp,
        RenderOptions {
            selected: Some(1),
            ..Default::default()
        },
        &mut p,
    );
    assert_eq!(st.elements_visited, 2);
    assert_eq!(p.of(Style::Band(0)), [[100.0, 300.0, 200.0, 100.0]]);
    // Element 1 sits on element 0 until x=3, then drops to the floor.
    assert_eq!(
        p.of(Style::Band(1)),
        [[200.0, 100.0, 100.0, 200.0], [300.0, 200.0, 100.0, 200.0]]
    );
    assert_eq!(p.of(Style::Selected).len(), 2);
    // The underlay follows the live total: 100, 300, 200 bytes over x = 1, 2, 3.
    assert_eq!(
        p.of(Style::Thin),
        [
            [100.0, 300.0, 100.0, 100.0],
            [200.0, 100.0, 100.0, 300.0],
            [300.0, 200.0, 100.0, 200.0]
        ]
    );
    // One painter call per style, the underlay under the bands.
    assert_eq!(p.calls(), 4);
    assert_eq!(p.batches.first().map(|b| b.0), Some(Style::Thin));
}

#[test]
fn bands_too_thin_to_draw_move_only_by_their_coarser_tolerance() {
    // 1000 blocks of 4 KiB at the bottom, then a 100 MB band and 100 bands of 16 bytes on top;
    // the 4 KiB blocks are freed one by one, each moving everything above down.
    let mut ev: Vec<(&str, u64, u64)> = Vec::new();
    for i in 0..1000u64 {
        ev.push(("alloc", 0x100_0000 + i * 4096, 4096));
    }
    ev.push(("alloc", 0x1_0000_0000, 100 << 20));
    for i in 0..100u64 {
        ev.push(("alloc", 0x2_0000_0000 + i * 16, 16));
    }
    for i in 0..1000u64 {
        ev.push(("free_completed", 0x100_0000 + i * 4096, 4096));
    }
    let s = trace(&ev, "");
    let l = TimelineLayout::build(&s, 0, TimelineKind::Active);
    let (big, tiny) = (1000, 1001);
    assert!(!timeline::is_thin(4 << 20, 100 << 20));
    assert!(timeline::is_thin(104 << 20, 16));
    // The big band moves every two frees (its tolerance is 1/16384 of its top, ~6.4 KiB)...
    assert!(l.pieces_of(big).len() >= 400, "{}", l.pieces_of(big).len());
    // ...a 16-byte band once per ~100 (1/256 of its top, ~400 KiB): it can never be a pixel tall.
    assert!(l.pieces_of(tiny).len() <= 12, "{}", l.pieces_of(tiny).len());
    check_invariants(&l, 13);
    // Where a thin band's recorded place overlaps the big band's, hover finds the big one.
    let mut overlaps = 0;
    for x in (1102..2102).map(|x| x as f64 + 0.5) {
        let Some(b0) = l.offset_at(big, x) else {
            continue;
        };
        for t in tiny..tiny + 100 {
            let Some(t0) = l.offset_at(t, x) else {
                continue;
            };
            if t0 + 1.0 < b0 + (100 << 20) as f64 && t0 + 1.0 < l.total_at(x) as f64 {
                overlaps += 1;
                assert_eq!(l.hit(x, t0 + 1.0), Some(big), "x={x}, band {t}");
            }
        }
    }
    assert!(overlaps > 0);
}

#[test]
fn thin_bands_are_left_to_the_underlay_and_narrow_pieces_cost_one_rect_per_column() {
    // 1000 tiny allocations made together and alive to the end, one big one that a thousand
    // frees below it shift, all zoomed out to 100 px.
    let mut ev: Vec<(&str, u64, u64)> = Vec::new();
    for i in 0..1000u64 {
        ev.push(("alloc", 0x10_0000 + i * 16, 1));
    }
    for i in 0..1000u64 {
        ev.push(("alloc", 0x20_0000 + i * 16, 1000));
    }
    ev.push(("alloc", 0x90_0000, 10_000_000));
    for i in 0..1000u64 {
        ev.push(("free_completed", 0x20_0000 + i * 16, 1000));
    }
    let s = trace(&ev, "");
    let l = TimelineLayout::build(&s, 0, TimelineKind::Active);
    let big = 2000;
    assert_eq!(l.pieces_of(big).len(), 1001);
    check_invariants(&l, 97);
    let vp = Viewport::fit(&l, 0.0, l.x_end() as f64, 100.0, 200.0);
    let mut p = RecordingPainter::default();
    let st = render_timeline(&l, &vp, RenderOptions::default(), &mut p);
    // Only the big band is tall enough to be drawn on its own: the index never visits the rest.
    let h_tiny = vp.sy() * 1000.0;
    assert!(h_tiny < THIN_PX);
    assert_eq!(st.elements_visited, 1);
    let big_rects = p.of(Style::Band((big % 10) as u8));
    assert!(
        big_rects.len() <= 35,
        "the big band costs {} rects over ~34 columns",
        big_rects.len()
    );
    // The underlay covers the thin bands: each column reaches the live total there.
    let under = p.of(Style::Thin);
    assert!(
        !under.is_empty() && under.len() <= 100,
        "{} underlay rects",
        under.len()
    );
    for r in &under {
        let (a, b) = (vp.x_data(r[0] as f64), vp.x_data((r[0] + r[2]) as f64));
        let top = vp.y_px(l.max_total(a, b) as f64);
        assert!((r[1] as f64 - top).abs() < 1.0 + 1e-3, "{r:?} vs top {top}");
    }
    // Total draw cost stays near the pixel width, not the 4000 pieces.
    assert!(p.count() < 200, "{} rects", p.count());
}

#[test]
fn churn_in_one_column_costs_one_rect() {
    // 500 short-lived 1 MB allocations at the same height, zoomed out to 10 columns.
    let mut ev: Vec<(&str, u64, u64)> = vec![("alloc", 0x1000, 4_000_000)];
    for i in 0..500u64 {
        ev.push(("alloc", 0x10_0000 + i * 4096, 1_000_000));
        ev.push(("free_completed", 0x10_0000 + i * 4096, 1_000_000));
    }
    let s = trace(&ev, "");
    let l = TimelineLayout::build(&s, 0, TimelineKind::Active);
    let vp = Viewport::fit(&l, 0.0, l.x_end() as f64, 10.0, 100.0);
    // 1 MB is ~20 px here: taller than BIG_PX, so every short-lived one is a coloured spike,
    // but the spikes of one column share their pixels and cost one rectangle.
    assert!(1e6 * vp.sy() > BIG_PX);
    let mut p = RecordingPainter::default();
    render_timeline(&l, &vp, RenderOptions::default(), &mut p);
    let short: usize = (1..=9).map(|c| p.of(Style::Band(c)).len()).sum();
    assert!(
        short <= 10,
        "{short} rects for 500 allocations in 10 columns"
    );
    assert!(short >= 9, "every column still shows the churn ({short})");
    // Zoomed further out (1 MB under BIG_PX and each lifetime under a pixel), the churn is
    // left to the underlay and no short-lived element is even visited.
    let vp = Viewport::fit(&l, 0.0, l.x_end() as f64, 10.0, 12.0);
    assert!(1e6 * vp.sy() < BIG_PX);
    let mut p = RecordingPainter::default();
    let st = render_timeline(&l, &vp, RenderOptions::default(), &mut p);
    assert_eq!(st.elements_visited, 1);
    assert!(p.of(Style::Thin).len() <= 10);
}

#[test]
fn markers_and_regions_are_placed() {
    let text = r#"{"segments":[],"device_traces":[[
        {"action":"alloc","addr":16,"size":8,"stream":0,"time_us":100},
        {"action":"oom","device_free":1024,"size":4096,"stream":0,"time_us":200},
        {"action":"snapshot","addr":0,"size":0,"stream":0,"time_us":300}]],
      "external_annotations":[{"device":0,"time_us":150,"name":"ProfilerStep#3","stage":"START"},
                              {"device":0,"time_us":250,"name":"ProfilerStep#3","stage":"END"}]}"#;
    let s = snap(text);
    let l = TimelineLayout::build(&s, 0, TimelineKind::Active);
    assert_eq!(l.markers.len(), 2);
    assert_eq!(l.markers[0].kind, MarkerKind::Oom);
    assert_eq!(l.markers[0].x, 2);
    assert!(
        l.markers[0].label.contains("requested 4 KiB"),
        "{}",
        l.markers[0].label
    );
    assert_eq!(
        l.regions,
        [Region {
            x0: 1.0,
            x1: 2.0,
            label: "ProfilerStep#3".into()
        }]
    );
    let vp = Viewport::fit(&l, 0.0, 4.0, 400.0, 100.0);
    let mut p = RecordingPainter::default();
    render_timeline(&l, &vp, RenderOptions::default(), &mut p);
    assert_eq!(p.of(Style::MarkerOom), [[200.0, 0.0, 1.0, 100.0]]);
    assert_eq!(p.of(Style::Region), [[100.0, 0.0, 100.0, 100.0]]);
    // Regions are drawn first, under the bands.
    assert_eq!(p.batches.first().map(|b| b.0), Some(Style::Region));
}

#[test]
fn from_parts_round_trips_and_rejects_bad_columns() {
    let s = trace(
        &[
            ("alloc", 0x100, 100),
            ("alloc", 0x200, 200),
            ("free_completed", 0x100, 100),
        ],
        "",
    );
    let l = TimelineLayout::build(&s, 0, TimelineKind::Active);
    let r = TimelineLayout::from_parts(
        l.n_events,
        l.elements.clone(),
        l.piece_start.clone(),
        l.piece_t0.clone(),
        l.piece_y0.clone(),
        l.total_bytes.clone(),
        l.time_us.clone(),
        l.markers.clone(),
        l.regions.clone(),
        vec![],
        l.pools.clone(),
        l.is_monotone(),
    );
    let r = match r {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(r.hit(2.5, 150.0), Some(1));
    assert_eq!(r.max_total(0.0, 4.0), 300);
    let mut bad = l.elements.clone();
    bad.addr.pop();
    assert!(TimelineLayout::from_parts(
        l.n_events,
        bad,
        vec![0; 3],
        vec![],
        vec![],
        vec![0; 4],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        true
    )
    .is_err());
    assert!(TimelineLayout::from_parts(
        3,
        l.elements.clone(),
        vec![0, 9, 1, 1],
        vec![0],
        vec![0.0],
        vec![0; 4],
        vec![],
        vec![],
        vec![],
        vec![],
        vec![],
        true
    )
    .is_err());
}

#[test]
fn real_snapshots_keep_the_invariants() {
    let Some(files) = memlens_fixture::shared_snapshots() else {
        return;
    };
    for f in files {
        let bytes = std::fs::read(&f).unwrap_or_default();
        let Ok(s) = crate::load(&bytes) else { continue };
        for d in s.devices() {
            let st = crate::device_stats(&s, d);
            // Allocated: at least what is active at every x (envelopes hold at least their
            // pools' allocations); exactly it without private pools.
            let al = TimelineLayout::build(&s, d, TimelineKind::Allocated);
            let ac = TimelineLayout::build(&s, d, TimelineKind::Active);
            assert!(
                al.total_bytes
                    .iter()
                    .zip(&ac.total_bytes)
                    .all(|(a, b)| a >= b),
                "{} device {d}: allocated below active",
                f.display()
            );
            let private = al.pools.iter().any(|&p| p != (0, 0));
            if !private {
                assert_eq!(al.total_bytes, ac.total_bytes, "{} device {d}", f.display());
            }
            println!(
                "{} dev {d} Allocated: {} elements ({} private pools)",
                f.file_name().and_then(|n| n.to_str()).unwrap_or("?"),
                al.len(),
                al.pools.iter().filter(|&&p| p != (0, 0)).count()
            );
            for kind in [TimelineKind::Active, TimelineKind::Segments] {
                let l = TimelineLayout::build(&s, d, kind);
                assert_same_sweeps(
                    &l.elements,
                    l.n_events,
                    &format!("{} {kind:?}", f.display()),
                );
                let every = (l.n_events / 200).max(1);
                check_invariants(&l, every);
                // Where the trace agrees with the final segments (non-negative baseline), the live
                // total after the last event is what the segments hold, and the peak is the stats' peak.
                if kind == TimelineKind::Active && st.timeline_baseline_bytes >= 0 {
                    assert_eq!(
                        *l.total_bytes.last().unwrap_or(&0),
                        st.requested_bytes,
                        "{} device {d}",
                        f.display()
                    );
                    if l.warnings.is_empty() {
                        assert_eq!(
                            l.max_total(0.0, l.x_end() as f64) as i64,
                            st.timeline_peak_bytes,
                            "{} device {d}",
                            f.display()
                        );
                    }
                }
                if kind == TimelineKind::Segments && st.reserved_baseline_bytes >= 0 {
                    assert_eq!(
                        *l.total_bytes.last().unwrap_or(&0),
                        st.reserved_bytes,
                        "{} device {d} segments",
                        f.display()
                    );
                    assert_eq!(
                        l.max_total(0.0, l.x_end() as f64) as i64,
                        st.peak_reserved_bytes,
                        "{} device {d} segments",
                        f.display()
                    );
                }
                let vp = Viewport::fit(&l, 0.0, l.x_end() as f64, 1000.0, 500.0);
                let mut p = RecordingPainter::default();
                let r = render_timeline(&l, &vp, RenderOptions::default(), &mut p);
                println!(
                    "{} dev {d} {kind:?}: {} elements, {} pieces, {} rects at 1000 px",
                    f.file_name().and_then(|n| n.to_str()).unwrap_or("?"),
                    l.len(),
                    l.piece_count(),
                    r.rects
                );
            }
        }
    }
}

#[test]
fn search_by_address_and_frame_counts_and_marks_matches() {
    let text = r#"{"segments":[],"device_traces":[[
        {"action":"alloc","addr":4096,"size":100,"stream":0,"time_us":10,"frames":[{"filename":"/m/model.py","line":3,"name":"forward"}]},
        {"action":"alloc","addr":8192,"size":200,"stream":0,"time_us":20,"frames":[{"filename":"/m/optim.py","line":9,"name":"step"},{"filename":"ceval.c","line":1,"name":"forward"}]},
        {"action":"free_completed","addr":4096,"size":100,"stream":0,"time_us":30,"frames":[]},
        {"action":"alloc","addr":4096,"size":50,"stream":0,"time_us":40,"frames":[{"filename":"/m/model.py","line":3,"name":"forward"}]}]]}"#;
    let s = snap(text);
    let l = TimelineLayout::build(&s, 0, TimelineKind::Active);
    let idx = SearchIndex::new(&s);
    let labels = AddressLabels::new(&l.elements);
    let run = |a: &str, f: &str| -> Vec<usize> {
        let q = SearchQuery::new(a, f).ok().flatten().unwrap_or_default();
        Matches::new(&l, idx.search(&s, &l.elements, &labels, &q))
            .iter()
            .collect()
    };
    // Labels are b'1000_0, b'2000_0, b'1000_1.
    assert_eq!(run("0x1000", ""), [0, 2]);
    assert_eq!(run("b'1000_1", ""), [2]);
    assert_eq!(run("2000", ""), [1]);
    assert_eq!(run("", "MODEL.py"), [0, 2]);
    // `forward` in ceval.c is an interpreter frame upstream hides: not searched.
    assert_eq!(run("", "forward"), [0, 2]);
    assert_eq!(run("", "optim.py:9:step"), [1]);
    // Both boxes: both must match.
    assert_eq!(run("1000", "optim"), Vec::<usize>::new());
    assert!(SearchQuery::new("xyz", "").is_err());
    assert_eq!(SearchQuery::new(" ", ""), Ok(None));
    // A regular expression finds what the substring finds, and more.
    let re = |a: &str, f: &str| -> Vec<usize> {
        let q = SearchQuery::with_regex(a, f)
            .ok()
            .flatten()
            .unwrap_or_default();
        Matches::new(&l, idx.search(&s, &l.elements, &labels, &q))
            .iter()
            .collect()
    };
    assert_eq!(re("", "model\\.py"), run("", "model.py"));
    assert_eq!(re("", "^/m/(model|optim)\\.py:\\d+:"), [0, 1, 2]);
    assert_eq!(re("", "STEP$"), [1]);
    assert_eq!(re("1000", "forward"), [0, 2]);
    match SearchQuery::with_regex("", "model(") {
        Err(e) => assert!(e.to_string().starts_with("not a regular expression"), "{e}"),
        Ok(q) => panic!("a bad pattern was accepted: {q:?}"),
    }
    // Patterns too large to compile are refused, not built.
    assert!(SearchQuery::with_regex("", "((a{1000}){1000}){1000}").is_err());

    // The rug marks where matches are alive; drawn matches are outlined.
    let q = SearchQuery::new("", "optim")
        .ok()
        .flatten()
        .unwrap_or_default();
    let m = Matches::new(&l, idx.search(&s, &l.elements, &labels, &q));
    assert_eq!(m.count(), 1);
    assert!(!m.any_alive(0.0, 2.0) && m.any_alive(2.0, 3.0) && m.any_alive(4.0, 5.0));
    let vp = Viewport::fit(&l, 0.0, l.x_end() as f64, 500.0, 350.0);
    let mut p = RecordingPainter::default();
    render_timeline(
        &l,
        &vp,
        RenderOptions {
            matches: Some(&m),
            ..Default::default()
        },
        &mut p,
    );
    assert_eq!(p.of(Style::MatchRug), [[200.0, 0.0, 300.0, render::RUG_PX]]);
    let outlined = p.of(Style::Match);
    assert_eq!(outlined, p.of(Style::Band(1)));
    assert!(!outlined.is_empty());
}

#[test]
fn the_time_axis_spaces_events_by_their_time() {
    // Events at 0, 10, 10, 1000 µs: the last gap takes almost the whole width.
    let s = trace(
        &[
            ("alloc", 0x100, 100),
            ("alloc", 0x200, 200),
            ("free_completed", 0x200, 200),
            ("alloc", 0x3e8, 300),
        ],
        "",
    );
    let mut l = TimelineLayout::build(&s, 0, TimelineKind::Active);
    assert_eq!(l.time_us, [0x100, 0x200, 0x200, 0x3e8]);
    l.time_us = vec![0, 10, 10, 1000];
    let tm = std::sync::Arc::new(TimeMap::new(&l.time_us).unwrap_or_else(|| panic!("no map")));
    assert_eq!(tm.u(1.0), 0.0);
    assert_eq!(tm.u(1.5), 5.0);
    assert_eq!(tm.u(2.5), 10.0);
    assert_eq!(tm.u(4.0), 1000.0);
    assert_eq!(tm.x(5.0), 1.5);
    // Events 2 and 3 share a time: the smallest x at that time is event 2's.
    assert_eq!(tm.x(10.0), 2.0);
    for x in [0.0, 0.5, 1.0, 1.7, 3.0, 4.5, 5.0] {
        assert!(
            (tm.x(tm.u(x)) - x).abs() < 1e-9 || x == 3.0,
            "round trip at {x}"
        );
    }
    let vp = Viewport::fit(&l, 1.0, 4.0, 1000.0, 100.0).with_time(Some(tm.clone()));
    assert_eq!(vp.x_px(1.0), 0.0);
    assert_eq!(vp.x_px(2.0), 10.0);
    assert_eq!(vp.x_px(4.0), 1000.0);
    assert_eq!(vp.x_data(500.0), 3.0 + 490.0 / 990.0);
    // Element 0 lives [1, 5): on screen from 0 px to the right edge.
    let mut p = RecordingPainter::default();
    render_timeline(&l, &vp, RenderOptions::default(), &mut p);
    let b0 = p.of(Style::Band(0));
    assert_eq!(b0.first().map(|r| r[0]), Some(0.0));
    assert!(b0.iter().map(|r| r[0] + r[2]).fold(0.0, f32::max) >= 999.0);
    // Element 1 lives [2, 3): 10 µs → 0 µs wide on this axis... it was freed at the same
    // time_us it was allocated at, so it takes one narrow column.
    assert!(p.of(Style::Band(1)).iter().all(|r| r[2] <= 1.0));
    // Without times there is no map.
    assert!(TimeMap::new(&[]).is_none());
}

#[test]
fn private_pools_stack_inside_envelopes_that_follow_reserved_memory() {
    // Pool (1, 42) holds a 4096-byte segment at 0x10000 in the snapshot, maps 8192 more bytes
    // at event 5 and frees them at event 6; the default pool's allocations sit around it.
    let text = r#"{"segments":[
        {"device":0,"address":65536,"total_size":4096,"stream":0,"segment_pool_id":[1,42],"blocks":[
            {"address":65536,"size":1024,"requested_size":0,"state":"inactive","frames":[]},
            {"address":66560,"size":512,"requested_size":500,"state":"active_allocated","frames":[]},
            {"address":67072,"size":2560,"requested_size":0,"state":"inactive","frames":[]}]},
        {"device":0,"address":1048576,"total_size":1024,"stream":0,"segment_pool_id":[0,0],"blocks":[
            {"address":1048576,"size":256,"requested_size":100,"state":"active_allocated","frames":[]},
            {"address":1048832,"size":768,"requested_size":50,"state":"active_allocated","frames":[]}]}],
      "device_traces":[[
        {"action":"alloc","addr":1048576,"size":100,"stream":0,"time_us":1},
        {"action":"alloc","addr":65536,"size":1000,"stream":0,"time_us":2},
        {"action":"alloc","addr":1048832,"size":50,"stream":0,"time_us":3},
        {"action":"alloc","addr":66560,"size":500,"stream":0,"time_us":4},
        {"action":"free_completed","addr":65536,"size":1000,"stream":0,"time_us":5},
        {"action":"segment_alloc","addr":131072,"size":8192,"stream":0,"time_us":6,"pool_id":[1,42]},
        {"action":"segment_free","addr":131072,"size":8192,"stream":0,"time_us":7,"pool_id":[1,42]}]]}"#;
    let s = snap(text);
    let active = TimelineLayout::build(&s, 0, TimelineKind::Active);
    assert_eq!(
        active.total_bytes,
        [0, 100, 1100, 1150, 1650, 650, 650, 650]
    );
    let l = TimelineLayout::build(&s, 0, TimelineKind::Allocated);
    // The pool reserves 4096 bytes from the start, 12288 while the extra segment lives.
    assert_eq!(
        l.total_bytes,
        [4096, 4196, 4196, 4246, 4246, 4246, 12438, 4246]
    );
    let by_addr = |a: u64| {
        (0..l.len())
            .find(|&e| l.elements.addr[e] == a && l.elements.kind[e] != ElementKind::PoolEnvelope)
            .unwrap_or(usize::MAX)
    };
    let (d0, p0, d1, p1) = (
        by_addr(0x10_0000),
        by_addr(0x1_0000),
        by_addr(0x10_0100),
        by_addr(0x1_0400),
    );
    // Default-pool allocations sit above the envelope and follow its height.
    assert_eq!(l.offset_at(d0, 1.5), Some(4096.0));
    assert_eq!(l.offset_at(d1, 3.5), Some(4196.0));
    assert_eq!(l.offset_at(d1, 6.5), Some(12388.0));
    assert_eq!(l.offset_at(d1, 7.5), Some(4196.0));
    // Pool allocations stack inside it from its bottom, and slide down within it.
    assert_eq!(l.offset_at(p0, 2.5), Some(0.0));
    assert_eq!(l.offset_at(p1, 4.5), Some(1000.0));
    assert_eq!(l.offset_at(p1, 5.5), Some(0.0));
    // One envelope element per height: 4096 until event 5, 12288, then 4096 again.
    let env: Vec<(u32, u32, u64)> = (0..l.len())
        .filter(|&e| l.elements.kind[e] == ElementKind::PoolEnvelope)
        .map(|e| {
            (
                l.elements.start_x[e],
                l.elements.end_x[e],
                l.elements.size_bytes[e],
            )
        })
        .collect();
    assert_eq!(env, [(0, 6, 4096), (6, 7, 12288), (7, 8, 4096)]);
    assert_eq!(l.pools.len(), 2);
    // Elements stay in start order.
    assert!(l.elements.start_x.windows(2).all(|w| w[0] <= w[1]));
    // The pointer finds the allocation inside the envelope, else the envelope.
    assert_eq!(l.hit(5.5, 250.0), Some(p1));
    let e_env = l.hit(5.5, 3000.0).unwrap_or(usize::MAX);
    assert_eq!(l.elements.kind.get(e_env), Some(&ElementKind::PoolEnvelope));
    let tip = tooltip(&l, TimelineKind::Allocated, e_env).unwrap_or_default();
    assert!(tip.contains("private pool (1, 42) stream 0"), "{tip}");
    let c = element_context(&s, 0, &l, TimelineKind::Allocated, p1, false).unwrap_or_default();
    assert!(
        c.notes
            .iter()
            .any(|n| n == "pool_id (1, 42) (private pool)"),
        "{:?}",
        c.notes
    );
    // Envelopes are drawn in their own style, under the bands.
    let vp = Viewport::fit(&l, 0.0, l.x_end() as f64, 800.0, 400.0);
    let mut p = RecordingPainter::default();
    render_timeline(&l, &vp, RenderOptions::default(), &mut p);
    assert_eq!(p.of(Style::PoolEnvelope).len(), 3);
    let order: Vec<Style> = p.batches.iter().map(|b| b.0).collect();
    let pos = |st: Style| order.iter().position(|&x| x == st).unwrap_or(usize::MAX);
    assert!(pos(Style::PoolEnvelope) < pos(Style::Band((p1 % 10) as u8)));
}

#[test]
fn without_private_pools_allocated_is_active() {
    let s = trace(
        &[
            ("alloc", 0x100, 100),
            ("alloc", 0x200, 200),
            ("free_completed", 0x100, 100),
            ("alloc", 0x300, 50),
        ],
        "",
    );
    let a = TimelineLayout::build(&s, 0, TimelineKind::Active);
    let b = TimelineLayout::build(&s, 0, TimelineKind::Allocated);
    assert_eq!(a.total_bytes, b.total_bytes);
    assert_eq!(a.elements, b.elements);
    assert_eq!(
        (a.piece_t0.clone(), a.piece_y0.clone()),
        (b.piece_t0.clone(), b.piece_y0.clone())
    );
}

/// A deterministic churn of `n` events: many small blocks, some large, freed in random order.
fn churn(n: usize, seed: u64) -> Vec<(&'static str, u64, u64)> {
    let mut rng = seed;
    let mut next = || {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        rng >> 33
    };
    let (mut live, mut ev, mut addr) = (Vec::new(), Vec::with_capacity(n), 0x1000u64);
    while ev.len() < n {
        if live.is_empty() || next() % 100 < 52 {
            let size = if next() % 50 == 0 {
                (1 + next() % 64) << 20
            } else {
                512 * (1 + next() % 64)
            };
            addr += 0x1_0000_0000;
            live.push((addr, size));
            ev.push(("alloc", addr, size));
        } else {
            let (a, s) = live.swap_remove(next() as usize % live.len());
            ev.push(("free_completed", a, s));
        }
    }
    ev
}

/// Element `e` of a preview sits within twice its piece tolerance of the exact layout at `x`.
fn assert_placed_as(preview: &TimelineLayout, exact: &TimelineLayout, e: usize, x: u32) {
    let (Some(a), Some(b)) = (
        preview.offset_at(e, x as f64 + 0.5),
        exact.offset_at(e, x as f64 + 0.5),
    ) else {
        panic!("element {e} has no place at x={x}");
    };
    let size = exact.elements.size_bytes[e];
    let tol = 2.0 * timeline::piece_tolerance(b as u64, size) as f64 + (b + size as f64) * 1e-6;
    assert!(
        (a - b).abs() <= tol,
        "element {e} at x={x}: preview {a}, exact {b}"
    );
}

#[test]
fn preview_places_the_drawable_bands_as_the_exact_layout_does() {
    let s = trace(&churn(3000, 7), "");
    let l = TimelineLayout::build(&s, 0, TimelineKind::Active);
    let stacking::Stacked {
        piece_start: start,
        piece_t0: t0,
        piece_y0: y0,
        total_bytes: total,
        warnings: warn,
    } = timeline::stack_preview(&l.elements, l.n_events);
    assert_eq!(total, l.total_bytes);
    assert!(warn.is_empty());
    let peak = total.iter().copied().max().unwrap_or(0);
    let p = TimelineLayout::from_parts(
        l.n_events,
        l.elements.clone(),
        start,
        t0,
        y0,
        total,
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        true,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (mut drawn, mut left_out) = (0, 0);
    for e in 0..l.len() {
        let size = l.elements.size_bytes[e];
        if size < (peak / timeline::PREVIEW_HEIGHT_PX).max(1) {
            // Too thin to draw at full zoom-out: no pieces until the exact layout comes.
            assert!(p.pieces_of(e).is_empty());
            left_out += 1;
            continue;
        }
        drawn += 1;
        // Under 4096 events every x is a sample point: the preview is as exact as the layout.
        for x in l.elements.start_x[e]..l.elements.end_x[e] {
            assert_placed_as(&p, &l, e, x);
        }
    }
    assert!(
        drawn > 10 && left_out > 100,
        "{drawn} drawn, {left_out} left out"
    );
}

#[test]
fn a_long_trace_gets_a_preview_that_completes_into_the_exact_layout() {
    let n = timeline::PREVIEW_MIN_EVENTS as usize + 5000;
    let s = trace(&churn(n, 11), "");
    let exact = TimelineLayout::build(&s, 0, TimelineKind::Active);
    let mut p = TimelineLayout::build_preview(&s, 0, TimelineKind::Active);
    assert!(p.is_preview() && !exact.is_preview());
    assert_eq!(p.total_bytes, exact.total_bytes);
    assert_eq!(p.len(), exact.len());
    assert!(
        p.piece_count() * 10 < exact.piece_count(),
        "{} vs {}",
        p.piece_count(),
        exact.piece_count()
    );
    // A drawn band sits where the exact layout puts it at every sample point.
    let peak = exact.total_bytes.iter().copied().max().unwrap_or(0);
    let xs = exact.n_events as u64 + 1;
    let cols = timeline::PREVIEW_COLUMNS as u64;
    let mut checked = 0;
    for e in (0..exact.len())
        .filter(|&e| exact.elements.size_bytes[e] >= peak / timeline::PREVIEW_HEIGHT_PX)
    {
        for c in 1..cols {
            let x = (c * xs).div_ceil(cols) as u32;
            if x <= exact.elements.start_x[e] || x >= exact.elements.end_x[e] {
                continue;
            }
            assert_placed_as(&p, &exact, e, x);
            checked += 1;
        }
    }
    assert!(checked > 1000, "{checked}");
    p.complete();
    assert!(!p.is_preview());
    assert_eq!(p.piece_start, exact.piece_start);
    assert_eq!(p.piece_t0, exact.piece_t0);
    assert_eq!(p.piece_y0, exact.piece_y0);
}

#[test]
fn range_maxima_match_a_scan_of_the_totals() {
    let s = trace(&churn(1000, 7), "");
    let l = TimelineLayout::build(&s, 0, TimelineKind::Active);
    let n = l.total_bytes.len();
    assert!(n > 1000);
    let scan = |a: usize, b: usize| l.total_bytes[a..b].iter().copied().max().unwrap_or(0);
    // Ranges inside one block, across block edges, whole blocks and the whole trace.
    let mut ranges = vec![
        (0, n),
        (0, 1),
        (n - 1, n),
        (3, 14),
        (15, 17),
        (16, 32),
        (5, 600),
    ];
    let mut rng = 12345u64;
    for _ in 0..2000 {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1);
        let a = (rng >> 33) as usize % n;
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1);
        let len = 1 + (rng >> 33) as usize % 300;
        ranges.push((a, (a + len).min(n)));
    }
    for (a, b) in ranges {
        assert_eq!(
            l.max_total(a as f64, b as f64),
            scan(a, b),
            "max over {a}..{b}"
        );
    }
    // Fractional and out-of-range ends are clamped to whole events.
    assert_eq!(l.max_total(-5.0, 1e12), scan(0, n));
    assert_eq!(l.max_total(10.5, 20.2), scan(10, 21));
}

/// The chunked sweep records exactly the pieces (and totals) of the band-by-band walk.
fn assert_same_sweeps(el: &crate::layout::Elements, n_events: u32, what: &str) {
    use crate::layout::timeline::{end_lists, sweep, sweep_walk};
    let xs = n_events as usize + 1;
    let (head, next) = end_lists(el, xs);
    let run = |chunked: bool| {
        let mut total = vec![0u64; xs];
        let mut pieces: Vec<(u32, u32, u64)> = Vec::new();
        let over = if chunked {
            sweep(el, &head, &next, &mut total, |e, x, y| {
                pieces.push((e, x, y))
            })
        } else {
            sweep_walk(el, &head, &next, &mut total, |e, x, y| {
                pieces.push((e, x, y))
            })
        };
        (over, total, pieces)
    };
    let (a, b) = (run(true), run(false));
    assert_eq!(a.0, b.0, "{what}: budget");
    assert_eq!(a.1, b.1, "{what}: totals");
    assert_eq!(a.2.len(), b.2.len(), "{what}: piece count");
    if let Some(k) = (0..a.2.len()).find(|&k| a.2[k] != b.2[k]) {
        panic!(
            "{what}: piece {k} is {:?}, the walk's is {:?}",
            a.2[k], b.2[k]
        );
    }
}

#[test]
fn the_chunked_sweep_records_the_pieces_of_the_walk() {
    // Churn of many sizes (thin and thick bands, frees deep in the stack), several seeds.
    for seed in 1..6 {
        let s = trace(&churn(4000, seed), "");
        let l = TimelineLayout::build(&s, 0, TimelineKind::Active);
        assert_same_sweeps(&l.elements, l.n_events, &format!("churn seed {seed}"));
    }
    // A deep stack of tiny bands over a few huge ones, the huge ones freed one by one: every
    // chunk above takes the drop lazily, the thin bands move by their coarse tolerance.
    let mut ev: Vec<(&str, u64, u64)> = Vec::new();
    for k in 0..8u64 {
        ev.push(("alloc", 0x1000_0000 + k * 0x100_0000, (1 + k) << 24));
    }
    for k in 0..3000u64 {
        ev.push(("alloc", 0x9000_0000 + k * 0x1000, 512 * (1 + k % 7)));
    }
    for k in 0..8u64 {
        ev.push((
            "free_completed",
            0x1000_0000 + k * 0x100_0000,
            (1 + k) << 24,
        ));
        for j in 0..40u64 {
            let a = 0x9000_0000 + (k * 331 + j * 17) % 3000 * 0x1000;
            ev.push(("free_completed", a, 512));
            ev.push(("alloc", a, 512));
        }
    }
    let s = trace(&ev, "");
    let l = TimelineLayout::build(&s, 0, TimelineKind::Active);
    assert!(l.piece_count() > 3000);
    assert_same_sweeps(&l.elements, l.n_events, "tiny bands over huge ones");
}
