//! The maintenance vocabulary shared by grading, planning, rendering and receipts.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The seven maintenance operations, declared in the fixed order a run performs them:
/// every run reclaims the space its own compaction freed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// Turn equality deletes into position deletes (or apply them) so readers stop joining.
    ConvertEqualityDeletes,
    /// Combine small position-delete files per partition and drop dangling ones.
    RewritePositionDeletes,
    /// Compact data files (bin-pack, sort or z-order), applying deletes.
    RewriteDataFiles,
    /// Compute table statistics (NDV sketches in Puffin) for cost-based optimizers.
    ComputeStatistics,
    /// Cluster manifest entries by partition into well-sized manifests.
    RewriteManifests,
    /// Expire old snapshots and delete the files only they reference.
    ExpireSnapshots,
    /// Delete files in the table location that no snapshot or metadata file references.
    RemoveOrphanFiles,
}

impl Operation {
    /// All operations, in execution order.
    pub const ORDER: [Operation; 7] = [
        Operation::ConvertEqualityDeletes,
        Operation::RewritePositionDeletes,
        Operation::RewriteDataFiles,
        Operation::ComputeStatistics,
        Operation::RewriteManifests,
        Operation::ExpireSnapshots,
        Operation::RemoveOrphanFiles,
    ];

    /// Stable `snake_case` name.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::ConvertEqualityDeletes => "convert_equality_deletes",
            Operation::RewritePositionDeletes => "rewrite_position_deletes",
            Operation::RewriteDataFiles => "rewrite_data_files",
            Operation::ComputeStatistics => "compute_statistics",
            Operation::RewriteManifests => "rewrite_manifests",
            Operation::ExpireSnapshots => "expire_snapshots",
            Operation::RemoveOrphanFiles => "remove_orphan_files",
        }
    }

    /// Whether the operation deletes files (and so defaults to a dry run).
    pub fn is_destructive(self) -> bool {
        matches!(
            self,
            Operation::ExpireSnapshots | Operation::RemoveOrphanFiles
        )
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Operation {
    type Err = crate::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Operation::ORDER
            .into_iter()
            .find(|op| op.as_str() == s)
            .ok_or_else(|| crate::Error::validation(format!("unknown operation `{s}`")))
    }
}
