//! `rewrite_group`: one file group read with its deletes applied, optionally ordered, and
//! written as new files of the current schema and partition spec.

use std::time::Instant;

use arrow_array::RecordBatch;
use arrow_select::coalesce::BatchCoalescer;
use iceberg::arrow::schema_to_arrow_schema;
use iceberg::spec::DataFile;
use serde::{Deserialize, Serialize};

use super::deletes::GroupDeletes;
use super::options::{CompactOptions, PartitionRef};
use super::plan::{CompactionPlan, FileGroup};
use super::read::{DataReader, READ_BATCH_ROWS, ReadCounts, spawn_group_reader};
use super::sort::Ordering;
use super::write::{GroupWriter, write_settings};
use crate::catalog::LoadedTable;
use crate::error::{Error, Result};

/// Rows removed by deletes while rewriting, by the kind of delete that removed them (a row
/// matched by a position and an equality delete counts as position-deleted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletedRows {
    /// By position delete files.
    pub position: u64,
    /// By deletion vectors.
    pub deletion_vector: u64,
    /// By equality delete files.
    pub equality: u64,
}

impl DeletedRows {
    /// All deleted rows.
    pub fn total(&self) -> u64 {
        self.position + self.deletion_vector + self.equality
    }
}

/// What rewriting one group produced. Nothing is committed yet: hand the new files, the removed
/// data files and the removed delete files to the commit layer (new files take the plan's
/// [`CompactionPlan::base_sequence_number`]), or delete the new files with
/// [`cleanup_group`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RewrittenGroup {
    /// The group's id in its plan.
    pub group_id: u32,
    /// The group's partition.
    pub partition: PartitionRef,
    /// New data files (current schema and default spec, metrics per the table's modes).
    pub new_files: Vec<DataFile>,
    /// Data files replaced.
    pub removed_data_files: Vec<String>,
    /// Delete files that no longer apply to anything once the group commits.
    pub removed_delete_files: Vec<String>,
    /// Rows in the replaced files, before deletes.
    pub rows_read: u64,
    /// Rows removed by deletes.
    pub rows_deleted: DeletedRows,
    /// Rows in the new files.
    pub rows_written: u64,
    /// Bytes of the replaced data files.
    pub bytes_read: u64,
    /// Bytes of the new files.
    pub bytes_written: u64,
    /// Every file written (for cleanup when the group does not commit).
    pub written_paths: Vec<String>,
    /// Parquet codec used, e.g. `zstd(3)`.
    pub codec: String,
    /// True when the table sets no codec and Cryo chose zstd (Java would pick gzip).
    pub codec_defaulted: bool,
    /// Row-group size written (the table's, capped by the memory budget).
    pub row_group_bytes: u64,
    /// Bytes a sort spilled to disk (0 for bin-pack, or a sort that fit in memory).
    pub spilled_bytes: u64,
    /// Wall time of the rewrite.
    pub duration_ms: u64,
}

impl RewrittenGroup {
    /// `rows read − rows deleted == rows written`, and the new files hold exactly the rows
    /// written.
    pub fn check_rows(&self) -> Result<()> {
        let in_files: u64 = self.new_files.iter().map(DataFile::record_count).sum();
        if self.rows_read.checked_sub(self.rows_deleted.total()) != Some(self.rows_written)
            || in_files != self.rows_written
        {
            return Err(Error::Internal(format!(
                "group {}: read {} rows, deleted {}, wrote {} ({} in the new files)",
                self.group_id,
                self.rows_read,
                self.rows_deleted.total(),
                self.rows_written,
                in_files
            )));
        }
        Ok(())
    }
}

/// Share of the memory budget for writers when rows are not sorted, and when they are (the
/// sort pool takes half then).
const WRITER_SHARE_BINPACK: u64 = 2;
const WRITER_SHARE_SORT: u64 = 4;

