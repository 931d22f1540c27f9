//! Committing: Cryo's own writers, snapshot producer, rewrite validation, retries and catalog
//! compare-and-swap.
//!
//! Upstream `iceberg` 0.10 keeps its transaction actions and `TableCommit` builder crate-private,
//! so Cryo commits through this module (docs/architecture.md, "The commit protocol"). When upstream exposes them, this module
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
//! Every operation of Cryo's that commits (compaction, position-delete rewrite, manifest
//! rewrite, expiry) goes through one driver (`commit::driver`, crate-internal): it enters the
//! [`CommitFence`] (if any), hands the operation the head to validate against and stage on,
//! swaps, and on failure backs off, reloads and asks again; the operation says only what it
//! stages, what it validates between its base and the head, and what it leaves when it gives
//! up. A rewrite planned on snapshot `S0`:
//!
//! ```text
//!  loop: [fence] head = committer.load_head(S0)
//!        validate_rewrite(S0, head, replaced) ─▶ drop conflicting groups
//!        SnapshotProducer::replace(head) … with_data_sequence_number(S0.seq) ─▶ stage
//!        commit ─▶ done | error ─▶ CommitRetry::reload_after (backoff, reload head)
//!                                  an earlier attempt on the head ─▶ done
//!                                  spent ─▶ give up: delete what was written only when the
//!                                           table certainly does not reference it
//! ```
//!
//! Iceberg's own files (manifests, manifest lists, `metadata.json`) are read and written by
//! [`crate::format`]; the catalog-specific compare-and-swap lives in [`crate::catalog`].
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
//! - [`CommitFence`]: keeps Cryo's commits and cooperating writers' operations apart.
//! - Table creation ([`NewTable`], `Catalog::create_table`) for SQL, Hadoop and REST catalogs.
//!
//! Time comes from an injected [`Clock`](crate::clock::Clock): snapshot timestamps and a new
//! table's `last-updated-ms` are the clock's, so histories can be replayed deterministically.

pub(crate) mod driver;
mod fence;
mod fence_objects;
mod files;
mod producer;
mod retry;
mod summary;
pub(crate) use summary::expect_counts;
mod validate;
pub(crate) mod write;

pub use crate::catalog::{
    CatalogCommitter, HadoopCommitter, NewTable, RestCommitter, SqlCommitter, TableChanges,
};
pub use fence::{CommitFence, FenceGuard};
pub use files::{LiveFile, live_files};
pub(crate) use files::{read_manifest_list, read_manifests};
pub(crate) use producer::manifest_size_model;
pub use producer::{
    Change, CommitOutcome, ManifestClusters, Replace, SnapshotKind, SnapshotProducer,
    StagedSnapshot, certainly_not_committed,
};
// Manifest rewrites (`maintain::RewriteManifests`) are Cryo's own operation, not API.
pub(crate) use producer::{
    ENTRIES_PROCESSED, ExistingEntry, MANIFESTS_CREATED, MANIFESTS_KEPT, MANIFESTS_REPLACED,
    NewManifest, existing_entries,
};
pub use retry::{CommitRetry, RetryPolicy};
pub use validate::{
    RewriteConflict, RewriteConflictKind, is_ancestor, live_subset, validate_rewrite,
};
pub use write::{
    DeletionVectors, POS_DELETE_FILE_PATH_FIELD_ID, POS_DELETE_POS_FIELD_ID, WrittenFiles,
    write_data_files, write_deletion_vectors, write_equality_deletes, write_position_deletes,
};
pub(crate) use write::{write_deletion_vectors_of, write_position_deletes_of};

pub(crate) use crate::error::iceberg_error;
