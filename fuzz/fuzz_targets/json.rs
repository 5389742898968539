//! Fuzzes the JSON form: arbitrary bytes through `memlens_core::load` (never a panic), the
//! loader fed in pieces (the same model or the same refusal), and, for every input serde_json
//! parses, the same document written as a pickle (`memlens_core::write::PickleWriter`, objects
//! as dicts, arrays as lists): the model read from JSON and the one read from the pickle must
//! agree (both refused, or the same stats, warnings and trace length), since `model::normalize`
//! is the one reader of both forms' values.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memlens_core::write::PickleWriter;
use memlens_core::{snapshot_stats, Snapshot};
use serde_json::Value;
use std::io;

mod common;

/// Writes one JSON value into the pickle writer.
fn write_value(w: &mut PickleWriter<Vec<u8>>, v: &Value) -> io::Result<()> {
    match v {
        Value::Null => w.none(),
        Value::Bool(b) => w.bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => w.int(i),
            (None, Some(u)) => w.uint(u),
            _ => w.float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => w.str(s),
        Value::Array(items) => {
            w.begin_list();
            for x in items {
                write_value(w, x)?;
            }
            w.end().map(|_| ())
        }
        Value::Object(map) => {
            w.begin_dict();
            for (k, x) in map {
                w.str(k)?;
                write_value(w, x)?;
            }
            w.end().map(|_| ())
        }
    }
}

/// What both forms must agree on: refused, or the stats, warnings and trace length.
fn summary(s: &Snapshot) -> String {
    format!(
        "{:?} {:?} {} {}",
        snapshot_stats(s),
        s.warnings,
        s.trace.len(),
        s.segments_only
    )
}

fuzz_target!(|data: &[u8]| {
    let whole = memlens_core::load(data);

    // The loader, fed in pieces of a size taken from the input's length, must agree.
    let chunk = data.len() % 61 + 1;
    let loaded = common::load_in_pieces(data, &[chunk], None);
    let text = |r: &Result<Snapshot, _>| r.as_ref().ok().map(|s| format!("{s:?}"));
    assert!(
        text(&whole) == text(&loaded),
        "Loader({chunk}) disagrees with load"
    );

    let Ok(doc) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if !matches!(
        memlens_core::raw::sniff(data),
        Ok(memlens_core::raw::Sniff::Json)
    ) {
        return;
    }
    let mut w = PickleWriter::new(Vec::new(), 4);
    if write_value(&mut w, &doc).is_err() {
        return;
    }
    let Ok(pickle) = w.finish() else {
        return;
    };
    let from_pickle = memlens_core::load(&pickle);
    assert_eq!(
        whole.as_ref().ok().map(summary),
        from_pickle.as_ref().ok().map(summary),
        "the JSON and the same document as a pickle give different models"
    );
});
