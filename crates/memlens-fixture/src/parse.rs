//! The fixture language's lines, one command each, read into a [`Fixture`]: directives set the
//! [`Options`], the clock and named stacks; data lines add segments, blocks and trace entries
//! (`alloc NAME` remembers the allocation so that `free NAME` can repeat its address, size,
//! stream, device and frames).

use crate::document::{BlockDef, EventDef, Fixture, Form, Region, SegmentDef, StackRef, State};
use crate::document::{DEFAULT_CLOCK_STEP_US, DEFAULT_CLOCK_US};
use crate::error::FixtureError;
use crate::tokenize::{parse_frame, parse_int, parse_scalar, parse_size, tokenize, Tok};
use rustc_hash::FxHashMap;

#[derive(Debug, Clone)]
struct Live {
    addr: u64,
    size: u64,
    stream: u64,
    frames: StackRef,
    device: u32,
}

#[derive(Default)]
pub(crate) struct Parser {
    fx: Fixture,
    line: usize,
    device: u32,
    clock: i64,
    step: i64,
    named_stacks: FxHashMap<String, u32>,
    live: FxHashMap<String, Live>,
}

/// The `key=value` options of one line, checked against what the command accepts.
struct Opts {
    items: Vec<(String, String)>,
}

impl Opts {
    fn take(&mut self, key: &str) -> Option<String> {
        let i = self.items.iter().position(|(k, _)| k == key)?;
        Some(self.items.remove(i).1)
    }
}

impl Parser {
    pub(crate) fn run(mut self, text: &str) -> Result<Fixture, FixtureError> {
        self.clock = DEFAULT_CLOCK_US;
        self.step = DEFAULT_CLOCK_STEP_US;
        // stack 0 is the empty stack
        self.intern_stack(Vec::new());
        for (i, raw) in text.lines().enumerate() {
            self.line = i + 1;
            let toks = tokenize(raw, self.line)?;
            self.command(toks)?;
        }
        Ok(self.fx)
    }

    fn err_bad(&self, what: &'static str, text: &str) -> FixtureError {
        FixtureError::Bad {
            line: self.line,
            what,
            text: text.to_string(),
        }
    }

    fn missing(&self, command: &str, what: &'static str) -> FixtureError {
        FixtureError::Missing {
            line: self.line,
            command: command.to_string(),
            what,
        }
    }

    fn size(&self, t: &str) -> Result<u64, FixtureError> {
        parse_size(t).ok_or_else(|| self.err_bad("size", t))
    }

    fn uint(&self, t: &str, what: &'static str) -> Result<u64, FixtureError> {
        parse_int(t)
            .and_then(|v| u64::try_from(v).ok())
            .ok_or_else(|| self.err_bad(what, t))
    }

    fn int(&self, t: &str, what: &'static str) -> Result<i64, FixtureError> {
        parse_int(t)
            .and_then(|v| i64::try_from(v).ok())
            .ok_or_else(|| self.err_bad(what, t))
    }

    fn device_num(&self, t: &str) -> Result<u32, FixtureError> {
        parse_int(t)
            .and_then(|v| u32::try_from(v).ok())
            .filter(|&d| d < 4096)
            .ok_or_else(|| self.err_bad("device", t))
    }

    fn intern_stack(&mut self, frames: Vec<u32>) -> u32 {
        if let Some(&id) = self.fx.stack_index.get(&frames) {
            return id;
        }
        let id = self.fx.stacks.len() as u32;
        self.fx.stacks.push(frames.clone());
        self.fx.stack_index.insert(frames, id);
        id
    }

    fn stack(&mut self, t: &str) -> Result<u32, FixtureError> {
        if let Some(name) = t.strip_prefix('@') {
            return self.named_stacks.get(name).copied().ok_or_else(|| {
                FixtureError::UnknownStack {
                    line: self.line,
                    name: name.to_string(),
                }
            });
        }
        let mut ids = Vec::new();
        for part in t.split('|').filter(|p| !p.is_empty()) {
            let f = parse_frame(part)
                .ok_or_else(|| self.err_bad("frame (want file:line:function)", part))?;
            let id = match self.fx.frame_index.get(&f) {
                Some(&id) => id,
                None => {
                    let id = self.fx.frames.len() as u32;
                    self.fx.frames.push(f.clone());
                    self.fx.frame_index.insert(f, id);
                    id
                }
            };
            ids.push(id);
        }
        Ok(self.intern_stack(ids))
    }

