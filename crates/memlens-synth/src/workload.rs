//! Workloads a user would recognise, driving one device's allocator step by step: a training
//! loop (parameters, gradients, Adam states, activations saved in forward and freed in
//! backward), the same with variable sequence lengths and periodic `empty_cache`, with a leak,
//! ending in an OOM (a request larger than the device), or followed by an evaluation that
//! fragments the cache and dies on a request the free blocks together would hold; and inference
//! with a KV cache grown by `torch.cat`, after a CUDA graph capture into private pools. A
//! [`DeviceSim`] is deterministic for (config, device), so every pass of the writer sees the
//! same run.

use crate::alloc::{Allocator, BlockId, Ctx, Sink};
use crate::program::{DeviceConsts, Model, Program, Sites};
use crate::rng::Rng;
use crate::Workload;

/// Why a run stopped: the event budget was reached, or the program died of an OOM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Budget,
    Oom,
}

type Flow<T = ()> = Result<T, Stop>;

const MAIN: u64 = 0;

/// The device as workloads see it: the allocator plus contexts, time and the budget.
struct Dev<'p> {
    a: Allocator,
    rng: Rng,
    s: &'p Sites,
    c: DeviceConsts,
    serial: u64,
    /// The run stops at the operation that reaches the event budget (all but the OOM runs).
    stop_at_budget: bool,
    /// The `oom` run: once the budget is reached, the next request no longer fits.
    oom_at_limit: bool,
    multi_device: bool,
}

impl Dev<'_> {
    fn ctx(&mut self, stack: u32) -> Ctx {
        self.serial += 1;
        Ctx {
            serial: self.serial,
            stack,
        }
    }

    fn wait(&mut self, lo: u64, hi: u64) {
        self.a.now_us += self.rng.range(lo, hi) as i64;
    }

    fn over(&self) -> bool {
        self.a.emitted >= self.c.events
    }

    fn check(&self) -> Flow {
        if self.stop_at_budget && self.over() {
            Err(Stop::Budget)
        } else {
            Ok(())
        }
    }

    fn malloc(&mut self, sink: &mut dyn Sink, size: u64, stream: u64, stack: u32) -> Flow<BlockId> {
        self.wait(2, 70);
        let mut size = size.max(1);
        if self.oom_at_limit && self.over() {
            // The run that ends in an OOM: this request (a bigger batch, say) no longer fits.
            let avail = self.a.device_free_bytes() + self.a.reserved_bytes();
            size = size
                .max(avail + (avail / 8).max(64 << 20))
                .div_ceil(2 << 20)
                * (2 << 20);
        }
        let ctx = self.ctx(stack);
        match self.a.malloc(size, stream, ctx, sink) {
            Some(b) => {
                self.check()?;
                Ok(b)
            }
            None => Err(Stop::Oom),
        }
    }

    fn free(&mut self, sink: &mut dyn Sink, b: BlockId, stack: u32) -> Flow {
        self.wait(1, 30);
        let ctx = self.ctx(stack);
        self.a.free(b, ctx, sink);
        self.check()
    }

    fn free_all(&mut self, sink: &mut dyn Sink, bs: &mut Vec<BlockId>, stack: u32) -> Flow {
        for b in std::mem::take(bs) {
            self.free(sink, b, stack)?;
        }
        Ok(())
    }

    fn empty_cache(&mut self, sink: &mut dyn Sink, stack: u32) -> Flow {
        self.wait(50, 500);
        let ctx = self.ctx(stack);
        self.a.empty_cache(ctx, sink);
        self.check()
    }
}

/// What varies between the training-shaped workloads.
#[derive(Debug, Clone, Copy)]
struct TrainKind {
    variable_seq: bool,
    empty_cache_every: u64,
    leak: bool,
    /// Once the budget is reached: `evaluate()`, which fragments the large pool and dies.
    eval_oom: bool,
}

struct LayerSaved {
    /// Autocast's low-precision weight copies (qkv, o, fc1, fc2), when running under bf16.
    casts: Vec<BlockId>,
    xin: BlockId,
    ln1: [BlockId; 3],
    qkv: BlockId,
    att: BlockId,
    lse: BlockId,
    x1: BlockId,
    ln2: [BlockId; 3],
    h1: BlockId,
    g: BlockId,
}

/// One training step's sizes.
struct Shape {
    m: Model,
    /// Batch and sequence length.
    b: u64,
    sq: u64,
    /// Tokens (`b · sq`) and bytes of one activation (`tokens · hidden · act_bytes`).
    bs: u64,
    bsh: u64,
}

/// What the forward pass leaves for the backward pass and the end of the step.
struct Forward {
    saved: Vec<LayerSaved>,
    /// The final layer norm's output, mean and rstd.
    lnf: [BlockId; 3],
    /// Autocast's copy of the head's weight (bf16 runs).
    head_cast: Vec<BlockId>,
    /// The last layer's output, the log-softmax and the loss's total weight.
    losses: (BlockId, BlockId, BlockId),
    logits: BlockId,
    loss: BlockId,
}

