//! Light and dark theme: the page follows `prefers-color-scheme` until the toolbar's toggle
//! picks one, which `localStorage` (`memlens-theme`) remembers. The theme is the root
//! element's `data-theme` (the stylesheet's colours hang off it), and the canvases read their
//! colours from [`colours`] on every draw, so a theme change needs only a redraw.

/// `localStorage` key of the user's choice.
const STORAGE_KEY: &str = "memlens-theme";

/// Colours the canvases draw with, per theme.
pub struct CanvasColours {
    /// Band colours by palette index (`memlens_core::layout::paint`): tableau10, then the ramp.
    pub bands: [&'static str; 18],
    /// What a before-the-trace band is mixed with (the plot's background), and how much.
    pub pale_mix: ([u8; 3], f64),
    pub background: &'static str,
    pub text: &'static str,
    pub text_muted: &'static str,
    pub grid: &'static str,
    pub tick: &'static str,
    /// The underlay (bands too thin to draw one by one).
    pub thin: &'static str,
    /// Outlines of the pinned band, the overview's window, the state map's blocks.
    pub outline: &'static str,
    pub region_text: &'static str,
    pub pool_fill: &'static str,
    pub pool_stroke: &'static str,
    pub marker_snapshot: &'static str,
    pub reserved_line: &'static str,
    pub capacity_line: &'static str,
    /// Shade over the overview outside the window.
    pub shade: &'static str,
}

/// Upstream's tableau10, then a viridis ramp (dark to light) for sizes and allocation order.
const BANDS: [&str; 18] = [
    "#4e79a7", "#f28e2c", "#e15759", "#76b7b2", "#59a14f", "#edc949", "#af7aa1", "#ff9da7",
    "#9c755f", "#bab0ab", "#440154", "#46327e", "#365c8d", "#277f8e", "#1fa187", "#4ac16d",
    "#a0da39", "#fde725",
];

const LIGHT: CanvasColours = CanvasColours {
    bands: BANDS,
    pale_mix: ([255, 255, 255], 0.55),
    background: "#ffffff",
    text: "#444444",
    text_muted: "#777777",
    grid: "#e6e6e6",
    tick: "#999999",
    thin: "#9ea3ad",
    outline: "#000000",
    region_text: "#4a4aa8",
    pool_fill: "#dedad7",
    pool_stroke: "#6f6a66",
    marker_snapshot: "#333333",
    reserved_line: "#1d1d1f",
    capacity_line: "#c0392b",
    shade: "rgba(0,0,0,0.08)",
};

const DARK: CanvasColours = CanvasColours {
    bands: BANDS,
    pale_mix: ([30, 31, 36], 0.45),
    background: "#1e1f24",
    text: "#d6d6dc",
    text_muted: "#a0a0aa",
    grid: "#34353c",
    tick: "#707078",
    thin: "#5d616b",
    outline: "#ffffff",
    region_text: "#a9a9ff",
    pool_fill: "#3a3836",
    pool_stroke: "#a09a96",
    marker_snapshot: "#cccccc",
    reserved_line: "#f2f2f5",
    capacity_line: "#ff6b5b",
    shade: "rgba(255,255,255,0.10)",
};

/// Whether the page is dark now.
pub fn is_dark() -> bool {
    web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.document_element())
        .and_then(|e| e.get_attribute("data-theme"))
        .is_some_and(|t| t == "dark")
}

/// The canvas colours of the current theme.
pub fn colours() -> &'static CanvasColours {
    if is_dark() {
        &DARK
    } else {
        &LIGHT
    }
}

/// A band colour mixed towards the background: memory allocated before the trace. Opaque,
/// so the underlay does not show through.
pub fn pale(hex: &str, c: &CanvasColours) -> String {
    let ch = |i: usize| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("80"), 16).unwrap_or(128);
    let (bg, t) = c.pale_mix;
    let mix = |v: u8, b: u8| (v as f64 * (1.0 - t) + b as f64 * t).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(ch(1), bg[0]),
        mix(ch(3), bg[1]),
        mix(ch(5), bg[2])
    )
}

fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok()?
}

/// The theme to start with: the remembered choice, else the system's.
pub fn initial_dark() -> bool {
    match storage().and_then(|s| s.get_item(STORAGE_KEY).ok()?) {
        Some(t) => t == "dark",
        None => web_sys::window()
            .and_then(|w| w.match_media("(prefers-color-scheme: dark)").ok()?)
            .is_some_and(|m| m.matches()),
    }
}

/// Shows the theme (the root's `data-theme`).
pub fn apply(dark: bool) {
    if let Some(e) = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.document_element())
    {
        let _ = e.set_attribute("data-theme", if dark { "dark" } else { "light" });
    }
}

/// The user picked a theme: show it and remember it.
pub fn choose(dark: bool) {
    apply(dark);
    if let Some(s) = storage() {
        let _ = s.set_item(STORAGE_KEY, if dark { "dark" } else { "light" });
    }
}
