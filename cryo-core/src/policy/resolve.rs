//! A checked policy, and what it says about each table: its preset and why, its planning
//! options, whether it is paused, and when each of its operations is due next.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::file::{
    DestinationKind, POLICY_FORMAT_VERSION, Pause, PolicyFile, PolicyProblem, Preset, Rule, Seg,
    Selector, Source, TableOverride, WindowRef, read_path,
};
use crate::catalog::TableId;
use crate::error::{Error, Result};
use crate::grade::{CHECKS, CostModel, HealthReport};
use crate::ops::Operation;
use crate::plan::{
    MaintenancePlan, PlanOptions, TableControl, TablePolicy, Window, plan_fleet_each,
    window_opens_in,
};
use crate::scan::TableScan;

/// The preset tables get when no rule matches and the file names no `default_preset`.
pub const DEFAULT_PRESET: &str = "default";

/// What a preset gives a table once the file's windows, budgets and defaults are applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ResolvedPreset {
    /// Its name.
    pub name: String,
    /// Where its work runs.
    pub destination: DestinationKind,
    /// Cadence (ms): an operation is due again this long after it last succeeded.
    pub every_ms: Option<i64>,
    /// Daily window.
    pub window: Option<Window>,
    /// Quiet period for native compaction (ms).
    pub quiet_period_ms: Option<i64>,
    /// The planning options its tables are planned with.
    pub options: PlanOptions,
}

/// How a table got its preset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Assignment {
    /// The file's `tables:` names it.
    Override,
    /// The first rule that matched.
    Rule {
        /// Position in the rules (all files, in order).
        index: usize,
        /// The rule's name.
        name: String,
    },
    /// No rule matched.
    Default,
}

impl fmt::Display for Assignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Assignment::Override => f.write_str("per-table override"),
            Assignment::Rule { index, name } => write!(f, "rule `{name}` (rules[{index}])"),
            Assignment::Default => f.write_str("default preset: no rule matched"),
        }
    }
}

/// One table under the policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ResolvedTable {
    /// The table.
    pub table: TableId,
    /// Its preset.
    pub preset: String,
    /// Why that preset.
    pub assignment: Assignment,
    /// Where its work runs.
    pub destination: DestinationKind,
    /// The file's `tables:` sets options for it over its preset's.
    pub options_override: bool,
    /// Paused at the time asked about: the pause's reason (and until when).
    pub paused: Option<String>,
}

/// Every table of a fleet under the policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ResolvedFleet {
    /// The policy's fingerprint.
    pub policy_fingerprint: String,
    /// Per table, sorted by identifier.
    pub tables: Vec<ResolvedTable>,
    /// Tables per preset.
    pub presets: BTreeMap<String, usize>,
    /// Tables no rule or override matched (they got the default preset).
    pub defaulted: usize,
    /// Tables paused at the time asked about.
    pub paused: usize,
}

/// When one operation of a table's preset runs next, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct NextRun {
    /// The operation.
    pub operation: Operation,
    /// Planned in a run made now.
    pub planned: bool,
    /// The earliest instant it may run (ms since epoch): now when planned; otherwise the end
    /// of its cadence, window or pause, whichever is last.
    pub at_ms: i64,
    /// Why then (or why not now).
    pub reason: String,
}

/// A table under the policy, explained: the preset, why, and what would run next and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TableExplanation {
    /// Resolution.
    pub resolved: ResolvedTable,
    /// Its grade when explained.
    pub grade: crate::grade::Grade,
    /// The preset's cadence, window and options.
    pub preset: ResolvedPreset,
    /// Each operation of the preset.
    pub next: Vec<NextRun>,
}

/// A checked policy: the files as one, every preset resolved, and the fingerprint.
///
/// Read with [`Policy::load`] (a file or a directory of them) or [`Policy::from_yaml`];
/// both refuse a policy with any problem, listing them all ([`Error::Policy`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    sources: Vec<String>,
    file: PolicyFile,
    fingerprint: String,
    presets: BTreeMap<String, ResolvedPreset>,
    /// Per table: the preset it names (if any), and its options over each preset it may get.
    overrides: BTreeMap<TableId, (Option<String>, BTreeMap<String, PlanOptions>)>,
    cost: CostModel,
}

impl Policy {
    /// Read a policy file, or every `*.yaml`/`*.yml` file of a directory in name order.
    pub fn load(path: impl AsRef<Path>) -> Result<Policy> {
        Policy::from_sources(&read_path(path.as_ref())?)
    }

    /// A policy from YAML text; `name` stands for the file in problems.
    pub fn from_yaml(text: &str, name: &str) -> Result<Policy> {
        let source = Source::read(name, text).map_err(|p| Error::Policy { problems: vec![p] })?;
        Policy::from_sources(&[source])
    }

    /// The files it was read from.
    pub fn sources(&self) -> &[String] {
        &self.sources
    }

    /// The policy as one file, in its canonical form.
    pub fn file(&self) -> &PolicyFile {
        &self.file
    }

