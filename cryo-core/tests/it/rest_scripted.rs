//! The REST committer against a scripted loopback server: every status the REST spec gives a
//! commit, token refresh, prefix from `/v1/config`, and the "commit state unknown" path — which
//! a real server rarely produces on demand.
#![allow(clippy::too_many_lines)] // Reason: one scripted session, status by status, reads best whole.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use cryo_core::catalog::CatalogCommitter;
use cryo_core::commit::{
    NewTable, RestCommitter, SnapshotProducer, StagedSnapshot, certainly_not_committed,
    write_data_files,
};
use cryo_core::{CatalogConfig, Error, LoadedTable, TableId};
use iceberg::spec::TableMetadata;

use crate::replace::{append, by_day, hadoop_catalog, rows, schema};

/// One request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    authorization: Option<String>,
    tenant: Option<String>,
    body: String,
}

/// What the server answers: token requests get `tok-<n>`; `/v1/config` gives prefix `p`;
/// `GET` of the table returns `head`; commits pop `commits` in order.
#[derive(Default)]
struct Script {
    head: String,
    commits: VecDeque<(u16, String)>,
    tokens: usize,
    seen: Vec<Seen>,
    /// Table reads answered 429 (`Retry-After: 0`) before the head is served.
    throttle: usize,
}

/// One HTTP/1.1 request off `stream`: method, path, headers (names lowercased), body.
fn read_request(
    stream: &std::net::TcpStream,
) -> (
    String,
    String,
    std::collections::HashMap<String, String>,
    String,
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut headers = std::collections::HashMap::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).unwrap();
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':').unwrap();
        headers.insert(k.to_ascii_lowercase(), v.trim().to_string());
    }
    let length = headers
        .get("content-length")
        .map_or(0, |l| l.parse().unwrap());
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    (method, path, headers, String::from_utf8(body).unwrap())
}

fn serve(script: Arc<Mutex<Script>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let (method, path, headers, body) = read_request(&stream);
            let authorization = headers.get("authorization").cloned();
            let tenant = headers.get("x-tenant").cloned();
            let (status, reply) = {
                let mut s = script.lock().unwrap();
                s.seen.push(Seen {
                    method: method.clone(),
                    path: path.clone(),
                    authorization: authorization.clone(),
                    tenant: tenant.clone(),
                    body: body.clone(),
                });
                if path.starts_with("/v1/oauth/tokens") {
                    s.tokens += 1;
                    (
                        200,
                        format!(
                            r#"{{"access_token":"tok-{}","token_type":"bearer"}}"#,
                            s.tokens
                        ),
                    )
                } else if path.starts_with("/v1/config") {
                    (
                        200,
                        r#"{"defaults":{},"overrides":{"prefix":"p"}}"#.to_string(),
                    )
                } else if method == "GET" && s.throttle > 0 {
                    s.throttle -= 1;
                    (429, error_body(429, "SlowDown", "too many requests"))
                } else if method == "GET" {
                    (200, s.head.clone())
                } else {
                    s.commits.pop_front().unwrap_or((500, "{}".into()))
                }
            };
            let retry = if status == 429 {
                "Retry-After: 0\r\n"
            } else {
                ""
            };
            let response = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{retry}Content-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    format!("http://{addr}")
}

/// `{"metadata-location", "metadata"}` as loadTable and commit responses carry them.
fn table_json(location: &str, metadata: &TableMetadata) -> String {
    serde_json::json!({ "metadata-location": location, "metadata": metadata }).to_string()
}

/// The base's metadata with the staged changes applied, as a server would.
fn applied(base: &LoadedTable, staged: &StagedSnapshot) -> TableMetadata {
    let mut b = base
        .metadata
        .as_ref()
        .clone()
        .into_builder(base.metadata_location.clone());
    for u in staged.changes.updates.clone() {
        b = u.apply(b).unwrap();
    }
    b.build().unwrap().metadata
}

fn error_body(code: u16, kind: &str, message: &str) -> String {
    serde_json::json!({"error": {"message": message, "type": kind, "code": code}}).to_string()
}