/// The forward pass: embedding, each layer (its saved tensors kept), final norm, head, loss.
fn forward(d: &mut Dev, k: &mut dyn Sink, sh: &Shape) -> Flow<Forward> {
    let s = d.s;
    let (h, v, a) = (sh.m.hidden, sh.m.vocab, sh.m.act_bytes);
    let (bs, bsh) = (sh.bs, sh.bsh);
    let mut x = d.malloc(k, bsh, MAIN, s.fwd_embed)?;
    let mut saved = Vec::with_capacity(sh.m.layers as usize);
    for _ in 0..sh.m.layers {
        let (sv, x2) = forward_layer(d, k, sh, x)?;
        saved.push(sv);
        x = x2;
    }
    let lnf = [
        d.malloc(k, bsh, MAIN, s.fwd_lnf)?,
        d.malloc(k, bs * 4, MAIN, s.fwd_lnf)?,
        d.malloc(k, bs * 4, MAIN, s.fwd_lnf)?,
    ];
    let mut head_cast = Vec::new();
    if a == 2 {
        head_cast.push(d.malloc(k, v * h * 2, MAIN, s.fwd_cast_w[4])?);
    }
    let logits = d.malloc(k, bs * v * a, MAIN, s.fwd_head)?;
    let lf = d.malloc(k, bs * v * 4, MAIN, s.fwd_cast)?;
    let lsm = d.malloc(k, bs * v * 4, MAIN, s.fwd_logsoftmax)?;
    d.free(k, lf, s.free_loss_fn)?;
    let loss = d.malloc(k, 4, MAIN, s.fwd_loss)?;
    let total_weight = d.malloc(k, 4, MAIN, s.fwd_loss)?;
    Ok(Forward {
        saved,
        lnf,
        head_cast,
        losses: (x, lsm, total_weight),
        logits,
        loss,
    })
}

/// One transformer layer forward from input `x`: what it saves for backward, and its output.
fn forward_layer(
    d: &mut Dev,
    k: &mut dyn Sink,
    sh: &Shape,
    x: BlockId,
) -> Flow<(LayerSaved, BlockId)> {
    let s = d.s;
    let (h, f, a) = (sh.m.hidden, sh.m.ffn, sh.m.act_bytes);
    let (bs, bsh) = (sh.bs, sh.bsh);
    let ln1 = [
        d.malloc(k, bsh, MAIN, s.fwd_ln1)?,
        d.malloc(k, bs * 4, MAIN, s.fwd_ln1)?,
        d.malloc(k, bs * 4, MAIN, s.fwd_ln1)?,
    ];
    let mut casts = Vec::new();
    if a == 2 {
        casts.push(d.malloc(k, 3 * h * h * 2, MAIN, s.fwd_cast_w[0])?);
    }
    let qkv = d.malloc(k, 3 * bsh, MAIN, s.fwd_qkv)?;
    let att = d.malloc(k, bsh, MAIN, s.fwd_sdpa)?;
    let lse = d.malloc(k, sh.b * sh.m.heads * sh.sq * 4, MAIN, s.fwd_sdpa)?;
    if a == 2 {
        casts.push(d.malloc(k, h * h * 2, MAIN, s.fwd_cast_w[1])?);
    }
    let o = d.malloc(k, bsh, MAIN, s.fwd_o)?;
    let x1 = d.malloc(k, bsh, MAIN, s.fwd_add1)?;
    d.free(k, o, s.free_block_attn)?;
    let ln2 = [
        d.malloc(k, bsh, MAIN, s.fwd_ln2)?,
        d.malloc(k, bs * 4, MAIN, s.fwd_ln2)?,
        d.malloc(k, bs * 4, MAIN, s.fwd_ln2)?,
    ];
    if a == 2 {
        casts.push(d.malloc(k, f * h * 2, MAIN, s.fwd_cast_w[2])?);
    }
    let h1 = d.malloc(k, bs * f * a, MAIN, s.fwd_fc1)?;
    let g = d.malloc(k, bs * f * a, MAIN, s.fwd_gelu)?;
    if a == 2 {
        casts.push(d.malloc(k, h * f * 2, MAIN, s.fwd_cast_w[3])?);
    }
    let f2 = d.malloc(k, bsh, MAIN, s.fwd_fc2)?;
    let x2 = d.malloc(k, bsh, MAIN, s.fwd_add2)?;
    d.free(k, f2, s.free_block_mlp)?;
    let sv = LayerSaved {
        casts,
        xin: x,
        ln1,
        qkv,
        att,
        lse,
        x1,
        ln2,
        h1,
        g,
    };
    Ok((sv, x2))
}