    /// SHA-256 (hex) over the canonical JSON of the policy: the same for the same policy
    /// however it is spelled (`1h` or `60m`, one file or three), whichever binding reads it.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Every preset, the built-in default among them.
    pub fn presets(&self) -> &BTreeMap<String, ResolvedPreset> {
        &self.presets
    }

    /// The price model grading uses under this policy.
    pub fn cost_model(&self) -> &CostModel {
        &self.cost
    }

    /// The canonical JSON of the policy (what the fingerprint is over).
    pub fn to_json(&self) -> Result<String> {
        canonical_json(&self.file)
    }

    pub(crate) fn default_preset(&self) -> &str {
        self.file
            .default_preset
            .as_deref()
            .unwrap_or(DEFAULT_PRESET)
    }

    /// The table's preset and why, and whether it is paused at `now_ms`.
    pub fn resolve(&self, scan: &TableScan, report: &HealthReport, now_ms: i64) -> ResolvedTable {
        let named = self
            .overrides
            .get(&scan.table)
            .and_then(|(preset, _)| preset.clone());
        let (preset, assignment) = if let Some(preset) = named {
            (preset, Assignment::Override)
        } else if let Some((index, rule)) = self
            .file
            .rules
            .iter()
            .enumerate()
            .find(|(_, r)| r.select.matches(scan, report))
        {
            (
                rule.preset.clone(),
                Assignment::Rule {
                    index,
                    name: rule.name.clone(),
                },
            )
        } else {
            (self.default_preset().to_string(), Assignment::Default)
        };
        let destination = self.presets[&preset].destination;
        ResolvedTable {
            options_override: self.file.tables.iter().any(|(id, o)| {
                !o.options.is_empty() && TableId::parse(id).is_ok_and(|t| t == scan.table)
            }),
            paused: self.pause(&scan.table, now_ms),
            table: scan.table.clone(),
            preset,
            assignment,
            destination,
        }
    }

    /// Every table of a fleet.
    pub fn resolve_fleet(
        &self,
        graded: &[(TableScan, HealthReport)],
        now_ms: i64,
    ) -> ResolvedFleet {
        let mut tables: Vec<ResolvedTable> = graded
            .iter()
            .map(|(scan, report)| self.resolve(scan, report, now_ms))
            .collect();
        tables.sort_by(|a, b| a.table.cmp(&b.table));
        let mut presets = BTreeMap::new();
        for t in &tables {
            *presets.entry(t.preset.clone()).or_insert(0) += 1;
        }
        ResolvedFleet {
            policy_fingerprint: self.fingerprint.clone(),
            defaulted: tables
                .iter()
                .filter(|t| t.assignment == Assignment::Default)
                .count(),
            paused: tables.iter().filter(|t| t.paused.is_some()).count(),
            presets,
            tables,
        }
    }

    /// The options a table is planned with: its preset's, with its override's on top.
    pub fn plan_options(&self, resolved: &ResolvedTable) -> &PlanOptions {
        self.overrides
            .get(&resolved.table)
            .and_then(|(_, by_preset)| by_preset.get(&resolved.preset))
            .unwrap_or(&self.presets[&resolved.preset].options)
    }

    fn pause(&self, table: &TableId, now_ms: i64) -> Option<String> {
        let id = table.to_string();
        self.file
            .pauses
            .iter()
            .find(|p| p.active(now_ms) && p.tables.matches(&id))
            .map(|p| match p.until {
                Some(until) => format!("paused by the policy until {until}: {}", p.reason),
                None => format!("paused by the policy: {}", p.reason),
            })
    }

    /// Plan a fleet under the policy: each table with its preset's options (its cadence as
    /// cooldowns, its window), paused tables skipped with the pause's reason, the fleet under
    /// the budget cap. The plan records the policy's fingerprint and each table's preset.
    pub fn plan(
        &self,
        catalog: &str,
        graded: &[(TableScan, HealthReport)],
        controls: &BTreeMap<TableId, TableControl>,
        now_ms: i64,
    ) -> Result<MaintenancePlan> {
        self.plan_with(catalog, graded, controls, now_ms, |_, _| {})
    }

    /// [`Policy::plan`], with each table's options passed through `adjust` first.
    pub(crate) fn plan_with(
        &self,
        catalog: &str,
        graded: &[(TableScan, HealthReport)],
        controls: &BTreeMap<TableId, TableControl>,
        now_ms: i64,
        adjust: impl Fn(&TableId, &mut PlanOptions),
    ) -> Result<MaintenancePlan> {
        let mut merged = controls.clone();
        let mut resolved = BTreeMap::new();
        let mut options = BTreeMap::new();
        for (scan, report) in graded {
            let r = self.resolve(scan, report, now_ms);
            if let Some(reason) = &r.paused {
                merged
                    .entry(scan.table.clone())
                    .or_default()
                    .merge(&TableControl {
                        paused: true,
                        pause_reason: Some(reason.clone()),
                        ..TableControl::default()
                    });
            }
            let mut o = self.plan_options(&r).clone();
            adjust(&scan.table, &mut o);
            options.insert(scan.table.clone(), o);
            resolved.insert(scan.table.clone(), r);
        }
        let fleet_budget = self.file.budgets.fleet.map(|b| b.0);
        let mut plan = plan_fleet_each(
            catalog,
            graded,
            |scan| &options[&scan.table],
            fleet_budget,
            &merged,
            now_ms,
        )?;
        for table in &mut plan.tables {
            let r = &resolved[&table.table];
            table.policy = Some(TablePolicy {
                preset: r.preset.clone(),
                assignment: r.assignment.to_string(),
                destination: r.destination.as_str().to_string(),
            });
        }
        plan.policy = Some(self.fingerprint.clone());
        plan.fingerprint = plan.compute_fingerprint()?;
        Ok(plan)
    }

