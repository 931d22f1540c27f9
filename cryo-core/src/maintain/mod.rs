//! Native metadata maintenance: snapshot expiry, manifest and position-delete rewrites, orphan
//! and missing files. A [`crate::plan::MaintenancePlan`] is carried out by [`crate::exec`].
//!
//! Every destructive operation here defaults to a dry run (docs/architecture.md, "Deletion safety"); the default lives in
//! core, so every binding inherits it.
//!
//! # Example
//!
//! Expire the snapshots of the demo lake's streaming table older than its retention (5 days):
//! without `.dry_run(false)` it only reports what it would remove.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use cryo_core::TableId;
//! use cryo_core::demo::{DemoOptions, create_demo_lake};
//! use cryo_core::maintain::ExpireSnapshots;
//!
//! let dir = tempfile::tempdir()?;
//! let lake = create_demo_lake(dir.path(), &DemoOptions::default()).await?;
//! let id = TableId::parse("lake.clickstream")?;
//! let before = lake.catalog.load_table(&id).await?.metadata_location.clone();
//!
//! let outcome = ExpireSnapshots::new(&lake.catalog, id.clone()).execute().await?;
//! assert!(outcome.dry_run);
//! // ~10 days of appends: the older half would go, with the manifest lists only they reach.
//! assert!(outcome.expired_snapshots() > 0 && !outcome.retained_snapshot_ids.is_empty());
//! assert_eq!(outcome.deleted.manifest_lists.files, outcome.expired_snapshots() as u64);
//! assert_eq!(outcome.deleted.data.files, 0); // every data file is still live
//! // Nothing changed: no commit, the table is at the metadata it was.
//! assert_eq!(outcome.metadata_location, None);
//! assert_eq!(lake.catalog.load_table(&id).await?.metadata_location, before);
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

mod arrow;
mod equality_deletes;
mod expire;
mod manifests;
mod missing;
mod orphans;
mod position_deletes;
mod statistics;

pub use arrow::{file_listing_schema, missing_files_schema};
pub use equality_deletes::{
    ConvertEqualityDeletes, ConvertEqualityDeletesOptions, ConvertEqualityDeletesOutcome,
    ConvertEqualityDeletesStatus, LeftPartition, PreparedConversion, convert_equality_deletes,
};
pub use expire::{
    DEFAULT_MAX_SNAPSHOT_AGE_MS, DeleteFailure as ExpiryDeleteFailure, ExpireOptions,
    ExpireOutcome, ExpireSnapshots, ExpiredFile, ExpiredFileKind, FilesByKind, History, Retention,
    SnapshotSelection, expire_snapshots, select_snapshots,
};
pub use manifests::{
    DEFAULT_MANIFEST_TARGET_SIZE, MANIFEST_TARGET_SIZE_PROPERTY, MIN_MANIFEST_TARGET_SIZE,
    ManifestGroup, ManifestKind, ManifestRewritePlan, PreparedManifestRewrite, ReplaceReason,
    ReplacedManifest, RewriteManifests, RewriteManifestsOptions, RewriteManifestsOutcome,
    RewriteManifestsStatus, plan_manifest_rewrite, rewrite_manifests,
};
pub use missing::{
    FindMissingFiles, FindMissingFilesOptions, MissingFile, MissingFilesOutcome, MissingKind,
    SnapshotDamage, UnreadableFile, find_missing_files,
};
pub use orphans::{
    DEFAULT_RETENTION_MS, DeleteFailure, FileUri, MIN_RETENTION_MS, OrphanFile, PrefixConflict,
    PrefixMismatchMode, RemoveOrphanFiles, RemoveOrphanFilesOptions, RemoveOrphanFilesOutcome,
    SharedLocationMode, remove_orphan_files,
};
pub use position_deletes::{
    DeleteGroupOutcome, DeleteGroupStatus, PlannedDeleteFile, PositionDeleteGroup,
    PositionDeletePlan, PreparedPositionDeleteRewrite, RewritePositionDeletes,
    RewritePositionDeletesOptions, RewritePositionDeletesOutcome, SkippedDeletes,
    plan_position_delete_rewrite, rewrite_position_deletes,
};
pub use statistics::{
    ColumnNdv, ComputeStatistics, ComputeStatisticsOptions, ComputeStatisticsOutcome,
    ComputeStatisticsStatus, NDV_PROPERTY, THETA_BLOB_TYPE, compute_statistics,
};
