//! The plan: a serde value that can be printed, stored, diffed, fingerprinted and sent to a
//! worker. It holds operations and structured partition predicates, never SQL.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalog::TableId;
use crate::grade::Grade;
use crate::ops::Operation;

/// Current plan format.
pub const PLAN_FORMAT_VERSION: u32 = 1;

/// Maintenance work for a fleet of tables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MaintenancePlan {
    /// Plan format version.
    pub format_version: u32,
    /// Catalog the tables belong to.
    pub catalog: String,
    /// The `now` the plan was made for.
    pub created_at_ms: i64,
    /// Tables with work, worst grade first.
    pub tables: Vec<TablePlan>,
    /// Tables left out entirely, with the reason.
    pub skipped_tables: Vec<SkippedTable>,
    /// Fingerprint of the policy the plan was made under ([`crate::policy::Policy`]), if any:
    /// a changed policy shows in the plan's diff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// SHA-256 over the canonical JSON of everything above (see [`MaintenancePlan::compute_fingerprint`]).
    pub fingerprint: String,
}

/// A table that gets no work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedTable {
    /// Table.
    pub table: TableId,
    /// Why.
    pub reason: String,
}

/// The work for one table, operations in the fixed order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TablePlan {
    /// Table.
    pub table: TableId,
    /// Table UUID at planning time (a replaced table must not receive this plan).
    pub table_uuid: String,
    /// Snapshot the plan was computed from.
    pub base_snapshot_id: Option<i64>,
    /// Metadata file the plan was computed from.
    pub base_metadata_location: Option<String>,
    /// Format version.
    pub format_version: u8,
    /// Grade at planning time.
    pub grade: Grade,
    /// Score at planning time.
    pub score: u32,
    /// Planned operations, in [`Operation::ORDER`].
    pub steps: Vec<PlannedStep>,
    /// Operations the findings asked for but that were not planned, with the reason.
    pub skipped: Vec<SkippedStep>,
    /// The table's place under the policy the plan was made under, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<TablePolicy>,
}

/// A table's preset under a policy, as a plan records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TablePolicy {
    /// The preset.
    pub preset: String,
    /// How it got it: a rule (with its name and place), a per-table override, or the default.
    pub assignment: String,
    /// Where its work runs (`native`, `trino`, `spark`).
    pub destination: String,
}

/// An operation that was called for but not planned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedStep {
    /// Operation.
    pub operation: Operation,
    /// Why it was skipped or deferred.
    pub reason: String,
}

/// One planned operation on one table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedStep {
    /// Operation.
    pub operation: Operation,
    /// Operation parameters.
    pub params: StepParams,
    /// Work units. Partition-scoped operations have one or more chunks; table-wide operations
    /// (manifests, statistics, expiry, orphans) have exactly one whole-table chunk.
    pub chunks: Vec<Chunk>,
    /// Finding codes that called for it.
    pub because: Vec<String>,
    /// Projected saving per month (USD), from the cost model.
    pub saving_usd_month: f64,
}

impl PlannedStep {
    /// Bytes the step reads.
    pub fn input_bytes(&self) -> u64 {
        self.chunks
            .iter()
            .map(|c| c.input_bytes)
            .fold(0, u64::saturating_add)
    }

    /// Files the step reads.
    pub fn input_files(&self) -> u64 {
        self.chunks.iter().map(|c| c.input_files).sum()
    }
}

/// Strategy for rewriting data files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RewriteStrategy {
    /// Bin-pack files to the target size.
    #[default]
    BinPack,
    /// Sort by the table's sort order (`columns` empty) or by the given columns.
    Sort {
        /// Sort columns (`col`, `col DESC`, `col ASC NULLS LAST`); empty: the table's order.
        columns: Vec<String>,
    },
    /// Z-order by the given columns.
    ZOrder {
        /// Columns.
        columns: Vec<String>,
    },
    /// Hilbert-curve order by the given columns: like z-order, rows close on the curve are close
    /// in every column, without z-order's long jumps between quadrants (native engine only:
    /// neither Spark nor Trino has it).
    Hilbert {
        /// Columns.
        columns: Vec<String>,
    },
}