    /// Grade every scan with the policy's prices and plan the fleet under it, at the time of
    /// the newest scan: what `cryo plan --policy` does.
    pub fn plan_scans(
        &self,
        catalog: &str,
        scans: &[TableScan],
        controls: &BTreeMap<TableId, TableControl>,
    ) -> Result<MaintenancePlan> {
        self.plan(
            catalog,
            &self.grade(scans)?,
            controls,
            newest_scan_ms(scans),
        )
    }

    /// [`Policy::resolve_fleet`] of scans graded with the policy's prices, at the newest scan.
    pub fn resolve_scans(&self, scans: &[TableScan]) -> Result<ResolvedFleet> {
        Ok(self.resolve_fleet(&self.grade(scans)?, newest_scan_ms(scans)))
    }

    /// [`Policy::explain`] of scans graded with the policy's prices, at the newest scan.
    pub fn explain_scans(
        &self,
        catalog: &str,
        scans: &[TableScan],
        controls: &BTreeMap<TableId, TableControl>,
    ) -> Result<Vec<TableExplanation>> {
        self.explain(
            catalog,
            &self.grade(scans)?,
            controls,
            newest_scan_ms(scans),
        )
    }

    /// [`Policy::due`] of scans graded with the policy's prices, at the newest scan.
    pub fn due_scans(
        &self,
        scans: &[TableScan],
        receipts: &[crate::receipt::Receipt],
    ) -> Result<super::Due> {
        Ok(self.due(&self.grade(scans)?, receipts, newest_scan_ms(scans)))
    }

    /// [`Policy::plan_due`] of what [`Policy::due_scans`] finds due.
    pub fn plan_due_scans(
        &self,
        catalog: &str,
        scans: &[TableScan],
        receipts: &[crate::receipt::Receipt],
        controls: &BTreeMap<TableId, TableControl>,
    ) -> Result<MaintenancePlan> {
        let graded = self.grade(scans)?;
        let now = newest_scan_ms(scans);
        let due = self.due(&graded, receipts, now);
        self.plan_due(catalog, &graded, &due, controls, now)
    }

    /// Grade scans with the policy's prices.
    pub fn grade(&self, scans: &[TableScan]) -> Result<Vec<(TableScan, HealthReport)>> {
        let options = crate::grade::GradeOptions {
            cost: self.cost.clone(),
            ..crate::grade::GradeOptions::default()
        };
        scans
            .iter()
            .map(|s| {
                Ok((
                    s.clone(),
                    crate::grade::grade(s, &options, s.scanned_at_ms)?,
                ))
            })
            .collect()
    }

    /// Per table: its preset and why, and for each operation of the preset whether a run made
    /// at `now_ms` plans it, and otherwise when it may run next and what holds it back.
    pub fn explain(
        &self,
        catalog: &str,
        graded: &[(TableScan, HealthReport)],
        controls: &BTreeMap<TableId, TableControl>,
        now_ms: i64,
    ) -> Result<Vec<TableExplanation>> {
        let plan = self.plan(catalog, graded, controls, now_ms)?;
        let mut out = Vec::with_capacity(graded.len());
        let none = TableControl::default();
        for (scan, report) in graded {
            let resolved = self.resolve(scan, report, now_ms);
            let preset = self.presets[&resolved.preset].clone();
            let options = self.plan_options(&resolved);
            let control = controls.get(&scan.table).unwrap_or(&none);
            let table_plan = plan.tables.iter().find(|t| t.table == scan.table);
            let called_for = report.operations();
            let ops: Vec<Operation> = options
                .operations
                .clone()
                .unwrap_or_else(|| Operation::ORDER.to_vec());
            let mut next = Vec::with_capacity(ops.len());
            for op in ops {
                let step = table_plan.and_then(|t| t.steps.iter().find(|s| s.operation == op));
                if let Some(step) = step {
                    next.push(NextRun {
                        operation: op,
                        planned: true,
                        at_ms: now_ms,
                        reason: format!("due now, for {}", step.because.join(", ")),
                    });
                    continue;
                }
                let skipped = table_plan
                    .and_then(|t| t.skipped.iter().find(|s| s.operation == op))
                    .map(|s| s.reason.clone());
                let (at_ms, mut why) = self.next_slot(op, &resolved, &preset, control, now_ms);
                if !called_for.contains(&op) {
                    why.push("no finding calls for it".to_string());
                }
                if let Some(s) = skipped {
                    why.push(s);
                }
                next.push(NextRun {
                    operation: op,
                    planned: false,
                    at_ms,
                    reason: if why.is_empty() {
                        "nothing holds it back".to_string()
                    } else {
                        why.join("; ")
                    },
                });
            }
            out.push(TableExplanation {
                resolved,
                grade: report.grade,
                preset,
                next,
            });
        }
        out.sort_by(|a, b| a.resolved.table.cmp(&b.resolved.table));
        Ok(out)
    }

