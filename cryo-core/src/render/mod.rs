//! Rendering: a [`MaintenancePlan`] as the SQL a team's own Trino or Spark runs.
//!
//! ```text
//! MaintenancePlan ──render_plan(plan, &dialect)──▶ RenderedPlan
//!   └─ TablePlan                                     └─ RenderedTable
//!        └─ PlannedStep ── Dialect::prepare ───────────── skip (version gate, retention floor,
//!             │                                           dry run, unsupported op) with a reason
//!             └─ Chunk ─┬─ whole table ──────────────── one statement, no WHERE
//!                       └─ partitions ─ Dialect::unreachable_partition ─ left out, with the reason
//!                                     └─ Dialect::field_predicate per field
//!                                          ├─ inexpressible → dropped (superset) + note
//!                                          └─ conjunction per partition
//!                                             └─ Dialect::filters → one statement per chunk
//!                                                (Trino: more when its WHERE rules demand)
//! ```
//!
//! One walker ([`render_plan`]) and one [`Dialect`] per engine ([`TrinoDialect`],
//! [`SparkDialect`]). Rules the walker enforces for every engine:
//!
//! - A field predicate the engine cannot express is dropped from its partition's conjunction:
//!   what remains selects a superset of partitions, which is safe. The drop is noted.
//! - A partition with nothing expressible left, or one the engine cannot touch at all (Trino
//!   cannot scan a partition value of a `fixed` column), is left out of its chunk, and a chunk
//!   with no partition left is skipped, with the reason. A partitioned chunk never becomes a
//!   whole-table statement (a full-table OPTIMIZE is what knocks over clusters).
//! - Identifiers and literals are always quoted and escaped per dialect, so a table named
//!   `a"b` or a value `'; DROP TABLE x; --` renders as exactly one statement on the intended
//!   target.
//! - Version gates and retention floors are explicit options; a step the engine would refuse
//!   renders as a skip with a reason, never as a statement.
//!
//! ```
//! use cryo_core::render::{render_plan, SparkDialect, SparkOptions, TrinoDialect, TrinoOptions, Version};
//! # use cryo_core::plan::{MaintenancePlan, PLAN_FORMAT_VERSION};
//! # let plan: MaintenancePlan = serde_json::from_value(serde_json::json!({
//! #     "format_version": PLAN_FORMAT_VERSION, "catalog": "prod", "created_at_ms": 0,
//! #     "tables": [], "skipped_tables": [], "fingerprint": ""})).unwrap();
//! let trino = TrinoDialect::new(TrinoOptions::new("lake", 476))?;
//! let spark = SparkDialect::new(SparkOptions::new("lake", Version::new(3, 5, 0), Version::new(1, 10, 2)))?;
//! for rendered in [render_plan(&plan, &trino)?, render_plan(&plan, &spark)?] {
//!     for table in &rendered.tables {
//!         for skip in &table.skipped {
//!             println!("skipped {}: {}", skip.operation, skip.reason);
//!         }
//!     }
//!     print!("{}", rendered.to_script());
//! }
//! # Ok::<(), cryo_core::Error>(())
//! ```
//!
//! # Example
//!
//! The demo lake's plan, rendered for Trino 478 and for Spark 3.5 with Iceberg 1.10:
//!
//! ```
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! # use std::collections::BTreeMap;
//! # use cryo_core::clock::SystemClock;
//! # use cryo_core::demo::{DemoOptions, create_demo_lake};
//! # use cryo_core::grade::GradeOptions;
//! # use cryo_core::plan::{PlanOptions, plan_scans};
//! # use cryo_core::scan::{FleetScanOptions, scan_fleet};
//! use cryo_core::ops::Operation;
//! use cryo_core::render::{SparkDialect, SparkOptions, TrinoDialect, TrinoOptions, Version};
//! use cryo_core::render::render_plan;
//!
//! # let dir = tempfile::tempdir()?;
//! # let lake = create_demo_lake(dir.path(), &DemoOptions::default()).await?;
//! # let fleet = scan_fleet(&lake.catalog, &FleetScanOptions::default(), &SystemClock).await?;
//! # let (grading, options) = (GradeOptions::default(), PlanOptions::default());
//! # let controls = BTreeMap::new();
//! // The plan of the demo lake (as in the `plan` module's example).
//! let plan = plan_scans(lake.catalog.name(), &fleet.tables, &grading, &options, &controls)?;
//! let trino = TrinoDialect::new(TrinoOptions::new("iceberg", 478))?;
//! let spark = SparkDialect::new(SparkOptions::new(
//!     "demo",
//!     Version::new(3, 5, 6),
//!     Version::new(1, 10, 0),
//! ))?;
//! let (on_trino, on_spark) = (render_plan(&plan, &trino)?, render_plan(&plan, &spark)?);
//!
//! // The same step, in each engine's words and quoting.
//! assert!(on_trino.statements().any(|sql| sql
//!     == r#"ALTER TABLE "iceberg"."lake"."clickstream" EXECUTE optimize_manifests"#));
//! assert!(on_spark.statements().any(|sql| sql
//!     == "CALL `demo`.system.rewrite_manifests(table => '`demo`.`lake`.`clickstream`')"));
//! // The plan keeps 5 days of snapshots, below Trino's 7-day floor: Trino gets a skip with the
//! // reason, never a statement it would refuse. Spark has no such floor by default.
//! assert!(on_trino.skipped().any(|(_, skip)| skip.operation == Operation::ExpireSnapshots
//!     && skip.reason.contains("min-retention")));
//! assert!(!on_trino.statements().any(|sql| sql.contains("expire_snapshots")));
//! assert!(on_spark.statements().any(|sql| sql.contains("system.expire_snapshots")));
//! print!("{}", on_trino.to_script()); // statements with `;`, notes and skips as comments
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