/// Rewrite one group of `plan` (see the module docs for the memory bound).
///
/// The table must still be the one planned (same UUID, current schema and default spec); its
/// current snapshot may have moved on. On failure, every file written is deleted before the
/// error returns.
#[allow(clippy::too_many_lines)] // Reason: setup, stream, finish and cleanup share one error path.
pub async fn rewrite_group(
    table: &LoadedTable,
    plan: &CompactionPlan,
    group: &FileGroup,
    options: &CompactOptions,
) -> Result<RewrittenGroup> {
    options.validate()?;
    check_plan(table, plan, group)?;
    let started = Instant::now();
    let md = table.metadata.as_ref();
    let schema = md.current_schema();
    let arrow_schema = std::sync::Arc::new(
        schema_to_arrow_schema(schema)
            .map_err(|e| Error::compute(format!("{}: Arrow schema", table.id), e))?,
    );
    // v3: rows carry their lineage columns after the table's (see `lineage`).
    let arrow_schema = if super::lineage::tracked(md) {
        std::sync::Arc::new(super::lineage::with_fields(&arrow_schema))
    } else {
        arrow_schema
    };
    let ordering = Ordering::resolve(table, &plan.strategy, &arrow_schema)?;
    if ordering.is_some() && !cfg!(feature = "datafusion") {
        return Err(Error::unsupported(
            "sorted and z-ordered rewrites need cryo-core's `datafusion` feature",
        ));
    }
    let budget = options.memory_budget_bytes;
    let writer_budget = budget
        / if ordering.is_some() {
            WRITER_SHARE_SORT
        } else {
            WRITER_SHARE_BINPACK
        };
    let settings = write_settings(table, plan.sizes.target, writer_budget)?;
    let (codec, codec_defaulted, row_group_bytes) = (
        settings.codec.clone(),
        settings.codec_defaulted,
        settings.row_group_bytes,
    );
    let reader = if ordering.is_none() {
        DataReader::new(table)?.with_string_views()
    } else {
        DataReader::new(table)?
    };
    let deletes = GroupDeletes::load(table, group, &reader, schema).await?;
    let sort_order_id = ordering.as_ref().and_then(|o| o.sort_order_id);
    let same_spec = group.partition.spec_id == md.default_partition_spec_id();
    let mut writer = GroupWriter::new(
        table,
        settings,
        group.id,
        writer_budget,
        sort_order_id,
        same_spec,
    )?;
    let (rx, reading) = spawn_group_reader(table, group, &reader, &deletes, options.concurrency);

    let result: Result<(u64, u64, ReadCounts)> = async {
        let mut rows_written = 0u64;
        let mut spilled = 0u64;
        match ordering {
            None => {
                let mut rx = rx;
                let mut staging = Staging::new(budget, plan.sizes.target);
                while let Some(batch) = rx.recv().await {
                    rows_written += staging.write(batch?, &mut writer).await?;
                }
                rows_written += staging.close(&mut writer).await?;
            }
            Some(order) => {
                let (w, s) =
                    write_sorted(&mut writer, order, rx, budget, plan.sizes.target).await?;
                rows_written = w;
                spilled = s;
            }
        }
        let counts = reading
            .await
            .map_err(|e| Error::compute("reader task failed", e))??;
        Ok((rows_written, spilled, counts))
    }
    .await;
    let (rows_written, spilled, counts) = match result {
        Ok(r) => r,
        Err(e) => {
            remove_files(table, &writer.written_paths()).await;
            return Err(e);
        }
    };
    let (new_files, written_paths) = match writer.finish().await {
        Ok(r) => r,
        Err((e, paths)) => {
            remove_files(table, &paths).await;
            return Err(e);
        }
    };
    let out = RewrittenGroup {
        group_id: group.id,
        partition: group.partition.clone(),
        bytes_written: new_files.iter().map(DataFile::file_size_in_bytes).sum(),
        new_files,
        removed_data_files: group.data_files.iter().map(|f| f.path.clone()).collect(),
        removed_delete_files: group.removable_delete_files.clone(),
        rows_read: counts.rows_read,
        rows_deleted: DeletedRows {
            position: counts.position_deleted,
            deletion_vector: counts.vector_deleted,
            equality: counts.equality_deleted,
        },
        rows_written,
        bytes_read: counts.bytes_read,
        written_paths,
        codec,
        codec_defaulted,
        row_group_bytes,
        spilled_bytes: spilled,
        duration_ms: started.elapsed().as_millis() as u64,
    };
    if let Err(e) = out.check_rows() {
        remove_files(table, &out.written_paths).await;
        return Err(e);
    }
    Ok(out)
}

