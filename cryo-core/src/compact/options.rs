//! Compaction options: a plain serde struct with defaults and a `validate()` that refuses bad
//! input instead of repairing it.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::catalog::LoadedTable;
use crate::error::{Error, Result};
use crate::plan::{Chunk, PlannedStep, RewriteStrategy, StepParams};

/// `write.target-file-size-bytes`.
pub(crate) const TARGET_FILE_SIZE: &str = "write.target-file-size-bytes";
/// Java's default target size: 512 MiB.
pub(crate) const DEFAULT_TARGET_FILE_SIZE: u64 = 512 << 20;
/// Spark's `min-file-size-bytes` default: 75% of the target.
const MIN_FILE_RATIO: f64 = 0.75;
/// Spark's `max-file-size-bytes` default: 180% of the target.
const MAX_FILE_RATIO: f64 = 1.80;
/// Smallest memory budget accepted: one row group being written plus one being read.
pub const MIN_MEMORY_BUDGET_BYTES: u64 = 16 << 20;

/// One partition of one spec, as a plan chunk names it ([`crate::plan::PartitionTarget`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PartitionRef {
    /// Partition spec id.
    pub spec_id: i32,
    /// Partition path (`ts_day=2024-01-31/category=a`; empty for unpartitioned specs).
    pub path: String,
}

/// The partitions a plan chunk names; `None` for a whole-table chunk.
pub(crate) fn chunk_partitions(chunk: &Chunk) -> Option<BTreeSet<PartitionRef>> {
    (!chunk.whole_table).then(|| {
        chunk
            .partitions
            .iter()
            .map(|p| PartitionRef {
                spec_id: p.spec_id,
                path: p.path.clone(),
            })
            .collect()
    })
}

/// What to compact and how. `None` sizes come from the table (see [`CompactOptions::sizes`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CompactOptions {
    /// Bin-pack, sort or z-order.
    pub strategy: RewriteStrategy,
    /// Output file size; `None`: `write.target-file-size-bytes` (512 MiB when unset).
    pub target_file_size_bytes: Option<u64>,
    /// Files below this are rewritten; `None`: 75% of the target.
    pub min_file_size_bytes: Option<u64>,
    /// Files above this are rewritten (split); `None`: 180% of the target.
    pub max_file_size_bytes: Option<u64>,
    /// A group needs at least this many files, unless deletes or an old partition spec force it.
    pub min_input_files: u32,
    /// A file with at least this many applicable delete files is rewritten whatever its size.
    pub delete_file_threshold: u32,
    /// Rewrite every file of the selected partitions, whatever its size.
    pub rewrite_all: bool,
    /// Largest file group (input bytes); larger partitions are split into several groups, each
    /// of which commits on its own.
    pub max_file_group_size_bytes: u64,
    /// Partitions to compact; `None`: the whole table.
    pub partitions: Option<BTreeSet<PartitionRef>>,
    /// Memory a group's rewrite may use (see the module docs for what it covers).
    pub memory_budget_bytes: u64,
    /// Data files read at once within a group.
    pub concurrency: usize,
    /// Leave alone every partition that a commit changed (a data or delete file added) less
    /// than this many milliseconds ago; `None`: compact hot partitions too.
    ///
    /// A merge-on-read `MERGE`/`DELETE` that scanned a partition before a compaction of it
    /// commits, and commits after, fails its own validation (the data files its position
    /// deletes reference were replaced): correct Iceberg behaviour, which only the writer's
    /// retry repairs. Writers of change data touch recent partitions; a quiet period makes
    /// compaction work on cold ones while they do. The age of a partition comes from the
    /// data sequence numbers of its live files (a rewrite keeps its input's, so compaction
    /// does not make a partition look hot) and the timestamps of the snapshots that gave
    /// them; a partition whose change is older than the oldest snapshot kept counts as
    /// changed when that snapshot was committed.
    pub quiet_period_ms: Option<u64>,
}

impl Default for CompactOptions {
    fn default() -> Self {
        Self {
            strategy: RewriteStrategy::BinPack,
            target_file_size_bytes: None,
            min_file_size_bytes: None,
            max_file_size_bytes: None,
            min_input_files: 5,
            delete_file_threshold: 1,
            rewrite_all: false,
            max_file_group_size_bytes: 10 << 30,
            partitions: None,
            memory_budget_bytes: 512 << 20,
            concurrency: std::thread::available_parallelism().map_or(2, usize::from),
            quiet_period_ms: None,
        }
    }
}