mod literal;
mod options;
mod spark;
mod trino;

#[cfg(test)]
mod tests;

use std::fmt;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

pub use options::{
    ICEBERG_BUCKET_IN_WHERE, ICEBERG_COMPUTE_TABLE_STATS, ICEBERG_REMOVE_DANGLING_DELETES,
    ICEBERG_REWRITE_POSITION_DELETES, SPARK_ORPHAN_FLOOR_MS, SPARK_STARTSWITH, SPARK_TIMESTAMP_NTZ,
    SparkOptions, TRINO_EXPIRE_RETAIN_LAST, TRINO_OPTIMIZE_MANIFESTS, TrinoOptions, Version,
};
pub use spark::SparkDialect;
pub use trino::TrinoDialect;

use crate::catalog::TableId;
use crate::error::{Error, Result};
use crate::ops::Operation;
use crate::plan::{
    FieldPredicate, MaintenancePlan, PLAN_FORMAT_VERSION, PartitionTarget, PlannedStep, StepParams,
    TablePlan,
};

/// One rendered field predicate: SQL text on one source column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// Source column (dotted for nested fields), as in the plan.
    pub column: String,
    /// SQL text, already quoted and escaped.
    pub sql: String,
    /// Whether `sql` is itself a conjunction (`c >= x AND c < y`): it needs parentheses
    /// inside an `OR`.
    pub compound: bool,
}

/// The expressible part of one or more partitions' predicates (identical conjunctions merge).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conjunction {
    /// Terms, in partition-field order.
    pub terms: Vec<Term>,
    /// Indices of the chunk's partitions this conjunction selects.
    pub partitions: Vec<usize>,
}

/// A `WHERE` text for one statement and the partitions it selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// SQL predicate text.
    pub sql: String,
    /// Indices of the chunk's partitions.
    pub partitions: Vec<usize>,
}

