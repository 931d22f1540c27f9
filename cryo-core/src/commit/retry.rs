//! Retrying commits that lost a race: bounded exponential backoff with jitter, and a reload of
//! the head through the committer before each new attempt.
//!
//! Cryo's own operations run it through the commit driver (`commit::driver`); an application
//! committing with [`SnapshotProducer`](super::SnapshotProducer) drives it itself, because what
//! to do between attempts is its business (a rewrite re-validates and drops conflicting groups;
//! an append just restages):
//!
//! ```text
//! let mut retry = CommitRetry::new(policy)?;          // or RetryPolicy::for_table(..)
//! let mut head = committer.load_head(&s0).await?;
//! loop {
//!     let conflicts = validate_rewrite(&s0, &head, &replaced).await?;   // drop those groups
//!     let staged = SnapshotProducer::replace(&head) … .stage().await?;
//!     retry.staged(&staged);
//!     match staged.commit(committer).await {
//!         Ok(outcome) => break outcome,
//!         Err(e) => head = retry.reload_after(committer, &head, e).await?,  // waits, reloads
//!     }
//!     if let Some(id) = retry.landed(&head) { /* an earlier attempt did commit */ }
//! }
//! ```

use std::collections::BTreeSet;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::producer::StagedSnapshot;
use super::validate::is_ancestor;
use crate::catalog::CatalogCommitter;
use crate::catalog::LoadedTable;
use crate::error::{Error, Result};

/// Java's table properties for commit retries (`TableProperties.COMMIT_*`).
const NUM_RETRIES: &str = "commit.retry.num-retries";
const MIN_WAIT_MS: &str = "commit.retry.min-wait-ms";
const MAX_WAIT_MS: &str = "commit.retry.max-wait-ms";
const TOTAL_TIMEOUT_MS: &str = "commit.retry.total-timeout-ms";

/// How often and how patiently a commit is retried after losing a race (or a transient
/// failure). Defaults are Java's (`commit.retry.*`): 5 attempts, waits from 100 ms doubling up
/// to 60 s, 30 minutes in all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryPolicy {
    /// Commit attempts in all, the first one included (at least 1; Java's `num-retries` + 1).
    pub max_attempts: u32,
    /// Wait before the first retry, in milliseconds.
    pub min_backoff_ms: u64,
    /// Longest single wait, in milliseconds.
    pub max_backoff_ms: u64,
    /// Growth of the wait from one retry to the next (at least 1).
    pub multiplier: f64,
    /// Share of each wait drawn at random, in `[0, 1]`, so that writers that collided do not
    /// collide again: a wait `w` becomes a value in `[w·(1 − jitter), w]`.
    pub jitter: f64,
    /// No new attempt starts once this many milliseconds have passed since the first.
    pub total_timeout_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            min_backoff_ms: 100,
            max_backoff_ms: 60_000,
            multiplier: 2.0,
            jitter: 0.2,
            total_timeout_ms: 30 * 60 * 1000,
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn no_retries() -> Self {
        Self {
            max_attempts: 1,
            ..Self::default()
        }
    }

    /// The defaults, overridden by the table's `commit.retry.num-retries`, `min-wait-ms`,
    /// `max-wait-ms` and `total-timeout-ms` properties (Java's), so a table tuned for Spark is
    /// retried the same way by Cryo. A malformed value is an error, not a silent default.
    pub fn for_table(properties: &HashMap<String, String>) -> Result<Self> {
        let get = |key: &str| -> Result<Option<u64>> {
            properties
                .get(key)
                .map(|v| {
                    v.trim().parse::<u64>().map_err(|_| {
                        Error::config(format!(
                            "table property {key}={v} is not a non-negative integer"
                        ))
                    })
                })
                .transpose()
        };
        let mut policy = Self::default();
        if let Some(n) = get(NUM_RETRIES)? {
            policy.max_attempts = u32::try_from(n)
                .ok()
                .and_then(|n| n.checked_add(1))
                .ok_or_else(|| {
                    Error::config(format!("table property {NUM_RETRIES}={n} is too large"))
                })?;
        }
        if let Some(v) = get(MIN_WAIT_MS)? {
            policy.min_backoff_ms = v;
        }
        if let Some(v) = get(MAX_WAIT_MS)? {
            policy.max_backoff_ms = v;
        }
        if let Some(v) = get(TOTAL_TIMEOUT_MS)? {
            policy.total_timeout_ms = v;
        }
        policy.validate()?;
        Ok(policy)
    }

    /// Reject settings that cannot work, with a message that says which and why.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::validation(format!("retry policy: {m}")));
        if self.max_attempts == 0 {
            return bad("max_attempts must be at least 1 (the first attempt counts)".into());
        }
        if self.min_backoff_ms > self.max_backoff_ms {
            return bad(format!(
                "min_backoff_ms ({}) exceeds max_backoff_ms ({})",
                self.min_backoff_ms, self.max_backoff_ms
            ));
        }
        if !self.multiplier.is_finite() || self.multiplier < 1.0 {
            return bad(format!(
                "multiplier must be a finite number >= 1, got {}",
                self.multiplier
            ));
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            return bad(format!("jitter must lie in [0, 1], got {}", self.jitter));
        }
        if self.total_timeout_ms == 0 {
            return bad("total_timeout_ms must be positive".into());
        }
        Ok(())
    }

    /// The wait before retry number `retry` (1 for the first retry), given a uniform random
    /// draw `random` in `[0, 1)`: `min · multiplierʳᵉᵗʳʸ⁻¹`, capped at `max`, less up to
    /// `jitter` of it. Pure, so the schedule can be tested and shown.
    pub fn backoff(&self, retry: u32, random: f64) -> Duration {
        let exp = i32::try_from(retry.saturating_sub(1)).unwrap_or(i32::MAX);
        let full = (self.min_backoff_ms as f64 * self.multiplier.powi(exp))
            .min(self.max_backoff_ms as f64);
        let random = random.clamp(0.0, 1.0);
        let wait = full * (1.0 - self.jitter * random);
        Duration::from_millis(wait.max(0.0).round() as u64)
    }
}

