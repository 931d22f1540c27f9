//! Trino over its HTTP statement protocol: submit a statement, follow `nextUri` until the query
//! ends, cancel it when asked (or when the caller drops the future), retry what the protocol says
//! is transient.
//!
//! ```text
//! POST /v1/statement (SQL, X-Trino-User/Source/Catalog/Schema/Client-Tags)
//!   └─ 200 {id, nextUri, stats.state} ─ GET nextUri ─ … ─ {no nextUri}: FINISHED, or {error}
//!      429/502/503/504, connect errors: retried with backoff (the statement was not accepted)
//!      statement timeout or a dropped future: DELETE nextUri (the query is cancelled server-side)
//! ```
//!
//! No credential ever reaches an error message or `Debug` output: the password and token are only
//! ever put into the `Authorization` header.
//!
//! TLS is rustls (the build `object_store` and `iceberg` already link): the system's roots, plus the
//! PEM bundle of [`TrinoConfig::ca_cert_path`] for coordinators behind a private CA. The crypto
//! provider is the process default when the application installed one, else ring (reqwest's
//! `rustls-tls-native-roots` falls back to it), so building a client never needs a provider
//! installed first. There is no switch to skip certificate verification.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{SqlEngine, StatementOutcome};
use crate::error::{Error, Result};
use crate::govern::{CoordinatorLoad, LoadSnapshot, Probe, ProbeFailure};
use crate::render::{Dialect, TrinoDialect};

/// How to reach a Trino coordinator.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrinoConfig {
    /// Coordinator base URL, `http://host:8080` or `https://…`.
    pub url: String,
    /// `X-Trino-User`.
    pub user: String,
    /// Password for HTTP basic authentication (Trino accepts it over HTTPS only).
    pub password: Option<String>,
    /// Bearer token (JWT / OAuth2 access token).
    pub access_token: Option<String>,
    /// A PEM file of CA certificates to trust for an `https://` coordinator, in addition to the
    /// system's roots (a private CA's certificate, or a bundle).
    pub ca_cert_path: Option<String>,
    /// Default catalog for unqualified names.
    pub catalog: Option<String>,
    /// Default schema for unqualified names.
    pub schema: Option<String>,
    /// `X-Trino-Source`: how Trino (and the load probe) recognizes Cryo's statements.
    pub source: String,
    /// `X-Trino-Client-Tags`.
    pub client_tags: Vec<String>,
    /// Session properties (`X-Trino-Session`).
    pub session_properties: BTreeMap<String, String>,
    /// Timeout of one HTTP request.
    pub request_timeout_ms: u64,
    /// A statement still running after this long is cancelled (0: no limit).
    pub statement_timeout_ms: u64,
    /// Retries of a request the server did not accept (connect errors, 429, 502, 503, 504), and of a
    /// statement that failed with a transient Trino error.
    pub max_retries: u32,
    /// First backoff; doubles per retry.
    pub retry_backoff_ms: u64,
}

/// The `X-Trino-Source` Cryo's maintenance statements carry.
pub const CRYO_SOURCE: &str = "cryo";
/// The `X-Trino-Source` of Cryo's load probe (not counted as load).
pub const CRYO_PROBE_SOURCE: &str = "cryo-probe";

impl Default for TrinoConfig {
    fn default() -> Self {
        Self {
            url: "http://127.0.0.1:8080".into(),
            user: "cryo".into(),
            password: None,
            access_token: None,
            ca_cert_path: None,
            catalog: None,
            schema: None,
            source: CRYO_SOURCE.into(),
            client_tags: Vec::new(),
            session_properties: BTreeMap::new(),
            request_timeout_ms: 60_000,
            statement_timeout_ms: 6 * 3_600_000,
            max_retries: 4,
            retry_backoff_ms: 500,
        }
    }
}

impl fmt::Debug for TrinoConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrinoConfig")
            .field("url", &redact_url(&self.url))
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("access_token", &self.access_token.as_ref().map(|_| "***"))
            .field("ca_cert_path", &self.ca_cert_path)
            .field("catalog", &self.catalog)
            .field("schema", &self.schema)
            .field("source", &self.source)
            .field("client_tags", &self.client_tags)
            .field("session_properties", &self.session_properties)
            .field("request_timeout_ms", &self.request_timeout_ms)
            .field("statement_timeout_ms", &self.statement_timeout_ms)
            .field("max_retries", &self.max_retries)
            .field("retry_backoff_ms", &self.retry_backoff_ms)
            .finish()
    }
}

