use futures::StreamExt;
use serde::{Deserialize, Serialize};

use super::{ScanOptions, TableScan, scan_table};
use crate::catalog::{Catalog, Namespace, TableId};
use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::progress::{ProgressSink, report};

/// Options for scanning many tables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FleetScanOptions {
    /// Only these namespaces (and their children); `None`: all.
    pub namespaces: Option<Vec<Namespace>>,
    /// Tables scanned at once.
    pub concurrency: usize,
    /// Per-table options.
    pub scan: ScanOptions,
}

impl Default for FleetScanOptions {
    fn default() -> Self {
        Self {
            namespaces: None,
            concurrency: 4,
            scan: ScanOptions::default(),
        }
    }
}

impl FleetScanOptions {
    /// Reject nonsensical options.
    pub fn validate(&self) -> Result<()> {
        if self.concurrency == 0 || self.concurrency > 256 {
            return Err(Error::validation(
                "fleet concurrency must be between 1 and 256",
            ));
        }
        self.scan.validate()
    }
}

/// A table (or namespace) that could not be scanned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableScanError {
    /// Table identifier, or the namespace whose listing failed.
    pub target: String,
    /// Stable error code ([`Error::code`]).
    pub code: String,
    /// What went wrong.
    pub message: String,
}

/// The result of a fleet scan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FleetScan {
    /// Catalog name.
    pub catalog: String,
    /// When the scan started.
    pub scanned_at_ms: i64,
    /// Scanned tables, sorted by identifier.
    pub tables: Vec<TableScan>,
    /// Tables and namespaces that failed, sorted.
    pub errors: Vec<TableScanError>,
    /// Wall time.
    pub duration_ms: u64,
}

fn in_scope(ns: &Namespace, scope: Option<&[Namespace]>) -> bool {
    scope.is_none_or(|s| s.iter().any(|p| ns.0.starts_with(&p.0)))
}

/// Scan every table of a catalog (or of some namespaces) with bounded concurrency.
///
/// Only a failure to list the catalog's namespaces fails the call; a namespace that cannot be
/// listed or a table that cannot be scanned becomes an entry in [`FleetScan::errors`].
pub async fn scan_fleet(
    catalog: &Catalog,
    options: &FleetScanOptions,
    clock: &dyn Clock,
) -> Result<FleetScan> {
    scan_fleet_with_progress(catalog, options, clock, None).await
}

/// [`scan_fleet`], reporting each table scanned (stage `scan`) to `progress`.
pub async fn scan_fleet_with_progress(
    catalog: &Catalog,
    options: &FleetScanOptions,
    clock: &dyn Clock,
    progress: Option<&ProgressSink>,
) -> Result<FleetScan> {
    options.validate()?;
    let started = std::time::Instant::now();
    let scanned_at_ms = clock.now_ms();
    let mut errors = Vec::new();
    let mut ids: Vec<TableId> = Vec::new();
    for ns in catalog.list_namespaces().await? {
        if !in_scope(&ns, options.namespaces.as_deref()) {
            continue;
        }
        match catalog.list_tables(&ns).await {
            Ok(t) => ids.extend(t),
            Err(e) => errors.push(TableScanError {
                target: ns.to_string(),
                code: e.code().to_string(),
                message: e.to_string(),
            }),
        }
    }
    ids.sort();
    ids.dedup();
    let total = ids.len() as u64;
    report(progress, "scan", 0, total, None);
    let mut results: Vec<(TableId, Result<TableScan>)> = Vec::with_capacity(ids.len());
    let mut scans = futures::stream::iter(ids)
        .map(|id| async move {
            let r = scan_table(catalog, &id, &options.scan, clock).await;
            (id, r)
        })
        .buffer_unordered(options.concurrency);
    while let Some((id, r)) = scans.next().await {
        report(
            progress,
            "scan",
            results.len() as u64 + 1,
            total,
            Some(id.to_string()),
        );
        results.push((id, r));
    }
    let mut tables = Vec::new();
    for (id, r) in results {
        match r {
            Ok(scan) => tables.push(scan),
            Err(e) => {
                tracing::warn!(table = %id, error = %e, "table scan failed");
                errors.push(TableScanError {
                    target: id.to_string(),
                    code: e.code().to_string(),
                    message: e.to_string(),
                });
            }
        }
    }
    tables.sort_by(|a, b| a.table.cmp(&b.table));
    errors.sort_by(|a, b| a.target.cmp(&b.target));
    Ok(FleetScan {
        catalog: catalog.name().to_string(),
        scanned_at_ms,
        tables,
        errors,
        duration_ms: started.elapsed().as_millis() as u64,
    })
}
