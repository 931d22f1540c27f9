//! Grading: explainable checks over a [`TableScan`], a score out of 100 and an A–F grade.
//!
//! Every table starts at 100. A warning costs [`WARN_POINTS`], a critical finding
//! [`CRIT_POINTS`]; bands are A ≥ 90, B ≥ 75, C ≥ 60, D ≥ 40, F below. Each [`Finding`] carries a
//! stable `code`, the measured value, the threshold it crossed, a one-line reason and the
//! [`Remedy`] that wins the points back — the grade is a to-do list. Count limits grow with the
//! table's size ([`size_factor`]). The checks, their thresholds and the reasoning behind each are
//! listed by [`CHECKS`] and rendered to `docs/grading.md`.
//!
//! Grading is pure: the same scan, options and `now` always give the same report.
//!
//! # Example
//!
//! Grade two tables of the demo lake: a streaming writer's decayed table and the healthy
//! control.
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! use cryo_core::clock::SystemClock;
//! use cryo_core::demo::{DemoOptions, create_demo_lake};
//! use cryo_core::grade::{Grade, GradeOptions, grade};
//! use cryo_core::ops::Operation::{ExpireSnapshots, RewriteDataFiles, RewriteManifests};
//! use cryo_core::scan::{FleetScanOptions, scan_fleet};
//!
//! let dir = tempfile::tempdir()?;
//! let lake = create_demo_lake(dir.path(), &DemoOptions::default()).await?;
//! let fleet = scan_fleet(&lake.catalog, &FleetScanOptions::default(), &SystemClock).await?;
//! let scan_of = |name: &str| fleet.tables.iter().find(|s| s.table.to_string() == name).unwrap();
//! let (clicks, healthy) = (scan_of("lake.clickstream"), scan_of("lake.healthy"));
//!
//! let report = grade(clicks, &GradeOptions::default(), clicks.scanned_at_ms)?;
//! assert_eq!(report.grade, Grade::F);
//! // Findings carry stable codes and the points they cost; each names its remedy.
//! assert!(report.has("small_file_share") && report.has("snapshot_count"));
//! let lost: u32 = report.findings.iter().map(|f| f.points).sum();
//! assert_eq!(report.score, 100u32.saturating_sub(lost));
//! assert_eq!(report.operations(), [RewriteDataFiles, RewriteManifests, ExpireSnapshots]);
//! // Pure: the same scan, options and `now` give the same report.
//! assert_eq!(grade(clicks, &GradeOptions::default(), clicks.scanned_at_ms)?, report);
//!
//! let control = grade(healthy, &GradeOptions::default(), healthy.scanned_at_ms)?;
//! assert_eq!((control.grade, control.score), (Grade::A, 100));
//! assert!(control.findings.is_empty());
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

mod checks;
mod cost;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use checks::{CHECKS, CheckInfo, checks_markdown};
pub use cost::{CostModel, CostReport, OpSaving, estimate};

use crate::catalog::TableId;
use crate::error::{Error, Result};
use crate::ops::Operation;
use crate::scan::TableScan;

/// Points a warning costs.
pub const WARN_POINTS: u32 = 8;
/// Points a critical finding costs.
pub const CRIT_POINTS: u32 = 20;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Costs [`WARN_POINTS`].
    Warn,
    /// Costs [`CRIT_POINTS`].
    Crit,
}

impl Severity {
    /// Points deducted.
    pub fn points(self) -> u32 {
        match self {
            Severity::Warn => WARN_POINTS,
            Severity::Crit => CRIT_POINTS,
        }
    }
}

/// Letter grade.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Grade {
    /// ≥ 90
    A,
    /// ≥ 75
    B,
    /// ≥ 60
    C,
    /// ≥ 40
    D,
    /// < 40
    F,
}

impl Grade {
    /// The band a score falls in.
    pub fn from_score(score: u32) -> Grade {
        match score {
            90.. => Grade::A,
            75.. => Grade::B,
            60.. => Grade::C,
            40.. => Grade::D,
            _ => Grade::F,
        }
    }
}

impl fmt::Display for Grade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Grade::A => "A",
            Grade::B => "B",
            Grade::C => "C",
            Grade::D => "D",
            Grade::F => "F",
        })
    }
}

/// What wins a finding's points back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Remedy {
    /// Run a maintenance operation (the planner schedules it).
    Operation {
        /// The operation.
        operation: Operation,
    },
    /// Change a table property, then (optionally) run an operation so existing files follow.
    TableProperty {
        /// Property key.
        key: String,
        /// Suggested value.
        value: String,
        /// Operation that brings existing files in line afterwards.
        then: Option<Operation>,
    },
    /// The partitioning itself is the problem: a schema change, not maintenance.
    Repartition {
        /// What to change.
        suggestion: String,
    },
}

impl Remedy {
    /// The operation that fixes the finding, if maintenance can.
    pub fn operation(&self) -> Option<Operation> {
        match self {
            Remedy::Operation { operation } => Some(*operation),
            Remedy::TableProperty { then, .. } => *then,
            Remedy::Repartition { .. } => None,
        }
    }
}

impl fmt::Display for Remedy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Remedy::Operation { operation } => write!(f, "run {operation}"),
            Remedy::TableProperty { key, value, then } => {
                write!(f, "set {key}={value}")?;
                if let Some(op) = then {
                    write!(f, ", then run {op}")?;
                }
                Ok(())
            }
            Remedy::Repartition { suggestion } => write!(f, "repartition: {suggestion}"),
        }
    }
}

