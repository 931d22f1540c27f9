//! Format v3 row lineage through a rewrite.
//!
//! Every row of a v3 table has a `_row_id` and a `_last_updated_sequence_number`. A data file
//! may store them (the two reserved columns below); where it does not, or stores `null`, a
//! reader derives them: `_row_id` is the file's `first_row_id` plus the row's position in the
//! file, `_last_updated_sequence_number` is the file's data sequence number. A rewrite moves
//! rows to new files at new positions, under a new `first_row_id` and possibly another data
//! sequence number, so derived values would change: the spec asks a rewrite to write both
//! columns, with each surviving row's values, into the files it writes (Java's and Spark's
//! rewrites do). The new files still take their `first_row_id` from the table's `next-row-id`
//! when committed, as every added file does; with both columns written, no row reads it.
//!
//! Reading: the values a file stores are read with the file's other columns, then every `null`
//! is replaced by the derived value (`first_row_id + position`, the data sequence number), before
//! deleted rows are dropped, so each surviving row carries its own values from then on.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, new_null_array};
use arrow_schema::{DataType, Field, FieldRef, Schema as ArrowSchema};
use iceberg::spec::{
    FormatVersion, NestedField, PrimitiveType, Schema, SchemaRef, TableMetadata, Type,
};
use parquet::arrow::PARQUET_FIELD_ID_META_KEY;

use crate::error::{Error, Result};

/// Reserved field id of `_row_id` (spec: `Integer.MAX_VALUE - 107`).
pub(crate) const ROW_ID: i32 = i32::MAX - 107;
/// Reserved field id of `_last_updated_sequence_number` (`Integer.MAX_VALUE - 108`).
pub(crate) const LAST_UPDATED: i32 = i32::MAX - 108;
const ROW_ID_NAME: &str = "_row_id";
const LAST_UPDATED_NAME: &str = "_last_updated_sequence_number";

/// Whether the table's rows carry lineage that rewrites must keep (format v3 and later).
pub(crate) fn tracked(md: &TableMetadata) -> bool {
    md.format_version() >= FormatVersion::V3
}

/// The schema rewritten files are written in: the current schema, and on v3 the two lineage
/// columns after its fields.
///
/// A current schema that already uses a lineage column's id or name is refused: its files
/// could not say which column is which.
pub(crate) fn write_schema(table: &str, md: &TableMetadata) -> Result<SchemaRef> {
    let current = md.current_schema();
    if !tracked(md) {
        return Ok(Arc::clone(current));
    }
    for (id, name) in [(ROW_ID, ROW_ID_NAME), (LAST_UPDATED, LAST_UPDATED_NAME)] {
        if current.field_by_id(id).is_some() || current.field_by_name(name).is_some() {
            return Err(Error::unsupported(format!(
                "{table}: the schema has a column with the id or name of the row-lineage column \
                 `{name}` (field id {id}); its rows cannot be rewritten without losing one of them"
            )));
        }
    }
    let fields = current
        .as_struct()
        .fields()
        .iter()
        .cloned()
        .chain([ROW_ID, LAST_UPDATED].map(|id| {
            let name = if id == ROW_ID {
                ROW_ID_NAME
            } else {
                LAST_UPDATED_NAME
            };
            Arc::new(NestedField::optional(
                id,
                name,
                Type::Primitive(PrimitiveType::Long),
            ))
        }))
        .collect::<Vec<_>>();
    Schema::builder()
        .with_schema_id(current.schema_id())
        .with_identifier_field_ids(current.identifier_field_ids())
        .with_fields(fields)
        .build()
        .map(Arc::new)
        .map_err(|e| Error::compute(format!("{table}: schema with row lineage"), e))
}

