//! A staged snapshot: its commit through the catalog, the outcome, and the cleanup of what it
//! wrote when it certainly did not commit.

use super::CommitOutcome;
use super::StagedSnapshot;
use crate::catalog::LoadedTable;
use crate::catalog::committer::CatalogCommitter;
use crate::catalog::committer::TableChanges;
use crate::catalog::committer::discard;
use crate::error::Error;
use crate::error::Result;
use iceberg::TableRequirement;
use iceberg::TableUpdate;
use iceberg::spec::MAIN_BRANCH;
use iceberg::spec::Snapshot;
use iceberg::spec::SnapshotReference;
use iceberg::spec::SnapshotRetention;
use iceberg::spec::TableMetadata;

/// Names of the metadata files one staged snapshot writes.
pub(super) struct ManifestNames {
    pub(super) snapshot_id: i64,
    pub(super) commit_uuid: uuid::Uuid,
    pub(super) next: u32,
}

impl StagedSnapshot {
    /// The id of the snapshot this commit adds.
    pub fn snapshot_id(&self) -> i64 {
        self.snapshot.snapshot_id()
    }

    /// The table it was staged on.
    pub fn base(&self) -> &LoadedTable {
        &self.base
    }

    /// Commit through `committer`.
    ///
    /// - `Ok`: committed; the outcome holds the new head.
    /// - [`Error::CommitConflict`] or [`Error::Validation`]: certainly not committed; the staged
    ///   manifests and manifest list are deleted (see [`certainly_not_committed`]).
    /// - Any other error leaves the outcome of the swap unknown (a dropped connection, a REST
    ///   server's 5xx or a timeout). The head is then reloaded once: if it lists this snapshot,
    ///   the commit happened and this returns `Ok`; otherwise the error is returned and the staged
    ///   files are kept, since a request still in flight may yet commit them.
    pub async fn commit(self, committer: &dyn CatalogCommitter) -> Result<CommitOutcome> {
        match committer.commit(&self.base, self.changes.clone()).await {
            Ok(table) => Ok(self.outcome(table)),
            Err(e) if certainly_not_committed(&e) => {
                self.abort().await;
                Err(e)
            }
            Err(e) => match committer.load_head(&self.base).await {
                Ok(head) if head.metadata.snapshot_by_id(self.snapshot_id()).is_some() => {
                    tracing::info!(
                        table = %self.base.id,
                        snapshot_id = self.snapshot_id(),
                        error = %e,
                        "the commit reported an error but the table lists its snapshot"
                    );
                    Ok(self.outcome(head))
                }
                _ => Err(e),
            },
        }
    }

    fn outcome(self, table: LoadedTable) -> CommitOutcome {
        CommitOutcome {
            table,
            snapshot_id: self.snapshot.snapshot_id(),
            sequence_number: self.snapshot.sequence_number(),
            timestamp_ms: self.snapshot.timestamp_ms(),
            operation: self.snapshot.summary().operation.as_str().to_string(),
            summary: self.snapshot.summary().additional_properties.clone(),
            added_data_files: self.added_data_files,
            added_delete_files: self.added_delete_files,
            removed_data_files: self.removed_data_files,
            removed_delete_files: self.removed_delete_files,
            written_files: self.written_files,
        }
    }

    /// Delete the files written for this snapshot (it will not be committed).
    pub async fn abort(self) {
        for f in &self.written_files {
            discard(&self.base.storage, f).await;
        }
    }
}

/// Whether a commit that failed with `err` certainly did not change the table: the catalog
/// refused it (a conflict, or changes it found invalid) before applying anything.
///
/// Only then may the files written for it — staged metadata, and for a rewrite its new data
/// files — be deleted. Any other error (I/O during the swap, a REST server's 5xx, a timeout)
/// leaves the commit's fate unknown; deleting files then could corrupt a table that did commit.
pub fn certainly_not_committed(err: &Error) -> bool {
    matches!(
        err,
        Error::CommitConflict { .. }
            | Error::Validation { .. }
            | Error::Unsupported { .. }
            | Error::NotFound { .. }
    )
}

/// What committing `snapshot` on `md` asks of the catalog: the same table (UUID), `main` still
/// at the parent; then add the snapshot and move `main` to it, keeping `main`'s retention.
pub(super) fn commit_changes(
    table: &str,
    md: &TableMetadata,
    snapshot: &Snapshot,
) -> Result<TableChanges> {
    Ok(TableChanges::new(
        vec![
            TableRequirement::UuidMatch { uuid: md.uuid() },
            TableRequirement::RefSnapshotIdMatch {
                r#ref: MAIN_BRANCH.to_string(),
                snapshot_id: md.current_snapshot_id(),
            },
        ],
        vec![
            TableUpdate::AddSnapshot {
                snapshot: snapshot.clone(),
            },
            TableUpdate::SetSnapshotRef {
                ref_name: MAIN_BRANCH.to_string(),
                reference: SnapshotReference::new(
                    snapshot.snapshot_id(),
                    main_retention(table, md)?,
                ),
            },
        ],
    ))
}

/// A random positive snapshot id not used by the table.
pub(super) fn new_snapshot_id(md: &TableMetadata) -> i64 {
    loop {
        let id = (crate::random::u64() & (i64::MAX as u64)) as i64;
        if id != 0 && md.snapshot_by_id(id).is_none() {
            return id;
        }
    }
}

/// The retention settings of `main`, kept when the branch moves (Java's `setBranchSnapshot`).
///
/// `TableMetadata` does not expose its refs, only the snapshot they point at, so they are read
/// from its JSON form (the spec's).
pub(super) fn main_retention(table: &str, md: &TableMetadata) -> Result<SnapshotRetention> {
    let default = SnapshotRetention::branch(None, None, None);
    if md.current_snapshot_id().is_none() {
        return Ok(default);
    }
    let json = serde_json::to_value(md)
        .map_err(|e| Error::compute(format!("{table}: metadata to JSON"), e))?;
    match json.get("refs").and_then(|r| r.get(MAIN_BRANCH)) {
        Some(r) => serde_json::from_value::<SnapshotReference>(r.clone())
            .map(|r| r.retention)
            .map_err(|e| Error::metadata(table, "<refs>", format!("invalid main ref: {e}"))),
        None => Ok(default),
    }
}