impl TrinoConfig {
    /// A coordinator at `url`, as `user`.
    pub fn new(url: impl Into<String>, user: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            user: user.into(),
            ..Self::default()
        }
    }

    /// Reject what cannot work.
    pub fn validate(&self) -> Result<()> {
        let url = url::Url::parse(&self.url)
            .map_err(|e| Error::config(format!("trino url {}: {e}", redact_url(&self.url))))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Error::config(format!(
                "trino url {} must be http:// or https://",
                redact_url(&self.url)
            )));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Error::config(
                "put Trino credentials in `user`/`password`, not in the url",
            ));
        }
        if self.user.trim().is_empty() {
            return Err(Error::config("trino user must not be empty"));
        }
        if self.password.is_some() && self.access_token.is_some() {
            return Err(Error::config(
                "give Trino a password or an access token, not both",
            ));
        }
        if self.password.is_some() && url.scheme() != "https" {
            return Err(Error::config(
                "Trino accepts a password only over https: use an https:// url",
            ));
        }
        if let Some(path) = &self.ca_cert_path {
            if path.trim().is_empty() {
                return Err(Error::config("ca_cert_path must not be empty"));
            }
            if url.scheme() != "https" {
                return Err(Error::config(format!(
                    "ca_cert_path ({path}) is for https coordinators; {} is http",
                    redact_url(&self.url)
                )));
            }
        }
        for (k, v) in &self.session_properties {
            if k.is_empty() || k.contains([',', '=']) || v.contains(',') {
                return Err(Error::config(format!(
                    "session property `{k}` cannot be sent in X-Trino-Session (no `,` or `=` in names, no `,` in values)"
                )));
            }
        }
        for header in [&self.user, &self.source]
            .into_iter()
            .chain(self.catalog.iter())
            .chain(self.schema.iter())
            .chain(self.client_tags.iter())
        {
            if header.chars().any(|c| c.is_control() || !c.is_ascii()) {
                return Err(Error::config(format!(
                    "`{header}` cannot be sent as a Trino header (control or non-ASCII characters)"
                )));
            }
        }
        if self.request_timeout_ms == 0 {
            return Err(Error::config("request_timeout_ms must be positive"));
        }
        Ok(())
    }
}

/// Strip any userinfo from a URL before it is shown.
fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        Ok(_) => url.to_string(),
        Err(_) => "<unparseable url>".to_string(),
    }
}

/// What a finished statement returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct QueryResult {
    /// Trino's query id.
    pub query_id: String,
    /// Final state (`FINISHED`).
    pub state: String,
    /// `ALTER TABLE EXECUTE`, `SELECT`, …
    pub update_type: Option<String>,
    /// Rows changed, for statements that report it.
    pub update_count: Option<i64>,
    /// Column names.
    pub columns: Vec<String>,
    /// Rows, as JSON values in column order.
    pub rows: Vec<Vec<serde_json::Value>>,
    /// Time the query spent queued (Trino's `stats.queuedTimeMillis`).
    pub queued_ms: u64,
    /// Wall time on Trino's side (`stats.elapsedTimeMillis`).
    pub elapsed_ms: u64,
    /// Statement attempts (1 unless a transient failure was retried).
    pub attempts: u32,
}

/// A Trino coordinator client: one per coordinator, cheap to clone.
#[derive(Clone)]
pub struct TrinoClient {
    config: TrinoConfig,
    http: reqwest::Client,
}

impl fmt::Debug for TrinoClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrinoClient")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Page {
    id: String,
    next_uri: Option<String>,
    #[serde(default)]
    columns: Option<Vec<Column>>,
    #[serde(default)]
    data: Option<Vec<Vec<serde_json::Value>>>,
    #[serde(default)]
    stats: Option<Stats>,
    #[serde(default)]
    error: Option<QueryError>,
    #[serde(default)]
    update_type: Option<String>,
    #[serde(default)]
    update_count: Option<i64>,
}

