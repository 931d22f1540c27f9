//! Trino's Iceberg connector: `ALTER TABLE … EXECUTE` table procedures and `ANALYZE`.
//!
//! Trino accepts `optimize … WHERE` only when the connector can enforce the whole predicate on
//! partitions (`TableExecuteStructureValidator` refuses any leftover filter with "Unexpected
//! `FilterNode` found in plan; probably connector was not able to handle provided WHERE
//! expression"). `IcebergUtil.canEnforceColumnConstraintInSpecs` enforces a column domain when
//! the column is an identity partition source, or a monotonic transform's source (year, month,
//! day, hour, truncate) with range bounds on partition boundaries. So this dialect renders:
//!
//! - identity partitions: `c = v` / `c IS NULL`;
//! - time partitions: `c >= lower AND c < upper` with bounds checked for alignment;
//! - integer truncation: the same with multiples of the width;
//! - nothing at all for a partition keyed by a `fixed[n]` identity field: Trino cannot scan
//!   such a table (split generation fails converting the partition value: "Unsupported iceberg
//!   type: fixed[n]", seen on 483), so the partition is left out of its chunk with that reason
//!   rather than dropped to a superset that would fail the same way;
//! - nothing for bucket, string truncation (a `varchar` has no adjacent value, so no range on
//!   it is enforceable) or nested columns: dropped (a superset) and noted;
//! - several partitions as one `OR` only when it reduces to one value set per column (one
//!   column, or a full cross product written as an `AND` of per-column `OR`s), otherwise one
//!   statement per partition: a multi-column `OR` leaves a filter Trino refuses.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::catalog::TableId;
use crate::plan::{
    EqualityDeleteMethod, FieldPredicate, PartitionTarget, PlannedStep, PredicateKind,
    RewriteStrategy, StepParams,
};

use super::literal::{self, Typed, data_size_text, duration_text, typed};
use super::{Conjunction, Dialect, Filter, Term, TrinoOptions, and_terms};
use crate::error::Result;

/// Renders for Trino (see the module docs for the `WHERE` rules).
#[derive(Debug, Clone)]
pub struct TrinoDialect {
    options: TrinoOptions,
}

impl TrinoDialect {
    /// A dialect for validated options.
    pub fn new(options: TrinoOptions) -> Result<Self> {
        options.validate()?;
        Ok(Self { options })
    }

    /// The options.
    pub fn options(&self) -> &TrinoOptions {
        &self.options
    }

    fn literal(&self, t: &Typed) -> String {
        match t {
            Typed::Boolean(b) => b.to_string(),
            Typed::Integer(i) => i.to_string(),
            Typed::Float32(f) => format!("REAL '{f}'"),
            Typed::Float64(f) => format!("DOUBLE '{f}'"),
            Typed::Decimal(d) => format!("DECIMAL '{d}'"),
            Typed::String(s) => self.quote_string(s),
            Typed::Uuid(u) => format!("UUID '{u}'"),
            Typed::Binary(h) => format!("X'{h}'"),
            Typed::Time(t) => format!("TIME '{t}'"),
            Typed::Date(d) => format!("DATE '{d}'"),
            // The padding matches the column's precision (timestamp(6), or (9) for nanos).
            Typed::Timestamp { ts, nanos } => {
                format!(
                    "TIMESTAMP '{}'",
                    ts.padded(if *nanos { 9 } else { 6 }).unwrap_or_default()
                )
            }
            // An explicit zone: a zoneless literal would be read in the session time zone.
            Typed::TimestampTz { ts, nanos } => {
                format!(
                    "TIMESTAMP '{} UTC'",
                    ts.padded(if *nanos { 9 } else { 6 }).unwrap_or_default()
                )
            }
        }
    }

