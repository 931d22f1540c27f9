//! One Cryo operation on a table of the scale benchmark (`benches/scale/run.py` runs it once per
//! operation, in its own process, to measure that operation's wall time, CPU and peak memory).
//!
//! `cargo bench -p cryo-core --bench scale -- --dir DIR --table NS.NAME --op OP`
//!
//! - `scan`: load + scan + grade (what `cryo scan` and a fleet scan do per table);
//! - `files`: load + the live-file listing as Arrow batches (`scan::file_batches`);
//! - `plan`: load + scan + grade + plan;
//! - `expire-dry`: snapshot expiry down to the last snapshot, as a dry run;
//! - `expire`: the same expiry, committed, its files deleted (destructive: `run.py` restores
//!   the table after it);
//! - `orphans`: orphan listing (a dry run of orphan removal) of files older than now;
//! - `fleet`: a fleet scan of every table of `--table`'s namespace, then a plan of the
//!   fleet; reports both times, the tables scanned and the errors.
//!
//! The catalog is the generator's: `DIR/catalog.db` (sqlite, catalog `fixtures`) and
//! `DIR/warehouse`; `--prop KEY=VALUE` adds catalog properties (an S3 endpoint and keys for a
//! table on S3). Prints one JSON line, with the I/O counters of a scan.

use std::collections::BTreeMap;
use std::time::Instant;

use cryo_core::clock::{Clock, SystemClock};
use cryo_core::grade::{GradeOptions, grade};
use cryo_core::io::PathKind;
use cryo_core::maintain::{
    ExpireOptions, ExpireSnapshots, RemoveOrphanFiles, RemoveOrphanFilesOptions,
};
use cryo_core::plan::{PlanOptions, TableControl, plan_scans, plan_table};
use cryo_core::scan::{FleetScanOptions, ScanOptions, file_batches, scan_fleet, scan_loaded};
use cryo_core::{Catalog, CatalogConfig, TableId};
use futures::StreamExt;

#[allow(clippy::print_stdout, clippy::print_stderr)] // a benchmark reports on stdout
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let (Some(dir), Some(table), Some(op)) = (arg("--dir"), arg("--table"), arg("--op")) else {
        eprintln!(
            "usage: scale --dir DIR --table NS.NAME --op scan|files|plan|expire-dry|expire|orphans|fleet"
        );
        std::process::exit(2);
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let out = rt.block_on(async {
        let config = catalog_config(&dir, &args);
        let catalog = Catalog::connect(config).await.expect("catalog");
        let id = TableId::parse(&table).expect("table id");
        let started = Instant::now();
        let loaded = if op == "fleet" {
            None
        } else {
            Some(catalog.load_table(&id).await.expect("load"))
        };
        let loaded = || loaded.as_ref().expect("a table was loaded");
        let now = SystemClock.now_ms();
        let mut out = BTreeMap::new();
        match op.as_str() {
            "scan" | "plan" => {
                let defaults = ScanOptions::default();
                let options = ScanOptions {
                    max_snapshot_lists: arg("--lists").map(|n| n.parse().expect("--lists N")),
                    concurrency: arg("--concurrency").map_or(defaults.concurrency, |n| {
                        n.parse().expect("--concurrency N")
                    }),
                    cache_dir: arg("--cache").map(std::path::PathBuf::from),
                    ..defaults
                };
                let scan = scan_loaded(loaded(), catalog.name(), &options, now)
                    .await
                    .expect("scan");
                let report = grade(&scan, &GradeOptions::default(), now).expect("grade");
                out.insert("data_files", serde_json::json!(scan.data_files.count));
                out.insert("reads", serde_json::json!(scan.io.total_reads()));
                out.insert(
                    "max_in_flight_reads",
                    serde_json::json!(scan.io.max_in_flight_reads),
                );
                out.insert("snapshots", serde_json::json!(scan.snapshots.count));
                out.insert("grade", serde_json::json!(report.grade));
                if op == "plan" {
                    let plan = plan_table(
                        &scan,
                        &report,
                        &PlanOptions::default(),
                        &TableControl::default(),
                        now,
                    )
                    .expect("plan");
                    out.insert("steps", serde_json::json!(plan.steps.len()));
                }
            }
            "files" => {
                // The listing as bindings read it: Arrow batches, one per manifest, streamed.
                let mut batches = file_batches(loaded(), &ScanOptions::default())
                    .await
                    .expect("files");
                let mut rows = 0;
                while let Some(batch) = batches.next().await {
                    rows += batch.expect("batch").num_rows();
                }
                out.insert("files", serde_json::json!(rows));
            }
            "expire-dry" | "expire" => {
                expire(&catalog, &id, now, op == "expire-dry", &mut out).await;
            }
            "orphans" => orphans(&catalog, &id, now, &mut out).await,
            "fleet" => fleet(&catalog, &id, started, &mut out).await,
            other => panic!("unknown --op {other}"),
        }
        out.insert("op", serde_json::json!(op));
        out.insert(
            "seconds",
            serde_json::json!(started.elapsed().as_secs_f64()),
        );
        out
    });
    println!("{}", serde_json::to_string(&out).expect("json"));
}

