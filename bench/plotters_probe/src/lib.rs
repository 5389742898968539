//! Probe: a ledger bar chart (8 bars) and a 256-point line chart, drawn with plotters'
//! canvas backend (feature `plot`) or with the canvas 2D API directly.
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

fn ctx(
    id: &str,
) -> (
    web_sys::HtmlCanvasElement,
    web_sys::CanvasRenderingContext2d,
) {
    let c: web_sys::HtmlCanvasElement = web_sys::window()
        .unwrap()
        .document()
        .unwrap()
        .get_element_by_id(id)
        .unwrap()
        .dyn_into()
        .unwrap();
    let x = c.get_context("2d").unwrap().unwrap().dyn_into().unwrap();
    (c, x)
}

#[cfg(feature = "plot")]
#[wasm_bindgen]
pub fn draw(bars: Vec<f64>, line: Vec<f64>) {
    use plotters::prelude::*;
    let b = plotters_canvas::CanvasBackend::new("bars")
        .unwrap()
        .into_drawing_area();
    b.fill(&WHITE).unwrap();
    let max = bars.iter().cloned().fold(1.0, f64::max);
    let mut ch = ChartBuilder::on(&b)
        .margin(5)
        .x_label_area_size(20)
        .y_label_area_size(40)
        .build_cartesian_2d(0..bars.len(), 0.0..max)
        .unwrap();
    ch.configure_mesh().draw().unwrap();
    ch.draw_series(
        bars.iter()
            .enumerate()
            .map(|(i, v)| Rectangle::new([(i, 0.0), (i + 1, *v)], BLUE.filled())),
    )
    .unwrap();
    let l = plotters_canvas::CanvasBackend::new("line")
        .unwrap()
        .into_drawing_area();
    l.fill(&WHITE).unwrap();
    let lmax = line.iter().cloned().fold(1.0, f64::max);
    let mut ch = ChartBuilder::on(&l)
        .margin(5)
        .x_label_area_size(20)
        .y_label_area_size(40)
        .build_cartesian_2d(0..line.len(), 0.0..lmax)
        .unwrap();
    ch.configure_mesh().draw().unwrap();
    ch.draw_series(LineSeries::new(
        line.iter().enumerate().map(|(i, v)| (i, *v)),
        &RED,
    ))
    .unwrap();
}

#[cfg(not(feature = "plot"))]
#[wasm_bindgen]
pub fn draw(bars: Vec<f64>, line: Vec<f64>) {
    let (c, x) = ctx("bars");
    let (w, h) = (c.width() as f64, c.height() as f64);
    x.clear_rect(0.0, 0.0, w, h);
    let max = bars.iter().cloned().fold(1.0, f64::max);
    let bw = w / bars.len().max(1) as f64;
    x.set_fill_style_str("blue");
    for (i, v) in bars.iter().enumerate() {
        let bh = v / max * (h - 20.0);
        x.fill_rect(i as f64 * bw, h - bh, bw - 2.0, bh);
        x.fill_text(&format!("{v:.0}"), i as f64 * bw, h - bh - 2.0)
            .unwrap();
    }
    let (c, x) = ctx("line");
    let (w, h) = (c.width() as f64, c.height() as f64);
    x.clear_rect(0.0, 0.0, w, h);
    let lmax = line.iter().cloned().fold(1.0, f64::max);
    x.begin_path();
    for (i, v) in line.iter().enumerate() {
        let (px, py) = (i as f64 / line.len().max(2) as f64 * w, h - v / lmax * h);
        if i == 0 {
            x.move_to(px, py)
        } else {
            x.line_to(px, py)
        }
    }
    x.set_stroke_style_str("red");
    x.stroke();
}
