//! Native metadata maintenance: snapshot expiry, manifest and position-delete rewrites, orphan
//! and missing files, and the maintenance run that executes a [`crate::plan::MaintenancePlan`]
//! operation by operation, table by table, under locks, leaving a receipt for every decision.
//!
//! Every destructive operation here defaults to a dry run (DESIGN §10); the default lives in
//! core, so every binding inherits it.

pub mod expire;
pub mod manifests;
pub mod missing;
pub mod orphans;
pub mod position_deletes;
pub mod run;

pub use expire::{
    DeleteFailure as ExpiryDeleteFailure, ExpireOptions, ExpireOutcome, ExpireSnapshots,
    ExpiredFile, ExpiredFileKind, FilesByKind, History, Retention, SnapshotSelection,
    expire_snapshots, select_snapshots,
};
pub use manifests::{
    ManifestGroup, ManifestKind, ManifestRewritePlan, PreparedManifestRewrite, ReplaceReason,
    ReplacedManifest, RewriteManifests, RewriteManifestsOptions, RewriteManifestsOutcome,
    RewriteManifestsStatus, plan_manifest_rewrite, rewrite_manifests,
};
pub use missing::{
    FindMissingFiles, FindMissingFilesOptions, MissingFile, MissingFilesOutcome, MissingKind,
    SnapshotDamage, UnreadableFile, find_missing_files,
};
pub use orphans::{
    DeleteFailure, FileUri, OrphanFile, PrefixConflict, PrefixMismatchMode, RemoveOrphanFiles,
    RemoveOrphanFilesOptions, RemoveOrphanFilesOutcome, SharedLocationMode, remove_orphan_files,
};
pub use position_deletes::{
    DeleteGroupOutcome, DeleteGroupStatus, PlannedDeleteFile, PositionDeleteGroup,
    PositionDeletePlan, PreparedPositionDeleteRewrite, RewritePositionDeletes,
    RewritePositionDeletesOptions, RewritePositionDeletesOutcome, SkippedDeletes,
    plan_position_delete_rewrite, rewrite_position_deletes,
};
pub use run::{
    ControlSources, MaintenanceOptions, MaintenanceOutcome, MaintenanceRun, NATIVE_ENGINE,
    controls_from_receipts, run_plan,
};