/// One layer backward from gradient `gx`: MLP (fc2, gelu, fc1, ln2), then attention (o-proj,
/// sdpa, split/cat, qkv, ln1); its weight gradients go to `grads`. Returns the gradient of
/// its input.
fn backward_layer(
    d: &mut Dev,
    k: &mut dyn Sink,
    sh: &Shape,
    mut sv: LayerSaved,
    gx: BlockId,
    grads: &mut Vec<BlockId>,
) -> Flow<BlockId> {
    let s = d.s;
    let (h, f, a) = (sh.m.hidden, sh.m.ffn, sh.m.act_bytes);
    let (bs, bsh) = (sh.bs, sh.bsh);
    // MLP: fc2, gelu, fc1, ln2
    let gf2 = d.malloc(k, bs * f * a, MAIN, s.bwd_addmm_in)?;
    grads.push(d.malloc(k, h * f * 4, MAIN, s.bwd_addmm_w)?);
    grads.push(d.malloc(k, h * 4, MAIN, s.bwd_addmm_b)?);
    if let Some(c) = sv.casts.pop() {
        d.free(k, c, s.free_saved_addmm)?;
    }
    d.free(k, sv.g, s.free_saved_addmm)?;
    let gg = d.malloc(k, bs * f * a, MAIN, s.bwd_gelu)?;
    d.free(k, gf2, s.free_engine)?;
    d.free(k, sv.h1, s.free_saved_gelu)?;
    let gfc1 = d.malloc(k, bsh, MAIN, s.bwd_addmm_in)?;
    grads.push(d.malloc(k, f * h * 4, MAIN, s.bwd_addmm_w)?);
    grads.push(d.malloc(k, f * 4, MAIN, s.bwd_addmm_b)?);
    if let Some(c) = sv.casts.pop() {
        d.free(k, c, s.free_saved_addmm)?;
    }
    d.free(k, gg, s.free_engine)?;
    d.free(k, sv.ln2[0], s.free_saved_addmm)?;
    let gln2 = d.malloc(k, bsh, MAIN, s.bwd_ln_in)?;
    grads.push(d.malloc(k, h * 4, MAIN, s.bwd_ln_w)?);
    grads.push(d.malloc(k, h * 4, MAIN, s.bwd_ln_w)?);
    d.free(k, gfc1, s.free_engine)?;
    d.free(k, sv.ln2[1], s.free_saved_ln)?;
    d.free(k, sv.ln2[2], s.free_saved_ln)?;
    d.free(k, sv.x1, s.free_saved_ln)?;
    let gsum = d.malloc(k, bsh, MAIN, s.bwd_accum)?;
    d.free(k, gln2, s.free_engine)?;
    d.free(k, gx, s.free_engine)?;
    // attention: o-proj, sdpa, split/cat, qkv, ln1
    let go = d.malloc(k, bsh, MAIN, s.bwd_addmm_in)?;
    grads.push(d.malloc(k, h * h * 4, MAIN, s.bwd_addmm_w)?);
    grads.push(d.malloc(k, h * 4, MAIN, s.bwd_addmm_b)?);
    if let Some(c) = sv.casts.pop() {
        d.free(k, c, s.free_saved_addmm)?;
    }
    let mut dqkv = Vec::with_capacity(3);
    for _ in 0..3 {
        dqkv.push(d.malloc(k, bsh, MAIN, s.bwd_sdpa)?);
    }
    let sd = d.malloc(k, sh.b * sh.m.heads * sh.sq * 4, MAIN, s.bwd_sdpa)?;
    d.free(k, sd, s.free_engine)?;
    d.free(k, go, s.free_engine)?;
    d.free(k, sv.att, s.free_saved_sdpa)?;
    d.free(k, sv.lse, s.free_saved_sdpa)?;
    d.free(k, sv.qkv, s.free_saved_sdpa)?;
    let gqkv = d.malloc(k, 3 * bsh, MAIN, s.bwd_cat)?;
    d.free_all(k, &mut dqkv, s.free_engine)?;
    let gln1 = d.malloc(k, bsh, MAIN, s.bwd_addmm_in)?;
    grads.push(d.malloc(k, 3 * h * h * 4, MAIN, s.bwd_addmm_w)?);
    grads.push(d.malloc(k, 3 * h * 4, MAIN, s.bwd_addmm_b)?);
    if let Some(c) = sv.casts.pop() {
        d.free(k, c, s.free_saved_addmm)?;
    }
    d.free(k, gqkv, s.free_engine)?;
    d.free(k, sv.ln1[0], s.free_saved_addmm)?;
    let gin = d.malloc(k, bsh, MAIN, s.bwd_ln_in)?;
    grads.push(d.malloc(k, h * 4, MAIN, s.bwd_ln_w)?);
    grads.push(d.malloc(k, h * 4, MAIN, s.bwd_ln_w)?);
    d.free(k, gln1, s.free_engine)?;
    d.free(k, sv.ln1[1], s.free_saved_ln)?;
    d.free(k, sv.ln1[2], s.free_saved_ln)?;
    d.free(k, sv.xin, s.free_saved_ln)?;
    let gx = d.malloc(k, bsh, MAIN, s.bwd_accum)?;
    d.free(k, gin, s.free_engine)?;
    d.free(k, gsum, s.free_engine)?;
    Ok(gx)
}