/// The state of one commit's retry loop: attempts made, time spent, snapshots staged.
#[derive(Debug, Clone)]
pub struct CommitRetry {
    policy: RetryPolicy,
    attempts: u32,
    started: Instant,
    staged: BTreeSet<i64>,
}

impl CommitRetry {
    /// A loop under `policy` (validated here); the clock starts now.
    pub fn new(policy: RetryPolicy) -> Result<Self> {
        policy.validate()?;
        Ok(Self {
            policy,
            attempts: 0,
            started: Instant::now(),
            staged: BTreeSet::new(),
        })
    }

    /// The policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// Failed attempts so far.
    pub fn failed_attempts(&self) -> u32 {
        self.attempts
    }

    /// Remember a snapshot staged for an attempt, so that [`landed`](Self::landed) can tell
    /// whether an attempt whose outcome was unknown committed after all.
    pub fn staged(&mut self, staged: &StagedSnapshot) {
        self.staged.insert(staged.snapshot_id());
    }

    /// The id of a snapshot staged by an earlier attempt that `head`'s `main` contains: that
    /// attempt committed (its error came after the catalog applied it), and the caller must
    /// treat its files as committed rather than retry or delete them.
    pub fn landed(&self, head: &LoadedTable) -> Option<i64> {
        self.staged
            .iter()
            .copied()
            .find(|id| is_ancestor(head, *id))
    }

    /// After an attempt failed with `err`: the wait before the next one, or `err` back when it
    /// is not worth retrying — not a conflict and not transient, or the policy is spent.
    pub fn next_wait(&mut self, err: Error) -> Result<Duration> {
        self.attempts = self.attempts.saturating_add(1);
        if !err.is_retryable() || self.attempts >= self.policy.max_attempts {
            return Err(err);
        }
        let wait = self.policy.backoff(self.attempts, crate::random::unit());
        let deadline = Duration::from_millis(self.policy.total_timeout_ms);
        if self.started.elapsed() + wait > deadline {
            return Err(err);
        }
        Ok(wait)
    }