    /// The earliest instant `op` may run on the table: after its cadence, inside its window,
    /// past its pause; and what set it.
    fn next_slot(
        &self,
        op: Operation,
        resolved: &ResolvedTable,
        preset: &ResolvedPreset,
        control: &TableControl,
        now_ms: i64,
    ) -> (i64, Vec<String>) {
        let mut at = now_ms;
        let mut why = Vec::new();
        if let (Some(every), Some(last)) = (preset.every_ms, control.last_runs.get(&op)) {
            let due = last.saturating_add(every);
            if due > at {
                at = due;
                why.push(format!(
                    "cadence {} since its last run",
                    super::units::Duration(every)
                ));
            }
        }
        if resolved.paused.is_some() {
            let id = resolved.table.to_string();
            let until = self
                .file
                .pauses
                .iter()
                .filter(|p| p.active(now_ms) && p.tables.matches(&id))
                .map(|p| p.until.map_or(i64::MAX, |u| u.0))
                .max();
            if let Some(until) = until {
                at = at.max(until);
            }
            why.extend(resolved.paused.clone());
        }
        if let Some(w) = preset.window
            && at < i64::MAX
            && let Some(opens_in) = window_opens_in(w, at)
        {
            at = at.saturating_add(opens_in);
            why.push(format!(
                "window {:02}:00-{:02}:00 UTC",
                w.start_hour, w.end_hour
            ));
        }
        (at, why)
    }

    fn from_sources(sources: &[Source]) -> Result<Policy> {
        let mut check = Checker {
            sources,
            problems: Vec::new(),
        };
        let (file, origins) = merge(&mut check);
        let presets = check.presets(&file, &origins);
        let overrides = check.overrides(&file, &origins, &presets);
        check.rules(&file, &origins, &presets);
        check.pauses(&file, &origins);
        let cost = check.cost(&file, &origins);
        if let (Some(b), Some(at)) = (file.backoff, origins.backoff) {
            if b.after_failures == 0 {
                check.problem(at, &[key("backoff"), key("after_failures")], "at least 1");
            }
            if b.delay.0 <= 0 || b.max_delay.0 < b.delay.0 {
                check.problem(
                    at,
                    &[key("backoff"), key("max_delay")],
                    "the delay must be longer than zero and max_delay at least the delay",
                );
            }
        }
        if !check.problems.is_empty() {
            return Err(Error::Policy {
                problems: check.problems,
            });
        }
        let fingerprint = {
            let json = canonical_json(&file)?;
            let mut h = Sha256::new();
            h.update(json.as_bytes());
            hex(&h.finalize())
        };
        Ok(Policy {
            sources: sources.iter().map(|s| s.name.clone()).collect(),
            file,
            fingerprint,
            presets,
            overrides,
            cost,
        })
    }
}