/// How a `convert_equality_deletes` step applies the equality deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum EqualityDeleteMethod {
    /// Rewrite every data file of the partitions with the deletes applied (a bin-pack): the
    /// only way Spark and Trino have, and what a partition that needs compacting anyway or a
    /// small table should get.
    #[default]
    Rewrite,
    /// Turn them into position deletes (v2) or deletion vectors (v3), reading only the key
    /// columns of the data files they apply to; the data files stay as they are (the native
    /// engine, [`crate::maintain::ConvertEqualityDeletes`]; Spark and Trino renderings rewrite).
    PositionDeletes,
}

/// Parameters per operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "operation", rename_all = "snake_case")]
pub enum StepParams {
    /// `convert_equality_deletes`.
    ConvertEqualityDeletes {
        /// How (plans written before the choice existed rewrite).
        #[serde(default)]
        method: EqualityDeleteMethod,
        /// Why the planner chose it.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        why: String,
    },
    /// `rewrite_position_deletes`.
    RewritePositionDeletes {
        /// Minimum delete files in a partition to combine them.
        min_input_files: u32,
    },
    /// `rewrite_data_files`.
    RewriteDataFiles {
        /// Strategy.
        strategy: RewriteStrategy,
        /// Output file size.
        target_file_size_bytes: u64,
        /// Files below this are rewritten.
        min_file_size_bytes: u64,
        /// Files above this are split.
        max_file_size_bytes: u64,
        /// A file group needs at least this many files to be rewritten.
        min_input_files: u32,
        /// A file with at least this many delete files attached is rewritten regardless of size.
        delete_file_threshold: u32,
    },
    /// `compute_statistics`.
    ComputeStatistics {
        /// Columns; empty: all.
        columns: Vec<String>,
    },
    /// `rewrite_manifests`.
    RewriteManifests {
        /// Target manifest size.
        target_manifest_size_bytes: u64,
    },
    /// `expire_snapshots`.
    ExpireSnapshots {
        /// Expire snapshots older than this instant (ms since epoch)…
        older_than_ms: i64,
        /// …but keep at least this many of the newest.
        retain_last: u32,
        /// The retention this corresponds to (`now - older_than_ms`), for engines that take a duration.
        retention_ms: i64,
    },
    /// `remove_orphan_files`.
    RemoveOrphanFiles {
        /// Only files older than this instant.
        older_than_ms: i64,
        /// The retention this corresponds to.
        retention_ms: i64,
        /// Report only (the default).
        dry_run: bool,
    },
}

impl StepParams {
    /// The operation these parameters belong to.
    pub fn operation(&self) -> Operation {
        match self {
            StepParams::ConvertEqualityDeletes { .. } => Operation::ConvertEqualityDeletes,
            StepParams::RewritePositionDeletes { .. } => Operation::RewritePositionDeletes,
            StepParams::RewriteDataFiles { .. } => Operation::RewriteDataFiles,
            StepParams::ComputeStatistics { .. } => Operation::ComputeStatistics,
            StepParams::RewriteManifests { .. } => Operation::RewriteManifests,
            StepParams::ExpireSnapshots { .. } => Operation::ExpireSnapshots,
            StepParams::RemoveOrphanFiles { .. } => Operation::RemoveOrphanFiles,
        }
    }
}

/// A unit of work: a set of partitions rewritten together, or the whole table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chunk {
    /// Position within the step.
    pub index: u32,
    /// The whole table (small tables, table-wide operations). `partitions` is then empty.
    pub whole_table: bool,
    /// Partitions in this chunk.
    pub partitions: Vec<PartitionTarget>,
    /// Files the chunk reads.
    pub input_files: u64,
    /// Bytes the chunk reads.
    pub input_bytes: u64,
    /// Files expected afterwards.
    pub expected_output_files: u64,
}

/// One partition and the predicate that selects exactly it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionTarget {
    /// Spec the partition belongs to.
    pub spec_id: i32,
    /// Partition path (`ts_day=2024-01-31/category=a`).
    pub path: String,
    /// Conjunction of per-field predicates on source columns.
    pub predicate: Vec<FieldPredicate>,
    /// Files selected.
    pub files: u64,
    /// Bytes selected.
    pub bytes: u64,
    /// Benefit per GiB rewritten (the ranking score).
    pub score: f64,
}

