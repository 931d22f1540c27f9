//! Every live row of a table's current snapshot, deletes applied, through the compaction
//! reader: what table statistics read.

use arrow_array::RecordBatch;

use super::deletes::GroupDeletes;
use super::options::CompactOptions;
use super::plan::plan_compaction;
use super::read::{DataReader, spawn_group_reader};
use crate::catalog::LoadedTable;
use crate::error::{Error, Result};

/// What reading every live row took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LiveRead {
    /// Data files read.
    pub(crate) files: u64,
    /// Their bytes.
    pub(crate) bytes: u64,
    /// Rows that survived their deletes (the rows handed out).
    pub(crate) rows: u64,
}

/// The live data files of the current snapshot and their bytes, from its manifests alone.
pub(crate) async fn live_files(table: &LoadedTable) -> Result<(u64, u64)> {
    let plan = plan_compaction(table, &CompactOptions::every_file()).await?;
    Ok(plan.groups.iter().fold((0, 0), |(files, bytes), g| {
        (files + g.data_files.len() as u64, bytes + g.input_bytes)
    }))
}

/// Hand every live row of `table`'s current snapshot to `each`, batch by batch, in the current
/// schema (v3: its lineage columns after it), position deletes, deletion vectors and equality
/// deletes applied; `concurrency` files are read at once. Partitions are read one after another,
/// so memory holds one partition's deletes at a time.
pub(crate) async fn for_each_live_batch(
    table: &LoadedTable,
    concurrency: usize,
    mut each: impl FnMut(&RecordBatch) -> Result<()>,
) -> Result<LiveRead> {
    let options = CompactOptions {
        concurrency: concurrency.max(1),
        ..CompactOptions::every_file()
    };
    let plan = plan_compaction(table, &options).await?;
    let reader = DataReader::new(table)?;
    let schema = table.metadata.current_schema();
    let mut out = LiveRead::default();
    for group in &plan.groups {
        let deletes = GroupDeletes::load(table, group, &reader, schema).await?;
        let (mut rx, reading) = spawn_group_reader(table, group, &reader, &deletes, concurrency);
        while let Some(batch) = rx.recv().await {
            let batch = batch?;
            out.rows += batch.num_rows() as u64;
            each(&batch)?;
        }
        let counts = reading
            .await
            .map_err(|e| Error::compute("reader task failed", e))??;
        out.files += counts.files;
        out.bytes += counts.bytes_read;
    }
    Ok(out)
}