/// An engine's SQL: how to quote, which predicates it can express, and its statements.
///
/// The walker ([`render_plan`]) calls these in order: [`Dialect::prepare`] once per step,
/// [`Dialect::field_predicate`] per partition field, [`Dialect::filters`] per chunk and
/// [`Dialect::statement`] per resulting scope.
pub trait Dialect: fmt::Debug + Send + Sync {
    /// Engine name (`trino`, `spark`).
    fn name(&self) -> &'static str;
    /// Engine-side catalog the statements address.
    fn catalog(&self) -> &str;
    /// One identifier part, quoted and escaped.
    fn quote_ident(&self, part: &str) -> String;
    /// A string literal, quoted and escaped.
    fn quote_string(&self, value: &str) -> String;
    /// The fully qualified table as this engine addresses it.
    fn table_name(&self, table: &TableId) -> String;
    /// Caveats about addressing this table (case folding, nested namespaces).
    fn table_notes(&self, table: &TableId) -> Vec<String>;
    /// Why this engine cannot address the table at all, if it cannot: the walker then renders
    /// none of its steps (each is skipped with the reason), so no statement ever names a table
    /// other than the intended one. By default a name with an empty part is refused: no engine
    /// accepts an empty quoted identifier (Trino: "Zero-length delimited identifier not allowed").
    fn unaddressable(&self, table: &TableId) -> Option<String> {
        empty_part(table)
    }
    /// One field predicate as SQL, or why this engine cannot express it (`"<predicate>: <reason>"`;
    /// the walker drops it and notes the drop).
    fn field_predicate(&self, predicate: &FieldPredicate) -> std::result::Result<Term, String>;
    /// Source columns this engine cannot filter on anywhere in `step`, with the reason (for
    /// example a column that only some of the step's partition specs partition by). Their field
    /// predicates are dropped like inexpressible ones. None by default.
    fn unfilterable_columns(&self, _step: &PlannedStep) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Why no statement that touches `partition` can run on this engine (for example a partition
    /// value of a type it cannot read), or `None`. Unlike an inexpressible predicate, dropping a
    /// predicate would not help: the partition is left out of its chunk with the reason, and a
    /// chunk left with no partition is skipped. None by default.
    fn unreachable_partition(&self, _partition: &PartitionTarget) -> Option<String> {
        None
    }
    /// Combine a chunk's conjunctions (at least one) into the filters of its statements.
    fn filters(&self, conjunctions: &[Conjunction], notes: &mut Vec<String>) -> Vec<Filter>;
    /// Whether the step can run on this engine at all: notes to attach, or why it is skipped.
    fn prepare(
        &self,
        step: &PlannedStep,
        plan_created_at_ms: i64,
    ) -> std::result::Result<Vec<String>, String>;
    /// The statement for one step over the whole table (`filter` `None`) or a filter, or why
    /// there is none.
    fn statement(
        &self,
        table: &TableId,
        params: &StepParams,
        filter: Option<&str>,
    ) -> std::result::Result<String, String>;
}

/// A plan rendered for one engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RenderedPlan {
    /// Dialect (`trino`, `spark`).
    pub dialect: String,
    /// Engine-side catalog the statements address.
    pub engine_catalog: String,
    /// Cryo's source catalog the plan was made from.
    pub source_catalog: String,
    /// Fingerprint of the rendered plan.
    pub plan_fingerprint: String,
    /// The plan's `now`.
    pub plan_created_at_ms: i64,
    /// Tables, in plan order.
    pub tables: Vec<RenderedTable>,
}

/// One table's statements, notes and skips.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RenderedTable {
    /// Table (Cryo's identifier).
    pub table: TableId,
    /// The table as the engine addresses it.
    pub target: String,
    /// Caveats about the identifier.
    pub notes: Vec<String>,
    /// Rendered steps, in the plan's fixed order (steps with no statement are left out).
    pub steps: Vec<RenderedStep>,
    /// Steps, chunks and partitions that did not render, with the reason.
    pub skipped: Vec<SkippedRender>,
}

/// One step's statements, to run in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RenderedStep {
    /// Operation.
    pub operation: Operation,
    /// Statements, in chunk order.
    pub statements: Vec<Statement>,
    /// What differs from the plan, and why it is safe.
    pub notes: Vec<String>,
}

/// One SQL statement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Statement {
    /// Chunk of the step it belongs to.
    pub chunk: u32,
    /// Partition paths it selects (empty: the whole table).
    pub partitions: Vec<String>,
    /// The statement, without a trailing semicolon.
    pub sql: String,
}

