//! The fuzz targets' bodies, as plain functions.
//!
//! Two callers share this file: the `cargo fuzz` targets in `fuzz/fuzz_targets/` (nightly,
//! sanitizers) and cryo-core's integration test `fuzz_corpus` (stable `cargo test`), which
//! replays every committed seed and crash regression through the same functions. A body
//! panics exactly when an invariant breaks; everything else (a typed error included) returns.
//!
//! ```text
//! table_metadata  bytes ─▶ metadata.json ─▶ Catalog (static) ─▶ load ─▶ scan ─▶ list_files
//! manifest_list   host + bytes ─▶ the host's current manifest list ─▶ …same pipeline
//! manifest        host + bytes ─▶ the first manifest of the host's list ─▶ …same pipeline
//! grade_plan      arbitrary table figures + options ─▶ TableScan ─▶ grade ─▶ plan_table / plan_fleet
//! expire_readers  bytes ─▶ expiry's fast manifest-list and manifest readers ═ upstream's readers
//!                                    every successful scan above also goes ─┘
//! ```
//!
//! The byte targets run Cryo's real entry points against an in-memory lake (`fuzz/lake/`: real
//! tables written by Cryo's demo generator, PyIceberg and Spark, relocated to
//! `memory://fuzz-lake/<host>` by `fuzz/examples/make_seeds.rs`). The input is written to
//! `memory://fuzz-input/…`; the first byte of a list or manifest input picks the host table.
//! A scan only follows locations in memory (or ones that are not absolute, which Cryo refuses
//! with a typed error): a mutated `s3://` or `/dev/…` path would otherwise reach the network or
//! the local disk, so the body stops after loading in that case.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Mutex, OnceLock, PoisonError};

use arbitrary::{Arbitrary, Unstructured};
use cryo_core::catalog::TableId;
use cryo_core::grade::{CHECKS, CostModel, Grade, GradeOptions, HealthReport, Remedy, grade};
use cryo_core::io::{ObjectStorage, ObjectStorageFactory};
use cryo_core::ops::Operation;
use cryo_core::plan::{
    Chunk, ExpirePolicy, MaintenancePlan, OrphanPolicy, PlanOptions, RewriteStrategy, StepParams,
    TableControl, TablePlan, Window, plan_fleet, plan_table,
};
use cryo_core::scan::{FileStats, ScanOptions, TableScan, list_files, scan_loaded};
use cryo_core::{Catalog, CatalogConfig, Error, LoadedTable};
use serde_json::{Value, json};

/// The `now` every target grades and plans at (2027-01-01): fixed, so a seed replays the same.
pub const NOW_MS: i64 = 1_798_761_600_000;
const HOUR_MS: i64 = 3_600_000;
const LAKE_URL: &str = "memory://fuzz-lake";
const INPUT_METADATA: &str = "memory://fuzz-input/db/t/metadata/v1.metadata.json";
const INPUT_LIST: &str = "memory://fuzz-input/list.avro";
/// Named by every host's `fuzz-input-list.avro` (written by `make_seeds`).
const INPUT_MANIFEST: &str = "memory://fuzz-input/manifest.avro";

/// The in-memory lake the byte targets scan against.
pub struct Lake {
    hosts: Vec<Host>,
    runtime: tokio::runtime::Runtime,
    storage: ObjectStorage,
    /// One input at a time: the input locations are fixed (tests call bodies in parallel).
    busy: Mutex<()>,
}

struct Host {
    metadata: Value,
}

impl Lake {
    /// The lake under `dir` (`fuzz/lake`), loaded into memory once per process.
    pub fn get(dir: &Path) -> &'static Lake {
        static LAKE: OnceLock<Lake> = OnceLock::new();
        LAKE.get_or_init(|| Lake::load(dir))
    }

    fn load(dir: &Path) -> Lake {
        quiet_upstream_avro_panics();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a Tokio runtime");
        let storage = ObjectStorageFactory::new().storage(std::collections::HashMap::new());
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("fuzz lake {}: {e}", dir.display()))
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect();
        names.sort();
        let mut hosts = Vec::new();
        for name in names {
            let mut metadata = None;
            let files = std::fs::read_dir(dir.join(&name).join("metadata")).expect("host metadata");
            for f in files.filter_map(Result::ok) {
                let file = f.file_name().to_string_lossy().to_string();
                let bytes = std::fs::read(f.path()).expect("lake file");
                if file.ends_with(".metadata.json") {
                    metadata = Some(serde_json::from_slice(&bytes).expect("host metadata.json"));
                }
                let location = format!("{LAKE_URL}/{name}/metadata/{file}");
                runtime
                    .block_on(storage.write_all(&location, bytes.into()))
                    .expect("memory write");
            }
            hosts.push(Host {
                metadata: metadata.expect("every host has a metadata.json"),
            });
        }
        assert!(!hosts.is_empty(), "empty fuzz lake at {}", dir.display());
        Lake {
            hosts,
            runtime,
            storage,
            busy: Mutex::new(()),
        }
    }

    fn host(&self, selector: u8) -> &Host {
        &self.hosts[usize::from(selector) % self.hosts.len()]
    }

    fn put(&self, location: &str, bytes: &[u8]) {
        self.runtime
            .block_on(self.storage.write_all(location, bytes.to_vec().into()))
            .expect("memory write");
    }
}

/// Let panics raised inside apache-avro unwind instead of aborting.
///
/// Cryo parses manifests and lists under `catch_unwind` (apache-avro 0.21 unwraps on invalid
/// names in an Avro header: see `cryo_core::format::parse_manifest`), but
/// libfuzzer-sys installs a panic hook that aborts before any unwinding. This hook passes every
/// other panic to the previous one, so a panic Cryo does not catch still fails the target.
fn quiet_upstream_avro_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let upstream = info
            .location()
            .is_some_and(|l| l.file().contains("apache-avro-"));
        if !upstream {
            previous(info);
        }
    }));
}

/// `table_metadata`: the bytes are a table's `metadata.json`.
pub fn table_metadata(lake: &Lake, data: &[u8]) {
    let _busy = lake.busy.lock().unwrap_or_else(PoisonError::into_inner);
    scan_pipeline(lake, data);
}

