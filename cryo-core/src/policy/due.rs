//! What is due: given the policy and the receipt log, the tables and operations whose cadence
//! has come, inside their windows, not paused and not backing off after failures. An Airflow
//! DAG or a Dagster sensor that asks every few minutes, and plans what it is told, is the whole
//! scheduler.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::file::{Backoff, DestinationKind};
use super::resolve::{Policy, ResolvedTable};
use crate::catalog::TableId;
use crate::error::Result;
use crate::grade::HealthReport;
use crate::ops::Operation;
use crate::plan::{MaintenancePlan, TableControl, window_opens_in};
use crate::receipt::{Receipt, ReceiptStatus};
use crate::scan::TableScan;

/// Failures of one operation on one table since it last succeeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Streak {
    /// The table.
    pub table: TableId,
    /// The operation.
    pub operation: Operation,
    /// Failures in a row.
    pub failures: u32,
    /// When the last one was (ms since epoch).
    pub last_failure_ms: i64,
    /// What the last one said.
    pub last_error: Option<String>,
    /// When it last succeeded, if ever.
    pub last_success_ms: Option<i64>,
}

/// Per table and operation: when it last succeeded and the failures since, from receipts in
/// any order (a receipt log that several machines append to is not sorted).
pub fn streaks(receipts: &[Receipt]) -> BTreeMap<(TableId, Operation), Streak> {
    let mut ordered: Vec<&Receipt> = receipts
        .iter()
        .filter(|r| r.operation.is_some())
        .filter(|r| matches!(r.status, ReceiptStatus::Succeeded | ReceiptStatus::Failed))
        .collect();
    ordered.sort_by_key(|r| r.at_ms);
    let mut out: BTreeMap<(TableId, Operation), Streak> = BTreeMap::new();
    for r in ordered {
        let Some(op) = r.operation else { continue };
        let s = out.entry((r.table.clone(), op)).or_insert_with(|| Streak {
            table: r.table.clone(),
            operation: op,
            failures: 0,
            last_failure_ms: 0,
            last_error: None,
            last_success_ms: None,
        });
        if r.status == ReceiptStatus::Succeeded {
            s.failures = 0;
            s.last_success_ms = Some(r.at_ms);
        } else {
            s.failures += 1;
            s.last_failure_ms = r.at_ms;
            s.last_error.clone_from(&r.reason);
        }
    }
    out
}

/// One table with operations due.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DueTable {
    /// The table.
    pub table: TableId,
    /// Its preset.
    pub preset: String,
    /// Where its work runs.
    pub destination: DestinationKind,
    /// The operations due, in the fixed order.
    pub operations: Vec<Operation>,
}

/// An operation held back after failing several times in a row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct BackingOff {
    /// The table.
    pub table: TableId,
    /// The operation.
    pub operation: Operation,
    /// Failures in a row.
    pub failures: u32,
    /// What the last one said.
    pub last_error: Option<String>,
    /// When it may run again (ms since epoch).
    pub retry_at_ms: i64,
}

/// What is due at an instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Due {
    /// The policy's fingerprint.
    pub policy_fingerprint: String,
    /// The instant asked about.
    pub now_ms: i64,
    /// Tables with something due, by identifier.
    pub tables: Vec<DueTable>,
    /// Operations held back by their failures (the fleet view lists them).
    pub backing_off: Vec<BackingOff>,
    /// Paused tables and why.
    pub paused: Vec<(TableId, String)>,
    /// The earliest instant something not due now becomes due (cadence, window or backoff),
    /// if any: when to ask again.
    pub next_due_ms: Option<i64>,
}

impl Due {
    /// Whether anything is due.
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }
}

