//! One commit driver for every operation that commits: compaction, position-delete rewrite,
//! manifest rewrite and expiry each state what they do in an attempt and what they leave when
//! they give up; the loop around that is written once, here.
//!
//! ```text
//!  loop:  op.prepare(head)                  work that need not hold writers back (read, plan)
//!         enter the commit fence, if any ─▶ head reloaded inside it
//!         op.attempt(head)                  validate base..head, stage ─▶ Nothing | Snapshot | Changes
//!         compare-and-swap through the catalog's committer
//!           ok ─▶ Landed
//!           err ─▶ leave the fence; back off; reload the head (CommitRetry)
//!                  an earlier attempt is on the head after all ─▶ Landed (recovered)
//!                  retries spent, or not retryable ─▶ op.give_up(err, delete_written)
//! ```
//!
//! The rule for a commit of unknown outcome (a timeout, a lost answer, a 5xx after the catalog
//! may have applied it): `give_up` is told not to delete what the operation wrote unless the
//! failure certainly left the table untouched ([`certainly_not_committed`]). Files that stay
//! behind are orphans at worst; files deleted under a committed snapshot are lost data.
//!
//! What an operation validates is its own (a rewrite drops the groups whose files a concurrent
//! commit removed or hit with deletes, a manifest rewrite plans again, expiry selects again);
//! the driver only guarantees that `attempt` sees every head it commits on, and the fence
//! guarantees no cooperating writer moves that head between the attempt and the swap.

use std::collections::HashMap;

use super::fence::{CommitFence, enter_fence};
use super::producer::{StagedSnapshot, certainly_not_committed};
use super::retry::{CommitRetry, RetryPolicy};
use crate::catalog::{CatalogCommitter, LoadedTable, TableChanges};
use crate::error::{Error, Result};

/// What an operation hands the driver for one attempt.
pub(crate) enum Attempt {
    /// Nothing is left to commit on this head (validation dropped it all, or it is done).
    Nothing,
    /// A snapshot to commit.
    Snapshot(Box<StagedSnapshot>),
    /// Metadata changes without a new snapshot (expiry), made on the head given.
    Changes(TableChanges),
}

/// Whether an operation still has something to commit after [`CommitOp::prepare`].
pub(crate) enum Prepared {
    Ready,
    Nothing,
}

/// What the driver tells an attempt.
pub(crate) struct AttemptContext<'a> {
    /// Whether the attempt runs inside the commit fence.
    pub(crate) fenced: bool,
    /// The retry loop, for an operation that spends an attempt without committing (see
    /// [`CommitRetry::next_wait`]).
    pub(crate) retry: &'a mut CommitRetry,
    /// An earlier attempt's outcome is unknown: it may have landed (and its snapshot may be gone
    /// from the head already, expired by another writer), so nothing it wrote may be deleted,
    /// even for a group this attempt drops. Orphan removal finds what is truly unreferenced.
    pub(crate) outcome_unknown: bool,
}

/// An operation that commits through the driver.
pub(crate) trait CommitOp {
    /// Work before the fence is entered on `head` (reading, planning): the fence holds
    /// cooperating writers back, so what can be done outside it is done here.
    async fn prepare(&mut self, _head: &LoadedTable) -> Result<Prepared> {
        Ok(Prepared::Ready)
    }