#[cfg(feature = "datafusion")]
async fn write_sorted(
    writer: &mut GroupWriter,
    order: Ordering,
    rx: tokio::sync::mpsc::Receiver<Result<arrow_array::RecordBatch>>,
    budget: u64,
    target_file_size: u64,
) -> Result<(u64, u64)> {
    use futures::StreamExt;
    let sort_budget = budget / 2;
    let (mut sorted, stats) = super::sort::sort_stream(
        std::sync::Arc::new(order),
        rx,
        sort_budget as usize,
        READ_BATCH_ROWS,
    )?;
    let mut staging = Staging::new(budget, target_file_size);
    let mut rows = 0u64;
    while let Some(batch) = sorted.next().await {
        rows += staging.write(batch?, writer).await?;
    }
    rows += staging.close(writer).await?;
    Ok((rows, stats.spills().1))
}

#[cfg(not(feature = "datafusion"))]
#[allow(clippy::unused_async)] // Reason: one signature for both feature configurations.
async fn write_sorted(
    _writer: &mut GroupWriter,
    _order: Ordering,
    _rx: tokio::sync::mpsc::Receiver<Result<arrow_array::RecordBatch>>,
    _budget: u64,
    _target_file_size: u64,
) -> Result<(u64, u64)> {
    let _ = READ_BATCH_ROWS;
    Err(Error::unsupported(
        "sorted and z-ordered rewrites need cryo-core's `datafusion` feature",
    ))
}

/// Most bytes of rows gathered before they are encoded (and at most 1/32 of the budget).
const STAGING_BYTES_MAX: u64 = 16 << 20;
/// Most rows per encoded batch.
const STAGING_ROWS_MAX: usize = 1 << 20;

/// Gathers the small batches readers deliver into large ones before they reach the writer.
///
/// The Parquet writer encodes a batch column by column. With 8192-row batches every data page
/// of one column is followed by pages of the others, and each column's zstd context finds its
/// match tables evicted from cache by the other seven: compression, half of a rewrite's CPU,
/// took ~30% longer than on the same pages encoded column after column (measured on the
/// compaction benchmark's table, see `benches/compaction`). A staging batch of a few MiB lets
/// each column run through many pages in a row, as pyarrow's writer does with a whole table.
struct Staging {
    coalescer: Option<BatchCoalescer>,
    max_bytes: u64,
}

impl Staging {
    /// Staging batches of at most 1/32 of `budget` and a quarter of the target file size (files
    /// roll over between batches, so a batch is what a file can overshoot its target by), and
    /// never fewer rows than a read batch.
    fn new(budget: u64, target_file_size: u64) -> Self {
        Self {
            coalescer: None,
            max_bytes: (budget / 32)
                .min(target_file_size / 4)
                .min(STAGING_BYTES_MAX),
        }
    }

    /// Rows per staging batch, from the width (in memory) of the first batch.
    fn rows_for(max_bytes: u64, batch: &RecordBatch) -> usize {
        let row_bytes = (batch.get_array_memory_size() / batch.num_rows().max(1)).max(1) as u64;
        usize::try_from(max_bytes / row_bytes)
            .unwrap_or(STAGING_ROWS_MAX)
            .clamp(READ_BATCH_ROWS, STAGING_ROWS_MAX)
    }

    fn push(&mut self, batch: RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let max_bytes = self.max_bytes;
        self.coalescer
            .get_or_insert_with(|| {
                BatchCoalescer::new(batch.schema(), Self::rows_for(max_bytes, &batch))
            })
            .push_batch(batch)
            .map_err(|e| Error::compute("gather rows", e))
    }

    /// Flush the rows still gathered (the end of the input).
    fn finish(&mut self) -> Result<()> {
        match &mut self.coalescer {
            Some(c) => c
                .finish_buffered_batch()
                .map_err(|e| Error::compute("gather rows", e)),
            None => Ok(()),
        }
    }

    /// The next completed staging batch.
    fn next(&mut self) -> Option<RecordBatch> {
        self.coalescer
            .as_mut()
            .and_then(BatchCoalescer::next_completed_batch)
    }

    /// Take in `batch` and write every staging batch it completes; the rows written.
    async fn write(&mut self, batch: RecordBatch, writer: &mut GroupWriter) -> Result<u64> {
        self.push(batch)?;
        self.drain_into(writer).await
    }