#[tokio::test]
async fn rest_commit_statuses_map_to_typed_errors() {
    // A local table provides real manifests; the scripted server plays its REST catalog.
    let dir = tempfile::tempdir().unwrap();
    let catalog = hadoop_catalog(dir.path()).await;
    let id = TableId::parse("db.scripted").unwrap();
    let t = catalog
        .create_table(&id, NewTable::new(schema()).with_partition_spec(by_day()))
        .await
        .unwrap();
    let base = append(catalog.committer().unwrap().as_ref(), &t, 0..4).await;
    let script = Arc::new(Mutex::new(Script {
        head: table_json("s3://b/t/metadata/v2.metadata.json", &base.metadata),
        ..Script::default()
    }));
    let uri = serve(Arc::clone(&script));
    let secret = "sc-ret-value-42";
    let rest = RestCommitter::new(&CatalogConfig::new(
        "scripted",
        [
            ("uri", uri.as_str()),
            ("warehouse", "wh"),
            ("credential", &format!("client:{secret}")),
            ("header.x-tenant", "t1"),
        ],
    ))
    .unwrap();
    let stage = || async {
        let w = write_data_files(&base, [rows(100..102)]).await.unwrap();
        SnapshotProducer::new(&base)
            .add_data_files(w.files)
            .stage()
            .await
            .unwrap()
    };
    let exists = |f: &String| {
        let f = f.strip_prefix("file://").unwrap_or(f).to_string();
        std::path::Path::new(&f).exists()
    };
    let push = |status: u16, body: String| {
        script.lock().unwrap().commits.push_back((status, body));
    };

    // 200: the server's head comes back.
    let staged = stage().await;
    push(
        200,
        table_json(
            "s3://b/t/metadata/v3.metadata.json",
            &applied(&base, &staged),
        ),
    );
    let out = staged.commit(&rest).await.unwrap();
    assert_eq!(
        out.table.metadata_location.as_deref(),
        Some("s3://b/t/metadata/v3.metadata.json")
    );
    assert!(out.table.metadata.snapshot_by_id(out.snapshot_id).is_some());
    {
        let s = script.lock().unwrap();
        let config = s
            .seen
            .iter()
            .find(|r| r.path.starts_with("/v1/config"))
            .unwrap();
        assert_eq!(config.path, "/v1/config?warehouse=wh");
        let commit = s
            .seen
            .iter()
            .find(|r| r.method == "POST" && r.path.contains("tables"))
            .unwrap();
        assert_eq!(commit.path, "/v1/p/namespaces/db/tables/scripted");
        assert_eq!(commit.authorization.as_deref(), Some("Bearer tok-1"));
        let body: serde_json::Value = serde_json::from_str(&commit.body).unwrap();
        assert_eq!(body["identifier"]["name"], "scripted");
        assert_eq!(body["requirements"][0]["type"], "assert-table-uuid");
        assert_eq!(body["requirements"][1]["type"], "assert-ref-snapshot-id");
        assert_eq!(body["updates"][0]["action"], "add-snapshot");
        assert_eq!(body["updates"][1]["action"], "set-snapshot-ref");
    }

    // 401: one token refresh, then the commit goes through.
    let staged = stage().await;
    push(
        401,
        error_body(401, "NotAuthorizedException", "token expired"),
    );
    push(
        200,
        table_json(
            "s3://b/t/metadata/v3.metadata.json",
            &applied(&base, &staged),
        ),
    );
    staged.commit(&rest).await.unwrap();
    assert_eq!(script.lock().unwrap().tokens, 2);
    let last = script.lock().unwrap().seen.last().unwrap().clone();
    assert_eq!(last.authorization.as_deref(), Some("Bearer tok-2"));

    // 409: a conflict; the staged metadata files are deleted.
    let staged = stage().await;
    let files = staged.written_files.clone();
    push(
        409,
        error_body(
            409,
            "CommitFailedException",
            "Requirement failed: branch main has changed",
        ),
    );
    let e = staged.commit(&rest).await.unwrap_err();
    assert!(matches!(e, Error::CommitConflict { .. }), "{e}");
    assert!(e.to_string().contains("branch main has changed"));
    assert!(files.iter().all(|f| !exists(f)));

    // 400: the server refused the changes: typed, not retryable, certainly not committed.
    let staged = stage().await;
    push(
        400,
        error_body(400, "BadRequestException", "unknown update"),
    );
    let e = staged.commit(&rest).await.unwrap_err();
    assert!(
        matches!(e, Error::Validation { .. }) && !e.is_retryable(),
        "{e}"
    );
    assert!(certainly_not_committed(&e));

    // 404: the table is gone.
    let staged = stage().await;
    push(404, error_body(404, "NoSuchTableException", "no table"));
    let e = staged.commit(&rest).await.unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");

    // 503: retryable, and the server says nothing was applied.
    let staged = stage().await;
    push(503, error_body(503, "ServiceUnavailable", "slow down"));
    let e = staged.commit(&rest).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::Catalog {
                retryable: true,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("not applied"), "{e}");

    // 500 with the snapshot in the reloaded head: it did commit.
    let staged = stage().await;
    let landed = applied(&base, &staged);
    push(500, error_body(500, "ServerError", "boom"));
    script.lock().unwrap().head = table_json("s3://b/t/metadata/v3.metadata.json", &landed);
    let id_500 = staged.snapshot_id();
    let out = staged.commit(&rest).await.unwrap();
    assert_eq!(out.snapshot_id, id_500);

    // 500 without it: unknown state, retryable, and the staged files stay (they may yet commit).
    script.lock().unwrap().head = table_json("s3://b/t/metadata/v2.metadata.json", &base.metadata);
    let staged = stage().await;
    let files = staged.written_files.clone();
    push(502, error_body(502, "BadGateway", "upstream died"));
    let e = staged.commit(&rest).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::Catalog {
                retryable: true,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("commit state unknown"), "{e}");
    assert!(!certainly_not_committed(&e));
    assert!(files.iter().all(exists));

    // No request or error ever showed the secret; the extra header went out.
    let shown = format!("{rest:?} {e} {e:?}");
    assert!(!shown.contains(secret), "{shown}");
    assert!(!shown.contains("tok-"), "{shown}");
    let s = script.lock().unwrap();
    assert!(s.seen.iter().all(|r| !r.path.contains(secret)));
    assert!(s.seen.iter().all(|r| r.tenant.as_deref() == Some("t1")));
    assert!(
        s.seen
            .iter()
            .filter(|r| r.path.starts_with("/v1/oauth"))
            .all(|r| r.body.contains("scope=catalog"))
    );
}