/// One failed check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable code (bindings, golden files and alerting key on it, never on the message).
    pub code: String,
    /// Severity.
    pub severity: Severity,
    /// Points deducted.
    pub points: u32,
    /// The measured value.
    pub measured: f64,
    /// The threshold it crossed (for this severity, after scaling by table size).
    pub threshold: f64,
    /// Unit of `measured` and `threshold` (`ratio`, `files`, `days`, …).
    pub unit: String,
    /// One line: what is wrong and why it matters.
    pub reason: String,
    /// What fixes it.
    pub remedy: Remedy,
}

/// Grading options: thresholds live in the checks; these are the knobs around them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct GradeOptions {
    /// Check codes to skip (e.g. `table_statistics` for engines without a CBO).
    pub skip: Vec<String>,
    /// Prices for the cost estimate.
    pub cost: CostModel,
}

impl GradeOptions {
    /// Reject unknown check codes and nonsensical prices.
    pub fn validate(&self) -> Result<()> {
        for code in &self.skip {
            if !CHECKS.iter().any(|c| c.code == code) {
                return Err(Error::validation(format!("unknown check code `{code}`")));
            }
        }
        self.cost.validate()
    }
}

/// The grade of one table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct HealthReport {
    /// Catalog name.
    pub catalog: String,
    /// Table.
    pub table: TableId,
    /// 0–100.
    pub score: u32,
    /// A–F.
    pub grade: Grade,
    /// Failed checks, worst first.
    pub findings: Vec<Finding>,
    /// Codes of the checks that ran and passed.
    pub passed: Vec<String>,
    /// The size factor count limits were multiplied by.
    pub size_factor: f64,
    /// Storage and request cost.
    pub cost: CostReport,
    /// The `now` the report was computed for.
    pub graded_at_ms: i64,
}

impl HealthReport {
    /// Operations the findings call for, in execution order, without repeats.
    pub fn operations(&self) -> Vec<Operation> {
        let mut ops: Vec<Operation> = self
            .findings
            .iter()
            .filter_map(|f| f.remedy.operation())
            .collect();
        ops.sort();
        ops.dedup();
        ops
    }

    /// Whether a finding with this code is present.
    pub fn has(&self, code: &str) -> bool {
        self.findings.iter().any(|f| f.code == code)
    }

    /// The fleet order, in which reports are shown and plans take tables: lowest score first,
    /// ties by table. Sort with `reports.sort_by(HealthReport::worst_first)`.
    pub fn worst_first(a: &Self, b: &Self) -> std::cmp::Ordering {
        a.score.cmp(&b.score).then_with(|| a.table.cmp(&b.table))
    }
}

/// How much count limits grow with table size: 1 up to 1 GiB, then 1 + log2(GiB), so a 1 TiB
/// table may carry 11× the manifests or snapshots of a 1 GiB one, a 10 TiB table ~14×.
pub fn size_factor(total_bytes: u64) -> f64 {
    let gib = total_bytes as f64 / f64::from(1u32 << 30);
    if gib <= 1.0 { 1.0 } else { 1.0 + gib.log2() }
}

/// Grade one scanned table at `now_ms`.
pub fn grade(scan: &TableScan, options: &GradeOptions, now_ms: i64) -> Result<HealthReport> {
    options.validate()?;
    let sf = size_factor(
        scan.data_files
            .bytes
            .saturating_add(scan.delete_files.bytes()),
    );
    let ctx = checks::Ctx { scan, sf, now_ms };
    let mut findings = Vec::new();
    let mut passed = Vec::new();
    for check in CHECKS {
        if options.skip.iter().any(|s| s == check.code) {
            continue;
        }
        match (check.run)(&ctx) {
            Some(f) => findings.push(f),
            None => passed.push(check.code.to_string()),
        }
    }
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then_with(|| a.code.cmp(&b.code))
    });
    let lost: u32 = findings.iter().map(|f| f.points).sum();
    let score = 100u32.saturating_sub(lost);
    Ok(HealthReport {
        catalog: scan.catalog.clone(),
        table: scan.table.clone(),
        score,
        grade: Grade::from_score(score),
        findings,
        passed,
        size_factor: (sf * 1000.0).round() / 1000.0,
        cost: cost::estimate(scan, &options.cost, now_ms),
        graded_at_ms: now_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands() {
        assert_eq!(Grade::from_score(100), Grade::A);
        assert_eq!(Grade::from_score(90), Grade::A);
        assert_eq!(Grade::from_score(89), Grade::B);
        assert_eq!(Grade::from_score(75), Grade::B);
        assert_eq!(Grade::from_score(60), Grade::C);
        assert_eq!(Grade::from_score(40), Grade::D);
        assert_eq!(Grade::from_score(39), Grade::F);
        assert_eq!(Grade::from_score(0), Grade::F);
    }

    #[test]
    #[allow(
        clippy::float_cmp,
        reason = "up to 1 GiB size_factor returns the literal 1.0; exact equality is the point"
    )]
    fn size_factor_grows_logarithmically() {
        assert_eq!(size_factor(10 << 20), 1.0);
        assert_eq!(size_factor(1 << 30), 1.0);
        assert!((size_factor(1u64 << 40) - 11.0).abs() < 1e-9);
    }
}
