//! A [`ColumnSink`] and [`ColumnSource`] over plain vectors: columns by name, header fields as
//! JSON text (as the worker protocol carries them). Native tests round-trip every result type
//! through it; a name packed twice is reported when unpacking.

use super::{ColumnData, ColumnError, ColumnSink, ColumnSource, Columns, Kind};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Default)]
pub struct Packed {
    pub columns: BTreeMap<&'static str, ColumnData<'static>>,
    pub head: BTreeMap<&'static str, Result<String, String>>,
    /// Names packed more than once (each would hide the other).
    pub duplicates: Vec<&'static str>,
}

impl Packed {
    /// Unpacks a `T` from what was packed, then checks that nothing was left over.
    pub fn unpack<T: Columns>(&mut self) -> Result<T, ColumnError> {
        if let Some(name) = self.duplicates.first() {
            return Err(ColumnError::Invalid(format!("{name} was packed twice")));
        }
        let v = T::unpack(self)?;
        let left = self.columns.keys().chain(self.head.keys()).next();
        match left {
            Some(name) => Err(ColumnError::Invalid(format!(
                "{name} was packed but not unpacked"
            ))),
            None => Ok(v),
        }
    }

    fn note(&mut self, name: &'static str) {
        if self.columns.contains_key(name) || self.head.contains_key(name) {
            self.duplicates.push(name);
        }
    }
}

impl ColumnSink for Packed {
    fn column(&mut self, name: &'static str, data: ColumnData<'_>) {
        self.note(name);
        self.columns.insert(name, data.into_owned());
    }

    fn head<T: Serialize + ?Sized>(&mut self, name: &'static str, value: &T) {
        self.note(name);
        let json = serde_json::to_string(value).map_err(|e| e.to_string());
        self.head.insert(name, json);
    }
}

impl ColumnSource for Packed {
    fn take_column(
        &mut self,
        name: &'static str,
        _kind: Kind,
    ) -> Result<ColumnData<'static>, ColumnError> {
        self.columns.remove(name).ok_or(ColumnError::Missing(name))
    }

    fn take_head<T: DeserializeOwned>(&mut self, name: &'static str) -> Result<T, ColumnError> {
        let header = |message: String| ColumnError::Header { name, message };
        let json = self
            .head
            .remove(name)
            .ok_or_else(|| header("missing".into()))?
            .map_err(header)?;
        serde_json::from_str(&json).map_err(|e| header(e.to_string()))
    }
}
