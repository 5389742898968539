//! JSON snapshots (MemoryViz tries `JSON.parse` first; tools other than torch write the same
//! schema as JSON, with tuples as arrays) into the same [`Arena`] as pickles.

use super::value::{Arena, Node, Val};
use crate::error::DecodeError;

/// Parses a JSON document into an arena. serde_json limits nesting to 128 levels, so the
/// recursive conversion below is bounded.
pub fn decode_json(bytes: &[u8]) -> Result<(Arena, Val), DecodeError> {
    let doc: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| DecodeError::Json(e.to_string()))?;
    let mut arena = Arena::default();
    let v = convert(&mut arena, &doc);
    Ok((arena, v))
}

fn convert(a: &mut Arena, v: &serde_json::Value) -> Val {
    use serde_json::Value as J;
    match v {
        J::Null => Val::None,
        J::Bool(b) => Val::Bool(*b),
        J::Number(n) => {
            if let Some(i) = n.as_i64() {
                Val::Int(i)
            } else if let Some(u) = n.as_u64() {
                let mut b = u.to_le_bytes().to_vec();
                b.push(0);
                a.push(Node::BigInt(b.into_boxed_slice()))
            } else {
                Val::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        J::String(s) => Val::Str(a.strings.intern(s)),
        J::Array(items) => {
            let list = a.push(Node::List(Vec::new()));
            let vals: Vec<Val> = items.iter().map(|x| convert(a, x)).collect();
            // list_extend cannot fail on a fresh list
            let _ = a.list_extend(list, &vals);
            list
        }
        J::Object(map) => {
            let dict = a.push(Node::Dict(Vec::new()));
            let mut kv = Vec::with_capacity(map.len() * 2);
            for (k, x) in map {
                kv.push(Val::Str(a.strings.intern(k)));
                kv.push(convert(a, x));
            }
            let _ = a.dict_set_items(dict, &kv);
            dict
        }
    }
}
