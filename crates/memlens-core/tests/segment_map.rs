//! The segment map (`state::map`) on every fixture in tests/fixtures and every real snapshot in
//! `../shared/snapshots` (skipped with a notice when absent; a failure under
//! `MEMLENS_NO_SKIP=1`), at a spread of events of each device: every segment's bytes are placed
//! exactly once inside the map, pieces of a row do not overlap, the fitted placement fits, and a
//! point in the middle of each block's slice hits that block.

use memlens_core::model::Snapshot;
use memlens_core::state::map::{fit, place, MapGeometry, PAD, ROW_H};
use memlens_core::state::{AllocatorHistory, StateColumns};

fn check_geometry(name: &str, c: &StateColumns, g: &MapGeometry, width: f64) {
    let mut placed = vec![0u64; c.segments()];
    for p in &g.pieces {
        let k = p.seg as usize;
        assert!(k < c.segments(), "{name}: piece of no segment");
        placed[k] += p.bytes;
        assert!(
            p.x0 >= PAD - 1e-6 && p.x1 <= PAD + width + 1e-6,
            "{name}: piece {p:?} outside the map"
        );
        assert!(
            p.y >= 0.0 && p.y + ROW_H <= g.height_px,
            "{name}: piece {p:?} below the map"
        );
    }
    for (k, &b) in placed.iter().enumerate() {
        assert_eq!(b, c.segment_size(k), "{name}: segment {k} placed bytes");
    }
    for w in g.pieces.windows(2) {
        if w[0].y == w[1].y {
            assert!(w[1].x0 >= w[0].x1 - 1e-6, "{name}: {w:?} overlap");
        }
    }
    for p in &g.pieces {
        let k = p.seg as usize;
        let a0 = c.segment_address[k] + p.byte0;
        let a1 = a0 + p.bytes;
        for b in c.blocks_of(k) {
            let ba = c.block_address[b];
            let (c0, c1) = (ba.max(a0), (ba + c.block_size_bytes[b]).min(a1));
            // Outside this slice, or too thin to tell apart at any zoom the view allows.
            if c0 >= c1 || (c1 - c0) as f64 / p.bytes as f64 * (p.x1 - p.x0) < 1e-3 {
                continue;
            }
            let mid = c0 + (c1 - c0) / 2;
            let x = p.x0 + (mid - a0) as f64 / p.bytes as f64 * (p.x1 - p.x0);
            let hit = g.hit(c, x, p.y + ROW_H / 2.0);
            assert_eq!(hit.map(|h| h.seg), Some(k), "{name}: hit segment");
            assert_eq!(hit.and_then(|h| h.block), Some(b), "{name}: block {mid:#x}");
        }
    }
}

/// The device's states at its ends and a spread in between, each placed at three row sizes and
/// fitted into 500 px.
fn check_snapshot(name: &str, snap: &Snapshot) {
    let width = 600.0;
    for device in snap.devices() {
        let h = AllocatorHistory::new(snap, device);
        let n = snap.device_rows(device).len();
        let mut at = vec![None];
        if n > 0 {
            at.extend([0, n / 7, n / 3, n / 2, (2 * n) / 3, n - 1].map(Some));
        }
        at.dedup();
        for e in at {
            let c = h.state_at(e).columns();
            for bpr in [1u64 << 20, 64 << 20, 1 << 30] {
                let g = place(&c, bpr, width);
                check_geometry(&format!("{name} after {e:?}, {bpr} B/row"), &c, &g, width);
            }
            let g = fit(&c, 0, width, 500.0);
            check_geometry(&format!("{name} after {e:?}, fitted"), &c, &g, width);
            assert!(
                g.height_px <= 500.0 || g.bytes_per_row >= 1 << 40,
                "{name}: fit"
            );
        }
    }
}

#[test]
fn every_fixture_is_placed_and_hit_tested() {
    let mut n = 0;
    for (p, text) in memlens_fixture::fixture_texts() {
        let Ok(bytes) = memlens_fixture::build(&text) else {
            continue;
        };
        let Ok(s) = memlens_core::load(&bytes) else {
            continue;
        };
        check_snapshot(&p.display().to_string(), &s);
        n += 1;
    }
    assert!(
        n >= 5,
        "fixtures not found in {}",
        memlens_fixture::fixtures_dir().display()
    );
}

#[test]
fn real_snapshots_are_placed_and_hit_tested() {
    let Some(files) = memlens_fixture::shared_snapshots() else {
        return;
    };
    for p in files {
        let f = std::fs::File::open(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let s =
            memlens_core::load_reader(f, None).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        check_snapshot(&p.display().to_string(), &s);
    }
}
