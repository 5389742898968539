//! The join of a parallel decode: a piece decoded on its own (`piece`) brought into the machine
//! that has run everything before it, which then stands exactly where it would after running
//! the piece's bytes itself.
//!
//! First the piece's assumptions are checked against the real state (its first memo key, no
//! rewritten row, each earlier container it met a container that is no trace row); where one
//! fails nothing changes and the caller runs the piece on this machine. Then, in file order:
//! - strings, frames and stacks are renumbered by content, new ones appended in the order the
//!   piece met them (frames and stacks interleaved as they were made, `frames_at_stack`),
//!   which is the order the one-thread decoder would have given them ids in; the frames and
//!   stacks standing for earlier values are interned from the real values at their place;
//! - trace rows are appended (the run-length columns as pushes, as the decoder pushes them),
//!   nodes appended with their handles renumbered (an earlier container by its real node),
//!   memo slots appended;
//! - the deferred opcodes run on the real stack, then the piece's own stack and marks go on top.

use super::fresh::Fresh;
use super::PickleMachine;
use crate::error::DecodeError;
use crate::raw::value::{Node, NodeId, RowExtra, RowId, Val};
use crate::trace::{FrameId, StackId, StrId, TraceColumns};
use rustc_hash::FxHashMap;

/// How the piece's handles become the joined machine's.
struct Maps {
    strs: Vec<StrId>,
    nodes: Vec<u32>,
    frames: Vec<Option<FrameId>>,
    stacks: Vec<StackId>,
    row_base: u32,
}

impl Maps {
    fn val(&self, v: Val) -> Val {
        match v {
            Val::Str(s) => Val::Str(self.str(s)),
            Val::Node(NodeId(n)) => Val::Node(NodeId(self.node(n))),
            Val::Row(RowId(r)) => Val::Row(RowId(r + self.row_base)),
            other => other,
        }
    }
    fn str(&self, s: StrId) -> StrId {
        self.strs.get(s.0 as usize).copied().unwrap_or(StrId::EMPTY)
    }
    fn node(&self, n: u32) -> u32 {
        self.nodes.get(n as usize).copied().unwrap_or(n)
    }
    fn stack(&self, s: StackId) -> StackId {
        self.stacks
            .get(s.0 as usize)
            .copied()
            .unwrap_or(StackId::EMPTY)
    }
}

impl PickleMachine {
    /// Brings piece machine `w` (see `piece`) into this machine, which has run everything before
    /// the piece. `Ok(false)`, with nothing changed, where the piece's assumptions do not hold.
    pub(super) fn join(&mut self, mut w: PickleMachine) -> Result<bool, DecodeError> {
        let Some(p) = w.piece.take() else {
            return Ok(false);
        };
        let fits = self.memo.len() as u64 == p.key_base
            && self.memo_sparse.is_empty()
            && w.memo_sparse.is_empty()
            && self.result.is_none()
            && !w.arena.rewritten;
        let Some(ext) = fits.then(|| self.earlier_values(&p.ext_nodes)).flatten() else {
            return Ok(false);
        };
        let mut ext_val: FxHashMap<u64, u32> = FxHashMap::default();
        let mut nodes = vec![u32::MAX; w.arena.nodes.len()];
        for (&(key, local), real) in p.ext_nodes.iter().zip(ext) {
            let real = match real {
                Ok(n) => n,
                Err((s, again)) => {
                    // What a GET of a given-back frames list does (`memo_get`).
                    let n = self.arena.nodes.len() as u32;
                    self.arena.nodes.push(Node::Stack(s));
                    self.memo.set(key, Val::Node(NodeId(n)));
                    let _ = again;
                    n
                }
            };
            ext_val.insert(key, real);
            nodes[local as usize] = real;
        }
        let strs = (0..w.arena.strings.len() as u32)
            .map(|i| self.arena.strings.intern(w.arena.strings.get(StrId(i))))
            .collect();
        let mut maps = Maps {
            strs,
            nodes,
            frames: Vec::new(),
            stacks: Vec::new(),
            row_base: self.arena.rows.len() as u32,
        };
        self.join_stacks(&w, &mut maps, &ext_val);
        self.arena.odd_values += w.arena.odd_values;
        self.join_rows(std::mem::take(&mut w.arena.rows), &maps);
        self.join_nodes(std::mem::take(&mut w.arena.nodes), &mut maps);
        self.join_memo(&w, p.key_base, &maps);
        for d in p.deferred {
            self.push_piece_stack(d.stack, d.marks, &maps);
            if let Err(super::reader::Halt::Failed(e)) = self.append(d.op, d.at) {
                return Err(e);
            }
        }
        self.push_piece_stack(
            std::mem::take(&mut w.stack),
            std::mem::take(&mut w.marks),
            &maps,
        );
        let fresh = |f: Option<Fresh>| {
            f.map(|f| Fresh {
                node: maps.node(f.node),
                ..f
            })
        };
        self.fresh = fresh(w.fresh);
        self.fresh_list = fresh(w.fresh_list);
        self.offset = w.offset;
        Ok(true)
    }