    /// Validate what the commits between the operation's base and `head` did to it, and stage
    /// the attempt on `head`. An error ends the commit: the driver calls
    /// [`give_up`](Self::give_up) with it (unless [`retry_on`](Self::retry_on) says the error
    /// spends an attempt instead: the head is then reloaded and the operation tries again).
    async fn attempt(&mut self, head: &LoadedTable, cx: AttemptContext<'_>) -> Result<Attempt>;

    /// Whether an error of [`attempt`](Self::attempt) is a reason to reload the head and try
    /// again (an attempt spent) rather than to give up. Default: never.
    fn retry_on(&self, _err: &Error) -> bool {
        false
    }

    /// The commit is given up with `err`. `delete_written`: the table certainly does not
    /// reference what the operation wrote, which may be deleted; when false the outcome of an
    /// attempt is unknown and every file written must stay.
    async fn give_up(&mut self, _err: &Error, _delete_written: bool, _attempts: u32) {}
}

/// A commit that landed.
#[derive(Debug)]
pub(crate) struct Landed {
    /// The snapshot committed (`None` for metadata changes).
    pub(crate) snapshot_id: Option<i64>,
    /// Its summary's properties.
    pub(crate) summary: HashMap<String, String>,
    /// The table after the commit.
    pub(crate) table: LoadedTable,
    /// The head the committed attempt was made on (for one recovered after an unknown outcome:
    /// the head before the reload that found it).
    pub(crate) staged_on: LoadedTable,
    /// Found on the head after an attempt whose outcome was unknown.
    pub(crate) recovered: bool,
}

/// How a driven commit ended, when it did not fail.
#[derive(Debug)]
pub(crate) enum Driven {
    Landed(Box<Landed>),
    /// Nothing to commit, on the head given.
    Nothing(Box<LoadedTable>),
}

/// The commit loop of one operation on one table.
pub(crate) struct CommitDriver<'a> {
    committer: &'a dyn CatalogCommitter,
    fence: Option<(&'a CommitFence, &'a str)>,
    retry: CommitRetry,
}

impl<'a> CommitDriver<'a> {
    /// A driver committing through `committer` under `policy` (validated here).
    pub(crate) fn new(committer: &'a dyn CatalogCommitter, policy: RetryPolicy) -> Result<Self> {
        Ok(Self {
            committer,
            fence: None,
            retry: CommitRetry::new(policy)?,
        })
    }

    /// Enter `fence` (of the catalog named `catalog`) around each attempt.
    pub(crate) fn with_fence(mut self, fence: Option<&'a CommitFence>, catalog: &'a str) -> Self {
        self.fence = fence.map(|f| (f, catalog));
        self
    }

    /// Failed attempts so far.
    pub(crate) fn retries(&self) -> u32 {
        self.retry.failed_attempts()
    }

    /// Run `op`'s attempts from `head` until one lands, nothing is left, or the driver gives up
    /// (the error, after [`CommitOp::give_up`]). `head` follows every reload.
    pub(crate) async fn drive(
        &mut self,
        head: &mut LoadedTable,
        op: &mut impl CommitOp,
    ) -> Result<Driven> {
        let mut unknown = false;
        loop {
            match self.attempt(head, op, unknown).await {
                Ok(Step::Done(ended)) => return Ok(ended),
                Ok(Step::Failed(e)) => {
                    unknown |= !certainly_not_committed(&e);
                    match self.reload(head, e).await {
                        Ok(Some(landed)) => return Ok(Driven::Landed(Box::new(landed))),
                        Ok(None) => {}
                        Err(e) => {
                            op.give_up(&e, !unknown, self.retries()).await;
                            return Err(e);
                        }
                    }
                }
                Err(e) if op.retry_on(&e) => match self.reload(head, e).await {
                    Ok(Some(landed)) => return Ok(Driven::Landed(Box::new(landed))),
                    Ok(None) => {}
                    Err(e) => {
                        op.give_up(&e, !unknown, self.retries()).await;
                        return Err(e);
                    }
                },
                Err(e) => {
                    op.give_up(&e, !unknown, self.retries()).await;
                    return Err(e);
                }
            }
        }
    }

