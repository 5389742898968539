//! The words of one fixture line (`value`, `key=value`, quoted parts, `#` comments) and the
//! scalars they spell: integers (decimal or hex), sizes with units, frames, setting values.

use crate::document::{FrameDef, Scalar};
use crate::error::FixtureError;

/// One word of a line: `value` or `key=value` (either part may be quoted).
#[derive(Debug, Clone)]
pub(crate) struct Tok {
    pub(crate) key: Option<String>,
    pub(crate) val: String,
}

pub(crate) fn tokenize(text: &str, line: usize) -> Result<Vec<Tok>, FixtureError> {
    let mut toks = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        match chars.peek() {
            None | Some('#') => break,
            Some(_) => {}
        }
        let mut word = String::new();
        let mut eq: Option<usize> = None;
        let mut quoted = false;
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                break;
            }
            chars.next();
            match c {
                '"' => {
                    quoted = true;
                    let mut closed = false;
                    while let Some(c) = chars.next() {
                        match c {
                            '"' => {
                                closed = true;
                                break;
                            }
                            '\\' => match chars.next() {
                                Some('n') => word.push('\n'),
                                Some('t') => word.push('\t'),
                                Some(other) => word.push(other),
                                None => return Err(FixtureError::UnterminatedQuote { line }),
                            },
                            other => word.push(other),
                        }
                    }
                    if !closed {
                        return Err(FixtureError::UnterminatedQuote { line });
                    }
                }
                '=' if eq.is_none() && !quoted => {
                    eq = Some(word.len());
                    word.push('=');
                }
                other => word.push(other),
            }
        }
        toks.push(match eq {
            Some(i) => Tok {
                key: Some(word[..i].to_string()),
                val: word[i + 1..].to_string(),
            },
            None => Tok {
                key: None,
                val: word,
            },
        });
    }
    Ok(toks)
}

/// An integer: decimal or `0x` hex, `_` separators allowed, optional `-`.
pub(crate) fn parse_int(s: &str) -> Option<i128> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, s),
    };
    let body: String = body.chars().filter(|&c| c != '_').collect();
    if body.is_empty() {
        return None;
    }
    let v = match body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        Some(h) => i128::from_str_radix(h, 16).ok()?,
        None => {
            if !body.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            body.parse::<i128>().ok()?
        }
    };
    Some(if neg { -v } else { v })
}

/// A size: an integer, or a number with a unit (`B`, `KiB`, `MiB`, `GiB`, `TiB`, `KB`, `MB`, `GB`);
/// fractions must come to whole bytes (`1.5MiB`).
pub(crate) fn parse_size(s: &str) -> Option<u64> {
    if let Some(v) = parse_int(s) {
        return u64::try_from(v).ok();
    }
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))?;
    let (num, unit) = s.split_at(split);
    let mult: u128 = match unit {
        "B" => 1,
        "KiB" | "K" => 1 << 10,
        "MiB" | "M" => 1 << 20,
        "GiB" | "G" => 1 << 30,
        "TiB" | "T" => 1 << 40,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return None,
    };
    let num: String = num.chars().filter(|&c| c != '_').collect();
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num.as_str(), ""),
    };
    if int.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > 18
    {
        return None;
    }
    let mantissa: u128 = format!("{int}{frac}").parse().ok()?;
    let scale = 10u128.checked_pow(frac.len() as u32)?;
    let bytes = mantissa.checked_mul(mult)?;
    if bytes % scale != 0 {
        return None;
    }
    u64::try_from(bytes / scale).ok()
}

/// `file:line:function`, split at the first `:<digits>:` (C++ names may hold `::`).
pub(crate) fn parse_frame(s: &str) -> Option<FrameDef> {
    let b = s.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c != b':' {
            continue;
        }
        let digits = b[i + 1..]
            .iter()
            .take_while(|d| d.is_ascii_digit() || **d == b'-')
            .count();
        if digits > 0 && b.get(i + 1 + digits) == Some(&b':') {
            let line = s.get(i + 1..i + 1 + digits)?.parse().ok()?;
            return Some(FrameDef {
                filename: s.get(..i)?.to_string(),
                line,
                name: s.get(i + 2 + digits..)?.to_string(),
            });
        }
    }
    None
}

pub(crate) fn parse_scalar(t: &str) -> Scalar {
    match t {
        "true" | "True" => Scalar::Bool(true),
        "false" | "False" => Scalar::Bool(false),
        _ => {
            if let Some(i) = parse_int(t).and_then(|v| i64::try_from(v).ok()) {
                Scalar::Int(i)
            } else if let Ok(f) = t.parse::<f64>() {
                Scalar::Float(f)
            } else {
                Scalar::Str(t.to_string())
            }
        }
    }
}
