//! One description of a result type's columns, for every place that ships it: the web worker
//! packs layouts, allocator states and list columns into transferred typed arrays and the page
//! unpacks them, both through [`Columns`]; the tests round-trip them through [`Packed`].
//!
//! A type lists its fields once ([`impl_columns!`](crate::impl_columns)): columns (slices of a
//! [`Value`], each travelling as one array of a primitive [`Kind`]), header fields (any serde
//! type, small), nested [`Columns`] types and fields that do not travel. The macro destructures
//! the struct without `..` and builds it with a struct literal, so a field added to the struct
//! and not to its list does not compile. Column names are the field names.
//!
//! Nothing here knows about JavaScript: a sink or source is anything that stores named typed
//! slices and named serde values (`web/src/wire.rs` implements them over `postMessage`).

mod macros;
mod packed;
pub mod value;

#[cfg(test)]
mod tests;

pub use packed::Packed;
pub use value::{Kind, OptU32Column, Prim, Value};

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::borrow::Cow;

/// A column's values in their primitive encoding: borrowed when the field's own values are
/// primitives (no copy on the way out), owned when they had to be encoded.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnData<'a> {
    U8(Cow<'a, [u8]>),
    U32(Cow<'a, [u32]>),
    U64(Cow<'a, [u64]>),
    I64(Cow<'a, [i64]>),
    F32(Cow<'a, [f32]>),
    F64(Cow<'a, [f64]>),
}

impl ColumnData<'_> {
    pub fn kind(&self) -> Kind {
        match self {
            ColumnData::U8(_) => Kind::U8,
            ColumnData::U32(_) => Kind::U32,
            ColumnData::U64(_) => Kind::U64,
            ColumnData::I64(_) => Kind::I64,
            ColumnData::F32(_) => Kind::F32,
            ColumnData::F64(_) => Kind::F64,
        }
    }

    /// Number of primitives.
    pub fn len(&self) -> usize {
        match self {
            ColumnData::U8(v) => v.len(),
            ColumnData::U32(v) => v.len(),
            ColumnData::U64(v) => v.len(),
            ColumnData::I64(v) => v.len(),
            ColumnData::F32(v) => v.len(),
            ColumnData::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// An owned copy (borrowed data is copied once).
    pub fn into_owned(self) -> ColumnData<'static> {
        match self {
            ColumnData::U8(v) => ColumnData::U8(Cow::Owned(v.into_owned())),
            ColumnData::U32(v) => ColumnData::U32(Cow::Owned(v.into_owned())),
            ColumnData::U64(v) => ColumnData::U64(Cow::Owned(v.into_owned())),
            ColumnData::I64(v) => ColumnData::I64(Cow::Owned(v.into_owned())),
            ColumnData::F32(v) => ColumnData::F32(Cow::Owned(v.into_owned())),
            ColumnData::F64(v) => ColumnData::F64(Cow::Owned(v.into_owned())),
        }
    }
}

/// Why shipped columns could not be turned back into their type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ColumnError {
    #[error("column {0} is missing")]
    Missing(&'static str),
    #[error("column {name} holds {found:?} values, not {expected:?}")]
    WrongKind {
        name: &'static str,
        expected: Kind,
        found: Kind,
    },
    #[error("column {0} holds a value its type cannot take")]
    BadValue(&'static str),
    #[error("columns {0} and {1} differ in length")]
    Length(&'static str, &'static str),
    #[error("header field {name}: {message}")]
    Header { name: &'static str, message: String },
    #[error("{0}")]
    Invalid(String),
}

/// Where a [`Columns`] value is packed.
pub trait ColumnSink {
    fn column(&mut self, name: &'static str, data: ColumnData<'_>);
    /// A small value, carried in its serde form.
    fn head<T: Serialize + ?Sized>(&mut self, name: &'static str, value: &T);
}

/// Where a [`Columns`] value is unpacked from (each name is taken once).
pub trait ColumnSource {
    /// The column `name`, owned, as primitives of `kind`.
    fn take_column(
        &mut self,
        name: &'static str,
        kind: Kind,
    ) -> Result<ColumnData<'static>, ColumnError>;
    fn take_head<T: DeserializeOwned>(&mut self, name: &'static str) -> Result<T, ColumnError>;
}

/// A result type that travels as named columns plus header fields.
pub trait Columns: Sized {
    fn pack(&self, sink: &mut impl ColumnSink);
    fn unpack(src: &mut impl ColumnSource) -> Result<Self, ColumnError>;
}

/// Packs one column of values (used by [`impl_columns!`](crate::impl_columns)).
pub fn put<V: Value>(sink: &mut impl ColumnSink, name: &'static str, values: &[V]) {
    sink.column(name, V::Prim::wrap(V::encode(values)));
}

/// Unpacks one column of values (used by [`impl_columns!`](crate::impl_columns)).
pub fn take<V: Value>(
    src: &mut impl ColumnSource,
    name: &'static str,
) -> Result<Vec<V>, ColumnError> {
    let data = src.take_column(name, V::Prim::KIND)?;
    let found = data.kind();
    let prims = V::Prim::unwrap(data).ok_or(ColumnError::WrongKind {
        name,
        expected: V::Prim::KIND,
        found,
    })?;
    V::decode(prims).ok_or(ColumnError::BadValue(name))
}

/// A struct field that travels as one column: a `Vec` of a [`Value`], or an [`OptU32Column`]
/// (used by [`impl_columns!`](crate::impl_columns)).
pub trait Field: Sized {
    fn put_field(&self, sink: &mut impl ColumnSink, name: &'static str);
    fn take_field(src: &mut impl ColumnSource, name: &'static str) -> Result<Self, ColumnError>;
    fn field_len(&self) -> usize;
}

impl<V: Value> Field for Vec<V> {
    fn put_field(&self, sink: &mut impl ColumnSink, name: &'static str) {
        put(sink, name, self);
    }
    fn take_field(src: &mut impl ColumnSource, name: &'static str) -> Result<Self, ColumnError> {
        take(src, name)
    }
    fn field_len(&self) -> usize {
        self.len()
    }
}

impl Field for OptU32Column {
    fn put_field(&self, sink: &mut impl ColumnSink, name: &'static str) {
        put(sink, name, self.encoded());
    }
    fn take_field(src: &mut impl ColumnSource, name: &'static str) -> Result<Self, ColumnError> {
        take(src, name).map(OptU32Column::from_encoded)
    }
    fn field_len(&self) -> usize {
        self.len()
    }
}

/// Checks that the columns of one table hold as many values each (`(name, len)` pairs).
pub fn same_length(columns: &[(&'static str, usize)]) -> Result<(), ColumnError> {
    let Some(&(first, n)) = columns.first() else {
        return Ok(());
    };
    match columns.iter().find(|&&(_, len)| len != n) {
        Some(&(other, _)) => Err(ColumnError::Length(first, other)),
        None => Ok(()),
    }
}

/// Packs `value` into a [`Packed`] and unpacks it again: what the worker and the page do, without
/// the browser (for tests).
pub fn round_trip<T: Columns>(value: &T) -> Result<T, ColumnError> {
    let mut p = Packed::default();
    value.pack(&mut p);
    p.unpack()
}
