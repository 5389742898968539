//! The segment map of one allocator state: where each segment and block goes, in "map pixels"
//! (a pure placement the page draws on a canvas and hit-tests), and its zoom/pan.
//!
//! Segments are grouped by (pool, stream): the default pool first, then private pools, then
//! segments whose pool is unknown. Inside a group they are packed into rows of a fixed number
//! of bytes (a power of two, chosen so the device's peak reserved memory fits the map's
//! height: [`fit`]), the largest first as upstream does; a segment longer than a row wraps over
//! several rows, so every byte gets the same area. Blocks lie inside their segment's pieces at
//! their addresses; an allocation's colour is a palette index hashed from its address and alloc
//! event ([`block_colour_index`]), so it stays put while stepping through the trace.

use super::StateColumns;
use crate::layout::axis::format_bytes;
use crate::model::BlockState;

/// Space above each group for its header, each row's height and the gap below it, the margin
/// around the map, and the gap between groups (map pixels).
pub const HEADER_H: f64 = 18.0;
pub const ROW_H: f64 = 16.0;
pub const ROW_GAP: f64 = 3.0;
pub const PAD: f64 = 8.0;
pub const GROUP_GAP: f64 = 6.0;

/// One row-slice of a segment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Piece {
    /// The segment's index in the state's columns.
    pub seg: u32,
    pub y: f64,
    pub x0: f64,
    pub x1: f64,
    /// Offset in the segment of the slice's first byte.
    pub byte0: u64,
    pub bytes: u64,
}

/// A (pool, stream) group's header.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub y: f64,
    pub label: String,
}

/// Where everything of one state goes, in map pixels (before zoom and pan).
#[derive(Debug, Clone, PartialEq)]
pub struct MapGeometry {
    pub bytes_per_row: u64,
    pub width_px: f64,
    pub height_px: f64,
    pub groups: Vec<Group>,
    /// Sorted by (y, x0).
    pub pieces: Vec<Piece>,
}

/// What is under a point of the map.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub seg: usize,
    /// The block under the point, if the point is inside the segment's bytes.
    pub block: Option<usize>,
    pub addr: u64,
}

fn pool_label(pool: Option<(i64, i64)>) -> String {
    match pool {
        Some((0, 0)) => "default pool".to_string(),
        Some((a, b)) => format!("private pool ({a}, {b})"),
        None => "pool unknown".to_string(),
    }
}

/// A segment's group: (pool rank, pool id, stream).
type GroupKey = (u8, (i64, i64), u64);

/// Segment order: groups by (pool, stream) with the default pool first and unknown pools
/// last, then the largest segment first, then by address.
fn segment_order(c: &StateColumns) -> Vec<(usize, GroupKey)> {
    let mut order: Vec<(usize, GroupKey)> = (0..c.segments())
        .map(|k| {
            let pool = c.segment_pool_id.get(k).copied().flatten();
            let rank = match pool {
                Some((0, 0)) => 0u8,
                Some(_) => 1,
                None => 2,
            };
            let stream = c.segment_stream.get(k).copied().unwrap_or(0);
            (k, (rank, pool.unwrap_or((0, 0)), stream))
        })
        .collect();
    order.sort_by(|(a, ga), (b, gb)| {
        ga.cmp(gb)
            .then_with(|| c.segment_size(*b).cmp(&c.segment_size(*a)))
            .then_with(|| a.cmp(b))
    });
    order
}

/// A group's header: pool, stream, segment count, reserved and free bytes.
fn group_label(c: &StateColumns, g: GroupKey, members: &[usize]) -> String {
    let reserved: u64 = members.iter().map(|&k| c.segment_size(k)).sum();
    let free: u64 = members
        .iter()
        .flat_map(|&k| c.blocks_of(k))
        .filter(|&b| c.block_state(b) == BlockState::Inactive)
        .map(|b| c.block_size_bytes.get(b).copied().unwrap_or(0))
        .sum();
    let pool = (g.0 != 2).then_some(g.1);
    format!(
        "{} · stream {} · {} segment{} · {} reserved, {} free",
        pool_label(pool),
        g.2,
        members.len(),
        if members.len() == 1 { "" } else { "s" },
        format_bytes(reserved as f64),
        format_bytes(free as f64)
    )
}

/// Where the next piece of a group goes: row and byte offset in it, in rows of `bpr` bytes.
struct RowCursor {
    bpr: u64,
    row: u64,
    off: u64,
    rows_used: u64,
}

impl RowCursor {
    /// Places `size` bytes of segment `seg` (a new row first unless it fits the current one),
    /// wrapping over rows, then leaves a gap of `gap` bytes. `top`: the group's first row.
    fn place(&mut self, seg: u32, size: u64, gap: u64, top: f64, px: f64, out: &mut Vec<Piece>) {
        if self.off > 0 && self.off + size > self.bpr {
            self.row += 1;
            self.off = 0;
        }
        let (mut left, mut byte0) = (size, 0u64);
        loop {
            let take = left.min(self.bpr - self.off);
            out.push(Piece {
                seg,
                y: top + self.row as f64 * (ROW_H + ROW_GAP),
                x0: PAD + self.off as f64 * px,
                x1: PAD + (self.off + take) as f64 * px,
                byte0,
                bytes: take,
            });
            self.rows_used = self.rows_used.max(self.row + 1);
            left -= take;
            byte0 += take;
            self.off += take;
            if left == 0 {
                break;
            }
            self.row += 1;
            self.off = 0;
        }
        self.off += gap;
        if self.off >= self.bpr {
            self.row += 1;
            self.off = 0;
        }
    }
}

