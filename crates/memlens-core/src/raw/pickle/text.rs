//! Protocol 0's text operands: decimal memo keys, quoted STRING literals and
//! raw-unicode-escaped UNICODE lines.

pub(super) fn parse_dec_u64(l: &[u8]) -> Option<u64> {
    std::str::from_utf8(l).ok()?.trim().parse().ok()
}

/// Protocol 0 UNICODE: raw-unicode-escape (only `\uXXXX` and `\UXXXXXXXX` are escapes).
pub(super) fn unescape_raw_unicode(l: &[u8]) -> String {
    let mut out = String::with_capacity(l.len());
    let mut i = 0;
    while i < l.len() {
        if l[i] == b'\\' && i + 1 < l.len() && (l[i + 1] == b'u' || l[i + 1] == b'U') {
            let w = if l[i + 1] == b'u' { 4 } else { 8 };
            if let Some(hex) = l.get(i + 2..i + 2 + w) {
                if let Some(c) = std::str::from_utf8(hex)
                    .ok()
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .and_then(char::from_u32)
                {
                    out.push(c);
                    i += 2 + w;
                    continue;
                }
            }
        }
        out.push(l[i] as char);
        i += 1;
    }
    out
}

/// Protocol 0 STRING: a quoted Python literal with backslash escapes.
pub(super) fn unquote_py_string(l: &[u8]) -> Option<Vec<u8>> {
    let q = *l.first()?;
    if !(q == b'\'' || q == b'"') || l.len() < 2 || *l.last()? != q {
        return None;
    }
    let body = &l[1..l.len() - 1];
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        let c = body[i];
        if c == b'\\' && i + 1 < body.len() {
            let e = body[i + 1];
            i += 2;
            match e {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'\\' => out.push(b'\\'),
                b'\'' => out.push(b'\''),
                b'"' => out.push(b'"'),
                b'x' => {
                    let h = body.get(i..i + 2)?;
                    out.push(u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?);
                    i += 2;
                }
                _ => {
                    out.push(b'\\');
                    out.push(e);
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    Some(out)
}