/// `torch.nn.utils.clip_grad_norm_` over `np` gradients: one norm per gradient, stacked, then
/// the total.
fn clip_grad_norm(d: &mut Dev, k: &mut dyn Sink, np: usize) -> Flow {
    let s = d.s;
    let mut norms = Vec::with_capacity(np);
    for _ in 0..np {
        norms.push(d.malloc(k, 4, MAIN, s.clip_norms)?);
    }
    let stacked = d.malloc(k, np as u64 * 4, MAIN, s.clip_stack)?;
    let total = d.malloc(k, 4, MAIN, s.clip_total)?;
    d.free_all(k, &mut norms, s.free_clip)?;
    d.free(k, stacked, s.free_clip)?;
    let coef = d.malloc(k, 4, MAIN, s.clip_total)?;
    d.free(k, coef, s.free_clip)?;
    d.free(k, total, s.free_clip)?;
    Ok(())
}

struct Train {
    m: Model,
    kind: TrainKind,
    step: u64,
    params: Vec<(u64, usize)>,
    param_blocks: Vec<BlockId>,
    adam: Vec<BlockId>,
    grads: Vec<BlockId>,
    leak_bytes: u64,
    clip: bool,
}

impl Train {
    fn init(&mut self, d: &mut Dev, k: &mut dyn Sink) -> Flow {
        for i in 0..self.params.len() {
            let (n, depth) = self.params[i];
            let b = d.malloc(k, n * 4, MAIN, d.s.param_init[depth.min(2)])?;
            self.param_blocks.push(b);
        }
        d.wait(20_000, 400_000);
        Ok(())
    }

    fn step(&mut self, d: &mut Dev, k: &mut dyn Sink) -> Flow {
        if self.param_blocks.len() < self.params.len() {
            return self.init(d, k);
        }
        if self.kind.eval_oom && d.over() {
            return self.evaluate(d, k);
        }
        let s = d.s;
        let step = self.step;
        self.step += 1;
        d.wait(500, 30_000);
        let name = format!("ProfilerStep#{step}");
        k.annotation(d.a.device, d.a.now_us, &name, true);
        let sh = self.shape(d);
        // The batch is copied in on a side stream and used on the main one.
        let prefetch = d.c.side_stream;
        let ids = d.malloc(k, sh.bs * 8, prefetch, s.data_ids)?;
        d.a.record_stream(ids, MAIN);
        let labels = d.malloc(k, sh.bs * 8, prefetch, s.data_labels)?;
        d.a.record_stream(labels, MAIN);
        let fwd = forward(d, k, &sh)?;
        let (logits, loss) = (fwd.logits, fwd.loss);
        let comm_outs = self.backward(d, k, &sh, fwd)?;
        self.optimizer_step(d, k, comm_outs)?;
        // optimizer.zero_grad(set_to_none=True)
        let mut grads = std::mem::take(&mut self.grads);
        d.free_all(k, &mut grads, s.free_zero_grad)?;
        for t in [logits, loss, ids, labels] {
            d.free(k, t, s.free_step)?;
        }
        if self.kind.empty_cache_every > 0
            && step % self.kind.empty_cache_every == self.kind.empty_cache_every - 1
        {
            d.empty_cache(k, s.empty_cache_train)?;
        }
        k.annotation(d.a.device, d.a.now_us, &name, false);
        Ok(())
    }

    /// This step's batch and sequence length (drawn when they vary) and the sizes they give.
    fn shape(&self, d: &mut Dev) -> Shape {
        let m = self.m;
        let (b, sq) = if self.kind.variable_seq {
            (
                d.rng.range(1, m.batch),
                d.rng.range((m.seq / 8).max(8), m.seq),
            )
        } else {
            (m.batch, m.seq)
        };
        Shape {
            m,
            b,
            sq,
            bs: b * sq,
            bsh: b * sq * m.hidden * m.act_bytes,
        }
    }

