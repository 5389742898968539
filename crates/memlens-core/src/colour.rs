//! What a timeline's bands are coloured by (`#colour=` in the viewer's URL): the element order
//! as upstream (`stack`), size, allocation order, stream, pool, the alloc entry's
//! `user_metadata`, or the ledger class ([`crate::analysis::ledger`]). A [`Colouring`] gives
//! every element of a layout a palette index ([`crate::layout::paint`]: the first
//! [`CATEGORICAL_LEN`] are tableau10, then a ramp of [`RAMP_LEN`] from dark to light) and a
//! legend naming what each index stands for; the painter only maps indices to colours.
//!
//! Categorical modes give the nine values holding the most bytes (summed over the elements) a
//! colour each and the rest one shared "other" colour; ramps split sizes on a log scale and
//! allocation order linearly over the trace.

use crate::analysis::ledger::{Class, Classifier};
use crate::layout::axis::format_bytes;
use crate::layout::paint::{CATEGORICAL_LEN, RAMP_LEN};
use crate::layout::{ElementKind, Elements, TimelineLayout};
use crate::model::Snapshot;
use crate::replay::{Allocation, Origin};
use crate::trace::StrId;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// What the bands are coloured by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum ColourBy {
    /// Element number mod 10, in stack order (upstream's colouring).
    #[default]
    Stack,
    Size,
    /// Allocation order (older = darker).
    Age,
    Stream,
    Pool,
    /// The alloc entry's `user_metadata`.
    Metadata,
    /// The ledger class.
    Ledger,
}

impl ColourBy {
    pub const ALL: [ColourBy; 7] = [
        ColourBy::Stack,
        ColourBy::Size,
        ColourBy::Age,
        ColourBy::Stream,
        ColourBy::Pool,
        ColourBy::Metadata,
        ColourBy::Ledger,
    ];

    /// The URL hash value.
    pub fn key(self) -> &'static str {
        match self {
            ColourBy::Stack => "stack",
            ColourBy::Size => "size",
            ColourBy::Age => "age",
            ColourBy::Stream => "stream",
            ColourBy::Pool => "pool",
            ColourBy::Metadata => "metadata",
            ColourBy::Ledger => "ledger",
        }
    }

    pub fn from_key(s: &str) -> Option<ColourBy> {
        ColourBy::ALL.into_iter().find(|c| c.key() == s)
    }

    /// The menu's words.
    pub fn title(self) -> &'static str {
        match self {
            ColourBy::Stack => "stack order (upstream)",
            ColourBy::Size => "size",
            ColourBy::Age => "allocation order",
            ColourBy::Stream => "stream",
            ColourBy::Pool => "pool",
            ColourBy::Metadata => "user_metadata",
            ColourBy::Ledger => "ledger class",
        }
    }
}

/// One legend line: palette index and what it stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LegendEntry {
    pub colour: u8,
    pub label: String,
}

/// A palette index per element of a layout, and the legend.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Colouring {
    pub index: Vec<u8>,
    pub legend: Vec<LegendEntry>,
}

crate::impl_columns! {
    Colouring {
        columns [index];
        header [legend];
    }
}

/// The colouring of `layout` (of `device` in `snap`) by `by`.
pub fn colour(snap: &Snapshot, device: u32, layout: &TimelineLayout, by: ColourBy) -> Colouring {
    let el = &layout.elements;
    match by {
        ColourBy::Stack => Colouring {
            index: (0..el.len())
                .map(|e| (e % CATEGORICAL_LEN as usize) as u8)
                .collect(),
            legend: vec![LegendEntry {
                colour: 0,
                label: "each allocation its own colour, 10 in turn (as upstream)".into(),
            }],
        },
        ColourBy::Size => by_size(el),
        ColourBy::Age => by_age(el, layout.n_events),
        ColourBy::Stream => categorical(
            el,
            |e| el.stream.get(e).copied().unwrap_or(0),
            |s| match s {
                0 => "default stream".into(),
                s => format!("stream {s:#x}"),
            },
        ),
        ColourBy::Pool => categorical(
            el,
            |e| el.pool.get(e),
            |p| match p {
                Some(i) => match layout.pools.get(i as usize) {
                    Some(&(0, 0)) => "default pool".into(),
                    Some(&(a, b)) => format!("private pool ({a}, {b})"),
                    None => "pool unknown".into(),
                },
                None => "pool unknown".into(),
            },
        ),
        ColourBy::Metadata => {
            let start = snap.device_rows(device).start as usize;
            let meta = |e: usize| {
                el.alloc_row
                    .get(e)
                    .and_then(|r| snap.trace.user_metadata.get(start + r as usize).copied())
                    .filter(|&m| m != StrId::EMPTY)
            };
            categorical(el, meta, |m| match m {
                Some(id) => shorten(snap.str(id), 48),
                None => "no user_metadata".into(),
            })
        }
        ColourBy::Ledger => by_ledger(snap, device, el),
    }
}

fn shorten(s: &str, max_chars: usize) -> String {
    if s.chars().count() <= max_chars {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max_chars - 1).collect();
    t.push('…');
    t
}

