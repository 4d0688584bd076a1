//! tickbus journals as Arrow record batches and Parquet files, for research tools (pandas,
//! polars, DuckDB, Spark) that read a recorded day without any tickbus code.
//!
//! A journal holds one stream, and a stream may carry several message types, each with its own
//! fields: so a journal becomes one table per message type (`quote`, `order_add`, ...), a column
//! per field (from [`tickbus_codecs::layout`], the structs' own layout), plus:
//! - `position`: the message's stream position (the journal record's sequence);
//! - `receive_tsc`: the recorder's raw TSC when it took the message, and `receive_time`, the
//!   same instant in UTC (ns, from the journal's clock anchors);
//! - the header's `publish_tsc` (the publisher's TSC) and `sequence` as fields.
//!
//! Gaps (messages the recorder never saw) are their own table, `gaps`: `position` (the first
//! missed), `count`, `receive_tsc`, `receive_time`. Payloads that are no tickbus message (a
//! stream of raw bytes) are counted, not exported.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{
    FixedSizeBinaryBuilder, Int64Builder, TimestampNanosecondBuilder, UInt16Builder, UInt32Builder, UInt64Builder,
    UInt8Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field as ArrowField, Schema, TimeUnit};
use tickbus::journal::{JournalError, JournalReader, Kind};
use tickbus_codecs::layout::{fields, message_type, snake_name, Field, FieldKind};
use tickbus_codecs::MsgType;

/// Why a journal could not be exported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The journal could not be read (missing, damaged, not a journal).
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// Arrow refused a batch (a bug: the columns are built to the schema).
    #[error("building the {table} table: {source}")]
    Arrow {
        /// The table.
        table: String,
        /// Why.
        source: arrow_schema::ArrowError,
    },
    /// A Parquet file could not be written.
    #[error("writing {path}: {source}: check the folder exists and is writable, with room on its disk")]
    Parquet {
        /// The file.
        path: PathBuf,
        /// Why.
        source: parquet::errors::ParquetError,
    },
    /// The output file could not be created.
    #[error("creating {path}: {source}: check the folder exists and is writable")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// A journal as tables.
#[derive(Debug)]
pub struct Tables {
    /// The stream the journal recorded.
    pub stream_id: u32,
    /// One batch per message type present, by its snake-case name (`quote`).
    pub messages: BTreeMap<&'static str, RecordBatch>,
    /// The gaps.
    pub gaps: RecordBatch,
    /// Records whose payload is no tickbus message (unknown type, or a length or version that
    /// does not match its type).
    pub undecoded: u64,
}

/// The columns of one message type's table as they fill.
struct TypeColumns {
    fields: Vec<Field>,
    position: UInt64Builder,
    receive_tsc: UInt64Builder,
    receive_time: TimestampNanosecondBuilder,
    values: Vec<Column>,
}

enum Column {
    U8(UInt8Builder),
    U16(UInt16Builder),
    U32(UInt32Builder),
    U64(UInt64Builder),
    I64(Int64Builder),
    Bytes(FixedSizeBinaryBuilder),
}

fn time_type() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

impl TypeColumns {
    fn new(t: MsgType) -> TypeColumns {
        let fields = fields(t);
        let values = fields
            .iter()
            .map(|f| match f.kind {
                FieldKind::U8 => Column::U8(UInt8Builder::new()),
                FieldKind::U16 => Column::U16(UInt16Builder::new()),
                FieldKind::U32 => Column::U32(UInt32Builder::new()),
                FieldKind::U64 => Column::U64(UInt64Builder::new()),
                FieldKind::I64 => Column::I64(Int64Builder::new()),
                FieldKind::Bytes(n) => Column::Bytes(FixedSizeBinaryBuilder::new(n as i32)),
            })
            .collect();
        TypeColumns {
            fields,
            position: UInt64Builder::new(),
            receive_tsc: UInt64Builder::new(),
            receive_time: TimestampNanosecondBuilder::new().with_timezone("UTC"),
            values,
        }
    }

    fn push(&mut self, position: u64, receive_tsc: u64, wall_ns: u64, bytes: &[u8]) {
        self.position.append_value(position);
        self.receive_tsc.append_value(receive_tsc);
        self.receive_time.append_value(wall_ns as i64);
        for (f, c) in self.fields.iter().zip(&mut self.values) {
            let v = f.read_u64(bytes);
            match c {
                Column::U8(b) => b.append_value(v as u8),
                Column::U16(b) => b.append_value(v as u16),
                Column::U32(b) => b.append_value(v as u32),
                Column::U64(b) => b.append_value(v),
                Column::I64(b) => b.append_value(v as i64),
                Column::Bytes(b) => b
                    .append_value(&bytes[f.offset..f.offset + f.kind.size()])
                    .expect("the builder's width is the field's"),
            }
        }
    }