    /// The real values of the earlier containers a piece met: a node that is no trace row, or
    /// a frames list given back (its stack); `None` where one is anything else.
    #[allow(clippy::type_complexity)]
    fn earlier_values(&self, ext: &[(u64, u32)]) -> Option<Vec<Result<u32, (StackId, bool)>>> {
        ext.iter()
            .map(|&(key, _)| match self.memo.get(key)? {
                Ok(Val::Node(NodeId(n))) => match self.arena.nodes.get(n as usize)? {
                    Node::Row(_) | Node::Ext { .. } => None,
                    _ => Some(Ok(n)),
                },
                Ok(_) => None,
                Err(s) => Some(Err(s)),
            })
            .collect()
    }

    /// Frames and stacks of the piece, renumbered in the order they were made.
    fn join_stacks(&mut self, w: &PickleMachine, maps: &mut Maps, ext: &FxHashMap<u64, u32>) {
        let st = &w.arena.stack_interner;
        let ext_frame: FxHashMap<FrameId, u64> =
            st.ext_frames.iter().map(|&(f, k)| (f, k)).collect();
        let ext_stack: FxHashMap<StackId, u64> =
            st.ext_stacks.iter().map(|&(s, k)| (s, k)).collect();
        let real = |k: &u64| Val::Node(NodeId(ext.get(k).copied().unwrap_or(u32::MAX)));
        maps.frames = Vec::with_capacity(st.frames.len());
        maps.stacks = vec![StackId::EMPTY];
        let mut scratch = Vec::new();
        for s in 1..st.stacks.len() as u32 {
            let made_after = st.frames_at_stack.get(s as usize).copied().unwrap_or(0);
            self.join_frames(w, maps, &ext_frame, made_after as usize, &real);
            let id = match ext_stack.get(&StackId(s)) {
                Some(k) => self.arena.intern_stack(real(k)),
                None => {
                    scratch.clear();
                    let local = st.stacks.get(StackId(s));
                    scratch.extend(
                        local
                            .iter()
                            .filter_map(|f| maps.frames.get(f.0 as usize).copied().flatten()),
                    );
                    self.arena.stack_interner.stack_id(&scratch)
                }
            };
            maps.stacks.push(id);
        }
        self.join_frames(w, maps, &ext_frame, st.frames.len(), &real);
    }

    /// The piece's frames up to `upto`, renumbered.
    fn join_frames(
        &mut self,
        w: &PickleMachine,
        maps: &mut Maps,
        ext_frame: &FxHashMap<FrameId, u64>,
        upto: usize,
        real: &impl Fn(&u64) -> Val,
    ) {
        let frames = &w.arena.stack_interner.frames;
        while maps.frames.len() < upto.min(frames.len()) {
            let f = maps.frames.len();
            let id = match ext_frame.get(&FrameId(f as u32)) {
                Some(k) => self.arena.intern_frame(real(k)),
                None => {
                    let mut fr = frames[f];
                    fr.filename = maps.str(fr.filename);
                    fr.name = maps.str(fr.name);
                    Some(self.arena.stack_interner.frame_id(fr))
                }
            };
            maps.frames.push(id);
        }
    }