/// Resolved file sizes for one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSizes {
    /// Output file size.
    pub target: u64,
    /// Files below this are rewritten.
    pub min: u64,
    /// Files above this are rewritten.
    pub max: u64,
}

impl CompactOptions {
    /// Every live data file of the selected partitions, each with the deletes that apply to it,
    /// whatever its size: a bin-pack with `rewrite_all`. What applying equality deletes by a
    /// rewrite, reading every live row and converting equality deletes plan from.
    pub(crate) fn every_file() -> Self {
        Self {
            strategy: RewriteStrategy::BinPack,
            min_input_files: 1,
            delete_file_threshold: 1,
            rewrite_all: true,
            ..Self::default()
        }
    }

    /// Options for one chunk of a planned `rewrite_data_files` or `convert_equality_deletes`
    /// step.
    ///
    /// The native engine converts equality deletes the way Spark's and Trino's renderings do:
    /// every data file of the chunk's partitions is rewritten with its deletes applied (a
    /// bin-pack with `rewrite_all`), at the data sequence number of the snapshot it started
    /// from, so that the equality deletes it applied no longer apply to anything and leave the
    /// table in the same commit (an equality delete committed after that snapshot still applies
    /// to the rewritten rows).
    pub fn from_step(step: &PlannedStep, chunk: &Chunk) -> Result<Self> {
        if !step.chunks.iter().any(|c| c == chunk) {
            return Err(Error::validation(format!(
                "chunk {} is not a chunk of this step",
                chunk.index
            )));
        }
        let partitions = chunk_partitions(chunk);
        let options = match &step.params {
            StepParams::RewriteDataFiles {
                strategy,
                target_file_size_bytes,
                min_file_size_bytes,
                max_file_size_bytes,
                min_input_files,
                delete_file_threshold,
            } => Self {
                strategy: strategy.clone(),
                target_file_size_bytes: Some(*target_file_size_bytes),
                min_file_size_bytes: Some(*min_file_size_bytes),
                max_file_size_bytes: Some(*max_file_size_bytes),
                min_input_files: *min_input_files,
                delete_file_threshold: *delete_file_threshold,
                partitions,
                ..Self::default()
            },
            StepParams::ConvertEqualityDeletes { .. } => Self {
                partitions,
                ..Self::every_file()
            },
            _ => {
                return Err(Error::validation(format!(
                    "compaction takes a rewrite_data_files or convert_equality_deletes step, not {}",
                    step.operation
                )));
            }
        };
        options.validate()?;
        Ok(options)
    }

