//! Spark with Iceberg's SQL extensions: `CALL catalog.system.<procedure>(name => value, …)`.
//!
//! - Identifiers are backtick-quoted (a backtick doubled). The `table` argument is a string the
//!   procedure parses as a multipart identifier, so it carries the backtick-quoted, catalog-
//!   qualified name inside a string literal.
//! - String literals use backslash escapes (`\'`, `\\`, `\n`, `\uXXXX`): Spark reads `'it''s'`
//!   as the two adjacent literals `'it'` `'s'`, i.e. `its` (checked on Spark 3.5.9).
//! - `where` is a SQL string inside a string literal, so its own literals are escaped twice.
//! - Literals are typed so Iceberg can convert the filter without a cast on the column:
//!   `timestamptz` bounds carry `+00:00` (independent of the session time zone);
//!   `timestamp` (without zone) bounds are `TIMESTAMP_NTZ '…'` (a zoned literal makes Spark
//!   cast the column and Iceberg refuses "Cannot convert Spark filter").
//! - Option values of `map(…)` are strings.

use std::fmt::Write as _;

use crate::catalog::TableId;
use crate::plan::{
    EqualityDeleteMethod, FieldPredicate, PlannedStep, PredicateKind, RewriteStrategy, StepParams,
};

use super::literal::{Typed, typed, utc_millis_text};
use super::{Conjunction, Dialect, Filter, SparkOptions, Term, or_conjunctions};
use crate::error::Result;

/// Renders for Spark + Iceberg stored procedures (see the module docs).
#[derive(Debug, Clone)]
pub struct SparkDialect {
    options: SparkOptions,
}

impl SparkDialect {
    /// A dialect for validated options.
    pub fn new(options: SparkOptions) -> Result<Self> {
        options.validate()?;
        Ok(Self { options })
    }

    /// The options.
    pub fn options(&self) -> &SparkOptions {
        &self.options
    }

    /// A column reference: dotted names are nested fields, each part quoted.
    pub(crate) fn column(&self, column: &str) -> String {
        column
            .split('.')
            .map(|p| self.quote_ident(p))
            .collect::<Vec<_>>()
            .join(".")
    }

    /// The table as the procedure's `table` argument parses it: `` `cat`.`ns`.`t` ``.
    fn identifier_path(&self, table: &TableId) -> String {
        std::iter::once(self.options.catalog.as_str())
            .chain(table.parts())
            .map(|p| self.quote_ident(p))
            .collect::<Vec<_>>()
            .join(".")
    }

    fn literal(&self, t: &Typed, column: &str) -> std::result::Result<String, String> {
        Ok(match t {
            Typed::Boolean(b) => b.to_string(),
            Typed::Integer(i) => i.to_string(),
            Typed::Float32(f) => format!("{f}F"),
            Typed::Float64(f) => format!("{f}D"),
            Typed::Decimal(d) => format!("{d}BD"),
            // Spark reads Iceberg uuid columns as strings.
            Typed::String(s) | Typed::Uuid(s) => self.quote_string(s),
            Typed::Binary(h) => format!("X'{h}'"),
            Typed::Date(d) => format!("DATE '{d}'"),
            Typed::Time(_) => {
                return Err(format!("predicate on {column}: Spark has no TIME type"));
            }
            Typed::Timestamp { nanos: true, .. } | Typed::TimestampTz { nanos: true, .. } => {
                return Err(format!(
                    "predicate on {column}: Spark has no nanosecond timestamps"
                ));
            }
            Typed::Timestamp { ts, .. } => {
                if self.options.spark_version < super::SPARK_TIMESTAMP_NTZ {
                    return Err(format!(
                        "predicate on {column} (timestamp without zone): Spark {} has no TIMESTAMP_NTZ literal (from {}), and any other literal makes Iceberg refuse the filter",
                        self.options.spark_version,
                        super::SPARK_TIMESTAMP_NTZ
                    ));
                }
                format!("TIMESTAMP_NTZ '{}'", ts.as_written())
            }
            Typed::TimestampTz { ts, .. } => format!("TIMESTAMP '{}+00:00'", ts.as_written()),
        })
    }

