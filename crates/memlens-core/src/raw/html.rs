//! HTML files written by `python -m torch.cuda._memory_viz trace_plot/segment_plot` (torch ≥ 2.1):
//! the pickle is base64 in `const local_files = [{"name": ..., "base64": "..."}]`, NUL-padded to a
//! multiple of 3 bytes so the text has no `=`.

use crate::error::DecodeError;
use base64::Engine;

/// True when the bytes look like an HTML document.
pub fn looks_like_html(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(1024)];
    let t = String::from_utf8_lossy(head).to_ascii_lowercase();
    let t = t.trim_start_matches('\u{feff}').trim_start();
    t.starts_with("<!doctype")
        || t.starts_with("<html")
        || t.starts_with("<head")
        || t.starts_with("<script")
        || t.starts_with("<meta")
        || t.starts_with("<!--")
}

/// Extracts the first embedded snapshot's bytes.
pub fn extract_pickle(bytes: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let text = String::from_utf8_lossy(bytes);
    let from = text
        .find("local_files")
        .ok_or(DecodeError::HtmlWithoutSnapshot)?;
    let rest = &text[from..];
    let key = rest
        .find("\"base64\"")
        .ok_or(DecodeError::HtmlWithoutSnapshot)?;
    let rest = &rest[key + "\"base64\"".len()..];
    let q = rest.find('"').ok_or(DecodeError::HtmlWithoutSnapshot)?;
    let rest = &rest[q + 1..];
    let end = rest.find('"').ok_or(DecodeError::HtmlWithoutSnapshot)?;
    let b64: String = rest[..end]
        .chars()
        .filter(|c| !c.is_ascii_whitespace() && *c != '\\')
        .collect();
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    engine
        .decode(b64.as_bytes())
        .map_err(|e| DecodeError::Base64(e.to_string()))
}
