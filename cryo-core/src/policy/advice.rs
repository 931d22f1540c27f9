//! The settings advisor, with approval: the property changes the grade recommends, as a change
//! set a person approves by its fingerprint before anything is written.
//!
//! ```text
//! (TableScan, HealthReport)… ──advise──▶ Advice { tables[].changes: key from → to, because }  (fingerprinted)
//!                                           │ a person reviews it, approves the fingerprint
//! Advice + approved fingerprint ──apply_advice──▶ per table: committed | already set | refused
//! ```
//!
//! `apply_advice` commits exactly the change set approved, through Cryo's commit driver, one
//! commit per table (`SetProperties`; `format-version` as a format upgrade). It refuses the
//! whole advice unless its fingerprint is the approved one, and refuses a table whose
//! properties moved since the advice (a key no longer holding the value the advice saw): a
//! person approved going from that value, not from another. Appends and rewrites in between
//! do not matter to a property change.

use std::collections::{BTreeMap, HashMap};

use iceberg::{TableRequirement, TableUpdate};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::catalog::{Catalog, LoadedTable, TableChanges, TableId};
use crate::clock::{Clock, SystemClock};
use crate::commit::RetryPolicy;
use crate::commit::driver::{Attempt, AttemptContext, CommitDriver, CommitOp, Driven};
use crate::error::{Error, Result};
use crate::grade::{HealthReport, Remedy};
use crate::ops::Operation;
use crate::receipt::{Receipt, ReceiptStatus};
use crate::scan::TableScan;

/// Current advice format.
pub const ADVICE_FORMAT_VERSION: u32 = 1;
/// The property key that is a format upgrade, not a property.
const FORMAT_VERSION: &str = "format-version";
/// The engine receipts of applied advice name.
const ENGINE: &str = "native";

/// One recommended property change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PropertyChange {
    /// Property key (`format-version` is the table's format version).
    pub key: String,
    /// Its value when advised (`None`: not set).
    pub from: Option<String>,
    /// The recommended value.
    pub to: String,
    /// The finding it fixes (check code).
    pub finding: String,
    /// Why, in the grade's words.
    pub reason: String,
    /// The operation that brings existing files in line afterwards, if any.
    pub then: Option<Operation>,
}

/// The changes recommended for one table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableAdvice {
    /// The table.
    pub table: TableId,
    /// Its UUID when advised (a table replaced since does not receive the changes).
    pub table_uuid: String,
    /// The changes, by key.
    pub changes: Vec<PropertyChange>,
}

/// A change set for a fleet: a value to review, store and approve by its fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Advice {
    /// Format version.
    pub format_version: u32,
    /// The catalog.
    pub catalog: String,
    /// When it was made (ms since epoch).
    pub created_at_ms: i64,
    /// Tables with changes, by identifier.
    pub tables: Vec<TableAdvice>,
    /// SHA-256 over the canonical JSON of everything above.
    pub fingerprint: String,
}

impl Advice {
    /// SHA-256 (hex) of the advice's JSON with an empty fingerprint.
    pub fn compute_fingerprint(&self) -> Result<String> {
        let mut copy = self.clone();
        copy.fingerprint.clear();
        let json = serde_json::to_vec(&copy).map_err(|e| Error::compute("advice to JSON", e))?;
        Ok(Sha256::digest(&json)
            .iter()
            .fold(String::new(), |mut s, b| {
                use std::fmt::Write as _;
                let _ = write!(s, "{b:02x}");
                s
            }))
    }

    /// The advice as JSON (what a reviewer reads and stores).
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self).map_err(|e| Error::compute("advice to JSON", e))
    }

    /// Read stored advice; refused unless it is intact (its fingerprint matches its content).
    pub fn from_json(json: &str) -> Result<Advice> {
        let advice: Advice = serde_json::from_str(json)
            .map_err(|e| Error::validation(format!("not Cryo advice JSON: {e}")))?;
        if advice.format_version != ADVICE_FORMAT_VERSION {
            return Err(Error::validation(format!(
                "advice format {} is not known to this Cryo (it reads {ADVICE_FORMAT_VERSION})",
                advice.format_version
            )));
        }
        advice.verify()?;
        Ok(advice)
    }

    /// Refuse advice whose content does not match its fingerprint.
    pub fn verify(&self) -> Result<()> {
        let computed = self.compute_fingerprint()?;
        if computed != self.fingerprint {
            return Err(Error::validation(format!(
                "advice fingerprint {} does not match its content ({computed}): it was changed after it was made",
                self.fingerprint
            )));
        }
        Ok(())
    }

    /// Whether the advice is intact and is the one approved.
    pub fn verify_approved(&self, approved: &str) -> Result<()> {
        self.verify()?;
        if self.fingerprint != approved {
            return Err(Error::validation(format!(
                "advice {} is not the approved advice {approved}: nothing was written",
                self.fingerprint
            )));
        }
        Ok(())
    }

    /// Number of changes.
    pub fn change_count(&self) -> usize {
        self.tables.iter().map(|t| t.changes.len()).sum()
    }
}

