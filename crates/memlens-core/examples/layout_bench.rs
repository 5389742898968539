//! Measures the viewer's timeline on one snapshot: decode, layout build, redraw cost at several
//! zoom levels (full zoom-out down to a few hundred events, panned across the trace), hover
//! hit tests, and stack search. Prints numbers; asserts nothing.
//!
//! `cargo run --release -p memlens-core --example layout_bench -- FILE [DEVICE]`
//! (`ONLY_COMPLETE=1`: only time turning the preview layout into the exact one, as the viewer's
//! worker does after the first frame.)

mod common;

use memlens_core::layout::search::{AddressLabels, Matches, SearchIndex, SearchQuery};
use memlens_core::layout::{
    render_timeline, Painter, RenderOptions, Style, TimeMap, TimelineKind, TimelineLayout, Viewport,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counts what would be drawn, without drawing.
#[derive(Default)]
struct CountingPainter {
    rects: usize,
    calls: usize,
}

impl Painter for CountingPainter {
    fn rects(&mut self, _style: Style, xywh: &[f32]) {
        self.rects += xywh.len() / 4;
        self.calls += 1;
    }
}

const W: f64 = 1300.0;
const H: f64 = 560.0;

fn main() {
    let (path, snap, device, load) = common::open_from_args("layout_bench");
    println!("{path} device {device}: decode {load:.2?}");
    if std::env::var("ONLY_COMPLETE").is_ok() {
        let mut p = TimelineLayout::build_preview(&snap, device, TimelineKind::Active);
        let t = Instant::now();
        p.complete();
        println!("complete {:?} pieces {}", t.elapsed(), p.piece_count());
        return;
    }
    let t1 = Instant::now();
    let p = TimelineLayout::build_preview(&snap, device, TimelineKind::Active);
    println!(
        "Active preview{}: {} pieces, build {:.2?}",
        if p.is_preview() {
            ""
        } else {
            " (short trace: exact)"
        },
        p.piece_count(),
        t1.elapsed()
    );
    for kind in [TimelineKind::Active, TimelineKind::Segments] {
        let t1 = Instant::now();
        let l = TimelineLayout::build(&snap, device, kind);
        let build = t1.elapsed();
        println!(
            "{kind:?}: {} events, {} elements, {} pieces, build {build:.2?}",
            l.n_events,
            l.len(),
            l.piece_count()
        );
        let x_end = l.x_end() as f64;
        let mut widths = vec![x_end];
        let mut w = x_end / 4.0;
        while w > 200.0 {
            widths.push(w);
            w /= 8.0;
        }
        for &w in &widths {
            // Up to 9 windows panned across the trace; report the worst and the mean.
            let steps = if w >= x_end { 1 } else { 9 };
            let mut worst = (Duration::ZERO, 0usize, 0usize);
            let mut sum = Duration::ZERO;
            for i in 0..steps {
                let x0 = if steps == 1 {
                    0.0
                } else {
                    (x_end - w) * i as f64 / (steps - 1) as f64
                };
                let vp = Viewport::fit(&l, x0, x0 + w, W, H);
                let mut p = CountingPainter::default();
                let t = Instant::now();
                let st = render_timeline(&l, &vp, RenderOptions::default(), &mut p);
                let d = t.elapsed();
                sum += d;
                if d > worst.0 {
                    worst = (d, st.elements_visited, p.rects);
                }
            }
            println!(
                "  redraw width {w:>12.0} events: worst {:>9.2?} mean {:>9.2?}  (worst: {} visited, {} rects)",
                worst.0,
                sum / steps as u32,
                worst.1,
                worst.2
            );
        }
        // The same redraws on the wall-clock axis, when the trace has times.
        if let Some(tm) = TimeMap::new(&l.time_us).map(Arc::new) {
            for &w in &widths {
                let steps = if w >= x_end { 1 } else { 9 };
                let mut worst = (Duration::ZERO, 0usize, 0usize);
                for i in 0..steps {
                    let x0 = if steps == 1 {
                        0.0
                    } else {
                        (x_end - w) * i as f64 / (steps - 1) as f64
                    };
                    let vp = Viewport::fit(&l, x0, x0 + w, W, H).with_time(Some(tm.clone()));
                    let mut p = CountingPainter::default();
                    let t = Instant::now();
                    let st = render_timeline(&l, &vp, RenderOptions::default(), &mut p);
                    let d = t.elapsed();
                    if d > worst.0 {
                        worst = (d, st.elements_visited, p.rects);
                    }
                }
                println!(
                    "  time-axis redraw width {w:>12.0} events: worst {:>9.2?}  ({} visited, {} rects)",
                    worst.0, worst.1, worst.2
                );
            }
        }
        // Hover: hit tests on a grid over the full view and over a zoomed view.
        for w in [x_end, (x_end / 64.0).max(2.0)] {
            let x0 = (x_end - w) / 2.0;
            let vp = Viewport::fit(&l, x0, x0 + w, W, H);
            let mut times = Vec::new();
            let mut hits = 0;
            for gx in 0..40 {
                for gy in 0..20 {
                    let px = W * (gx as f64 + 0.5) / 40.0;
                    let py = H * (gy as f64 + 0.5) / 20.0;
                    let t = Instant::now();
                    let h = l.hit(vp.x_data(px), vp.y_data(py));
                    times.push(t.elapsed());
                    hits += h.is_some() as u32;
                }
            }
            times.sort();
            let pct = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
            println!(
                "  hit test width {w:>12.0}: median {:>9.2?} p99 {:>9.2?} max {:>9.2?} ({hits}/{} hit)",
                pct(0.5),
                pct(0.99),
                pct(1.0),
                times.len()
            );
        }
        // Search: build the index once, then a few queries.
        let t = Instant::now();
        let idx = SearchIndex::new(&snap);
        let index_time = t.elapsed();
        let t = Instant::now();
        let labels = AddressLabels::new(&l.elements);
        println!(
            "  search index {index_time:.2?} (frames), {:.2?} (address labels)",
            t.elapsed()
        );
        for q in ["forward", "zzz-no-such-frame", "7f", "0x7f0000000000"] {
            for query in [SearchQuery::frame(q), SearchQuery::address(q)] {
                let Some(query) = query else {
                    continue;
                };
                let t = Instant::now();
                let bits = idx.search(&snap, &l.elements, &labels, &query);
                let searched = t.elapsed();
                let t = Instant::now();
                let m = Matches::new(&l, bits);
                println!(
                    "  search {query:?}: {} matches in {searched:.2?} (+ {:.2?} for the rug)",
                    m.count(),
                    t.elapsed()
                );
            }
        }
    }
}