    /// One attempt: prepare, enter the fence, stage, swap.
    async fn attempt(
        &mut self,
        head: &mut LoadedTable,
        op: &mut impl CommitOp,
        outcome_unknown: bool,
    ) -> Result<Step> {
        if let Prepared::Nothing = op.prepare(head).await? {
            return Ok(Step::Done(Driven::Nothing(Box::new(head.clone()))));
        }
        // Under the fence (if any), the attempt is staged on the head as the writers in
        // flight left it, and no cooperating writer moves it before the swap.
        let guard = match self.fence {
            Some((fence, catalog)) => match enter_fence(fence, catalog, self.committer, head).await
            {
                Ok((guard, fresh)) => {
                    *head = fresh;
                    Some(guard)
                }
                Err(e) => return Ok(Step::Failed(e)),
            },
            None => None,
        };
        let cx = AttemptContext {
            fenced: guard.is_some(),
            retry: &mut self.retry,
            outcome_unknown,
        };
        match op.attempt(head, cx).await? {
            Attempt::Nothing => Ok(Step::Done(Driven::Nothing(Box::new(head.clone())))),
            Attempt::Snapshot(staged) => {
                self.retry.staged(&staged);
                match staged.commit(self.committer).await {
                    Ok(c) => Ok(Step::Done(Driven::Landed(Box::new(Landed {
                        snapshot_id: Some(c.snapshot_id),
                        summary: c.summary,
                        staged_on: std::mem::replace(head, c.table.clone()),
                        table: c.table,
                        recovered: false,
                    })))),
                    Err(e) => Ok(Step::Failed(e)),
                }
            }
            Attempt::Changes(changes) => match self.committer.commit(head, changes).await {
                Ok(table) => Ok(Step::Done(Driven::Landed(Box::new(Landed {
                    snapshot_id: None,
                    summary: HashMap::new(),
                    staged_on: std::mem::replace(head, table.clone()),
                    table,
                    recovered: false,
                })))),
                Err(e) => Ok(Step::Failed(e)),
            },
        }
    }

    /// After a failed attempt: back off and reload `head`; an earlier attempt found on it.
    async fn reload(&mut self, head: &mut LoadedTable, err: Error) -> Result<Option<Landed>> {
        tracing::info!(table = %head.id, error = %err, "commit attempt failed; reloading");
        let next = self.retry.reload_after(self.committer, head, err).await?;
        let staged_on = std::mem::replace(head, next);
        Ok(self.retry.landed(head).map(|id| Landed {
            snapshot_id: Some(id),
            summary: head
                .metadata
                .snapshot_by_id(id)
                .map(|s| s.summary().additional_properties.clone())
                .unwrap_or_default(),
            table: head.clone(),
            staged_on,
            recovered: true,
        }))
    }
}

/// One attempt's end.
enum Step {
    Done(Driven),
    /// The swap (or entering the fence) failed with this error.
    Failed(Error),
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    use async_trait::async_trait;
    use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

    use super::*;
    use crate::catalog::{Catalog, CatalogConfig, Namespace, NewTable, TableId};
    use crate::commit::{SnapshotProducer, write_data_files};

    /// A committer over a real one that fails in the ways a catalog can: the first `lose`
    /// commits apply and then lose their answer (outcome unknown), the next `fail` ones fail
    /// before applying with an error of unknown outcome, and the first `down` reloads fail.
    #[derive(Debug)]
    struct Faulty {
        inner: Arc<dyn CatalogCommitter>,
        lose: AtomicU32,
        fail: AtomicU32,
        down: AtomicU32,
    }

    fn unknown() -> Error {
        Error::Storage {
            path: "catalog".into(),
            message: "timed out waiting for the answer".into(),
            source: None,
            retryable: true,
        }
    }