/// The property changes the grades recommend, per table, with the finding each fixes: the
/// findings whose remedy is a table property, for keys not already at the value.
pub fn advise(catalog: &str, graded: &[(TableScan, HealthReport)], now_ms: i64) -> Result<Advice> {
    let mut tables = Vec::new();
    for (scan, report) in graded {
        let mut changes: BTreeMap<String, PropertyChange> = BTreeMap::new();
        for f in &report.findings {
            let Remedy::TableProperty { key, value, then } = &f.remedy else {
                continue;
            };
            let from = if key == FORMAT_VERSION {
                Some(scan.format_version.to_string())
            } else {
                scan.properties.get(key).cloned()
            };
            if from.as_deref() == Some(value.as_str()) || changes.contains_key(key) {
                continue;
            }
            changes.insert(
                key.clone(),
                PropertyChange {
                    key: key.clone(),
                    from,
                    to: value.clone(),
                    finding: f.code.clone(),
                    reason: f.reason.clone(),
                    then: *then,
                },
            );
        }
        if !changes.is_empty() {
            tables.push(TableAdvice {
                table: scan.table.clone(),
                table_uuid: scan.table_uuid.clone(),
                changes: changes.into_values().collect(),
            });
        }
    }
    tables.sort_by(|a, b| a.table.cmp(&b.table));
    let mut advice = Advice {
        format_version: ADVICE_FORMAT_VERSION,
        catalog: catalog.to_string(),
        created_at_ms: now_ms,
        tables,
        fingerprint: String::new(),
    };
    advice.fingerprint = advice.compute_fingerprint()?;
    Ok(advice)
}

/// [`advise`] for scans graded with the default options, at the newest scan.
pub fn advise_scans(catalog: &str, scans: &[TableScan]) -> Result<Advice> {
    let options = crate::grade::GradeOptions::default();
    let graded = scans
        .iter()
        .map(|s| {
            Ok((
                s.clone(),
                crate::grade::grade(s, &options, s.scanned_at_ms)?,
            ))
        })
        .collect::<Result<Vec<_>>>()?;
    advise(catalog, &graded, super::resolve::newest_scan_ms(scans))
}

/// How applying one table's changes ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum AppliedStatus {
    /// Committed.
    Committed {
        /// The metadata file the commit wrote.
        metadata_location: Option<String>,
    },
    /// Every key already held its new value (an earlier apply, or a person): nothing written.
    AlreadySet,
    /// Not written: the table moved away from what the advice saw.
    Refused {
        /// Why.
        reason: String,
    },
    /// The commit failed.
    Failed {
        /// The error.
        reason: String,
    },
}

/// One table's changes, applied (or not).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppliedTable {
    /// The table.
    pub table: TableId,
    /// The changes approved for it.
    pub changes: Vec<PropertyChange>,
    /// How it ended.
    pub outcome: AppliedStatus,
}

/// What applying approved advice did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ApplyOutcome {
    /// The advice applied.
    pub advice_fingerprint: String,
    /// Per table.
    pub tables: Vec<AppliedTable>,
    /// A receipt per table.
    pub receipts: Vec<Receipt>,
}

/// Commit exactly the approved change set: nothing unless `approved` is the advice's
/// fingerprint and the advice is intact; per table one commit through the commit driver,
/// refused when the table was replaced or a key no longer holds the value the advice saw.
/// `actor` is named in the receipts.
pub async fn apply_advice(
    catalog: &Catalog,
    advice: &Advice,
    approved: &str,
    actor: &str,
) -> Result<ApplyOutcome> {
    advice.verify_approved(approved)?;
    if advice.catalog != catalog.name() {
        return Err(Error::validation(format!(
            "the advice is for catalog `{}`, not `{}`",
            advice.catalog,
            catalog.name()
        )));
    }
    let committer = catalog.committer()?;
    let mut out = ApplyOutcome {
        advice_fingerprint: advice.fingerprint.clone(),
        tables: Vec::new(),
        receipts: Vec::new(),
    };
    for t in &advice.tables {
        let started = std::time::Instant::now();
        let outcome = match apply_table(catalog, committer.as_ref(), t).await {
            Ok(o) => o,
            Err(e) if matches!(e, Error::Refused { .. }) => AppliedStatus::Refused {
                reason: e.to_string(),
            },
            Err(e) => AppliedStatus::Failed {
                reason: e.message_for(&t.table),
            },
        };
        let (status, reason) = match &outcome {
            AppliedStatus::Committed { .. } => (ReceiptStatus::Succeeded, None),
            AppliedStatus::AlreadySet => (
                ReceiptStatus::Skipped,
                Some("already set: nothing to write".to_string()),
            ),
            AppliedStatus::Refused { reason } => (ReceiptStatus::Skipped, Some(reason.clone())),
            AppliedStatus::Failed { reason } => (ReceiptStatus::Failed, Some(reason.clone())),
        };
        let mut receipt = Receipt::new(
            SystemClock.now_ms(),
            catalog.name(),
            t.table.clone(),
            None,
            ENGINE,
            status,
            actor,
        );
        let set: Vec<String> = t
            .changes
            .iter()
            .map(|c| format!("{}={}", c.key, c.to))
            .collect();
        receipt.reason = Some(match reason {
            Some(r) => format!(
                "settings {} (advice {}): {r}",
                set.join(", "),
                &advice.fingerprint[..12]
            ),
            None => format!(
                "settings {} (advice {})",
                set.join(", "),
                &advice.fingerprint[..12]
            ),
        });
        receipt.duration_ms =
            Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
        out.receipts.push(receipt);
        out.tables.push(AppliedTable {
            table: t.table.clone(),
            changes: t.changes.clone(),
            outcome,
        });
    }
    Ok(out)
}