/// Refuse, before anything is written, a table whose rewrite would drop something of format v3
/// that Cryo does not handle yet, naming it: table encryption, a nested field with an initial
/// default (upstream's reader fills defaults into top-level columns only), a column that takes
/// a lineage column's id or name.
pub(crate) fn check_rewritable(table: &str, md: &TableMetadata) -> Result<()> {
    if md.encryption_keys_iter().len() > 0 {
        return Err(Error::unsupported(format!(
            "{table}: the table is encrypted (format v3 encryption keys); Cryo does not rewrite encrypted tables"
        )));
    }
    let mut stack: Vec<(String, &NestedField, bool)> = md
        .current_schema()
        .as_struct()
        .fields()
        .iter()
        .map(|f| (f.name.clone(), f.as_ref(), true))
        .collect();
    while let Some((name, f, top)) = stack.pop() {
        if !top && f.initial_default.is_some() {
            return Err(Error::unsupported(format!(
                "{table}: nested column `{name}` has an initial default (format v3); Cryo cannot \
                 yet fill it into files written before the column existed"
            )));
        }
        let children: Vec<&NestedField> = match f.field_type.as_ref() {
            Type::Struct(s) => s.fields().iter().map(AsRef::as_ref).collect(),
            Type::List(l) => vec![l.element_field.as_ref()],
            Type::Map(m) => vec![m.key_field.as_ref(), m.value_field.as_ref()],
            Type::Primitive(_) => Vec::new(),
        };
        for c in children {
            stack.push((format!("{name}.{}", c.name), c, false));
        }
    }
    write_schema(table, md).map(|_| ())
}

/// The Arrow fields of the two lineage columns, as rewritten batches carry them (last).
pub(crate) fn arrow_fields() -> [FieldRef; 2] {
    [(ROW_ID, ROW_ID_NAME), (LAST_UPDATED, LAST_UPDATED_NAME)].map(|(id, name)| {
        Arc::new(
            Field::new(name, DataType::Int64, true).with_metadata(HashMap::from([(
                PARQUET_FIELD_ID_META_KEY.to_string(),
                id.to_string(),
            )])),
        )
    })
}

/// `schema` with the lineage columns appended.
pub(crate) fn with_fields(schema: &ArrowSchema) -> ArrowSchema {
    let mut fields: Vec<FieldRef> = schema.fields().iter().cloned().collect();
    fields.extend(arrow_fields());
    ArrowSchema::new_with_metadata(fields, schema.metadata().clone())
}

/// `batch` (data columns only) with lineage columns appended: the stored values `stored` (one
/// array per column, `batch`'s length) or nulls where the file stores none.
pub(crate) fn append(
    batch: &RecordBatch,
    stored: [Option<ArrayRef>; 2],
) -> std::result::Result<RecordBatch, arrow_schema::ArrowError> {
    let n = batch.num_rows();
    let mut columns = batch.columns().to_vec();
    for s in stored {
        columns.push(s.unwrap_or_else(|| new_null_array(&DataType::Int64, n)));
    }
    RecordBatch::try_new(Arc::new(with_fields(batch.schema().as_ref())), columns)
}

/// What a data file's rows derive their lineage from when they store none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileLineage {
    /// The file's `first_row_id` (`None`: its rows have no row ids, and keep none).
    pub(crate) first_row_id: Option<i64>,
    /// The file's data sequence number.
    pub(crate) data_sequence_number: i64,
}

