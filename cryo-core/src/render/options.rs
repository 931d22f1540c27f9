//! Options of the two dialects: plain serde values; `validate()` rejects what would render
//! statements the engine refuses.
//!
//! The engine version and the engine-side catalog name have no defaults that could be right:
//! `Default` leaves them empty and `validate()` says to set them. Version gates
//! ([`TRINO_OPTIMIZE_MANIFESTS`], …) and retention floors are explicit inputs, so a plan that
//! an older engine or a stricter cluster cannot run renders as a skip with a reason.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;

/// Trino release that added `ALTER TABLE … EXECUTE optimize_manifests` (release notes of 470:
/// "Add the `optimize_manifests` table procedure").
pub const TRINO_OPTIMIZE_MANIFESTS: u32 = 470;
/// Trino release whose `expire_snapshots` takes `retain_last` (the argument is in
/// `ExpireSnapshotsTableProcedure` on trunk; earlier releases refuse an unknown property).
pub const TRINO_EXPIRE_RETAIN_LAST: u32 = 479;
/// Iceberg release with the Spark procedure `rewrite_position_delete_files` (apache/iceberg#7572).
pub const ICEBERG_REWRITE_POSITION_DELETES: Version = Version::new(1, 3, 0);
/// Iceberg release with the Spark procedure `compute_table_stats` (apache/iceberg#10986,
/// merged after 1.7.0 shipped).
pub const ICEBERG_COMPUTE_TABLE_STATS: Version = Version::new(1, 8, 0);
/// Iceberg release with the `remove-dangling-deletes` option of `rewrite_data_files`
/// (apache/iceberg#9724). Older releases refuse unknown options, so it is left out there.
pub const ICEBERG_REMOVE_DANGLING_DELETES: Version = Version::new(1, 6, 0);
/// Oldest Iceberg release on which a `system.bucket(n, col) = v` term in a procedure's `where`
/// was run here (1.10.2). Below it the bucket term is dropped (a superset, safe).
pub const ICEBERG_BUCKET_IN_WHERE: Version = Version::new(1, 10, 0);
/// Spark release with `TIMESTAMP_NTZ '…'` literals, needed to compare an Iceberg `timestamp`
/// (without zone) column without a cast Iceberg cannot convert.
pub const SPARK_TIMESTAMP_NTZ: Version = Version::new(3, 4, 0);
/// Spark release with the `startswith` SQL function.
pub const SPARK_STARTSWITH: Version = Version::new(3, 3, 0);
/// Spark's `remove_orphan_files` refuses an `older_than` less than 24 hours ago.
pub const SPARK_ORPHAN_FLOOR_MS: i64 = DAY_MS;

/// A dotted release number (`3.5`, `1.10.2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Version {
    /// Major.
    pub major: u32,
    /// Minor.
    pub minor: u32,
    /// Patch.
    pub patch: u32,
}

impl Version {
    /// A version from its parts.
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        Self {
            major,
            minor,
            patch,
        }
    }

    fn is_unset(self) -> bool {
        self == Version::default()
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl FromStr for Version {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad = || Error::validation(format!("version `{s}` must look like `3.5` or `1.10.2`"));
        let parts: Vec<&str> = s.trim().split('.').collect();
        if parts.is_empty() || parts.len() > 3 {
            return Err(bad());
        }
        let mut nums = [0u32; 3];
        for (slot, p) in nums.iter_mut().zip(&parts) {
            *slot = p.parse().map_err(|_| bad())?;
        }
        Ok(Version::new(nums[0], nums[1], nums[2]))
    }
}

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

fn check_catalog(engine: &str, catalog: &str) -> Result<()> {
    if catalog.is_empty() {
        return Err(Error::validation(format!(
            "{engine} options: `catalog` must name the {engine} catalog the tables are reached through \
             (it may differ from Cryo's source catalog)"
        )));
    }
    if catalog.chars().any(char::is_control) {
        return Err(Error::validation(format!(
            "{engine} options: `catalog` must not contain control characters"
        )));
    }
    Ok(())
}