/// The time of the newest scan (0 for none): a plan made from the same scans is the same
/// plan, whenever it is made.
pub(crate) fn newest_scan_ms(scans: &[TableScan]) -> i64 {
    scans.iter().map(|s| s.scanned_at_ms).max().unwrap_or(0)
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// JSON with every object's keys sorted, whatever order the maps kept.
fn canonical_json(file: &PolicyFile) -> Result<String> {
    fn sort(v: Value) -> Value {
        match v {
            Value::Object(m) => {
                let sorted: BTreeMap<String, Value> =
                    m.into_iter().map(|(k, v)| (k, sort(v))).collect();
                Value::Object(sorted.into_iter().collect())
            }
            Value::Array(a) => Value::Array(a.into_iter().map(sort).collect()),
            other => other,
        }
    }
    let value = serde_json::to_value(file).map_err(|e| Error::compute("policy to JSON", e))?;
    serde_json::to_string(&sort(value)).map_err(|e| Error::compute("policy to JSON", e))
}

impl Selector {
    /// Whether the table matches every condition given.
    pub fn matches(&self, scan: &TableScan, report: &HealthReport) -> bool {
        let files = scan.data_files.count;
        let bytes = scan.data_files.bytes;
        #[allow(clippy::cast_precision_loss, reason = "a ratio")]
        let small = if files == 0 {
            0.0
        } else {
            scan.data_files.small_count as f64 / files as f64
        };
        let table = &scan.table;
        self.namespace
            .as_ref()
            .is_none_or(|p| p.matches(&table.namespace.to_string()))
            && self.name.as_ref().is_none_or(|p| p.matches(&table.name))
            && self
                .table
                .as_ref()
                .is_none_or(|p| p.matches(&table.to_string()))
            && self.min_bytes.is_none_or(|m| bytes >= m.0)
            && self.max_bytes.is_none_or(|m| bytes <= m.0)
            && self.min_files.is_none_or(|m| files >= m)
            && self.max_files.is_none_or(|m| files <= m)
            && self.min_small_file_ratio.is_none_or(|m| small >= m)
            && self.max_small_file_ratio.is_none_or(|m| small <= m)
            && self
                .grades
                .as_ref()
                .is_none_or(|g| g.contains(&report.grade))
            && self
                .format_versions
                .as_ref()
                .is_none_or(|v| v.contains(&scan.format_version))
            && self.properties.iter().all(|(k, want)| {
                scan.properties
                    .get(k)
                    .is_some_and(|v| want == "*" || v == want)
            })
            && (self.findings.is_empty()
                || report
                    .findings
                    .iter()
                    .any(|f| self.findings.contains(&f.code)))
    }
}

/// Which file (by index) each part of the merged policy came from, and its index there.
#[derive(Default)]
struct Origins {
    presets: BTreeMap<String, usize>,
    windows: BTreeMap<String, usize>,
    tables: BTreeMap<String, usize>,
    rules: Vec<(usize, usize)>,
    pauses: Vec<(usize, usize)>,
    default_preset: Option<usize>,
    budgets: Option<usize>,
    prices: Option<usize>,
    backoff: Option<usize>,
}

struct Checker<'a> {
    sources: &'a [Source],
    problems: Vec<PolicyProblem>,
}

fn key(k: &str) -> Seg {
    Seg::Key(k.to_string())
}