    fn sort_field(&self, spec: &str) -> std::result::Result<String, String> {
        let mut rest = spec;
        let mut suffix = Vec::new();
        for (word, keep) in [("NULLS FIRST", "NULLS FIRST"), ("NULLS LAST", "NULLS LAST")] {
            if let Some(r) = strip_word_ci(rest, word) {
                rest = r;
                suffix.push(keep);
                break;
            }
        }
        for word in ["ASC", "DESC"] {
            if let Some(r) = strip_word_ci(rest, word) {
                rest = r;
                suffix.insert(0, word);
                break;
            }
        }
        if rest.trim().is_empty() {
            return Err(format!(
                "malformed plan: sort column `{}` names no column",
                super::literal::comment_safe(spec)
            ));
        }
        if rest.trim() != rest {
            return Err(edge_whitespace("sort", spec));
        }
        let mut out = self.column(rest);
        for s in suffix {
            out.push(' ');
            out.push_str(s);
        }
        Ok(out)
    }

    fn sort_order(
        &self,
        strategy: &RewriteStrategy,
    ) -> std::result::Result<Option<String>, String> {
        match strategy {
            RewriteStrategy::BinPack => Ok(None),
            RewriteStrategy::Sort { columns } if columns.is_empty() => Ok(None),
            RewriteStrategy::Sort { columns } => Ok(Some(
                columns
                    .iter()
                    .map(|c| self.sort_field(c))
                    .collect::<std::result::Result<Vec<_>, _>>()?
                    .join(", "),
            )),
            RewriteStrategy::Hilbert { .. } => Err(
                "Spark's rewrite_data_files has no Hilbert order (sort or zorder(...) only): run this step on Cryo's native engine, or plan a z-order for Spark"
                    .to_string(),
            ),
            RewriteStrategy::ZOrder { columns } => {
                if columns.is_empty() || columns.iter().any(|c| c.trim().is_empty()) {
                    return Err("malformed plan: z-order needs column names".to_string());
                }
                if let Some(c) = columns.iter().find(|c| c.trim() != c.as_str()) {
                    return Err(edge_whitespace("z-order", c));
                }
                if let Some(c) = columns.iter().find(|c| col_refuses(c)) {
                    return Err(format!(
                        "z-order column `{}`: Iceberg's Spark z-order resolves each name again with Dataset.col, which refuses a backtick in a column name (\"Syntax error in attribute name\"); a sort strategy can take it",
                        super::literal::comment_safe(c)
                    ));
                }
                Ok(Some(format!(
                    "zorder({})",
                    columns
                        .iter()
                        .map(|c| self.column(c))
                        .collect::<Vec<_>>()
                        .join(",")
                )))
            }
        }
    }

    fn options_map(&self, pairs: &[(&str, String)]) -> String {
        format!(
            "map({})",
            pairs
                .iter()
                .map(|(k, v)| format!("{}, {}", self.quote_string(k), self.quote_string(v)))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    fn call(&self, procedure: &str, args: &[String]) -> String {
        format!(
            "CALL {}.system.{procedure}({})",
            self.quote_ident(&self.options.catalog),
            args.join(", ")
        )
    }

    fn older_than(ms: i64) -> std::result::Result<String, String> {
        utc_millis_text(ms)
            .map(|t| format!("TIMESTAMP '{t}+00:00'"))
            .ok_or_else(|| {
                format!("malformed plan: older_than {ms} ms is not a representable instant")
            })
    }

    /// Statistics columns `compute_table_stats` cannot take are left out with a note; a step left
    /// with none is refused (without columns it would compute every column, those included).
    fn statistics_columns(
        columns: &[String],
        notes: &mut Vec<String>,
    ) -> std::result::Result<(), String> {
        let refused: Vec<String> = columns
            .iter()
            .filter(|c| col_refuses(c))
            .map(|c| format!("`{}`", super::literal::comment_safe(c)))
            .collect();
        if refused.is_empty() {
            return Ok(());
        }
        let why = format!(
            "statistics column {}: compute_table_stats checks each name against the schema as written, then resolves it again with Spark's col(), which refuses a backtick in a column name (a quoted name fails the schema check instead)",
            refused.join(", ")
        );
        if refused.len() == columns.len() {
            return Err(format!(
                "{why}; no other column is planned, and without columns every column would be computed, these included"
            ));
        }
        notes.push(format!("{why}; left out, the other columns are computed"));
        Ok(())
    }

    fn retention_check(
        what: &str,
        effective_ms: i64,
        floor_ms: i64,
        why: &str,
    ) -> std::result::Result<(), String> {
        if effective_ms < floor_ms {
            return Err(format!(
                "{what} older_than is {} before the plan's now, under the floor of {}: {why}",
                super::literal::duration_text(effective_ms),
                super::literal::duration_text(floor_ms)
            ));
        }
        Ok(())
    }
}

/// A column name that Spark's `col()` / `Dataset.col` cannot resolve: they parse the name as an
/// attribute path, where a backtick is a syntax error unless quoted, and Iceberg's
/// `compute_table_stats` and z-order hand them the raw schema name (checked against the schema
/// first, so quoting it is no way out).
fn col_refuses(column: &str) -> bool {
    column.contains('`')
}

/// A sort or z-order column whose name starts or ends with whitespace: the plan's text form
/// (`name [ASC|DESC] [NULLS FIRST|LAST]`) cannot tell that whitespace from a separator, and
/// trimming it would sort by another column.
fn edge_whitespace(what: &str, spec: &str) -> String {
    format!(
        "{what} column `{}`: a name that starts or ends with whitespace is ambiguous in the plan's sort text, and trimming it would address another column",
        super::literal::comment_safe(spec)
    )
}

/// `s` without a trailing ` WORD` (one space, then the word, ASCII case-insensitive), if it ends
/// with one. Any further whitespace stays with the name (and makes it ambiguous).
fn strip_word_ci<'a>(s: &'a str, word: &str) -> Option<&'a str> {
    let cut = s.len().checked_sub(word.len())?;
    if !s.is_char_boundary(cut) || !s[cut..].eq_ignore_ascii_case(word) {
        return None;
    }
    s[..cut].strip_suffix(' ')
}