/// The nine keys holding the most bytes get a colour each, the rest one shared colour.
fn categorical<K: Copy + Eq + std::hash::Hash + Ord>(
    el: &Elements,
    key: impl Fn(usize) -> K,
    label: impl Fn(K) -> String,
) -> Colouring {
    let keys: Vec<K> = (0..el.len()).map(&key).collect();
    let mut bytes: HashMap<K, u64> = HashMap::new();
    for (e, k) in keys.iter().enumerate() {
        *bytes.entry(*k).or_default() += el.size_bytes.get(e).copied().unwrap_or(0);
    }
    let mut ranked: Vec<(K, u64)> = bytes.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let n = CATEGORICAL_LEN as usize;
    let own = if ranked.len() <= n { n } else { n - 1 };
    let slot: HashMap<K, u8> = ranked
        .iter()
        .take(own)
        .enumerate()
        .map(|(i, (k, _))| (*k, i as u8))
        .collect();
    let other = (n - 1) as u8;
    let mut legend: Vec<LegendEntry> = ranked
        .iter()
        .take(own)
        .enumerate()
        .map(|(i, (k, _))| LegendEntry {
            colour: i as u8,
            label: label(*k),
        })
        .collect();
    if ranked.len() > own {
        legend.push(LegendEntry {
            colour: other,
            label: format!("{} others", ranked.len() - own),
        });
    }
    Colouring {
        index: keys
            .iter()
            .map(|k| slot.get(k).copied().unwrap_or(other))
            .collect(),
        legend,
    }
}

/// A ramp step (palette index) for `v` in `[lo, hi]`.
fn ramp(v: f64, lo: f64, hi: f64) -> u8 {
    let steps = RAMP_LEN as f64;
    let t = if hi > lo { (v - lo) / (hi - lo) } else { 0.0 };
    CATEGORICAL_LEN + ((t * steps).floor().clamp(0.0, steps - 1.0) as u8)
}

/// Sizes on a log scale from the smallest to the largest element, dark to light.
fn by_size(el: &Elements) -> Colouring {
    let log = |b: u64| (b.max(1) as f64).log2();
    let lo = el.size_bytes.iter().copied().min().map(log).unwrap_or(0.0);
    let hi = el.size_bytes.iter().copied().max().map(log).unwrap_or(0.0);
    let index = el
        .size_bytes
        .iter()
        .map(|&b| ramp(log(b), lo, hi))
        .collect();
    let step = (hi - lo) / RAMP_LEN as f64;
    let legend = ramp_legend(|i| {
        let a = 2f64.powf(lo + step * i as f64);
        format!("≥ {}", format_bytes(a.round()))
    });
    Colouring { index, legend }
}

/// Allocation order over the trace (event `i` is at `x = i + 1`), earliest dark to latest
/// light; what was allocated before the trace is the darkest.
fn by_age(el: &Elements, n_events: u32) -> Colouring {
    let n = n_events as f64;
    let index = el
        .start_x
        .iter()
        .map(|&x| ramp(x as f64 - 1.0, 0.0, n))
        .collect();
    let step = n / RAMP_LEN as f64;
    let legend = ramp_legend(|i| {
        let a = (step * i as f64).ceil() as u64;
        format!("allocated from event {a}")
    });
    Colouring { index, legend }
}

fn ramp_legend(label: impl Fn(u8) -> String) -> Vec<LegendEntry> {
    (0..RAMP_LEN)
        .map(|i| LegendEntry {
            colour: CATEGORICAL_LEN + i,
            label: label(i),
        })
        .collect()
}

/// The ledger class of each element, coloured in [`Class::ALL`] order.
fn by_ledger(snap: &Snapshot, device: u32, el: &Elements) -> Colouring {
    let mut classifier = Classifier::new(snap, device);
    let index = (0..el.len())
        .map(|e| {
            let class = classifier.classify(&allocation_of(el, e)).class();
            Class::ALL.iter().position(|&c| c == class).unwrap_or(0) as u8
        })
        .collect();
    let legend = Class::ALL
        .iter()
        .enumerate()
        .map(|(i, c)| LegendEntry {
            colour: i as u8,
            label: c.name().replace('_', " "),
        })
        .collect();
    Colouring { index, legend }
}

/// The allocation an element draws (what the ledger's classifier reads).
fn allocation_of(el: &Elements, e: usize) -> Allocation {
    let origin = match el.kind.get(e) {
        Some(&ElementKind::Allocation(o)) => o,
        _ => Origin::Traced,
    };
    Allocation {
        addr: el.addr.get(e).copied().unwrap_or(0),
        version: el.version.get(e).copied().unwrap_or(0),
        size_bytes: el.size_bytes.get(e).copied().unwrap_or(0),
        stream: el.stream.get(e).copied().unwrap_or(0),
        stack: el.stack.get(e).copied().unwrap_or_default(),
        alloc_event: el.alloc_row.get(e),
        free_requested_event: None,
        free_event: el.free_row.get(e),
        origin,
    }
}

#[cfg(test)]
mod tests;
