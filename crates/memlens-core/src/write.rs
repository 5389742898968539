//! A streaming pickle writer that emits what CPython's pickler emits for snapshot-shaped data
//! (protocols 2–5): memoized strings and containers, batches of 1000 in APPENDS/SETITEMS,
//! 64 KiB FRAMEs from protocol 4 on. Used by the test-fixture builder and `memlens synth`;
//! it never holds more than one frame in memory.

use std::io::{self, Write};

/// A memo slot written earlier; [`PickleWriter::get`] refers to it again (BINGET).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MemoId(pub u32);

const BATCH: u32 = 1000;
const FRAME_TARGET: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    List,
    Dict,
    Tuple,
}

struct Open {
    kind: Kind,
    /// Values written into the current batch (for dicts: keys and values both count).
    in_batch: u32,
    memo: Option<MemoId>,
}

/// Writes one pickle to `W`. Call [`PickleWriter::finish`] after the top-level value.
pub struct PickleWriter<W: Write> {
    out: W,
    protocol: u8,
    buf: Vec<u8>,
    memo_next: u32,
    open: Vec<Open>,
    strings: rustc_hash::FxHashMap<Box<str>, MemoId>,
    memoize_strings: bool,
}

impl<W: Write> PickleWriter<W> {
    /// Starts a pickle of `protocol` (2..=5; others are clamped into that range).
    pub fn new(out: W, protocol: u8) -> Self {
        let protocol = protocol.clamp(2, 5);
        let mut w = PickleWriter {
            out,
            protocol,
            buf: Vec::with_capacity(FRAME_TARGET + 1024),
            memo_next: 0,
            open: Vec::new(),
            strings: Default::default(),
            memoize_strings: true,
        };
        w.buf.extend_from_slice(&[0x80, protocol]);
        if protocol >= 4 {
            // PROTO sits outside the first frame, as CPython writes it.
            let _ = w.out.write_all(&w.buf);
            w.buf.clear();
        }
        w
    }

    /// Whether equal strings are written once and referred to by memo (CPython does this for
    /// interned strings such as dict keys; on by default).
    pub fn set_memoize_strings(&mut self, on: bool) {
        self.memoize_strings = on;
    }

    pub fn protocol(&self) -> u8 {
        self.protocol
    }

    fn before_value(&mut self) {
        if let Some(top) = self.open.last_mut() {
            if top.kind == Kind::Tuple {
                return;
            }
            let per_batch = if top.kind == Kind::Dict {
                2 * BATCH
            } else {
                BATCH
            };
            if top.in_batch == 0 {
                self.buf.push(b'(');
            }
            top.in_batch += 1;
            if top.in_batch == per_batch {
                // the batch closes after this value: see after_value
            }
        }
    }

    fn after_value(&mut self) -> io::Result<()> {
        if let Some(top) = self.open.last_mut() {
            let per_batch = if top.kind == Kind::Dict {
                2 * BATCH
            } else {
                BATCH
            };
            if top.kind != Kind::Tuple && top.in_batch == per_batch {
                self.buf
                    .push(if top.kind == Kind::Dict { b'u' } else { b'e' });
                top.in_batch = 0;
            }
        }
        if self.buf.len() >= FRAME_TARGET {
            self.flush_frame()?;
        }
        Ok(())
    }