impl Dialect for SparkDialect {
    fn name(&self) -> &'static str {
        "spark"
    }

    fn catalog(&self) -> &str {
        &self.options.catalog
    }

    fn quote_ident(&self, part: &str) -> String {
        format!("`{}`", part.replace('`', "``"))
    }

    fn quote_string(&self, value: &str) -> String {
        let mut out = String::with_capacity(value.len() + 2);
        out.push('\'');
        for c in value.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\'' => out.push_str("\\'"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if c.is_control() => {
                    let _ = write!(out, "\\u{:04X}", u32::from(c));
                }
                c => out.push(c),
            }
        }
        out.push('\'');
        out
    }

    fn table_name(&self, table: &TableId) -> String {
        self.identifier_path(table)
    }

    fn table_notes(&self, _table: &TableId) -> Vec<String> {
        Vec::new()
    }

    fn field_predicate(&self, p: &FieldPredicate) -> std::result::Result<Term, String> {
        let column = &p.column;
        if p.transform == "void" {
            return Err(format!(
                "predicate on {column} (void): a void partition field constrains nothing"
            ));
        }
        let c = self.column(column);
        let term = |sql: String, compound: bool| Term {
            column: column.clone(),
            sql,
            compound,
        };
        match &p.kind {
            PredicateKind::IsNull => Ok(term(format!("{c} IS NULL"), false)),
            PredicateKind::Eq { value } => {
                let v = typed(value, column, &p.column_type)?;
                Ok(term(format!("{c} = {}", self.literal(&v, column)?), false))
            }
            PredicateKind::Range { lower, upper } => {
                let lo = typed(lower, column, &p.column_type)?;
                let hi = typed(upper, column, &p.column_type)?;
                Ok(term(
                    format!(
                        "{c} >= {} AND {c} < {}",
                        self.literal(&lo, column)?,
                        self.literal(&hi, column)?
                    ),
                    true,
                ))
            }
            PredicateKind::StartsWith { prefix } => {
                if self.options.spark_version < super::SPARK_STARTSWITH {
                    return Err(format!(
                        "prefix predicate on {column}: Spark {} has no startswith (from {})",
                        self.options.spark_version,
                        super::SPARK_STARTSWITH
                    ));
                }
                Ok(term(
                    format!("startswith({c}, {})", self.quote_string(prefix)),
                    false,
                ))
            }
            PredicateKind::Bucket { buckets, value } => {
                if self.options.iceberg_version < super::ICEBERG_BUCKET_IN_WHERE {
                    return Err(format!(
                        "bucket[{buckets}] predicate on {column}: a system.bucket term in a procedure's where is verified from Iceberg {} (this is {})",
                        super::ICEBERG_BUCKET_IN_WHERE,
                        self.options.iceberg_version
                    ));
                }
                Ok(term(
                    format!(
                        "{}.system.bucket({buckets}, {c}) = {value}",
                        self.quote_ident(&self.options.catalog)
                    ),
                    false,
                ))
            }
        }
    }

    fn filters(&self, conjunctions: &[Conjunction], _notes: &mut Vec<String>) -> Vec<Filter> {
        vec![Filter {
            sql: or_conjunctions(conjunctions),
            partitions: conjunctions
                .iter()
                .flat_map(|c| c.partitions.iter().copied())
                .collect(),
        }]
    }

    fn prepare(
        &self,
        step: &PlannedStep,
        plan_created_at_ms: i64,
    ) -> std::result::Result<Vec<String>, String> {
        let iceberg = self.options.iceberg_version;
        let mut notes = Vec::new();
        match &step.params {
            StepParams::ConvertEqualityDeletes { method, .. } => {
                if *method == EqualityDeleteMethod::PositionDeletes {
                    notes.push(
                        "the plan converts these equality deletes to position deletes, which only Cryo's native engine does: Spark rewrites the data files instead"
                            .to_string(),
                    );
                }
                notes.push(
                    "Iceberg has no procedure that converts equality deletes: rewrite_data_files with rewrite-all rewrites every data file of the selected partitions, applying their deletes (delete-file-threshold alone would leave files whose stats rule the deletes out, and the deletes would still apply to them by sequence number)"
                        .to_string(),
                );
                if iceberg < super::ICEBERG_REMOVE_DANGLING_DELETES {
                    notes.push(format!(
                        "Iceberg {iceberg} has no remove-dangling-deletes (from {}): the applied delete files stay listed (applying to nothing) until a later rewrite",
                        super::ICEBERG_REMOVE_DANGLING_DELETES
                    ));
                } else {
                    notes.push(
                        "remove-dangling-deletes then drops the delete files older than every rewritten file (Iceberg's sequence-number rule; unpartitioned tables drop them at commit)"
                            .to_string(),
                    );
                }
            }
            StepParams::RewritePositionDeletes { min_input_files } => {
                if iceberg < super::ICEBERG_REWRITE_POSITION_DELETES {
                    return Err(format!(
                        "Iceberg {iceberg} has no rewrite_position_delete_files procedure (from {}); upgrade the runtime",
                        super::ICEBERG_REWRITE_POSITION_DELETES
                    ));
                }
                if *min_input_files == 0 {
                    return Err("malformed plan: min_input_files must be at least 1".to_string());
                }
            }
            StepParams::RewriteDataFiles {
                strategy,
                target_file_size_bytes,
                min_file_size_bytes,
                max_file_size_bytes,
                min_input_files,
                delete_file_threshold,
            } => {
                if !(min_file_size_bytes < target_file_size_bytes && target_file_size_bytes < max_file_size_bytes) {
                    return Err(format!(
                        "malformed plan: Spark needs min-file-size-bytes < target-file-size-bytes < max-file-size-bytes, the plan has {min_file_size_bytes} / {target_file_size_bytes} / {max_file_size_bytes}"
                    ));
                }
                if i64::try_from(*max_file_size_bytes).is_err() {
                    return Err("malformed plan: max_file_size_bytes exceeds a Java long".to_string());
                }
                if *min_input_files == 0 || *delete_file_threshold == 0 {
                    return Err("malformed plan: min_input_files and delete_file_threshold must be at least 1".to_string());
                }
                self.sort_order(strategy)?;
                if matches!(strategy, RewriteStrategy::Sort { columns } if columns.is_empty()) {
                    notes.push(
                        "strategy 'sort' without sort_order uses the table's sort order; Spark refuses when the table has none"
                            .to_string(),
                    );
                }
            }
            StepParams::ComputeStatistics { columns } => {
                if iceberg < super::ICEBERG_COMPUTE_TABLE_STATS {
                    return Err(format!(
                        "Iceberg {iceberg} has no compute_table_stats procedure (from {}); upgrade the runtime",
                        super::ICEBERG_COMPUTE_TABLE_STATS
                    ));
                }
                Self::statistics_columns(columns, &mut notes)?;
            }
            StepParams::RewriteManifests { target_manifest_size_bytes } => notes.push(format!(
                "manifest size comes from the table property commit.manifest.target-size-bytes; the plan's {target_manifest_size_bytes} bytes is not an argument"
            )),
            StepParams::ExpireSnapshots { older_than_ms, retain_last, .. } => {
                Self::retention_check(
                    "expiry",
                    plan_created_at_ms.saturating_sub(*older_than_ms),
                    self.options.expire_snapshots_min_retention_ms,
                    "raise the plan's retention or lower expire_snapshots_min_retention_ms",
                )?;
                Self::older_than(*older_than_ms)?;
                if *retain_last == 0 {
                    notes.push("retain_last 0 is passed as 1: Iceberg always keeps the current snapshot".to_string());
                }
            }
            StepParams::RemoveOrphanFiles { older_than_ms, .. } => {
                let effective = plan_created_at_ms.saturating_sub(*older_than_ms);
                let why = if effective < super::SPARK_ORPHAN_FLOOR_MS {
                    "Spark's remove_orphan_files refuses anything under 24 hours (\"Cannot remove orphan files with an interval less than 24 hours\"); raise the plan's retention"
                } else {
                    "raise the plan's retention or lower remove_orphan_files_min_retention_ms (not below 24 hours)"
                };
                Self::retention_check("orphan", effective, self.options.remove_orphan_files_min_retention_ms, why)?;
                Self::older_than(*older_than_ms)?;
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
        let mut args = vec![format!(
            "table => {}",
            self.quote_string(&self.identifier_path(table))
        )];
        let where_arg = filter.map(|f| format!("where => {}", self.quote_string(f)));
        Ok(match params {
            StepParams::ConvertEqualityDeletes { .. } => {
                args.push("strategy => 'binpack'".to_string());
                args.extend(where_arg);
                let mut opts = vec![("rewrite-all", "true".to_string())];
                if self.options.iceberg_version >= super::ICEBERG_REMOVE_DANGLING_DELETES {
                    opts.push(("remove-dangling-deletes", "true".to_string()));
                }
                args.push(format!("options => {}", self.options_map(&opts)));
                self.call("rewrite_data_files", &args)
            }
            StepParams::RewriteDataFiles {
                strategy,
                target_file_size_bytes,
                min_file_size_bytes,
                max_file_size_bytes,
                min_input_files,
                delete_file_threshold,
            } => {
                let name = if matches!(strategy, RewriteStrategy::BinPack) {
                    "binpack"
                } else {
                    "sort"
                };
                args.push(format!("strategy => '{name}'"));
                if let Some(order) = self.sort_order(strategy)? {
                    args.push(format!("sort_order => {}", self.quote_string(&order)));
                }
                args.extend(where_arg);
                args.push(format!(
                    "options => {}",
                    self.options_map(&[
                        ("target-file-size-bytes", target_file_size_bytes.to_string()),
                        ("min-file-size-bytes", min_file_size_bytes.to_string()),
                        ("max-file-size-bytes", max_file_size_bytes.to_string()),
                        ("min-input-files", min_input_files.to_string()),
                        ("delete-file-threshold", delete_file_threshold.to_string()),
                    ])
                ));
                self.call("rewrite_data_files", &args)
            }
            StepParams::RewritePositionDeletes { min_input_files } => {
                args.extend(where_arg);
                args.push(format!(
                    "options => {}",
                    self.options_map(&[("min-input-files", min_input_files.to_string())])
                ));
                self.call("rewrite_position_delete_files", &args)
            }
            StepParams::ComputeStatistics { columns } => {
                if !columns.is_empty() {
                    args.push(format!(
                        "columns => array({})",
                        columns
                            .iter()
                            .filter(|c| !col_refuses(c))
                            .map(|c| self.quote_string(c))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                self.call("compute_table_stats", &args)
            }
            StepParams::RewriteManifests { .. } => self.call("rewrite_manifests", &args),
            StepParams::ExpireSnapshots {
                older_than_ms,
                retain_last,
                ..
            } => {
                args.push(format!(
                    "older_than => {}",
                    Self::older_than(*older_than_ms)?
                ));
                args.push(format!("retain_last => {}", (*retain_last).max(1)));
                self.call("expire_snapshots", &args)
            }
            StepParams::RemoveOrphanFiles {
                older_than_ms,
                dry_run,
                ..
            } => {
                args.push(format!(
                    "older_than => {}",
                    Self::older_than(*older_than_ms)?
                ));
                args.push(format!("dry_run => {dry_run}"));
                self.call("remove_orphan_files", &args)
            }
        })
    }
}