    fn take(n: &AtomicU32) -> bool {
        n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| v.checked_sub(1))
            .is_ok()
    }

    #[async_trait]
    impl CatalogCommitter for Faulty {
        async fn load_head(&self, base: &LoadedTable) -> Result<LoadedTable> {
            if take(&self.down) {
                return Err(unknown());
            }
            self.inner.load_head(base).await
        }

        async fn commit(&self, base: &LoadedTable, changes: TableChanges) -> Result<LoadedTable> {
            if take(&self.lose) {
                self.inner.commit(base, changes).await?;
                return Err(unknown());
            }
            if take(&self.fail) {
                return Err(unknown());
            }
            self.inner.commit(base, changes).await
        }
    }

    /// Appends one file; records how it was given up.
    struct Append {
        given_up: Vec<(String, bool)>,
        attempts: u32,
    }

    impl CommitOp for Append {
        async fn attempt(&mut self, head: &LoadedTable, _: AttemptContext<'_>) -> Result<Attempt> {
            self.attempts += 1;
            let written = write_data_files(head, [batch()]).await?;
            let staged = SnapshotProducer::new(head)
                .add_data_files(written.files)
                .stage()
                .await?;
            Ok(Attempt::Snapshot(Box::new(staged)))
        }

        async fn give_up(&mut self, err: &Error, delete_written: bool, _: u32) {
            self.given_up.push((err.code().to_string(), delete_written));
        }
    }

    fn batch() -> arrow_array::RecordBatch {
        arrow_array::RecordBatch::try_new(
            Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
                "id",
                arrow_schema::DataType::Int64,
                false,
            )])),
            vec![Arc::new(arrow_array::Int64Array::from(vec![1, 2, 3]))],
        )
        .unwrap()
    }

    async fn table(dir: &std::path::Path) -> (Arc<dyn CatalogCommitter>, LoadedTable) {
        let mut config = CatalogConfig::local("t", dir);
        config
            .properties
            .insert("init_catalog_tables".into(), "true".into());
        let catalog = Catalog::connect(config).await.unwrap();
        catalog
            .create_namespace(&Namespace::new(["db"]))
            .await
            .unwrap();
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            ])
            .build()
            .unwrap();
        let t = catalog
            .create_table(&TableId::parse("db.t").unwrap(), NewTable::new(schema))
            .await
            .unwrap();
        (catalog.committer().unwrap(), t)
    }

    fn fast() -> RetryPolicy {
        RetryPolicy {
            min_backoff_ms: 1,
            max_backoff_ms: 2,
            ..RetryPolicy::default()
        }
    }

    #[tokio::test]
    async fn an_attempt_whose_answer_was_lost_is_found_on_the_head() {
        let dir = tempfile::tempdir().unwrap();
        let (inner, base) = table(dir.path()).await;
        // The commit applies but its answer is lost, and so is the reload right after it.
        let faulty = Faulty {
            inner,
            lose: AtomicU32::new(1),
            fail: AtomicU32::new(0),
            down: AtomicU32::new(1),
        };
        let mut op = Append {
            given_up: Vec::new(),
            attempts: 0,
        };
        let mut head = base.clone();
        let mut driver = CommitDriver::new(&faulty, fast()).unwrap();
        let Driven::Landed(landed) = driver.drive(&mut head, &mut op).await.unwrap() else {
            panic!("nothing committed")
        };
        assert!(landed.recovered);
        assert_eq!(op.attempts, 1, "not committed twice");
        assert_eq!(head.metadata.snapshots().count(), 1);
        assert_eq!(landed.snapshot_id, head.metadata.current_snapshot_id());
        assert_eq!(driver.retries(), 1);
        assert!(op.given_up.is_empty());
    }

    #[tokio::test]
    async fn files_stay_when_an_attempt_s_outcome_is_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let (inner, base) = table(dir.path()).await;
        // The commit fails without an answer, and the catalog is then unreachable.
        let faulty = Faulty {
            inner: Arc::clone(&inner),
            lose: AtomicU32::new(0),
            fail: AtomicU32::new(1),
            down: AtomicU32::new(u32::MAX),
        };
        let mut op = Append {
            given_up: Vec::new(),
            attempts: 0,
        };
        let mut head = base.clone();
        let mut driver = CommitDriver::new(&faulty, fast()).unwrap();
        let err = driver.drive(&mut head, &mut op).await.unwrap_err();
        assert_eq!(err.code(), "storage");
        assert_eq!(op.given_up, vec![("storage".to_string(), false)]);

        // A conflict that is refused before anything applies, retries spent: files may go.
        let mut op = Append {
            given_up: Vec::new(),
            attempts: 0,
        };
        let mut driver = CommitDriver::new(inner.as_ref(), RetryPolicy::no_retries()).unwrap();
        let mut stale = base.clone();
        SnapshotProducer::new(&base)
            .add_data_files(write_data_files(&base, [batch()]).await.unwrap().files)
            .commit(inner.as_ref())
            .await
            .unwrap();
        let err = driver.drive(&mut stale, &mut op).await.unwrap_err();
        assert_eq!(err.code(), "commit_conflict");
        assert_eq!(op.given_up, vec![("commit_conflict".to_string(), true)]);
    }
}
