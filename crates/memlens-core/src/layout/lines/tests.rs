//! The capacity from `oom` entries, and where the lines are drawn.

use super::*;
use crate::layout::{RecordingPainter, TimelineKind};

fn fixture(name: &str) -> crate::Snapshot {
    let path = memlens_fixture::fixtures_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let bytes = memlens_fixture::build(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    crate::load(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn capacity_is_device_free_plus_reserved_at_the_oom() {
    // oom.txt: 1 GiB reserved when the oom reports 123456 bytes free on the device.
    let s = fixture("oom.txt");
    let active = TimelineLayout::build(&s, 0, TimelineKind::Active);
    let segs = TimelineLayout::build(&s, 0, TimelineKind::Segments);
    assert_eq!(
        capacity_from_ooms(&active, &segs),
        Some((1 << 30) + 123_456)
    );
    // Without an oom entry there is nothing to derive.
    let s = fixture("actions.txt");
    let active = TimelineLayout::build(&s, 0, TimelineKind::Active);
    let segs = TimelineLayout::build(&s, 0, TimelineKind::Segments);
    assert_eq!(capacity_from_ooms(&active, &segs), None);
}

#[test]
fn lines_sit_at_their_bytes() {
    let s = fixture("oom.txt");
    let active = TimelineLayout::build(&s, 0, TimelineKind::Active);
    let segs = TimelineLayout::build(&s, 0, TimelineKind::Segments);
    let cap = 2u64 << 30;
    let x1 = active.x_end() as f64;
    let vp = fit_with_lines(&active, Some(&segs), Some(cap), (0.0, x1), (400.0, 210.0));
    assert_eq!(vp.y1_bytes, cap as f64 * 1.05);
    let mut p = RecordingPainter::default();
    render_lines(Some(&segs), Some(cap), &vp, &mut p);
    let c = p.of(Style::Capacity);
    assert_eq!(c.len(), 1);
    assert!(
        (c[0][1] + 1.0 - vp.y_px(cap as f64) as f32).abs() < 1e-3,
        "{c:?}"
    );
    // The reserved line reaches 1 GiB + 20 MiB (both segments) and ends at 1 GiB.
    let r = p.of(Style::ReservedLine);
    let top = r.iter().map(|q| q[1] + 1.0).fold(f32::MAX, f32::min);
    let want = vp.y_px(((1u64 << 30) + (20 << 20)) as f64) as f32;
    assert!((top - want).abs() < 0.5, "{top} vs {want}");
    assert_eq!(
        headroom_bytes(cap, (1 << 30) + (20 << 20)),
        Some((1 << 30) - (20 << 20))
    );
    assert_eq!(headroom_bytes(1, 2), None);
}

#[test]
fn sizes_read_as_typed() {
    let gib = 1u64 << 30;
    assert_eq!(parse_size("80 GiB", 1), Some(80 * gib));
    assert_eq!(parse_size("80", gib), Some(80 * gib));
    assert_eq!(parse_size("141GB", 1), Some(141_000_000_000));
    assert_eq!(parse_size("81559 MiB", 1), Some(81_559 << 20));
    assert_eq!(parse_size("1.5e9", 1), Some(1_500_000_000));
    assert_eq!(parse_size("1 M", 1), Some(1 << 20));
    assert_eq!(parse_size("lots", 1), None);
    assert_eq!(parse_size("-1 GiB", 1), None);
    assert_eq!(parse_size("3 parsecs", 1), None);
}