    /// The backward pass: the loss's gradient, the head and final norm, each layer in reverse
    /// (with its gradients reduced on the communication stream on several devices), the
    /// embeddings; then the gradients are clipped when the run does. Returns the reduce-scatter
    /// outputs, freed after the optimizer step.
    fn backward(
        &mut self,
        d: &mut Dev,
        k: &mut dyn Sink,
        sh: &Shape,
        fwd: Forward,
    ) -> Flow<Vec<BlockId>> {
        let s = d.s;
        let Forward {
            saved,
            lnf,
            mut head_cast,
            losses: (x, lsm, total_weight),
            ..
        } = fwd;
        let (h, v, a) = (sh.m.hidden, sh.m.vocab, sh.m.act_bytes);
        let (bs, bsh) = (sh.bs, sh.bsh);
        // backward (the autograd engine's device thread)
        let ones = d.malloc(k, 4, MAIN, s.bwd_ones)?;
        let g1 = d.malloc(k, bs * v * 4, MAIN, s.bwd_nll)?;
        d.free(k, ones, s.free_engine)?;
        d.free(k, total_weight, s.free_saved_nll)?;
        let g2 = d.malloc(k, bs * v * 4, MAIN, s.bwd_logsoftmax)?;
        d.free(k, g1, s.free_engine)?;
        d.free(k, lsm, s.free_saved_logsoftmax)?;
        let g3 = d.malloc(k, bs * v * a, MAIN, s.bwd_cast)?;
        d.free(k, g2, s.free_engine)?;
        let np = self.params.len();
        let mut grads: Vec<BlockId> = Vec::with_capacity(np);
        let mut gx = d.malloc(k, bsh, MAIN, s.bwd_mm)?;
        grads.push(d.malloc(k, v * h * 4, MAIN, s.bwd_mm)?);
        d.free(k, g3, s.free_engine)?;
        d.free(k, lnf[0], s.free_saved_mm)?;
        d.free_all(k, &mut head_cast, s.free_saved_mm)?;
        let gln = d.malloc(k, bsh, MAIN, s.bwd_ln_in)?;
        grads.push(d.malloc(k, h * 4, MAIN, s.bwd_ln_w)?);
        grads.push(d.malloc(k, h * 4, MAIN, s.bwd_ln_w)?);
        d.free(k, gx, s.free_engine)?;
        d.free(k, lnf[1], s.free_saved_ln)?;
        d.free(k, lnf[2], s.free_saved_ln)?;
        d.free(k, x, s.free_saved_ln)?;
        gx = gln;
        let bucket = d.rng.range(1, 4);
        let mut comm_outs = Vec::new();
        for (li, sv) in saved.into_iter().enumerate().rev() {
            gx = backward_layer(d, k, sh, sv, gx, &mut grads)?;
            if d.multi_device && li as u64 % bucket == 0 {
                // Reduce-scatter of this layer's gradients on the communication stream.
                let layer_bytes = (12 * h * h + 13 * h) * 4;
                let flat = d.malloc(k, layer_bytes, MAIN, s.comm_bucket)?;
                d.a.record_stream(flat, d.c.comm_stream);
                comm_outs.push(d.malloc(k, layer_bytes / 4, d.c.comm_stream, s.comm_out)?);
                d.free(k, flat, s.free_comm)?;
            }
        }
        grads.push(d.malloc(k, v * h * 4, MAIN, s.bwd_embed)?);
        grads.push(d.malloc(k, sh.m.seq * h * 4, MAIN, s.bwd_embed)?);
        d.free(k, gx, s.free_engine)?;
        self.grads = grads;
        if self.clip {
            clip_grad_norm(d, k, np)?;
        }
        Ok(comm_outs)
    }

    /// The optimizer: Adam states once, then foreach temporaries every step; the gradients'
    /// reduce-scatter outputs go; a leaking run keeps one tensor per step.
    fn optimizer_step(
        &mut self,
        d: &mut Dev,
        k: &mut dyn Sink,
        mut comm_outs: Vec<BlockId>,
    ) -> Flow {
        let s = d.s;
        let np = self.params.len();
        if self.adam.is_empty() {
            for i in 0..np {
                let n = self.params[i].0 * 4;
                self.adam.push(d.malloc(k, n, MAIN, s.opt_init)?);
                self.adam.push(d.malloc(k, n, MAIN, s.opt_init)?);
            }
        }
        let mut tmp = Vec::with_capacity(np);
        for i in 0..np {
            tmp.push(d.malloc(k, self.params[i].0 * 4, MAIN, s.opt_foreach)?);
        }
        d.free_all(k, &mut tmp, s.free_opt_tmp)?;
        d.free_all(k, &mut comm_outs, s.free_comm)?;
        if self.kind.leak {
            // `history.append(out.detach().clone())`: one tensor kept per step.
            let _kept = d.malloc(k, self.leak_bytes, MAIN, s.leak_clone)?;
        }
        Ok(())
    }

