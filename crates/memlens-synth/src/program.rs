//! The simulated program, shared by every device and pass: the model it runs (sized to fit the
//! device), the Python/C++ stacks of every allocation and free site, and the per-device
//! constants (streams, address bases, start times). Everything here is a function of the
//! [`Config`], so each pass rebuilds exactly the same program.

use crate::alloc::AllocConfig;
use crate::rng::Rng;
use crate::stacks::{op, py, Builder, Env, Op, Py, Stacks, T1, T2};
use crate::{Config, Workload};

/// Shapes of the transformer the workloads run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Model {
    pub layers: u64,
    pub hidden: u64,
    pub heads: u64,
    pub ffn: u64,
    pub vocab: u64,
    pub batch: u64,
    pub seq: u64,
    /// Bytes per activation element (2 under bf16 autocast or fp16 inference, else 4).
    pub act_bytes: u64,
}

impl Model {
    /// Parameter tensors in element counts, in `model.parameters()` order, with the depth of the
    /// module that owns each (for the `_apply` recursion in its stack).
    pub fn params(&self) -> Vec<(u64, usize)> {
        let (h, f) = (self.hidden, self.ffn);
        let mut v = vec![(self.vocab * h, 1), (self.seq * h, 1)];
        for _ in 0..self.layers {
            v.extend_from_slice(&[
                (h, 2),
                (h, 2),
                (3 * h * h, 3),
                (3 * h, 3),
                (h * h, 3),
                (h, 3),
                (h, 2),
                (h, 2),
                (f * h, 3),
                (f, 3),
                (h * f, 3),
                (h, 3),
            ]);
        }
        v.extend_from_slice(&[(h, 1), (h, 1), (self.vocab * h, 1)]);
        v
    }

    pub fn param_elems(&self) -> u64 {
        self.params().iter().map(|p| p.0).sum()
    }

    /// Rough peak bytes of one training step (params, grads, Adam states, foreach temporaries,
    /// saved activations, the loss head).
    pub fn train_peak_bytes(&self) -> u64 {
        let bs = self.batch * self.seq;
        let p = self.param_elems() * 4;
        let act = self.layers * bs * self.act_bytes * (9 * self.hidden + 2 * self.ffn);
        let head = bs * self.vocab * (self.act_bytes + 8) * 2;
        5 * p + act + head
    }

    /// Rough peak bytes of inference (fp16 weights, KV caches at full length, prefill logits).
    pub fn infer_peak_bytes(&self) -> u64 {
        let p = self.param_elems() * 2;
        let kv = 2 * self.layers * self.batch * self.seq * self.hidden * 2 * 2;
        let logits = self.batch * self.seq * self.vocab * 6;
        let graphs = 3 * 2 * self.layers * 4 * self.seq * self.hidden * 2;
        p + kv + logits + graphs
    }
}

/// Stack ids of every allocation and free site the workloads use. Sites that a run never reaches
/// cost nothing: frames are written when first referenced.
#[derive(Debug, Clone, Default)]
pub struct Sites {
    pub param_init: [u32; 3],
    pub data_ids: u32,
    pub data_labels: u32,
    pub free_step: u32,
    pub fwd_embed: u32,
    pub fwd_ln1: u32,
    pub fwd_qkv: u32,
    pub fwd_sdpa: u32,
    pub fwd_o: u32,
    pub fwd_add1: u32,
    pub fwd_ln2: u32,
    pub fwd_fc1: u32,
    pub fwd_gelu: u32,
    pub fwd_fc2: u32,
    pub fwd_add2: u32,
    pub fwd_lnf: u32,
    pub fwd_head: u32,
    /// Autocast's bf16 copies of the weights of qkv, o, fc1, fc2 and the head (saved for backward).
    pub fwd_cast_w: [u32; 5],
    pub fwd_cast: u32,
    pub fwd_logsoftmax: u32,
    pub fwd_loss: u32,
    pub free_block_attn: u32,
    pub free_block_mlp: u32,
    pub free_loss_fn: u32,
    pub bwd_ones: u32,
    pub bwd_nll: u32,
    pub bwd_logsoftmax: u32,
    pub bwd_cast: u32,
    pub bwd_mm: u32,
    pub bwd_addmm_in: u32,
    pub bwd_addmm_w: u32,
    pub bwd_addmm_b: u32,
    pub bwd_ln_in: u32,
    pub bwd_ln_w: u32,
    pub bwd_gelu: u32,
    pub bwd_sdpa: u32,
    pub bwd_cat: u32,
    pub bwd_accum: u32,
    pub bwd_embed: u32,
    pub free_saved_addmm: u32,
    pub free_saved_mm: u32,
    pub free_saved_ln: u32,
    pub free_saved_gelu: u32,
    pub free_saved_sdpa: u32,
    pub free_saved_logsoftmax: u32,
    pub free_saved_nll: u32,
    pub free_engine: u32,
    pub opt_init: u32,
    pub opt_foreach: u32,
    pub free_opt_tmp: u32,
    pub free_zero_grad: u32,
    pub comm_bucket: u32,
    pub comm_out: u32,
    pub free_comm: u32,
    pub leak_clone: u32,
    pub clip_norms: u32,
    pub clip_stack: u32,
    pub clip_total: u32,
    pub free_clip: u32,
    pub empty_cache_train: u32,
    pub inf_ids: u32,
    pub inf_embed: u32,
    pub inf_ln: u32,
    pub inf_qkv: u32,
    pub inf_kcat: u32,
    pub inf_vcat: u32,
    pub inf_sdpa: u32,
    pub inf_o: u32,
    pub inf_add: u32,
    pub inf_fc1: u32,
    pub inf_gelu: u32,
    pub inf_fc2: u32,
    pub inf_lnf: u32,
    pub inf_head: u32,
    pub inf_cast: u32,
    pub inf_softmax: u32,
    pub inf_sample: u32,
    pub inf_ids_cat: u32,
    pub inf_free_layer: u32,
    pub inf_free_kv: u32,
    pub inf_free_gen: u32,
    pub inf_free_step: u32,
    pub graph_static: u32,
    pub graph_tmp: u32,
    pub graph_free: u32,
    pub empty_cache_infer: u32,
    /// `evaluate()` in train.py (the oom-fragmentation workload): `torch.cuda.empty_cache()`,
    /// the first (longest) batch's buffers, each batch copied in, its kept output, the
    /// frees, and the final `torch.cat(outputs)`.
    pub eval_empty_cache: u32,
    pub eval_buf: u32,
    pub eval_free_buf: u32,
    pub eval_ids: u32,
    pub eval_free_ids: u32,
    pub eval_out: u32,
    pub eval_free_out: u32,
    pub eval_cat: u32,
}

