//! The generic packing on a made-up type covering every encoding and group.

use super::*;
use std::ops::Range;

#[derive(Debug, Clone, Default, PartialEq)]
struct Inner {
    bytes: Vec<u64>,
}

crate::impl_columns! {
    Inner {
        columns [bytes];
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
struct Sample {
    a_u8: Vec<u8>,
    a_u32: Vec<u32>,
    a_i64: Vec<i64>,
    a_f32: Vec<f32>,
    a_f64: Vec<f64>,
    flag: Vec<bool>,
    event: Vec<Option<u32>>,
    range: Vec<Range<u32>>,
    label: String,
    pairs: Vec<Option<(i64, i64)>>,
    inner: Inner,
    page_only: f64,
}

fn ranges_in_bounds(s: &Sample) -> Result<(), ColumnError> {
    match s
        .range
        .iter()
        .all(|r| r.end as usize <= s.inner.bytes.len())
    {
        true => Ok(()),
        false => Err(ColumnError::Invalid("range past the bytes".into())),
    }
}

crate::impl_columns! {
    Sample {
        columns [a_u8, a_u32, a_i64, a_f32, a_f64, flag, event];
        columns [range];
        header [label, pairs];
        nested [inner];
        skip [page_only];
        check = ranges_in_bounds;
    }
}

fn sample() -> Sample {
    Sample {
        a_u8: vec![0, 255],
        a_u32: vec![7, u32::MAX],
        a_i64: vec![i64::MIN, -1],
        a_f32: vec![0.5, -3.25],
        a_f64: vec![1e300, f64::MIN_POSITIVE],
        flag: vec![true, false],
        event: vec![None, Some(3)],
        range: vec![0..1, 1..3],
        label: "x\"y".into(),
        pairs: vec![None, Some((-1, 2))],
        inner: Inner {
            bytes: vec![1, 2, 3],
        },
        page_only: 0.0,
    }
}

#[test]
fn every_encoding_comes_back_as_it_went() {
    let mut s = sample();
    assert_eq!(round_trip(&s), Ok(s.clone()));
    s.page_only = 9.0;
    let back = round_trip(&s).map(|b| b.page_only);
    assert_eq!(back, Ok(0.0), "a skipped field is not shipped");
}

#[test]
fn primitive_columns_are_borrowed_and_encoded_ones_owned() {
    let s = sample();
    let mut p = Packed::default();
    s.pack(&mut p);
    assert_eq!(p.columns.get("a_u32").map(|c| c.kind()), Some(Kind::U32));
    assert_eq!(p.columns.get("flag").map(|c| c.kind()), Some(Kind::U8));
    assert_eq!(p.columns.get("range").map(|c| c.len()), Some(4));
    assert!(matches!(
        u32::encode(&s.a_u32),
        std::borrow::Cow::Borrowed(_)
    ));
}

fn packed(s: &Sample) -> Packed {
    let mut p = Packed::default();
    s.pack(&mut p);
    p
}

#[test]
fn malformed_columns_are_errors() {
    let mut p = packed(&sample());
    p.columns.remove("a_i64");
    assert_eq!(p.unpack::<Sample>(), Err(ColumnError::Missing("a_i64")));

    let mut p = packed(&sample());
    p.columns
        .insert("a_f32", ColumnData::F64(vec![1.0, 2.0].into()));
    assert!(matches!(
        p.unpack::<Sample>(),
        Err(ColumnError::WrongKind { name: "a_f32", .. })
    ));

    let mut p = packed(&sample());
    p.columns.insert("flag", ColumnData::U8(vec![0, 2].into()));
    assert_eq!(p.unpack::<Sample>(), Err(ColumnError::BadValue("flag")));

    let mut p = packed(&sample());
    p.columns
        .insert("range", ColumnData::U32(vec![3, 1].into()));
    assert_eq!(p.unpack::<Sample>(), Err(ColumnError::BadValue("range")));

    let mut p = packed(&sample());
    p.columns.insert("event", ColumnData::U32(vec![1].into()));
    assert_eq!(
        p.unpack::<Sample>(),
        Err(ColumnError::Length("a_u8", "event"))
    );

    let mut s = sample();
    s.range = vec![0..1, 1..9];
    assert!(matches!(round_trip(&s), Err(ColumnError::Invalid(_))));

    let mut p = packed(&sample());
    p.head.remove("label");
    assert!(matches!(
        p.unpack::<Sample>(),
        Err(ColumnError::Header { name: "label", .. })
    ));
}

#[test]
fn a_name_packed_twice_or_left_over_is_reported() {
    let mut p = packed(&sample());
    p.column("bytes", ColumnData::U64(vec![1].into()));
    assert!(matches!(p.unpack::<Sample>(), Err(ColumnError::Invalid(_))));

    let mut p = packed(&sample());
    p.head("extra", &1);
    assert!(matches!(p.unpack::<Sample>(), Err(ColumnError::Invalid(_))));
}