/// `manifest_list`: byte 0 picks a host table; the rest is its current snapshot's manifest list.
pub fn manifest_list(lake: &Lake, data: &[u8]) {
    let Some((&selector, list)) = data.split_first() else {
        return;
    };
    let _busy = lake.busy.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(metadata) = with_current_list(&lake.host(selector).metadata, INPUT_LIST) else {
        return;
    };
    lake.put(INPUT_LIST, list);
    scan_pipeline(lake, &metadata);
}

/// `expire_readers`: the bytes are a manifest list or a manifest as expiry reads them: its fast
/// Avro readers must never panic and, where upstream's reader reads the same bytes, must read the
/// same entries (expiry deletes what it believes no snapshot references). The readers' check is
/// a hook of cryo-core's `fuzz` feature (cargo-fuzz builds set `fuzzing`).
#[cfg(any(fuzzing, feature = "fuzz"))]
pub fn expire_readers(data: &[u8]) {
    static HOOK: OnceLock<()> = OnceLock::new();
    HOOK.get_or_init(quiet_upstream_avro_panics);
    cryo_core::format::check_fast_readers(data);
}

/// `manifest`: byte 0 picks a host table; the rest is the first manifest of its current list.
pub fn manifest(lake: &Lake, data: &[u8]) {
    let Some((&selector, manifest)) = data.split_first() else {
        return;
    };
    let _busy = lake.busy.lock().unwrap_or_else(PoisonError::into_inner);
    let host = &lake.host(selector).metadata;
    let Some(dir) = host["location"].as_str() else {
        return;
    };
    let Some(metadata) = with_current_list(host, &format!("{dir}/metadata/fuzz-input-list.avro"))
    else {
        return;
    };
    lake.put(INPUT_MANIFEST, manifest);
    scan_pipeline(lake, &metadata);
}

/// The host's metadata with its current snapshot reading `list`.
fn with_current_list(metadata: &Value, list: &str) -> Option<Vec<u8>> {
    let mut md = metadata.clone();
    let current = md["current-snapshot-id"].as_i64()?;
    let snap = md["snapshots"]
        .as_array_mut()?
        .iter_mut()
        .find(|s| s["snapshot-id"].as_i64() == Some(current))?;
    snap["manifest-list"] = json!(list);
    serde_json::to_vec(&md).ok()
}

/// Whether a scan may follow this location: memory, or refused by Cryo as not absolute.
fn followable(location: &str) -> bool {
    match location.split_once("://") {
        Some((scheme, _)) => scheme.eq_ignore_ascii_case("memory"),
        None => !(location.starts_with('/') || location.starts_with("file:")),
    }
}

/// An error Cryo returns for bad input: typed, never `Internal` (which asks for a bug report),
/// and saying something.
fn assert_typed(what: &str, e: &Error) {
    assert!(
        !matches!(e, Error::Internal(_)),
        "{what}: an internal error on bad input: {e}"
    );
    assert!(!e.to_string().trim().is_empty(), "{what}: an empty error");
    if let Error::Metadata {
        table, location, ..
    } = e
    {
        assert!(
            !table.is_empty() && !location.is_empty(),
            "{what}: a metadata error must name table and file: {e}"
        );
    }
}

fn scan_pipeline(lake: &Lake, metadata: &[u8]) {
    lake.put(INPUT_METADATA, metadata);
    let Some(table) = lake.runtime.block_on(load()) else {
        return;
    };
    // Only follow what the scan would read from memory.
    let md = table.metadata.as_ref();
    if !md.snapshots().all(|s| followable(s.manifest_list())) {
        return;
    }
    if let Some(s) = md.current_snapshot()
        && let Ok(bytes) = lake
            .runtime
            .block_on(lake.storage.read_all(s.manifest_list()))
        && let Ok(list) = cryo_core::format::parse_manifest_list(&bytes, md.format_version())
        && !list.entries().iter().all(|m| followable(&m.manifest_path))
    {
        return;
    }
    let options = ScanOptions::default();
    let scan = match lake
        .runtime
        .block_on(scan_loaded(&table, "fuzz", &options, NOW_MS))
    {
        Ok(scan) => scan,
        Err(e) => return assert_typed("scan", &e),
    };
    check_scan(&scan);
    match lake.runtime.block_on(list_files(&table, &options)) {
        Ok(files) => assert_eq!(
            files.len() as u64,
            scan.manifests.live_entries,
            "list_files and the scan disagree on the live files"
        ),
        Err(e) => assert_typed("list_files", &e),
    }
    // The scanned table through the pure stages, with default and with tight budgets.
    let tight = PlanOptions {
        chunk_budget_bytes: 64 << 10,
        max_partitions_per_chunk: 2,
        table_budget_bytes: Some(256 << 10),
        small_table_bytes: 0,
        min_input_files: 1,
        ..PlanOptions::default()
    };
    for options in [PlanOptions::default(), tight] {
        check_pipeline(
            std::slice::from_ref(&scan),
            &GradeOptions::default(),
            &options,
            &BTreeMap::new(),
            NOW_MS,
        );
    }
}

async fn load() -> Option<LoadedTable> {
    let config = CatalogConfig::new("fuzz", [("metadata-location", INPUT_METADATA)]);
    let catalog = Catalog::connect(config)
        .await
        .expect("a static catalog connects");
    let id = TableId::parse("db.t").expect("an identifier");
    match catalog.load_table(&id).await {
        Ok(t) => Some(t),
        Err(e) => {
            assert_typed("load", &e);
            // What Cryo cannot parse it says so, naming the file.
            if let Error::Metadata { location, .. } = &e {
                assert_eq!(location, INPUT_METADATA, "{e}");
            }
            None
        }
    }
}

fn check_file_stats(what: &str, f: &FileStats) {
    assert!(
        f.small_count <= f.count,
        "{what}: more small files than files"
    );
    assert!(
        f.small_bytes <= f.bytes,
        "{what}: more small bytes than bytes"
    );
    assert_eq!(
        f.histogram.counts.iter().sum::<u64>(),
        f.count,
        "{what}: histogram does not count every file"
    );
    match (f.min_bytes, f.max_bytes) {
        (Some(lo), Some(hi)) => assert!(lo <= hi && f.count > 0, "{what}: min/max"),
        (None, None) => assert_eq!(f.count, 0, "{what}: files without min/max"),
        _ => panic!("{what}: one of min/max"),
    }
}

