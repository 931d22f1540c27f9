//! The policy file: its format, and reading it with every problem located (file, line, column,
//! field).
//!
//! Reading is two passes. The YAML is read into a tree that keeps where each key and value
//! stood; the tree becomes JSON and the typed [`PolicyFile`] is read from that, so a type error
//! or an unknown key comes back with the path of the field it is in, and the path finds its
//! line in the tree. The semantic checks (a rule naming a missing preset, overlapping pauses)
//! work on the typed file and locate their findings the same way.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use serde_saphyr::Spanned;

use super::units::{ByteSize, Duration, Instant, Pattern};
use crate::error::{Error, Result};
use crate::grade::Grade;
use crate::ops::Operation;
use crate::plan::Window;

/// The policy format this version reads (`version: 1`, or no `version`).
pub const POLICY_FORMAT_VERSION: u32 = 1;

/// One thing wrong with a policy, and where.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyProblem {
    /// The file, as it was named to the loader.
    pub file: String,
    /// 1-based line; 0 when the place is not known (a file that is not YAML at all).
    pub line: u32,
    /// 1-based column; 0 when not known.
    pub column: u32,
    /// The field, as a path: `rules[1].preset`, `presets.hourly.every`.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl fmt::Display for PolicyProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        if self.field.is_empty() {
            write!(f, ": {}", self.message)
        } else {
            write!(f, ": `{}`: {}", self.field, self.message)
        }
    }
}

/// Where maintenance runs for a preset's tables.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum DestinationKind {
    /// Cryo's native engine, in the calling process.
    #[default]
    Native,
    /// A Trino cluster, through the rendered SQL.
    Trino,
    /// A Spark cluster, through the rendered SQL.
    Spark,
}

impl DestinationKind {
    /// Stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            DestinationKind::Native => "native",
            DestinationKind::Trino => "trino",
            DestinationKind::Spark => "spark",
        }
    }
}

/// The file as written: presets, rules, overrides, pauses, windows, budgets and prices.
///
/// ```yaml
/// version: 1
/// default_preset: standard
/// windows:
///   night: {start_hour: 1, end_hour: 6}
/// presets:
///   streaming-hot:
///     operations: [rewrite_position_deletes, rewrite_data_files, rewrite_manifests, expire_snapshots]
///     destination: native
///     every: 1h
///     window: night
///     quiet_period: 10m
///     options: {min_input_files: 10}
///   standard: {every: 1d}
/// rules:
///   - name: streams
///     preset: streaming-hot
///     match: {name: "*_stream", min_files: 1000}
/// tables:
///   lake.orders: {preset: standard, options: {table_budget_bytes: 107374182400}}
/// pauses:
///   - tables: "lake.legacy_*"
///     reason: migration to format v3
///     until: 2027-01-15
/// budgets: {fleet: 2TiB, table: 200GiB, chunk: 16GiB}
/// prices: {storage_usd_per_gb_month: 0.021}
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyFile {
    /// Format version: 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u32>,
    /// The preset of tables no rule matches (`default`, built in, when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_preset: Option<String>,
    /// Named daily windows, for presets to refer to.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub windows: BTreeMap<String, WindowSpec>,
    /// Named presets.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub presets: BTreeMap<String, Preset>,
    /// Assignment rules, in order: the first that matches a table gives its preset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
    /// Per-table overrides, keyed by identifier (`lake.orders`, `"my.ns".t`): they beat rules.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tables: BTreeMap<String, TableOverride>,
    /// Pauses: tables left alone, with a reason, for a time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pauses: Vec<Pause>,
    /// Hard caps no preset or adaptive budget goes above.
    #[serde(default, skip_serializing_if = "Budgets::is_empty")]
    pub budgets: Budgets,
    /// The price model: fields of [`crate::grade::CostModel`] (S3 Standard list prices when absent).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub prices: Map<String, Value>,
    /// How long a table and operation wait after failing several times in a row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Backoff>,
}

