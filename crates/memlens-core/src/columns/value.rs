//! How one column value is encoded: as a primitive of one of six kinds (the typed arrays a
//! browser has), borrowed as it is when the value already is that primitive; and
//! [`OptU32Column`], a column of optional `u32`s as compact as a `u32` column.

use super::ColumnData;
use std::borrow::Cow;
use std::ops::Range;

/// The primitive kinds a column can travel as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    U8,
    U32,
    U64,
    I64,
    F32,
    F64,
}

/// A primitive a column travels as.
pub trait Prim: Copy + 'static {
    const KIND: Kind;
    fn wrap(values: Cow<'_, [Self]>) -> ColumnData<'_>;
    /// The values, if `data` is of this kind.
    fn unwrap(data: ColumnData<'static>) -> Option<Vec<Self>>;
}

macro_rules! prim {
    ($t:ty, $variant:ident) => {
        impl Prim for $t {
            const KIND: Kind = Kind::$variant;
            fn wrap(values: Cow<'_, [Self]>) -> ColumnData<'_> {
                ColumnData::$variant(values)
            }
            fn unwrap(data: ColumnData<'static>) -> Option<Vec<Self>> {
                match data {
                    ColumnData::$variant(v) => Some(v.into_owned()),
                    _ => None,
                }
            }
        }

        impl Value for $t {
            type Prim = $t;
            fn encode(values: &[Self]) -> Cow<'_, [Self]> {
                Cow::Borrowed(values)
            }
            fn decode(prims: Vec<Self>) -> Option<Vec<Self>> {
                Some(prims)
            }
        }
    };
}

prim!(u8, U8);
prim!(u32, U32);
prim!(u64, U64);
prim!(i64, I64);
prim!(f32, F32);
prim!(f64, F64);

/// A type a column can hold: how a slice of it becomes primitives and back.
pub trait Value: Sized {
    type Prim: Prim;
    fn encode(values: &[Self]) -> Cow<'_, [Self::Prim]>;
    /// `None` when some primitive is no value of this type.
    fn decode(prims: Vec<Self::Prim>) -> Option<Vec<Self>>;
}

/// Encodes each value as one primitive.
pub fn encode_each<V, P: Clone>(values: &[V], f: impl Fn(&V) -> P) -> Cow<'static, [P]> {
    Cow::Owned(values.iter().map(f).collect())
}

/// Decodes each primitive as one value (`None` if one is not a value).
pub fn decode_each<V, P>(prims: Vec<P>, f: impl Fn(P) -> Option<V>) -> Option<Vec<V>> {
    prims.into_iter().map(f).collect()
}

/// `0` / `1`.
impl Value for bool {
    type Prim = u8;
    fn encode(values: &[Self]) -> Cow<'_, [u8]> {
        encode_each(values, |&b| u8::from(b))
    }
    fn decode(prims: Vec<u8>) -> Option<Vec<Self>> {
        decode_each(prims, |p| match p {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        })
    }
}

/// `None` travels as `u32::MAX`, which no event index or row of a trace reaches (ids are `u32`
/// and a trace holds fewer than `u32::MAX` entries); a `Some(u32::MAX)` would come back `None`.
impl Value for Option<u32> {
    type Prim = u32;
    fn encode(values: &[Self]) -> Cow<'_, [u32]> {
        encode_each(values, |v| v.unwrap_or(u32::MAX))
    }
    fn decode(prims: Vec<u32>) -> Option<Vec<Self>> {
        decode_each(prims, |p| Some((p != u32::MAX).then_some(p)))
    }
}

/// Two `u32`s a range, `start` first; an unordered pair is no range.
impl Value for Range<u32> {
    type Prim = u32;
    fn encode(values: &[Self]) -> Cow<'_, [u32]> {
        Cow::Owned(values.iter().flat_map(|r| [r.start, r.end]).collect())
    }
    fn decode(prims: Vec<u32>) -> Option<Vec<Self>> {
        if prims.len() % 2 != 0 {
            return None;
        }
        prims
            .chunks_exact(2)
            .map(|p| match *p {
                [a, b] if a <= b => Some(a..b),
                _ => None,
            })
            .collect()
    }
}

/// A column of `Option<u32>` (event or row indices, table indices that may be missing) stored
/// and shipped as `u32`s, `u32::MAX` standing for `None`: half the memory of
/// `Vec<Option<u32>>`, and shipped without a copy. No index of a trace reaches `u32::MAX`
/// (a trace holds fewer entries), so a `Some(u32::MAX)` is never pushed; it would read `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OptU32Column(Vec<u32>);

impl OptU32Column {
    const NONE: u32 = u32::MAX;

    pub fn with_capacity(n: usize) -> OptU32Column {
        OptU32Column(Vec::with_capacity(n))
    }
    pub fn push(&mut self, v: Option<u32>) {
        self.0.push(v.unwrap_or(Self::NONE));
    }
    /// The value at `i`; `None` where it has none (or past the end).
    /// Sets the value at `i`, if `i` is inside the column.
    pub fn set(&mut self, i: usize, v: Option<u32>) {
        if let Some(slot) = self.0.get_mut(i) {
            *slot = v.unwrap_or(Self::NONE);
        }
    }
    pub fn get(&self, i: usize) -> Option<u32> {
        self.0.get(i).copied().filter(|&v| v != Self::NONE)
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = Option<u32>> + '_ {
        self.0.iter().map(|&v| (v != Self::NONE).then_some(v))
    }
    /// The column as it travels (`u32::MAX`: none).
    pub fn encoded(&self) -> &[u32] {
        &self.0
    }
    pub fn from_encoded(v: Vec<u32>) -> OptU32Column {
        OptU32Column(v)
    }
}

impl FromIterator<Option<u32>> for OptU32Column {
    fn from_iter<I: IntoIterator<Item = Option<u32>>>(iter: I) -> Self {
        OptU32Column(iter.into_iter().map(|v| v.unwrap_or(Self::NONE)).collect())
    }
}
