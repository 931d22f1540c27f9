//! The native compaction engine: plan file groups from metadata, rewrite each group with its
//! deletes applied, hand the result to the commit layer.
//!
//! ```text
//!  LoadedTable ──▶ plan_compaction(options) ──▶ CompactionPlan (serde; a dry run is this value)
//!  (snapshot S0)    manifests only               S0 id + sequence number, table UUID,
//!                                                groups: data files + the deletes that apply
//!                                                        + delete files removable afterwards
//!                                                  │
//!                                                  ▼  one group at a time (each commits alone)
//!  rewrite_group(table, plan, group, options)
//!    data files ──read (by field id → current schema)──▶ positions / DVs / equality deletes
//!       applied and counted ──▶ [sort / z-order: DataFusion SortExec, spills] ──▶ split by the
//!       current spec ──▶ rolling Parquet writers (table codec, row group, metrics modes;
//!       local tables: straight to the files, O_DIRECT where the filesystem takes it)
//!                                                  │
//!                                                  ▼
//!  RewrittenGroup { new files, removed data files, removed delete files, rows read / deleted /
//!                   written, bytes, written paths }
//!        ├──▶ commit layer: replace snapshot, new files at S0's data sequence number
//!        └──▶ cleanup_group: delete the written files of a group that does not commit
//! ```
//!
//! Most callers want [`compact`] (or the [`Compaction`] builder): plan, rewrite every group,
//! commit the groups as `replace` snapshots under concurrent writers, and get a typed outcome.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use cryo_core::TableId;
//! use cryo_core::compact::{Compaction, CompactOptions, GroupStatus, compact};
//! use cryo_core::demo::{DemoOptions, create_demo_lake};
//!
//! let dir = tempfile::tempdir()?;
//! let lake = create_demo_lake(dir.path(), &DemoOptions::default()).await?;
//! let orders = TableId::parse("lake.orders")?;
//!
//! // A dry run names the groups, files and bytes a real run would rewrite.
//! let dry = Compaction::new(&lake.catalog, orders.clone()).dry_run(true).execute().await?;
//! assert!(dry.files_in() > 0);
//!
//! let outcome = compact(&lake.catalog, &orders, &CompactOptions::default()).await?;
//! assert!(outcome.groups.iter().all(|g| matches!(g.status, GroupStatus::Committed { .. })));
//! assert_eq!(outcome.files_in(), dry.files_in());
//! assert!(outcome.rows_deleted() > 0); // the position deletes were applied
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! The engine's stages are public too, for workers that rewrite groups elsewhere:
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use cryo_core::TableId;
//! use cryo_core::compact::{CompactOptions, cleanup_group, plan_compaction, rewrite_group};
//! use cryo_core::demo::{DemoOptions, create_demo_lake};
//!
//! let dir = tempfile::tempdir()?;
//! let lake = create_demo_lake(dir.path(), &DemoOptions::default()).await?;
//! let table = lake.catalog.load_table(&TableId::parse("lake.orders")?).await?;
//!
//! let options = CompactOptions { min_input_files: 2, ..CompactOptions::default() };
//! let plan = plan_compaction(&table, &options).await?; // the dry run: groups, files, bytes
//! assert!(plan.totals().data_files > 0);
//!
//! let group = &plan.groups[0];
//! let rewritten = rewrite_group(&table, &plan, group, &options).await?;
//! rewritten.check_rows()?; // rows read − rows deleted == rows written
//! assert!(rewritten.rows_deleted.position > 0);
//! // Not committing it: delete what was written.
//! cleanup_group(&table, &rewritten).await?;
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Planning
//!
//! [`plan_compaction`] reads the manifests of the current snapshot S0 and groups live data
//! files by `(spec id, partition)`. A file is a candidate when it is smaller than the minimum or
//! larger than the maximum size, when at least `delete_file_threshold` delete files apply to
//! it, when it was written with an older partition spec, or with `rewrite_all`. Candidates are
//! packed into groups of at most `max_file_group_size_bytes`; a group is kept when it has
//! `min_input_files` files, more than the target size in several files, or a file forced in by
//! deletes, an old spec, its size or `rewrite_all`. Delete files apply by the spec's rules:
//! equality deletes to older data (strictly lower data sequence number) of the same partition or
//! of every partition when their spec is unpartitioned; position deletes to data of the same
//! partition with a lower or equal sequence number (and the referenced data file, or exact
//! `file_path` bounds, when recorded); deletion vectors to their referenced data file, in place
//! of its position delete files. A delete file is removable with a group when every live data
//! file it could apply to is in the group; delete files that apply to nothing at all are
//! removed with the first group of their partition (or the plan's first group, when their
//! partition has no group and the run covers it).
//!
//! # Rewriting and memory
//!
//! Rows stream from reader tasks (one per data file, at most `concurrency` at once) through a
//! bounded channel into the writers; a group is never held in memory. For a bin-pack the
//! memory in use is bounded by
//!
//! - readers: `concurrency` × (one input row group's column chunks + three batches of 8192
//!   rows) — the input row group is the one term the table's existing files decide;
//! - staging: rows are gathered into batches of up to 1/32 of the budget (at most 16 MiB)
//!   before they are encoded, so that the Parquet writer encodes and compresses each column
//!   through many pages in a row (with 8192-row batches zstd took ~30% longer on the same pages);
//! - writers: half the budget; each open partition writer buffers at most one row group of
//!   `write.parquet.row-group-size-bytes` (capped at a quarter of the budget), and when rows of
//!   an older spec fan out into several partitions whose open files together pass the writers'
//!   share (or more than one writer per 4 MiB of it is open), the fullest file is closed early;
//! - deletes: the group's position deletes (8 bytes a position) and equality keys, as every
//!   Iceberg engine holds them.
//!
//! Two choices the Parquet crate would make differently:
//!
//! - small files (read whole) with zstd or uncompressed chunks are paged by Cryo and
//!   decompressed with one zstd context per thread, straight into each page's buffer; the
//!   crate (58) creates a compressor and a decompressor for every column chunk it opens and
//!   copies every page once more. Other codecs, and chunks whose offsets do not fit the file,
//!   take the crate's reader;
//! - a column whose first rows in the group would not shrink under a dictionary (dictionary
//!   plus indices at least as large as the plain values: Java's test after a column's first
//!   page) is written plain from the start; the crate keeps a dictionary until it reaches
//!   `write.parquet.dict-size-bytes` and then falls back, having hashed those values for nothing.
//!
//! A run rewrites [`RunOptions::parallel_groups`] groups at once (by default one more than the
//! cores, so that a core whose group waits on a read or on its channel finds another group's
//! work), so its bound is that many times a group's.
//!
//! A sort or z-order gives `DataFusion`'s `SortExec` a `FairSpillPool` of half the budget: rows
//! beyond it are sorted in runs and spilled to the system temp directory, then merged
//! streaming; writers get a quarter. Sorting needs the `datafusion` feature; planning does not.

