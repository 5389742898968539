//! Layout tests: stacking, pairing, level of detail and hit testing on small JSON snapshots,
//! plus brute-force invariants on every real snapshot in `../shared/snapshots`.

use super::context::{element_context, tooltip};
use super::render::THIN_PX;
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

fn check_invariants(l: &TimelineLayout, every: u32) {
    let mut x = 0;
    while x <= l.n_events {
        let live = brute_offsets(l, x);
        let total: u64 = live.iter().map(|&(e, _)| l.elements.size_bytes[e]).sum();
        assert_eq!(l.total_bytes[x as usize], total, "total at x={x}");
        for (e, y) in live {
            assert_eq!(
                l.offset_at(e, x as f64),
                Some(y),
                "offset of element {e} at x={x}"
            );
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
    assert_eq!(l.offset_at(1, 4.0), Some(100));
    assert_eq!(l.offset_at(1, 5.0), Some(0));
    assert_eq!(l.offset_at(2, 5.5), Some(200));
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
    let origins: Vec<Origin> = l
        .elements
        .origin
        .iter()
        .map(|&o| Origin::from_u8(o))
        .collect();
    assert_eq!(
        origins,
        [Origin::Ghost, Origin::FreedUntraced, Origin::Traced]
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
    assert_eq!(element_context(&s, 0, &stripped, TimelineKind::Active, 1, false), Some(c));
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
    let vp = Viewport {
        x0: 0.0,
        x1: 4.0,
        y0_bytes: 0.0,
        y1_bytes: 400.0,
        width_px: 400.0,
        height_px: 400.0,
    };
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
    let vp = Viewport {
        x0: 0.0,
        x1: 4.0,
        y0_bytes: 0.0,
        y1_bytes: 400.0,
        width_px: 400.0,
        height_px: 400.0,
    };
    let mut p = RecordingPainter::default();
    let st = render_timeline(
        &l,
        &vp,
        RenderOptions {
            selected: Some(1),
            matches: &[],
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
    // One painter call per style.
    assert_eq!(p.calls(), 3);
}

#[test]
fn thin_bands_merge_and_narrow_pieces_cost_one_rect_per_column() {
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
    assert_eq!(st.elements_visited, 2001);
    let big_rects = p.of(Style::Band((big % 10) as u8));
    assert!(
        big_rects.len() <= 35,
        "the big band costs {} rects over ~34 columns",
        big_rects.len()
    );
    // Each 1-byte band is far thinner than a pixel; they all end up in a few merged runs.
    let thin = p.of(Style::Thin);
    assert!(!thin.is_empty());
    assert!(thin.len() < 200, "{} thin rects", thin.len());
    assert!(thin.iter().all(|r| r[3] >= 0.0));
    let h_tiny = vp.sy() * 1.0;
    assert!(h_tiny < THIN_PX);
    // Total draw cost stays near the pixel width, not the 4000 pieces.
    assert!(p.count() < 600, "{} rects", p.count());
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
    let mut p = RecordingPainter::default();
    render_timeline(&l, &vp, RenderOptions::default(), &mut p);
    let short: usize = (1..=9).map(|c| p.of(Style::Band(c)).len()).sum();
    assert!(
        short <= 10,
        "{short} rects for 500 allocations in 10 columns"
    );
    assert!(short >= 9, "every column still shows the churn ({short})");
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
        l.markers.clone(),
        l.regions.clone(),
        vec![],
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
        vec![]
    )
    .is_err());
    assert!(TimelineLayout::from_parts(
        3,
        l.elements.clone(),
        vec![0, 9, 1, 1],
        vec![0],
        vec![0],
        vec![0; 4],
        vec![],
        vec![],
        vec![]
    )
    .is_err());
}

#[test]
fn real_snapshots_keep_the_invariants() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/snapshots");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        println!(
            "NOTICE: {} not found; real-snapshot layout checks skipped",
            dir.display()
        );
        return;
    };
    let mut files: Vec<_> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "pickle"))
        .collect();
    files.sort();
    for f in files {
        let bytes = std::fs::read(&f).unwrap_or_default();
        let Ok(s) = crate::load(&bytes) else { continue };
        for d in s.devices() {
            let st = crate::device_stats(&s, d);
            for kind in [TimelineKind::Active, TimelineKind::Segments] {
                let l = TimelineLayout::build(&s, d, kind);
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
