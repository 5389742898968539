//! The worker's side of search: frames and stacks live here (the page has only element
//! columns), so a query is answered here and the page gets a bitset over the layout's elements.
//! The frame index (per file) and the address labels (per layout) are built on first use.

use crate::wire::clock::now_ms;
use crate::wire::pack;
use crate::wire::protocol::{FromWorker, SearchHits};
use memlens_core::layout::{AddressLabels, SearchIndex, SearchQuery, TimelineKind, TimelineLayout};
use memlens_core::Snapshot;
use std::collections::HashMap;

/// What searching a file needs, kept with the file in the worker.
#[derive(Default)]
pub struct SearchCache {
    index: Option<SearchIndex>,
    labels: HashMap<(u32, TimelineKind), AddressLabels>,
}

/// The search boxes as the request has them.
pub struct Query<'a> {
    pub address: &'a str,
    pub frame: &'a str,
    /// `frame` is a regular expression.
    pub regex: bool,
}

/// Answers a `Search` request (`file`: the snapshot, the layout searched, the cache; `None`
/// when the file is gone, which is answered with an error).
pub fn send_result(
    file: Option<(&Snapshot, Option<&TimelineLayout>, &mut SearchCache)>,
    id: u32,
    device: u32,
    kind: TimelineKind,
    seq: u32,
    q: Query<'_>,
) {
    let t0 = now_ms();
    let query = if q.regex {
        SearchQuery::with_regex(q.address, q.frame)
    } else {
        SearchQuery::new(q.address, q.frame)
    };
    let (hits, count, error) = match (file, query) {
        (_, Err(e)) => (None, 0, Some(e.to_string())),
        (_, Ok(None)) => (None, 0, None),
        (None, _) | (Some((_, None, _)), _) => {
            (None, 0, Some("this file is no longer open".into()))
        }
        (Some((snap, Some(layout), cache)), Ok(Some(q))) => {
            let index = cache.index.get_or_insert_with(|| SearchIndex::new(snap));
            let labels = cache
                .labels
                .entry((device, kind))
                .or_insert_with(|| AddressLabels::new(&layout.elements));
            let bits = index.search(snap, &layout.elements, labels, &q);
            let count: u32 = bits.iter().map(|w| w.count_ones()).sum();
            (Some(SearchHits { bits }), count, None)
        }
    };
    let msg = FromWorker::Search {
        id,
        device,
        kind,
        seq,
        count,
        error,
        search_ms: now_ms() - t0,
    };
    match hits {
        Some(h) => pack::reply_with(&msg, &h),
        None => pack::reply(&msg),
    }
    .post();
}