/// What a scan promises about its own figures.
fn check_scan(scan: &TableScan) {
    let mut keys = BTreeSet::new();
    let mut data = (0u64, 0u64, 0u64);
    let mut deletes = 0u64;
    for p in &scan.partitions {
        // The planner and the compactor select partitions by (spec, path).
        if !keys.insert((p.spec_id, p.path.clone())) {
            let other: Vec<_> = scan
                .partitions
                .iter()
                .filter(|o| o.spec_id == p.spec_id && o.path == p.path)
                .map(|o| &o.values)
                .collect();
            panic!(
                "two partitions of spec {} share the path `{}`: {other:?}",
                p.spec_id, p.path
            );
        }
        check_file_stats(&p.path, &p.data_files);
        for d in [
            &p.delete_files.position,
            &p.delete_files.equality,
            &p.delete_files.deletion_vectors,
        ] {
            assert!(
                d.dangling <= d.files,
                "{}: more dangling than delete files",
                p.path
            );
        }
        data.0 = data.0.saturating_add(p.data_files.count);
        data.1 = data.1.saturating_add(p.data_files.bytes);
        data.2 = data.2.saturating_add(p.data_files.small_count);
        deletes = deletes.saturating_add(p.delete_files.files());
    }
    check_file_stats("table", &scan.data_files);
    assert_eq!(
        (
            scan.data_files.count,
            scan.data_files.bytes,
            scan.data_files.small_count
        ),
        data,
        "table data figures are not the sum of its partitions"
    );
    assert_eq!(scan.delete_files.files(), deletes, "delete files");
    assert_eq!(
        scan.manifests.live_entries,
        scan.data_files.count + scan.delete_files.files(),
        "live manifest entries are not the live files"
    );
    assert_eq!(scan.snapshots.count, scan.snapshots.snapshots.len());
    assert!(
        scan.snapshots
            .snapshots
            .windows(2)
            .all(|w| w[0].timestamp_ms <= w[1].timestamp_ms),
        "snapshots not oldest first"
    );
    assert!(scan.column_stats.files_with_bounds <= scan.column_stats.files);
    let json = serde_json::to_string(scan).expect("a scan serializes");
    let back: TableScan = serde_json::from_str(&json).expect("a scan deserializes");
    assert_eq!(
        &back, scan,
        "a scan does not survive JSON (a stored scan must)"
    );
}

/// Table-wide operations: one whole-table chunk.
fn table_wide(op: Operation) -> bool {
    !matches!(
        op,
        Operation::ConvertEqualityDeletes
            | Operation::RewritePositionDeletes
            | Operation::RewriteDataFiles
    )
}

/// Grade every table, plan it alone and as a fleet, and check every promise the grader and the
/// planner document.
pub fn check_pipeline(
    scans: &[TableScan],
    grade_options: &GradeOptions,
    options: &PlanOptions,
    controls: &BTreeMap<TableId, TableControl>,
    now_ms: i64,
) {
    let mut graded = Vec::new();
    for scan in scans {
        let report = match grade(scan, grade_options, now_ms) {
            Ok(r) => r,
            Err(e) => {
                assert!(
                    matches!(e, Error::Validation { .. }) && grade_options.validate().is_err(),
                    "grading failed on valid options: {e}"
                );
                return;
            }
        };
        check_report(scan, &report, grade_options);
        graded.push((scan.clone(), report));
    }
    let valid = options.validate().is_ok();
    let default_control = TableControl::default();
    for (scan, report) in &graded {
        let control = controls.get(&scan.table).unwrap_or(&default_control);
        match plan_table(scan, report, options, control, now_ms) {
            Ok(tp) => {
                assert!(valid, "planned with invalid options");
                check_table_plan(scan, report, &tp, options, control, now_ms);
            }
            Err(e) => {
                assert!(!valid, "planning failed on valid options: {e}");
                assert!(matches!(e, Error::Validation { .. }), "{e}");
            }
        }
    }
    let plan = match plan_fleet("fuzz", &graded, options, controls, now_ms) {
        Ok(p) => p,
        Err(e) => {
            assert!(!valid, "fleet planning failed on valid options: {e}");
            return;
        }
    };
    check_fleet_plan(&graded, &plan, options, controls, now_ms);
}

fn check_report(scan: &TableScan, r: &HealthReport, options: &GradeOptions) {
    assert!(r.score <= 100);
    let lost: u32 = r.findings.iter().map(|f| f.points).sum();
    assert_eq!(
        r.score,
        100u32.saturating_sub(lost),
        "score is not 100 minus the deductions"
    );
    assert_eq!(r.grade, Grade::from_score(r.score));
    let mut codes = BTreeSet::new();
    for f in &r.findings {
        let check = CHECKS
            .iter()
            .find(|c| c.code == f.code)
            .unwrap_or_else(|| panic!("finding with an unknown code `{}`", f.code));
        assert!(
            !options.skip.contains(&f.code),
            "skipped check {} ran",
            f.code
        );
        assert!(codes.insert(f.code.clone()), "{} reported twice", f.code);
        assert_eq!(f.points, f.severity.points(), "{}: points", f.code);
        assert!(
            f.measured.is_finite() && f.threshold.is_finite(),
            "{}: measured {} / threshold {} (a stored report must survive JSON)",
            f.code,
            f.measured,
            f.threshold
        );
        assert!(
            !f.reason.trim().is_empty() && !f.unit.is_empty(),
            "{}: no reason",
            f.code
        );
        // The deduction names the operation its check documents (or, for repartitioning and
        // property-only fixes, none).
        match f.remedy.operation() {
            Some(op) => assert!(
                check.remedy.contains(op.as_str()),
                "{}: remedy {} but the check documents `{}`",
                f.code,
                f.remedy,
                check.remedy
            ),
            None => assert!(
                Operation::ORDER
                    .iter()
                    .all(|op| !check.remedy.contains(op.as_str())),
                "{}: no operation, but the check documents `{}`",
                f.code,
                check.remedy
            ),
        }
        if let Remedy::Repartition { suggestion } = &f.remedy {
            assert!(
                !suggestion.trim().is_empty(),
                "{}: empty suggestion",
                f.code
            );
        }
    }
    for p in &r.passed {
        assert!(
            codes.insert(p.clone()),
            "{p} both passed and failed, or passed twice"
        );
    }
    let expected: BTreeSet<String> = CHECKS
        .iter()
        .map(|c| c.code.to_string())
        .filter(|c| !options.skip.contains(c))
        .collect();
    assert_eq!(codes, expected, "not every check ran exactly once");
    assert!(
        r.findings
            .windows(2)
            .all(|w| (w[1].severity, &w[0].code) <= (w[0].severity, &w[1].code)),
        "findings not worst first"
    );
    let c = &r.cost;
    for usd in [
        c.storage_usd_month,
        c.request_usd_month,
        c.excess_request_usd_month,
    ]
    .into_iter()
    .chain(c.savings.iter().map(|s| s.usd_month))
    {
        assert!(usd.is_finite() && usd >= 0.0, "cost {usd}");
    }
    assert_eq!(
        c.live_bytes,
        scan.data_files
            .bytes
            .saturating_add(scan.delete_files.bytes())
    );
    let json = serde_json::to_string(r).expect("a report serializes");
    let back: HealthReport = serde_json::from_str(&json).expect("a report deserializes");
    assert_eq!(&back, r, "a report does not survive JSON");
}

