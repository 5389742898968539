//! Lines over a timeline's bands: reserved memory over time (the Active Cached Segment
//! Timeline's live total, a step line) and the device's capacity (a horizontal line), with what
//! the capacity is: from the trace's `oom` entries (`device_free` + reserved at that entry, the
//! largest over the entries) when there are any, else a GPU from [`GPUS`] or a typed size.

use super::paint::{Painter, Style};
use super::render::{column_top, columns, Viewport};
use super::timeline::{MarkerKind, TimelineLayout};

const MIB: u64 = 1 << 20;

/// Common GPUs and their memory as `nvidia-smi` (`rocm-smi` for AMD) reports the total, so
/// that the headroom is what `torch.cuda.mem_get_info` would allow, not the marketing number.
pub const GPUS: &[(&str, u64)] = &[
    ("T4 16 GB", 15_360 * MIB),
    ("V100 16 GB", 16_384 * MIB),
    ("L4 24 GB", 23_034 * MIB),
    ("A10 24 GB", 23_028 * MIB),
    ("RTX 4090 24 GB", 24_564 * MIB),
    ("V100 32 GB", 32_768 * MIB),
    ("A100 40 GB", 40_960 * MIB),
    ("L40S 48 GB", 46_068 * MIB),
    ("A100 80 GB", 81_920 * MIB),
    ("H100 80 GB", 81_559 * MIB),
    ("GH200 96 GB", 97_871 * MIB),
    ("MI250X 128 GB", 131_072 * MIB),
    ("H200 141 GB", 143_771 * MIB),
    ("B200 192 GB", 183_359 * MIB),
    ("MI300X 192 GB", 196_608 * MIB),
];

/// The device's capacity from the trace's `oom` entries of the `active` layout: `device_free`
/// plus what the allocator had reserved then (`reserved`: the Segments layout of the same
/// device, whose live total is the reserved bytes); the largest over the entries. `None`
/// without an `oom` entry that reports `device_free`.
pub fn capacity_from_ooms(active: &TimelineLayout, reserved: &TimelineLayout) -> Option<u64> {
    active
        .markers
        .iter()
        .filter(|m| m.kind == MarkerKind::Oom)
        .filter_map(|m| {
            let free = m.device_free_bytes?;
            Some(free.saturating_add(reserved.total_at(m.x as f64)))
        })
        .max()
}

/// Capacity minus the highest reserved total; `None` when the peak is above the capacity (the
/// capacity given is not this device's).
pub fn headroom_bytes(capacity_bytes: u64, peak_reserved_bytes: u64) -> Option<u64> {
    capacity_bytes.checked_sub(peak_reserved_bytes)
}

/// A viewport for `[x0, x1)` whose y range holds the bands, and the lines drawn over them.
pub fn fit_with_lines(
    active: &TimelineLayout,
    reserved: Option<&TimelineLayout>,
    capacity_bytes: Option<u64>,
    (x0, x1): (f64, f64),
    (width_px, height_px): (f64, f64),
) -> Viewport {
    let x1 = if x1 > x0 { x1 } else { x0 + 1.0 };
    let max = active
        .max_total(x0, x1)
        .max(reserved.map_or(0, |r| r.max_total(x0, x1)))
        .max(capacity_bytes.unwrap_or(0)) as f64;
    Viewport::new(x0, x1, 0.0, (max * 1.05).max(1.0), width_px, height_px)
}

/// A size as typed: `80 GiB`, `81559 MiB`, `141GB`, `1.5e9` (`KB`/`MB`/`GB`/`TB` are powers
/// of 1000, `KiB`/`MiB`/`GiB`/`TiB` and `K`/`M`/`G`/`T` of 1024); a bare number is in
/// `bare_unit_bytes`. `None` if it does not read as a size.
pub fn parse_size(text: &str, bare_unit_bytes: u64) -> Option<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.trim().parse().ok()?;
    let k = match unit.trim().to_ascii_lowercase().as_str() {
        "" => bare_unit_bytes as f64,
        "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let bytes = v * k;
    (bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64).then(|| bytes.round() as u64)
}

/// Line thickness in pixels.
const LINE_PX: f32 = 2.0;

/// Draws the reserved step line (highest reserved total per pixel column) and the capacity.
pub fn render_lines(
    reserved: Option<&TimelineLayout>,
    capacity_bytes: Option<u64>,
    vp: &Viewport,
    painter: &mut impl Painter,
) {
    if let Some(r) = reserved {
        painter.rects(Style::ReservedLine, &step_line(r, vp));
    }
    if let Some(c) = capacity_bytes {
        let y = vp.y_px(c as f64) as f32;
        if y >= -LINE_PX && y <= vp.height_px as f32 + LINE_PX {
            let quad = [0.0, y - LINE_PX / 2.0, vp.width_px as f32, LINE_PX];
            painter.rects(Style::Capacity, &quad);
        }
    }
}

/// The step line of `layout`'s live total in `vp`: a horizontal rectangle per run of columns
/// at the same height, a vertical one joining each run to the next.
fn step_line(layout: &TimelineLayout, vp: &Viewport) -> Vec<f32> {
    let mut out = Vec::new();
    let mut run: Option<(usize, f32)> = None;
    let half = LINE_PX / 2.0;
    let flush = |run: Option<(usize, f32)>, end: usize, out: &mut Vec<f32>| {
        if let Some((c0, y)) = run {
            out.extend_from_slice(&[c0 as f32, y - half, (end - c0) as f32, LINE_PX]);
        }
    };
    let mut last = 0;
    for (c, a, b) in columns(vp) {
        let y = vp.y_px(column_top(layout, a, b) as f64) as f32;
        match run {
            Some((_, y0)) if (y0 - y).abs() < 0.5 => {}
            Some((_, y0)) => {
                flush(run, c, &mut out);
                out.extend_from_slice(&[c as f32 - half, y0.min(y), LINE_PX, (y0 - y).abs()]);
                run = Some((c, y));
            }
            None => run = Some((c, y)),
        }
        last = c + 1;
    }
    flush(run, last, &mut out);
    out
}

#[cfg(test)]
mod tests;