mod deletes;
mod lineage;
mod live;
mod local_out;
mod options;
mod pages;
mod plan;
mod read;
mod rewrite;
mod run;
// Reason: orderings are executed by the DataFusion sort only; without the feature, planning
// still parses sort columns and validates z-order widths.
#[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
mod sort;
mod write;
#[cfg_attr(not(feature = "datafusion"), allow(dead_code))]
mod zorder;

pub use options::{CompactOptions, FileSizes, MIN_MEMORY_BUDGET_BYTES, PartitionRef};
pub(crate) use plan::plan_compaction_of;
pub use plan::{
    COMPACTION_PLAN_VERSION, CompactionPlan, DeleteKind, FileGroup, GroupDataFile, GroupDeleteFile,
    SkippedPartition, plan_compaction, plan_compaction_at,
};
pub use rewrite::{DeletedRows, RewrittenGroup, cleanup_group, rewrite_group};
pub use run::{
    Compaction, CompactionOutcome, GroupOutcome, GroupStatus, RewrittenCompaction, RunOptions,
    compact,
};
pub use zorder::MAX_ZORDER_COLUMNS;

// The position-delete rewrite (crate::maintain) reads delete files and names partitions as
// compaction does.
pub(crate) use deletes::{
    EqualitySet, GroupDeletes, encode_deletion_vector, read_deletion_vector_at, read_position_file,
};
// Turning equality deletes into position deletes (crate::maintain) reads key columns as
// compaction reads rows.
pub(crate) use read::{DataReader, equality_positions};
// Table statistics (crate::maintain) read every live row as compaction reads a group.
pub(crate) use live::{LiveRead, for_each_live_batch, live_files};
pub(crate) use options::chunk_partitions;
pub(crate) use plan::{PartitionPaths, recently_changed};
pub(crate) use read::field_id;