/// A predicate on one partition field, expressed on its source column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldPredicate {
    /// Source column (dotted for nested fields).
    pub column: String,
    /// Source column type (`timestamp`, `timestamptz`, `date`, `string`, `long`, …).
    pub column_type: String,
    /// Partition transform (`identity`, `day`, `bucket[16]`, …).
    pub transform: String,
    /// What the column must satisfy.
    pub kind: PredicateKind,
}

/// The constraint a partition puts on its source column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PredicateKind {
    /// `column = value` (identity partitions).
    Eq {
        /// Value.
        value: Literal,
    },
    /// `column IS NULL`.
    IsNull,
    /// `lower <= column < upper` (time transforms, integer truncation).
    Range {
        /// Inclusive lower bound.
        lower: Literal,
        /// Exclusive upper bound.
        upper: Literal,
    },
    /// `column` starts with `prefix` (string truncation where the value is the full width).
    StartsWith {
        /// Prefix.
        prefix: String,
    },
    /// `bucket(n, column) = value`: no range on the column expresses it.
    Bucket {
        /// Number of buckets.
        buckets: u32,
        /// Bucket number.
        value: i64,
    },
}

/// A typed literal. Renderers quote and escape it per dialect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum Literal {
    /// Boolean.
    Boolean(bool),
    /// Any integer type.
    Integer(i64),
    /// Floating point.
    Float(f64),
    /// Decimal, as text (`123.45`).
    Decimal(String),
    /// String.
    String(String),
    /// Date, `YYYY-MM-DD`.
    Date(String),
    /// Timestamp without zone, `YYYY-MM-DD HH:MM:SS[.ffffff]`.
    Timestamp(String),
    /// Timestamp with zone (UTC), `YYYY-MM-DD HH:MM:SS[.ffffff]`.
    TimestampTz(String),
}

/// Per-table inputs a scheduler keeps between runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct TableControl {
    /// Do nothing to this table.
    pub paused: bool,
    /// Why it is paused (shown in the skip reason).
    pub pause_reason: Option<String>,
    /// When each operation last ran on this table (ms since epoch).
    pub last_runs: BTreeMap<Operation, i64>,
    /// The run must be finished by this instant.
    pub deadline_ms: Option<i64>,
}

impl TableControl {
    /// Fold `other` in, as two sources that each know part of the story: paused if either
    /// says so (the first reason given wins), the earlier deadline, and for each operation
    /// its later last run.
    pub fn merge(&mut self, other: &TableControl) {
        if other.paused && !self.paused {
            self.paused = true;
            self.pause_reason.clone_from(&other.pause_reason);
        }
        self.deadline_ms = match (self.deadline_ms, other.deadline_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for (op, at) in &other.last_runs {
            let last = self.last_runs.entry(*op).or_insert(*at);
            *last = (*last).max(*at);
        }
    }

    /// Why the table is paused, as receipts and deferrals show it; `None` when it is not.
    pub fn pause(&self) -> Option<String> {
        self.paused.then(|| {
            self.pause_reason
                .clone()
                .unwrap_or_else(|| "paused by its controls".to_string())
        })
    }

    /// Until when `op` is cooling down after its last run under `cooldowns_ms`; `None` when
    /// it never ran, has no cooldown, or its cooldown is over at `now_ms`.
    pub fn cooldown_until_ms(
        &self,
        op: Operation,
        cooldowns_ms: &BTreeMap<Operation, i64>,
        now_ms: i64,
    ) -> Option<i64> {
        let last = self.last_runs.get(&op)?;
        let until = last.saturating_add(*cooldowns_ms.get(&op)?);
        (until > now_ms).then_some(until)
    }
}

/// A daily off-peak window in UTC: `[start_hour, end_hour)`, wrapping past midnight if
/// `end_hour <= start_hour`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// First hour of the window (0–23).
    pub start_hour: u8,
    /// Hour the window closes (0–24).
    pub end_hour: u8,
}

impl Window {
    /// Reject hours outside the day.
    pub fn validate(&self) -> crate::Result<()> {
        if self.start_hour > 23 || self.end_hour > 24 {
            return Err(crate::Error::validation(
                "window hours must be 0..=23 (start) and 0..=24 (end)",
            ));
        }
        Ok(())
    }
}