    /// After an attempt on `table` failed with `err`: wait (bounded exponential backoff with
    /// jitter), then reload the head through `committer` and return it for the next attempt;
    /// or return `err` when [`next_wait`](Self::next_wait) says to stop.
    pub async fn reload_after(
        &mut self,
        committer: &dyn CatalogCommitter,
        table: &LoadedTable,
        err: Error,
    ) -> Result<LoadedTable> {
        let wait = self.next_wait(err)?;
        tracing::debug!(table = %table.id, attempt = self.attempts, wait_ms = wait.as_millis() as u64, "retrying commit");
        tokio::time::sleep(wait).await;
        committer.load_head(table).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_bounded() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff(1, 0.0), Duration::from_millis(100));
        assert_eq!(p.backoff(2, 0.0), Duration::from_millis(200));
        assert_eq!(p.backoff(4, 0.0), Duration::from_millis(800));
        assert_eq!(p.backoff(30, 0.0), Duration::from_mins(1));
        assert_eq!(p.backoff(u32::MAX, 0.0), Duration::from_mins(1));
        // Jitter only shortens, by at most `jitter`.
        assert_eq!(p.backoff(1, 0.5), Duration::from_millis(90));
        for _ in 0..100 {
            let w = p.backoff(3, crate::random::unit());
            assert!(w <= Duration::from_millis(400) && w >= Duration::from_millis(320));
        }
    }

    #[test]
    fn validation_rejects_what_cannot_work() {
        assert!(RetryPolicy::default().validate().is_ok());
        assert!(RetryPolicy::no_retries().validate().is_ok());
        for bad in [
            RetryPolicy {
                max_attempts: 0,
                ..RetryPolicy::default()
            },
            RetryPolicy {
                min_backoff_ms: 10,
                max_backoff_ms: 5,
                ..RetryPolicy::default()
            },
            RetryPolicy {
                multiplier: 0.5,
                ..RetryPolicy::default()
            },
            RetryPolicy {
                multiplier: f64::NAN,
                ..RetryPolicy::default()
            },
            RetryPolicy {
                jitter: 1.5,
                ..RetryPolicy::default()
            },
            RetryPolicy {
                total_timeout_ms: 0,
                ..RetryPolicy::default()
            },
        ] {
            let e = bad.validate().unwrap_err();
            assert!(matches!(e, Error::Validation { .. }), "{e}");
            assert!(CommitRetry::new(bad).is_err());
        }
    }

    #[test]
    fn serde_defaults_and_unknown_fields() {
        let p: RetryPolicy = serde_json::from_str(r#"{"max_attempts": 3}"#).unwrap();
        assert_eq!(p.max_attempts, 3);
        assert_eq!(p.min_backoff_ms, 100);
        assert!(serde_json::from_str::<RetryPolicy>(r#"{"max_attempt": 3}"#).is_err());
        let round: RetryPolicy =
            serde_json::from_str(&serde_json::to_string(&RetryPolicy::default()).unwrap()).unwrap();
        assert_eq!(round, RetryPolicy::default());
    }

    #[test]
    fn table_properties_override_defaults() {
        let props = HashMap::from([
            (NUM_RETRIES.to_string(), "2".to_string()),
            (MIN_WAIT_MS.to_string(), "5".to_string()),
            (MAX_WAIT_MS.to_string(), "50".to_string()),
        ]);
        let p = RetryPolicy::for_table(&props).unwrap();
        assert_eq!(
            (p.max_attempts, p.min_backoff_ms, p.max_backoff_ms),
            (3, 5, 50)
        );
        let bad = HashMap::from([(MIN_WAIT_MS.to_string(), "soon".to_string())]);
        assert!(matches!(
            RetryPolicy::for_table(&bad),
            Err(Error::Config { .. })
        ));
        let inverted = HashMap::from([(MIN_WAIT_MS.to_string(), "90000".to_string())]);
        assert!(RetryPolicy::for_table(&inverted).is_err());
    }

    #[test]
    fn attempts_are_bounded_and_only_retryable_errors_retry() {
        let conflict = || Error::CommitConflict {
            table: "t".into(),
            message: "lost".into(),
            retryable: true,
        };
        let mut r = CommitRetry::new(RetryPolicy {
            max_attempts: 3,
            min_backoff_ms: 1,
            max_backoff_ms: 2,
            ..RetryPolicy::default()
        })
        .unwrap();
        assert!(r.next_wait(conflict()).is_ok());
        assert!(r.next_wait(conflict()).is_ok());
        let e = r.next_wait(conflict()).unwrap_err();
        assert!(matches!(e, Error::CommitConflict { .. }));
        assert_eq!(r.failed_attempts(), 3);

        // A conflict validation found final is not retried, and says so.
        let final_conflict = Error::CommitConflict {
            table: "t".into(),
            message: "the table was replaced".into(),
            retryable: false,
        };
        assert!(!final_conflict.is_retryable());
        let mut r = CommitRetry::new(RetryPolicy::default()).unwrap();
        assert!(r.next_wait(final_conflict).is_err());

        let mut r = CommitRetry::new(RetryPolicy::default()).unwrap();
        let e = r
            .next_wait(Error::Validation {
                message: "bad".into(),
            })
            .unwrap_err();
        assert!(matches!(e, Error::Validation { .. }));
        let transient = Error::Catalog {
            catalog: "c".into(),
            message: "503".into(),
            source: None,
            retryable: true,
        };
        assert!(r.next_wait(transient).is_ok());
    }
}