    fn flush_frame(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if self.protocol >= 4 {
            let mut hdr = [0u8; 9];
            hdr[0] = 0x95;
            hdr[1..].copy_from_slice(&(self.buf.len() as u64).to_le_bytes());
            self.out.write_all(&hdr)?;
        }
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    fn memoize(&mut self) -> MemoId {
        let id = MemoId(self.memo_next);
        self.memo_next += 1;
        if self.protocol >= 4 {
            self.buf.push(0x94);
        } else if id.0 < 256 {
            self.buf.extend_from_slice(&[b'q', id.0 as u8]);
        } else {
            self.buf.push(b'r');
            self.buf.extend_from_slice(&id.0.to_le_bytes());
        }
        id
    }

    fn raw_get(&mut self, id: MemoId) {
        if id.0 < 256 {
            self.buf.extend_from_slice(&[b'h', id.0 as u8]);
        } else {
            self.buf.push(b'j');
            self.buf.extend_from_slice(&id.0.to_le_bytes());
        }
    }

    /// Refers to a memoized value again (BINGET / LONG_BINGET).
    pub fn get(&mut self, id: MemoId) -> io::Result<()> {
        self.before_value();
        self.raw_get(id);
        self.after_value()
    }

    pub fn none(&mut self) -> io::Result<()> {
        self.before_value();
        self.buf.push(b'N');
        self.after_value()
    }

    pub fn bool(&mut self, b: bool) -> io::Result<()> {
        self.before_value();
        self.buf.push(if b { 0x88 } else { 0x89 });
        self.after_value()
    }

    fn raw_int(&mut self, v: i128) {
        if (0..256).contains(&v) {
            self.buf.extend_from_slice(&[b'K', v as u8]);
        } else if (0..65536).contains(&v) {
            self.buf.push(b'M');
            self.buf.extend_from_slice(&(v as u16).to_le_bytes());
        } else if (i32::MIN as i128..=i32::MAX as i128).contains(&v) {
            self.buf.push(b'J');
            self.buf.extend_from_slice(&(v as i32).to_le_bytes());
        } else {
            // LONG1 with the minimal two's complement encoding (CPython's encode_long).
            let bytes = v.to_le_bytes();
            let mut n = 16;
            while n > 1 {
                let top = bytes[n - 1];
                let next_sign = bytes[n - 2] & 0x80 != 0;
                if (top == 0 && !next_sign) || (top == 0xff && next_sign) {
                    n -= 1;
                } else {
                    break;
                }
            }
            self.buf.extend_from_slice(&[0x8a, n as u8]);
            self.buf.extend_from_slice(&bytes[..n]);
        }
    }

    pub fn int(&mut self, v: i64) -> io::Result<()> {
        self.before_value();
        self.raw_int(v as i128);
        self.after_value()
    }

    pub fn uint(&mut self, v: u64) -> io::Result<()> {
        self.before_value();
        self.raw_int(v as i128);
        self.after_value()
    }

    pub fn float(&mut self, v: f64) -> io::Result<()> {
        self.before_value();
        self.buf.push(b'G');
        self.buf.extend_from_slice(&v.to_be_bytes());
        self.after_value()
    }

    /// A string; with string memoization on, a repeat is written as BINGET.
    pub fn str(&mut self, s: &str) -> io::Result<()> {
        self.before_value();
        if self.memoize_strings {
            if let Some(&id) = self.strings.get(s) {
                self.raw_get(id);
                return self.after_value();
            }
        }
        let b = s.as_bytes();
        if self.protocol >= 4 && b.len() < 256 {
            self.buf.extend_from_slice(&[0x8c, b.len() as u8]);
        } else if b.len() <= u32::MAX as usize {
            self.buf.push(b'X');
            self.buf.extend_from_slice(&(b.len() as u32).to_le_bytes());
        } else {
            self.buf.push(0x8d);
            self.buf.extend_from_slice(&(b.len() as u64).to_le_bytes());
        }
        self.buf.extend_from_slice(b);
        let id = self.memoize();
        if self.memoize_strings {
            self.strings.insert(s.into(), id);
        }
        self.after_value()
    }

    pub fn bytes(&mut self, b: &[u8]) -> io::Result<()> {
        self.before_value();
        if b.len() < 256 {
            self.buf.extend_from_slice(&[b'C', b.len() as u8]);
        } else {
            self.buf.push(b'B');
            self.buf.extend_from_slice(&(b.len() as u32).to_le_bytes());
        }
        self.buf.extend_from_slice(b);
        self.memoize();
        self.after_value()
    }

    fn begin(&mut self, kind: Kind) {
        self.before_value();
        let memo = match kind {
            Kind::List => {
                self.buf.push(b']');
                Some(self.memoize())
            }
            Kind::Dict => {
                self.buf.push(b'}');
                Some(self.memoize())
            }
            Kind::Tuple => {
                self.buf.push(b'(');
                None
            }
        };
        self.open.push(Open {
            kind,
            in_batch: 0,
            memo,
        });
    }

    /// Opens a list; its items follow; [`Self::end`] closes it and returns its memo slot.
    pub fn begin_list(&mut self) {
        self.begin(Kind::List)
    }

    /// Opens a dict; keys and values follow alternately.
    pub fn begin_dict(&mut self) {
        self.begin(Kind::Dict)
    }

    /// Opens a tuple (MARK … TUPLE; memoized when closed).
    pub fn begin_tuple(&mut self) {
        self.begin(Kind::Tuple)
    }

    /// Closes the innermost open container; returns the memo slot that refers to it.
    pub fn end(&mut self) -> io::Result<MemoId> {
        let Some(top) = self.open.pop() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "end() without an open container",
            ));
        };
        let id = match top.kind {
            Kind::List | Kind::Dict => {
                if top.in_batch > 0 {
                    self.buf
                        .push(if top.kind == Kind::Dict { b'u' } else { b'e' });
                }
                top.memo.unwrap_or(MemoId(0))
            }
            Kind::Tuple => {
                self.buf.push(b't');
                self.memoize()
            }
        };
        self.after_value()?;
        Ok(id)
    }

    /// A 2-tuple of ints, as CPython writes `(a, b)`: a b TUPLE2 MEMOIZE.
    pub fn int_pair(&mut self, a: i64, b: i64) -> io::Result<MemoId> {
        self.before_value();
        self.raw_int(a as i128);
        self.raw_int(b as i128);
        self.buf.push(0x86);
        let id = self.memoize();
        self.after_value()?;
        Ok(id)
    }

    /// Writes STOP and flushes; returns the sink.
    pub fn finish(mut self) -> io::Result<W> {
        while !self.open.is_empty() {
            self.end()?;
        }
        self.buf.push(b'.');
        self.flush_frame()?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::{PickleMachine, Val};

    fn roundtrip(protocol: u8) -> (crate::raw::Arena, Val) {
        let mut w = PickleWriter::new(Vec::new(), protocol);
        w.begin_dict();
        w.str("segments").unwrap_or_default();
        w.begin_list();
        w.end().unwrap_or(MemoId(0));
        w.str("device_traces").unwrap_or_default();
        w.begin_list();
        w.begin_list();
        for i in 0..2500u64 {
            w.begin_dict();
            w.str("action").unwrap_or_default();
            w.str(if i % 2 == 0 {
                "alloc"
            } else {
                "free_completed"
            })
            .unwrap_or_default();
            w.str("addr").unwrap_or_default();
            w.uint(0x7f00_0000_0000 + (i / 2) * 512).unwrap_or_default();
            w.str("size").unwrap_or_default();
            w.int(512).unwrap_or_default();
            w.end().unwrap_or(MemoId(0));
        }
        w.end().unwrap_or(MemoId(0));
        w.end().unwrap_or(MemoId(0));
        w.end().unwrap_or(MemoId(0));
        let bytes = w.finish().unwrap_or_default();
        let (a, v, p) = PickleMachine::decode_all(&bytes).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p, protocol);
        (a, v)
    }

    #[test]
    fn writes_what_the_machine_reads_in_every_protocol() {
        for p in 2..=5 {
            let (a, v) = roundtrip(p);
            let traces = a.get(v, "device_traces").unwrap_or(Val::None);
            let dev0 = a
                .seq(traces)
                .and_then(|mut i| i.next())
                .unwrap_or(Val::None);
            assert_eq!(a.seq_len(dev0), Some(2500), "protocol {p}");
            assert_eq!(a.rows.len(), 2500);
            assert_eq!(a.rows.addr[4], 0x7f00_0000_0000 + 1024);
        }
    }
}
