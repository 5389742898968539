//! One part of one table: the rows of one input file, written as `DIR/TABLE/NNNNN.parquet`
//! (`NNNNN`: the file's position on the command line). Every row starts with the `file` and
//! `rank` columns; the table's own columns follow.

use crate::load::CliError;
use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt32Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rows per record batch: small enough that a batch's columns stay a few MiB.
pub const BATCH_ROWS: usize = 1 << 16;

/// A table: its folder's name and its own columns (after `file` and `rank`).
pub struct Table {
    pub name: &'static str,
    pub fields: fn() -> Vec<Field>,
}

impl Table {
    /// The full schema: `file`, `rank`, then the table's fields.
    pub fn schema(&self) -> SchemaRef {
        let mut f = vec![
            Field::new("file", DataType::Utf8, false),
            Field::new("rank", DataType::UInt32, true),
        ];
        f.extend((self.fields)());
        Arc::new(Schema::new(f))
    }
}

/// Where an input file's rows go: its name and rank, and its position.
pub struct Source<'a> {
    pub file: &'a str,
    pub rank: Option<u32>,
    pub index: usize,
}

/// An open part being written.
pub struct Part<'a> {
    writer: ArrowWriter<File>,
    schema: SchemaRef,
    source: &'a Source<'a>,
    pub path: PathBuf,
}

fn err(path: &Path, e: impl std::fmt::Display) -> CliError {
    CliError(format!("cannot write {}: {e}", path.display()))
}

impl<'a> Part<'a> {
    pub fn create(dir: &Path, table: &Table, source: &'a Source<'a>) -> Result<Part<'a>, CliError> {
        let path = dir
            .join(table.name)
            .join(format!("{:05}.parquet", source.index));
        let f = File::create(&path).map_err(|e| err(&path, e))?;
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build();
        let schema = table.schema();
        let writer =
            ArrowWriter::try_new(f, schema.clone(), Some(props)).map_err(|e| err(&path, e))?;
        Ok(Part {
            writer,
            schema,
            source,
            path,
        })
    }

    /// Writes `rows` rows whose own columns are `cols` (in the table's field order).
    pub fn write(&mut self, rows: usize, cols: Vec<ArrayRef>) -> Result<(), CliError> {
        let mut all: Vec<ArrayRef> = Vec::with_capacity(cols.len() + 2);
        all.push(Arc::new(StringArray::from(vec![self.source.file; rows])));
        all.push(Arc::new(UInt32Array::from(vec![self.source.rank; rows])));
        all.extend(cols);
        let batch =
            RecordBatch::try_new(self.schema.clone(), all).map_err(|e| err(&self.path, e))?;
        self.writer.write(&batch).map_err(|e| err(&self.path, e))
    }

    pub fn close(self) -> Result<(), CliError> {
        self.writer
            .close()
            .map(|_| ())
            .map_err(|e| err(&self.path, e))
    }
}
