//! Cryo against a real Trino on loopback (`scripts/services.sh` starts Trino 483 with the Iceberg
//! connector on a sqlite JDBC catalog that Cryo opens too): the HTTP client (rows, typed errors,
//! statement timeout and cancellation seen in `system.runtime.queries`), the load probe, and a
//! fleet run whose steps Trino executes, on a table Trino wrote. The same Trino's HTTPS port asks
//! for a password (file authenticator; certificate from a private CA): the client authenticates
//! there, and a wrong password is a typed error that shows no secret, nor do receipts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cryo_core::clock::SystemClock;
use cryo_core::exec::trino::{TrinoClient, TrinoConfig, TrinoEngine};
use cryo_core::exec::{FleetOptions, FleetRun, MaintenanceOptions, SqlEngine, TableStatus};
use cryo_core::grade::{GradeOptions, grade};
use cryo_core::ops::Operation;
use cryo_core::plan::{PlanOptions, plan_fleet};
use cryo_core::receipt::ReceiptStatus;
use cryo_core::render::{TrinoDialect, TrinoOptions};
use cryo_core::scan::{ScanOptions, scan_table};
use cryo_core::{Catalog, CatalogConfig, Error, TableId};

use crate::common::service_env;

struct Trino {
    url: String,
    version: u32,
    lake: CatalogConfig,
}

fn trino() -> Trino {
    let url = service_env("TRINO_URL");
    let version = service_env("TRINO_VERSION").parse().unwrap();
    let lake = CatalogConfig::new(
        "lake",
        [
            ("type".to_string(), "sql".to_string()),
            ("uri".to_string(), service_env("TRINO_LAKE_URI")),
            ("warehouse".to_string(), service_env("TRINO_LAKE_WAREHOUSE")),
        ],
    );
    Trino { url, version, lake }
}

/// services.sh's HTTPS port: PASSWORD authentication, a certificate signed by its own CA.
struct Https {
    url: String,
    user: String,
    password: String,
    ca: String,
}

fn https() -> Https {
    Https {
        url: service_env("TRINO_HTTPS_URL"),
        user: service_env("TRINO_AUTH_USER"),
        password: service_env("TRINO_AUTH_PASSWORD"),
        ca: service_env("TRINO_CA_CERT"),
    }
}

fn https_config(h: &Https, password: &str) -> TrinoConfig {
    TrinoConfig {
        password: Some(password.into()),
        ca_cert_path: Some(h.ca.clone()),
        catalog: Some("lake".into()),
        ..TrinoConfig::new(&h.url, &h.user)
    }
}

fn client(t: &Trino, source: &str) -> TrinoClient {
    TrinoClient::new(TrinoConfig {
        source: source.into(),
        catalog: Some("lake".into()),
        ..TrinoConfig::new(&t.url, "cryo-it")
    })
    .unwrap()
}

/// A query that runs for minutes on a single node (10^12 rows from nothing).
const SLOW: &str = "SELECT count(*) FROM UNNEST(sequence(1, 10000)) a(x) CROSS JOIN UNNEST(sequence(1, 10000)) b(y) CROSS JOIN UNNEST(sequence(1, 10000)) c(z)";

async fn query_state(t: &Trino, query_id: &str) -> (String, Option<String>) {
    let r = client(t, "cryo-it-check")
        .execute(&format!(
            "SELECT state, error_code FROM system.runtime.queries WHERE query_id = '{query_id}'"
        ))
        .await
        .unwrap();
    let row = &r.rows[0];
    (
        row[0].as_str().unwrap().to_string(),
        row[1].as_str().map(ToString::to_string),
    )
}

