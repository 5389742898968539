//! The small snapshot the worker decodes and lays out once while the page waits for a file
//! (`worker::warm_up`): one device, 2000 allocations of 1–64 KiB on two stacks, each freed 16
//! allocations later (5968 trace entries), written by core's pickle writer as `_dump_snapshot`
//! lays it out (the frame lists written once, then referred to by memo). Made in the worker in a
//! few milliseconds rather than shipped as ~200 KB of bytes; a test checks it is byte for byte
//! what the fixture text it replaced builds.

use memlens_core::write::{MemoId, PickleWriter};
use std::io;

const ALLOCS: u64 = 2000;
/// An allocation is freed this many allocations after it was made.
const LIVE: u64 = 16;
const BASE_ADDR: u64 = 0x7f00_0000_0000;
const ADDR_STEP: u64 = 0x10_0000;
/// `time_us` of the first entry (the fixture builder's default clock) and the step.
const START_US: i64 = 1_700_000_000_000_000;
const STEP_US: i64 = 1_000;
/// The two stacks, (filename, line, function) innermost first: allocation `n` has stack `n % 2`.
const STACKS: [[(&str, i64, &str); 2]; 2] = [
    [("train.py", 10, "step"), ("model.py", 5, "forward")],
    [("train.py", 11, "step"), ("model.py", 7, "backward")],
];

/// The warm-up snapshot as pickle bytes (protocol 4).
pub fn snapshot_pickle() -> io::Result<Vec<u8>> {
    snapshot_pickle_of(ALLOCS)
}

/// The same with `allocs` allocations (`3 * allocs - 2 * LIVE` trace entries from `LIVE` on).
pub fn snapshot_pickle_of(allocs: u64) -> io::Result<Vec<u8>> {
    let mut t = Trace {
        w: PickleWriter::new(Vec::new(), 4),
        stacks: [None; 2],
        time_us: START_US,
    };
    t.w.begin_dict();
    t.w.str("segments")?;
    t.w.begin_list();
    t.w.end()?;
    t.w.str("device_traces")?;
    t.w.begin_list();
    t.w.begin_list();
    for n in 0..allocs {
        t.entry("alloc", n)?;
        if let Some(freed) = n.checked_sub(LIVE) {
            t.entry("free_requested", freed)?;
            t.entry("free_completed", freed)?;
        }
    }
    t.w.end()?;
    t.w.end()?;
    t.w.end()?;
    t.w.finish()
}

struct Trace {
    w: PickleWriter<Vec<u8>>,
    /// Memo slot of each stack's frame list once written.
    stacks: [Option<MemoId>; 2],
    time_us: i64,
}

impl Trace {
    /// One trace entry of allocation `n`: action, addr, size, stream, time_us, frames.
    fn entry(&mut self, action: &str, n: u64) -> io::Result<()> {
        let w = &mut self.w;
        w.begin_dict();
        w.str("action")?;
        w.str(action)?;
        w.str("addr")?;
        w.uint(BASE_ADDR + n * ADDR_STEP)?;
        w.str("size")?;
        w.uint((1 + n % 64) * 1024)?;
        w.str("stream")?;
        w.uint(0)?;
        w.str("time_us")?;
        w.int(self.time_us)?;
        self.time_us += STEP_US;
        w.str("frames")?;
        let stack = (n % 2) as usize;
        match self.stacks.get(stack).copied().flatten() {
            Some(memo) => w.get(memo)?,
            None => {
                w.begin_list();
                for (filename, line, name) in STACKS.get(stack).into_iter().flatten() {
                    w.begin_dict();
                    w.str("name")?;
                    w.str(name)?;
                    w.str("filename")?;
                    w.str(filename)?;
                    w.str("line")?;
                    w.int(*line)?;
                    w.end()?;
                }
                let memo = w.end()?;
                if let Some(slot) = self.stacks.get_mut(stack) {
                    *slot = Some(memo);
                }
            }
        }
        w.end()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::snapshot_pickle;
    use std::fmt::Write as _;

    /// The fixture text the warm-up was first written in.
    fn fixture_text() -> String {
        let mut text = String::from(
            "stack a train.py:10:step|model.py:5:forward\nstack b train.py:11:step|model.py:7:backward\n",
        );
        for i in 0..2000u64 {
            let frames = if i % 2 == 0 { "a" } else { "b" };
            let _ = writeln!(
                text,
                "alloc t{i} {:#x} {}KiB frames=@{frames}",
                0x7f00_0000_0000u64 + i * 0x10_0000,
                1 + i % 64
            );
            if i >= 16 {
                let _ = writeln!(text, "free t{}", i - 16);
            }
        }
        text
    }

    #[test]
    fn the_warm_up_snapshot_is_its_fixture_text() {
        let want = memlens_fixture::build(&fixture_text()).unwrap_or_else(|e| panic!("{e}"));
        let got = snapshot_pickle().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, want);
        let s = memlens_core::load(&got).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.trace.len(), 5968);
        assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    }
}