/// Places the state's segments into rows of `bytes_per_row` bytes, `width_px` wide (plus
/// [`PAD`] on each side).
pub fn place(c: &StateColumns, bytes_per_row: u64, width_px: f64) -> MapGeometry {
    let bpr = bytes_per_row.max(1);
    let px_per_byte = width_px / bpr as f64;
    let gap = (bpr / 128).max(1);
    let mut groups = Vec::new();
    let mut pieces = Vec::new();
    let mut y = PAD;
    let order = segment_order(c);
    for run in order.chunk_by(|(_, a), (_, b)| a == b) {
        let Some(&(_, g)) = run.first() else { continue };
        let members: Vec<usize> = run.iter().map(|(k, _)| *k).collect();
        groups.push(Group {
            y,
            label: group_label(c, g, &members),
        });
        y += HEADER_H;
        let mut cursor = RowCursor {
            bpr,
            row: 0,
            off: 0,
            rows_used: 0,
        };
        for &k in &members {
            let size = c.segment_size(k);
            cursor.place(k as u32, size, gap, y, px_per_byte, &mut pieces);
        }
        y += cursor.rows_used as f64 * (ROW_H + ROW_GAP) + GROUP_GAP;
    }
    pieces.sort_by(|a, b| a.y.total_cmp(&b.y).then(a.x0.total_cmp(&b.x0)));
    MapGeometry {
        bytes_per_row: bpr,
        width_px: width_px + 2.0 * PAD,
        height_px: y + PAD,
        groups,
        pieces,
    }
}

/// The smallest power-of-two row size (at least 1 MiB) whose placement fits `height_px`,
/// starting from what `peak_reserved` needs (so the scale stays put while stepping through a
/// trace); after 24 doublings the last placement is taken even if it is taller.
pub fn fit(c: &StateColumns, peak_reserved: u64, width_px: f64, height_px: f64) -> MapGeometry {
    let usable = (height_px - 2.0 * PAD).max(ROW_H);
    let rows = ((usable / (ROW_H + ROW_GAP)).floor() as u64).max(1);
    let reserved: u64 = c.segment_size_bytes.iter().sum();
    let need = peak_reserved.max(reserved).max(1);
    let mut bpr = (need / rows).max(1 << 20).next_power_of_two();
    let mut g = place(c, bpr, width_px);
    let mut tries = 0;
    while g.height_px > height_px && tries < 24 {
        bpr = bpr.saturating_mul(2);
        g = place(c, bpr, width_px);
        tries += 1;
    }
    g
}

impl MapGeometry {
    /// The segment slice and block at map point (mx, my); `None` outside every piece (margins,
    /// headers, the gaps between segments and rows).
    pub fn hit(&self, c: &StateColumns, mx: f64, my: f64) -> Option<Hit> {
        let first = self.pieces.partition_point(|p| p.y + ROW_H < my);
        let p = self
            .pieces
            .get(first..)?
            .iter()
            .take_while(|p| p.y <= my)
            .find(|p| my <= p.y + ROW_H && mx >= p.x0 && mx < p.x1.max(p.x0 + 1.0))?;
        let seg = p.seg as usize;
        let w = (p.x1 - p.x0).max(1e-9);
        let frac = ((mx - p.x0) / w).clamp(0.0, 1.0);
        let off = p.byte0 + ((p.bytes as f64 * frac) as u64).min(p.bytes.saturating_sub(1));
        let addr = c.segment_address.get(seg)?.saturating_add(off);
        let block = c.block_at(addr).filter(|b| c.blocks_of(seg).contains(b));
        Some(Hit { seg, block, addr })
    }
}

/// Zoom and pan: screen x = map x · k + tx, screen y = map y + ty. Only the byte axis zooms
/// (rows keep their height, so every row stays in view while a 512-byte block is widened to
/// pixels); `k` goes up to 2^16.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transform {
    pub k: f64,
    pub tx: f64,
    pub ty: f64,
}

impl Default for Transform {
    fn default() -> Self {
        Transform {
            k: 1.0,
            tx: 0.0,
            ty: 0.0,
        }
    }
}

impl Transform {
    pub const MAX_ZOOM: f64 = 65536.0;

    pub fn to_map(&self, sx: f64, sy: f64) -> (f64, f64) {
        ((sx - self.tx) / self.k, sy - self.ty)
    }

    /// Zooms the byte axis by `factor` keeping the map point under `sx` in place.
    pub fn zoom_at(&self, sx: f64, factor: f64) -> Transform {
        let k = (self.k * factor).clamp(1.0, Transform::MAX_ZOOM);
        let (mx, _) = self.to_map(sx, 0.0);
        Transform {
            k,
            tx: sx - mx * k,
            ty: self.ty,
        }
    }
}

/// The palette index (of `palette_len` colours) of an allocation: a hash of its block's address
/// and alloc event, stable for the same allocation. An allocation whose alloc is not recorded
/// hashes with event `u32::MAX` (past every event index), which keeps the colours it had.
pub fn block_colour_index(addr: u64, alloc_event: Option<u32>, palette_len: usize) -> usize {
    let event = u64::from(alloc_event.unwrap_or(u32::MAX));
    let mut h = addr ^ event.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^= h >> 29;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 32;
    (h % palette_len.max(1) as u64) as usize
}

#[cfg(test)]
#[path = "map_tests.rs"]
mod tests;
