//! How exactly a stacked band is placed: a band's bottom is recorded as a new piece only once it
//! has moved by more than its [`piece_tolerance`] since its last piece: 2^-[`PIECE_TOL_SHIFT`] of
//! its top, or 2^-[`THIN_TOL_SHIFT`] for a band too thin ever to be drawn on its own
//! ([`is_thin`]). The y axis always starts at 0 and reaches at least the top of every band in
//! view, so a drawn band is off by under 0.13 px on any screen while most pieces (the frees of
//! small blocks far below a band, and thin bands riding on them) are never stored. A budget stops
//! pathological inputs ([`PIECE_BUDGET`]). Every stacking (exact, preview, private pools) and the
//! hit test follow these rules.

/// Most pieces a layout may hold (8 bytes each). Past it the layout stops recording further
/// shifts and says so in [`TimelineLayout::warnings`](super::TimelineLayout::warnings).
pub const PIECE_BUDGET: usize = 48_000_000;

/// A band's drop is recorded as a new piece once it exceeds [`piece_tolerance`]. For a band at
/// least 1/[`THIN_RATIO`] of its top: `top >> PIECE_TOL_SHIFT` bytes (1/16384 of its top: under
/// 0.13 px on a 2048 px tall plot, since the plot's y range always includes the band's top).
pub const PIECE_TOL_SHIFT: u32 = 14;

/// A band thinner than 1/`THIN_RATIO` of its top is under one pixel on any plot up to this many
/// pixels tall (the y range includes its top), so it is never drawn on its own: only the
/// underlay (live totals, exact) shows it, and its own position matters for hover and for the
/// outline of a selected band. Such a band moves only when it is off by
/// `top >> THIN_TOL_SHIFT` (1/256 of its top: ≤ 8 px on a 2048 px plot, ≤ 2 px on the viewer's).
/// On a repeated real trace (bench/data/rep60.pickle, 1.3M events) this takes the layout from
/// 48M pieces (the budget) to 5.4M, since nearly all of a stacked layout's pieces are thin
/// bands riding on frees below them.
pub const THIN_RATIO: u64 = 2048;
pub const THIN_TOL_SHIFT: u32 = 8;

/// How far (in bytes) a band with this bottom and size may sit above its exact place before a
/// new piece is recorded.
#[inline]
pub fn piece_tolerance(bottom: u64, size: u64) -> u64 {
    let top = bottom.saturating_add(size);
    if is_thin(bottom, size) {
        top >> THIN_TOL_SHIFT
    } else {
        top >> PIECE_TOL_SHIFT
    }
}

/// Under one pixel on any plot up to [`THIN_RATIO`] pixels tall.
#[inline]
pub fn is_thin(bottom: u64, size: u64) -> bool {
    size.saturating_mul(THIN_RATIO) < bottom.saturating_add(size)
}
