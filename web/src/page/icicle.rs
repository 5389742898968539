//! Live memory as an icicle on a canvas (core's `analysis::icicle`): width = live bytes, root
//! frames on top. Hovering names a frame and its bytes; clicking one opens the Active Memory
//! Timeline with that frame searched (its bands highlighted). The reverse: a band pinned on
//! the timeline has its allocation's path (`SharedIcicle::mark_path`) outlined, the other cells
//! dimmed; the root's `data-mark-path` and `data-marked-frames` carry the path and the cells
//! drawn along it. Drawing follows pixels: core already left out nodes under 1/4000 of the
//! width, and boxes under half a pixel are skipped.

use crate::page::app_state::SharedIcicle;
use crate::page::pointer::use_canvas_listeners;
use memlens_core::analysis::icicle::IcicleNode;
use memlens_core::analysis::verdict::human;
use wasm_bindgen::JsCast;
use web_sys::{HtmlCanvasElement, MouseEvent};
use yew::prelude::*;

/// Row height in CSS pixels.
const ROW_PX: f64 = 17.0;
/// Rows drawn at most (deeper frames are cut off; the hover still names them).
const MAX_ROWS: u32 = 40;

#[derive(Properties, PartialEq)]
pub struct Props {
    pub icicle: SharedIcicle,
    pub on_frame: Callback<String>,
    /// Shift-click: invert for this frame (who calls it).
    pub on_callers: Callback<Option<String>>,
}

fn hue(s: &str) -> u32 {
    s.bytes().fold(2166136261u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(16777619)
    }) % 360
}

fn rows(nodes: &[IcicleNode]) -> u32 {
    nodes
        .iter()
        .map(|n| n.depth + 1)
        .max()
        .unwrap_or(1)
        .min(MAX_ROWS)
}

/// Indices of the cells along the marked allocation's path (empty without a mark).
fn marked(ic: &SharedIcicle) -> Vec<usize> {
    ic.mark_path
        .as_ref()
        .map_or_else(Vec::new, |p| ic.icicle.path_nodes(p))
}

fn draw(canvas: &HtmlCanvasElement, ic: &SharedIcicle) {
    let Some((ctx, w, _h)) = crate::page::canvas::prepare(canvas) else {
        return;
    };
    let total = ic.icicle.total_bytes.max(1) as f64;
    ctx.set_font("11px sans-serif");
    let marked = marked(ic);
    let dim = ic.mark_path.is_some();
    for (i, n) in ic.icicle.nodes.iter().enumerate() {
        if n.depth >= MAX_ROWS {
            continue;
        }
        let x = w * n.offset_bytes as f64 / total;
        let bw = w * n.bytes as f64 / total;
        if bw < 0.5 {
            continue;
        }
        let y = f64::from(n.depth) * ROW_PX;
        let on_path = marked.contains(&i);
        let light = if dim && !on_path { 85 } else { 62 };
        ctx.set_fill_style_str(&format!("hsl({}, 55%, {light}%)", hue(&n.frame)));
        ctx.fill_rect(x, y, (bw - 0.5).max(0.5), ROW_PX - 1.0);
        if on_path {
            ctx.set_stroke_style_str("#111");
            ctx.set_line_width(2.0);
            ctx.stroke_rect(x + 1.0, y + 1.0, (bw - 2.5).max(0.5), ROW_PX - 3.0);
        }
        if bw > 30.0 {
            let chars = ((bw - 6.0) / 6.2) as usize;
            let label: String = if n.frame.chars().count() > chars {
                n.frame
                    .chars()
                    .take(chars.saturating_sub(1))
                    .chain(['…'])
                    .collect()
            } else {
                n.frame.clone()
            };
            ctx.set_fill_style_str("#111");
            let _ = ctx.fill_text(&label, x + 3.0, y + 12.0);
        }
    }
}

