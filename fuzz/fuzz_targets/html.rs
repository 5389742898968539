//! Fuzzes the `_memory_viz` HTML form. The input's first byte chooses:
//! - even: the rest is a pickle, written into the page `_memory_viz trace_plot` writes
//!   (`memlens_fixture::html_page`: NUL-padded, base64, `const local_files = [...]`); the page
//!   must give exactly the model (or an error exactly when) the pickle alone gives;
//! - odd: the rest is the page's text itself, mutated freely; `load` must not panic, and the
//!   loader fed in pieces must give the same model or refuse it too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memlens_core::model::normalize;
use memlens_core::raw::{Encoding, PickleMachine};
use memlens_core::{DecodeError, Snapshot};

mod common;

fn model_text(r: &Result<Snapshot, DecodeError>) -> Option<String> {
    r.as_ref().ok().map(|s| format!("{s:?}"))
}

/// The pickle alone, decoded whole and read as the HTML form would be.
fn pickle_as_html(body: &[u8]) -> Result<Snapshot, DecodeError> {
    let (a, v, protocol) = PickleMachine::decode_all(body)?;
    normalize(a, v, Encoding::Html { protocol })
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(first >> 1) + 1;
    if first % 2 == 0 {
        let page = memlens_fixture::html_page(rest, "Active Memory Timeline");
        let from_page = memlens_core::load(page.as_bytes());
        assert!(
            model_text(&from_page) == model_text(&pickle_as_html(rest)),
            "the page and its pickle give different models"
        );
        assert!(
            model_text(&common::load_in_pieces(
                page.as_bytes(),
                &[chunk],
                Some(page.len() as u64)
            )) == model_text(&from_page),
            "Loader({chunk}) disagrees with load on the page"
        );
    } else {
        let whole = memlens_core::load(rest);
        if let Ok(s) = &whole {
            let _ = memlens_core::snapshot_stats(s);
        }
        assert!(
            model_text(&common::load_in_pieces(
                rest,
                &[chunk],
                Some(rest.len() as u64)
            )) == model_text(&whole),
            "Loader({chunk}) disagrees with load"
        );
    }
});
