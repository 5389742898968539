//! memlens-synth: snapshots at any size without a GPU. A simulated PyTorch CUDA caching
//! allocator ([`alloc`]) runs seeded workloads ([`workload`]) of a simulated program
//! ([`program`], [`stacks`]) and the result is streamed as a pickle shaped like
//! `torch.cuda.memory._dump_snapshot` output ([`emit`]). The same [`Config`] always gives the
//! same bytes; memory use does not grow with the number of events.

pub mod alloc;
pub mod emit;
pub mod program;
pub mod rng;
pub mod stacks;
pub mod workload;

use std::fmt;
use std::io::Write;
use std::str::FromStr;

/// What the simulated program does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    /// A transformer training loop: parameters, gradients, Adam states, activations saved in
    /// forward and freed in backward, `ProfilerStep#N` annotations.
    Training,
    /// `generate()` with a KV cache grown by `torch.cat`, after a CUDA graph capture.
    Inference,
    /// Training with a different batch and sequence length every step and periodic `empty_cache`.
    Fragmenting,
    /// Training that keeps one tensor per step.
    Leak,
    /// Training whose last request does not fit: the trace ends with `segment_free`s and `oom`.
    Oom,
    /// Training, then an evaluation loop that splits the cached large segments between kept
    /// outputs of varying sizes and dies on a request larger than every free block while the
    /// cached free memory would hold it.
    OomFragmentation,
}

impl Workload {
    pub const ALL: [Workload; 6] = [
        Workload::Training,
        Workload::Inference,
        Workload::Fragmenting,
        Workload::Leak,
        Workload::Oom,
        Workload::OomFragmentation,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Training => "training",
            Workload::Inference => "inference",
            Workload::Fragmenting => "fragmenting",
            Workload::Leak => "leak",
            Workload::Oom => "oom",
            Workload::OomFragmentation => "oom-fragmentation",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Workload {
    type Err = SynthError;
    fn from_str(s: &str) -> Result<Self, SynthError> {
        Workload::ALL
            .into_iter()
            .find(|w| w.name() == s)
            .ok_or_else(|| SynthError::InvalidConfig(format!("unknown workload {s:?}")))
    }
}

/// Everything that decides the output bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub workload: Workload,
    /// Trace entries to simulate, over all devices (each device stops at the end of the
    /// operation that reaches its share).
    pub events: u64,
    pub seed: u64,
    pub devices: u32,
    /// Pickle protocol, 2 to 5 (torch on Python ≤ 3.13 writes 4).
    pub protocol: u8,
    /// `_record_memory_history(max_entries=...)`: keep only the newest entries per device.
    pub max_entries: Option<u64>,
    pub expandable_segments: bool,
    /// `PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:N`.
    pub max_split_size_mb: Option<u64>,
    /// Total memory of each simulated device.
    pub device_memory_mib: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            workload: Workload::Training,
            events: 10_000,
            seed: 0,
            devices: 1,
            protocol: 4,
            max_entries: None,
            expandable_segments: false,
            max_split_size_mb: None,
            device_memory_mib: 81_559,
        }
    }
}

pub const MAX_DEVICES: u32 = 16;

impl Config {
    pub fn validate(&self) -> Result<(), SynthError> {
        let bad = |m: &str| Err(SynthError::InvalidConfig(m.to_string()));
        if self.events == 0 {
            return bad("--events must be at least 1");
        }
        if self.devices == 0 || self.devices > MAX_DEVICES {
            return bad("--devices must be 1 to 16");
        }
        if !(2..=5).contains(&self.protocol) {
            return bad("--protocol must be 2, 3, 4 or 5");
        }
        if self.max_entries == Some(0) {
            return bad("--max-entries must be at least 1");
        }
        if self.device_memory_mib < 1024 || self.device_memory_mib > (1 << 24) {
            return bad("--device-memory-mib must be 1024 to 16777216");
        }
        if self
            .max_split_size_mb
            .is_some_and(|m| !(20..=(1 << 24)).contains(&m))
        {
            return bad("--max-split-size-mb must be at least 20 (torch's minimum)");
        }
        Ok(())
    }
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub bytes_written: u64,
    /// Entries each device recorded before its snapshot.
    pub entries_simulated: Vec<u64>,
    /// Entries each device's trace holds (after `max_entries`).
    pub entries_written: Vec<u64>,
    pub segments: u64,
    pub annotations: u64,
    pub ended_in_oom: bool,
    /// Distinct stacks the program knows (those the run reaches are written).
    pub distinct_stacks: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    #[error("{0}")]
    InvalidConfig(String),
    #[error("cannot write the snapshot: {0}")]
    Io(#[from] std::io::Error),
}

/// Simulates `cfg` and streams the snapshot pickle to `out`.
pub fn write_snapshot<W: Write>(cfg: &Config, out: W) -> Result<Summary, SynthError> {
    cfg.validate()?;
    let prog = program::Program::new(cfg);
    emit::write(&prog, out)
}