/// Backing off after consecutive failures: once an operation has failed `after_failures`
/// times in a row on a table, it waits `delay` after its last failure, doubling with every
/// further failure up to `max_delay`. A success ends the streak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Backoff {
    /// Failures in a row before the first wait (3).
    #[serde(default = "Backoff::default_after")]
    pub after_failures: u32,
    /// The first wait (1h).
    #[serde(default = "Backoff::default_delay")]
    pub delay: Duration,
    /// The longest wait (1d).
    #[serde(default = "Backoff::default_max")]
    pub max_delay: Duration,
}

impl Backoff {
    fn default_after() -> u32 {
        3
    }
    fn default_delay() -> Duration {
        Duration(3_600_000)
    }
    fn default_max() -> Duration {
        Duration(86_400_000)
    }

    /// The wait after `failures` failures in a row; `None` below the threshold.
    pub fn wait_ms(&self, failures: u32) -> Option<i64> {
        let extra = failures.checked_sub(self.after_failures.max(1))?;
        let doubled = self
            .delay
            .0
            .saturating_mul(1_i64.checked_shl(extra.min(40)).unwrap_or(i64::MAX));
        Some(doubled.min(self.max_delay.0.max(self.delay.0)))
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            after_failures: Self::default_after(),
            delay: Self::default_delay(),
            max_delay: Self::default_max(),
        }
    }
}

/// A daily window in UTC: `[start_hour, end_hour)`, wrapping past midnight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowSpec {
    /// First hour (0–23).
    pub start_hour: u8,
    /// Hour it closes (0–24).
    pub end_hour: u8,
}

impl From<WindowSpec> for Window {
    fn from(w: WindowSpec) -> Window {
        Window {
            start_hour: w.start_hour,
            end_hour: w.end_hour,
        }
    }
}

/// A window: the name of one in `windows`, or the hours themselves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum WindowRef {
    /// A window of the file's `windows`.
    Named(String),
    /// Hours.
    Hours(WindowSpec),
}

/// What a preset's tables get: which operations, where, how often, when.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preset {
    /// For people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The operations (all seven when absent); each still runs only when a finding calls for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operations: Option<Vec<Operation>>,
    /// Where the work runs.
    #[serde(default)]
    pub destination: DestinationKind,
    /// Cadence: an operation runs again on a table once this long has passed since it last
    /// succeeded there (every run when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<Duration>,
    /// Only inside this daily window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowRef>,
    /// Leave partitions written to within this long alone (native compaction; see
    /// [`crate::compact::CompactOptions::quiet_period_ms`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiet_period: Option<Duration>,
    /// Planning options: fields of [`crate::plan::PlanOptions`] other than `operations`,
    /// `window` and `cooldowns_ms` (which the fields above set).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub options: Map<String, Value>,
}

/// An assignment rule: tables it matches get its preset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Its name, shown in every resolved policy it gave.
    pub name: String,
    /// The preset it gives.
    pub preset: String,
    /// What a table must be for the rule to match; every given condition must hold (an empty
    /// `match` matches every table).
    #[serde(rename = "match", default)]
    pub select: Selector,
}

/// Conditions on a table, evaluated against its stored scan and grade.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Selector {
    /// The namespace (`lake`, `lake.raw`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<Pattern>,
    /// The table's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<Pattern>,
    /// The whole identifier (`lake.orders`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<Pattern>,
    /// Live data bytes at least.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_bytes: Option<ByteSize>,
    /// Live data bytes at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<ByteSize>,
    /// Live data files at least.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_files: Option<u64>,
    /// Live data files at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_files: Option<u64>,
    /// Share of small data files at least (0–1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_small_file_ratio: Option<f64>,
    /// Share of small data files at most (0–1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_small_file_ratio: Option<f64>,
    /// The grade is one of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grades: Option<Vec<Grade>>,
    /// The format version is one of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format_versions: Option<Vec<u8>>,
    /// Table properties with these values (`"*"`: set to anything).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, String>,
    /// At least one of these findings is present (check codes, as `cryo grade` shows them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<String>,
}

