//! Exports of what the view shows: its main canvas as PNG (timeline, state map, flamegraph), the
//! timeline as SVG (core's `layout::svg`: the picture the canvas drew last — viewport, colours,
//! search outlines, reserved and capacity lines, labels — drawn again on an SVG surface, so the
//! file holds what is on screen at that zoom) or, in other views, their largest inline SVG
//! chart; any table of the view as CSV (one row per table row); and the page's link (the hash
//! holds the view state) to the clipboard. Files are named after the snapshot and the view.

use crate::page::app_state::{SharedLayout, SharedMatches};
use crate::page::canvas::{ink_of, paint_of, text_width, MARGINS};
use memlens_core::colour::Colouring;
use memlens_core::layout::picture::Picture;
use memlens_core::layout::svg::{timeline_svg, SvgTheme};
use memlens_core::layout::{BandFilter, RenderOptions, Viewport};
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::JsCast;
use web_sys::{Element, HtmlCanvasElement};
use yew::prelude::*;

#[derive(Properties, PartialEq)]
pub struct ExportProps {
    /// The snapshot's name (files are named after it).
    pub file: String,
    /// The view's `#view=` key.
    pub view: String,
    /// The timeline layout the view draws (timeline views only).
    pub layout: Option<SharedLayout>,
}

/// What the timeline canvas drew last, with everything it drew it with: what the SVG export
/// draws again.
#[derive(Clone)]
pub struct DrawnTimeline {
    pub layout: SharedLayout,
    pub vp: Viewport,
    pub selected: Option<u32>,
    pub matches: Option<SharedMatches>,
    pub colours: Option<Rc<Colouring>>,
    pub filter: BandFilter,
    pub reserved: Option<SharedLayout>,
    pub capacity: Option<(u64, String)>,
}

thread_local! {
    static LAST_DRAWN: RefCell<Option<DrawnTimeline>> = const { RefCell::new(None) };
}

/// Called by the timeline after each draw on screen.
pub fn remember_drawn(d: DrawnTimeline) {
    LAST_DRAWN.with(|l| *l.borrow_mut() = Some(d));
}

/// The last drawn picture, if it is of `layout`.
fn drawn_of(layout: &SharedLayout) -> Option<DrawnTimeline> {
    LAST_DRAWN.with(|l| l.borrow().clone().filter(|d| d.layout == *layout))
}

/// `d` as an SVG document, in the page's theme.
fn timeline_svg_of(d: &DrawnTimeline, title: &str) -> String {
    let picture = Picture {
        layout: &d.layout.0,
        vp: &d.vp,
        margins: MARGINS,
        render: RenderOptions {
            selected: d.selected.map(|s| s as usize),
            matches: d.matches.as_ref().map(|m| m.0.as_ref()),
            colours: d.colours.as_ref().map(|c| c.index.as_slice()),
            filter: d.filter,
        },
        reserved: d.reserved.as_ref().map(|r| r.0.as_ref()),
        capacity: d.capacity.as_ref().map(|(b, w)| (*b, w.as_str())),
    };
    let ink = |i| ink_of(i).to_string();
    let theme = SvgTheme {
        paint: &paint_of,
        ink: &ink,
        text_width: &text_width,
    };
    timeline_svg(&picture, title, &theme).svg
}

fn document() -> Option<web_sys::Document> {
    web_sys::window()?.document()
}

/// The view's own elements (`main.content`), matching `selector`.
fn in_view(selector: &str) -> Vec<Element> {
    let Some(list) = document().and_then(|d| {
        d.query_selector_all(&format!("main.content {selector}"))
            .ok()
    }) else {
        return Vec::new();
    };
    (0..list.length())
        .filter_map(|i| list.item(i)?.dyn_into::<Element>().ok())
        .collect()
}

/// The element with the largest drawn area.
fn largest(els: Vec<Element>) -> Option<Element> {
    els.into_iter()
        .map(|e| {
            let r = e.get_bounding_client_rect();
            (r.width() * r.height(), e)
        })
        .filter(|(a, _)| *a > 0.0)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, e)| e)
}

/// Saves `href` (a data or object URL) as `name` through a temporary link.
fn save_href(href: &str, name: &str) {
    let Some(doc) = document() else { return };
    let (Ok(a), Some(body)) = (doc.create_element("a"), doc.body()) else {
        return;
    };
    let _ = a.set_attribute("href", href);
    let _ = a.set_attribute("download", name);
    if body.append_child(&a).is_ok() {
        if let Some(h) = a.dyn_ref::<web_sys::HtmlElement>() {
            h.click();
        }
        a.remove();
    }
}

/// Saves `text` as a file of type `mime`.
pub(crate) fn save_text(text: &str, mime: &str, name: &str) {
    let parts = js_sys::Array::of1(&text.into());
    let opts = web_sys::BlobPropertyBag::new();
    opts.set_type(mime);
    let Ok(blob) = web_sys::Blob::new_with_str_sequence_and_options(&parts, &opts) else {
        return;
    };
    let Ok(url) = web_sys::Url::create_object_url_with_blob(&blob) else {
        return;
    };
    save_href(&url, name);
    // Revoked once the download has taken the bytes.
    let later = url.clone();
    gloo_timers::callback::Timeout::new(10_000, move || {
        let _ = web_sys::Url::revoke_object_url(&later);
    })
    .forget();
}

/// `snap.pickle` + `timeline` → `snap-timeline`.
pub(crate) fn base_name(file: &str, view: &str) -> String {
    let stem = file
        .split('.')
        .next()
        .filter(|s| !s.is_empty())
        .unwrap_or("memlens");
    format!("{stem}-{view}")
}