/// Something in the plan that did not render.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SkippedRender {
    /// Operation.
    pub operation: Operation,
    /// Chunk, when only part of the step was skipped.
    pub chunk: Option<u32>,
    /// Partition paths, when only some partitions were left out.
    pub partitions: Vec<String>,
    /// Why.
    pub reason: String,
}

impl RenderedPlan {
    /// Every statement, in execution order.
    pub fn statements(&self) -> impl Iterator<Item = &str> {
        self.tables
            .iter()
            .flat_map(|t| t.steps.iter())
            .flat_map(|s| s.statements.iter())
            .map(|s| s.sql.as_str())
    }

    /// Every skip, with its table.
    pub fn skipped(&self) -> impl Iterator<Item = (&TableId, &SkippedRender)> {
        self.tables
            .iter()
            .flat_map(|t| t.skipped.iter().map(move |s| (&t.table, s)))
    }

    /// A reviewable script: statements terminated by `;`, with notes and skips as `--`
    /// comments.
    pub fn to_script(&self) -> String {
        let mut out = String::new();
        let created = chrono::DateTime::from_timestamp_millis(self.plan_created_at_ms).map_or_else(
            || self.plan_created_at_ms.to_string(),
            |t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
        );
        let _ = writeln!(
            out,
            "-- Cryo maintenance for {} (engine catalog {}, source catalog {})",
            self.dialect,
            literal::comment_safe(&self.engine_catalog),
            literal::comment_safe(&self.source_catalog)
        );
        let _ = writeln!(
            out,
            "-- plan {}, made at {created}",
            literal::comment_safe(&self.plan_fingerprint)
        );
        for t in &self.tables {
            let _ = writeln!(
                out,
                "\n-- table {}",
                literal::comment_safe(&t.table.to_string())
            );
            for n in &t.notes {
                let _ = writeln!(out, "-- note: {}", literal::comment_safe(n));
            }
            for s in &t.steps {
                let _ = writeln!(out, "\n-- {}", s.operation);
                for n in &s.notes {
                    let _ = writeln!(out, "-- note: {}", literal::comment_safe(n));
                }
                for st in &s.statements {
                    if st.partitions.is_empty() {
                        let _ = writeln!(out, "-- chunk {}: whole table", st.chunk);
                    } else {
                        let _ = writeln!(
                            out,
                            "-- chunk {}: {}",
                            st.chunk,
                            literal::comment_safe(&st.partitions.join(", "))
                        );
                    }
                    let _ = writeln!(out, "{};", st.sql);
                }
            }
            for s in &t.skipped {
                let scope = match (s.chunk, s.partitions.is_empty()) {
                    (None, _) => String::new(),
                    (Some(c), true) => format!(" chunk {c}"),
                    (Some(c), false) => format!(" chunk {c} ({})", s.partitions.join(", ")),
                };
                let _ = writeln!(
                    out,
                    "-- skipped {}{}: {}",
                    s.operation,
                    literal::comment_safe(&scope),
                    literal::comment_safe(&s.reason)
                );
            }
        }
        out
    }
}

fn push_unique(notes: &mut Vec<String>, note: String) {
    if !notes.contains(&note) {
        notes.push(note);
    }
}

/// Operations that act on the whole table whatever the plan's chunks say.
fn table_wide(op: Operation) -> bool {
    matches!(
        op,
        Operation::ComputeStatistics
            | Operation::RewriteManifests
            | Operation::ExpireSnapshots
            | Operation::RemoveOrphanFiles
    )
}

/// Render a whole plan for one engine.
///
/// Fails only when the plan is of a format this renderer does not know; everything the engine
/// cannot run becomes a [`SkippedRender`] with the reason.
pub fn render_plan(plan: &MaintenancePlan, dialect: &dyn Dialect) -> Result<RenderedPlan> {
    if plan.format_version != PLAN_FORMAT_VERSION {
        return Err(Error::Render {
            dialect: dialect.name().to_string(),
            message: format!(
                "plan format {} is not the format {PLAN_FORMAT_VERSION} this renderer knows; re-plan with this Cryo",
                plan.format_version
            ),
        });
    }
    Ok(RenderedPlan {
        dialect: dialect.name().to_string(),
        engine_catalog: dialect.catalog().to_string(),
        source_catalog: plan.catalog.clone(),
        plan_fingerprint: plan.fingerprint.clone(),
        plan_created_at_ms: plan.created_at_ms,
        tables: plan
            .tables
            .iter()
            .map(|t| render_table(t, dialect, plan.created_at_ms))
            .collect(),
    })
}