    /// `evaluate()` after training, ending in an OOM caused by fragmentation:
    /// `torch.cuda.empty_cache()`; the first, longest batch's buffers take the rest of the
    /// device and are freed (cached as large segments); then batches of varying length, each
    /// copied in on the prefetch stream, each appending an output of a different size, until
    /// the cache holds no block for the next one; two outputs of every three are dropped (the
    /// cached segments end up split between live outputs), and `torch.cat(outputs)` asks for
    /// more than any free block and than the device has left, while the free blocks together
    /// would hold it.
    fn evaluate(&mut self, d: &mut Dev, k: &mut dyn Sink) -> Flow {
        const MIB: u64 = 1 << 20;
        let s = d.s;
        let m = self.m;
        let prefetch = d.c.side_stream;
        d.wait(100_000, 2_000_000);
        d.empty_cache(k, s.eval_empty_cache)?;
        // Room kept for the batches' small copies (2 MiB segments).
        let reserve = 3 * crate::alloc::SMALL_BUFFER;
        let page = crate::alloc::LARGE_BUFFER;
        let chunk = (d.a.device_free_bytes() / 8).div_ceil(page).max(1) * page;
        let mut bufs = Vec::new();
        let mut filled = 0;
        while bufs.len() < 256 {
            let room = d.a.device_free_bytes().saturating_sub(reserve) / page * page;
            let n = chunk.min(room);
            if n < page {
                break;
            }
            bufs.push(d.malloc(k, n, MAIN, s.eval_buf)?);
            filled += n;
        }
        d.wait(5_000, 200_000);
        d.free_all(k, &mut bufs, s.eval_free_buf)?;
        let unit = (filled / 96).max(2 * MIB);
        let mut outs: Vec<(BlockId, u64)> = Vec::new();
        while outs.len() < 10_000 {
            d.wait(1_000, 20_000);
            let size = d.rng.range(unit / 2, unit + unit / 2) / 512 * 512;
            let ids_bytes = (d.rng.range(1, m.batch) * d.rng.range(8, m.seq) * 8).min(MIB);
            if !d.a.fits_cached(size, MAIN)
                || (!d.a.fits_cached(ids_bytes, prefetch)
                    && d.a.device_free_bytes() < 2 * crate::alloc::SMALL_BUFFER)
            {
                break;
            }
            let ids = d.malloc(k, ids_bytes, prefetch, s.eval_ids)?;
            d.a.record_stream(ids, MAIN);
            outs.push((d.malloc(k, size, MAIN, s.eval_out)?, size));
            d.free(k, ids, s.eval_free_ids)?;
        }
        // `outputs = outputs[::3]`: the others go, the second of each three first.
        d.wait(1_000, 20_000);
        for r in [1, 2] {
            for (_, &(b, _)) in outs.iter().enumerate().filter(|(i, _)| i % 3 == r) {
                d.free(k, b, s.eval_free_out)?;
            }
        }
        let kept: u64 = outs.iter().step_by(3).map(|o| o.1).sum();
        // More than any free block and than the device has left, even after the retry.
        let after = d.a.after_release();
        let largest =
            d.a.largest_free_block(MAIN, false)
                .max(after.largest_free_block(MAIN, false));
        let request = kept.max(largest + after.device_free_bytes() + 2 * MIB);
        d.wait(1_000, 30_000);
        let cat = d.malloc(k, request, MAIN, s.eval_cat)?;
        // It fitted after all (a configuration without fragmentation): the run ends here.
        d.free(k, cat, s.eval_free_out)?;
        Err(Stop::Budget)
    }
}

struct Infer {
    m: Model,
    step: u64,
    weights: Vec<BlockId>,
    graphs_done: bool,
}

impl Infer {
    fn init(&mut self, d: &mut Dev, k: &mut dyn Sink) -> Flow {
        let params = self.m.params();
        for (n, depth) in params {
            let b = d.malloc(k, n * 2, MAIN, d.s.param_init[depth.min(2)])?;
            self.weights.push(b);
        }
        d.wait(50_000, 900_000);
        Ok(())
    }

    /// CUDA graph capture of a decode step for a few batch sizes, each into its own private pool
    /// (static buffers stay allocated; temporaries are freed back into the pool).
    fn capture(&mut self, d: &mut Dev, k: &mut dyn Sink) -> Flow {
        let s = d.s;
        let m = self.m;
        let graphs = d.rng.range(1, 3);
        for gi in 0..graphs {
            let bsz = 1u64 << gi;
            d.a.begin_capture((0, gi as i64 + 1));
            let _static_in = d.malloc(k, bsz * 8, MAIN, s.graph_static)?;
            for _ in 0..m.layers {
                let mut tmps = Vec::new();
                for n in [
                    bsz * m.hidden * 2,
                    bsz * 3 * m.hidden * 2,
                    bsz * m.hidden * 2,
                    bsz * m.ffn * 2,
                ] {
                    tmps.push(d.malloc(k, n, MAIN, s.graph_tmp)?);
                }
                d.free_all(k, &mut tmps, s.graph_free)?;
            }
            let _static_out = d.malloc(k, bsz * m.vocab * 2, MAIN, s.graph_static)?;
            d.a.end_capture();
            d.wait(1_000, 20_000);
        }
        Ok(())
    }