async fn wait_for_end(t: &Trino, query_id: &str) -> (String, Option<String>) {
    for _ in 0..100 {
        let s = query_state(t, query_id).await;
        if s.0 == "FAILED" || s.0 == "FINISHED" {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    query_state(t, query_id).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn the_client_runs_statements_reports_errors_and_cancels() {
    let t = trino();
    let c = client(&t, "cryo-it");
    let r = c.execute("SELECT 1 AS one, 'x''y' AS s").await.unwrap();
    assert_eq!(r.columns, vec!["one", "s"]);
    assert_eq!(
        r.rows,
        vec![vec![serde_json::json!(1), serde_json::json!("x'y")]]
    );
    assert!(!r.query_id.is_empty());

    // A failing statement is a typed error with Trino's error name and query id.
    let err = c
        .execute("SELECT * FROM lake.no_such_schema_cryo.t")
        .await
        .unwrap_err();
    match &err {
        Error::Engine {
            engine,
            code,
            query_id,
            retryable,
            ..
        } => {
            assert_eq!(engine, &format!("trino {}", t.url));
            assert_eq!(code.as_deref(), Some("SCHEMA_NOT_FOUND"), "{err}");
            assert!(query_id.is_some());
            assert!(!retryable);
        }
        other => panic!("{other:?}"),
    }

    // The statement timeout cancels the query on the server.
    let timed = TrinoClient::new(TrinoConfig {
        statement_timeout_ms: 1_500,
        ..c.config().clone()
    })
    .unwrap();
    let err = timed.execute(SLOW).await.unwrap_err();
    let Error::Engine {
        query_id: Some(q), ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(err.to_string().contains("statement timeout"), "{err}");
    let (state, code) = wait_for_end(&t, q).await;
    assert_eq!(
        (state.as_str(), code.as_deref()),
        ("FAILED", Some("USER_CANCELED"))
    );

    // Dropping the future (a cancelled task) cancels the query too.
    let slow = client(&t, "cryo-it-dropped");
    let task = tokio::spawn(async move { slow.execute(SLOW).await });
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    task.abort();
    let _ = task.await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = c
        .execute("SELECT query_id FROM system.runtime.queries WHERE source = 'cryo-it-dropped'")
        .await
        .unwrap();
    let q = r.rows[0][0].as_str().unwrap().to_string();
    let (state, code) = wait_for_end(&t, &q).await;
    assert_eq!(
        (state.as_str(), code.as_deref()),
        ("FAILED", Some("USER_CANCELED"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn the_probe_reads_system_runtime_queries_and_knows_cryos_statements() {
    let t = trino();
    let engine = TrinoEngine::new(
        TrinoDialect::new(TrinoOptions::new("lake", t.version)).unwrap(),
        vec![TrinoConfig {
            source: "cryo-probe-it".into(),
            ..TrinoConfig::new(&t.url, "cryo-it")
        }],
    )
    .unwrap();
    let coordinator = engine.coordinators()[0].clone();
    // A statement carrying the engine's own source is Cryo's maintenance, whatever it is.
    let mine = TrinoClient::new(TrinoConfig {
        statement_timeout_ms: 8_000,
        source: "cryo-probe-it".into(),
        ..TrinoConfig::new(&t.url, "cryo-it")
    })
    .unwrap();
    let other = TrinoClient::new(TrinoConfig {
        statement_timeout_ms: 8_000,
        source: "dashboard".into(),
        ..TrinoConfig::new(&t.url, "analyst")
    })
    .unwrap();
    let cryos = tokio::spawn(async move { mine.execute(SLOW).await });
    let dashboards = tokio::spawn(async move { other.execute(SLOW).await });
    let mut seen = None;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let load = engine.probe("trino", 0).await.unwrap();
        let c = load.coordinators[0].clone();
        assert_eq!(c.coordinator, coordinator);
        if c.running_queries + c.queued_queries >= 2 && c.maintenance_running >= 1 {
            seen = Some(c);
            break;
        }
    }
    let c = seen.expect("the probe never saw both queries");
    // Other tests may share this Trino: at least ours, and never the dashboard's SELECT, which
    // would make it 2 on a quiet server.
    assert!(
        c.maintenance_running < c.running_queries + c.queued_queries,
        "a plain SELECT is not maintenance: {c:?}"
    );
    cryos.abort();
    dashboards.abort();
    // An unreachable coordinator is a probe failure with a reason, never a load.
    let gone = TrinoEngine::new(
        TrinoDialect::new(TrinoOptions::new("lake", t.version)).unwrap(),
        vec![TrinoConfig {
            max_retries: 0,
            ..TrinoConfig::new("http://127.0.0.1:9", "cryo-it")
        }],
    )
    .unwrap();
    let f = gone.probe("trino", 0).await.unwrap_err();
    assert!(f.reason.contains("could not be probed"), "{f:?}");
}

/// `lake.<prefix>_<uuid>.events`, partitioned, written by `inserts` INSERTs (one file per
/// partition each) and a merge-on-read DELETE: work for a compaction. Returns (schema, table).
async fn small_files_table(c: &TrinoClient, prefix: &str, inserts: i64) -> (String, String) {
    let schema = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
    let table = format!("lake.{schema}.events");
    c.execute(&format!("CREATE SCHEMA lake.{schema}"))
        .await
        .unwrap();
    c.execute(&format!(
        "CREATE TABLE {table} (id bigint, part varchar, v double) WITH (format_version = 2, partitioning = ARRAY['part'])"
    ))
    .await
    .unwrap();
    for i in 0..inserts {
        c.execute(&format!(
            "INSERT INTO {table} SELECT x, CASE WHEN x % 2 = 0 THEN 'a' ELSE 'b' END, x * 0.5 FROM UNNEST(sequence({}, {})) t(x)",
            i * 1000,
            i * 1000 + 999
        ))
        .await
        .unwrap();
    }
    c.execute(&format!("DELETE FROM {table} WHERE id % 7 = 0"))
        .await
        .unwrap();
    (schema, table)
}

async fn scan_grade_plan(
    catalog: &Catalog,
    id: &TableId,
) -> (
    cryo_core::scan::TableScan,
    cryo_core::grade::HealthReport,
    cryo_core::plan::MaintenancePlan,
) {
    let scan = scan_table(catalog, id, &ScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    let report = grade(&scan, &GradeOptions::default(), scan.scanned_at_ms).unwrap();
    let plan = plan_fleet(
        "lake",
        &[(scan.clone(), report.clone())],
        &PlanOptions::default(),
        &BTreeMap::new(),
        scan.scanned_at_ms,
    )
    .unwrap();
    (scan, report, plan)
}

/// `count(*)` and order-independent checksums of every column, as Trino reads the table.
async fn trino_fingerprint(c: &TrinoClient, table: &str) -> Vec<serde_json::Value> {
    c.execute(&format!(
        "SELECT count(*), checksum(id), checksum(part), checksum(v) FROM {table}"
    ))
    .await
    .unwrap()
    .rows
    .remove(0)
}

#[allow(clippy::too_many_lines)] // one scenario: Trino writes, Cryo plans, Trino runs, both check
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn a_fleet_run_on_trino_compacts_a_table_trino_wrote() {
    let t = trino();
    let c = client(&t, "cryo-it-setup");
    let (schema, table) = small_files_table(&c, "fleet", 12).await;
    let before_rows = trino_fingerprint(&c, &table).await;

    let catalog = Catalog::connect(t.lake.clone()).await.unwrap();
    let id = TableId::parse(&format!("{schema}.events")).unwrap();
    let (scan, report, plan) = scan_grade_plan(&catalog, &id).await;
    assert!(
        plan.tables[0]
            .steps
            .iter()
            .any(|s| s.operation == Operation::RewriteDataFiles),
        "{plan:#?}"
    );
    let engine = Arc::new(
        TrinoEngine::new(
            TrinoDialect::new(TrinoOptions {
                // services.sh sets the catalog's floors to 1 day (Trino's default is 7).
                expire_snapshots_min_retention_ms: 86_400_000,
                remove_orphan_files_min_retention_ms: 86_400_000,
                ..TrinoOptions::new("lake", t.version)
            })
            .unwrap(),
            vec![TrinoConfig::new(&t.url, "cryo-it")],
        )
        .unwrap(),
    );
    let out = FleetRun::new(&catalog, &plan)
        .with_engine("trino", engine)
        .with_options(FleetOptions {
            default_destination: "trino".into(),
            ..FleetOptions::default()
        })
        .dry_run(false)
        .execute()
        .await
        .unwrap();
    assert_eq!(out.count(ReceiptStatus::Failed), 0, "{:#?}", out.receipts);
    assert_eq!(
        out.tables[0].status,
        TableStatus::Done,
        "{:#?}",
        out.receipts
    );
    let compaction = out
        .receipts
        .iter()
        .find(|r| {
            r.operation == Some(Operation::RewriteDataFiles) && r.status == ReceiptStatus::Succeeded
        })
        .unwrap_or_else(|| panic!("{:#?}", out.receipts));
    assert_eq!(compaction.engine, "trino");
    assert!(
        compaction.details["statements"][0]
            .as_str()
            .unwrap()
            .contains("EXECUTE optimize")
    );
    assert!(
        !compaction.details["query_ids"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(compaction.after.unwrap().files < compaction.before.unwrap().files);

    // Same rows, fewer files, better grade.
    assert_eq!(trino_fingerprint(&c, &table).await, before_rows);
    let after = scan_table(&catalog, &id, &ScanOptions::default(), &SystemClock)
        .await
        .unwrap();
    let report_after = grade(&after, &GradeOptions::default(), after.scanned_at_ms).unwrap();
    assert!(
        after.data_files.count < scan.data_files.count,
        "{} -> {}",
        scan.data_files.count,
        after.data_files.count
    );
    assert!(
        report_after.score > report.score,
        "{} -> {}",
        report.score,
        report_after.score
    );
    c.execute(&format!("DROP TABLE {table}")).await.unwrap();
    c.execute(&format!("DROP SCHEMA lake.{schema}"))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn the_client_authenticates_with_a_password_over_https() {
    let h = https();
    // The right password: the statement runs as that user.
    let c = TrinoClient::new(https_config(&h, &h.password)).unwrap();
    let r = c.execute("SELECT current_user AS me").await.unwrap();
    assert_eq!(r.rows, vec![vec![serde_json::json!(h.user)]]);
    let seen = c
        .execute(&format!(
            "SELECT user, source FROM system.runtime.queries WHERE query_id = '{}'",
            r.query_id
        ))
        .await
        .unwrap();
    assert_eq!(
        seen.rows,
        vec![vec![serde_json::json!(h.user), serde_json::json!("cryo")]]
    );
    // The probe authenticates too.
    let engine = TrinoEngine::new(
        TrinoDialect::new(TrinoOptions::new("lake", 483)).unwrap(),
        vec![https_config(&h, &h.password)],
    )
    .unwrap();
    engine.probe("trino", 0).await.unwrap();

    // A wrong password: HTTP 401, a typed error that is not retried and names no secret.
    let planted = "planted-Wrong-Password-5d1c";
    let wrong = TrinoClient::new(TrinoConfig {
        max_retries: 3,
        retry_backoff_ms: 2_000,
        ..https_config(&h, planted)
    })
    .unwrap();
    let started = Instant::now();
    let err = wrong.execute("SELECT 1").await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a 401 was retried"
    );
    match &err {
        Error::Engine {
            retryable: false,
            query_id: None,
            message,
            ..
        } => assert!(
            message.contains("HTTP 401")
                && message.contains(&format!("refused the credentials of user `{}`", h.user)),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
    // No password at all on the password port: said as such.
    let anonymous = TrinoClient::new(TrinoConfig {
        password: None,
        ..https_config(&h, "")
    })
    .unwrap();
    let err_anonymous = anonymous.execute("SELECT 1").await.unwrap_err();
    assert!(
        err_anonymous
            .to_string()
            .contains("has no password or access token"),
        "{err_anonymous}"
    );
    // Without the private CA the certificate is refused, at once and for what it is.
    let untrusting = TrinoClient::new(TrinoConfig {
        ca_cert_path: None,
        max_retries: 3,
        retry_backoff_ms: 2_000,
        ..https_config(&h, &h.password)
    })
    .unwrap();
    let started = Instant::now();
    let err_tls = untrusting.execute("SELECT 1").await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a TLS failure was retried: {err_tls:?}"
    );
    assert!(
        matches!(
            err_tls,
            Error::Engine {
                retryable: false,
                ..
            }
        ) && err_tls.to_string().contains("TLS handshake failed")
            && err_tls.to_string().contains("ca_cert_path"),
        "{err_tls}"
    );

    let shown = [
        err.to_string(),
        format!("{err:?}"),
        err_tls.to_string(),
        format!("{err_tls:?}"),
        format!("{wrong:?}"),
        format!("{c:?}"),
        format!("{engine:?}"),
        format!("{:?}", wrong.config()),
    ];
    for s in &shown {
        assert!(!s.contains(planted) && !s.contains(&h.password), "{s}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
async fn receipts_of_a_fleet_run_over_https_hold_no_password() {
    let (t, h) = (trino(), https());
    let c = TrinoClient::new(https_config(&h, &h.password)).unwrap();
    let (schema, table) = small_files_table(&c, "fleet_auth", 6).await;
    let catalog = Catalog::connect(t.lake.clone()).await.unwrap();
    let id = TableId::parse(&format!("{schema}.events")).unwrap();
    let (_, _, plan) = scan_grade_plan(&catalog, &id).await;
    let planted = "planted-Wrong-Password-9e2a";
    // A destination that cannot be probed defers its steps until the run's deadline.
    let run = |password: String, deadline_ms: Option<i64>| {
        let engine = TrinoEngine::new(
            TrinoDialect::new(TrinoOptions {
                expire_snapshots_min_retention_ms: 86_400_000,
                remove_orphan_files_min_retention_ms: 86_400_000,
                ..TrinoOptions::new("lake", t.version)
            })
            .unwrap(),
            vec![TrinoConfig {
                max_retries: 0,
                ..https_config(&h, &password)
            }],
        )
        .unwrap();
        FleetRun::new(&catalog, &plan)
            .with_engine("trino", Arc::new(engine))
            .with_options(FleetOptions {
                default_destination: "trino".into(),
                run: MaintenanceOptions {
                    deadline_ms,
                    ..MaintenanceOptions::default()
                },
                min_retry_ms: 500,
                ..FleetOptions::default()
            })
            .dry_run(false)
            .execute()
    };
    // A wrong password first: nothing runs, and the receipts say why without the secret.
    let now = chrono::Utc::now().timestamp_millis();
    let started = Instant::now();
    let refused = run(planted.to_string(), Some(now + 3_000)).await.unwrap();
    // It ends at the deadline, not at the governor's next retry (its backoff is a minute).
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(refused.count(ReceiptStatus::Succeeded), 0, "{refused:#?}");
    let refused_json = serde_json::to_string(&refused).unwrap();
    assert!(refused_json.contains("HTTP 401"), "{refused_json}");
    // Then the right one: the steps run as the authenticated user.
    let done = run(h.password.clone(), None).await.unwrap();
    assert_eq!(done.count(ReceiptStatus::Failed), 0, "{:#?}", done.receipts);
    assert!(
        done.receipts
            .iter()
            .any(|r| r.operation == Some(Operation::RewriteDataFiles)
                && r.status == ReceiptStatus::Succeeded),
        "{:#?}",
        done.receipts
    );
    for shown in [
        refused_json,
        format!("{refused:?}"),
        serde_json::to_string(&done).unwrap(),
        format!("{done:?}"),
    ] {
        assert!(!shown.contains(planted) && !shown.contains(&h.password));
    }
    c.execute(&format!("DROP TABLE {table}")).await.unwrap();
    c.execute(&format!("DROP SCHEMA lake.{schema}"))
        .await
        .unwrap();
}
