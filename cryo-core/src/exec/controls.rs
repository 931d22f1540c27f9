//! What a scheduler knows about its tables between runs: pauses, deadlines, and when each
//! operation last ran (from the receipt log), checked by the planner and again by the run.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalog::TableId;
use crate::error::{Error, Result};
use crate::plan::TableControl;
use crate::receipt::{JsonLinesLog, Receipt, ReceiptLog, ReceiptStatus};

/// The per-table controls the planner takes, rebuilt from receipts: when each operation last
/// succeeded on each table, so cooldowns hold across runs and processes that share a log.
pub fn controls_from_receipts(receipts: &[Receipt]) -> BTreeMap<TableId, TableControl> {
    let mut out: BTreeMap<TableId, TableControl> = BTreeMap::new();
    for r in receipts {
        if r.status != ReceiptStatus::Succeeded {
            continue;
        }
        let Some(op) = r.operation else { continue };
        let last = out
            .entry(r.table.clone())
            .or_default()
            .last_runs
            .entry(op)
            .or_insert(r.at_ms);
        *last = (*last).max(r.at_ms);
    }
    out
}

/// Where a scheduler keeps what it knows about its tables between runs: controls it was given
/// (pauses, deadlines, last runs), and a receipt log whose successful receipts say when each
/// operation last ran. [`ControlSources::load`] folds them into the per-table controls that
/// [`plan_fleet`](crate::plan::plan_fleet) and [`FleetRun`](crate::exec::FleetRun) take; the
/// Python and Node packages hand theirs over as this value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControlSources {
    /// Per table, keyed by its identifier as written (`ns.table`, `"my.ns".t`).
    pub tables: BTreeMap<String, TableControl>,
    /// A receipt log: a local file of JSON lines (as [`JsonLinesLog`] writes it), or a
    /// location on object storage (as [`ObjectReceiptLog`](crate::receipt::ObjectReceiptLog)
    /// writes it, read with [`ControlSources::load_from`]); absent: none yet.
    pub receipt_log: Option<String>,
}

impl ControlSources {
    /// The controls of every table either source names. Fails on an identifier that does not
    /// parse or a receipt log that cannot be read.
    /// A log on object storage needs a catalog to reach it: [`Self::load_from`].
    pub fn load(&self) -> Result<BTreeMap<TableId, TableControl>> {
        let receipts = match self.receipt_log.as_deref().map(str::trim) {
            Some(spec) if spec.contains("://") && !spec.starts_with("file:") => {
                return Err(Error::config(format!(
                    "receipt log `{spec}` is on object storage: read it through the catalog \
                     (ControlSources::load_from)"
                )));
            }
            Some(spec) => JsonLinesLog::new(spec.strip_prefix("file://").unwrap_or(spec)).read()?,
            None => Vec::new(),
        };
        self.fold(&receipts)
    }

    /// [`Self::load`], reading a receipt log on object storage with `catalog`'s storage
    /// properties (the log maintainers on other machines append to).
    pub async fn load_from(
        &self,
        catalog: &crate::catalog::Catalog,
    ) -> Result<BTreeMap<TableId, TableControl>> {
        self.fold(&self.receipts_from(catalog).await?)
    }

    /// The receipts of the log (none without one), local or on object storage, read with
    /// `catalog`'s storage properties: what [`crate::policy::Policy::due`] counts failures in.
    pub async fn receipts_from(&self, catalog: &crate::catalog::Catalog) -> Result<Vec<Receipt>> {
        match &self.receipt_log {
            Some(spec) => ReceiptLog::open(catalog, spec)?.read().await,
            None => Ok(Vec::new()),
        }
    }

    fn fold(&self, receipts: &[Receipt]) -> Result<BTreeMap<TableId, TableControl>> {
        let mut out = controls_from_receipts(receipts);
        for (name, control) in &self.tables {
            out.entry(TableId::parse(name)?).or_default().merge(control);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::ops::Operation;

    #[test]
    fn control_sources_fold_the_log_and_the_given_controls() {
        let table = TableId::parse("lake.t").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let log = JsonLinesLog::new(dir.path().join("r.jsonl"));
        let receipt =
            |at, op, status| Receipt::new(at, "c", table.clone(), Some(op), "native", status, "me");
        log.append(&[
            receipt(100, Operation::RewriteDataFiles, ReceiptStatus::Succeeded),
            receipt(300, Operation::RewriteDataFiles, ReceiptStatus::Succeeded),
            receipt(900, Operation::ExpireSnapshots, ReceiptStatus::Failed),
        ])
        .unwrap();
        let sources = ControlSources {
            tables: BTreeMap::from([(
                "lake.t".to_string(),
                TableControl {
                    paused: true,
                    last_runs: BTreeMap::from([(Operation::RewriteDataFiles, 200)]),
                    deadline_ms: Some(5_000),
                    ..Default::default()
                },
            )]),
            receipt_log: Some(log.path().display().to_string()),
        };
        let controls = sources.load().unwrap();
        let c = &controls[&table];
        assert!(c.paused);
        assert_eq!(c.pause().as_deref(), Some("paused by its controls"));
        assert_eq!(c.deadline_ms, Some(5_000));
        // The later of the two sources; a failed run starts no cooldown.
        assert_eq!(
            c.last_runs,
            BTreeMap::from([(Operation::RewriteDataFiles, 300)])
        );
        let cooldowns = BTreeMap::from([(Operation::RewriteDataFiles, 1_000)]);
        assert_eq!(
            c.cooldown_until_ms(Operation::RewriteDataFiles, &cooldowns, 500),
            Some(1_300)
        );
        assert_eq!(
            c.cooldown_until_ms(Operation::RewriteDataFiles, &cooldowns, 1_300),
            None
        );
        assert_eq!(
            c.cooldown_until_ms(Operation::ExpireSnapshots, &cooldowns, 500),
            None
        );

        let bad = ControlSources {
            tables: BTreeMap::from([("no_namespace".to_string(), TableControl::default())]),
            receipt_log: None,
        };
        assert!(matches!(bad.load(), Err(Error::Validation { .. })));
    }

    #[test]
    fn a_log_on_object_storage_needs_the_catalog() {
        let sources = ControlSources {
            receipt_log: Some("s3://bucket/cryo/receipts".to_string()),
            ..ControlSources::default()
        };
        let e = sources.load().unwrap_err();
        assert!(
            matches!(e, Error::Config { .. }) && e.to_string().contains("load_from"),
            "{e}"
        );
    }
}
