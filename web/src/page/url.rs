//! The page's query string (`?src=...&workers=2`), read the one way.

/// The value of `key` in the page's query, decoded.
pub fn query_value(key: &str) -> Option<String> {
    let search = web_sys::window()?.location().search().ok()?;
    web_sys::UrlSearchParams::new_with_str(&search)
        .ok()?
        .get(key)
}