/// A per-table override.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableOverride {
    /// The table's preset, whatever the rules say (the rules' or the default when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// Planning options over the preset's.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub options: Map<String, Value>,
}

/// Tables left alone for a while, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pause {
    /// Which tables: a pattern over the whole identifier (`lake.legacy_*`).
    pub tables: Pattern,
    /// Why: shown wherever the pause keeps work from running.
    pub reason: String,
    /// From when (now when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Instant>,
    /// Until when (for good when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Instant>,
}

impl Pause {
    /// Whether the pause holds at `now_ms`.
    pub fn active(&self, now_ms: i64) -> bool {
        self.from.is_none_or(|f| f.0 <= now_ms) && self.until.is_none_or(|u| now_ms < u.0)
    }
}

/// Hard caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    /// Bytes rewritten across the fleet in one run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<ByteSize>,
    /// Bytes rewritten in one table in one run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<ByteSize>,
    /// Bytes one chunk may rewrite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk: Option<ByteSize>,
}

impl Budgets {
    fn is_empty(&self) -> bool {
        *self == Budgets::default()
    }
}

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// A field path, shown as `rules[1].match.min_bytes`.
pub(crate) fn show_path(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Seg::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
        }
    }
    out
}

/// A YAML value with where it stood.
#[derive(Debug, Clone)]
enum Node {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<Node>>),
    Map(Vec<(Spanned<String>, Spanned<Node>)>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Node;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a YAML value")
            }
            fn visit_unit<E>(self) -> std::result::Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_none<E>(self) -> std::result::Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_some<D: serde::Deserializer<'de>>(
                self,
                d: D,
            ) -> std::result::Result<Node, D::Error> {
                Node::deserialize(d)
            }
            fn visit_bool<E>(self, v: bool) -> std::result::Result<Node, E> {
                Ok(Node::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> std::result::Result<Node, E> {
                Ok(Node::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> std::result::Result<Node, E> {
                Ok(Node::Uint(v))
            }
            fn visit_f64<E>(self, v: f64) -> std::result::Result<Node, E> {
                Ok(Node::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> std::result::Result<Node, E> {
                Ok(Node::Str(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> std::result::Result<Node, E> {
                Ok(Node::Str(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<Node, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Spanned<Node>>()? {
                    items.push(item);
                }
                Ok(Node::Seq(items))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Node, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<Spanned<String>>()? {
                    let value = map.next_value::<Spanned<Node>>()?;
                    entries.push((key, value));
                }
                Ok(Node::Map(entries))
            }
        }
        d.deserialize_any(V)
    }
}

/// Line and column (1-based; 0 when unknown).
type Loc = (u32, u32);

fn loc_of<T>(s: &Spanned<T>) -> Loc {
    lc(s.referenced.line(), s.referenced.column())
}

fn lc(line: u64, column: u64) -> Loc {
    (
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(column).unwrap_or(u32::MAX),
    )
}

/// One file read: its name, its tree, and the typed file.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    pub(crate) name: String,
    tree: Option<Spanned<Node>>,
    pub(crate) file: PolicyFile,
}

impl Source {
    /// Read one policy file's text (`name` shows in problems).
    pub(crate) fn read(name: &str, text: &str) -> std::result::Result<Source, PolicyProblem> {
        let problem = |line, column, field: String, message: String| PolicyProblem {
            file: name.to_string(),
            line,
            column,
            field,
            message,
        };
        if text.trim().is_empty() {
            return Ok(Source {
                name: name.to_string(),
                tree: None,
                file: PolicyFile::default(),
            });
        }
        // Duplicate keys reach the tree, which reports them with their field's path.
        let mut options = serde_saphyr::Options::default();
        options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::PassThrough;
        let tree: Spanned<Node> =
            serde_saphyr::from_str_with_options(text, options).map_err(|e| {
                // Without the snippet: a policy may sit beside secrets, and the location is enough.
                let e = e.without_snippet();
                let (line, column) = e.location().map_or((0, 0), |l| lc(l.line(), l.column()));
                problem(line, column, String::new(), format!("not valid YAML: {e}"))
            })?;
        let json = to_json(&tree, &mut Vec::new())
            .map_err(|(path, loc, message)| problem(loc.0, loc.1, show_path(&path), message))?;
        if json.is_null() {
            // Only comments.
            return Ok(Source {
                name: name.to_string(),
                tree: None,
                file: PolicyFile::default(),
            });
        }
        let file: PolicyFile = serde_path_to_error::deserialize(json).map_err(|e| {
            let path = path_of(e.path());
            let loc = locate(&tree, &path);
            problem(loc.0, loc.1, show_path(&path), e.into_inner().to_string())
        })?;
        Ok(Source {
            name: name.to_string(),
            tree: Some(tree),
            file,
        })
    }

    /// Where `path` stands in this file: its deepest known node.
    pub(crate) fn locate(&self, path: &[Seg]) -> Loc {
        self.tree.as_ref().map_or((0, 0), |t| locate(t, path))
    }
}

fn to_json(
    node: &Spanned<Node>,
    path: &mut Vec<Seg>,
) -> std::result::Result<Value, (Vec<Seg>, Loc, String)> {
    Ok(match &node.value {
        Node::Null => Value::Null,
        Node::Bool(b) => Value::Bool(*b),
        Node::Int(i) => Value::from(*i),
        Node::Uint(u) => Value::from(*u),
        Node::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .ok_or_else(|| {
                (
                    path.clone(),
                    loc_of(node),
                    "not a finite number".to_string(),
                )
            })?,
        Node::Str(s) => Value::String(s.clone()),
        Node::Seq(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                path.push(Seg::Index(i));
                out.push(to_json(item, path)?);
                path.pop();
            }
            Value::Array(out)
        }
        Node::Map(entries) => {
            let mut out = Map::new();
            for (key, value) in entries {
                path.push(Seg::Key(key.value.clone()));
                if out.contains_key(&key.value) {
                    return Err((path.clone(), loc_of(key), "duplicate key".to_string()));
                }
                let v = to_json(value, path)?;
                path.pop();
                out.insert(key.value.clone(), v);
            }
            Value::Object(out)
        }
    })
}

fn path_of(path: &serde_path_to_error::Path) -> Vec<Seg> {
    use serde_path_to_error::Segment;
    path.iter()
        .filter_map(|s| match s {
            Segment::Seq { index } => Some(Seg::Index(*index)),
            Segment::Map { key } => Some(Seg::Key(key.clone())),
            Segment::Enum { .. } | Segment::Unknown => None,
        })
        .collect()
}

/// The line and column of the deepest node of `path` the tree has: a key where the path names
/// one (an unknown key is found at itself), the value otherwise.
fn locate(tree: &Spanned<Node>, path: &[Seg]) -> Loc {
    let mut here = loc_of(tree);
    let mut node = tree;
    for seg in path {
        let next = match (&node.value, seg) {
            (Node::Map(entries), Seg::Key(k)) => entries
                .iter()
                .find(|(key, _)| &key.value == k)
                .map(|(key, value)| (loc_of(key), value)),
            (Node::Seq(items), Seg::Index(i)) => items.get(*i).map(|v| (loc_of(v), v)),
            _ => None,
        };
        match next {
            Some((at, child)) => {
                here = if at.0 > 0 { at } else { loc_of(child) };
                node = child;
            }
            None => break,
        }
    }
    here
}

/// Read a policy from a file, or from every `*.yaml` / `*.yml` file of a directory (in name
/// order: rules keep that order).
pub(crate) fn read_path(path: &Path) -> Result<Vec<Source>> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Error::config(format!("policy {}: {e}", path.display())))?;
    let mut files = Vec::new();
    if meta.is_dir() {
        let entries = std::fs::read_dir(path)
            .map_err(|e| Error::config(format!("policy directory {}: {e}", path.display())))?;
        for entry in entries {
            let entry = entry
                .map_err(|e| Error::config(format!("policy directory {}: {e}", path.display())))?;
            let p = entry.path();
            let yaml = p
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| e == "yaml" || e == "yml");
            if yaml && p.is_file() {
                files.push(p);
            }
        }
        files.sort();
        if files.is_empty() {
            return Err(Error::config(format!(
                "policy directory {} holds no .yaml or .yml file",
                path.display()
            )));
        }
    } else {
        files.push(path.to_path_buf());
    }
    let mut sources = Vec::new();
    let mut problems = Vec::new();
    for p in files {
        let name = p.display().to_string();
        let text = std::fs::read_to_string(&p)
            .map_err(|e| Error::config(format!("policy {name}: {e}")))?;
        match Source::read(&name, &text) {
            Ok(s) => sources.push(s),
            Err(problem) => problems.push(problem),
        }
    }
    if problems.is_empty() {
        Ok(sources)
    } else {
        Err(Error::Policy { problems })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> std::result::Result<Source, PolicyProblem> {
        Source::read("policy.yaml", text)
    }

    #[test]
    fn reads_every_section() {
        let s = read(
            "version: 1\n\
             windows:\n  night: {start_hour: 1, end_hour: 6}\n\
             presets:\n  hot:\n    every: 1h\n    window: night\n    destination: native\n    options: {min_input_files: 10}\n\
             rules:\n  - name: streams\n    preset: hot\n    match: {name: \"*_stream\", min_bytes: 1GiB, grades: [D, F]}\n\
             tables:\n  lake.orders: {preset: hot}\n\
             pauses:\n  - {tables: \"lake.*\", reason: migration, until: 2027-01-15}\n\
             budgets: {fleet: 2TiB}\n",
        )
        .unwrap();
        let f = &s.file;
        assert_eq!(f.presets["hot"].every, Some(Duration(3_600_000)));
        assert_eq!(f.rules[0].select.min_bytes, Some(ByteSize(1 << 30)));
        assert_eq!(f.rules[0].select.grades, Some(vec![Grade::D, Grade::F]));
        assert_eq!(f.budgets.fleet, Some(ByteSize(2 << 40)));
        assert_eq!(
            f.presets["hot"].window,
            Some(WindowRef::Named("night".into()))
        );
    }

    #[test]
    fn an_unknown_key_is_found_at_its_line() {
        let e = read("presets:\n  hot:\n    every: 1h\n    cadence: 2h\n").unwrap_err();
        assert_eq!(
            (e.line, e.field.as_str()),
            (4, "presets.hot.cadence"),
            "{e}"
        );
        assert!(e.message.contains("unknown field `cadence`"), "{e}");
    }

    #[test]
    fn a_wrong_type_is_found_at_its_line() {
        let e = read("rules:\n  - name: a\n    preset: p\n  - name: b\n    preset: p\n    match:\n      min_files: many\n")
            .unwrap_err();
        assert_eq!(
            (e.line, e.field.as_str()),
            (7, "rules[1].match.min_files"),
            "{e}"
        );
        let e = read("presets:\n  hot:\n    every: 3600\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (3, "presets.hot.every"), "{e}");
        assert!(e.message.contains("needs a unit"), "{e}");
        assert!(e.to_string().starts_with("policy.yaml:3:"), "{e}");
    }

    #[test]
    fn broken_yaml_and_duplicate_keys_are_located() {
        let e = read("presets:\n  hot: [\n").unwrap_err();
        assert!(e.line > 0 && e.message.contains("not valid YAML"), "{e}");
        let e = read("presets:\n  hot: {}\n  hot: {}\n").unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (3, "presets.hot"), "{e}");
        assert!(e.message.contains("duplicate key"), "{e}");
    }

    #[test]
    fn an_empty_file_is_an_empty_policy() {
        assert_eq!(
            read("\n# nothing yet\n").unwrap().file,
            PolicyFile::default()
        );
    }
}