/// Streams and placement of one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceConsts {
    pub side_stream: u64,
    pub comm_stream: u64,
    pub va_base: u64,
    pub start_us: i64,
    /// Trace entries this device records before its snapshot is taken.
    pub events: u64,
}

#[derive(Debug, Clone)]
pub struct Program {
    pub cfg: Config,
    pub alloc: AllocConfig,
    pub model: Model,
    pub stacks: Stacks,
    pub sites: Sites,
    pub devices: Vec<DeviceConsts>,
}

const LINEAR: Op = op("addmm", "at::Tensor const&, at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar const&", true);
const MM: Op = op("mm", T2, true);
const LAYER_NORM: Op = op(
    "native_layer_norm",
    "at::Tensor const&, c10::ArrayRef<c10::SymInt>, std::optional<at::Tensor> const&, std::optional<at::Tensor> const&, double",
    false,
);
const SDPA: Op = op(
    "_scaled_dot_product_flash_attention",
    "at::Tensor const&, at::Tensor const&, at::Tensor const&, double, bool, bool, std::optional<double>",
    false,
);
const GELU: Op = op(
    "gelu",
    "at::Tensor const&, c10::basic_string_view<char>",
    true,
);
const ADD: Op = op(
    "add_Tensor",
    "at::Tensor const&, at::Tensor const&, c10::Scalar const&",
    true,
);
const EMBEDDING: Op = op(
    "embedding",
    "at::Tensor const&, at::Tensor const&, c10::SymInt, bool, bool",
    false,
);
const TO_COPY: Op = op(
    "_to_copy",
    "at::Tensor const&, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, bool, std::optional<c10::MemoryFormat>",
    false,
);
const LOG_SOFTMAX: Op = op("_log_softmax", "at::Tensor const&, long, bool", true);
const SOFTMAX: Op = op("_softmax", "at::Tensor const&, long, bool", true);
const NLL: Op = op(
    "nll_loss_forward",
    "at::Tensor const&, at::Tensor const&, std::optional<at::Tensor> const&, long, c10::SymInt",
    true,
);
const CAT: Op = op("cat", "c10::IListRef<at::Tensor> const&, long", true);
const CLONE: Op = op(
    "clone",
    "at::Tensor const&, std::optional<c10::MemoryFormat>",
    false,
);
const ZEROS_LIKE: Op = op(
    "zeros_like",
    "at::Tensor const&, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>",
    false,
);
const FOREACH_SQRT: Op = op("_foreach_sqrt", "c10::ArrayRef<at::Tensor>", false);
const MULTINOMIAL: Op = op(
    "multinomial",
    "at::Tensor const&, long, bool, std::optional<at::Generator>",
    false,
);
const EMPTY: Op = op(
    "empty_memory_format",
    "c10::ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>",
    false,
);