fn step_cost_ms(input_bytes: u64, options: &PlanOptions) -> i64 {
    let secs = input_bytes / options.throughput_bytes_per_sec.max(1);
    i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX)
}

/// Bytes of the partition-scoped (rewriting) steps.
fn rewritten(tp: &TablePlan) -> u64 {
    tp.steps
        .iter()
        .filter(|s| !table_wide(s.operation))
        .map(|s| {
            s.chunks
                .iter()
                .map(|c| c.input_bytes)
                .fold(0u64, u64::saturating_add)
        })
        .fold(0, u64::saturating_add)
}

#[allow(clippy::too_many_lines)] // one list of the planner's promises
fn check_table_plan(
    scan: &TableScan,
    report: &HealthReport,
    tp: &TablePlan,
    options: &PlanOptions,
    control: &TableControl,
    now_ms: i64,
) {
    let ops: Vec<Operation> = tp.steps.iter().map(|s| s.operation).collect();
    let mut sorted = ops.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(ops, sorted, "operations once each, in the fixed order");

    let partitions: BTreeMap<(i32, &str), &cryo_core::scan::PartitionStats> = scan
        .partitions
        .iter()
        .map(|p| ((p.spec_id, p.path.as_str()), p))
        .collect();
    // No partition planned twice: not in two chunks, not in two rewriting steps.
    let mut planned = BTreeSet::new();
    for step in &tp.steps {
        let op = step.operation;
        assert_eq!(step.params.operation(), op, "params of another operation");
        assert!(!step.chunks.is_empty(), "{op}: a step without work");
        assert!(!step.because.is_empty(), "{op}: planned for no reason");
        assert!(step.saving_usd_month.is_finite());
        if let Some(allowed) = &options.operations {
            assert!(allowed.contains(&op), "{op} was not requested");
        }
        if let Some(last) = control.last_runs.get(&op) {
            let cooldown = options.cooldowns_ms.get(&op).copied().unwrap_or(0);
            assert!(
                now_ms.saturating_sub(*last) >= cooldown,
                "{op} planned inside its cooldown"
            );
        }
        for (i, c) in step.chunks.iter().enumerate() {
            assert_eq!(c.index as usize, i, "{op}: chunk indexes");
            check_chunk(scan, op, c, options, &partitions, &mut planned);
        }
        if table_wide(op) {
            assert!(
                step.chunks.len() == 1 && step.chunks[0].whole_table,
                "{op} acts on the whole table: one whole-table chunk"
            );
        }
        if op == Operation::ConvertEqualityDeletes
            && let [c] = step.chunks.as_slice()
            && c.whole_table
        {
            // Rendered as rewrite_data_files with rewrite-all on the whole table: it reads
            // every data and delete file, and the budgets must count all of it.
            assert_eq!(
                c.input_bytes,
                scan.data_files
                    .bytes
                    .saturating_add(scan.delete_files.bytes()),
                "a whole-table convert_equality_deletes reads the whole table"
            );
        }
        match &step.params {
            StepParams::RewriteDataFiles { .. } => {
                for c in &step.chunks {
                    if let Err(e) = cryo_core::compact::CompactOptions::from_step(step, c) {
                        panic!("the native compactor refuses the planner's own step: {e}");
                    }
                }
            }
            StepParams::ExpireSnapshots {
                older_than_ms,
                retain_last,
                retention_ms,
            } => {
                assert!(*retain_last >= 1, "expiry keeps at least one snapshot");
                assert!(
                    *retention_ms >= options.expire.min_retention_ms,
                    "retention floor"
                );
                assert_eq!(*older_than_ms, now_ms - retention_ms);
            }
            StepParams::RemoveOrphanFiles {
                older_than_ms,
                retention_ms,
                dry_run,
            } => {
                assert!(options.orphans.enabled, "orphan removal is opt-in");
                assert_eq!(*dry_run, options.orphans.dry_run);
                assert!(*retention_ms >= 24 * HOUR_MS);
                assert_eq!(*older_than_ms, now_ms - retention_ms);
            }
            _ => {}
        }
    }
    if let Some(budget) = options.table_budget_bytes {
        let used = rewritten(tp);
        assert!(
            used <= budget,
            "rewrites {used} bytes over the table budget {budget}"
        );
    }
    if let Some(w) = options.window
        && !in_window(w, now_ms)
    {
        assert!(tp.steps.is_empty(), "planned outside the off-peak window");
    }
    if let Some(deadline) = control.deadline_ms
        && !tp.steps.is_empty()
    {
        let total = tp
            .steps
            .iter()
            .map(|s| step_cost_ms(s.input_bytes(), options))
            .fold(0i64, i64::saturating_add);
        assert!(
            now_ms.saturating_add(total) <= deadline,
            "steps past the deadline"
        );
    }
    // Every operation a finding calls for is planned, or skipped with a reason.
    for op in report.operations() {
        assert!(
            ops.contains(&op)
                || tp
                    .skipped
                    .iter()
                    .any(|s| s.operation == op && !s.reason.trim().is_empty()),
            "{op} called for but neither planned nor skipped: window {:?}, deadline {:?}, skipped {:?}",
            options.window,
            control.deadline_ms,
            tp.skipped
        );
    }
    for s in &tp.skipped {
        assert!(
            !s.reason.trim().is_empty(),
            "{} skipped without a reason",
            s.operation
        );
    }
}