    /// Splits a line's words into positional words and options; rejects unknown options.
    fn split(
        &self,
        command: &str,
        toks: Vec<Tok>,
        allowed: &[&str],
    ) -> Result<(Vec<String>, Opts), FixtureError> {
        let mut pos = Vec::new();
        let mut items = Vec::new();
        for t in toks {
            match t.key {
                Some(k) => {
                    if !allowed.contains(&k.as_str()) {
                        return Err(FixtureError::UnknownOption {
                            line: self.line,
                            command: command.to_string(),
                            key: k,
                        });
                    }
                    items.push((k, t.val));
                }
                None => pos.push(t.val),
            }
        }
        Ok((pos, Opts { items }))
    }

    fn no_more(&self, command: &str, pos: &[String], n: usize) -> Result<(), FixtureError> {
        match pos.get(n) {
            Some(extra) => Err(FixtureError::Extra {
                line: self.line,
                command: command.to_string(),
                text: extra.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Positional word `i` of `command`, or the error naming `what` is missing.
    fn arg<'p>(
        &self,
        command: &str,
        pos: &'p [String],
        i: usize,
        what: &'static str,
    ) -> Result<&'p String, FixtureError> {
        pos.get(i).ok_or_else(|| self.missing(command, what))
    }

    /// `device=` if given, else the current device.
    fn device_opt(&self, o: &mut Opts) -> Result<u32, FixtureError> {
        match o.take("device") {
            Some(d) => self.device_num(&d),
            None => Ok(self.device),
        }
    }

    fn command(&mut self, mut toks: Vec<Tok>) -> Result<(), FixtureError> {
        if toks.is_empty() {
            return Ok(());
        }
        let head = toks.remove(0);
        if let Some(k) = head.key {
            return Err(FixtureError::UnknownCommand {
                line: self.line,
                word: format!("{k}={}", head.val),
            });
        }
        let cmd = head.val.as_str();
        match cmd {
            "protocol" | "form" | "legacy" | "no_time_us" | "devices" | "device" | "clock"
            | "stack" | "setting" => {
                let (pos, _) = self.split(cmd, toks, &[])?;
                let used = self.directive(cmd, &pos)?;
                self.no_more(cmd, &pos, used)
            }
            "region" => self.region(toks),
            "segment" => self.segment(toks),
            "block" => self.block(toks),
            "alloc" => self.alloc(toks),
            "free" | "free_requested" | "free_completed" => self.free(cmd, toks),
            "segment_alloc" | "segment_free" | "segment_map" | "segment_unmap" => {
                self.segment_event(cmd, toks)
            }
            "oom" => self.oom(toks),
            "snapshot" => {
                let (pos, o) = self.split(cmd, toks, EVENT_OPTS)?;
                self.no_more(cmd, &pos, 0)?;
                self.event(cmd, 0, 0, None, o)
            }
            "annotate" => self.annotate(toks),
            "event" => self.any_event(toks),
            _ => Err(FixtureError::UnknownCommand {
                line: self.line,
                word: cmd.to_string(),
            }),
        }
    }

    /// A directive without options (options, the device, the clock, a named stack, a
    /// setting). Returns how many positional words it takes.
    fn directive(&mut self, cmd: &str, pos: &[String]) -> Result<usize, FixtureError> {
        match cmd {
            "protocol" => {
                let p = self.arg(cmd, pos, 0, "a number 2..5")?;
                let n = parse_int(p)
                    .filter(|n| (2..=5).contains(n))
                    .ok_or_else(|| self.err_bad("protocol (2..5)", p))?;
                self.fx.options.protocol = n as u8;
                Ok(1)
            }
            "form" => {
                let f = self.arg(
                    cmd,
                    pos,
                    0,
                    "snapshot|segments|json|trace_plot|segment_plot",
                )?;
                self.fx.options.form = Form::parse(f).ok_or_else(|| self.err_bad("form", f))?;
                Ok(1)
            }
            "legacy" => {
                self.fx.options.legacy = true;
                self.fx.options.time_us = false;
                Ok(0)
            }
            "no_time_us" => {
                self.fx.options.time_us = false;
                Ok(0)
            }
            "devices" => {
                let n = self.arg(cmd, pos, 0, "a count")?;
                self.fx.options.devices = Some(self.device_num(n)?);
                Ok(1)
            }
            "device" => {
                self.device = self.device_num(self.arg(cmd, pos, 0, "a device number")?)?;
                Ok(1)
            }
            "clock" => {
                self.clock = self.int(self.arg(cmd, pos, 0, "a start time in µs")?, "time")?;
                if let Some(s) = pos.get(1) {
                    self.step = self.int(s, "clock step")?;
                }
                Ok(2)
            }
            "stack" => {
                let name = self.arg(cmd, pos, 0, "a name")?.clone();
                let frames = self.arg(cmd, pos, 1, "frames")?;
                let id = self.stack(frames)?;
                self.named_stacks.insert(name, id);
                Ok(2)
            }
            _ => {
                let k = self.arg(cmd, pos, 0, "a key")?.clone();
                let v = self.arg(cmd, pos, 1, "a value")?;
                self.fx.settings.push((k, parse_scalar(v)));
                Ok(2)
            }
        }
    }

    /// `region START|END NAME [time=] [device=]`.
    fn region(&mut self, toks: Vec<Tok>) -> Result<(), FixtureError> {
        let cmd = "region";
        let (pos, mut o) = self.split(cmd, toks, &["time", "device"])?;
        let stage = self.arg(cmd, &pos, 0, "START or END")?.clone();
        let name = self.arg(cmd, &pos, 1, "a name")?.clone();
        let device = self.device_opt(&mut o)?;
        let time_us = self.tick(o.take("time"))?;
        self.fx.regions.push(Region {
            stage,
            name,
            device,
            time_us,
        });
        self.no_more(cmd, &pos, 2)
    }

    /// `segment_alloc|segment_free|segment_map|segment_unmap ADDR SIZE`.
    fn segment_event(&mut self, cmd: &str, toks: Vec<Tok>) -> Result<(), FixtureError> {
        let (pos, o) = self.split(cmd, toks, EVENT_OPTS)?;
        let addr = self.uint(self.arg(cmd, &pos, 0, "an address")?, "address")?;
        let size = self.size(self.arg(cmd, &pos, 1, "a size")?)?;
        self.no_more(cmd, &pos, 2)?;
        self.event(cmd, addr, size, None, o)
    }

    /// `oom SIZE device_free=SIZE`.
    fn oom(&mut self, toks: Vec<Tok>) -> Result<(), FixtureError> {
        let cmd = "oom";
        let (pos, mut o) = self.split(cmd, toks, &[EVENT_OPTS, &["device_free"]].concat())?;
        let size = self.size(self.arg(cmd, &pos, 0, "a size")?)?;
        let free = o
            .take("device_free")
            .ok_or_else(|| self.missing(cmd, "device_free="))?;
        let free = self.size(&free)?;
        self.no_more(cmd, &pos, 1)?;
        self.event(cmd, 0, size, Some(free), o)
    }

    /// `annotate NAME|ADDR TEXT`: an annotation entry on a named allocation or an address.
    fn annotate(&mut self, toks: Vec<Tok>) -> Result<(), FixtureError> {
        let cmd = "annotate";
        let (pos, mut o) = self.split(cmd, toks, EVENT_OPTS)?;
        let target = self.arg(cmd, &pos, 0, "an allocation name or address")?;
        let text = self.arg(cmd, &pos, 1, "the annotation text")?.clone();
        self.no_more(cmd, &pos, 2)?;
        let (addr, size) = match self.live.get(target.as_str()) {
            Some(l) => (l.addr, l.size),
            None => (self.uint(target, "address")?, 0),
        };
        if o.items.iter().all(|(k, _)| k != "meta") {
            o.items.push(("meta".into(), text));
        }
        self.event(cmd, addr, size, None, o)
    }

    /// `event ACTION [ADDR [SIZE]]`: any action, by name.
    fn any_event(&mut self, toks: Vec<Tok>) -> Result<(), FixtureError> {
        let cmd = "event";
        let (pos, o) = self.split(cmd, toks, EVENT_OPTS)?;
        let action = self.arg(cmd, &pos, 0, "an action name")?.clone();
        let addr = match pos.get(1) {
            Some(a) => self.uint(a, "address")?,
            None => 0,
        };
        let size = match pos.get(2) {
            Some(s) => self.size(s)?,
            None => 0,
        };
        self.no_more(cmd, &pos, 3)?;
        self.event(&action, addr, size, None, o)
    }

    /// The time of the next trace entry: `time=` if given, else the clock; the clock moves on.
    fn tick(&mut self, given: Option<String>) -> Result<i64, FixtureError> {
        let t = match given {
            Some(t) => self.int(&t, "time")?,
            None => self.clock,
        };
        self.clock = t.saturating_add(self.step);
        Ok(t)
    }

    fn segment(&mut self, toks: Vec<Tok>) -> Result<(), FixtureError> {
        let cmd = "segment";
        let (pos, mut o) =
            self.split(cmd, toks, &["device", "stream", "pool", "type", "frames"])?;
        let address = self.uint(
            pos.first().ok_or_else(|| self.missing(cmd, "an address"))?,
            "address",
        )?;
        let total = self.size(pos.get(1).ok_or_else(|| self.missing(cmd, "a size"))?)?;
        let mut expandable = false;
        for flag in pos.iter().skip(2) {
            match flag.as_str() {
                "expandable" => expandable = true,
                other => {
                    return Err(FixtureError::Extra {
                        line: self.line,
                        command: cmd.into(),
                        text: other.into(),
                    })
                }
            }
        }
        let device = self.device_opt(&mut o)?;
        let stream = match o.take("stream") {
            Some(s) => self.uint(&s, "stream")?,
            None => 0,
        };
        let pool = match o.take("pool") {
            Some(p) => {
                let (a, b) = p
                    .split_once(',')
                    .ok_or_else(|| self.err_bad("pool (want A,B)", &p))?;
                (self.int(a, "pool")?, self.int(b, "pool")?)
            }
            None => (0, 0),
        };
        let segment_type = o.take("type");
        let frames = match o.take("frames") {
            Some(f) => Some(self.stack(&f)?),
            None => None,
        };
        self.fx.segments.push(SegmentDef {
            line: self.line,
            device,
            address,
            total,
            stream,
            pool,
            expandable,
            segment_type,
            frames,
            blocks: Vec::new(),
        });
        Ok(())
    }

    fn block(&mut self, toks: Vec<Tok>) -> Result<(), FixtureError> {
        let cmd = "block";
        let line = self.line;
        let (pos, mut o) = self.split(cmd, toks, &["requested", "frames", "addr"])?;
        let size_t = pos
            .first()
            .ok_or_else(|| self.missing(cmd, "a size (or `rest`)"))?
            .clone();
        let state_t = pos
            .get(1)
            .ok_or_else(|| self.missing(cmd, "a state (allocated|pending_free|inactive)"))?;
        let state = State::parse(state_t).ok_or_else(|| self.err_bad("block state", state_t))?;
        self.no_more(cmd, &pos, 2)?;
        let requested = match o.take("requested") {
            Some(r) => Some(self.size(&r)?),
            None => None,
        };
        let frames = match o.take("frames") {
            Some(f) => Some(self.stack(&f)?),
            None => None,
        };
        let address = match o.take("addr") {
            Some(a) => Some(self.uint(&a, "address")?),
            None => None,
        };
        let size = if size_t == "rest" {
            None
        } else {
            Some(self.size(&size_t)?)
        };
        let seg = self
            .fx
            .segments
            .last_mut()
            .ok_or(FixtureError::BlockOutsideSegment { line })?;
        let size = match size {
            Some(s) => s,
            None => {
                let used = seg
                    .blocks
                    .iter()
                    .fold(0u64, |a, b| a.saturating_add(b.size));
                seg.total
                    .checked_sub(used)
                    .filter(|&r| r > 0)
                    .ok_or_else(|| FixtureError::Invalid {
                        line,
                        what: format!(
                            "`block rest`: the blocks above already fill the segment of line {}",
                            seg.line
                        ),
                    })?
            }
        };
        seg.blocks.push(BlockDef {
            size,
            state,
            requested,
            frames,
            address,
        });
        Ok(())
    }

    fn alloc(&mut self, toks: Vec<Tok>) -> Result<(), FixtureError> {
        let cmd = "alloc";
        let (pos, mut o) = self.split(cmd, toks, EVENT_OPTS)?;
        let first = pos
            .first()
            .ok_or_else(|| self.missing(cmd, "[NAME] ADDR SIZE"))?;
        let named = parse_int(first).is_none();
        let skip = usize::from(named);
        let addr = self.uint(
            pos.get(skip)
                .ok_or_else(|| self.missing(cmd, "an address"))?,
            "address",
        )?;
        let size = self.size(
            pos.get(skip + 1)
                .ok_or_else(|| self.missing(cmd, "a size"))?,
        )?;
        self.no_more(cmd, &pos, skip + 2)?;
        let frames = match o.items.iter().find(|(k, _)| k == "frames") {
            Some((_, f)) => Some(self.stack(&f.clone())?),
            None => None,
        };
        let device = self.device_opt(&mut o)?;
        let stream = match o.items.iter().find(|(k, _)| k == "stream") {
            Some((_, s)) => self.uint(&s.clone(), "stream")?,
            None => 0,
        };
        o.items.push(("device".into(), device.to_string()));
        if named {
            self.live.insert(
                first.clone(),
                Live {
                    addr,
                    size,
                    stream,
                    frames,
                    device,
                },
            );
        }
        self.event(cmd, addr, size, None, o)
    }

    fn free(&mut self, cmd: &str, toks: Vec<Tok>) -> Result<(), FixtureError> {
        let (pos, mut o) = self.split(cmd, toks, EVENT_OPTS)?;
        let first = pos
            .first()
            .ok_or_else(|| self.missing(cmd, "an allocation name, or ADDR SIZE"))?
            .clone();
        let live = if parse_int(&first).is_some() {
            let addr = self.uint(&first, "address")?;
            let size = self.size(
                pos.get(1)
                    .ok_or_else(|| self.missing(cmd, "a size after the address"))?,
            )?;
            self.no_more(cmd, &pos, 2)?;
            Live {
                addr,
                size,
                stream: 0,
                frames: None,
                device: self.device,
            }
        } else {
            self.no_more(cmd, &pos, 1)?;
            self.live
                .get(&first)
                .cloned()
                .ok_or_else(|| FixtureError::UnknownName {
                    line: self.line,
                    name: first.clone(),
                })?
        };
        // Free entries carry the allocation's stream, device and frames unless told otherwise.
        if o.items.iter().all(|(k, _)| k != "stream") {
            o.items.push(("stream".into(), live.stream.to_string()));
        }
        if o.items.iter().all(|(k, _)| k != "device") {
            o.items.push(("device".into(), live.device.to_string()));
        }
        let frames_given = o.items.iter().any(|(k, _)| k == "frames");
        let steps: &[&str] = match cmd {
            "free" => &["free_requested", "free_completed"],
            "free_requested" => &["free_requested"],
            _ => &["free_completed"],
        };
        for (i, action) in steps.iter().enumerate() {
            let mut oi = Opts {
                items: o.items.clone(),
            };
            if i > 0 {
                // `time=` applies to the first entry; the second follows on the clock.
                oi.items.retain(|(k, _)| k != "time");
            }
            let frames = if frames_given { None } else { live.frames };
            self.event_with_frames(action, live.addr, live.size, None, oi, frames)?;
        }
        if cmd != "free_requested" {
            self.live.remove(&first);
        }
        Ok(())
    }

    fn event(
        &mut self,
        action: &str,
        addr: u64,
        size: u64,
        device_free: Option<u64>,
        o: Opts,
    ) -> Result<(), FixtureError> {
        self.event_with_frames(action, addr, size, device_free, o, None)
    }

    fn event_with_frames(
        &mut self,
        action: &str,
        addr: u64,
        size: u64,
        device_free: Option<u64>,
        mut o: Opts,
        default_frames: StackRef,
    ) -> Result<(), FixtureError> {
        let stream = match o.take("stream") {
            Some(s) => self.uint(&s, "stream")?,
            None => 0,
        };
        let device = self.device_opt(&mut o)?;
        let time_us = Some(self.tick(o.take("time"))?);
        let frames = match o.take("frames") {
            Some(f) => Some(self.stack(&f)?),
            None => default_frames,
        };
        let compile_context = o.take("ctx");
        let user_metadata = o.take("meta");
        if let Some((k, _)) = o.items.first() {
            return Err(FixtureError::UnknownOption {
                line: self.line,
                command: action.to_string(),
                key: k.clone(),
            });
        }
        let d = device as usize;
        if self.fx.traces.len() <= d {
            self.fx.traces.resize_with(d + 1, Vec::new);
        }
        if let Some(t) = self.fx.traces.get_mut(d) {
            t.push(EventDef {
                action: action.to_string(),
                addr,
                size,
                stream,
                time_us,
                frames,
                device_free,
                compile_context,
                user_metadata,
            });
        }
        Ok(())
    }
}

const EVENT_OPTS: &[&str] = &["stream", "time", "frames", "ctx", "meta", "device"];