impl Checker<'_> {
    /// Whether file `f` sets the single setting `name` (`given`) as the first file to: a second
    /// file that sets it is a problem.
    fn single(&mut self, f: usize, name: &str, given: bool, origin: &mut Option<usize>) -> bool {
        if !given {
            return false;
        }
        if let Some(first) = *origin {
            let first = self.sources[first].name.clone();
            self.problem(
                f,
                &[key(name)],
                format!("also set in {first}: set it in one file"),
            );
            return false;
        }
        *origin = Some(f);
        true
    }

    fn problem(&mut self, file: usize, path: &[Seg], message: impl Into<String>) {
        let source = &self.sources[file];
        let (line, column) = source.locate(path);
        self.problems.push(PolicyProblem {
            file: source.name.clone(),
            line,
            column,
            field: super::file::show_path(path),
            message: message.into(),
        });
    }

    fn presets(
        &mut self,
        file: &PolicyFile,
        origins: &Origins,
    ) -> BTreeMap<String, ResolvedPreset> {
        for (name, w) in &file.windows {
            if let Err(e) = Window::from(*w).validate() {
                let at = origins.windows[name];
                self.problem(at, &[key("windows"), key(name)], strip(&e));
            }
        }
        let mut out = BTreeMap::new();
        let builtin = Preset::default();
        let mut all: Vec<(&String, &Preset, Option<usize>)> = file
            .presets
            .iter()
            .map(|(n, p)| (n, p, Some(origins.presets[n])))
            .collect();
        let default_name = DEFAULT_PRESET.to_string();
        if !file.presets.contains_key(DEFAULT_PRESET) {
            all.push((&default_name, &builtin, None));
        }
        for (name, preset, at) in all {
            let here = |leaf: &str| vec![key("presets"), key(name), key(leaf)];
            let window = match &preset.window {
                None => None,
                Some(WindowRef::Hours(w)) => Some(Window::from(*w)),
                Some(WindowRef::Named(n)) => {
                    let found = file.windows.get(n).map(|w| Window::from(*w));
                    if found.is_none()
                        && let Some(at) = at
                    {
                        self.problem(
                            at,
                            &here("window"),
                            format!("no window named `{n}` in `windows`"),
                        );
                    }
                    found
                }
            };
            if preset.every.is_some_and(|e| e.0 <= 0)
                && let Some(at) = at
            {
                self.problem(at, &here("every"), "a cadence must be longer than zero");
            }
            let mut base = serde_json::to_value(PlanOptions::default()).unwrap_or(Value::Null);
            if let Some(at) = at {
                self.overlay_options(&mut base, &preset.options, at, here("options"));
            }
            let Ok(mut options) = serde_json::from_value::<PlanOptions>(base) else {
                continue; // the overlay said why
            };
            options.operations.clone_from(&preset.operations);
            options.window = window;
            if let Some(every) = preset.every {
                for op in Operation::ORDER {
                    options.cooldowns_ms.insert(op, every.0);
                }
            }
            Self::caps(&mut options, &file.budgets);
            if let Err(e) = options.validate()
                && let Some(at) = at
            {
                self.problem(at, &here("options"), strip(&e));
            }
            out.insert(
                name.clone(),
                ResolvedPreset {
                    name: name.clone(),
                    destination: preset.destination,
                    every_ms: preset.every.map(|d| d.0),
                    window,
                    quiet_period_ms: preset.quiet_period.map(|d| d.0),
                    options,
                },
            );
        }
        if let Some(name) = &file.default_preset
            && !out.contains_key(name)
            && let Some(at) = origins.default_preset
        {
            self.problem(
                at,
                &[key("default_preset")],
                format!("no preset named `{name}`"),
            );
        }
        out
    }

    /// The caps of `budgets` over a preset's or an override's budgets.
    fn caps(options: &mut PlanOptions, budgets: &super::file::Budgets) {
        if let Some(chunk) = budgets.chunk {
            options.chunk_budget_bytes = options.chunk_budget_bytes.min(chunk.0);
        }
        if let Some(table) = budgets.table {
            options.table_budget_bytes = Some(
                options
                    .table_budget_bytes
                    .map_or(table.0, |t| t.min(table.0)),
            );
        }
        if let Some(fleet) = budgets.fleet {
            options.fleet_budget_bytes = Some(
                options
                    .fleet_budget_bytes
                    .map_or(fleet.0, |t| t.min(fleet.0)),
            );
        }
    }

    /// Lay `overlay` (fields of [`PlanOptions`]) over `base`, refusing unknown fields and the
    /// ones the preset's own fields set.
    fn overlay_options(
        &mut self,
        base: &mut Value,
        overlay: &Map<String, Value>,
        at: usize,
        path: Vec<Seg>,
    ) {
        const NESTED: [&str; 2] = ["expire", "orphans"];
        const OWN: [(&str, &str); 3] = [
            ("operations", "set `operations` on the preset"),
            ("window", "set `window` on the preset"),
            ("cooldowns_ms", "the preset's `every` sets the cooldowns"),
        ];
        let Value::Object(target) = base else { return };
        for (k, v) in overlay {
            let mut here = path.clone();
            here.push(key(k));
            if let Some((_, why)) = OWN.iter().find(|(own, _)| own == k) {
                self.problem(at, &here, format!("not an option here: {why}"));
                continue;
            }
            let Some(slot) = target.get_mut(k) else {
                let known: Vec<&String> = target
                    .keys()
                    .filter(|k| !OWN.iter().any(|(o, _)| o == *k))
                    .collect();
                self.problem(
                    at,
                    &here,
                    format!(
                        "unknown option `{k}` (one of: {})",
                        known
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
                continue;
            };
            match (NESTED.contains(&k.as_str()), slot, v) {
                (true, Value::Object(inner), Value::Object(given)) => {
                    for (ik, iv) in given {
                        if inner.contains_key(ik) {
                            inner.insert(ik.clone(), iv.clone());
                        } else {
                            let mut deeper = here.clone();
                            deeper.push(key(ik));
                            self.problem(at, &deeper, format!("unknown option `{k}.{ik}`"));
                        }
                    }
                }
                (_, slot, v) => *slot = v.clone(),
            }
        }
        if let Err(e) = serde_path_to_error::deserialize::<_, PlanOptions>(base.clone()) {
            let mut here = path;
            here.extend(e.path().iter().filter_map(|s| match s {
                serde_path_to_error::Segment::Map { key: k } => Some(key(k)),
                serde_path_to_error::Segment::Seq { index } => Some(Seg::Index(*index)),
                _ => None,
            }));
            self.problem(at, &here, e.into_inner().to_string());
        }
    }

    fn overrides(
        &mut self,
        file: &PolicyFile,
        origins: &Origins,
        presets: &BTreeMap<String, ResolvedPreset>,
    ) -> BTreeMap<TableId, (Option<String>, BTreeMap<String, PlanOptions>)> {
        let mut out = BTreeMap::new();
        for (id, o) in &file.tables {
            let at = origins.tables[id];
            let here = |leaf: Option<&str>| {
                let mut p = vec![key("tables"), key(id)];
                p.extend(leaf.map(key));
                p
            };
            let table = match TableId::parse(id) {
                Ok(t) => t,
                Err(e) => {
                    self.problem(at, &here(None), strip(&e));
                    continue;
                }
            };
            let TableOverride { preset, options } = o;
            if let Some(p) = preset
                && !presets.contains_key(p)
            {
                self.problem(at, &here(Some("preset")), format!("no preset named `{p}`"));
                continue;
            }
            // Without a preset of its own the rules pick one: lay the options over each.
            let bases: Vec<&ResolvedPreset> = match preset {
                Some(p) => vec![&presets[p]],
                None => presets.values().collect(),
            };
            let mut by_preset = BTreeMap::new();
            let before = self.problems.len();
            for base in bases {
                let mut value = serde_json::to_value(&base.options).unwrap_or(Value::Null);
                let own: Vec<(String, Value)> = ["operations", "window", "cooldowns_ms"]
                    .iter()
                    .filter_map(|k| value.get(*k).map(|v| ((*k).to_string(), v.clone())))
                    .collect();
                self.overlay_options(&mut value, options, at, here(Some("options")));
                if self.problems.len() > before {
                    // The same overlay fails the same way over every preset: say it once.
                    break;
                }
                if let Value::Object(m) = &mut value {
                    m.extend(own);
                }
                let Ok(mut resolved) = serde_json::from_value::<PlanOptions>(value) else {
                    continue;
                };
                Self::caps(&mut resolved, &file.budgets);
                if let Err(e) = resolved.validate() {
                    self.problem(at, &here(Some("options")), strip(&e));
                    break;
                }
                by_preset.insert(base.name.clone(), resolved);
            }
            out.insert(table, (preset.clone(), by_preset));
        }
        out
    }

    fn rules(
        &mut self,
        file: &PolicyFile,
        origins: &Origins,
        presets: &BTreeMap<String, ResolvedPreset>,
    ) {
        let mut names: BTreeMap<&str, usize> = BTreeMap::new();
        for (
            i,
            Rule {
                name,
                preset,
                select,
            },
        ) in file.rules.iter().enumerate()
        {
            let (at, local) = origins.rules[i];
            let here = |leaf: &[&str]| {
                let mut p = vec![key("rules"), Seg::Index(local)];
                p.extend(leaf.iter().map(|l| key(l)));
                p
            };
            if name.trim().is_empty() {
                self.problem(at, &here(&["name"]), "a rule needs a name");
            } else if let Some(first) = names.insert(name, i) {
                self.problem(
                    at,
                    &here(&["name"]),
                    format!("rule `{name}` is also rules[{first}]"),
                );
            }
            if !presets.contains_key(preset) {
                self.problem(
                    at,
                    &here(&["preset"]),
                    format!("no preset named `{preset}`"),
                );
            }
            let range = |lo: Option<f64>, hi: Option<f64>| lo.zip(hi).is_some_and(|(l, h)| l > h);
            #[allow(clippy::cast_precision_loss, reason = "compared, not computed with")]
            let bytes = range(
                select.min_bytes.map(|b| b.0 as f64),
                select.max_bytes.map(|b| b.0 as f64),
            );
            #[allow(clippy::cast_precision_loss, reason = "compared, not computed with")]
            let files = range(
                select.min_files.map(|b| b as f64),
                select.max_files.map(|b| b as f64),
            );
            if bytes {
                self.problem(
                    at,
                    &here(&["match", "min_bytes"]),
                    "min_bytes is above max_bytes: the rule can match nothing",
                );
            }
            if files {
                self.problem(
                    at,
                    &here(&["match", "min_files"]),
                    "min_files is above max_files: the rule can match nothing",
                );
            }
            for (field, v) in [
                ("min_small_file_ratio", select.min_small_file_ratio),
                ("max_small_file_ratio", select.max_small_file_ratio),
            ] {
                if v.is_some_and(|r| !(0.0..=1.0).contains(&r)) {
                    self.problem(at, &here(&["match", field]), "a ratio is between 0 and 1");
                }
            }
            if range(select.min_small_file_ratio, select.max_small_file_ratio) {
                self.problem(
                    at,
                    &here(&["match", "min_small_file_ratio"]),
                    "min_small_file_ratio is above max_small_file_ratio: the rule can match nothing",
                );
            }
            for (j, v) in select.format_versions.iter().flatten().enumerate() {
                if !(1..=3).contains(v) {
                    let mut p = here(&["match", "format_versions"]);
                    p.push(Seg::Index(j));
                    self.problem(
                        at,
                        &p,
                        format!("Iceberg has format versions 1, 2 and 3, not {v}"),
                    );
                }
            }
            for (j, code) in select.findings.iter().enumerate() {
                if !CHECKS.iter().any(|c| c.code == code) {
                    let mut p = here(&["match", "findings"]);
                    p.push(Seg::Index(j));
                    let known: Vec<&str> = CHECKS.iter().map(|c| c.code).collect();
                    self.problem(
                        at,
                        &p,
                        format!(
                            "no check has the code `{code}` (one of: {})",
                            known.join(", ")
                        ),
                    );
                }
            }
        }
    }

    fn pauses(&mut self, file: &PolicyFile, origins: &Origins) {
        for (i, p) in file.pauses.iter().enumerate() {
            let (at, local) = origins.pauses[i];
            let here = |leaf: &str| vec![key("pauses"), Seg::Index(local), key(leaf)];
            if p.reason.trim().is_empty() {
                self.problem(at, &here("reason"), "a pause needs a reason");
            }
            if let (Some(from), Some(until)) = (p.from, p.until)
                && from >= until
            {
                self.problem(
                    at,
                    &here("until"),
                    format!("ends ({until}) before it starts ({from})"),
                );
            }
            for (j, q) in file.pauses.iter().enumerate().take(i) {
                if overlap(p, q) {
                    let (qf, ql) = origins.pauses[j];
                    let other = if qf == at {
                        format!("pauses[{ql}]")
                    } else {
                        format!("pauses[{ql}] of {}", self.sources[qf].name)
                    };
                    self.problem(
                        at,
                        &here("tables"),
                        format!(
                            "overlaps {other} (`{}`): some table would be paused twice at once; \
                             merge them or split their times",
                            q.tables
                        ),
                    );
                }
            }
        }
    }

    fn cost(&mut self, file: &PolicyFile, origins: &Origins) -> CostModel {
        let mut base = serde_json::to_value(CostModel::default()).unwrap_or(Value::Null);
        if let (Some(at), Value::Object(target)) = (origins.prices, &mut base) {
            for (k, v) in &file.prices {
                if target.contains_key(k) {
                    target.insert(k.clone(), v.clone());
                } else {
                    let known: Vec<&str> = target.keys().map(String::as_str).collect();
                    self.problem(
                        at,
                        &[key("prices"), key(k)],
                        format!("unknown price `{k}` (one of: {})", known.join(", ")),
                    );
                }
            }
        }
        match serde_path_to_error::deserialize::<_, CostModel>(base) {
            Ok(c) => {
                if let Err(e) = c.validate()
                    && let Some(at) = origins.prices
                {
                    self.problem(at, &[key("prices")], strip(&e));
                }
                c
            }
            Err(e) => {
                if let Some(at) = origins.prices {
                    let mut p = vec![key("prices")];
                    p.extend(e.path().iter().filter_map(|s| match s {
                        serde_path_to_error::Segment::Map { key: k } => Some(key(k)),
                        _ => None,
                    }));
                    self.problem(at, &p, e.into_inner().to_string());
                }
                CostModel::default()
            }
        }
    }
}

/// Two pauses that hold for some table at some instant.
fn overlap(a: &Pause, b: &Pause) -> bool {
    let (a0, a1) = (
        a.from.map_or(i64::MIN, |f| f.0),
        a.until.map_or(i64::MAX, |u| u.0),
    );
    let (b0, b1) = (
        b.from.map_or(i64::MIN, |f| f.0),
        b.until.map_or(i64::MAX, |u| u.0),
    );
    a0 < b1 && b0 < a1 && a.tables.overlaps(&b.tables)
}

/// An error's message without its variant's prefix (`invalid input: `).
fn strip(e: &Error) -> String {
    match e {
        Error::Validation { message } | Error::Config { message } => message.clone(),
        other => other.to_string(),
    }
}

/// The files as one: maps joined (a name defined twice is a problem), lists in file order,
/// and each single setting from the one file that gives it.
fn merge(check: &mut Checker<'_>) -> (PolicyFile, Origins) {
    let mut out = PolicyFile::default();
    let mut origins = Origins::default();
    let sources = check.sources;
    for (f, source) in sources.iter().enumerate() {
        let file = &source.file;
        if let Some(v) = file.version
            && v != POLICY_FORMAT_VERSION
        {
            check.problem(
                f,
                &[key("version")],
                format!(
                    "policy format {v} is not known to this Cryo \
                     (it reads version {POLICY_FORMAT_VERSION})"
                ),
            );
        }
        out.version = out.version.or(file.version);
        if check.single(
            f,
            "default_preset",
            file.default_preset.is_some(),
            &mut origins.default_preset,
        ) {
            out.default_preset.clone_from(&file.default_preset);
        }
        if check.single(
            f,
            "budgets",
            file.budgets != super::file::Budgets::default(),
            &mut origins.budgets,
        ) {
            out.budgets = file.budgets;
        }
        if check.single(f, "backoff", file.backoff.is_some(), &mut origins.backoff) {
            out.backoff = file.backoff;
        }
        if check.single(f, "prices", !file.prices.is_empty(), &mut origins.prices) {
            out.prices.clone_from(&file.prices);
        }
        join(
            check,
            f,
            "windows",
            &file.windows,
            &mut out.windows,
            &mut origins.windows,
        );
        join(
            check,
            f,
            "presets",
            &file.presets,
            &mut out.presets,
            &mut origins.presets,
        );
        join(
            check,
            f,
            "tables",
            &file.tables,
            &mut out.tables,
            &mut origins.tables,
        );
        for (i, r) in file.rules.iter().enumerate() {
            out.rules.push(r.clone());
            origins.rules.push((f, i));
        }
        for (i, p) in file.pauses.iter().enumerate() {
            out.pauses.push(p.clone());
            origins.pauses.push((f, i));
        }
    }
    (out, origins)
}

fn join<T: Clone>(
    check: &mut Checker<'_>,
    f: usize,
    section: &str,
    from: &BTreeMap<String, T>,
    into: &mut BTreeMap<String, T>,
    origin: &mut BTreeMap<String, usize>,
) {
    for (name, v) in from {
        if let Some(first) = origin.get(name) {
            let first = check.sources[*first].name.clone();
            check.problem(
                f,
                &[key(section), key(name)],
                format!("`{name}` is also defined in {first}"),
            );
            continue;
        }
        origin.insert(name.clone(), f);
        into.insert(name.clone(), v.clone());
    }
}