    /// The piece's trace rows after this machine's.
    fn join_rows(&mut self, w: TraceColumns<RowExtra>, maps: &Maps) {
        let rows = &mut self.arena.rows;
        rows.reserve(w.len());
        rows.action.extend_from_slice(&w.action);
        rows.addr.extend_from_slice(&w.addr);
        rows.size_bytes.extend_from_slice(&w.size_bytes);
        rows.time_us.extend_from_slice(&w.time_us);
        rows.stack.extend(w.stack.iter().map(|&s| maps.stack(s)));
        let (mut streams, mut contexts, mut metadata) = (
            w.stream.cursor(),
            w.compile_context.cursor(),
            w.user_metadata.cursor(),
        );
        for r in 0..w.len() {
            rows.stream.push(streams.at(r).unwrap_or(0));
            rows.compile_context
                .push(maps.str(contexts.at(r).unwrap_or(StrId::EMPTY)));
            rows.user_metadata
                .push(maps.str(metadata.at(r).unwrap_or(StrId::EMPTY)));
        }
        rows.extras.extend(w.extras.into_iter().map(|(r, e)| {
            let e = match e {
                RowExtra::InternalMetadata(s) => RowExtra::InternalMetadata(maps.str(s)),
                RowExtra::Category(s) => RowExtra::Category(maps.str(s)),
                RowExtra::ActionName(s) => RowExtra::ActionName(maps.str(s)),
                RowExtra::PoolId(v) => RowExtra::PoolId(maps.val(v)),
                RowExtra::ForwardFrames(v) => RowExtra::ForwardFrames(maps.val(v)),
                e @ RowExtra::DeviceFree(_) => e,
            };
            (r + maps.row_base, e)
        }));
    }

    /// The piece's nodes after this machine's (those standing for earlier values left out).
    fn join_nodes(&mut self, nodes: Vec<Node>, maps: &mut Maps) {
        let mut next = self.arena.nodes.len() as u32;
        for (i, n) in nodes.iter().enumerate() {
            if !matches!(n, Node::Ext { .. }) {
                maps.nodes[i] = next;
                next += 1;
            }
        }
        self.arena.nodes.reserve(nodes.len());
        for n in nodes {
            let n = match n {
                Node::Ext { .. } => continue,
                Node::List(v) => Node::List(v.into_iter().map(|x| maps.val(x)).collect()),
                Node::Tuple(v) => Node::Tuple(v.iter().map(|&x| maps.val(x)).collect()),
                Node::Dict(v) => Node::Dict(
                    v.into_iter()
                        .map(|(k, x)| (maps.val(k), maps.val(x)))
                        .collect(),
                ),
                Node::NodeList(ids) => {
                    Node::NodeList(ids.into_iter().map(|i| maps.node(i)).collect())
                }
                Node::RowRange { start, end } => Node::RowRange {
                    start: start + maps.row_base,
                    end: end + maps.row_base,
                },
                Node::Row(RowId(r)) => Node::Row(RowId(r + maps.row_base)),
                Node::Stack(s) => Node::Stack(maps.stack(s)),
                Node::Frame(f) => match maps.frames.get(f.0 as usize).copied().flatten() {
                    Some(f) => Node::Frame(f),
                    None => Node::Dict(Vec::new()),
                },
                n @ (Node::BigInt(_) | Node::Bytes(_)) => n,
            };
            self.arena.nodes.push(n);
        }
    }

    /// The piece's memo keys after this machine's.
    fn join_memo(&mut self, w: &PickleMachine, key_base: u64, maps: &Maps) {
        for key in key_base..w.memo.len() as u64 {
            match w.memo.get(key) {
                Some(Ok(v)) => self.memo.push(maps.val(v)),
                Some(Err((s, again))) => self.memo.push_stack(maps.stack(s), again),
                None => self.memo.push(Val::None),
            }
        }
    }

    /// A piece's stack and marks pushed on this machine's.
    fn push_piece_stack(&mut self, stack: Vec<Val>, marks: Vec<usize>, maps: &Maps) {
        let base = self.stack.len();
        self.stack.extend(stack.into_iter().map(|v| maps.val(v)));
        self.marks.extend(marks.into_iter().map(|m| m + base));
    }
}