/// Reads answered 429 are tried again after the server's `Retry-After` (a few times), then the
/// error is typed, retryable, names the catalog and table, and holds no secret.
#[tokio::test]
async fn throttled_reads_back_off_then_give_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = hadoop_catalog(dir.path()).await;
    let id = TableId::parse("db.throttled").unwrap();
    let t = catalog
        .create_table(&id, NewTable::new(schema()).with_partition_spec(by_day()))
        .await
        .unwrap();
    let script = Arc::new(Mutex::new(Script {
        head: table_json("s3://b/t/metadata/v1.metadata.json", &t.metadata),
        throttle: 3,
        ..Script::default()
    }));
    let uri = serve(Arc::clone(&script));
    let secret = "throttle-secret-77";
    let rest = RestCommitter::new(&CatalogConfig::new(
        "scripted",
        [
            ("uri", uri.as_str()),
            ("credential", &format!("client:{secret}")),
        ],
    ))
    .unwrap();
    let head = rest.load_head(&t).await.unwrap();
    assert_eq!(
        head.metadata_location.as_deref(),
        Some("s3://b/t/metadata/v1.metadata.json")
    );
    let gets = |s: &Script| {
        s.seen
            .iter()
            .filter(|r| r.method == "GET" && r.path.contains("/tables/"))
            .count()
    };
    assert_eq!(
        gets(&script.lock().unwrap()),
        4,
        "three 429s, then the head"
    );

    script.lock().unwrap().throttle = 100;
    let e = rest.load_head(&t).await.unwrap_err();
    assert!(e.is_retryable(), "{e}");
    let text = e.to_string();
    assert!(text.contains("429") && text.contains("scripted"), "{text}");
    assert!(!text.contains(secret), "{text}");
    assert_eq!(
        gets(&script.lock().unwrap()),
        4 + 6,
        "five tries again, then the error"
    );
}

/// A scripted Glue endpoint: `throttle` calls answered `ThrottlingException` (HTTP 400, as Glue
/// sheds load), then every `GetDatabases` an empty list; `calls` counts what reached it. moto's
/// Glue server (the real one the other Glue tests use) never throttles.
fn serve_glue(
    throttle: Arc<std::sync::atomic::AtomicUsize>,
    calls: Arc<std::sync::atomic::AtomicUsize>,
) -> String {
    use std::sync::atomic::Ordering;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let _ = read_request(&stream);
            calls.fetch_add(1, Ordering::SeqCst);
            let shed = throttle
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            let (status, reply) = if shed {
                (
                    400,
                    r#"{"__type":"ThrottlingException","message":"Rate exceeded"}"#,
                )
            } else {
                (200, r#"{"DatabaseList":[]}"#)
            };
            let response = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/x-amz-json-1.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
    });
    format!("http://{addr}")
}

/// Glue reads that meet `ThrottlingException` are tried again with backoff (a few times), then
/// the error is typed, retryable, names the catalog and holds no secret.
#[tokio::test]
async fn throttled_glue_reads_back_off_then_give_a_typed_error() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (throttle, calls) = (Arc::new(AtomicUsize::new(3)), Arc::new(AtomicUsize::new(0)));
    let uri = serve_glue(Arc::clone(&throttle), Arc::clone(&calls));
    let secret = "glue-secret-3141";
    let config = CatalogConfig::new(
        "scripted_glue",
        [
            ("type", "glue"),
            ("glue.endpoint", uri.as_str()),
            ("glue.region", "us-east-1"),
            ("glue.access-key-id", "AKIDSCRIPTED"),
            ("glue.secret-access-key", secret),
            ("warehouse", "s3://b/wh"),
        ],
    );
    // Connecting lists the databases: three throttled answers, then the list.
    let catalog = cryo_core::Catalog::connect(config).await.unwrap();
    assert_eq!(
        calls.load(Ordering::SeqCst),
        4,
        "three throttled, then the answer"
    );
    assert!(catalog.list_namespaces().await.unwrap().is_empty());

    throttle.store(100, Ordering::SeqCst);
    let before = calls.load(Ordering::SeqCst);
    let e = catalog.list_namespaces().await.unwrap_err();
    assert!(e.is_retryable(), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("ThrottlingException") && text.contains("scripted_glue"),
        "{text}"
    );
    assert!(!text.contains(secret), "{text}");
    assert_eq!(
        calls.load(Ordering::SeqCst) - before,
        6,
        "five tries again, then the error"
    );
}
