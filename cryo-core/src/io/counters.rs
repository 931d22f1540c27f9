use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// What kind of file a path names, judged from its name the way Iceberg lays tables out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathKind {
    /// `*.metadata.json`
    MetadataJson,
    /// `version-hint.text`
    VersionHint,
    /// `snap-*.avro`
    ManifestList,
    /// any other `*.avro` under `metadata/`
    Manifest,
    /// Parquet/ORC/Avro data or delete files
    DataFile,
    /// Puffin files (statistics, deletion vectors)
    Puffin,
    /// Anything else
    Other,
}

impl PathKind {
    const ALL: [PathKind; 7] = [
        PathKind::MetadataJson,
        PathKind::VersionHint,
        PathKind::ManifestList,
        PathKind::Manifest,
        PathKind::DataFile,
        PathKind::Puffin,
        PathKind::Other,
    ];

    /// Classify a path.
    pub fn of(path: &str) -> PathKind {
        let name = path.rsplit('/').next().unwrap_or(path);
        let in_metadata_dir = path.contains("/metadata/");
        if name.ends_with(".metadata.json") || name.ends_with(".metadata.json.gz") {
            PathKind::MetadataJson
        } else if name == "version-hint.text" {
            PathKind::VersionHint
        } else if has_extension(name, "puffin") || has_extension(name, "stats") {
            PathKind::Puffin
        } else if has_extension(name, "avro") && in_metadata_dir {
            if name.starts_with("snap-") {
                PathKind::ManifestList
            } else {
                PathKind::Manifest
            }
        } else if ["parquet", "orc", "avro"]
            .iter()
            .any(|ext| has_extension(name, ext))
        {
            PathKind::DataFile
        } else {
            PathKind::Other
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Whether a file name ends in `.<ext>`, ignoring ASCII case: object stores keep whatever case
/// the writer chose.
fn has_extension(name: &str, ext: &str) -> bool {
    Path::new(name)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case(ext))
}

/// Live counters of storage reads and writes, by kind of path. Cheap to share (`Arc`).
#[derive(Debug, Default)]
pub struct IoCounters {
    reads: [AtomicU64; 7],
    read_bytes: [AtomicU64; 7],
    writes: [AtomicU64; 7],
    lists: AtomicU64,
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
}

/// A read under way: counted in flight until dropped.
pub(crate) struct InFlight<'a>(&'a IoCounters);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A point-in-time copy of [`IoCounters`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoSnapshot {
    /// `(kind, reads, bytes read)` for every kind with at least one read.
    pub reads: Vec<(PathKind, u64, u64)>,
    /// `(kind, writes)` for every kind with at least one write.
    pub writes: Vec<(PathKind, u64)>,
    /// Number of list calls.
    pub lists: u64,
    /// The most reads that were under way at once.
    #[serde(default)]
    pub max_in_flight_reads: u64,
}

impl IoSnapshot {
    /// Reads of one kind of path.
    pub fn reads_of(&self, kind: PathKind) -> u64 {
        self.reads
            .iter()
            .find(|(k, _, _)| *k == kind)
            .map_or(0, |(_, n, _)| *n)
    }

    /// Total reads.
    pub fn total_reads(&self) -> u64 {
        self.reads.iter().map(|(_, n, _)| n).sum()
    }
}

impl IoCounters {
    pub(crate) fn record_read(&self, path: &str, bytes: u64) {
        let i = PathKind::of(path).index();
        self.reads[i].fetch_add(1, Ordering::Relaxed);
        self.read_bytes[i].fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn record_write(&self, path: &str) {
        self.writes[PathKind::of(path).index()].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn record_list(&self) {
        self.lists.fetch_add(1, Ordering::Relaxed);
    }

    /// Count a read in flight until the guard drops (the most at once is kept).
    pub(crate) fn start_read(&self) -> InFlight<'_> {
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.max_in_flight.fetch_max(now, Ordering::Relaxed);
        InFlight(self)
    }

    /// Copy the current values.
    pub fn snapshot(&self) -> IoSnapshot {
        let mut snap = IoSnapshot {
            lists: self.lists.load(Ordering::Relaxed),
            max_in_flight_reads: self.max_in_flight.load(Ordering::Relaxed),
            ..IoSnapshot::default()
        };
        for kind in PathKind::ALL {
            let i = kind.index();
            let n = self.reads[i].load(Ordering::Relaxed);
            if n > 0 {
                snap.reads
                    .push((kind, n, self.read_bytes[i].load(Ordering::Relaxed)));
            }
            let w = self.writes[i].load(Ordering::Relaxed);
            if w > 0 {
                snap.writes.push((kind, w));
            }
        }
        snap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_iceberg_layout() {
        let t = "s3://b/wh/db/t";
        assert_eq!(
            PathKind::of(&format!("{t}/metadata/00003-1b2c.metadata.json")),
            PathKind::MetadataJson
        );
        assert_eq!(
            PathKind::of(&format!("{t}/metadata/v3.metadata.json")),
            PathKind::MetadataJson
        );
        assert_eq!(
            PathKind::of(&format!("{t}/metadata/version-hint.text")),
            PathKind::VersionHint
        );
        assert_eq!(
            PathKind::of(&format!("{t}/metadata/snap-123-1-abc.avro")),
            PathKind::ManifestList
        );
        assert_eq!(
            PathKind::of(&format!("{t}/metadata/abc-m0.avro")),
            PathKind::Manifest
        );
        assert_eq!(
            PathKind::of(&format!("{t}/data/d=1/00000-0-x.parquet")),
            PathKind::DataFile
        );
        assert_eq!(
            PathKind::of(&format!("{t}/data/x.avro")),
            PathKind::DataFile
        );
        assert_eq!(
            PathKind::of(&format!("{t}/metadata/x.stats")),
            PathKind::Puffin
        );
        assert_eq!(
            PathKind::of(&format!("{t}/data/00000-0-X.PARQUET")),
            PathKind::DataFile
        );
    }
}