#[derive(Debug, Deserialize)]
struct Column {
    name: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stats {
    #[serde(default)]
    state: String,
    #[serde(default)]
    queued_time_millis: u64,
    #[serde(default)]
    elapsed_time_millis: u64,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueryError {
    #[serde(default)]
    message: String,
    #[serde(default)]
    error_name: String,
    #[serde(default)]
    error_type: String,
}

/// Trino errors after which running the same statement again may succeed.
const TRANSIENT_ERRORS: &[&str] = &[
    "ICEBERG_COMMIT_ERROR",
    "SERVER_STARTING_UP",
    "SERVER_SHUTTING_DOWN",
    "NO_NODES_AVAILABLE",
    "TOO_MANY_REQUESTS_FAILED",
    "PAGE_TRANSPORT_TIMEOUT",
    "REMOTE_HOST_GONE",
    "CLUSTER_OUT_OF_MEMORY",
];

/// One failed attempt: whether a retry may help.
struct Attempt {
    error: Error,
    retry: bool,
}

impl TrinoClient {
    /// A client for `config` (validated).
    pub fn new(config: TrinoConfig) -> Result<Self> {
        config.validate()?;
        let mut builder = reqwest::Client::builder()
            .timeout(Duration::from_millis(config.request_timeout_ms))
            .connect_timeout(Duration::from_millis(config.request_timeout_ms.min(10_000)));
        if let Some(path) = &config.ca_cert_path {
            for cert in read_ca_bundle(path)? {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder.build().map_err(|e| {
            engine_error(&config, format!("cannot build the HTTP client: {e}"), false)
        })?;
        Ok(Self { config, http })
    }

    /// The configuration (secrets included: do not log it with `{:?}` of anything but this type).
    pub fn config(&self) -> &TrinoConfig {
        &self.config
    }

    /// A client for the same coordinator whose statements carry `source` (e.g. the probe's).
    #[must_use]
    pub fn with_source(&self, source: &str) -> Self {
        let mut c = self.clone();
        c.config.source = source.to_string();
        c
    }

    /// Run `sql` to completion and return its rows. Transient failures are retried (see
    /// [`TrinoConfig::max_retries`]); a statement past [`TrinoConfig::statement_timeout_ms`] is
    /// cancelled on the server and fails; dropping the future cancels the query too.
    pub async fn execute(&self, sql: &str) -> Result<QueryResult> {
        let started = Instant::now();
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            match self.execute_once(sql, started).await {
                Ok(mut r) => {
                    r.attempts = attempt;
                    return Ok(r);
                }
                Err(a) if a.retry && attempt <= self.config.max_retries => {
                    let wait = self.backoff(attempt);
                    tracing::info!(attempt, wait_ms = wait.as_millis() as u64, error = %a.error, "trino: transient failure, retrying");
                    tokio::time::sleep(wait).await;
                }
                Err(a) => return Err(a.error),
            }
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u64 << attempt.saturating_sub(1).min(10);
        Duration::from_millis(
            self.config
                .retry_backoff_ms
                .saturating_mul(factor)
                .min(60_000),
        )
    }

    async fn execute_once(
        &self,
        sql: &str,
        started: Instant,
    ) -> std::result::Result<QueryResult, Attempt> {
        let endpoint = format!("{}/v1/statement", self.config.url.trim_end_matches('/'));
        let request = self
            .headers(self.http.post(&endpoint))
            .body(sql.to_string());
        let mut page = self.send(request, true).await?;
        let mut cancel = CancelOnDrop::new(self.clone(), page.next_uri.clone());
        let mut columns = Vec::new();
        let mut rows = Vec::new();
        let mut update_type = None;
        let mut update_count = None;
        let mut stats = Stats::default();
        let query_id = page.id.clone();
        loop {
            if let Some(c) = page.columns.take() {
                columns = c.into_iter().map(|c| c.name).collect();
            }
            if let Some(d) = page.data.take() {
                rows.extend(d);
            }
            if page.update_type.is_some() {
                update_type = page.update_type.take();
            }
            if page.update_count.is_some() {
                update_count = page.update_count;
            }
            if let Some(s) = page.stats.take() {
                stats = s;
            }
            if let Some(err) = page.error.take() {
                cancel.disarm();
                let retry = TRANSIENT_ERRORS.contains(&err.error_name.as_str())
                    || err.error_type == "INSUFFICIENT_RESOURCES";
                return Err(Attempt {
                    error: self.query_failed(&query_id, &err, retry),
                    retry,
                });
            }
            let Some(next) = page.next_uri.take() else {
                cancel.disarm();
                break;
            };
            cancel.set(Some(next.clone()));
            if self.config.statement_timeout_ms > 0
                && started.elapsed() > Duration::from_millis(self.config.statement_timeout_ms)
            {
                cancel.disarm();
                self.cancel_uri(&next).await;
                let mut error = engine_error(
                    &self.config,
                    format!(
                        "query {query_id} ran past the statement timeout of {} ms and was cancelled",
                        self.config.statement_timeout_ms
                    ),
                    false,
                );
                if let Error::Engine { query_id: q, .. } = &mut error {
                    *q = Some(query_id.clone());
                }
                return Err(Attempt {
                    error,
                    retry: false,
                });
            }
            // Following nextUri is idempotent: transient errors are retried here without
            // re-submitting the statement.
            page = self.follow(&next).await?;
        }
        Ok(QueryResult {
            query_id,
            state: if stats.state.is_empty() {
                "FINISHED".into()
            } else {
                stats.state
            },
            update_type,
            update_count,
            columns,
            rows,
            queued_ms: stats.queued_time_millis,
            elapsed_ms: stats.elapsed_time_millis,
            attempts: 1,
        })
    }

    async fn follow(&self, next: &str) -> std::result::Result<Page, Attempt> {
        let mut tries = 0u32;
        loop {
            tries += 1;
            match self.send(self.headers(self.http.get(next)), false).await {
                Err(a) if a.retry && tries <= self.config.max_retries.max(3) => {
                    tokio::time::sleep(self.backoff(tries)).await;
                }
                other => return other,
            }
        }
    }

    fn headers(&self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let c = &self.config;
        let mut rb = rb
            .header("X-Trino-User", &c.user)
            .header("X-Trino-Source", &c.source)
            .header("User-Agent", concat!("cryo/", env!("CARGO_PKG_VERSION")));
        if let Some(cat) = &c.catalog {
            rb = rb.header("X-Trino-Catalog", cat);
        }
        if let Some(s) = &c.schema {
            rb = rb.header("X-Trino-Schema", s);
        }
        if !c.client_tags.is_empty() {
            rb = rb.header("X-Trino-Client-Tags", c.client_tags.join(","));
        }
        if !c.session_properties.is_empty() {
            let v: Vec<String> = c
                .session_properties
                .iter()
                .map(|(k, v)| format!("{k}={}", url_encode(v)))
                .collect();
            rb = rb.header("X-Trino-Session", v.join(","));
        }
        if let Some(p) = &c.password {
            rb = rb.basic_auth(&c.user, Some(p));
        } else if let Some(t) = &c.access_token {
            rb = rb.bearer_auth(t);
        }
        rb
    }

    /// Send one request and parse a page. `submit` marks the initial POST.
    async fn send(
        &self,
        rb: reqwest::RequestBuilder,
        submit: bool,
    ) -> std::result::Result<Page, Attempt> {
        let what = if submit {
            "submitting the statement"
        } else {
            "polling the query"
        };
        let resp = match rb.send().await {
            Ok(r) => r,
            Err(e) => {
                // A POST that never connected was not accepted; one that timed out may have been:
                // only connect errors are safe to re-submit. A TLS failure (an untrusted or
                // mismatched certificate) is a connect error that no retry fixes.
                let tls = tls_failure(&e).is_some();
                let retry = (e.is_connect() && !tls) || (!submit && e.is_timeout());
                return Err(Attempt {
                    error: engine_error(
                        &self.config,
                        format!("{what}: {}", describe_reqwest(&e)),
                        retry,
                    ),
                    retry,
                });
            }
        };
        let status = resp.status();
        if matches!(status.as_u16(), 429 | 502 | 503 | 504) {
            return Err(Attempt {
                error: engine_error(
                    &self.config,
                    format!("{what}: HTTP {status} (coordinator busy or restarting)"),
                    true,
                ),
                retry: true,
            });
        }
        if status.as_u16() == 401 || status.as_u16() == 403 {
            let c = &self.config;
            let why = if c.password.is_none() && c.access_token.is_none() && status.as_u16() == 401
            {
                format!(
                    "Trino asks for authentication and user `{}` has no password or access token",
                    c.user
                )
            } else {
                format!("Trino refused the credentials of user `{}`", c.user)
            };
            return Err(Attempt {
                error: engine_error(c, format!("{what}: HTTP {status}: {why}"), false),
                retry: false,
            });
        }
        let body = resp.text().await.map_err(|e| Attempt {
            error: engine_error(
                &self.config,
                format!("{what}: reading the response: {}", describe_reqwest(&e)),
                !submit,
            ),
            retry: !submit,
        })?;
        if !status.is_success() {
            let snippet: String = body.chars().take(300).collect();
            return Err(Attempt {
                error: engine_error(
                    &self.config,
                    format!("{what}: HTTP {status}: {}", snippet.trim()),
                    false,
                ),
                retry: false,
            });
        }
        serde_json::from_str::<Page>(&body).map_err(|e| Attempt {
            error: engine_error(
                &self.config,
                format!("{what}: not a Trino statement response ({e})"),
                false,
            ),
            retry: false,
        })
    }

    fn query_failed(&self, query_id: &str, err: &QueryError, retryable: bool) -> Error {
        Error::Engine {
            engine: format!("trino {}", redact_url(&self.config.url)),
            query_id: Some(query_id.to_string()),
            code: Some(err.error_name.clone()).filter(|s| !s.is_empty()),
            message: self.scrub(&err.message),
            retryable,
        }
    }

    /// Remove configured secrets from a message the server built.
    fn scrub(&self, message: &str) -> String {
        let mut out = message.to_string();
        for secret in [&self.config.password, &self.config.access_token]
            .into_iter()
            .flatten()
        {
            if secret.len() >= 3 {
                out = out.replace(secret.as_str(), "***");
            }
        }
        out
    }

    /// Cancel a running query by its `nextUri` (best effort).
    async fn cancel_uri(&self, next: &str) {
        if let Err(e) = self.headers(self.http.delete(next)).send().await {
            tracing::warn!(error = %describe_reqwest(&e), "trino: cancelling a query failed");
        }
    }
}

/// Cancels the query on the server if the statement's future is dropped before it ends.
struct CancelOnDrop {
    client: TrinoClient,
    next: Option<String>,
}

impl CancelOnDrop {
    fn new(client: TrinoClient, next: Option<String>) -> Self {
        Self { client, next }
    }

    fn set(&mut self, next: Option<String>) {
        self.next = next;
    }

    fn disarm(&mut self) {
        self.next = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(next) = self.next.take()
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            let client = self.client.clone();
            handle.spawn(async move { client.cancel_uri(&next).await });
        }
    }
}

/// The certificates of a PEM bundle (a file with none is an error: it would trust nothing new).
fn read_ca_bundle(path: &str) -> Result<Vec<reqwest::Certificate>> {
    let pem = std::fs::read(path)
        .map_err(|e| Error::config(format!("cannot read the CA bundle {path}: {e}")))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| Error::config(format!("the CA bundle {path} is not valid PEM: {e}")))?;
    if certs.is_empty() {
        return Err(Error::config(format!(
            "the CA bundle {path} holds no certificate (PEM `BEGIN CERTIFICATE` blocks)"
        )));
    }
    Ok(certs)
}

fn engine_error(config: &TrinoConfig, message: String, retryable: bool) -> Error {
    Error::Engine {
        engine: format!("trino {}", redact_url(&config.url)),
        query_id: None,
        code: None,
        message,
        retryable,
    }
}

/// The rustls error under a failed request, if TLS is what failed.
fn tls_failure(e: &reqwest::Error) -> Option<&rustls::Error> {
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        if let Some(t) = s.downcast_ref::<rustls::Error>() {
            return Some(t);
        }
        // tokio-rustls hands the handshake's error over inside an io::Error, which hyper-rustls
        // wraps in another one (io::Error::source skips the wrapped error itself).
        let mut io = s.downcast_ref::<std::io::Error>();
        while let Some(inner) = io.and_then(std::io::Error::get_ref) {
            if let Some(t) = inner.downcast_ref::<rustls::Error>() {
                return Some(t);
            }
            io = inner.downcast_ref::<std::io::Error>();
        }
        src = s.source();
    }
    None
}

/// A reqwest error without the URL's query string or any header (reqwest never prints headers).
fn describe_reqwest(e: &reqwest::Error) -> String {
    if let Some(t) = tls_failure(e) {
        let hint = if matches!(t, rustls::Error::InvalidCertificate(_)) {
            ": is the coordinator's CA in the system's roots or in ca_cert_path?"
        } else {
            ""
        };
        return format!("TLS handshake failed ({t}){hint}");
    }
    let kind = if e.is_connect() {
        "cannot connect"
    } else if e.is_timeout() {
        "timed out"
    } else if e.is_decode() || e.is_body() {
        "bad response body"
    } else {
        "request failed"
    };
    let mut src = std::error::Error::source(e);
    let mut detail = String::new();
    while let Some(s) = src {
        detail = s.to_string();
        src = s.source();
    }
    if detail.is_empty() {
        kind.to_string()
    } else {
        format!("{kind} ({detail})")
    }
}

/// Percent-encode a session property value.
fn url_encode(v: &str) -> String {
    url::form_urlencoded::byte_serialize(v.as_bytes()).collect()
}

/// The load probe's query: every query the coordinator has not finished.
pub const PROBE_SQL: &str = "SELECT query_id, state, source, query FROM system.runtime.queries WHERE state NOT IN ('FINISHED', 'FAILED')";

/// States of a query waiting for resources rather than using them.
const QUEUED_STATES: &[&str] = &[
    "QUEUED",
    "WAITING_FOR_RESOURCES",
    "DISPATCHING",
    "WAITING_FOR_PREREQUISITES",
];

/// Whether a statement is table maintenance (Cryo's or anyone's): an Iceberg table procedure.
pub fn is_maintenance_sql(sql: &str) -> bool {
    let s = sql.to_ascii_lowercase();
    let words: Vec<&str> = s.split_whitespace().collect();
    words.windows(2).any(|w| {
        w[0] == "execute"
            && [
                "optimize",
                "optimize_manifests",
                "expire_snapshots",
                "remove_orphan_files",
                "drop_extended_stats",
            ]
            .iter()
            .any(|p| w[1].starts_with(p))
    }) || (words.first() == Some(&"analyze"))
}

/// The load of one coordinator, from its `system.runtime.queries` rows (the probe's own query,
/// marked by [`CRYO_PROBE_SOURCE`], is not load). `cryo_source` marks Cryo's own statements,
/// counted as maintenance whatever they are.
pub fn classify_queries(
    coordinator: &str,
    rows: &[Vec<serde_json::Value>],
    cryo_source: &str,
) -> CoordinatorLoad {
    let mut load = CoordinatorLoad {
        coordinator: coordinator.to_string(),
        running_queries: 0,
        queued_queries: 0,
        maintenance_running: 0,
    };
    for row in rows {
        let text = |i: usize| row.get(i).and_then(|v| v.as_str()).unwrap_or("");
        let (state, source, query) = (text(1), text(2), text(3));
        if source == CRYO_PROBE_SOURCE {
            continue;
        }
        if QUEUED_STATES.contains(&state) {
            load.queued_queries += 1;
        } else {
            load.running_queries += 1;
        }
        if source == cryo_source || is_maintenance_sql(query) {
            load.maintenance_running += 1;
        }
    }
    load
}

/// The user's Trino as a destination: one or more coordinators, Cryo's statements rendered in
/// [`TrinoDialect`], load read from `system.runtime.queries`.
#[derive(Debug)]
pub struct TrinoEngine {
    dialect: TrinoDialect,
    coordinators: Vec<(String, TrinoClient)>,
}

impl TrinoEngine {
    /// An engine over `coordinators` (each named by its URL); statements in `dialect`.
    pub fn new(dialect: TrinoDialect, coordinators: Vec<TrinoConfig>) -> Result<Self> {
        if coordinators.is_empty() {
            return Err(Error::config(
                "a Trino destination needs at least one coordinator",
            ));
        }
        let mut out = Vec::with_capacity(coordinators.len());
        for c in coordinators {
            let name = redact_url(&c.url);
            if out.iter().any(|(n, _): &(String, TrinoClient)| *n == name) {
                return Err(Error::config(format!("coordinator {name} is listed twice")));
            }
            out.push((name, TrinoClient::new(c)?));
        }
        Ok(Self {
            dialect,
            coordinators: out,
        })
    }