fn pick_model(cfg: &Config, rng: &mut Rng, capacity: u64) -> Model {
    let hidden = rng.pick(&[256u64, 512, 768, 1024, 1280, 1600, 2048], 768);
    let heads = (hidden / 64).max(1);
    let infer = cfg.workload == Workload::Inference;
    let mut m = Model {
        layers: rng.range(4, 32),
        hidden,
        heads,
        ffn: 4 * hidden,
        vocab: rng.pick(&[32000u64, 32768, 50257, 50304], 50257),
        batch: rng.pick(&[2u64, 4, 8, 16, 32], 8),
        seq: rng.pick(&[256u64, 512, 1024, 2048], 1024),
        act_bytes: if infer || rng.chance(0.7) { 2 } else { 4 },
    };
    // Fit: about half the device at peak, leaving room for fragmentation, leaks and the cache.
    let budget = capacity / 2;
    let peak = |m: &Model| {
        if infer {
            m.infer_peak_bytes()
        } else {
            m.train_peak_bytes()
        }
    };
    while peak(&m) > budget {
        if m.batch > 1 {
            m.batch /= 2;
        } else if m.seq > 64 {
            m.seq /= 2;
        } else if m.layers > 1 {
            m.layers -= 1;
        } else if m.hidden > 64 {
            m.hidden /= 2;
            m.ffn = 4 * m.hidden;
            m.heads = (m.hidden / 64).max(1);
        } else if m.vocab > 1000 {
            m.vocab /= 2;
        } else {
            break;
        }
    }
    m
}

impl Program {
    pub fn new(cfg: &Config) -> Program {
        let mut rng = Rng::new(cfg.seed, 0);
        let total = cfg.device_memory_mib.saturating_mul(1 << 20);
        let overhead = (rng.range(300, 700) << 20).min(total / 8);
        let alloc = AllocConfig {
            expandable_segments: cfg.expandable_segments,
            max_split_size_bytes: cfg.max_split_size_mb.map(|m| m << 20),
            device_total_bytes: total,
            device_overhead_bytes: overhead,
        };
        let model = pick_model(cfg, &mut rng, total - overhead);
        let env = Env::new(&mut rng);
        let mut stacks = Stacks::default();
        let sites = build_sites(
            &mut Builder {
                st: &mut stacks,
                env: &env,
            },
            &env,
            &mut rng,
        );
        let epoch = 1_735_689_600_000_000i64 + rng.below(31_536_000_000_000) as i64;
        let heap = 0x5550_0000_0000u64 + (rng.below(0xff_0000) << 16);
        let devices = cfg.devices.max(1) as u64;
        let per = cfg.events / devices;
        let extra = cfg.events % devices;
        let devices = (0..devices)
            .map(|d| DeviceConsts {
                side_stream: heap + d * 0x1_4a0 + rng.below(64) * 0x10,
                comm_stream: heap + 0x9_0000 + d * 0x1_4a0 + rng.below(64) * 0x10,
                va_base: 0x7000_0000_0000 + d * 0x100_0000_0000 + (rng.below(4096) << 21),
                start_us: epoch + rng.below(800) as i64,
                events: per + u64::from(d < extra),
            })
            .collect();
        Program {
            cfg: cfg.clone(),
            alloc,
            model,
            stacks,
            sites,
            devices,
        }
    }
}

/// Python stacks of the program, innermost first.
struct Paths {
    model: String,
    mc: [Py; 2],
    top: Vec<Py>,
    gen_top: Vec<Py>,
    lines: Lines,
}

#[derive(Default)]
struct Lines {
    model_layers: i64,
    block_attn: i64,
    block_mlp: i64,
}

impl Paths {
    fn with_mc(&self, f: Py, rest: Vec<Py>) -> Vec<Py> {
        let mut v = vec![f, self.mc[0].clone(), self.mc[1].clone()];
        v.extend(rest);
        v
    }
    fn in_step(&self, line: i64, top: &[Py]) -> Vec<Py> {
        let mut v = top.to_vec();
        if let Some(first) = v.first_mut() {
            first.line = line;
        }
        v
    }
    fn in_model(&self, line: i64, step_line: i64, top: &[Py]) -> Vec<Py> {
        self.with_mc(
            py("forward", &self.model, line),
            self.in_step(step_line, top),
        )
    }
    fn in_block(&self, line: i64, step_line: i64, top: &[Py]) -> Vec<Py> {
        self.with_mc(
            py("forward", &self.model, line),
            self.in_model(self.lines.model_layers, step_line, top),
        )
    }
    fn in_attn(&self, line: i64, step_line: i64, top: &[Py]) -> Vec<Py> {
        self.with_mc(
            py("forward", &self.model, line),
            self.in_block(self.lines.block_attn, step_line, top),
        )
    }
    fn in_mlp(&self, line: i64, step_line: i64, top: &[Py]) -> Vec<Py> {
        self.with_mc(
            py("forward", &self.model, line),
            self.in_block(self.lines.block_mlp, step_line, top),
        )
    }
}

/// What the site groups share: the program's paths and stacks, its step's lines, and the lines
/// of the model's code, drawn once in this order.
struct SiteCtx<'e> {
    env: &'e Env,
    train: String,
    infer: String,
    p: Paths,
    /// The training step's and generate()'s stacks.
    t: Vec<Py>,
    g: Vec<Py>,
    step_fwd: i64,
    step_bwd: i64,
    step_opt: i64,
    step_zero: i64,
    linear_py: Py,
    ln_py: Py,
    emb_py: Py,
    functional: String,
    a_qkv: i64,
    a_sdpa: i64,
    a_o: i64,
    m_fc1: i64,
    m_gelu: i64,
    m_fc2: i64,
    b_ln1: i64,
    b_add1: i64,
    b_ln2: i64,
    b_add2: i64,
    m_emb: i64,
    m_lnf: i64,
    m_head: i64,
}

