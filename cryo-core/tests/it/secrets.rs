//! Secrets planted in every credential-bearing configuration never reach receipts, errors
//! (`Display`, `Debug`, the whole `source()` chain), `Debug` of configs, catalogs and clients,
//! or tracing logs (captured by a subscriber that records every event and span field, at every
//! level, from every crate).
//!
//! Failing paths use a hostile server on loopback that answers every request with 401/403 and
//! echoes the whole request back in its error body (head and body: `Authorization`, the S3
//! `Credential=<access key id>`, `x-amz-security-token`, the OAuth2 form with the client
//! secret), as real S3 does in part (`SignatureDoesNotMatch` carries the access key id and the
//! canonical request): wrong credentials at an S3 store, at a REST catalog (bearer token,
//! OAuth2 client credentials, extra headers, a password in the URI) and at a Trino coordinator
//! (access token). A working local catalog carries the same secrets through a scan, plan,
//! maintenance run with a receipt log, a broken table and orphan clean-up.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use cryo_core::exec::MaintenanceRun;
use cryo_core::exec::trino::{TrinoClient, TrinoConfig};
use cryo_core::maintain::RemoveOrphanFiles;
use cryo_core::receipt::JsonLinesLog;
use cryo_core::{Catalog, CatalogConfig, Namespace, TableId};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

use crate::replace::{append, schema, sql_catalog};

/// One distinct secret per credential-bearing setting.
const SECRETS: [(&str, &str); 13] = [
    ("token", "tok-PLANTED-a1"),
    ("credential", "cred-PLANTED-b2"),
    ("uri password", "uripw-PLANTED-c3"),
    ("header.x-api-key", "hdr-PLANTED-d4"),
    ("s3.access-key-id", "AKIAPLANTEDE5"),
    ("s3.secret-access-key", "s3sk-PLANTED-f6"),
    ("s3.session-token", "s3st-PLANTED-g7"),
    ("gcs.oauth2.token", "gcs-PLANTED-h8"),
    ("adls.account-key", "adls-PLANTED-i9"),
    ("adls.sas-token.acct", "sas-PLANTED-j0"),
    ("trino password", "trinopw-PLANTED-k1"),
    ("trino access token", "trinotok-PLANTED-l2"),
    ("rest.signing-secret", "sign-PLANTED-m3"),
];

fn secret(name: &str) -> &'static str {
    SECRETS.iter().find(|(n, _)| *n == name).unwrap().1
}

/// Storage and catalog credentials, as a team's configuration holds them.
fn credential_props() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = SECRETS
        .iter()
        .filter(|(k, _)| k.contains('.') || *k == "token")
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    out.push((
        "credential".into(),
        format!("client-id:{}", secret("credential")),
    ));
    out
}

/// Every captured text must be free of every secret.
fn assert_clean(what: &str, text: &str) {
    for (name, s) in SECRETS {
        assert!(
            !text.contains(s),
            "{what}: the {name} secret leaked into:\n{}",
            &text[text.find(s).unwrap().saturating_sub(300)..]
                .chars()
                .take(700)
                .collect::<String>()
        );
    }
}

fn error_texts(e: &cryo_core::Error) -> String {
    let mut out = format!("{e}\n{e:?}\n");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let _ = writeln!(out, "{s}\n{s:?}");
        source = s.source();
    }
    out
}

// ---- a subscriber that records everything ---------------------------------------------------

#[derive(Default)]
struct Capture {
    text: Mutex<String>,
    next: AtomicU64,
}

struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={value:?} ", field.name());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        let _ = write!(self.0, "{}={value} ", field.name());
    }
}

impl Subscriber for &'static Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut t = self.text.lock().unwrap();
        let _ = write!(t, "\nspan {}: ", span.metadata().name());
        span.record(&mut Fields(&mut t));
        Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, values: &Record<'_>) {
        values.record(&mut Fields(&mut self.text.lock().unwrap()));
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut t = self.text.lock().unwrap();
        let _ = write!(
            t,
            "\n{} {}: ",
            event.metadata().level(),
            event.metadata().target()
        );
        event.record(&mut Fields(&mut t));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// The process-wide capture (every thread, every test of this binary: the secrets are unique).
fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<&'static Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let c: &'static Capture = Box::leak(Box::default());
        tracing::subscriber::set_global_default(c).expect("no other global subscriber");
        c
    })
}

// ---- a server that refuses and echoes --------------------------------------------------------

/// Serves `status` to every request, with the request itself (head and body) in the error body.
fn echo_server(status: u16) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                // Head, then as much body as Content-Length says.
                loop {
                    let Ok(n) = conn.read(&mut chunk) else { return };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text[..end]
                            .lines()
                            .find_map(|l| {
                                let (k, v) = l.split_once(':')?;
                                k.eq_ignore_ascii_case("content-length")
                                    .then(|| v.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                let request = String::from_utf8_lossy(&buf)
                    .replace('&', "&amp;")
                    .replace('<', "&lt;");
                let body = format!(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SignatureDoesNotMatch</Code>\
                     <Message>The request signature we calculated does not match: {request}</Message>\
                     <CanonicalRequest>{request}</CanonicalRequest></Error>"
                );
                let reason = if status == 401 {
                    "Unauthorized"
                } else {
                    "Forbidden"
                };
                let _ = write!(
                    conn,
                    "HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    format!("127.0.0.1:{}", addr.port())
}

// ---- the tests -------------------------------------------------------------------------------

#[tokio::test]
async fn secrets_never_reach_errors_logs_or_debug_on_wrong_credentials() {
    let cap = capture();
    let mut shown = String::new();

    // S3 with wrong credentials: a table whose metadata lives on a store that refuses (and echoes).
    let s3 = echo_server(403);
    let mut props: BTreeMap<String, String> = credential_props().into_iter().collect();
    props.insert("type".into(), "static".into());
    props.insert(
        "metadata-location".into(),
        "s3://bucket/wh/t/metadata/v1.metadata.json".into(),
    );
    props.insert("s3.endpoint".into(), format!("http://{s3}"));
    props.insert("s3.region".into(), "us-east-1".into());
    props.insert("s3.path-style-access".into(), "true".into());
    let config = CatalogConfig::new("s3_static", props);
    let _ = write!(shown, "{config:?}");
    match Catalog::connect(config.clone()).await {
        Err(e) => shown.push_str(&error_texts(&e)),
        Ok(catalog) => {
            let _ = write!(shown, "{catalog:?}");
            let tables = catalog.list_all_tables().await;
            match tables {
                Err(e) => shown.push_str(&error_texts(&e)),
                Ok(ids) => {
                    assert!(!ids.is_empty());
                    let e = catalog.load_table(&ids[0]).await.unwrap_err();
                    shown.push_str(&error_texts(&e));
                }
            }
        }
    }
    assert!(
        shown.contains("403")
            || shown.to_lowercase().contains("forbidden")
            || shown.contains("SignatureDoesNotMatch"),
        "{shown}"
    );

    // A REST catalog that refuses: bearer token, OAuth2 client credentials, an extra header,
    // a password in the URI.
    let rest = echo_server(401);
    for (label, extra) in [
        ("token", vec![("token", secret("token").to_string())]),
        (
            "oauth2",
            vec![("credential", format!("client-id:{}", secret("credential")))],
        ),
    ] {
        let mut props: BTreeMap<String, String> = credential_props().into_iter().collect();
        props.remove("token");
        props.remove("credential");
        props.extend(extra.into_iter().map(|(k, v)| (k.to_string(), v)));
        props.insert("type".into(), "rest".into());
        props.insert(
            "uri".into(),
            format!("http://admin:{}@{rest}/", secret("uri password")),
        );
        props.insert("warehouse".into(), "wh".into());
        let config = CatalogConfig::new(format!("rest_{label}"), props);
        let _ = write!(shown, "{config:?}");
        match Catalog::connect(config).await {
            Err(e) => shown.push_str(&error_texts(&e)),
            Ok(catalog) => {
                let _ = write!(shown, "{catalog:?}");
                let e = catalog.list_namespaces().await.unwrap_err();
                shown.push_str(&error_texts(&e));
            }
        }
    }

    // Trino: a password is refused over http before anything is sent; an access token goes to a
    // coordinator that refuses and echoes it; a password to one that speaks no TLS.
    let trino = echo_server(401);
    let mut cfg = TrinoConfig::new(format!("http://{trino}"), "cryo");
    cfg.password = Some(secret("trino password").into());
    cfg.max_retries = 0;
    shown.push_str(&error_texts(&TrinoClient::new(cfg.clone()).unwrap_err()));
    let _ = write!(shown, "{cfg:?}");
    cfg.url = format!("https://{trino}");
    let client = TrinoClient::new(cfg.clone()).unwrap();
    let _ = write!(shown, "{client:?}");
    shown.push_str(&error_texts(&client.execute("SELECT 1").await.unwrap_err()));
    cfg.password = None;
    cfg.url = format!("http://{trino}");
    cfg.access_token = Some(secret("trino access token").into());
    let client = TrinoClient::new(cfg.clone()).unwrap();
    let _ = write!(shown, "{client:?} {cfg:?}");
    let e = client.execute("SELECT 1").await.unwrap_err();
    shown.push_str(&error_texts(&e));
    assert!(shown.contains("401"), "the refusal is reported: {shown}");

    assert_clean("errors and Debug output", &shown);
    let logs = cap.text.lock().unwrap().clone();
    // The capture saw the failing requests (the HTTP clients' and Cryo's own events).
    assert!(logs.lines().count() > 10, "{logs}");
    assert_clean("tracing logs", &logs);
}

#[tokio::test]
async fn secrets_never_reach_receipts_or_logs_of_a_working_catalog() {
    let cap = capture();
    let dir = tempfile::tempdir().unwrap();
    let unconfigured = sql_catalog(dir.path()).await;
    let mut props = unconfigured.config().properties.clone();
    props.extend(credential_props());
    let config = CatalogConfig {
        properties: props,
        ..unconfigured.config().clone()
    };
    let catalog = Catalog::connect(config.clone()).await.unwrap();
    let committer = catalog.committer().unwrap();
    for name in ["a", "b"] {
        let id = TableId::new(Namespace::new(["db"]), name);
        let mut t = catalog
            .create_table(&id, cryo_core::commit::NewTable::new(schema()))
            .await
            .unwrap();
        for i in 0..6 {
            t = append(committer.as_ref(), &t, i * 3..i * 3 + 3).await;
        }
    }
    let plan = crate::fleet::plan(&catalog).await;
    // Break one table: its failure becomes a receipt.
    let broken = catalog
        .load_table(&TableId::new(Namespace::new(["db"]), "b"))
        .await
        .unwrap();
    let list = broken
        .metadata
        .current_snapshot()
        .unwrap()
        .manifest_list()
        .to_string();
    std::fs::remove_file(list.strip_prefix("file://").unwrap_or(&list)).unwrap();
    let log = JsonLinesLog::new(dir.path().join("receipts.jsonl"));
    let outcome = MaintenanceRun::new(&catalog, &plan)
        .with_receipt_log(log.clone())
        .dry_run(false)
        .execute()
        .await
        .unwrap();
    let orphans = RemoveOrphanFiles::new(&catalog, TableId::new(Namespace::new(["db"]), "a"))
        .execute()
        .await
        .unwrap();
    let missing = catalog
        .load_table(&TableId::new(Namespace::new(["db"]), "nope"))
        .await
        .unwrap_err();
    let orphans_broken = RemoveOrphanFiles::new(&catalog, broken.id.clone())
        .execute()
        .await
        .unwrap_err();
    let receipts = std::fs::read_to_string(log.path()).unwrap();
    assert!(receipts.lines().count() >= 2, "{receipts}");
    let texts = [
        ("receipt log", receipts),
        ("outcome JSON", serde_json::to_string(&outcome).unwrap()),
        ("outcome Debug", format!("{outcome:?}")),
        (
            "orphans",
            format!("{orphans:?} {}", serde_json::to_string(&orphans).unwrap()),
        ),
        (
            "catalog Debug",
            format!("{catalog:?} {config:?} {:?}", catalog.storage()),
        ),
        (
            "errors",
            error_texts(&missing) + &error_texts(&orphans_broken),
        ),
        ("plan", format!("{plan:?} {}", plan.to_json().unwrap())),
        ("loaded table", format!("{broken:?}")),
        ("tracing logs", cap.text.lock().unwrap().clone()),
    ];
    for (what, text) in &texts {
        assert_clean(what, text);
    }
}
