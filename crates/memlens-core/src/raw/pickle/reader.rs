//! The opcode loop's view of the chunk being fed: a cursor that hands out an opcode's operands,
//! and [`Halt`], the small control value by which an opcode stops the loop.
//!
//! An operand that runs past the chunk is not an error unless the input ends there: the loop
//! then stops before the opcode ([`Halt::NeedMore`]) and the caller feeds it again with more
//! bytes. Every method that takes `&mut Reader` is inlined into the loop, so that the cursor
//! lives in registers; the rare paths take a copy ([`Reader::short`]).

use super::opcodes::opcode_name;
use crate::error::DecodeError;

/// Why the opcode loop stops.
pub(super) enum Halt {
    /// The current opcode runs past the chunk: stop before it and wait for more bytes.
    NeedMore,
    /// STOP: the value is in the machine's result.
    Stop,
    Failed(DecodeError),
    /// A GET of a key of an earlier piece not resolved yet (parallel decoding only): the
    /// piece's loop resolves it and runs the opcode again.
    Ext(u64),
}

impl From<DecodeError> for Halt {
    #[inline(always)]
    fn from(e: DecodeError) -> Self {
        Halt::Failed(e)
    }
}

/// What running one opcode comes to: go on with the next, or stop.
pub(super) type Step = Result<(), Halt>;

/// A cursor over the chunk being fed, whose first byte is at absolute offset `base`.
#[derive(Clone, Copy)]
pub(super) struct Reader<'a> {
    pub buf: &'a [u8],
    /// The next unread byte.
    pub pos: usize,
    /// Where the current opcode starts.
    pub start: usize,
    /// The current opcode (for error messages).
    pub op: u8,
    pub base: u64,
    /// The chunk ends the input: an incomplete opcode is an error.
    eof: bool,
    total_len: Option<u64>,
}

impl<'a> Reader<'a> {
    #[inline(always)]
    pub fn new(buf: &'a [u8], base: u64, eof: bool, total_len: Option<u64>) -> Self {
        Reader {
            buf,
            pos: 0,
            start: 0,
            op: 0,
            base,
            eof,
            total_len,
        }
    }

    /// Absolute offset of the current opcode.
    #[inline(always)]
    pub fn at(&self) -> u64 {
        self.base + self.start as u64
    }

    /// Starts the next opcode and returns it; at the end of the chunk, stops (an error at the
    /// end of the input: there was no STOP).
    #[inline(always)]
    pub fn next_op(&mut self) -> Result<u8, Halt> {
        self.start = self.pos;
        match self.buf.get(self.pos) {
            Some(&op) => {
                self.pos += 1;
                self.op = op;
                Ok(op)
            }
            None if self.eof => Err(Halt::Failed(DecodeError::NoStop { offset: self.at() })),
            None => Err(Halt::NeedMore),
        }
    }

    /// The next `n` bytes.
    #[inline(always)]
    pub fn need(&mut self, n: u64) -> Result<&'a [u8], Halt> {
        if (self.buf.len() - self.pos) as u64 >= n {
            let s = &self.buf[self.pos..self.pos + n as usize];
            self.pos += n as usize;
            Ok(s)
        } else {
            Err(Self::short(*self, n))
        }
    }

    #[inline(always)]
    pub fn u8(&mut self) -> Result<u8, Halt> {
        Ok(self.need(1)?[0])
    }

    #[inline(always)]
    pub fn u32_le(&mut self) -> Result<u32, Halt> {
        let b = self.need(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    #[inline(always)]
    pub fn u64_le(&mut self) -> Result<u64, Halt> {
        let b = self.need(8)?;
        Ok(u64::from_le_bytes([
            b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7],
        ]))
    }

    /// `n` bytes wanted past the chunk: an absurd length or a truncation where the input
    /// cannot hold them, else wait for more.
    #[cold]
    #[inline(never)]
    fn short(self, n: u64) -> Halt {
        if let Some(total) = self.total_len {
            if (self.base + self.pos as u64).saturating_add(n) > total {
                if n > 8 {
                    return Halt::Failed(DecodeError::AbsurdLength {
                        len: n,
                        offset: self.at(),
                    });
                }
                return self.truncated();
            }
        }
        if self.eof {
            return self.truncated();
        }
        Halt::NeedMore
    }

    #[cold]
    fn truncated(self) -> Halt {
        Halt::Failed(DecodeError::Truncated {
            offset: self.base + self.buf.len() as u64,
            opcode: opcode_name(self.op),
        })
    }

    /// The rest of a protocol 0 text line, without its `\n`.
    #[inline(always)]
    pub fn line(&mut self) -> Result<&'a [u8], Halt> {
        match self.buf[self.pos..].iter().position(|&c| c == b'\n') {
            Some(i) => {
                let s = &self.buf[self.pos..self.pos + i];
                self.pos += i + 1;
                Ok(s)
            }
            None if self.eof => Err(self.truncated()),
            None => Err(Halt::NeedMore),
        }
    }
}
