//! Where a fixture's document goes: [`PickleSink`] through core's `PickleWriter` (frames and
//! frame lists shared by memo, as torch's `py_symbolize` does) or [`JsonSink`] as Python's
//! `json.dumps` writes it.

use memlens_core::write::{MemoId, PickleWriter};
use rustc_hash::FxHashMap;
use std::io;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Shared {
    Stack(u32),
    Frame(u32),
}

/// Where the document goes: a pickle (with memo sharing) or JSON text.
pub(crate) trait Sink {
    fn begin_dict(&mut self) -> io::Result<()>;
    fn begin_list(&mut self) -> io::Result<()>;
    fn end(&mut self) -> io::Result<Option<MemoId>>;
    fn str(&mut self, s: &str) -> io::Result<()>;
    fn int(&mut self, v: i64) -> io::Result<()>;
    fn uint(&mut self, v: u64) -> io::Result<()>;
    fn float(&mut self, v: f64) -> io::Result<()>;
    fn bool(&mut self, v: bool) -> io::Result<()>;
    fn none(&mut self) -> io::Result<()>;
    fn pair(&mut self, a: i64, b: i64) -> io::Result<()>;
    /// Writes a reference to an object written before; false if there is none.
    fn get_shared(&mut self, key: Shared) -> io::Result<bool>;
    fn put_shared(&mut self, key: Shared, memo: Option<MemoId>);
}

pub(crate) struct PickleSink {
    pub(crate) w: PickleWriter<Vec<u8>>,
    pub(crate) shared: FxHashMap<Shared, MemoId>,
}

impl Sink for PickleSink {
    fn begin_dict(&mut self) -> io::Result<()> {
        self.w.begin_dict();
        Ok(())
    }
    fn begin_list(&mut self) -> io::Result<()> {
        self.w.begin_list();
        Ok(())
    }
    fn end(&mut self) -> io::Result<Option<MemoId>> {
        self.w.end().map(Some)
    }
    fn str(&mut self, s: &str) -> io::Result<()> {
        self.w.str(s)
    }
    fn int(&mut self, v: i64) -> io::Result<()> {
        self.w.int(v)
    }
    fn uint(&mut self, v: u64) -> io::Result<()> {
        self.w.uint(v)
    }
    fn float(&mut self, v: f64) -> io::Result<()> {
        self.w.float(v)
    }
    fn bool(&mut self, v: bool) -> io::Result<()> {
        self.w.bool(v)
    }
    fn none(&mut self) -> io::Result<()> {
        self.w.none()
    }
    fn pair(&mut self, a: i64, b: i64) -> io::Result<()> {
        self.w.int_pair(a, b).map(|_| ())
    }
    fn get_shared(&mut self, key: Shared) -> io::Result<bool> {
        match self.shared.get(&key) {
            Some(&m) => self.w.get(m).map(|_| true),
            None => Ok(false),
        }
    }
    fn put_shared(&mut self, key: Shared, memo: Option<MemoId>) {
        if let Some(m) = memo {
            self.shared.insert(key, m);
        }
    }
}

/// JSON as Python's `json.dumps` writes it (`", "` and `": "` separators).
#[derive(Default)]
pub(crate) struct JsonSink {
    pub(crate) out: String,
    /// (is a dict, values written so far; in a dict keys count too)
    open: Vec<(bool, usize)>,
}

impl JsonSink {
    fn value(&mut self, text: &str) {
        self.before();
        self.out.push_str(text);
        self.after();
    }
    fn before(&mut self) {
        if let Some(&(dict, n)) = self.open.last() {
            if n > 0 && (!dict || n % 2 == 0) {
                self.out.push_str(", ");
            }
        }
    }
    fn after(&mut self) {
        if let Some((dict, n)) = self.open.last_mut() {
            if *dict && *n % 2 == 0 {
                self.out.push_str(": ");
            }
            *n += 1;
        }
    }
}

impl Sink for JsonSink {
    fn begin_dict(&mut self) -> io::Result<()> {
        self.before();
        self.out.push('{');
        self.open.push((true, 0));
        Ok(())
    }
    fn begin_list(&mut self) -> io::Result<()> {
        self.before();
        self.out.push('[');
        self.open.push((false, 0));
        Ok(())
    }
    fn end(&mut self) -> io::Result<Option<MemoId>> {
        let Some((dict, _)) = self.open.pop() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "end() without an open container",
            ));
        };
        self.out.push(if dict { '}' } else { ']' });
        self.after();
        Ok(None)
    }
    fn str(&mut self, s: &str) -> io::Result<()> {
        let q = serde_json::to_string(s).map_err(io::Error::other)?;
        self.value(&q);
        Ok(())
    }
    fn int(&mut self, v: i64) -> io::Result<()> {
        self.value(&v.to_string());
        Ok(())
    }
    fn uint(&mut self, v: u64) -> io::Result<()> {
        self.value(&v.to_string());
        Ok(())
    }
    fn float(&mut self, v: f64) -> io::Result<()> {
        let text = if v.is_finite() {
            format!("{v:?}")
        } else {
            "null".to_string()
        };
        self.value(&text);
        Ok(())
    }
    fn bool(&mut self, v: bool) -> io::Result<()> {
        self.value(if v { "true" } else { "false" });
        Ok(())
    }
    fn none(&mut self) -> io::Result<()> {
        self.value("null");
        Ok(())
    }
    fn pair(&mut self, a: i64, b: i64) -> io::Result<()> {
        self.begin_list()?;
        self.int(a)?;
        self.int(b)?;
        self.end().map(|_| ())
    }
    fn get_shared(&mut self, _key: Shared) -> io::Result<bool> {
        Ok(false)
    }
    fn put_shared(&mut self, _key: Shared, _memo: Option<MemoId>) {}
}