    fn finish(mut self, table: &str) -> Result<RecordBatch, ExportError> {
        let mut schema = vec![
            ArrowField::new("position", DataType::UInt64, false),
            ArrowField::new("receive_tsc", DataType::UInt64, false),
            ArrowField::new("receive_time", time_type(), false),
        ];
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(self.position.finish()),
            Arc::new(self.receive_tsc.finish()),
            Arc::new(self.receive_time.finish()),
        ];
        for (f, c) in self.fields.iter().zip(&mut self.values) {
            let (t, a): (DataType, ArrayRef) = match c {
                Column::U8(b) => (DataType::UInt8, Arc::new(b.finish())),
                Column::U16(b) => (DataType::UInt16, Arc::new(b.finish())),
                Column::U32(b) => (DataType::UInt32, Arc::new(b.finish())),
                Column::U64(b) => (DataType::UInt64, Arc::new(b.finish())),
                Column::I64(b) => (DataType::Int64, Arc::new(b.finish())),
                Column::Bytes(b) => (DataType::FixedSizeBinary(f.kind.size() as i32), Arc::new(b.finish())),
            };
            schema.push(ArrowField::new(f.name.clone(), t, false));
            cols.push(a);
        }
        RecordBatch::try_new(Arc::new(Schema::new(schema)), cols)
            .map_err(|source| ExportError::Arrow { table: table.into(), source })
    }
}

/// Reads the journal in `dir` (every record checked, in stream order) into tables.
pub fn journal_tables(dir: &Path) -> Result<Tables, ExportError> {
    let reader = JournalReader::open(dir)?;
    let mut c = reader.cursor();
    let mut by_type: BTreeMap<u16, (MsgType, TypeColumns)> = BTreeMap::new();
    let (mut g_pos, mut g_count, mut g_tsc) = (UInt64Builder::new(), UInt64Builder::new(), UInt64Builder::new());
    let mut g_time = TimestampNanosecondBuilder::new().with_timezone("UTC");
    let mut undecoded = 0;
    while let Some((rec, wall)) = c.next_timed()? {
        match rec.kind {
            Kind::Message(p) => match message_type(p) {
                Some(t) => by_type.entry(t as u16).or_insert_with(|| (t, TypeColumns::new(t))).1.push(
                    rec.sequence,
                    rec.receive_tsc,
                    wall,
                    p,
                ),
                None => undecoded += 1,
            },
            Kind::Gap { count } => {
                g_pos.append_value(rec.sequence);
                g_count.append_value(count);
                g_tsc.append_value(rec.receive_tsc);
                g_time.append_value(wall as i64);
            }
            Kind::End => {}
        }
    }
    let mut messages = BTreeMap::new();
    for (_, (t, cols)) in by_type {
        messages.insert(snake_name(t), cols.finish(snake_name(t))?);
    }
    let gaps = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            ArrowField::new("position", DataType::UInt64, false),
            ArrowField::new("count", DataType::UInt64, false),
            ArrowField::new("receive_tsc", DataType::UInt64, false),
            ArrowField::new("receive_time", time_type(), false),
        ])),
        vec![Arc::new(g_pos.finish()), Arc::new(g_count.finish()), Arc::new(g_tsc.finish()), Arc::new(g_time.finish())],
    )
    .map_err(|source| ExportError::Arrow { table: "gaps".into(), source })?;
    Ok(Tables { stream_id: reader.stream_id(), messages, gaps, undecoded })
}

/// Writes `batch` to `path` as one Parquet file (Snappy).
pub fn write_parquet(batch: &RecordBatch, path: &Path) -> Result<(), ExportError> {
    use parquet::arrow::ArrowWriter;
    use parquet::basic::Compression;
    use parquet::file::properties::WriterProperties;
    let file = std::fs::File::create(path).map_err(|source| ExportError::Io { path: path.into(), source })?;
    let props = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
    let pq = |source| ExportError::Parquet { path: path.into(), source };
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).map_err(pq)?;
    w.write(batch).map_err(pq)?;
    w.close().map_err(pq)?;
    Ok(())
}