    /// The client of a coordinator.
    pub fn client(&self, coordinator: &str) -> Option<&TrinoClient> {
        self.coordinators
            .iter()
            .find(|(n, _)| n == coordinator)
            .map(|(_, c)| c)
    }

    /// Read one coordinator's load.
    pub async fn probe_coordinator(&self, coordinator: &str) -> Result<CoordinatorLoad> {
        let client = self
            .client(coordinator)
            .ok_or_else(|| Error::config(format!("no Trino coordinator named {coordinator}")))?;
        let probe = TrinoClient {
            config: TrinoConfig {
                source: CRYO_PROBE_SOURCE.into(),
                statement_timeout_ms: client.config.request_timeout_ms,
                max_retries: 1,
                ..client.config.clone()
            },
            http: client.http.clone(),
        };
        let result = probe.execute(PROBE_SQL).await?;
        Ok(classify_queries(
            coordinator,
            &result.rows,
            &client.config.source,
        ))
    }
}

#[async_trait::async_trait]
impl SqlEngine for TrinoEngine {
    fn kind(&self) -> &'static str {
        "trino"
    }

    fn dialect(&self) -> &dyn Dialect {
        &self.dialect
    }

    fn coordinators(&self) -> Vec<String> {
        self.coordinators.iter().map(|(n, _)| n.clone()).collect()
    }