    /// Refuse options that cannot describe a sensible rewrite.
    pub fn validate(&self) -> Result<()> {
        if self.target_file_size_bytes == Some(0) {
            return Err(Error::validation("target_file_size_bytes must be positive"));
        }
        if let (Some(min), Some(max)) = (self.min_file_size_bytes, self.max_file_size_bytes)
            && min > max
        {
            return Err(Error::validation(format!(
                "min_file_size_bytes ({min}) is above max_file_size_bytes ({max})"
            )));
        }
        if let (Some(t), Some(min)) = (self.target_file_size_bytes, self.min_file_size_bytes)
            && min > t
        {
            return Err(Error::validation(format!(
                "min_file_size_bytes ({min}) is above target_file_size_bytes ({t})"
            )));
        }
        if let (Some(t), Some(max)) = (self.target_file_size_bytes, self.max_file_size_bytes)
            && max < t
        {
            return Err(Error::validation(format!(
                "max_file_size_bytes ({max}) is below target_file_size_bytes ({t})"
            )));
        }
        if self.min_input_files == 0 {
            return Err(Error::validation("min_input_files must be at least 1"));
        }
        if self.delete_file_threshold == 0 {
            return Err(Error::validation(
                "delete_file_threshold must be at least 1",
            ));
        }
        if self.max_file_group_size_bytes == 0 {
            return Err(Error::validation(
                "max_file_group_size_bytes must be positive",
            ));
        }
        if self.memory_budget_bytes < MIN_MEMORY_BUDGET_BYTES {
            return Err(Error::validation(format!(
                "memory_budget_bytes must be at least {MIN_MEMORY_BUDGET_BYTES} (16 MiB)"
            )));
        }
        if self.concurrency == 0 || self.concurrency > 256 {
            return Err(Error::validation("concurrency must be between 1 and 256"));
        }
        if let Some(parts) = &self.partitions
            && parts.is_empty()
        {
            return Err(Error::validation(
                "partitions is an empty set (use None for the whole table)",
            ));
        }
        match &self.strategy {
            RewriteStrategy::BinPack => {}
            RewriteStrategy::Sort { columns } => {
                if columns.iter().any(|c| c.trim().is_empty()) {
                    return Err(Error::validation("sort column names must not be empty"));
                }
            }
            RewriteStrategy::ZOrder { columns } | RewriteStrategy::Hilbert { columns } => {
                if columns.is_empty() {
                    return Err(Error::validation("z-order needs at least one column"));
                }
                if columns.len() > super::zorder::MAX_ZORDER_COLUMNS {
                    return Err(Error::validation(format!(
                        "z-order takes at most {} columns",
                        super::zorder::MAX_ZORDER_COLUMNS
                    )));
                }
                let mut seen = BTreeSet::new();
                for c in columns {
                    if c.trim().is_empty() || !seen.insert(c.as_str()) {
                        return Err(Error::validation(format!(
                            "z-order column `{c}` is empty or repeated"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Target, min and max file sizes for `table`: the options' values, or the table's
    /// `write.target-file-size-bytes` with Spark's 75% / 180% thresholds.
    pub fn sizes(&self, table: &LoadedTable) -> Result<FileSizes> {
        let target = match self.target_file_size_bytes {
            Some(t) => t,
            None => match table
                .metadata
                .properties()
                .get(TARGET_FILE_SIZE)
                .map(|v| v.trim())
            {
                None | Some("") => DEFAULT_TARGET_FILE_SIZE,
                Some(v) => v.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    Error::config(format!(
                        "{}: {TARGET_FILE_SIZE}={v} is not a positive size",
                        table.id
                    ))
                })?,
            },
        };
        let min = self
            .min_file_size_bytes
            .unwrap_or((target as f64 * MIN_FILE_RATIO) as u64);
        let max = self
            .max_file_size_bytes
            .unwrap_or((target as f64 * MAX_FILE_RATIO) as u64);
        if min > target || max < target {
            return Err(Error::validation(format!(
                "{}: file sizes must satisfy min ({min}) <= target ({target}) <= max ({max})",
                table.id
            )));
        }
        Ok(FileSizes { target, min, max })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_bad_input_is_refused() {
        CompactOptions::default().validate().unwrap();
        let bad = [
            CompactOptions {
                target_file_size_bytes: Some(0),
                ..CompactOptions::default()
            },
            CompactOptions {
                min_file_size_bytes: Some(10),
                max_file_size_bytes: Some(5),
                ..CompactOptions::default()
            },
            CompactOptions {
                target_file_size_bytes: Some(100),
                max_file_size_bytes: Some(50),
                ..CompactOptions::default()
            },
            CompactOptions {
                min_input_files: 0,
                ..CompactOptions::default()
            },
            CompactOptions {
                memory_budget_bytes: 1 << 20,
                ..CompactOptions::default()
            },
            CompactOptions {
                concurrency: 0,
                ..CompactOptions::default()
            },
            CompactOptions {
                partitions: Some(BTreeSet::new()),
                ..CompactOptions::default()
            },
            CompactOptions {
                strategy: RewriteStrategy::ZOrder { columns: vec![] },
                ..CompactOptions::default()
            },
            CompactOptions {
                strategy: RewriteStrategy::ZOrder {
                    columns: vec!["a".into(), "a".into()],
                },
                ..CompactOptions::default()
            },
        ];
        for o in bad {
            assert!(
                matches!(o.validate(), Err(Error::Validation { .. })),
                "{o:?}"
            );
        }
    }

    #[test]
    fn serde_round_trip_with_defaults_filled_in() {
        let o: CompactOptions =
            serde_json::from_str(r#"{"strategy":{"kind":"z_order","columns":["a","b"]}}"#).unwrap();
        assert_eq!(o.min_input_files, 5);
        let back: CompactOptions =
            serde_json::from_str(&serde_json::to_string(&o).unwrap()).unwrap();
        assert_eq!(back, o);
    }
}