fn hit(canvas: &HtmlCanvasElement, ic: &SharedIcicle, e: &MouseEvent) -> Option<IcicleNode> {
    let r = canvas.get_bounding_client_rect();
    let (x, y) = (
        f64::from(e.client_x()) - r.left(),
        f64::from(e.client_y()) - r.top(),
    );
    let depth = (y / ROW_PX).floor();
    if depth < 0.0 || r.width() <= 0.0 {
        return None;
    }
    let at = x / r.width() * ic.icicle.total_bytes as f64;
    ic.icicle
        .nodes
        .iter()
        .find(|n| {
            f64::from(n.depth) == depth
                && n.offset_bytes as f64 <= at
                && at < (n.offset_bytes + n.bytes) as f64
        })
        .cloned()
}

#[function_component(IcicleView)]
pub fn icicle_view(p: &Props) -> Html {
    let canvas = use_node_ref();
    let hover = use_state(|| None::<IcicleNode>);
    let tick = use_canvas_listeners(&canvas, |_| {});
    {
        let (canvas, ic) = (canvas.clone(), p.icicle.clone());
        use_effect_with((ic, tick), move |(ic, _)| {
            if let Some(c) = canvas.cast::<HtmlCanvasElement>() {
                draw(&c, ic);
            }
        });
    }
    let target = |e: &MouseEvent| {
        e.target()
            .and_then(|t| t.dyn_into::<HtmlCanvasElement>().ok())
    };
    let on_move = {
        let (ic, hover) = (p.icicle.clone(), hover.clone());
        Callback::from(move |e: MouseEvent| {
            hover.set(target(&e).and_then(|c| hit(&c, &ic, &e)));
        })
    };
    let on_click = {
        let (ic, on_frame, on_callers) =
            (p.icicle.clone(), p.on_frame.clone(), p.on_callers.clone());
        Callback::from(move |e: MouseEvent| {
            if let Some(n) = target(&e).and_then(|c| hit(&c, &ic, &e)) {
                if n.frame.starts_with('(') {
                    return;
                }
                if e.shift_key() {
                    on_callers.emit(Some(n.frame));
                } else {
                    on_frame.emit(n.frame);
                }
            }
        })
    };
    let ic = &p.icicle.icicle;
    let h = f64::from(rows(&ic.nodes)) * ROW_PX;
    let when = ic.event.map_or("before the first event".to_string(), |e| {
        format!("after event {e}")
    });
    let marked_frames: Vec<&str> = marked(&p.icicle)
        .into_iter()
        .filter_map(|i| ic.nodes.get(i).map(|n| n.frame.as_str()))
        .collect();
    let marked_count = marked_frames.len();
    let mark_path = p
        .icicle
        .mark_path
        .as_ref()
        .and_then(|m| serde_json::to_string(&**m).ok());
    let marked_frames = serde_json::to_string(&marked_frames).unwrap_or_default();
    html! {
        <div class="icicle" data-testid="icicle" data-total-bytes={ic.total_bytes.to_string()}
            data-event={ic.event.map(|e| e.to_string())} data-nodes={ic.nodes.len().to_string()}
            data-mark-path={mark_path.clone()} data-marked-frames={mark_path.is_some().then_some(marked_frames)}>
            <p class="small">{ format!("Live memory {when}: {} (width = bytes; click a frame to see its bands on the timeline, shift-click to see who calls it)", human(ic.total_bytes)) }</p>
            if p.icicle.mark.is_some() {
                <p class="small" data-testid="icicle-mark">{
                    if mark_path.is_none() || marked_count == 0 {
                        "The band pinned on the timeline has no cell in this flamegraph (nothing alive here under its stack)."
                    } else {
                        "Outlined: the stack of the band pinned on the timeline."
                    }
                }</p>
            }
            <canvas ref={canvas} class="icicle-canvas" style={format!("height:{h}px")}
                onmousemove={on_move} onclick={on_click} onmouseleave={{ let hv = hover.clone(); Callback::from(move |_| hv.set(None)) }} />
            <p class="small icicle-hover" data-testid="icicle-hover">{
                match &*hover {
                    Some(n) => format!("{} — {} in {} allocations ({:.1}%)", n.frame, human(n.bytes), n.allocations, 100.0 * n.bytes as f64 / ic.total_bytes.max(1) as f64),
                    None => "\u{a0}".to_string(),
                }
            }</p>
        </div>
    }
}