fn check_chunk(
    scan: &TableScan,
    op: Operation,
    c: &Chunk,
    options: &PlanOptions,
    partitions: &BTreeMap<(i32, &str), &cryo_core::scan::PartitionStats>,
    planned: &mut BTreeSet<(i32, String)>,
) {
    if c.whole_table {
        assert!(
            c.partitions.is_empty(),
            "{op}: a whole-table chunk lists partitions"
        );
        if !table_wide(op) {
            assert!(
                c.input_bytes
                    <= scan
                        .data_files
                        .bytes
                        .saturating_add(scan.delete_files.bytes()),
                "{op}: a whole-table chunk reads more than the table"
            );
        }
        return;
    }
    assert!(
        !table_wide(op),
        "{op}: a partitioned chunk of a table-wide operation"
    );
    assert!(
        !c.partitions.is_empty(),
        "{op}: a partitioned chunk without partitions"
    );
    assert!(
        c.partitions.len() <= options.max_partitions_per_chunk,
        "{op}: {} partitions in a chunk, cap {}",
        c.partitions.len(),
        options.max_partitions_per_chunk
    );
    let bytes = c
        .partitions
        .iter()
        .map(|p| p.bytes)
        .fold(0u64, u64::saturating_add);
    let files = c
        .partitions
        .iter()
        .map(|p| p.files)
        .fold(0u64, u64::saturating_add);
    assert_eq!(
        c.input_bytes, bytes,
        "{op}: chunk bytes are not its partitions'"
    );
    assert_eq!(
        c.input_files, files,
        "{op}: chunk files are not its partitions'"
    );
    // Only a partition larger than the budget may exceed it, and it runs alone.
    if c.partitions.len() > 1 {
        assert!(
            c.input_bytes <= options.chunk_budget_bytes,
            "{op}: a chunk of {} partitions reads {} bytes, budget {}",
            c.partitions.len(),
            c.input_bytes,
            options.chunk_budget_bytes
        );
    }
    for t in &c.partitions {
        let p = partitions
            .get(&(t.spec_id, t.path.as_str()))
            .unwrap_or_else(|| panic!("{op}: planned partition {} is not in the scan", t.path));
        assert!(!t.predicate.is_empty(), "{op}: {} has no predicate", t.path);
        assert!(
            t.bytes <= p.rewrite_bytes() && t.files <= p.data_files.count + p.delete_files.files(),
            "{op}: {} plans more than the partition holds",
            t.path
        );
        assert!(t.score.is_finite());
        assert!(
            planned.insert((t.spec_id, t.path.clone())),
            "{op}: partition {} planned twice",
            t.path
        );
    }
}

fn in_window(w: Window, now_ms: i64) -> bool {
    let h = now_ms.rem_euclid(24 * HOUR_MS) / HOUR_MS;
    let (s, e) = (i64::from(w.start_hour), i64::from(w.end_hour));
    if s < e {
        h >= s && h < e
    } else {
        h >= s || h < e
    }
}

fn check_fleet_plan(
    graded: &[(TableScan, HealthReport)],
    plan: &MaintenancePlan,
    options: &PlanOptions,
    controls: &BTreeMap<TableId, TableControl>,
    now_ms: i64,
) {
    let mut used = 0u64;
    let mut seen = BTreeSet::new();
    for tp in &plan.tables {
        assert!(seen.insert(tp.table.clone()), "{} planned twice", tp.table);
        let (scan, report) = graded
            .iter()
            .find(|(s, _)| s.table == tp.table)
            .expect("a planned table was scanned");
        let control = controls.get(&tp.table).cloned().unwrap_or_default();
        assert!(!control.paused, "{} is paused", tp.table);
        check_table_plan(scan, report, tp, options, &control, now_ms);
        used = used.saturating_add(rewritten(tp));
    }
    for s in &plan.skipped_tables {
        assert!(
            seen.insert(s.table.clone()),
            "{} both planned and skipped",
            s.table
        );
    }
    if let Some(budget) = options.fleet_budget_bytes {
        assert!(
            used <= budget,
            "the fleet rewrites {used} bytes over its budget {budget}"
        );
    }
    assert!(
        plan.tables.windows(2).all(|w| w[0].score <= w[1].score),
        "tables not worst first"
    );
    let again = plan_fleet("fuzz", graded, options, controls, now_ms).expect("planned once");
    assert_eq!(
        again.fingerprint, plan.fingerprint,
        "planning is not deterministic"
    );
    let back = MaintenancePlan::from_json(&plan.to_json().expect("plan to JSON"))
        .expect("a plan reads back");
    assert_eq!(&back, plan, "a plan does not survive JSON");
}

// --- grade_plan: arbitrary table figures ------------------------------------------------------

/// A byte size: mostly log-scale (bytes to petabytes), sometimes any value a manifest can hold
/// (up to `i64::MAX` per file), sometimes zero.
#[derive(Debug, Clone, Copy)]
pub struct Size(pub u64);

impl<'a> Arbitrary<'a> for Size {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(Size(match u8::arbitrary(u)? {
            0..=231 => {
                let shift = u.int_in_range(0..=50)?;
                u64::from(u16::arbitrary(u)?) << shift
            }
            232..=247 => u64::arbitrary(u)? & (i64::MAX as u64),
            _ => 0,
        }))
    }
}

/// Partition values as a manifest may hold them (of the field's type or not).
#[derive(Debug, Clone, Arbitrary)]
pub enum ValueInput {
    /// Integer-like.
    Int(i64),
    /// Boolean.
    Bool(bool),
    /// Floating point.
    Float(f64),
    /// String-like.
    Str(String),
    /// Null.
    Null,
}

/// One partition field.
#[derive(Debug, Clone, Arbitrary)]
pub struct FieldInput {
    transform: u8,
    width: u8,
    source_type: u8,
    dropped: bool,
}

/// A delete-file kind in one partition.
#[derive(Debug, Clone, Arbitrary)]
pub struct DeleteInput {
    files: u16,
    bytes_per_file: Size,
    records_per_file: u32,
    dangling: u16,
}