fn export_png(base: &str) -> Result<(), String> {
    let c = largest(in_view("canvas")).ok_or("nothing drawn in this view")?;
    let c: HtmlCanvasElement = c.dyn_into().map_err(|_| "not a canvas")?;
    let url = c
        .to_data_url_with_type("image/png")
        .map_err(|_| "the canvas cannot be read")?;
    save_href(&url, &format!("{base}.png"));
    Ok(())
}

fn export_svg(base: &str, layout: Option<&SharedLayout>) -> Result<(), String> {
    if let Some(d) = layout.and_then(drawn_of) {
        let svg = timeline_svg_of(&d, base);
        save_text(&svg, "image/svg+xml", &format!("{base}.svg"));
        return Ok(());
    }
    let svg = largest(in_view("svg")).ok_or("no picture in this view")?;
    let mut text = svg.outer_html();
    if !text.contains("xmlns=") {
        text = text.replacen("<svg", "<svg xmlns=\"http://www.w3.org/2000/svg\"", 1);
    }
    save_text(&text, "image/svg+xml", &format!("{base}.svg"));
    Ok(())
}

/// A CSV field, quoted when it must be.
fn csv_field(s: &str) -> String {
    let s = s.trim();
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// A table's rows as CSV (header rows included), one line per `<tr>`.
pub fn table_csv(table: &Element) -> String {
    let mut out = String::new();
    let Ok(rows) = table.query_selector_all("tr") else {
        return out;
    };
    for i in 0..rows.length() {
        let Some(row) = rows.item(i).and_then(|r| r.dyn_into::<Element>().ok()) else {
            continue;
        };
        let Ok(cells) = row.query_selector_all("th, td") else {
            continue;
        };
        let line: Vec<String> = (0..cells.length())
            .filter_map(|k| cells.item(k)?.text_content())
            .map(|t| csv_field(&t))
            .collect();
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}

/// What a table is called: its `data-testid`, else the heading before it, else its position.
fn table_name(t: &Element, i: usize) -> String {
    if let Some(id) = t.get_attribute("data-testid") {
        return id;
    }
    let mut prev = t.previous_element_sibling();
    while let Some(p) = prev {
        if matches!(p.tag_name().as_str(), "H2" | "H3" | "H4" | "SUMMARY" | "P") {
            let text = p.text_content().unwrap_or_default();
            let text: String = text.trim().chars().take(40).collect();
            if !text.is_empty() {
                return text;
            }
        }
        prev = p.previous_element_sibling();
    }
    format!("table {}", i + 1)
}

/// `"Who holds memory at the peak"` → `who-holds-memory-at-the-peak`.
fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

fn copy_link() -> bool {
    let Some(w) = web_sys::window() else {
        return false;
    };
    let href = w.location().href().unwrap_or_default();
    crate::page::stack_frames::copy_to_clipboard(&href)
}

/// The export controls above a view.
#[function_component(ExportBar)]
pub fn export_bar(p: &ExportProps) -> Html {
    let error = use_state(|| None::<String>);
    let tables = use_state(Vec::<String>::new);
    let link = use_state(|| None::<bool>);
    let base = base_name(&p.file, &p.view);
    let report = {
        let error = error.clone();
        move |r: Result<(), String>| error.set(r.err())
    };
    let on_png = {
        let (base, report) = (base.clone(), report.clone());
        Callback::from(move |_: MouseEvent| report(export_png(&base)))
    };
    let on_svg = {
        let (base, report, layout) = (base.clone(), report.clone(), p.layout.clone());
        Callback::from(move |_: MouseEvent| report(export_svg(&base, layout.as_ref())))
    };
    // The view's tables are listed when the list is opened (they change with the view).
    let refresh = {
        let tables = tables.clone();
        Callback::from(move |_: FocusEvent| {
            let names = in_view("table")
                .iter()
                .enumerate()
                .map(|(i, t)| table_name(t, i))
                .collect();
            tables.set(names);
        })
    };
    let on_csv = {
        let base = base.clone();
        Callback::from(move |e: Event| {
            let Some(sel) = e.target_dyn_into::<web_sys::HtmlSelectElement>() else {
                return;
            };
            let i = sel.selected_index() - 1;
            sel.set_selected_index(0);
            let all = in_view("table");
            if let Some(t) = usize::try_from(i).ok().and_then(|i| all.get(i)) {
                let name = slug(&table_name(t, i as usize));
                save_text(&table_csv(t), "text/csv", &format!("{base}-{name}.csv"));
            }
        })
    };
    let on_link = {
        let link = link.clone();
        Callback::from(move |_: MouseEvent| link.set(Some(copy_link())))
    };
    html! {
        <span class="exports" data-testid="exports">
            { "Export " }
            <button class="link" data-testid="export-png" title="the view's picture as PNG" onclick={on_png}>{ "PNG" }</button>
            <button class="link" data-testid="export-svg" title="the view's picture as SVG (the timeline: the bands drawn at this zoom)" onclick={on_svg}>{ "SVG" }</button>
            <select data-testid="export-csv" title="a table of this view as CSV" onfocus={refresh} onchange={on_csv}>
                <option value="">{ "CSV…" }</option>
                { for tables.iter().map(|t| html! { <option>{ t }</option> }) }
            </select>
            <button class="link" data-testid="copy-link" title="copy a link to this view (file, view, window, pin)" data-copied={link.map(|b| b.to_string())} onclick={on_link}>
                { match *link { Some(true) => "link copied", Some(false) => "cannot copy here", None => "copy link" } }
            </button>
            if let Some(e) = &*error { <span class="muted small" data-testid="export-error">{ e }</span> }
        </span>
    }
}