    /// One decoder layer over `rows` tokens; the layer's cache grows to `kv_rows` per sequence.
    #[allow(clippy::too_many_arguments)]
    fn layer(
        &mut self,
        d: &mut Dev,
        k: &mut dyn Sink,
        x: BlockId,
        rows: u64,
        kv: &mut [Option<BlockId>; 2],
        kv_rows: u64,
        bsz: u64,
    ) -> Flow<BlockId> {
        let s = d.s;
        let m = self.m;
        let (h, f, a) = (m.hidden, m.ffn, m.act_bytes);
        let ln = d.malloc(k, rows * h * a, MAIN, s.inf_ln)?;
        let mean = d.malloc(k, rows * 4, MAIN, s.inf_ln)?;
        let rstd = d.malloc(k, rows * 4, MAIN, s.inf_ln)?;
        d.free(k, mean, s.inf_free_layer)?;
        d.free(k, rstd, s.inf_free_layer)?;
        let qkv = d.malloc(k, rows * 3 * h * a, MAIN, s.inf_qkv)?;
        d.free(k, ln, s.inf_free_layer)?;
        // past_key_values: torch.cat([past, new]) → a new, larger tensor each token
        for (i, site) in [s.inf_kcat, s.inf_vcat].into_iter().enumerate() {
            let grown = d.malloc(k, bsz * kv_rows * h * a, MAIN, site)?;
            if let Some(old) = kv[i].replace(grown) {
                d.free(k, old, s.inf_free_kv)?;
            }
        }
        let att = d.malloc(k, rows * h * a, MAIN, s.inf_sdpa)?;
        d.free(k, qkv, s.inf_free_layer)?;
        let o = d.malloc(k, rows * h * a, MAIN, s.inf_o)?;
        d.free(k, att, s.inf_free_layer)?;
        let x1 = d.malloc(k, rows * h * a, MAIN, s.inf_add)?;
        d.free(k, o, s.inf_free_layer)?;
        d.free(k, x, s.inf_free_layer)?;
        let ln2 = d.malloc(k, rows * h * a, MAIN, s.inf_ln)?;
        let h1 = d.malloc(k, rows * f * a, MAIN, s.inf_fc1)?;
        d.free(k, ln2, s.inf_free_layer)?;
        let g = d.malloc(k, rows * f * a, MAIN, s.inf_gelu)?;
        d.free(k, h1, s.inf_free_layer)?;
        let f2 = d.malloc(k, rows * h * a, MAIN, s.inf_fc2)?;
        d.free(k, g, s.inf_free_layer)?;
        let x2 = d.malloc(k, rows * h * a, MAIN, s.inf_add)?;
        d.free(k, f2, s.inf_free_layer)?;
        d.free(k, x1, s.inf_free_layer)?;
        Ok(x2)
    }

    fn step(&mut self, d: &mut Dev, k: &mut dyn Sink) -> Flow {
        if self.weights.is_empty() {
            return self.init(d, k);
        }
        if !self.graphs_done {
            self.graphs_done = true;
            return self.capture(d, k);
        }
        let s = d.s;
        let m = self.m;
        let step = self.step;
        self.step += 1;
        d.wait(1_000, 80_000);
        let name = format!("ProfilerStep#{step}");
        k.annotation(d.a.device, d.a.now_us, &name, true);
        let bsz = d.rng.range(1, m.batch);
        let prompt = d.rng.range(8, (m.seq / 2).max(9));
        let new = d.rng.range(4, (m.seq - prompt).clamp(5, 256));
        let ids = d.malloc(k, bsz * prompt * 8, d.c.side_stream, s.inf_ids)?;
        d.a.record_stream(ids, MAIN);
        let mut ids = ids;
        let mut caches: Vec<[Option<BlockId>; 2]> = Vec::with_capacity(m.layers as usize);
        // prefill: each layer's cache starts as the prompt's keys and values
        let mut x = d.malloc(k, bsz * prompt * m.hidden * m.act_bytes, MAIN, s.inf_embed)?;
        for _ in 0..m.layers {
            let mut kv = [None, None];
            x = self.layer(d, k, x, bsz * prompt, &mut kv, prompt, bsz)?;
            caches.push(kv);
        }
        let mut len = prompt;
        for t in 0..=new {
            let rows = if t == 0 { bsz * prompt } else { bsz };
            if t > 0 {
                d.wait(2_000, 25_000);
                x = d.malloc(k, bsz * m.hidden * m.act_bytes, MAIN, s.inf_embed)?;
                len += 1;
                for kv in caches.iter_mut() {
                    x = self.layer(d, k, x, rows, kv, len, bsz)?;
                }
            }
            let xf = d.malloc(k, rows * m.hidden * m.act_bytes, MAIN, s.inf_lnf)?;
            d.free(k, x, s.inf_free_step)?;
            let logits = d.malloc(k, rows * m.vocab * m.act_bytes, MAIN, s.inf_head)?;
            d.free(k, xf, s.inf_free_step)?;
            let lf = d.malloc(k, bsz * m.vocab * 4, MAIN, s.inf_cast)?;
            d.free(k, logits, s.inf_free_step)?;
            let probs = d.malloc(k, bsz * m.vocab * 4, MAIN, s.inf_softmax)?;
            d.free(k, lf, s.inf_free_step)?;
            let next = d.malloc(k, bsz * 8, MAIN, s.inf_sample)?;
            d.free(k, probs, s.inf_free_step)?;
            let grown = d.malloc(k, bsz * (len + 1) * 8, MAIN, s.inf_ids_cat)?;
            d.free(k, next, s.inf_free_step)?;
            d.free(k, ids, s.inf_free_step)?;
            ids = grown;
        }
        for b in caches.into_iter().flatten().flatten() {
            d.free(k, b, s.inf_free_gen)?;
        }
        d.free(k, ids, s.inf_free_gen)?;
        if step % 16 == 15 {
            d.empty_cache(k, s.empty_cache_infer)?;
        }
        k.annotation(d.a.device, d.a.now_us, &name, false);
        Ok(())
    }
}