impl FileLineage {
    /// `batch` (lineage columns last, as read) with every `null` lineage value replaced by the
    /// derived one; its first row is at position `offset` of the file.
    pub(crate) fn fill(&self, batch: &RecordBatch, offset: u64) -> Result<RecordBatch> {
        let n = batch.num_rows();
        let k = batch.num_columns();
        if k < 2 {
            return Err(Error::Internal("rows without lineage columns".into()));
        }
        let longs = |i: usize| -> Result<&Int64Array> {
            batch
                .column(i)
                .as_any()
                .downcast_ref::<Int64Array>()
                .ok_or_else(|| Error::Internal("lineage column is not a long column".into()))
        };
        let (ids, seqs) = (longs(k - 2)?, longs(k - 1)?);
        let start = self.first_row_id.and_then(|f| {
            i64::try_from(offset)
                .ok()
                .and_then(|o| f.checked_add(o))
                .filter(|s| s.checked_add(n as i64).is_some())
        });
        if self.first_row_id.is_some() && start.is_none() {
            return Err(Error::Internal(format!(
                "row ids overflow: first_row_id {:?} + position {offset}",
                self.first_row_id
            )));
        }
        let ids: ArrayRef = match start {
            // Nothing stored: the ids the reader would derive.
            Some(s) if ids.null_count() == n => {
                Arc::new(Int64Array::from_iter_values(s..s + n as i64))
            }
            Some(s) => Arc::new(
                ids.iter()
                    .zip(s..)
                    .map(|(v, d)| Some(v.unwrap_or(d)))
                    .collect::<Int64Array>(),
            ),
            // No first_row_id: stored ids stay, the others stay null.
            None => Arc::clone(batch.column(k - 2)),
        };
        let seq = self.data_sequence_number;
        let seqs: ArrayRef = if seqs.null_count() == n {
            Arc::new(Int64Array::from_value(seq, n))
        } else if seqs.null_count() == 0 {
            Arc::clone(batch.column(k - 1))
        } else {
            Arc::new(
                seqs.iter()
                    .map(|v| Some(v.unwrap_or(seq)))
                    .collect::<Int64Array>(),
            )
        };
        let mut columns = batch.columns()[..k - 2].to_vec();
        columns.push(ids);
        columns.push(seqs);
        RecordBatch::try_new(batch.schema(), columns)
            .map_err(|e| Error::compute("lineage columns", e))
    }
}

/// The roots of a Parquet file's lineage columns (by field id), when it stores them.
pub(crate) fn stored_roots(file: &ArrowSchema) -> [Option<usize>; 2] {
    [ROW_ID, LAST_UPDATED].map(|id| {
        file.fields()
            .iter()
            .position(|f| super::read::field_id(f) == Some(id))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(ids: Vec<Option<i64>>, seqs: Vec<Option<i64>>) -> RecordBatch {
        let data = RecordBatch::try_new(
            Arc::new(ArrowSchema::new(vec![Field::new(
                "x",
                DataType::Int64,
                false,
            )])),
            vec![Arc::new(Int64Array::from_iter_values(0..ids.len() as i64))],
        )
        .expect("batch");
        append(
            &data,
            [
                Some(Arc::new(Int64Array::from(ids)) as ArrayRef),
                Some(Arc::new(Int64Array::from(seqs)) as ArrayRef),
            ],
        )
        .expect("append")
    }

    fn longs(b: &RecordBatch, i: usize) -> Vec<Option<i64>> {
        b.column(i)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("longs")
            .iter()
            .collect()
    }

    #[test]
    fn nulls_take_the_derived_values_and_stored_ones_stay() {
        let f = FileLineage {
            first_row_id: Some(1000),
            data_sequence_number: 7,
        };
        // Nothing stored: first_row_id + position, the file's sequence number.
        let out = f
            .fill(&batch(vec![None; 3], vec![None; 3]), 10)
            .expect("fill");
        assert_eq!(longs(&out, 1), vec![Some(1010), Some(1011), Some(1012)]);
        assert_eq!(longs(&out, 2), vec![Some(7); 3]);
        // Some stored (a file an earlier rewrite wrote, then updated rows appended to it).
        let out = f
            .fill(
                &batch(vec![Some(5), None, Some(2)], vec![Some(3), None, None]),
                0,
            )
            .expect("fill");
        assert_eq!(longs(&out, 1), vec![Some(5), Some(1001), Some(2)]);
        assert_eq!(longs(&out, 2), vec![Some(3), Some(7), Some(7)]);
        // No first_row_id (added before the upgrade to v3, never assigned): ids stay unknown.
        let none = FileLineage {
            first_row_id: None,
            data_sequence_number: 2,
        };
        let out = none
            .fill(&batch(vec![None, Some(9)], vec![None, None]), 0)
            .expect("fill");
        assert_eq!(longs(&out, 1), vec![None, Some(9)]);
        assert_eq!(longs(&out, 2), vec![Some(2), Some(2)]);
    }

    #[test]
    fn overflowing_row_ids_are_an_error_not_a_wrap() {
        let f = FileLineage {
            first_row_id: Some(i64::MAX - 1),
            data_sequence_number: 1,
        };
        assert!(f.fill(&batch(vec![None; 3], vec![None; 3]), 0).is_err());
    }
}