/// How plans render for Trino's Iceberg connector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrinoOptions {
    /// The Trino catalog the tables live in (`iceberg`, `lake`, …). Required.
    pub catalog: String,
    /// Trino release number the statements will run on (e.g. `476`). Required: version gates
    /// depend on it.
    pub version: u32,
    /// The cluster's `iceberg.expire-snapshots.min-retention` (Trino's default: 7 days). A plan
    /// with a shorter retention renders as a skip: Trino would refuse it.
    pub expire_snapshots_min_retention_ms: i64,
    /// The cluster's `iceberg.remove-orphan-files.min-retention` (Trino's default: 7 days).
    pub remove_orphan_files_min_retention_ms: i64,
    /// The catalog's `iceberg.rest-catalog.case-insensitive-name-matching` (REST catalogs only;
    /// off by default). Trino folds identifiers to lower case, quoted or not; without this
    /// setting it looks a table up under the lower-cased name, so a table whose namespace or
    /// name holds upper-case letters is refused: its statement would reach another table (a
    /// lower-case twin) or none.
    pub case_insensitive_name_matching: bool,
}

impl Default for TrinoOptions {
    fn default() -> Self {
        Self {
            catalog: String::new(),
            version: 0,
            expire_snapshots_min_retention_ms: 7 * DAY_MS,
            remove_orphan_files_min_retention_ms: 7 * DAY_MS,
            case_insensitive_name_matching: false,
        }
    }
}

impl TrinoOptions {
    /// Options for `catalog` on Trino `version`, with Trino's default retention floors.
    pub fn new(catalog: impl Into<String>, version: u32) -> Self {
        Self {
            catalog: catalog.into(),
            version,
            ..Self::default()
        }
    }

    /// Reject options that cannot describe a Trino cluster.
    pub fn validate(&self) -> Result<()> {
        check_catalog("trino", &self.catalog)?;
        if self.version == 0 {
            return Err(Error::validation(
                "trino options: set `version` to the Trino release the statements will run on (e.g. 476); \
                 version gates such as optimize_manifests (>= 470) depend on it",
            ));
        }
        if self.expire_snapshots_min_retention_ms < 0
            || self.remove_orphan_files_min_retention_ms < 0
        {
            return Err(Error::validation(
                "trino options: retention floors must not be negative",
            ));
        }
        Ok(())
    }
}

/// How plans render for Spark with Iceberg's SQL extensions (`CALL c.system.…`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SparkOptions {
    /// The Spark catalog (`spark.sql.catalog.<name>`) the tables are reached through. Required.
    pub catalog: String,
    /// Spark release (e.g. `3.5`). Required.
    pub spark_version: Version,
    /// Iceberg runtime release (e.g. `1.10.2`). Required: procedures and options are gated on it.
    pub iceberg_version: Version,
    /// Refuse to expire with a retention shorter than this (Spark itself has no floor; a team may).
    pub expire_snapshots_min_retention_ms: i64,
    /// Refuse to remove orphans younger than this. At least 24 hours: Spark's procedure refuses
    /// an `older_than` less than a day ago.
    pub remove_orphan_files_min_retention_ms: i64,
}

impl Default for SparkOptions {
    fn default() -> Self {
        Self {
            catalog: String::new(),
            spark_version: Version::default(),
            iceberg_version: Version::default(),
            expire_snapshots_min_retention_ms: 0,
            remove_orphan_files_min_retention_ms: SPARK_ORPHAN_FLOOR_MS,
        }
    }
}

impl SparkOptions {
    /// Options for `catalog` on the given Spark and Iceberg releases, with default floors.
    pub fn new(
        catalog: impl Into<String>,
        spark_version: Version,
        iceberg_version: Version,
    ) -> Self {
        Self {
            catalog: catalog.into(),
            spark_version,
            iceberg_version,
            ..Self::default()
        }
    }

    /// Reject options that would render statements Spark refuses.
    pub fn validate(&self) -> Result<()> {
        check_catalog("spark", &self.catalog)?;
        if self.spark_version.is_unset() || self.iceberg_version.is_unset() {
            return Err(Error::validation(
                "spark options: set `spark_version` (e.g. \"3.5\") and `iceberg_version` (e.g. \"1.10.2\"); \
                 procedures and literal forms are gated on them",
            ));
        }
        if self.spark_version.major < 3 {
            return Err(Error::validation(format!(
                "spark options: Spark {} has no Iceberg stored procedures (CALL needs Spark 3 or later)",
                self.spark_version
            )));
        }
        if self.expire_snapshots_min_retention_ms < 0 {
            return Err(Error::validation(
                "spark options: expire_snapshots_min_retention_ms must not be negative",
            ));
        }
        if self.remove_orphan_files_min_retention_ms < SPARK_ORPHAN_FLOOR_MS {
            return Err(Error::validation(
                "spark options: remove_orphan_files_min_retention_ms must be at least 24 hours: Spark's \
                 remove_orphan_files refuses an older_than less than a day ago",
            ));
        }
        Ok(())
    }
}
