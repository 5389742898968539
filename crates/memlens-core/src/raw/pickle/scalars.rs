//! Opcodes that push a constant: ints, floats, None and booleans, strings (interned) and bytes,
//! in their binary forms and protocol 0's text forms.

use super::reader::{Reader, Step};
use super::stack::push_val;
use super::text::{unescape_raw_unicode, unquote_py_string};
use super::PickleMachine;
use crate::raw::value::{Node, Val};

impl PickleMachine {
    /// BININT1, BININT2, BININT, LONG1, LONG4, BINFLOAT, NONE, NEWTRUE, NEWFALSE.
    #[inline(always)]
    pub(super) fn push_binary_scalar(&mut self, op: u8, r: &mut Reader) -> Step {
        match op {
            b'K' => {
                let b = r.need(1)?;
                push_val(&mut self.stack, Val::Int(b[0] as i64));
            }
            b'M' => {
                let b = r.need(2)?;
                self.stack
                    .push(Val::Int(u16::from_le_bytes([b[0], b[1]]) as i64));
            }
            b'J' => {
                let b = r.need(4)?;
                self.stack
                    .push(Val::Int(i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64));
            }
            0x8a => {
                let n = r.u8()? as u64;
                let b = r.need(n)?;
                // Two push sites, so the common one stores the int straight from registers.
                if b.len() <= 8 {
                    push_val(&mut self.stack, Val::Int(le_i64(b)));
                } else {
                    let v = self.long_bytes_big(b);
                    push_val(&mut self.stack, v);
                }
            }
            0x8b => {
                let n = r.u32_le()? as i32;
                if n < 0 {
                    return Err(self.malformed(r.at(), "LONG4 with a negative length").into());
                }
                let b = r.need(n as u64)?;
                let v = self.long_bytes(b);
                push_val(&mut self.stack, v);
            }
            b'G' => {
                let b = r.need(8)?;
                let f = f64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                push_val(&mut self.stack, Val::Float(f));
            }
            b'N' => push_val(&mut self.stack, Val::None),
            0x88 => push_val(&mut self.stack, Val::Bool(true)),
            _ /* NEWFALSE */ => push_val(&mut self.stack, Val::Bool(false)),
        }
        Ok(())
    }

    /// SHORT_BINUNICODE, BINUNICODE, BINUNICODE8, and Python 2's SHORT_BINSTRING and
    /// BINSTRING, kept as text (they only ever hold ASCII names here): interned.
    #[inline(always)]
    pub(super) fn push_binary_string(&mut self, op: u8, r: &mut Reader) -> Step {
        let n = match op {
            0x8c | b'U' => r.u8()? as u64,
            b'X' | b'T' => r.u32_le()? as u64,
            _ => r.u64_le()?,
        };
        let s = r.need(n)?;
        let id = self.arena.strings.intern_bytes(s);
        push_val(&mut self.stack, Val::Str(id));
        Ok(())
    }

    /// SHORT_BINBYTES, BINBYTES, BINBYTES8 and BYTEARRAY8: a bytes node.
    #[inline(always)]
    pub(super) fn push_bytes(&mut self, op: u8, r: &mut Reader) -> Step {
        let n = match op {
            b'C' => r.u8()? as u64,
            b'B' => r.u32_le()? as u64,
            _ => r.u64_le()?,
        };
        let s = r.need(n)?.to_vec().into_boxed_slice();
        let v = self.arena.push(Node::Bytes(s));
        push_val(&mut self.stack, v);
        Ok(())
    }

    /// Protocol 0's text constants, each a line: INT (also a boolean, `01` / `00`), LONG,
    /// FLOAT, UNICODE and STRING.
    #[inline(always)]
    pub(super) fn push_text(&mut self, op: u8, r: &mut Reader) -> Step {
        let l = r.line()?;
        let v = self
            .text_value(op, l)
            .ok_or_else(|| self.malformed(r.at(), format!("bad {} literal", text_kind(op))))?;
        push_val(&mut self.stack, v);
        Ok(())
    }

    /// The value of text line `l` of `op` (see [`Self::push_text`]); `None` where malformed.
    #[inline(never)]
    fn text_value(&mut self, op: u8, l: &[u8]) -> Option<Val> {
        Some(match op {
            b'I' => match l {
                b"01" => Val::Bool(true),
                b"00" => Val::Bool(false),
                _ => self.parse_text_int(l)?,
            },
            b'L' => self.parse_text_int(l.strip_suffix(b"L").unwrap_or(l))?,
            b'F' => Val::Float(std::str::from_utf8(l).ok()?.trim().parse::<f64>().ok()?),
            b'V' => Val::Str(self.arena.strings.intern(&unescape_raw_unicode(l))),
            _ => Val::Str(self.arena.strings.intern_bytes(&unquote_py_string(l)?)),
        })
    }

    #[inline]
    fn long_bytes(&mut self, b: &[u8]) -> Val {
        if b.len() <= 8 {
            Val::Int(le_i64(b))
        } else {
            self.long_bytes_big(b)
        }
    }

    /// LONG1/LONG4 payload of more than 8 bytes.
    #[inline(never)]
    fn long_bytes_big(&mut self, b: &[u8]) -> Val {
        // Shrink redundant sign bytes so small values stay inline.
        let neg = b.last().is_some_and(|&x| x & 0x80 != 0);
        let mut n = b.len();
        let fill = if neg { 0xff } else { 0 };
        while n > 8 && b[n - 1] == fill && (b[n - 2] & 0x80 != 0) == neg {
            n -= 1;
        }
        if n <= 8 {
            Val::Int(le_i64(&b[..n]))
        } else {
            self.arena.push(Node::BigInt(b.to_vec().into_boxed_slice()))
        }
    }

    #[inline(never)]
    fn parse_text_int(&mut self, l: &[u8]) -> Option<Val> {
        let s = std::str::from_utf8(l).ok()?.trim();
        if let Ok(i) = s.parse::<i64>() {
            return Some(Val::Int(i));
        }
        let i = s.parse::<i128>().ok()?;
        Some(
            self.arena
                .push(Node::BigInt(i.to_le_bytes().to_vec().into_boxed_slice())),
        )
    }
}

/// The word for `op`'s literal in an error message.
fn text_kind(op: u8) -> &'static str {
    match op {
        b'I' => "INT",
        b'L' => "LONG",
        b'F' => "FLOAT",
        _ => "STRING",
    }
}

/// Sign-extends little-endian two's complement bytes (≤ 8) to i64. Shifts rather than a copy
/// into a buffer: in wasm a variable-length copy is a call to `memcpy`.
#[inline]
pub(super) fn le_i64(b: &[u8]) -> i64 {
    let n = b.len().min(8);
    let mut v = 0u64;
    for (i, &x) in b.iter().take(8).enumerate() {
        v |= (x as u64) << (8 * i);
    }
    if n > 0 && n < 8 && b[n - 1] & 0x80 != 0 {
        v |= u64::MAX << (8 * n);
    }
    v as i64
}
