//! Human-readable byte sizes for every CLI command, written exactly as upstream's
//! `torch.cuda._memory_viz.Bytes` writes them (`f"{num:3.1f}{unit}B"`, binary units), so text
//! output can be compared line for line with `python -m torch.cuda._memory_viz`.

use std::fmt;

/// A byte count that displays like upstream's `Bytes`: `0.0B`, `512.0B`, `4.0MiB`, `1.5GiB`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bytes(pub f64);

impl From<u64> for Bytes {
    fn from(n: u64) -> Self {
        Bytes(n as f64)
    }
}

impl From<i64> for Bytes {
    fn from(n: i64) -> Self {
        Bytes(n as f64)
    }
}

impl From<f64> for Bytes {
    fn from(n: f64) -> Self {
        Bytes(n)
    }
}

/// A change of bytes with its sign: `+4.0MiB`, `-78.1MiB`.
pub fn signed_bytes(b: i64) -> String {
    let sign = if b < 0 { "-" } else { "+" };
    format!("{sign}{}", Bytes::from(b.unsigned_abs()))
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Same loop as upstream's `_format_size`: divide by 1024 while |num| ≥ 1024. Rust's `{:.1}`
        // rounds the exact binary value half to even, as Python's format does.
        let mut num = self.0;
        for unit in ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"] {
            if num.abs() < 1024.0 {
                return write!(f, "{num:3.1}{unit}B");
            }
            num /= 1024.0;
        }
        write!(f, "{num:.1}YiB")
    }
}

#[cfg(test)]
mod tests {
    use super::Bytes;

    fn s(b: impl Into<Bytes>) -> String {
        b.into().to_string()
    }

    #[test]
    fn matches_python_format_size() {
        // Expected strings printed by upstream's `_format_size` under CPython 3.11.
        let cases: &[(u64, &str)] = &[
            (0, "0.0B"),
            (1, "1.0B"),
            (1023, "1023.0B"),
            (1024, "1.0KiB"),
            (1280, "1.2KiB"),         // 1.25: a tie, rounded half to even
            (1433, "1.4KiB"),         // 1.3994…
            (1_048_575, "1024.0KiB"), // 1023.999… stays in KiB, rounds up in print
            (2_097_152, "2.0MiB"),
            (20_971_520, "20.0MiB"),
            (123_502, "120.6KiB"),
            (22_194_159_616, "20.7GiB"),
            (u64::MAX, "16.0EiB"),
        ];
        for (n, want) in cases {
            assert_eq!(s(*n), *want, "{n}");
        }
        assert_eq!(s(-2048i64), "-2.0KiB");
        assert_eq!(s(1e30), "827180.6YiB");
    }
}