enum Work {
    Train(Box<Train>),
    Infer(Box<Infer>),
}

/// One device's run of the program.
pub struct DeviceSim<'p> {
    dev: Dev<'p>,
    work: Work,
    stopped: Option<Stop>,
}

impl<'p> DeviceSim<'p> {
    pub fn new(prog: &'p Program, device: u32) -> DeviceSim<'p> {
        let cfg = &prog.cfg;
        let c = prog
            .devices
            .get(device as usize)
            .copied()
            .unwrap_or(DeviceConsts {
                side_stream: 1,
                comm_stream: 2,
                va_base: 0x7000_0000_0000,
                start_us: 0,
                events: 0,
            });
        let seed = cfg.seed;
        let a = Allocator::new(
            device,
            &prog.alloc,
            c.va_base,
            c.start_us,
            Rng::new(seed, 2000 + device as u64),
        );
        let mut rng = Rng::new(seed, 1000 + device as u64);
        let m = prog.model;
        let work = match cfg.workload {
            Workload::Inference => Work::Infer(Box::new(Infer {
                m,
                step: 0,
                weights: Vec::new(),
                graphs_done: false,
            })),
            w => {
                let kind = TrainKind {
                    variable_seq: w == Workload::Fragmenting,
                    empty_cache_every: if w == Workload::Fragmenting {
                        rng.range(8, 30)
                    } else {
                        0
                    },
                    leak: w == Workload::Leak,
                    eval_oom: w == Workload::OomFragmentation,
                };
                // A leak that stays under a quarter of the device over the whole run.
                let steps = (c.events / (m.layers * 200 + 100)).max(1);
                let room = prog.alloc.device_total_bytes / 4 / steps;
                let leak_bytes = (m.batch * m.seq * m.hidden * m.act_bytes)
                    .min(room)
                    .max(512);
                Work::Train(Box::new(Train {
                    m,
                    kind,
                    step: 0,
                    params: m.params(),
                    param_blocks: Vec::new(),
                    adam: Vec::new(),
                    grads: Vec::new(),
                    leak_bytes,
                    clip: Rng::new(seed, 3).chance(0.7),
                }))
            }
        };
        let dev = Dev {
            a,
            rng,
            s: &prog.sites,
            c,
            serial: 0,
            stop_at_budget: !matches!(cfg.workload, Workload::Oom | Workload::OomFragmentation),
            oom_at_limit: cfg.workload == Workload::Oom,
            multi_device: prog.devices.len() > 1,
        };
        DeviceSim {
            dev,
            work,
            stopped: None,
        }
    }

    /// Runs one step (a training step, one generate call, or a setup phase); false once the run
    /// has stopped.
    pub fn step(&mut self, sink: &mut dyn Sink) -> bool {
        if self.stopped.is_some() {
            return false;
        }
        if self.dev.c.events == 0 {
            self.stopped = Some(Stop::Budget);
            return false;
        }
        let r = match &mut self.work {
            Work::Train(t) => t.step(&mut self.dev, sink),
            Work::Infer(i) => i.step(&mut self.dev, sink),
        };
        if let Err(e) = r {
            self.stopped = Some(e);
            return false;
        }
        true
    }

    /// Runs to the end.
    pub fn run(&mut self, sink: &mut dyn Sink) {
        while self.step(sink) {}
    }

    pub fn emitted(&self) -> u64 {
        self.dev.a.emitted
    }

    pub fn stopped(&self) -> Option<Stop> {
        self.stopped
    }

    pub fn allocator(&self) -> &Allocator {
        &self.dev.a
    }
}