/// Exports the journal in `dir` into folder `out` (created if missing): `TYPE.parquet` per
/// message type present and `gaps.parquet`. Returns the tables' row counts by file.
pub fn export_parquet(dir: &Path, out: &Path) -> Result<(Tables, Vec<(PathBuf, usize)>), ExportError> {
    let t = journal_tables(dir)?;
    std::fs::create_dir_all(out).map_err(|source| ExportError::Io { path: out.into(), source })?;
    let mut written = Vec::new();
    for (name, batch) in t.messages.iter().map(|(n, b)| (*n, b)).chain([("gaps", &t.gaps)]) {
        let path = out.join(format!("{name}.parquet"));
        write_parquet(batch, &path)?;
        written.push((path, batch.num_rows()));
    }
    Ok((t, written))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, UInt32Type, UInt64Type};
    use tickbus::journal::{JournalMeta, JournalOptions, JournalWriter};
    use tickbus_codecs::md::{OrderAdd, Quote};
    use tickbus_codecs::Message;
    use zerocopy::IntoBytes;

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn journal(tag: &str) -> Dir {
        let d = Dir(std::env::temp_dir().join(format!("tickbus-export-{tag}-{}", std::process::id())));
        let meta = JournalMeta { stream_id: 4, source: "test".into(), ticks_per_ns: 1.0 };
        let mut w = JournalWriter::open(&d.0, meta, JournalOptions::default()).unwrap();
        let t = w.now();
        let mut pos = 0;
        for k in 0..100u64 {
            let mut q = Quote::new();
            q.header.sequence = pos;
            q.instrument_id = k as u32;
            q.bid_px = -(k as i64);
            w.append(pos, 7, t + pos, q.as_bytes()).unwrap();
            pos += 1;
            if k % 10 == 0 {
                let mut a = OrderAdd::new();
                a.order_id = 1000 + k;
                a.price = 5 * k as i64;
                w.append(pos, 7, t + pos, a.as_bytes()).unwrap();
                pos += 1;
            }
        }
        w.append_gap(pos, 3, t + pos).unwrap();
        pos += 3;
        w.append(pos, 7, t + pos, b"raw bytes, no message").unwrap();
        w.close().unwrap();
        d
    }

    #[test]
    fn every_message_lands_in_its_type_table_with_its_fields() {
        let d = journal("tables");
        let t = journal_tables(&d.0).unwrap();
        assert_eq!(t.stream_id, 4);
        assert_eq!(t.messages.keys().copied().collect::<Vec<_>>(), ["order_add", "quote"]);
        let q = &t.messages["quote"];
        assert_eq!(q.num_rows(), 100);
        let col = |b: &RecordBatch, n: &str| b.column_by_name(n).unwrap_or_else(|| panic!("no column {n}")).clone();
        let ids = col(q, "instrument_id");
        let ids = ids.as_primitive::<UInt32Type>();
        assert_eq!(ids.values().iter().copied().collect::<Vec<_>>(), (0..100).collect::<Vec<u32>>());
        let bid = col(q, "bid_px");
        assert_eq!(bid.as_primitive::<Int64Type>().value(99), -99);
        let a = &t.messages["order_add"];
        assert_eq!(a.num_rows(), 10);
        assert_eq!(col(a, "order_id").as_primitive::<UInt64Type>().value(3), 1030);
        assert_eq!(col(a, "msg_type").as_primitive::<arrow_array::types::UInt16Type>().value(0), OrderAdd::TYPE as u16);
        let pos = col(a, "position");
        assert_eq!(pos.as_primitive::<UInt64Type>().value(1), 12, "the record's stream position");
        assert_eq!((t.gaps.num_rows(), t.undecoded), (1, 1));
        assert_eq!(col(&t.gaps, "count").as_primitive::<UInt64Type>().value(0), 3);
        assert!(q.schema().field_with_name("receive_time").unwrap().data_type() == &time_type());
    }

    #[test]
    fn a_parquet_file_per_type_reads_back_with_the_same_rows() {
        let d = journal("parquet");
        let out = Dir(d.0.with_extension("out"));
        let (_, written) = export_parquet(&d.0, &out.0).unwrap();
        let names: Vec<_> =
            written.iter().map(|(p, n)| (p.file_name().unwrap().to_str().unwrap().to_owned(), *n)).collect();
        assert_eq!(
            names,
            [("order_add.parquet".to_owned(), 10), ("quote.parquet".into(), 100), ("gaps.parquet".into(), 1)]
        );
        let f = std::fs::File::open(out.0.join("quote.parquet")).unwrap();
        let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f).unwrap().build().unwrap();
        let rows: usize = r.map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(rows, 100);
    }

    #[test]
    fn a_missing_journal_is_an_error_naming_it() {
        let e = journal_tables(Path::new("/nonexistent/tickbus-j")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/tickbus-j"), "{e}");
    }
}

/// The README's example, compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
