//! Committing: Cryo's own writers, snapshot producer, rewrite validation, retries and catalog
//! compare-and-swap.
//!
//! Upstream `iceberg` 0.10 keeps its transaction actions and `TableCommit` builder crate-private,
//! so Cryo commits through this module (DESIGN §4). When upstream exposes them, this module
//! shrinks and nothing else changes.
//!
//! ```text
//!  Arrow batches ──▶ write_data_files ─────────┐
//!  (path, positions) ──▶ write_position_deletes ─┤  DataFiles (Parquet, field ids, metrics)
//!  key batches ──▶ write_equality_deletes ──────┘
//!                                               │
//!                                               ▼
//!  base LoadedTable ──▶ SnapshotProducer ──stage──▶ StagedSnapshot
//!   (new / replace)      new data / delete manifests,      │  requirements (UUID, main == base)
//!                        touched manifests rewritten,      │  updates (AddSnapshot, SetSnapshotRef)
//!                        manifest list, summary            ▼
//!                                               CatalogCommitter::commit
//!                                  SQL / Hadoop: reload head ─▶ check requirements
//!                                                ─▶ apply updates ─▶ next metadata.json
//!                                                ─▶ compare-and-swap (SQL row / vN create)
//!                                  REST:         POST the changes; the server does the above
//!                                                ─▶ new head, or Error::CommitConflict
//! ```
//!
//! A rewrite (compaction) planned on snapshot `S0` and committed later runs this loop, driven
//! by its caller:
//!
//! ```text
//!  head = committer.load_head(S0)
//!  loop: validate_rewrite(S0, head, replaced) ─▶ drop conflicting groups
//!        SnapshotProducer::replace(head) … with_data_sequence_number(S0.seq) ─▶ stage
//!        commit ─▶ done | CommitConflict ─▶ CommitRetry::reload_after (backoff, reload head)
//! ```
//!
//! - [`CatalogCommitter`]: one implementation per catalog kind ([`SqlCommitter`] for the
//!   PyIceberg/Java SQL schema, [`HadoopCommitter`] for `vN.metadata.json` + `version-hint.text`
//!   tables, [`RestCommitter`] for Iceberg REST catalogs, which apply the changes server-side).
//!   A commit whose requirements fail against the current head, or whose compare-and-swap loses
//!   a race, is an [`Error::CommitConflict`](crate::Error::CommitConflict) and leaves the table untouched.
//! - [`SnapshotProducer`]: `append`, `delete` and `overwrite` snapshots from added data files,
//!   added position/equality delete files and removed data files, and `replace` snapshots
//!   ([`SnapshotProducer::replace`]) that also remove delete files and give rewritten rows the
//!   base's data sequence number; for format v1, v2 and v3 (row lineage kept).
//! - [`validate_rewrite`]: which replaced files a commit after the base makes unsafe to replace
//!   ([`RewriteConflict`]): removed concurrently, or hit by new position deletes / deletion
//!   vectors. Equality deletes never conflict (the sequence number keeps them applying).
//! - [`RetryPolicy`] and [`CommitRetry`]: bounded exponential backoff with jitter between
//!   attempts, a reload of the head, and recognition of an attempt that committed despite an
//!   error. [`certainly_not_committed`] tells when a failed commit's files may be deleted.
//! - Table creation ([`NewTable`], `Catalog::create_table`) for SQL, Hadoop and REST catalogs.
//!
//! Time comes from an injected [`Clock`](crate::clock::Clock): snapshot timestamps and a new
//! table's `last-updated-ms` are the clock's, so histories can be replayed deterministically.

mod fence;
mod files;
mod producer;
mod retry;
mod summary;
mod validate;
pub(crate) mod write;

pub use crate::catalog::{
    CatalogCommitter, HadoopCommitter, NewTable, RestCommitter, SqlCommitter, TableChanges,
};
pub(crate) use fence::enter_fence;
pub use fence::{CommitFence, FenceGuard};
pub use files::{LiveFile, live_files};
pub(crate) use files::{read_manifest_list, read_manifests};
pub(crate) use producer::manifest_size_model;
pub use producer::{
    CommitOutcome, ENTRIES_PROCESSED, ExistingEntry, MANIFESTS_CREATED, MANIFESTS_KEPT,
    MANIFESTS_REPLACED, ManifestClusters, NewManifest, SnapshotProducer, StagedSnapshot,
    certainly_not_committed, existing_entries,
};
pub use retry::{CommitRetry, RetryPolicy};
pub use validate::{
    RewriteConflict, RewriteConflictKind, is_ancestor, live_subset, validate_rewrite,
};
pub use write::{
    POS_DELETE_FILE_PATH_FIELD_ID, POS_DELETE_POS_FIELD_ID, WrittenFiles, write_data_files,
    write_equality_deletes, write_position_deletes,
};

pub(crate) use crate::error::iceberg_error;