    /// The end of the input: write the rows still gathered; the rows written.
    async fn close(&mut self, writer: &mut GroupWriter) -> Result<u64> {
        self.finish()?;
        self.drain_into(writer).await
    }

    async fn drain_into(&mut self, writer: &mut GroupWriter) -> Result<u64> {
        let mut rows = 0u64;
        while let Some(batch) = self.next() {
            rows += batch.num_rows() as u64;
            writer.write(batch).await?;
        }
        Ok(rows)
    }
}

fn check_plan(table: &LoadedTable, plan: &CompactionPlan, group: &FileGroup) -> Result<()> {
    let md = table.metadata.as_ref();
    let stale = |what: &str| {
        Err(Error::validation(format!(
            "{}: {what} changed since the compaction plan was made; plan again",
            table.id
        )))
    };
    if plan.table_uuid != md.uuid().to_string() {
        return stale("the table (UUID)");
    }
    if plan.schema_id != md.current_schema_id() {
        return stale("the current schema");
    }
    if plan.spec_id != md.default_partition_spec_id() {
        return stale("the default partition spec");
    }
    if plan.group(group.id) != Some(group) {
        return Err(Error::validation(format!(
            "{}: group {} is not part of this plan",
            table.id, group.id
        )));
    }
    Ok(())
}

async fn remove_files(table: &LoadedTable, paths: &[String]) {
    for p in paths {
        if let Err(e) = table.storage.delete(p).await {
            tracing::warn!(path = %p, error = %e, "could not delete a file of a failed rewrite");
        }
    }
}

/// Delete every file a rewrite wrote (its group will not commit). Returns how many were
/// deleted; missing files count as deleted. Every path is tried before the first error returns.
pub async fn cleanup_group(table: &LoadedTable, rewritten: &RewrittenGroup) -> Result<usize> {
    let mut first_error = None;
    let mut deleted = 0;
    for p in &rewritten.written_paths {
        match table.storage.delete(p).await {
            Ok(()) => deleted += 1,
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(deleted),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Array, Int64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};

    use super::*;

    #[test]
    fn staging_gathers_rows_in_order_without_losing_any() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
        ]));
        let mut staging = Staging::new(512 << 20, 128 << 20);
        let mut next = 0i64;
        let mut out = Vec::new();
        for n in [0usize, 1000, 3, 7000, 9000, 0, 20_000, 500] {
            let ids: Vec<i64> = (next..next + n as i64).collect();
            next += n as i64;
            let s = ids
                .iter()
                .map(|i| (i % 7 != 0).then(|| i.to_string()))
                .collect::<StringArray>();
            let batch = RecordBatch::try_new(
                Arc::clone(&schema),
                vec![Arc::new(Int64Array::from(ids)), Arc::new(s)],
            )
            .expect("batch");
            staging.push(batch).expect("push");
            out.extend(std::iter::from_fn(|| staging.next()));
        }
        // Less than one staging batch so far: nothing is written until the end.
        assert!(out.is_empty());
        staging.finish().expect("finish");
        out.extend(std::iter::from_fn(|| staging.next()));
        assert_eq!(out.len(), 1);
        let b = &out[0];
        assert_eq!(b.num_rows() as i64, next);
        let ids = b
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .expect("ids");
        assert!(ids.values().iter().copied().eq(0..next));
        let s = b
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("s");
        assert_eq!(
            s.null_count() as i64,
            (0..next).filter(|i| i % 7 == 0).count() as i64
        );
        assert_eq!(s.value(8), "8");
        assert_eq!(
            Staging::new(u64::MAX, u64::MAX).max_bytes,
            STAGING_BYTES_MAX
        );
        // Small targets get small staging batches (a file overshoots by one batch at most),
        // yet never fewer rows than a read batch.
        assert_eq!(Staging::new(512 << 20, 1 << 20).max_bytes, 256 << 10);
        let one = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from(vec![1])),
                Arc::new(StringArray::from(vec!["a"])),
            ],
        )
        .expect("batch");
        assert_eq!(
            Staging::rows_for(Staging::new(16 << 20, 0).max_bytes, &one),
            READ_BATCH_ROWS
        );
    }
}