/// One partition.
#[derive(Debug, Clone, Arbitrary)]
pub struct PartitionInput {
    spec: u8,
    values: Vec<ValueInput>,
    small_files: u16,
    small_size: Size,
    large_files: u16,
    large_size: Size,
    records_per_file: u32,
    position: DeleteInput,
    equality: DeleteInput,
    vectors: DeleteInput,
    modified_hours_ago: Option<u16>,
    min_sequence: Option<u16>,
}

/// One snapshot.
#[derive(Debug, Clone, Arbitrary)]
pub struct SnapshotInput {
    hours_ago: u32,
    operation: u8,
    manifest_count: Option<u16>,
    list_bytes: Option<Size>,
    added_files: Option<u32>,
    removed_bytes: Option<Size>,
}

/// One table.
#[derive(Debug, Clone, Arbitrary)]
pub struct TableInput {
    format_version: u8,
    target: Size,
    small_ratio_pct: u8,
    manifest_target: Size,
    max_snapshot_age_hours: u32,
    min_snapshots_to_keep: u8,
    previous_versions_max: u8,
    delete_after_commit: bool,
    codec: u8,
    file_format: u8,
    merge_on_read: bool,
    metrics_none: bool,
    specs: Vec<Vec<FieldInput>>,
    default_spec: u8,
    partitions: Vec<PartitionInput>,
    snapshots: Vec<SnapshotInput>,
    refs: Vec<(u8, bool)>,
    manifests: (u16, u16, Size, u16, u32),
    metadata_versions: u16,
    statistics_files: u8,
    leaf_columns: u8,
    schema_count: u8,
    files_with_bounds_pct: u8,
    columns_with_bounds: u8,
    paused: bool,
    last_runs_hours_ago: [Option<u16>; 7],
    deadline_minutes: Option<i16>,
}

/// Planning options.
#[derive(Debug, Clone, Arbitrary)]
pub struct OptionsInput {
    operations: Option<u8>,
    chunk_budget: Size,
    max_partitions: u8,
    table_budget: Option<Size>,
    fleet_budget: Option<Size>,
    small_table: Size,
    strategy: u8,
    min_input_files: u8,
    delete_file_threshold: u8,
    deleted_row_ratio_pct: u8,
    min_position_delete_files: u8,
    retention_hours: Option<u32>,
    retain_last: Option<u8>,
    min_retention_hours: u16,
    orphans: bool,
    orphan_days: u8,
    orphan_dry_run: bool,
    cooldown_hours: [Option<u16>; 7],
    window: Option<(u8, u8)>,
    throughput: Size,
}

/// The `grade_plan` input: up to three tables, grading and planning options, the hour.
#[derive(Debug, Clone, Arbitrary)]
pub struct GradePlanInput {
    tables: Vec<TableInput>,
    options: OptionsInput,
    skip_checks: Vec<u8>,
    storage_usd_per_gb_month_cents: u16,
    scans_per_month: u16,
    hour_offset: u16,
}

const TRANSFORMS: [&str; 8] = [
    "identity", "year", "month", "day", "hour", "bucket", "truncate", "void",
];
const TYPES: [&str; 11] = [
    "string",
    "int",
    "long",
    "date",
    "timestamp",
    "timestamptz",
    "boolean",
    "double",
    "decimal(10,2)",
    "uuid",
    "timestamp_ns",
];

fn pick<'a>(options: &[&'a str], i: u8) -> &'a str {
    options[usize::from(i) % options.len()]
}

fn file_stats(
    small: u64,
    small_size: u64,
    large: u64,
    large_size: u64,
    records: u64,
    threshold: u64,
) -> FileStats {
    let mut f = FileStats::default();
    for (n, size) in [(small, small_size), (large, large_size)] {
        if n == 0 {
            continue;
        }
        f.count += n;
        f.bytes = f.bytes.saturating_add(n.saturating_mul(size));
        f.records = f.records.saturating_add(n.saturating_mul(records));
        if size < threshold {
            f.small_count += n;
            f.small_bytes = f.small_bytes.saturating_add(n.saturating_mul(size));
        }
        f.min_bytes = Some(f.min_bytes.map_or(size, |m| m.min(size)));
        f.max_bytes = Some(f.max_bytes.map_or(size, |m| m.max(size)));
        let bucket = cryo_core::scan::SizeHistogram::BOUNDS
            .iter()
            .position(|b| size < *b)
            .unwrap_or(8);
        f.histogram.counts[bucket] += n;
    }
    f
}

fn merge_stats(into: &mut FileStats, f: &FileStats) {
    into.count += f.count;
    into.bytes = into.bytes.saturating_add(f.bytes);
    into.records = into.records.saturating_add(f.records);
    into.small_count += f.small_count;
    into.small_bytes = into.small_bytes.saturating_add(f.small_bytes);
    into.min_bytes = match (into.min_bytes, f.min_bytes) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    into.max_bytes = match (into.max_bytes, f.max_bytes) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    for (a, b) in into.histogram.counts.iter_mut().zip(f.histogram.counts) {
        *a += b;
    }
}

fn value_json(v: &ValueInput) -> Value {
    match v {
        ValueInput::Int(i) => json!(i),
        ValueInput::Bool(b) => json!(b),
        // JSON has no NaN or infinities: a scan never holds them (Cryo's scan reads them from
        // Avro, where they exist, so they are mapped to null here as serde would).
        ValueInput::Float(f) if f.is_finite() => json!(f),
        ValueInput::Float(_) | ValueInput::Null => Value::Null,
        ValueInput::Str(s) => json!(s),
    }
}