impl Policy {
    /// The tables and operations due at `now_ms`: the preset's operations whose cadence has
    /// come since they last succeeded (per `receipts`), inside the preset's window, on tables
    /// not paused, and not backing off after failures in a row (the policy's `backoff`).
    /// Whether a finding calls for an operation is the plan's question, not this one's.
    pub fn due(
        &self,
        graded: &[(TableScan, HealthReport)],
        receipts: &[Receipt],
        now_ms: i64,
    ) -> Due {
        let streaks = streaks(receipts);
        let backoff = self.file().backoff.unwrap_or_default();
        let mut due = Due {
            policy_fingerprint: self.fingerprint().to_string(),
            now_ms,
            tables: Vec::new(),
            backing_off: Vec::new(),
            paused: Vec::new(),
            next_due_ms: None,
        };
        let mut later = |at: i64| {
            due.next_due_ms = Some(due.next_due_ms.map_or(at, |n: i64| n.min(at)));
        };
        let mut tables = Vec::new();
        let mut backing_off = Vec::new();
        let mut paused = Vec::new();
        for (scan, report) in graded {
            let resolved: ResolvedTable = self.resolve(scan, report, now_ms);
            let operations = self.plan_options(&resolved).operations.clone();
            if let Some(reason) = resolved.paused {
                paused.push((resolved.table, reason));
                continue;
            }
            let preset = &self.presets()[&resolved.preset];
            if let Some(w) = preset.window
                && let Some(opens_in) = window_opens_in(w, now_ms)
            {
                later(now_ms.saturating_add(opens_in));
                continue;
            }
            let mut ops = Vec::new();
            for op in operations.unwrap_or_else(|| Operation::ORDER.to_vec()) {
                let streak = streaks.get(&(scan.table.clone(), op));
                let last_ok = streak.and_then(|s| s.last_success_ms);
                if let (Some(every), Some(last)) = (preset.every_ms, last_ok) {
                    let at = last.saturating_add(every);
                    if at > now_ms {
                        later(at);
                        continue;
                    }
                }
                if let Some(s) = streak
                    && let Some(wait) = backoff_wait(&backoff, s.failures)
                {
                    let retry_at = s.last_failure_ms.saturating_add(wait);
                    if retry_at > now_ms {
                        later(retry_at);
                        backing_off.push(BackingOff {
                            table: scan.table.clone(),
                            operation: op,
                            failures: s.failures,
                            last_error: s.last_error.clone(),
                            retry_at_ms: retry_at,
                        });
                        continue;
                    }
                }
                ops.push(op);
            }
            ops.sort();
            if !ops.is_empty() {
                tables.push(DueTable {
                    table: resolved.table,
                    preset: resolved.preset,
                    destination: resolved.destination,
                    operations: ops,
                });
            }
        }
        tables.sort_by(|a, b| a.table.cmp(&b.table));
        backing_off.sort_by(|a, b| (&a.table, a.operation).cmp(&(&b.table, b.operation)));
        paused.sort();
        due.tables = tables;
        due.backing_off = backing_off;
        due.paused = paused;
        due
    }

    /// Plan what is due: each due table with only its due operations (and its preset's other
    /// options), under the same policy, pauses and caps as [`Policy::plan`]. Tables with nothing
    /// due are left out of the plan.
    pub fn plan_due(
        &self,
        catalog: &str,
        graded: &[(TableScan, HealthReport)],
        due: &Due,
        controls: &BTreeMap<TableId, TableControl>,
        now_ms: i64,
    ) -> Result<MaintenancePlan> {
        let by_table: BTreeMap<&TableId, &DueTable> =
            due.tables.iter().map(|t| (&t.table, t)).collect();
        let chosen: Vec<(TableScan, HealthReport)> = graded
            .iter()
            .filter(|(s, _)| by_table.contains_key(&s.table))
            .cloned()
            .collect();
        self.plan_with(catalog, &chosen, controls, now_ms, |table, options| {
            if let Some(t) = by_table.get(table) {
                options.operations = Some(t.operations.clone());
            }
        })
    }
}

fn backoff_wait(backoff: &Backoff, failures: u32) -> Option<i64> {
    backoff.wait_ms(failures)
}