    fn range_enforceable(
        transform: &str,
        column: &str,
        lower: &Typed,
        upper: &Typed,
    ) -> std::result::Result<(), String> {
        let misaligned = || {
            Err(format!(
                "range on {column} ({transform}): its bounds are not on partition boundaries, which Trino's OPTIMIZE refuses"
            ))
        };
        match transform {
            "identity" => Ok(()),
            "year" | "month" | "day" | "hour" => {
                let ok = |t: &Typed| match t {
                    Typed::Date(d) => literal::date_aligned(transform, *d),
                    Typed::Timestamp { ts, .. } | Typed::TimestampTz { ts, .. } => {
                        literal::timestamp_aligned(transform, ts)
                    }
                    _ => false,
                };
                if ok(lower) && ok(upper) {
                    Ok(())
                } else {
                    misaligned()
                }
            }
            t if t.starts_with("truncate") => {
                match (literal::transform_width(t, "truncate"), lower, upper) {
                    (Some(w), Typed::Integer(lo), Typed::Integer(hi)) => {
                        if lo.rem_euclid(w) == 0 && hi.rem_euclid(w) == 0 {
                            Ok(())
                        } else {
                            misaligned()
                        }
                    }
                    _ => Err(format!(
                        "range on {column} ({transform}): Trino enforces truncation ranges only on integer columns"
                    )),
                }
            }
            _ => Err(format!(
                "range on {column} ({transform}): Trino cannot enforce a range through this transform"
            )),
        }
    }

    fn retention_check(
        what: &str,
        property: &str,
        retention_ms: i64,
        floor_ms: i64,
    ) -> std::result::Result<(), String> {
        if retention_ms <= 0 {
            return Err(format!("malformed plan: {what} retention must be positive"));
        }
        if retention_ms < floor_ms {
            return Err(format!(
                "retention {} is below this cluster's {property} ({}): Trino refuses it (\"Retention specified … is shorter than the minimum retention configured in the system\"); raise the plan's retention, or lower the floor in the catalog properties and in these options",
                duration_text(retention_ms),
                duration_text(floor_ms)
            ));
        }
        Ok(())
    }
}

