//! The size estimate (`estimate`), made from the first part of each real snapshot whose trace
//! is long enough, against what decoding the whole file counts: the entries, and the decoder's
//! held bytes (`Loader::head_shape` once every byte is in, the count the page compares with its
//! limit). Its held bytes err high, the side a limit needs (`estimate::MARGIN`), on every file
//! but one: kkaitlyn111 ctx512, whose last 30 % of entries bring ~5x the memory per entry of
//! all before them (a burst of new, deep stacks: 460 KB held from 130 KB of input), which no
//! head foretells (0.63 of the count; 0.50 without the margin). Its entries are close where the
//! trace is alike throughout (most files); where the first half of the entries carries deeper
//! stacks than the rest (cranberrii: 76 % of the trace's bytes in its first half of entries) it
//! counts too few, and where the later half's are shallower (kkaitlyn111 2.7b) too many.

use memlens_core::estimate::{estimate, SizeEstimate};
use memlens_core::Loader;

/// Chunks fed to the loader.
const CHUNK: usize = 64 * 1024;
/// Entries a trace needs to be estimated from a part of its file.
const MIN_ENTRIES: u64 = 2000;

/// The estimate after the first `head_bytes`, and the whole file's counts (entries, held).
fn estimate_and_whole(bytes: &[u8], head_bytes: usize) -> (Option<SizeEstimate>, (u64, u64)) {
    let mut l = Loader::new(Some(bytes.len() as u64));
    let mut at_head = None;
    for (i, c) in bytes.chunks(CHUNK).enumerate() {
        l.push(c).unwrap_or_else(|e| panic!("{e}"));
        if at_head.is_none() && (i + 1) * CHUNK >= head_bytes {
            at_head = l.head_shape();
        }
    }
    let whole = l.head_shape().unwrap_or_else(|| panic!("not a pickle"));
    let est = at_head.and_then(|h| estimate(bytes.len() as u64, &h));
    (est, (whole.entries, whole.held_bytes))
}

#[test]
fn the_head_of_each_real_snapshot_foretells_its_size() {
    let files = memlens_fixture::shared_snapshot_bytes();
    let mut ratios = Vec::new();
    for (name, bytes) in &files {
        let (whole_est, (entries, held)) = estimate_and_whole(bytes, bytes.len());
        // the whole file read: the estimate is the count itself
        let whole_est =
            whole_est.unwrap_or_else(|| panic!("{name}: no estimate of the whole file"));
        assert_eq!(
            (whole_est.entries, whole_est.held_bytes),
            (entries, held),
            "{name}"
        );
        if entries < MIN_ENTRIES {
            continue;
        }
        let (est, _) = estimate_and_whole(bytes, bytes.len() / 2);
        let est = est.unwrap_or_else(|| panic!("{name}: no estimate from half the file"));
        let e_ratio = est.entries as f64 / entries as f64;
        let h_ratio = est.held_bytes as f64 / held as f64;
        println!(
            "{name}: {} B, {entries} entries, held {held} B; from half: entries x{e_ratio:.3}, held x{h_ratio:.3}",
            bytes.len()
        );
        assert!(
            (0.5..=1.8).contains(&e_ratio),
            "{name}: entries x{e_ratio:.3}"
        );
        assert!((0.6..=2.5).contains(&h_ratio), "{name}: held x{h_ratio:.3}");
        ratios.push(h_ratio);
    }
    if !files.is_empty() {
        assert!(
            ratios.len() >= 5,
            "only {} snapshots with long traces",
            ratios.len()
        );
        let under = ratios.iter().filter(|&&r| r < 1.0).count();
        assert!(
            under <= 1,
            "{under} held estimates under the count: {ratios:?}"
        );
        ratios.sort_by(f64::total_cmp);
        let median = ratios[ratios.len() / 2];
        assert!((1.2..=2.0).contains(&median), "median held x{median:.3}");
    }
}