/// Expiry down to the last snapshot (`dry_run` or committed), with the manifest lists and
/// manifests it read.
async fn expire(
    catalog: &Catalog,
    id: &TableId,
    now: i64,
    dry_run: bool,
    out: &mut BTreeMap<&'static str, serde_json::Value>,
) {
    let before = catalog.io_counters().snapshot();
    let o = ExpireSnapshots::new(catalog, id.clone())
        .with_options(ExpireOptions {
            older_than_ms: Some(now),
            retain_last: Some(1),
            dry_run,
            ..ExpireOptions::default()
        })
        .execute()
        .await
        .expect("expire");
    let io = catalog.io_counters().snapshot();
    let reads = |kind| io.reads_of(kind) - before.reads_of(kind);
    out.insert("expired", serde_json::json!(o.expired_snapshots()));
    out.insert("files", serde_json::json!(o.files.len()));
    out.insert("data_files", serde_json::json!(o.deleted.data.files));
    out.insert(
        "list_reads",
        serde_json::json!(reads(PathKind::ManifestList)),
    );
    out.insert(
        "manifest_reads",
        serde_json::json!(reads(PathKind::Manifest)),
    );
}

/// The orphan listing: orphan removal as a dry run, every unreferenced file older than now.
async fn orphans(
    catalog: &Catalog,
    id: &TableId,
    now: i64,
    out: &mut BTreeMap<&'static str, serde_json::Value>,
) {
    let o = RemoveOrphanFiles::new(catalog, id.clone())
        .with_options(RemoveOrphanFilesOptions {
            older_than_ms: Some(now),
            allow_short_retention: true,
            ..RemoveOrphanFilesOptions::default()
        })
        .execute()
        .await
        .expect("orphans");
    out.insert("listed", serde_json::json!(o.listed_files));
    out.insert("referenced", serde_json::json!(o.referenced_files));
    out.insert("orphans", serde_json::json!(o.orphans.len()));
    out.insert(
        "lists",
        serde_json::json!(catalog.io_counters().snapshot().lists),
    );
}

/// A fleet scan of every table of `table`'s namespace, then a plan of the fleet.
async fn fleet(
    catalog: &Catalog,
    table: &TableId,
    started: Instant,
    out: &mut BTreeMap<&'static str, serde_json::Value>,
) {
    let options = FleetScanOptions {
        namespaces: Some(vec![table.namespace.clone()]),
        ..FleetScanOptions::default()
    };
    let fleet = scan_fleet(catalog, &options, &SystemClock)
        .await
        .expect("fleet scan");
    let scanned = started.elapsed().as_secs_f64();
    let planning = Instant::now();
    let plan = plan_scans(
        catalog.name(),
        &fleet.tables,
        &GradeOptions::default(),
        &PlanOptions::default(),
        &BTreeMap::new(),
    )
    .expect("plan");
    out.insert("scan_seconds", serde_json::json!(scanned));
    out.insert(
        "plan_seconds",
        serde_json::json!(planning.elapsed().as_secs_f64()),
    );
    out.insert("tables", serde_json::json!(fleet.tables.len()));
    out.insert(
        "data_files",
        serde_json::json!(fleet.tables.iter().map(|t| t.data_files.count).sum::<u64>()),
    );
    out.insert(
        "errors",
        serde_json::json!(
            fleet
                .errors
                .iter()
                .map(|e| serde_json::to_value(e).expect("error entry"))
                .collect::<Vec<_>>()
        ),
    );
    out.insert(
        "steps",
        serde_json::json!(plan.tables.iter().map(|t| t.steps.len()).sum::<usize>()),
    );
}

/// The generator's catalog in `dir`, with `--prop KEY=VALUE` (repeated) properties added (an S3
/// endpoint and its keys).
fn catalog_config(dir: &str, args: &[String]) -> CatalogConfig {
    let props = args
        .iter()
        .zip(args.iter().skip(1))
        .filter(|(flag, _)| *flag == "--prop")
        .map(|(_, kv)| {
            let (k, v) = kv.split_once('=').expect("--prop KEY=VALUE");
            (k.to_string(), v.to_string())
        });
    CatalogConfig::new(
        "fixtures",
        [
            ("uri".to_string(), format!("sqlite:///{dir}/catalog.db")),
            ("warehouse".to_string(), format!("file://{dir}/warehouse")),
        ]
        .into_iter()
        .chain(props),
    )
}