impl<'e> SiteCtx<'e> {
    fn new(env: &'e Env, rng: &mut Rng) -> SiteCtx<'e> {
        let mut l = |lo: u64, hi: u64| rng.range(lo, hi) as i64;
        let train = env.user("train.py");
        let infer = env.user("generate.py");
        let model = env.user("model.py");
        let top = vec![
            py("train_step", &train, 0),
            py("main", &train, l(150, 260)),
            py("<module>", &train, l(270, 330)),
        ];
        let gen_top = vec![
            py("generate", &infer, 0),
            py("decorate_context", &env.torch("utils/_contextlib.py"), 116),
            py("main", &infer, l(120, 200)),
            py("<module>", &infer, l(210, 260)),
        ];
        let lines = Lines {
            model_layers: l(200, 260),
            block_attn: l(120, 140),
            block_mlp: l(141, 160),
        };
        let p = Paths {
            model: model.clone(),
            mc: env.module_call(),
            top,
            gen_top,
            lines,
        };
        let step_fwd = l(60, 80);
        let step_bwd = step_fwd + l(2, 6);
        let step_opt = step_bwd + l(1, 4);
        let step_zero = step_opt + 1;
        let linear_py = py(
            "forward",
            &env.torch("nn/modules/linear.py"),
            if env.style == 0 { 114 } else { 125 },
        );
        let ln_py = py(
            "forward",
            &env.torch("nn/modules/normalization.py"),
            if env.style == 0 { 201 } else { 217 },
        );
        let emb_py = py(
            "forward",
            &env.torch("nn/modules/sparse.py"),
            if env.style == 0 { 162 } else { 190 },
        );
        let functional = env.torch("nn/functional.py");
        let t = p.top.clone();
        let g = p.gen_top.clone();
        let (a_qkv, a_sdpa, a_o) = (l(60, 70), l(71, 80), l(81, 90));
        let (m_fc1, m_gelu, m_fc2) = (l(95, 100), l(101, 104), l(105, 110));
        // `x = x + self.attn(self.ln_1(x))`: layer norm, attention call and residual add share a line.
        let (b_ln1, b_add1) = (p.lines.block_attn, p.lines.block_attn);
        let (b_ln2, b_add2) = (p.lines.block_mlp, p.lines.block_mlp);
        let (m_emb, m_lnf, m_head) = (l(180, 199), l(261, 270), l(271, 280));

        SiteCtx {
            env,
            train,
            infer,
            p,
            t,
            g,
            step_fwd,
            step_bwd,
            step_opt,
            step_zero,
            linear_py,
            ln_py,
            emb_py,
            functional,
            a_qkv,
            a_sdpa,
            a_o,
            m_fc1,
            m_gelu,
            m_fc2,
            b_ln1,
            b_add1,
            b_ln2,
            b_add2,
            m_emb,
            m_lnf,
            m_head,
        }
    }

    /// An allocation by `nn.Linear` under `inner`.
    fn lin(&self, b: &mut Builder, inner: Vec<Py>) -> u32 {
        let mut v = vec![
            self.linear_py.clone(),
            self.p.mc[0].clone(),
            self.p.mc[1].clone(),
        ];
        v.extend(inner);
        b.alloc_py(
            &[
                LINEAR,
                op(
                    "linear",
                    "at::Tensor const&, at::Tensor const&, std::optional<at::Tensor> const&",
                    false,
                ),
            ],
            "linear",
            &v,
        )
    }

    /// Autocast's low-precision copy of a linear layer's weight.
    fn cast_w(&self, b: &mut Builder, inner: Vec<Py>) -> u32 {
        let mut v = vec![
            self.linear_py.clone(),
            self.p.mc[0].clone(),
            self.p.mc[1].clone(),
        ];
        v.extend(inner);
        let autocast = op(
            "_autocast_to_reduced_precision",
            "at::Tensor const&, bool, bool, c10::ScalarType, c10::ScalarType",
            false,
        );
        b.alloc_py(
            &[TO_COPY, op("to_dtype", T1, false), autocast],
            "linear",
            &v,
        )
    }

    /// An allocation by `nn.LayerNorm` under `inner`.
    fn lnorm(&self, b: &mut Builder, inner: Vec<Py>) -> u32 {
        let mut v = vec![
            py("layer_norm", &self.functional, 2900),
            self.ln_py.clone(),
            self.p.mc[0].clone(),
            self.p.mc[1].clone(),
        ];
        v.extend(inner);
        b.alloc_py(&[LAYER_NORM], "layer_norm", &v)
    }

    /// `torch.cuda.empty_cache()` called under `inner`.
    fn empty_cache(&self, b: &mut Builder, inner: Vec<Py>) -> u32 {
        let memory = self.env.torch("cuda/memory.py");
        let mut v = vec![py("empty_cache", &memory, 192)];
        v.extend(inner);
        b.empty_cache(&v)
    }
}

fn build_sites(b: &mut Builder, env: &Env, rng: &mut Rng) -> Sites {
    let c = SiteCtx::new(env, rng);
    let mut s = Sites::default();
    setup_sites(&c, b, rng, &mut s);
    forward_sites(&c, b, &mut s);
    let backward = backward_sites(&c, b, &mut s);
    optimizer_sites(&c, b, &mut s);
    step_extra_sites(&c, b, &mut s, &backward);
    let gl = inference_sites(&c, b, rng, &mut s);
    graph_and_eval_sites(&c, b, rng, &mut s, gl);
    s
}

/// Moving the parameters to the device (`model.to()`) and the batch (`get_batch`).
fn setup_sites(c: &SiteCtx, b: &mut Builder, rng: &mut Rng, s: &mut Sites) {
    let env = c.env;
    let train = &c.train;
    let p = &c.p;
    let t = &c.t;
    let mut l = |lo: u64, hi: u64| rng.range(lo, hi) as i64;
    let apply = env.torch("nn/modules/module.py");
    for depth in 0..3 {
        let mut v = vec![py("convert", &apply, 1326)];
        for _ in 0..=depth {
            v.push(py("_apply", &apply, 903));
        }
        v.push(py("_apply", &apply, 930));
        v.push(py("to", &apply, 1340));
        v.extend(p.in_step(t[1].line - l(30, 60), &[py("main", train, 0), t[2].clone()]));
        s.param_init[depth] = b.alloc_py(&[TO_COPY, op("to_dtype_layout", T1, false)], "to", &v);
    }
    let data = env.user("data.py");
    let get_batch = |line: i64| {
        let mut v = vec![py("get_batch", &data, line)];
        v.extend(p.in_step(c.step_fwd - 3, t));
        v
    };
    s.data_ids = b.alloc_py(&[TO_COPY], "to", &get_batch(l(20, 40)));
    s.data_labels = b.alloc_py(&[TO_COPY], "to", &get_batch(l(41, 50)));
    s.free_step = b.free_py(&p.in_step(c.step_zero + 2, t));
}

/// The training forward pass: embedding, a block (attention and MLP), head, loss.
fn forward_sites(c: &SiteCtx, b: &mut Builder, s: &mut Sites) {
    let p = &c.p;
    let t = &c.t;
    let lin = |b: &mut Builder, inner: Vec<Py>| c.lin(b, inner);
    let cast_w = |b: &mut Builder, inner: Vec<Py>| c.cast_w(b, inner);
    let lnorm = |b: &mut Builder, inner: Vec<Py>| c.lnorm(b, inner);
    s.fwd_embed = {
        let mut v = vec![
            py("embedding", &c.functional, 2551),
            c.emb_py.clone(),
            p.mc[0].clone(),
            p.mc[1].clone(),
        ];
        v.extend(p.in_model(c.m_emb, c.step_fwd, t));
        b.alloc_py(
            &[
                EMBEDDING,
                op(
                    "index_select",
                    "at::Tensor const&, long, at::Tensor const&",
                    false,
                ),
            ],
            "embedding",
            &v,
        )
    };
    s.fwd_ln1 = lnorm(b, p.in_block(c.b_ln1, c.step_fwd, t));
    s.fwd_qkv = lin(b, p.in_attn(c.a_qkv, c.step_fwd, t));
    s.fwd_cast_w[0] = cast_w(b, p.in_attn(c.a_qkv, c.step_fwd, t));
    s.fwd_sdpa = b.alloc_py(
        &[
            SDPA,
            op(
                "scaled_dot_product_attention",
                "at::Tensor const&, at::Tensor const&, at::Tensor const&",
                false,
            ),
        ],
        "scaled_dot_product_attention",
        &p.in_attn(c.a_sdpa, c.step_fwd, t),
    );
    s.fwd_o = lin(b, p.in_attn(c.a_o, c.step_fwd, t));
    s.fwd_cast_w[1] = cast_w(b, p.in_attn(c.a_o, c.step_fwd, t));
    s.fwd_add1 = b.alloc_py(&[ADD], "add", &p.in_block(c.b_add1, c.step_fwd, t));
    s.fwd_ln2 = lnorm(b, p.in_block(c.b_ln2, c.step_fwd, t));
    s.fwd_fc1 = lin(b, p.in_mlp(c.m_fc1, c.step_fwd, t));
    s.fwd_cast_w[2] = cast_w(b, p.in_mlp(c.m_fc1, c.step_fwd, t));
    s.fwd_gelu = b.alloc_py(&[GELU], "gelu", &p.in_mlp(c.m_gelu, c.step_fwd, t));
    s.fwd_fc2 = lin(b, p.in_mlp(c.m_fc2, c.step_fwd, t));
    s.fwd_cast_w[3] = cast_w(b, p.in_mlp(c.m_fc2, c.step_fwd, t));
    s.fwd_add2 = b.alloc_py(&[ADD], "add", &p.in_block(c.b_add2, c.step_fwd, t));
    s.fwd_lnf = lnorm(b, p.in_model(c.m_lnf, c.step_fwd, t));
    s.fwd_head = lin(b, p.in_model(c.m_head, c.step_fwd, t));
    s.fwd_cast_w[4] = cast_w(b, p.in_model(c.m_head, c.step_fwd, t));
    let ce = |line: i64| {
        let mut v = vec![py("cross_entropy", &c.functional, 3479)];
        v.extend(p.in_step(line, t));
        v
    };
    s.fwd_cast = b.alloc_py(&[TO_COPY], "float", &ce(c.step_fwd + 1));
    s.fwd_logsoftmax = b.alloc_py(
        &[
            LOG_SOFTMAX,
            op(
                "log_softmax_int",
                "at::Tensor const&, long, std::optional<c10::ScalarType>",
                false,
            ),
        ],
        "cross_entropy_loss",
        &ce(c.step_fwd + 1),
    );
    s.fwd_loss = b.alloc_py(&[NLL, op("nll_loss_nd", "at::Tensor const&, at::Tensor const&, std::optional<at::Tensor> const&, long, c10::SymInt", false)], "cross_entropy_loss", &ce(c.step_fwd + 1));
    s.free_block_attn = b.free_py(&p.in_block(c.b_add1, c.step_fwd, t));
    s.free_block_mlp = b.free_py(&p.in_block(c.b_add2, c.step_fwd, t));
    s.free_loss_fn = b.free_py(&ce(c.step_fwd + 1));
}

/// The backward pass: the autograd engine's allocations and the frees of saved tensors. Returns the stack of `loss.backward()`.
fn backward_sites(c: &SiteCtx, b: &mut Builder, s: &mut Sites) -> Vec<Py> {
    let env = c.env;
    let p = &c.p;
    let t = &c.t;
    let autograd = env.torch("autograd/__init__.py");
    let backward = {
        let mut v = vec![
            py("_engine_run_backward", &env.torch("autograd/graph.py"), 825),
            py("backward", &autograd, 347),
            py("backward", &env.torch("_tensor.py"), 581),
        ];
        v.extend(p.in_step(c.step_bwd, t));
        v
    };
    s.bwd_ones = b.alloc_py(
        &[op("ones_like", T1, false)],
        "_engine_run_backward",
        &backward,
    );
    s.bwd_nll = b.alloc_engine(&[op("nll_loss_backward", T2, true)], "NllLossBackward0");
    s.bwd_logsoftmax = b.alloc_engine(
        &[op("_log_softmax_backward_data", T2, true)],
        "LogSoftmaxBackward0",
    );
    s.bwd_cast = b.alloc_engine(&[TO_COPY], "ToCopyBackward0");
    s.bwd_mm = b.alloc_engine(&[MM], "MmBackward0");
    s.bwd_addmm_in = b.alloc_engine(&[MM], "AddmmBackward0");
    s.bwd_addmm_w = b.alloc_engine(&[MM, op("mm_mat2_backward", T2, false)], "AddmmBackward0");
    s.bwd_addmm_b = b.alloc_engine(
        &[op(
            "sum_dim_IntList",
            "at::Tensor const&, c10::OptionalArrayRef<long>, bool, std::optional<c10::ScalarType>",
            true,
        )],
        "AddmmBackward0",
    );
    s.bwd_ln_in = b.alloc_engine(
        &[op("native_layer_norm_backward", T2, false)],
        "NativeLayerNormBackward0",
    );
    s.bwd_ln_w = b.alloc_engine(
        &[op("native_layer_norm_backward", T2, false), EMPTY],
        "NativeLayerNormBackward0",
    );
    s.bwd_gelu = b.alloc_engine(&[op("gelu_backward", T2, true)], "GeluBackward0");
    s.bwd_sdpa = b.alloc_engine(
        &[
            op("_flash_attention_backward", T2, false),
            op("_scaled_dot_product_flash_attention_backward", T2, false),
        ],
        "ScaledDotProductFlashAttentionBackward0",
    );
    s.bwd_cat = b.alloc_engine(&[CAT], "SplitBackward0");
    s.bwd_accum = b.alloc_accumulate();
    s.bwd_embed = b.alloc_engine(
        &[
            op("embedding_dense_backward", T2, false),
            op("embedding_backward", T2, false),
        ],
        "EmbeddingBackward0",
    );
    s.free_saved_addmm = b.free_saved("AddmmBackward0");
    s.free_saved_mm = b.free_saved("MmBackward0");
    s.free_saved_ln = b.free_saved("NativeLayerNormBackward0");
    s.free_saved_gelu = b.free_saved("GeluBackward0");
    s.free_saved_sdpa = b.free_saved("ScaledDotProductFlashAttentionBackward0");
    s.free_saved_logsoftmax = b.free_saved("LogSoftmaxBackward0");
    s.free_saved_nll = b.free_saved("NllLossBackward0");
    s.free_engine = b.free_engine_temp();
    backward
}

/// AdamW (its states and foreach temporaries) and `zero_grad`.
fn optimizer_sites(c: &SiteCtx, b: &mut Builder, s: &mut Sites) {
    let env = c.env;
    let p = &c.p;
    let t = &c.t;
    let adam = env.torch("optim/adamw.py");
    let optim = env.torch("optim/optimizer.py");
    let opt = |inner: Vec<Py>, line: i64| {
        let mut v = inner;
        v.extend([py("_use_grad", &optim, 79), py("wrapper", &optim, 487)]);
        v.extend(p.in_step(line, t));
        v
    };
    s.opt_init = b.alloc_py(
        &[ZEROS_LIKE],
        "zeros_like",
        &opt(
            vec![py("_init_group", &adam, 170), py("step", &adam, 209)],
            c.step_opt,
        ),
    );
    let multi = vec![
        py("_multi_tensor_adamw", &adam, 486),
        py("_fused_or_foreach", &adam, 745),
        py("adamw", &adam, 811),
        py("step", &adam, 230),
    ];
    s.opt_foreach = b.alloc_py(
        &[FOREACH_SQRT],
        "_foreach_sqrt",
        &opt(multi.clone(), c.step_opt),
    );
    let mut multi_free = multi;
    if let Some(f) = multi_free.first_mut() {
        f.line += 12;
    }
    s.free_opt_tmp = b.free_py(&opt(multi_free, c.step_opt));
    s.free_zero_grad = b.free_py(&{
        let mut v = vec![py("zero_grad", &optim, 980)];
        v.extend(p.in_step(c.step_zero, t));
        v
    });
}

/// FSDP's gradient reduce-scatter (under `backward`), gradient clipping, a leaking clone, `empty_cache` after a step.
fn step_extra_sites(c: &SiteCtx, b: &mut Builder, s: &mut Sites, backward: &[Py]) {
    let env = c.env;
    let p = &c.p;
    let t = &c.t;
    let empty_cache = |b: &mut Builder, inner: Vec<Py>| c.empty_cache(b, inner);
    let coll = env.torch("distributed/fsdp/_fully_shard/_fsdp_collectives.py");
    let post = env.torch("distributed/fsdp/_fully_shard/_fsdp_param_group.py");
    let reduce = |line: i64| {
        let mut v = vec![
            py("foreach_reduce", &coll, line),
            py("post_backward", &post, 478),
            py("_backward_hook", &post, 590),
        ];
        v.extend(backward.to_vec());
        v
    };
    s.comm_bucket = b.alloc_py(&[CAT], "cat", &reduce(352));
    s.comm_out = b.alloc_py(&[EMPTY], "empty", &reduce(368));
    s.free_comm = b.free_py(&reduce(401));
    let clip = env.torch("nn/utils/clip_grad.py");
    let clip_frames = |line: i64| {
        let mut v = vec![
            py("_get_total_norm", &clip, line),
            py("_no_grad_wrapper", &clip, 35),
            py("clip_grad_norm_", &clip, 217),
            py("_no_grad_wrapper", &clip, 35),
        ];
        v.extend(p.in_step(c.step_bwd + 1, t));
        v
    };
    s.clip_norms = b.alloc_py(
        &[op(
            "_foreach_norm_Scalar",
            "c10::ArrayRef<at::Tensor>, c10::Scalar const&, std::optional<c10::ScalarType>",
            false,
        )],
        "_foreach_norm",
        &clip_frames(91),
    );
    s.clip_stack = b.alloc_py(
        &[CAT, op("stack", "c10::ArrayRef<at::Tensor>, long", false)],
        "stack",
        &clip_frames(94),
    );
    s.clip_total = b.alloc_py(&[op("linalg_vector_norm", "at::Tensor const&, c10::Scalar const&, c10::OptionalArrayRef<long>, bool, std::optional<c10::ScalarType>", true)], "linalg_vector_norm", &clip_frames(94));
    s.free_clip = b.free_py(&clip_frames(96));
    s.leak_clone = b.alloc_py(&[CLONE], "clone", &p.in_step(c.step_zero + 1, t));
    s.empty_cache_train = empty_cache(b, p.in_step(c.step_zero + 3, t));
}

/// Inference: generate() with a growing KV cache (torch.cat per token). Returns the line in
/// generate() of its loop.
fn inference_sites(c: &SiteCtx, b: &mut Builder, rng: &mut Rng, s: &mut Sites) -> i64 {
    let p = &c.p;
    let g = &c.g;
    let lin = |b: &mut Builder, inner: Vec<Py>| c.lin(b, inner);
    let lnorm = |b: &mut Builder, inner: Vec<Py>| c.lnorm(b, inner);
    let mut l = |lo: u64, hi: u64| rng.range(lo, hi) as i64;
    // Inference: generate() with a growing KV cache (torch.cat per token).
    let gl = l(40, 90);
    s.inf_ids = b.alloc_py(&[TO_COPY], "to", &p.in_step(gl - 5, g));
    s.inf_embed = {
        let mut v = vec![
            py("embedding", &c.functional, 2551),
            c.emb_py.clone(),
            p.mc[0].clone(),
            p.mc[1].clone(),
        ];
        v.extend(p.in_model(c.m_emb, gl, g));
        b.alloc_py(&[EMBEDDING], "embedding", &v)
    };
    s.inf_ln = lnorm(b, p.in_block(c.b_ln1, gl, g));
    s.inf_qkv = lin(b, p.in_attn(c.a_qkv, gl, g));
    s.inf_kcat = b.alloc_py(&[CAT], "cat", &p.in_attn(c.a_qkv + 3, gl, g));
    s.inf_vcat = b.alloc_py(&[CAT], "cat", &p.in_attn(c.a_qkv + 4, gl, g));
    s.inf_sdpa = b.alloc_py(
        &[SDPA],
        "scaled_dot_product_attention",
        &p.in_attn(c.a_sdpa, gl, g),
    );
    s.inf_o = lin(b, p.in_attn(c.a_o, gl, g));
    s.inf_add = b.alloc_py(&[ADD], "add", &p.in_block(c.b_add1, gl, g));
    s.inf_fc1 = lin(b, p.in_mlp(c.m_fc1, gl, g));
    s.inf_gelu = b.alloc_py(&[GELU], "gelu", &p.in_mlp(c.m_gelu, gl, g));
    s.inf_fc2 = lin(b, p.in_mlp(c.m_fc2, gl, g));
    s.inf_lnf = lnorm(b, p.in_model(c.m_lnf, gl, g));
    s.inf_head = lin(b, p.in_model(c.m_head, gl, g));
    s.inf_cast = b.alloc_py(&[TO_COPY], "float", &p.in_step(gl + 2, g));
    s.inf_softmax = b.alloc_py(&[SOFTMAX], "softmax", &p.in_step(gl + 3, g));
    s.inf_sample = b.alloc_py(&[MULTINOMIAL], "multinomial", &p.in_step(gl + 4, g));
    s.inf_ids_cat = b.alloc_py(&[CAT], "cat", &p.in_step(gl + 6, g));
    s.inf_free_layer = b.free_py(&p.in_block(c.b_add2, gl, g));
    s.inf_free_kv = b.free_py(&p.in_attn(c.a_qkv + 4, gl, g));
    s.inf_free_gen = b.free_py(&p.in_step(gl + 8, g));
    s.inf_free_step = b.free_py(&p.in_step(gl + 7, g));
    gl
}

/// A CUDA graph capture during warm-up, and `evaluate()` between training steps.
fn graph_and_eval_sites(c: &SiteCtx, b: &mut Builder, rng: &mut Rng, s: &mut Sites, gl: i64) {
    let train = &c.train;
    let infer = &c.infer;
    let p = &c.p;
    let t = &c.t;
    let g = &c.g;
    let empty_cache = |b: &mut Builder, inner: Vec<Py>| c.empty_cache(b, inner);
    let mut l = |lo: u64, hi: u64| rng.range(lo, hi) as i64;
    let cap_top = vec![
        py("capture_decode", infer, 0),
        py("warmup", infer, l(36, 39)),
        g[2].clone(),
        g[3].clone(),
    ];
    let cap_line = l(20, 35);
    s.graph_static = b.alloc_py(&[EMPTY], "empty", &p.in_step(cap_line, &cap_top));
    s.graph_tmp = b.alloc_py(
        &[SDPA],
        "scaled_dot_product_attention",
        &p.in_attn(c.a_sdpa, cap_line + 2, &cap_top),
    );
    s.graph_free = b.free_py(&p.in_attn(c.a_sdpa, cap_line + 2, &cap_top));
    s.empty_cache_infer = empty_cache(b, p.in_step(gl + 9, g));
    // evaluate(), between train_step and main in train.py; its lines follow from lines drawn
    // above (no draw here, so the other workloads' bytes do not depend on it).
    let e = c.step_zero + 12 + t[1].line % 17;
    let et = vec![
        py("evaluate", train, 0),
        py("main", train, t[1].line + 3),
        t[2].clone(),
    ];
    s.eval_empty_cache = empty_cache(b, p.in_step(e + 1, &et));
    s.eval_buf = b.alloc_py(&[EMPTY], "empty", &p.in_step(e + 3, &et));
    s.eval_free_buf = b.free_py(&p.in_step(e + 4, &et));
    s.eval_ids = b.alloc_py(&[TO_COPY], "to", &p.in_step(e + 6, &et));
    s.eval_out = b.alloc_py(
        &[TO_COPY, op("to_dtype", T1, false)],
        "float",
        &p.in_step(e + 7, &et),
    );
    s.eval_free_ids = b.free_py(&p.in_step(e + 8, &et));
    s.eval_free_out = b.free_py(&p.in_step(e + 9, &et));
    s.eval_cat = b.alloc_py(&[CAT], "cat", &p.in_step(e + 11, &et));
}