impl Dialect for TrinoDialect {
    fn name(&self) -> &'static str {
        "trino"
    }

    fn catalog(&self) -> &str {
        &self.options.catalog
    }

    fn quote_ident(&self, part: &str) -> String {
        format!("\"{}\"", part.replace('"', "\"\""))
    }

    /// `'…'` with `''` for a quote; a value with control characters becomes a Unicode string
    /// literal `U&'…'` (`\XXXX` escapes, `\\` for a backslash) so no statement carries a raw
    /// line break. Trino has no backslash escapes in ordinary strings.
    fn quote_string(&self, value: &str) -> String {
        if value.chars().any(char::is_control) {
            let mut out = String::from("U&'");
            for c in value.chars() {
                match c {
                    '\'' => out.push_str("''"),
                    '\\' => out.push_str("\\\\"),
                    c if c.is_control() => {
                        let _ = write!(out, "\\{:04X}", u32::from(c));
                    }
                    c => out.push(c),
                }
            }
            out.push('\'');
            out
        } else {
            format!("'{}'", value.replace('\'', "''"))
        }
    }

    /// `"catalog"."schema"."table"`; a nested namespace is one schema named `a.b` (how Trino's
    /// REST catalog shows nested namespaces).
    fn table_name(&self, table: &TableId) -> String {
        format!(
            "{}.{}.{}",
            self.quote_ident(&self.options.catalog),
            self.quote_ident(&table.namespace.dotted()),
            self.quote_ident(&table.name)
        )
    }

    /// Besides an empty part: a nested namespace with a dot inside a level. Trino addresses a
    /// nested namespace as one schema named with the levels joined by dots, which its REST
    /// catalog splits at every dot again: `["a.b", "c"]` would reach `["a", "b", "c"]` (and with
    /// nested namespaces off, no nested namespace is reachable at all).
    ///
    /// And a name with upper-case letters, unless the catalog matches names case-insensitively:
    /// Trino folds identifiers to lower case, quoted or not, and would look the table up under
    /// the lower-cased name — a lower-case twin, or nothing.
    fn unaddressable(&self, table: &TableId) -> Option<String> {
        super::empty_part(table)
            .or_else(|| {
                let levels = &table.namespace.0;
                (levels.len() > 1 && levels.iter().any(|l| l.contains('.'))).then(|| {
                    format!(
                        "unaddressable table name {}: Trino names a nested namespace as one schema with its levels joined by dots, so a level that itself contains a dot would address another namespace",
                        super::literal::comment_safe(&table.to_string())
                    )
                })
            })
            .or_else(|| {
                (!self.options.case_insensitive_name_matching
                    && table.parts().iter().any(|p| p.chars().any(char::is_uppercase)))
                .then(|| {
                    format!(
                        "unaddressable table name {}: Trino folds identifiers to lower case, quoted or not, and would look up {} — another table or none (a REST catalog with iceberg.rest-catalog.case-insensitive-name-matching: set case_insensitive_name_matching)",
                        super::literal::comment_safe(&table.to_string()),
                        super::literal::comment_safe(&table.to_string().to_lowercase())
                    )
                })
            })
    }

    fn table_notes(&self, table: &TableId) -> Vec<String> {
        let mut notes = Vec::new();
        if table.namespace.0.len() > 1 {
            notes.push(format!(
                "the nested namespace {} is addressed as the single Trino schema \"{}\" (REST catalogs need iceberg.rest-catalog.nested-namespace-enabled)",
                table.namespace,
                table.namespace.dotted()
            ));
        }
        let upper = |p: &str| p.chars().any(char::is_uppercase);
        if upper(&self.options.catalog) {
            notes.push(format!(
                "Trino folds identifiers to lower case, quoted or not: the catalog is looked up as {}",
                super::literal::comment_safe(&self.options.catalog.to_lowercase())
            ));
        }
        // Without case-insensitive matching such a table is refused (`unaddressable`).
        if self.options.case_insensitive_name_matching && table.parts().iter().any(|p| upper(p)) {
            notes.push(
                "Trino folds identifiers to lower case, quoted or not: the table is looked up in lower case and matched by the catalog's case-insensitive name matching"
                    .to_string(),
            );
        }
        notes
    }

    fn field_predicate(&self, p: &FieldPredicate) -> std::result::Result<Term, String> {
        let column = &p.column;
        let transform = p.transform.as_str();
        if transform == "void" {
            return Err(format!(
                "predicate on {column} (void): a void partition field constrains nothing"
            ));
        }
        if column.contains('.') {
            return Err(format!(
                "predicate on nested column {column}: Trino's OPTIMIZE WHERE is only relied on for top-level partition source columns"
            ));
        }
        let c = self.quote_ident(column);
        match &p.kind {
            PredicateKind::IsNull => Ok(Term {
                column: column.clone(),
                sql: format!("{c} IS NULL"),
                compound: false,
            }),
            PredicateKind::Eq { value } => {
                if transform != "identity" {
                    return Err(format!(
                        "equality on {column} ({transform}): Trino enforces a single value only on identity partitions"
                    ));
                }
                let v = typed(value, column, &p.column_type)?;
                Ok(Term {
                    column: column.clone(),
                    sql: format!("{c} = {}", self.literal(&v)),
                    compound: false,
                })
            }
            PredicateKind::Range { lower, upper } => {
                let lo = typed(lower, column, &p.column_type)?;
                let hi = typed(upper, column, &p.column_type)?;
                Self::range_enforceable(transform, column, &lo, &hi)?;
                Ok(Term {
                    column: column.clone(),
                    sql: format!(
                        "{c} >= {} AND {c} < {}",
                        self.literal(&lo),
                        self.literal(&hi)
                    ),
                    compound: true,
                })
            }
            PredicateKind::StartsWith { .. } => Err(format!(
                "prefix predicate on {column} ({transform}): Trino cannot enforce a string prefix in OPTIMIZE's WHERE"
            )),
            PredicateKind::Bucket { buckets, .. } => Err(format!(
                "bucket[{buckets}] predicate on {column}: Trino's OPTIMIZE WHERE cannot select one bucket"
            )),
        }
    }

    /// Trino enforces a column's domain only if every partition spec with manifests in the
    /// current snapshot partitions by that column in a way that holds it
    /// (`canEnforceColumnConstraintInSpecs` takes `allMatch` over the specs). Within a step whose
    /// partitions come from several specs, a column is kept only when every one of those specs
    /// partitions it with the same transform.
    fn unfilterable_columns(&self, step: &PlannedStep) -> Vec<(String, String)> {
        let mut by_spec: BTreeMap<i32, BTreeMap<&str, &str>> = BTreeMap::new();
        for p in step.chunks.iter().flat_map(|c| &c.partitions) {
            let fields = by_spec.entry(p.spec_id).or_default();
            for f in p.predicate.iter().filter(|f| f.transform != "void") {
                fields.insert(f.column.as_str(), f.transform.as_str());
            }
        }
        if by_spec.len() < 2 {
            return Vec::new();
        }
        let columns: BTreeSet<&str> = by_spec.values().flat_map(|f| f.keys().copied()).collect();
        let specs = by_spec
            .keys()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        columns
            .into_iter()
            .filter(|col| {
                let transforms: BTreeSet<Option<&str>> =
                    by_spec.values().map(|f| f.get(col).copied()).collect();
                transforms.len() > 1 || transforms.contains(&None)
            })
            .map(|col| {
                (
                    col.to_string(),
                    format!(
                        "predicate on {col}: the step's partition specs ({specs}) do not all partition {col} the same way, and Trino enforces a WHERE column only when every spec with files does"
                    ),
                )
            })
            .collect()
    }

    /// A `fixed[n]` identity partition value: Trino reads none (`IcebergTypes.convertIcebergValueToTrino`
    /// has no case for it), so every scan that reaches a file of such a partition fails while
    /// generating splits: no WHERE can select the partition. Files of a partition of another spec,
    /// without the fixed field, are pruned before that and scan fine (seen on 483, with
    /// `OPTIMIZE WHERE` too), so only the fixed partitions are left out. Other transforms of a
    /// fixed column (bucket) yield values Trino reads.
    fn unreachable_partition(&self, partition: &PartitionTarget) -> Option<String> {
        partition
            .predicate
            .iter()
            .find(|f| f.transform == "identity" && f.column_type.starts_with("fixed["))
            .map(|f| {
                format!(
                    "partitioned by {} ({}): Trino cannot scan a table partitioned by a fixed column (split generation fails with \"Unsupported iceberg type: {}\", seen on Trino 483), so no statement on this partition could run",
                    f.column, f.column_type, f.column_type
                )
            })
    }

    fn filters(&self, conjunctions: &[Conjunction], notes: &mut Vec<String>) -> Vec<Filter> {
        let all: Vec<usize> = conjunctions
            .iter()
            .flat_map(|c| c.partitions.iter().copied())
            .collect();
        if conjunctions.len() == 1 {
            return vec![Filter {
                sql: and_terms(conjunctions[0].terms.iter().map(|t| t.sql.as_str())),
                partitions: all,
            }];
        }
        if let Some((sql, varying)) = cross_product(conjunctions) {
            if varying > 1 {
                super::push_unique(
                    notes,
                    "the chunk's partitions form a full cross product of column values, written as an AND of per-column ORs (a WHERE Trino can enforce)".to_string(),
                );
            }
            return vec![Filter {
                sql,
                partitions: all,
            }];
        }
        super::push_unique(
            notes,
            "Trino's OPTIMIZE takes a WHERE only when it reduces to one value set per column; partitions that differ in several columns without forming a cross product render as one statement each"
                .to_string(),
        );
        conjunctions
            .iter()
            .map(|c| Filter {
                sql: and_terms(c.terms.iter().map(|t| t.sql.as_str())),
                partitions: c.partitions.clone(),
            })
            .collect()
    }

    #[allow(clippy::too_many_lines)] // one arm per operation, each a short block
    fn prepare(
        &self,
        step: &PlannedStep,
        _plan_created_at_ms: i64,
    ) -> std::result::Result<Vec<String>, String> {
        let v = self.options.version;
        let mut notes = Vec::new();
        let specs: BTreeSet<i32> = step
            .chunks
            .iter()
            .flat_map(|c| c.partitions.iter().map(|p| p.spec_id))
            .collect();
        if specs.len() > 1 {
            notes.push(format!(
                "partitions of several partition specs ({}): Trino filters only on columns every spec with manifests in the current snapshot partitions alike, including specs this plan does not touch",
                specs.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            ));
        }
        match &step.params {
            StepParams::ConvertEqualityDeletes { method, .. } => {
                if *method == EqualityDeleteMethod::PositionDeletes {
                    notes.push(
                        "the plan converts these equality deletes to position deletes, which only Cryo's native engine does: Trino rewrites the data files instead"
                            .to_string(),
                    );
                }
                notes.push(
                    "Trino has no equality-delete conversion: OPTIMIZE with file_size_threshold => '1PB' (no file is that large) selects every data file of the selected partitions and rewrites them, applying their deletes (Trino leaves a partition alone when it holds a single file and no delete applies to it); whether Trino also drops the applied delete files from metadata depends on the release"
                        .to_string(),
                );
            }
            StepParams::RewritePositionDeletes { .. } => {
                return Err(
                    "Trino has no procedure that rewrites position-delete files (its OPTIMIZE applies them while rewriting data files); run this step on Spark (rewrite_position_delete_files)"
                        .to_string(),
                );
            }
            StepParams::RewriteDataFiles {
                strategy,
                target_file_size_bytes,
                min_file_size_bytes,
                max_file_size_bytes,
                min_input_files,
                ..
            } => {
                match strategy {
                    RewriteStrategy::BinPack => {}
                    RewriteStrategy::Sort { columns } if columns.is_empty() => notes.push(
                        "Trino's OPTIMIZE writes in the table's sort order (sorted_by) by itself; no sort argument is passed".to_string(),
                    ),
                    RewriteStrategy::Sort { .. } => {
                        return Err(
                            "Trino's OPTIMIZE cannot sort by given columns (it bin-packs, following only the table's sorted_by property): set sorted_by and re-plan with the table's order, or run this step on Spark"
                                .to_string(),
                        );
                    }
                    RewriteStrategy::ZOrder { .. } => {
                        return Err(
                            "Trino's OPTIMIZE has no z-order (it bin-packs only); run this step on Spark (strategy => 'sort', sort_order => 'zorder(...)')"
                                .to_string(),
                        );
                    }
                    RewriteStrategy::Hilbert { .. } => {
                        return Err(
                            "Trino's OPTIMIZE has no Hilbert order (it bin-packs only); run this step on Cryo's native engine"
                                .to_string(),
                        );
                    }
                }
                notes.push(format!(
                    "file_size_threshold => '{}' selects files smaller than the plan's min_file_size_bytes; files with deletes attached are rewritten whatever their size",
                    data_size_text(*min_file_size_bytes)
                ));
                notes.push(format!(
                    "output files are sized by the catalog's iceberg.target-max-file-size (session property target_max_file_size), not the plan's target of {target_file_size_bytes} bytes"
                ));
                notes.push(format!(
                    "Trino does not split files above {max_file_size_bytes} bytes, and merges a partition's selected files once there are two (or one with deletes) instead of {min_input_files}"
                ));
            }
            StepParams::ComputeStatistics { columns } => {
                notes.push(
                    "ANALYZE collects number-of-distinct-values statistics into a Puffin file (what Spark's compute_table_stats writes); it always reads the whole table"
                        .to_string(),
                );
                if columns.iter().any(|c| c.contains('.')) {
                    return Err("Trino's ANALYZE takes top-level columns only; the plan names a nested column".to_string());
                }
                if columns.iter().any(|c| c.to_lowercase() != *c) {
                    notes.push(
                        "Trino shows column names in lower case, so ANALYZE's columns are passed in lower case".to_string(),
                    );
                }
            }
            StepParams::RewriteManifests {
                target_manifest_size_bytes,
            } => {
                if v < super::TRINO_OPTIMIZE_MANIFESTS {
                    return Err(format!(
                        "Trino {v} has no optimize_manifests (added in Trino {}); upgrade, or run this step on Spark (rewrite_manifests)",
                        super::TRINO_OPTIMIZE_MANIFESTS
                    ));
                }
                notes.push(format!(
                    "manifest size comes from the table property commit.manifest.target-size-bytes; the plan's {target_manifest_size_bytes} bytes is not an argument"
                ));
            }
            StepParams::ExpireSnapshots {
                retain_last,
                retention_ms,
                ..
            } => {
                Self::retention_check(
                    "expiry",
                    "iceberg.expire-snapshots.min-retention",
                    *retention_ms,
                    self.options.expire_snapshots_min_retention_ms,
                )?;
                if *retain_last > 1 && v < super::TRINO_EXPIRE_RETAIN_LAST {
                    return Err(format!(
                        "the plan keeps the newest {retain_last} snapshots, but Trino {v}'s expire_snapshots has no retain_last (from Trino {}); it would expire more than planned. Upgrade, run this step on Spark, or re-plan with retain_last 1",
                        super::TRINO_EXPIRE_RETAIN_LAST
                    ));
                }
                if v < super::TRINO_EXPIRE_RETAIN_LAST {
                    notes.push(format!(
                        "retain_last is not passed (Trino {v} has no such argument); the current snapshot is always kept"
                    ));
                } else if *retain_last == 0 {
                    notes.push(
                        "retain_last 0 is passed as 1: Iceberg always keeps the current snapshot"
                            .to_string(),
                    );
                }
                notes.push(format!(
                    "Trino takes a duration: the cutoff is computed when the statement runs (now - {}), not the plan's older_than",
                    duration_text(*retention_ms)
                ));
            }
            StepParams::RemoveOrphanFiles {
                retention_ms,
                dry_run,
                ..
            } => {
                if *dry_run {
                    return Err(
                        "the plan asks for a dry run, and Trino's remove_orphan_files has none (it always deletes): nothing is rendered. Render this step for Spark (dry_run => true), or re-plan with dry_run = false"
                            .to_string(),
                    );
                }
                Self::retention_check(
                    "orphan",
                    "iceberg.remove-orphan-files.min-retention",
                    *retention_ms,
                    self.options.remove_orphan_files_min_retention_ms,
                )?;
                notes.push(format!(
                    "Trino takes a duration: files older than now - {} when the statement runs are removed",
                    duration_text(*retention_ms)
                ));
            }
        }
        Ok(notes)
    }

    fn statement(
        &self,
        table: &TableId,
        params: &StepParams,
        filter: Option<&str>,
    ) -> std::result::Result<String, String> {
        let t = self.table_name(table);
        let with_where = |base: String| match filter {
            Some(f) => format!("{base} WHERE {f}"),
            None => base,
        };
        Ok(match params {
            StepParams::ConvertEqualityDeletes { .. } => with_where(format!(
                "ALTER TABLE {t} EXECUTE optimize(file_size_threshold => '1PB')"
            )),
            StepParams::RewriteDataFiles {
                min_file_size_bytes,
                ..
            } => with_where(format!(
                "ALTER TABLE {t} EXECUTE optimize(file_size_threshold => '{}')",
                data_size_text(*min_file_size_bytes)
            )),
            StepParams::ComputeStatistics { columns } if columns.is_empty() => {
                format!("ANALYZE {t}")
            }
            StepParams::ComputeStatistics { columns } => format!(
                "ANALYZE {t} WITH (columns = ARRAY[{}])",
                columns
                    .iter()
                    .map(|c| self.quote_string(&c.to_lowercase()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            StepParams::RewriteManifests { .. } => {
                format!("ALTER TABLE {t} EXECUTE optimize_manifests")
            }
            StepParams::ExpireSnapshots {
                retain_last,
                retention_ms,
                ..
            } => {
                let mut args = format!("retention_threshold => '{}'", duration_text(*retention_ms));
                if self.options.version >= super::TRINO_EXPIRE_RETAIN_LAST {
                    let _ = write!(args, ", retain_last => {}", (*retain_last).max(1));
                }
                format!("ALTER TABLE {t} EXECUTE expire_snapshots({args})")
            }
            StepParams::RemoveOrphanFiles { retention_ms, .. } => format!(
                "ALTER TABLE {t} EXECUTE remove_orphan_files(retention_threshold => '{}')",
                duration_text(*retention_ms)
            ),
            StepParams::RewritePositionDeletes { .. } => {
                return Err(
                    "Trino has no procedure that rewrites position-delete files".to_string()
                );
            }
        })
    }
}

/// One column's part of a conjunction: its terms joined by `AND`, and whether that needs parentheses in
/// an `OR`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ColumnPart {
    column: String,
    sql: String,
    compound: bool,
}

fn per_column(c: &Conjunction) -> Vec<ColumnPart> {
    let mut cols: Vec<(String, Vec<&Term>)> = Vec::new();
    for t in &c.terms {
        match cols.iter_mut().find(|(col, _)| *col == t.column) {
            Some((_, ts)) => ts.push(t),
            None => cols.push((t.column.clone(), vec![t])),
        }
    }
    cols.into_iter()
        .map(|(column, ts)| ColumnPart {
            compound: ts.len() > 1 || ts[0].compound,
            sql: and_terms(ts.iter().map(|t| t.sql.as_str())),
            column,
        })
        .collect()
}

/// The conjunctions as one `WHERE` Trino turns into a per-column domain without a leftover
/// filter: possible when they all constrain the same columns and form the full cross product of
/// each column's values. Returns the SQL and how many columns take more than one value.
fn cross_product(conjunctions: &[Conjunction]) -> Option<(String, usize)> {
    let grouped: Vec<Vec<ColumnPart>> = conjunctions.iter().map(per_column).collect();
    let columns: Vec<&str> = grouped[0].iter().map(|p| p.column.as_str()).collect();
    let mut sorted = columns.clone();
    sorted.sort_unstable();
    let same_columns = grouped.iter().all(|g| {
        let mut cs: Vec<&str> = g.iter().map(|p| p.column.as_str()).collect();
        cs.sort_unstable();
        cs == sorted
    });
    if !same_columns {
        return None;
    }
    let mut values: Vec<Vec<&ColumnPart>> = vec![Vec::new(); columns.len()];
    let mut tuples: Vec<Vec<&str>> = Vec::new();
    for g in &grouped {
        let mut tuple = Vec::new();
        for (i, col) in columns.iter().enumerate() {
            let part = g.iter().find(|p| p.column == *col)?;
            if !values[i].iter().any(|v| v.sql == part.sql) {
                values[i].push(part);
            }
            tuple.push(part.sql.as_str());
        }
        if !tuples.contains(&tuple) {
            tuples.push(tuple);
        }
    }
    let product = values
        .iter()
        .try_fold(1usize, |acc, v| acc.checked_mul(v.len()));
    if product != Some(tuples.len()) {
        return None;
    }
    let wrap = |p: &&ColumnPart| {
        if p.compound {
            format!("({})", p.sql)
        } else {
            p.sql.clone()
        }
    };
    let sql = if columns.len() == 1 {
        values[0].iter().map(wrap).collect::<Vec<_>>().join(" OR ")
    } else {
        values
            .iter()
            .map(|vs| {
                if vs.len() == 1 {
                    vs[0].sql.clone()
                } else {
                    format!("({})", vs.iter().map(wrap).collect::<Vec<_>>().join(" OR "))
                }
            })
            .collect::<Vec<_>>()
            .join(" AND ")
    };
    Some((sql, values.iter().filter(|v| v.len() > 1).count()))
}