    async fn probe(&self, destination: &str, now_ms: i64) -> Probe {
        let mut loads = Vec::with_capacity(self.coordinators.len());
        for (name, _) in &self.coordinators {
            match self.probe_coordinator(name).await {
                Ok(l) => loads.push(l),
                Err(e) => {
                    return Err(ProbeFailure {
                        destination: destination.to_string(),
                        reason: format!("Trino coordinator {name} could not be probed: {e}"),
                    });
                }
            }
        }
        Ok(LoadSnapshot {
            destination: destination.to_string(),
            taken_at_ms: now_ms,
            coordinators: loads,
        })
    }

    async fn execute(&self, coordinator: &str, sql: &str) -> Result<StatementOutcome> {
        let client = self
            .client(coordinator)
            .ok_or_else(|| Error::config(format!("no Trino coordinator named {coordinator}")))?;
        let r = client.execute(sql).await?;
        let mut o = StatementOutcome::new(Some(r.query_id), r.queued_ms, r.elapsed_ms)
            .with_rows(r.columns, r.rows);
        o.attempts = r.attempts;
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_errors_never_show_credentials() {
        let mut c = TrinoConfig::new("https://trino.example:8443", "etl");
        c.password = Some("hunter2-secret".into());
        let shown = format!("{c:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        let client = TrinoClient::new(c).unwrap();
        assert!(!format!("{client:?}").contains("hunter2"));
        assert_eq!(
            client.scrub("auth failed for hunter2-secret"),
            "auth failed for ***"
        );
    }

    #[test]
    fn config_is_validated() {
        let ok = TrinoConfig::new("http://127.0.0.1:8080", "cryo");
        assert!(ok.validate().is_ok());
        for bad in [
            TrinoConfig::new("ftp://x", "cryo"),
            TrinoConfig::new("http://u:pw@127.0.0.1:8080", "cryo"),
            TrinoConfig::new("not a url", "cryo"),
            TrinoConfig::new("http://127.0.0.1:8080", " "),
            TrinoConfig {
                password: Some("pw-over-http".into()),
                ..ok.clone()
            },
            TrinoConfig {
                user: "bad\nuser".into(),
                ..ok.clone()
            },
        ] {
            let err = bad.validate().unwrap_err();
            assert!(matches!(err, Error::Config { .. }), "{err}");
            assert!(!err.to_string().contains("pw"), "{err}");
        }
    }

    /// A CA certificate (its key was thrown away): only parsed, never used to verify anything.
    const TEST_CA: &str = "-----BEGIN CERTIFICATE-----
MIIBjTCCATOgAwIBAgIUKTi7M82ZrTLD4pa2B6hmKR7sljcwCgYIKoZIzj0EAwIw
HDEaMBgGA1UEAwwRY3J5byB1bml0LXRlc3QgQ0EwHhcNMjYxMjAxMDAwNjMwWhcN
MzYxMTI4MDAwNjMwWjAcMRowGAYDVQQDDBFjcnlvIHVuaXQtdGVzdCBDQTBZMBMG
ByqGSM49AgEGCCqGSM49AwEHA0IABC0zhV6Ce6cSJ67SBiKdV0tgr1t0M6hktUl/
HVZPcIjGyqiqOQlolIu9SIWKH3R+JvBTkH/cuHCJpggykjpTR1ijUzBRMB0GA1Ud
DgQWBBRIK78ezqkpHX5f+H5sz4rD1AVs9TAfBgNVHSMEGDAWgBRIK78ezqkpHX5f
+H5sz4rD1AVs9TAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUCICbO
27ZH3LQ4DnIoZvWTw6FYEq0Nt/DmDHvo1fPY672pAiEAjFPPea4c4bQS8vujaGf5
1/u6Jdq0PVmfZIzmDXwFfi4=
-----END CERTIFICATE-----
";

    #[test]
    fn a_ca_bundle_is_trusted_and_a_bad_one_is_a_config_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = |name: &str, body: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, body).unwrap();
            p.to_str().unwrap().to_string()
        };
        let https = |ca: Option<String>| TrinoConfig {
            ca_cert_path: ca,
            password: Some("pw-in-a-test".into()),
            ..TrinoConfig::new("https://127.0.0.1:8443", "etl")
        };
        // No crypto provider is installed in this process: building https clients must not panic.
        TrinoClient::new(https(None)).unwrap();
        let ca = path("ca.pem", TEST_CA);
        let client = TrinoClient::new(https(Some(ca.clone()))).unwrap();
        assert!(format!("{client:?}").contains("ca.pem"));
        // A bundle with a private key and text around the certificate still holds one.
        path(
            "bundle.pem",
            &format!(
                "comment\n{TEST_CA}-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
            ),
        );
        TrinoClient::new(https(Some(
            dir.path().join("bundle.pem").to_str().unwrap().into(),
        )))
        .unwrap();
        for (bad, says) in [
            (
                dir.path().join("missing.pem").to_str().unwrap().to_string(),
                "cannot read the CA bundle",
            ),
            (
                path("empty.pem", "no certificate here\n"),
                "holds no certificate",
            ),
            (
                path(
                    "broken.pem",
                    "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n",
                ),
                "not valid PEM",
            ),
        ] {
            let err = TrinoClient::new(https(Some(bad.clone()))).unwrap_err();
            assert!(matches!(err, Error::Config { .. }), "{err}");
            assert!(
                err.to_string().contains(says) && err.to_string().contains(&bad),
                "{err}"
            );
            assert!(!err.to_string().contains("pw-in-a-test"), "{err}");
        }
        // A CA for an http coordinator is a mistake, not something to ignore.
        let err = TrinoConfig {
            ca_cert_path: Some(ca),
            ..TrinoConfig::new("http://127.0.0.1:8080", "etl")
        }
        .validate()
        .unwrap_err();
        assert!(err.to_string().contains("https"), "{err}");
    }

    #[test]
    fn backoff_doubles_and_is_bounded() {
        let c = TrinoClient::new(TrinoConfig::default()).unwrap();
        assert_eq!(c.backoff(1), Duration::from_millis(500));
        assert_eq!(c.backoff(2), Duration::from_secs(1));
        assert_eq!(c.backoff(40), Duration::from_mins(1));
    }

    #[test]
    fn queries_are_classified_as_load_and_maintenance() {
        let row = |state: &str, source: &str, q: &str| {
            vec![
                serde_json::Value::from("q"),
                state.into(),
                source.into(),
                q.into(),
            ]
        };
        let rows = vec![
            row("RUNNING", "trino-cli", "SELECT * FROM t"),
            row("QUEUED", "superset", "SELECT 1"),
            row(
                "RUNNING",
                "cryo",
                "ALTER TABLE \"a\".\"b\".\"c\" EXECUTE optimize(file_size_threshold => '96MB')",
            ),
            row(
                "RUNNING",
                "airflow",
                "alter table x execute expire_snapshots(retention_threshold => '7d')",
            ),
            row("RUNNING", CRYO_PROBE_SOURCE, PROBE_SQL),
            row(
                "WAITING_FOR_RESOURCES",
                "cryo",
                "ALTER TABLE t EXECUTE optimize_manifests",
            ),
        ];
        let load = classify_queries("c1", &rows, "cryo");
        assert_eq!(load.running_queries, 3);
        assert_eq!(load.queued_queries, 2);
        assert_eq!(load.maintenance_running, 3);
        assert!(!is_maintenance_sql("SELECT 'execute optimize' AS x"));
        assert!(is_maintenance_sql("ALTER TABLE t EXECUTE optimize"));
    }

    #[tokio::test]
    async fn an_unreachable_coordinator_is_a_typed_engine_error() {
        // Port 9 (discard) on loopback: nothing listens there on these machines.
        let c = TrinoClient::new(TrinoConfig {
            url: "http://127.0.0.1:9".into(),
            max_retries: 3,
            retry_backoff_ms: 40,
            ..TrinoConfig::default()
        })
        .unwrap();
        let started = Instant::now();
        let err = c.execute("SELECT 1").await.unwrap_err();
        // A statement the server never accepted is submitted again, with doubling backoff:
        // 40 + 80 + 160 ms before giving up.
        assert!(
            started.elapsed() >= Duration::from_millis(280),
            "{:?}",
            started.elapsed()
        );
        assert!(
            matches!(
                err,
                Error::Engine {
                    retryable: true,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("cannot connect"), "{err}");
    }
}