#[allow(clippy::too_many_lines)] // one TableScan, field by field
fn table_scan(i: usize, t: &TableInput, now_ms: i64) -> TableScan {
    let target = t.target.0.clamp(1, i64::MAX as u64);
    let ratio = f64::from(t.small_ratio_pct.clamp(1, 100)) / 100.0;
    let threshold = ((target as f64 * ratio) as u64).min(target); // as the scan computes it
    let spec_count = t.specs.len().clamp(1, 4);
    let specs: Vec<Value> = (0..spec_count)
        .map(|s| {
            let fields: Vec<Value> = t
                .specs
                .get(s)
                .map(|f| f.iter().take(3).collect::<Vec<_>>())
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .map(|(k, f)| {
                    let transform = match pick(&TRANSFORMS, f.transform) {
                        w @ ("bucket" | "truncate") => format!("{w}[{}]", f.width.max(1)),
                        other => other.to_string(),
                    };
                    json!({
                        "field_id": 1000 + k,
                        "name": format!("p{k}"),
                        "source_id": k + 1,
                        "source_column": (!f.dropped).then(|| format!("c{k}")),
                        "source_type": (!f.dropped).then(|| pick(&TYPES, f.source_type)),
                        "transform": transform,
                    })
                })
                .collect();
            json!({"spec_id": s, "fields": fields})
        })
        .collect();
    let field_names: Vec<Vec<String>> = specs
        .iter()
        .map(|s| {
            s["fields"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|f| f["name"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .collect();

    let mut data = FileStats::default();
    let mut deletes = json!({});
    let mut kinds = [(0u64, 0u64, 0u64, 0u64); 3];
    let mut partitions = Vec::new();
    for (k, p) in t.partitions.iter().take(48).enumerate() {
        let spec = usize::from(p.spec) % spec_count;
        let values: Vec<Value> = field_names[spec]
            .iter()
            .enumerate()
            .map(|(j, name)| {
                let v = p.values.get(j).map_or(Value::Null, value_json);
                json!({"field": name, "value": v, "human": v.to_string()})
            })
            .collect();
        let records = u64::from(p.records_per_file);
        let fs = file_stats(
            u64::from(p.small_files),
            p.small_size.0,
            u64::from(p.large_files),
            p.large_size.0,
            records,
            threshold,
        );
        merge_stats(&mut data, &fs);
        let mut del = serde_json::Map::new();
        for (n, (name, d)) in [
            ("position", &p.position),
            ("equality", &p.equality),
            ("deletion_vectors", &p.vectors),
        ]
        .into_iter()
        .enumerate()
        {
            let files = u64::from(d.files);
            let bytes = files.saturating_mul(d.bytes_per_file.0);
            let recs = files.saturating_mul(u64::from(d.records_per_file));
            let dangling = u64::from(d.dangling).min(files);
            let acc = &mut kinds[n];
            *acc = (
                acc.0 + files,
                acc.1.saturating_add(bytes),
                acc.2.saturating_add(recs),
                acc.3 + dangling,
            );
            del.insert(
                name.to_string(),
                json!({"files": files, "bytes": bytes, "records": recs, "dangling": dangling}),
            );
        }
        partitions.push(json!({
            "spec_id": spec,
            // Unique per (spec, partition), as the scan keys them.
            "path": format!("k={k}"),
            "values": values,
            "data_files": fs,
            "delete_files": del,
            "last_modified_ms": p.modified_hours_ago.map(|h| now_ms - i64::from(h) * HOUR_MS),
            "min_data_sequence_number": p.min_sequence,
        }));
    }
    for (n, name) in ["position", "equality", "deletion_vectors"]
        .into_iter()
        .enumerate()
    {
        let (files, bytes, records, dangling) = kinds[n];
        deletes[name] =
            json!({"files": files, "bytes": bytes, "records": records, "dangling": dangling});
    }

    let mut snaps: Vec<(i64, &SnapshotInput)> = t
        .snapshots
        .iter()
        .take(64)
        .map(|s| (now_ms - i64::from(s.hours_ago) * HOUR_MS, s))
        .collect();
    snaps.sort_by_key(|(ts, _)| *ts);
    let snapshots: Vec<Value> = snaps
        .iter()
        .enumerate()
        .map(|(k, (ts, s))| {
            json!({
                "snapshot_id": k + 1,
                "parent_id": (k > 0).then_some(k),
                "sequence_number": k + 1,
                "timestamp_ms": ts,
                "operation": pick(&["append", "overwrite", "replace", "delete"], s.operation),
                "manifest_count": s.manifest_count,
                "manifest_list_bytes": s.list_bytes.map(|b| b.0),
                "added_data_files": s.added_files,
                "added_records": s.added_files.map(|f| u64::from(f) * 100),
                "removed_files_bytes": s.removed_bytes.map(|b| b.0),
            })
        })
        .collect();
    let refs: Vec<Value> = t
        .refs
        .iter()
        .take(4)
        .enumerate()
        .filter(|_| !snapshots.is_empty())
        .map(|(k, (snap, tag))| {
            json!({
                "name": if k == 0 { "main".to_string() } else { format!("r{k}") },
                "kind": if *tag { "tag" } else { "branch" },
                "snapshot_id": usize::from(*snap) % snapshots.len() + 1,
                "max_ref_age_ms": null, "max_snapshot_age_ms": null, "min_snapshots_to_keep": null,
            })
        })
        .collect();
    let (m_count, m_small, m_bytes, m_empty, m_deleted) = t.manifests;
    let delete_bytes = kinds.iter().map(|k| k.1).fold(0u64, u64::saturating_add);
    let codec = [None, Some("zstd"), Some("gzip"), Some("snappy")][usize::from(t.codec) % 4];
    let write_mode = if t.merge_on_read {
        "merge-on-read"
    } else {
        "copy-on-write"
    };
    let scan = json!({
        "catalog": "fuzz",
        "table": {"namespace": ["db"], "name": format!("t{i}")},
        "metadata_location": format!("memory://fuzz/db/t{i}/metadata/v1.metadata.json"),
        "location": format!("memory://fuzz/db/t{i}"),
        "table_uuid": format!("00000000-0000-4000-8000-00000000000{i}"),
        "format_version": t.format_version % 3 + 1,
        "scanned_at_ms": now_ms,
        "last_updated_ms": now_ms - HOUR_MS,
        "current_snapshot_id": snapshots.last().map(|s| s["snapshot_id"].clone()),
        "properties": {},
        "write": {
            "target_file_size_bytes": target,
            "small_file_threshold_bytes": threshold,
            "parquet_codec": codec,
            "file_format": pick(&["parquet", "avro", "orc"], t.file_format),
            "delete_mode": write_mode, "update_mode": write_mode, "merge_mode": write_mode,
            "manifest_target_size_bytes": t.manifest_target.0.max(1),
            "max_snapshot_age_ms": i64::from(t.max_snapshot_age_hours) * HOUR_MS,
            "min_snapshots_to_keep": t.min_snapshots_to_keep,
            "metadata_previous_versions_max": t.previous_versions_max,
            "metadata_delete_after_commit": t.delete_after_commit,
            "metrics_default": t.metrics_none.then_some("none"),
        },
        "schema": {
            "schema_id": 0,
            "schema_count": usize::from(t.schema_count).max(1),
            "columns": [],
            "leaf_column_count": t.leaf_columns,
        },
        "partitioning": {"default_spec_id": usize::from(t.default_spec) % spec_count, "specs": specs},
        "sort_order": {"order_id": 0, "fields": []},
        "snapshots": {
            "count": snapshots.len(),
            "oldest_ms": snapshots.first().map(|s| s["timestamp_ms"].clone()),
            "newest_ms": snapshots.last().map(|s| s["timestamp_ms"].clone()),
            "refs": refs,
            "snapshots": snapshots,
        },
        "manifests": {
            "count": m_count, "data_manifests": m_count, "delete_manifests": 0,
            "total_bytes": m_bytes.0, "small_count": m_small.min(m_count),
            "no_live_entries": m_empty.min(m_count), "live_entries": data.count + kinds.iter().map(|k| k.0).sum::<u64>(),
            "deleted_entries": m_deleted, "mean_per_snapshot": f64::from(m_count),
            "distinct_across_snapshots": m_count, "distinct_bytes_across_snapshots": m_bytes.0,
            "manifest_list_bytes": 0,
        },
        "data_files": data,
        "delete_files": deletes,
        "metadata_files": {
            "previous_versions": t.metadata_versions,
            "current_bytes": null,
            "statistics_files": t.statistics_files,
            "partition_statistics_files": 0,
        },
        "column_stats": {
            "files": data.count,
            "files_with_bounds": data.count * u64::from(t.files_with_bounds_pct.min(100)) / 100,
            "leaf_columns": t.leaf_columns,
            "columns_with_bounds": t.columns_with_bounds.min(t.leaf_columns),
        },
        "partitions": partitions,
        "io": {"reads": [], "writes": [], "lists": 0},
        "duration_ms": 0,
    });
    let _ = delete_bytes;
    serde_json::from_value(scan).expect("the harness builds a valid TableScan")
}

fn plan_options(o: &OptionsInput) -> PlanOptions {
    let hours = |h: u32| i64::from(h) * HOUR_MS;
    let strategy = match o.strategy % 4 {
        0 | 1 => RewriteStrategy::BinPack,
        2 => RewriteStrategy::Sort { columns: vec![] },
        _ => RewriteStrategy::ZOrder {
            columns: vec!["c0".into(), "c1".into()],
        },
    };
    let mut cooldowns = BTreeMap::new();
    for (op, h) in Operation::ORDER.iter().zip(o.cooldown_hours) {
        if let Some(h) = h {
            cooldowns.insert(*op, hours(u32::from(h)));
        }
    }
    PlanOptions {
        operations: o.operations.map(|mask| {
            Operation::ORDER
                .iter()
                .enumerate()
                .filter(|(k, _)| mask & (1 << k) != 0)
                .map(|(_, op)| *op)
                .collect()
        }),
        chunk_budget_bytes: o.chunk_budget.0,
        max_partitions_per_chunk: usize::from(o.max_partitions),
        table_budget_bytes: o.table_budget.map(|s| s.0),
        fleet_budget_bytes: o.fleet_budget.map(|s| s.0),
        small_table_bytes: o.small_table.0,
        strategy,
        min_input_files: u32::from(o.min_input_files),
        delete_file_threshold: u32::from(o.delete_file_threshold),
        deleted_row_ratio: f64::from(o.deleted_row_ratio_pct) / 100.0,
        min_position_delete_files: u32::from(o.min_position_delete_files),
        expire: ExpirePolicy {
            retention_ms: o.retention_hours.map(hours),
            retain_last: o.retain_last.map(u32::from),
            min_retention_ms: hours(u32::from(o.min_retention_hours)),
        },
        orphans: OrphanPolicy {
            enabled: o.orphans,
            retention_ms: i64::from(o.orphan_days) * 24 * HOUR_MS,
            dry_run: o.orphan_dry_run,
        },
        cooldowns_ms: cooldowns,
        window: o.window.map(|(s, e)| Window {
            start_hour: s % 25,
            end_hour: e % 26,
        }),
        throughput_bytes_per_sec: o.throughput.0,
    }
}

/// `grade_plan`: structured input → synthetic scans → grade → plan, with every invariant.
pub fn grade_plan(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(input) = GradePlanInput::arbitrary(&mut u) else {
        return;
    };
    let now_ms = NOW_MS + i64::from(input.hour_offset) * HOUR_MS;
    let scans: Vec<TableScan> = input
        .tables
        .iter()
        .take(3)
        .enumerate()
        .map(|(i, t)| table_scan(i, t, now_ms))
        .collect();
    let mut controls = BTreeMap::new();
    for (scan, t) in scans.iter().zip(&input.tables) {
        let mut last_runs = BTreeMap::new();
        for (op, h) in Operation::ORDER.iter().zip(t.last_runs_hours_ago) {
            if let Some(h) = h {
                last_runs.insert(*op, now_ms - i64::from(h) * HOUR_MS);
            }
        }
        controls.insert(
            scan.table.clone(),
            TableControl {
                paused: t.paused,
                pause_reason: t.paused.then(|| "fuzz".to_string()),
                last_runs,
                deadline_ms: t.deadline_minutes.map(|m| now_ms + i64::from(m) * 60_000),
            },
        );
    }
    let skip = input
        .skip_checks
        .iter()
        .take(4)
        .map(|k| {
            CHECKS
                .get(usize::from(*k) % (CHECKS.len() + 1))
                .map_or_else(|| "no_such_check".to_string(), |c| c.code.to_string())
        })
        .collect();
    let grade_options = GradeOptions {
        skip,
        cost: CostModel {
            storage_usd_per_gb_month: f64::from(input.storage_usd_per_gb_month_cents) / 100.0,
            scans_per_month: f64::from(input.scans_per_month),
            ..CostModel::default()
        },
    };
    check_pipeline(
        &scans,
        &grade_options,
        &plan_options(&input.options),
        &controls,
        now_ms,
    );
}
