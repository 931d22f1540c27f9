//! Scan + grade timing on a fixture table, to set beside PyIceberg's `inspect.files()` /
//! `inspect.partitions()` on the same table (`benches/compare_scan.sh` runs both).
//!
//! `cargo bench -p cryo-core --bench scan -- [TABLE] [RUNS]` (fixtures from `make_fixtures.py`).

use std::path::PathBuf;
use std::time::Instant;

use cryo_core::clock::SystemClock;
use cryo_core::grade::{GradeOptions, grade};
use cryo_core::scan::{ScanOptions, list_files, scan_loaded};
use cryo_core::{Catalog, CatalogConfig, TableId};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[allow(clippy::print_stdout)] // a benchmark reports on stdout
fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let table = args
        .first()
        .cloned()
        .unwrap_or_else(|| "pyiceberg.events".to_string());
    let runs: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(5);
    let dir = std::env::var("CRYO_FIXTURES").map_or_else(
        |_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/cryo-fixtures"),
        PathBuf::from,
    );
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let config = CatalogConfig::new(
            "fixtures",
            [
                ("uri", format!("sqlite:///{}/catalog.db", dir.display())),
                ("warehouse", format!("file://{}/warehouse", dir.display())),
            ],
        );
        let catalog = Catalog::connect(config)
            .await
            .expect("fixture catalog (run make_fixtures.py)");
        let id = TableId::parse(&table).expect("table id");
        let (mut load, mut scan_grade, mut files) = (Vec::new(), Vec::new(), Vec::new());
        let mut shape = (0, 0, 0);
        for _ in 0..runs {
            let t0 = Instant::now();
            let loaded = catalog.load_table(&id).await.expect("load");
            load.push(t0.elapsed().as_secs_f64());
            let t1 = Instant::now();
            let scan = scan_loaded(
                &loaded,
                catalog.name(),
                &ScanOptions::default(),
                SystemClock.now_ms_value(),
            )
            .await
            .expect("scan");
            let report = grade(&scan, &GradeOptions::default(), scan.scanned_at_ms).expect("grade");
            scan_grade.push(t0.elapsed().as_secs_f64());
            let _ = t1;
            shape = (
                scan.data_files.count,
                scan.snapshots.count,
                report.findings.len(),
            );
            let t2 = Instant::now();
            let listed = list_files(&loaded, &ScanOptions::default())
                .await
                .expect("files");
            files.push(t2.elapsed().as_secs_f64());
            assert_eq!(
                listed.iter().filter(|f| f.content == "data").count() as u64,
                shape.0
            );
        }
        println!(
            "{}",
            serde_json::json!({
                "table": table,
                "runs": runs,
                "data_files": shape.0,
                "snapshots": shape.1,
                "findings": shape.2,
                "load_median_s": median(load),
                "load_scan_grade_median_s": median(scan_grade),
                "list_files_median_s": median(files),
            })
        );
    });
}

trait NowValue {
    fn now_ms_value(&self) -> i64;
}

impl NowValue for SystemClock {
    fn now_ms_value(&self) -> i64 {
        use cryo_core::clock::Clock;
        self.now_ms()
    }
}