/// The refusal of a table name with an empty namespace level or name.
pub(crate) fn empty_part(table: &TableId) -> Option<String> {
    table.parts().iter().any(|p| p.is_empty()).then(|| {
        format!(
            "unaddressable table name {}: an empty namespace level or table name cannot be quoted as an identifier",
            literal::comment_safe(&table.to_string())
        )
    })
}

/// Render one table's steps; `plan_created_at_ms` is the plan's `now` (retention checks).
pub fn render_table(
    table: &TablePlan,
    dialect: &dyn Dialect,
    plan_created_at_ms: i64,
) -> RenderedTable {
    let mut out = RenderedTable {
        table: table.table.clone(),
        target: dialect.table_name(&table.table),
        notes: dialect.table_notes(&table.table),
        steps: Vec::new(),
        skipped: Vec::new(),
    };
    if let Some(reason) = dialect.unaddressable(&table.table) {
        for step in &table.steps {
            out.skipped.push(SkippedRender {
                operation: step.operation,
                chunk: None,
                partitions: Vec::new(),
                reason: reason.clone(),
            });
        }
        return out;
    }
    for step in &table.steps {
        render_step(&table.table, step, dialect, plan_created_at_ms, &mut out);
    }
    out
}

#[allow(clippy::too_many_lines)] // the walker's rules in one place: steps, chunks, partitions, fields
fn render_step(
    table: &TableId,
    step: &PlannedStep,
    dialect: &dyn Dialect,
    now_ms: i64,
    out: &mut RenderedTable,
) {
    let op = step.operation;
    let skip =
        |out: &mut RenderedTable, chunk: Option<u32>, partitions: Vec<String>, reason: String| {
            out.skipped.push(SkippedRender {
                operation: op,
                chunk,
                partitions,
                reason,
            });
        };
    if step.params.operation() != op {
        skip(
            out,
            None,
            Vec::new(),
            format!(
                "malformed plan: the step is {op} but its parameters are for {}",
                step.params.operation()
            ),
        );
        return;
    }
    let mut notes = match dialect.prepare(step, now_ms) {
        Ok(notes) => notes,
        Err(reason) => {
            skip(out, None, Vec::new(), reason);
            return;
        }
    };
    let blocked = dialect.unfilterable_columns(step);
    let mut statements = Vec::new();
    if table_wide(op) {
        if step.chunks.len() != 1
            || !step.chunks[0].whole_table
            || !step.chunks[0].partitions.is_empty()
        {
            skip(
                out,
                None,
                Vec::new(),
                format!(
                    "malformed plan: {op} acts on the whole table and needs exactly one whole-table chunk"
                ),
            );
            return;
        }
        match dialect.statement(table, &step.params, None) {
            Ok(sql) => statements.push(Statement {
                chunk: step.chunks[0].index,
                partitions: Vec::new(),
                sql,
            }),
            Err(reason) => skip(out, None, Vec::new(), reason),
        }
    } else {
        for chunk in &step.chunks {
            let paths: Vec<String> = chunk.partitions.iter().map(|p| p.path.clone()).collect();
            if chunk.whole_table {
                if !chunk.partitions.is_empty() {
                    skip(
                        out,
                        Some(chunk.index),
                        paths,
                        "malformed plan: a whole-table chunk that also lists partitions is ambiguous".to_string(),
                    );
                    continue;
                }
                match dialect.statement(table, &step.params, None) {
                    Ok(sql) => statements.push(Statement {
                        chunk: chunk.index,
                        partitions: Vec::new(),
                        sql,
                    }),
                    Err(reason) => skip(out, Some(chunk.index), Vec::new(), reason),
                }
                continue;
            }
            if chunk.partitions.is_empty() {
                skip(
                    out,
                    Some(chunk.index),
                    Vec::new(),
                    "malformed plan: a partitioned chunk without partitions would become a whole-table statement"
                        .to_string(),
                );
                continue;
            }
            let mut conjunctions: Vec<Conjunction> = Vec::new();
            let mut left_out: Vec<(String, String)> = Vec::new();
            for (i, p) in chunk.partitions.iter().enumerate() {
                if let Some(why) = dialect.unreachable_partition(p) {
                    left_out.push((p.path.clone(), why));
                    continue;
                }
                let mut terms = Vec::new();
                let mut dropped = Vec::new();
                for fp in &p.predicate {
                    let term = match blocked.iter().find(|(c, _)| *c == fp.column) {
                        Some((_, why)) => Err(why.clone()),
                        None => dialect.field_predicate(fp),
                    };
                    match term {
                        Ok(t) => terms.push(t),
                        Err(why) => {
                            push_unique(
                                &mut notes,
                                format!(
                                    "{why}; dropped, so the statement selects a superset of partitions (safe)"
                                ),
                            );
                            dropped.push(why);
                        }
                    }
                }
                if terms.is_empty() {
                    let why = if p.predicate.is_empty() {
                        "the plan gives it no predicate".to_string()
                    } else {
                        format!(
                            "nothing {} can express selects it: {}",
                            dialect.name(),
                            dropped.join("; ")
                        )
                    };
                    left_out.push((p.path.clone(), why));
                    continue;
                }
                if let Some(c) = conjunctions.iter_mut().find(|c| c.terms == terms) {
                    c.partitions.push(i);
                } else {
                    conjunctions.push(Conjunction {
                        terms,
                        partitions: vec![i],
                    });
                }
            }
            if conjunctions.is_empty() {
                let mut reasons: Vec<String> = Vec::new();
                for (_, why) in &left_out {
                    push_unique(&mut reasons, why.clone());
                }
                skip(
                    out,
                    Some(chunk.index),
                    paths,
                    format!(
                        "no partition of this chunk can be selected on {} ({}); a partitioned chunk is never turned into a whole-table statement",
                        dialect.name(),
                        reasons.join("; ")
                    ),
                );
                continue;
            }
            for (path, why) in left_out {
                skip(
                    out,
                    Some(chunk.index),
                    vec![path],
                    format!(
                        "partition left out of its chunk ({why}); a whole-table statement is never substituted"
                    ),
                );
            }
            if conjunctions.len()
                < conjunctions
                    .iter()
                    .map(|c| c.partitions.len())
                    .sum::<usize>()
            {
                push_unique(
                    &mut notes,
                    "partitions that differ only in dropped predicates share one statement"
                        .to_string(),
                );
            }
            for f in dialect.filters(&conjunctions, &mut notes) {
                let partitions: Vec<String> = f
                    .partitions
                    .iter()
                    .map(|i| chunk.partitions[*i].path.clone())
                    .collect();
                match dialect.statement(table, &step.params, Some(&f.sql)) {
                    Ok(sql) => statements.push(Statement {
                        chunk: chunk.index,
                        partitions,
                        sql,
                    }),
                    Err(reason) => skip(out, Some(chunk.index), partitions, reason),
                }
            }
        }
    }
    if !statements.is_empty() {
        out.steps.push(RenderedStep {
            operation: op,
            statements,
            notes,
        });
    }
}

/// `a AND b AND c`; a single term stays bare.
pub(crate) fn and_terms<'a>(terms: impl IntoIterator<Item = &'a str>) -> String {
    terms.into_iter().collect::<Vec<_>>().join(" AND ")
}

/// `x OR (a AND b)`: disjuncts with several terms in parentheses.
pub(crate) fn or_conjunctions(conjunctions: &[Conjunction]) -> String {
    if conjunctions.len() == 1 {
        return and_terms(conjunctions[0].terms.iter().map(|t| t.sql.as_str()));
    }
    conjunctions
        .iter()
        .map(|c| {
            let body = and_terms(c.terms.iter().map(|t| t.sql.as_str()));
            if c.terms.len() > 1 || c.terms[0].compound {
                format!("({body})")
            } else {
                body
            }
        })
        .collect::<Vec<_>>()
        .join(" OR ")
}
