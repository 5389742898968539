//! The one string table: every string of a snapshot (keys, filenames, function names, metadata)
//! is stored once and named by a [`StrId`].

use rustc_hash::FxHashMap;
use std::sync::Arc;

/// Index into a [`StringTable`]. `StrId::EMPTY` is always `""`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct StrId(pub u32);

impl StrId {
    pub const EMPTY: StrId = StrId(0);
}

/// Interning string table.
#[derive(Debug, Clone)]
pub struct StringTable {
    strings: Vec<Arc<str>>,
    index: FxHashMap<Arc<str>, StrId>,
}

impl Default for StringTable {
    fn default() -> Self {
        let mut t = StringTable {
            strings: Vec::new(),
            index: FxHashMap::default(),
        };
        t.intern("");
        t
    }
}

impl StringTable {
    pub fn intern(&mut self, s: &str) -> StrId {
        if let Some(&id) = self.index.get(s) {
            return id;
        }
        let id = StrId(self.strings.len() as u32);
        let arc: Arc<str> = Arc::from(s);
        self.strings.push(arc.clone());
        self.index.insert(arc, id);
        id
    }

    /// Interns raw UTF-8 bytes (lossily: Python may write lone surrogates with `surrogatepass`).
    pub fn intern_bytes(&mut self, b: &[u8]) -> StrId {
        match std::str::from_utf8(b) {
            Ok(s) => self.intern(s),
            Err(_) => self.intern(&String::from_utf8_lossy(b)),
        }
    }

    pub fn lookup(&self, s: &str) -> Option<StrId> {
        self.index.get(s).copied()
    }

    pub fn get(&self, id: StrId) -> &str {
        self.strings.get(id.0 as usize).map(|s| &**s).unwrap_or("")
    }

    pub fn len(&self) -> usize {
        self.strings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.strings.len() <= 1
    }
}