async fn apply_table(
    catalog: &Catalog,
    committer: &dyn crate::catalog::CatalogCommitter,
    advice: &TableAdvice,
) -> Result<AppliedStatus> {
    let mut head = catalog.load_table(&advice.table).await?;
    let policy = RetryPolicy::for_table(head.metadata.properties())
        .map_err(|e| e.in_table(&advice.table))?;
    let mut driver = CommitDriver::new(committer, policy)?;
    let mut op = SettingsCommit { advice };
    match driver.drive(&mut head, &mut op).await? {
        Driven::Landed(landed) => Ok(AppliedStatus::Committed {
            metadata_location: landed.table.metadata_location.clone(),
        }),
        Driven::Nothing(_) => Ok(AppliedStatus::AlreadySet),
    }
}

/// One table's approved settings, staged on each head the driver gives.
struct SettingsCommit<'a> {
    advice: &'a TableAdvice,
}

impl SettingsCommit<'_> {
    fn current(head: &LoadedTable, key: &str) -> Option<String> {
        if key == FORMAT_VERSION {
            Some(
                match head.metadata.format_version() {
                    iceberg::spec::FormatVersion::V1 => "1",
                    iceberg::spec::FormatVersion::V2 => "2",
                    iceberg::spec::FormatVersion::V3 => "3",
                }
                .to_string(),
            )
        } else {
            head.metadata.properties().get(key).cloned()
        }
    }
}

impl CommitOp for SettingsCommit<'_> {
    async fn attempt(&mut self, head: &LoadedTable, _cx: AttemptContext<'_>) -> Result<Attempt> {
        let md = head.metadata.as_ref();
        let table = head.id.to_string();
        if md.uuid().to_string() != self.advice.table_uuid {
            return Err(Error::Refused {
                table,
                reason: format!(
                    "the table was replaced since the advice (UUID {} then, {} now): advise again",
                    self.advice.table_uuid,
                    md.uuid()
                ),
            });
        }
        let mut properties = HashMap::new();
        let mut upgrade = None;
        for c in &self.advice.changes {
            let now = Self::current(head, &c.key);
            if now.as_deref() == Some(c.to.as_str()) {
                continue; // set already (an attempt of unknown outcome, or a person)
            }
            if now != c.from {
                return Err(Error::Refused {
                    table,
                    reason: format!(
                        "`{}` is {} now, the approved advice went from {}: advise again",
                        c.key,
                        now.as_deref()
                            .map_or("unset".to_string(), |v| format!("`{v}`")),
                        c.from
                            .as_deref()
                            .map_or("unset".to_string(), |v| format!("`{v}`")),
                    ),
                });
            }
            if c.key == FORMAT_VERSION {
                let v: u8 = c.to.parse().map_err(|_| {
                    Error::validation(format!(
                        "{table}: format-version `{}` is not a number",
                        c.to
                    ))
                })?;
                let v = match v {
                    2 => iceberg::spec::FormatVersion::V2,
                    3 => iceberg::spec::FormatVersion::V3,
                    _ => {
                        return Err(Error::validation(format!(
                            "{table}: a table can be upgraded to format 2 or 3, not {v}"
                        )));
                    }
                };
                upgrade = Some(v);
            } else {
                properties.insert(c.key.clone(), c.to.clone());
            }
        }
        if properties.is_empty() && upgrade.is_none() {
            return Ok(Attempt::Nothing);
        }
        let mut updates = Vec::new();
        if let Some(format_version) = upgrade {
            updates.push(TableUpdate::UpgradeFormatVersion { format_version });
        }
        if !properties.is_empty() {
            updates.push(TableUpdate::SetProperties {
                updates: properties,
            });
        }
        Ok(Attempt::Changes(TableChanges::new(
            vec![TableRequirement::UuidMatch { uuid: md.uuid() }],
            updates,
        )))
    }
}
