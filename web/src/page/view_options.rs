//! The timelines' display options — what the bands are coloured by, the reserved and capacity
//! lines, which bands are drawn, whether the frame search is a regular expression — and how
//! they are written in the URL hash (`colour=size&reserved=1&cap=H100_80_GB&hide=pre,never&min=1048576&re=1`;
//! `cap` is `trace`, a GPU's name or bytes).

use memlens_core::colour::ColourBy;
use memlens_core::layout::lines::GPUS;
use memlens_core::layout::BandFilter;

/// Where the capacity line comes from. Off by default: a capacity far above the peak squeezes
/// the bands into the bottom of the plot, so it is shown when asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Capacity {
    #[default]
    Off,
    /// From the trace's `oom` entries (no line when it has none).
    FromTrace,
    /// One of [`GPUS`], by index.
    Gpu(usize),
    /// Typed in.
    Bytes(u64),
}

impl Capacity {
    /// The hash value (`None`: the default, not written).
    fn key(self) -> Option<String> {
        match self {
            Capacity::Off => None,
            Capacity::FromTrace => Some("trace".into()),
            Capacity::Gpu(i) => GPUS.get(i).map(|g| g.0.replace(' ', "_")),
            Capacity::Bytes(b) => Some(b.to_string()),
        }
    }
    fn from_key(s: &str) -> Capacity {
        if s == "trace" {
            return Capacity::FromTrace;
        }
        if let Ok(b) = s.parse::<u64>() {
            return Capacity::Bytes(b);
        }
        let name = s.replace('_', " ");
        GPUS.iter()
            .position(|g| g.0 == name)
            .map_or(Capacity::Off, Capacity::Gpu)
    }
}

/// The timelines' display options (one value in the page's state).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimelineOptions {
    pub colour_by: ColourBy,
    /// Reserved memory over time drawn over the bands.
    pub reserved_line: bool,
    pub capacity: Capacity,
    pub filter: BandFilter,
    /// The frame search box holds a regular expression.
    pub regex: bool,
}

impl TimelineOptions {
    /// Reads one `key=value` of the hash; `false` if the key is not one of these options.
    pub fn parse_pair(&mut self, k: &str, v: &str) -> bool {
        match k {
            "colour" => self.colour_by = ColourBy::from_key(v).unwrap_or_default(),
            "reserved" => self.reserved_line = v == "1",
            "cap" => self.capacity = Capacity::from_key(v),
            "hide" => {
                let parts: Vec<&str> = v.split(',').collect();
                self.filter.hide_before_trace = parts.contains(&"pre");
                self.filter.hide_never_freed = parts.contains(&"never");
            }
            "min" => self.filter.min_size_bytes = v.parse().unwrap_or(0),
            "re" => self.regex = v == "1",
            _ => return false,
        }
        true
    }

    /// The non-default options as hash parts.
    pub fn hash_parts(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.colour_by != ColourBy::default() {
            out.push(format!("colour={}", self.colour_by.key()));
        }
        if self.reserved_line {
            out.push("reserved=1".into());
        }
        if let Some(c) = self.capacity.key() {
            out.push(format!("cap={c}"));
        }
        let f = &self.filter;
        let hide: Vec<&str> = [(f.hide_before_trace, "pre"), (f.hide_never_freed, "never")]
            .into_iter()
            .filter_map(|(on, k)| on.then_some(k))
            .collect();
        if !hide.is_empty() {
            out.push(format!("hide={}", hide.join(",")));
        }
        if f.min_size_bytes > 0 {
            out.push(format!("min={}", f.min_size_bytes));
        }
        if self.regex {
            out.push("re=1".into());
        }
        out
    }
}
