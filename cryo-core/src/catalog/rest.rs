//! Committing to an Iceberg REST catalog, where the server applies the changes.
//!
//! The request is the REST spec's `CommitTableRequest` (serialized by `iceberg-catalog-rest`):
//! the same [`TableChanges`] the SQL and Hadoop committers apply locally. The server checks the
//! requirements against its head, applies the updates and writes the next `metadata.json`, so
//! there is no client-side metadata file and no [`publish`](CatalogCommitter::publish).
//!
//! Configuration is the catalog's own ([`CatalogConfig`], PyIceberg/Java property names): `uri`,
//! `warehouse`, `prefix`, `token`, or OAuth2 client credentials `credential` exchanged at
//! `oauth2-server-uri` (default `{uri}/v1/oauth/tokens`) with `scope` (default `catalog`),
//! `audience` and `resource`, and `header.<name>` extra headers. The prefix and any `uri`
//! override come from `GET /v1/config?warehouse=…` (defaults < properties < server overrides).

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use iceberg::TableUpdate;
use iceberg::spec::TableMetadata;
use iceberg_catalog_rest::{
    CommitTableRequest, CommitTableResponse, CreateTableRequest, ErrorModel, LoadTableResult,
};
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use tokio::sync::OnceCell;

use super::committer::{CatalogCommitter, TableChanges};
use super::create::NewTable;
use crate::catalog::{CatalogConfig, LoadedTable, TableId, props};
use crate::error::{Error, Result};

/// How often a read answered 429 or 503 is tried again (with backoff) before the error.
pub(crate) const READ_RETRIES: u32 = 5;
/// The longest wait between tries, whatever `Retry-After` asks.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// The wait before try `attempt + 1`: the server's `Retry-After` (seconds) if it gave one, else
/// 100 ms doubling per try, with up to a quarter more at random; never over [`MAX_BACKOFF`].
pub(crate) fn backoff(attempt: u32, retry_after: Option<Duration>) -> Duration {
    let base = retry_after.unwrap_or_else(|| {
        let ms = 100_u64.saturating_mul(1 << attempt.min(10));
        Duration::from_millis(ms + rand_jitter(ms / 4))
    });
    base.min(MAX_BACKOFF)
}

fn rand_jitter(max: u64) -> u64 {
    if max == 0 {
        return 0;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()));
    nanos % max
}

/// `Retry-After` in seconds (the HTTP-date form is not used by catalog servers).
fn retry_after(response: &Response) -> Option<Duration> {
    response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// Connection set-up is quick on a healthy server; waiting longer only delays the retry.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A commit can take a while on a busy server (it writes metadata, may run checks); a request
/// that outlives this is reported as "commit state unknown" and resolved by reloading.
const REQUEST_TIMEOUT: Duration = Duration::from_mins(2);
/// The OAuth2 scope Java, `PyIceberg` and iceberg-rust ask for by default.
const DEFAULT_SCOPE: &str = "catalog";
/// Longest server error message kept in an error (bodies can be whole stack traces).
const MAX_MESSAGE: usize = 500;

/// Commits to an Iceberg REST catalog (`POST /v1/{prefix}/namespaces/{ns}/tables/{table}`).
///
/// Unlike the pointer catalogs, the server checks the requirements and writes the metadata:
/// [`commit`](CatalogCommitter::commit) sends the [`TableChanges`] as they are and returns the
/// server's new head, and [`publish`](CatalogCommitter::publish) is not supported. Outcomes:
///
/// | response | result |
/// |---|---|
/// | 200 | the new head |
/// | 409 | [`Error::CommitConflict`] (a requirement failed) |
/// | 404 | [`Error::NotFound`] |
/// | 400, 422 | [`Error::Validation`]: the server refused the changes |
/// | 401 (after one token refresh), 403 | [`Error::Catalog`], not retryable |
/// | 429, 503 | [`Error::Catalog`], retryable: the server did not apply the commit |
/// | 500, 502, 504, other 5xx, timeouts, dropped connections | [`Error::Catalog`], retryable, *commit state unknown* |
///
/// With an unknown state the commit may have happened;
/// [`StagedSnapshot::commit`](crate::commit::StagedSnapshot::commit) reloads the head and reports
/// success when the new snapshot is there. Retrying is safe either way: a retry staged on the
/// reloaded head requires `main` to be at that head, so two attempts can never both commit.
///
/// No credential ever appears in an error or in `Debug` output: messages are scrubbed with
/// [`CatalogConfig::redact`] and of the bearer token obtained at run time.
pub struct RestCommitter {
    config: CatalogConfig,
    uri: String,
    client: reqwest::Client,
    headers: HeaderMap,
    credential: Option<Credential>,
    /// Bearer token: the configured `token`, or the last one exchanged for the credential.
    token: Mutex<Option<String>>,
    endpoint: OnceCell<Endpoint>,
}

/// OAuth2 client credentials and where to exchange them.
struct Credential {
    client_id: Option<String>,
    client_secret: String,
    token_uri: String,
    params: Vec<(&'static str, String)>,
}

/// The server's base URI and prefix, after `/v1/config`.
#[derive(Debug, Clone)]
struct Endpoint {
    uri: String,
    prefix: Vec<String>,
}

impl fmt::Debug for RestCommitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let auth = match (&self.credential, self.has_static_token()) {
            (Some(_), _) => "oauth2 client credentials",
            (None, true) => "bearer token",
            (None, false) => "none",
        };
        f.debug_struct("RestCommitter")
            .field("catalog", &self.config.name)
            .field("uri", &self.config.redact(&self.uri))
            .field("prefix", &self.endpoint.get().map(|e| e.prefix.join("/")))
            .field("auth", &auth)
            .finish_non_exhaustive()
    }
}

/// The REST spec's error body: `{"error": {"message", "type", "code"}}`.
#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorModel,
}

/// `GET /v1/config`.
#[derive(Deserialize, Default)]
struct ConfigResponse {
    #[serde(default)]
    defaults: std::collections::HashMap<String, String>,
    #[serde(default)]
    overrides: std::collections::HashMap<String, String>,
}

/// An OAuth2 token response.
#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
}

impl RestCommitter {
    /// A committer for the REST catalog `config` describes. Nothing is sent until the first
    /// call, which reads `/v1/config` and, with a credential, fetches a token.
    pub fn new(config: &CatalogConfig) -> Result<Self> {
        let uri = config
            .require(props::URI)?
            .trim_end_matches('/')
            .to_string();
        if !(uri.starts_with("http://") || uri.starts_with("https://")) {
            return Err(Error::config(format!(
                "catalog `{}`: REST `uri` must be an http(s) URL",
                config.name
            )));
        }
        let mut headers = HeaderMap::new();
        for (key, value) in &config.properties {
            let Some(name) = key.strip_prefix("header.") else {
                continue;
            };
            let name = HeaderName::from_str(name).map_err(|_| {
                Error::config(format!(
                    "catalog `{}`: `{key}` is not a valid HTTP header name",
                    config.name
                ))
            })?;
            let mut value = HeaderValue::from_str(value).map_err(|_| {
                // Never echo the value: header.* properties often carry credentials.
                Error::config(format!(
                    "catalog `{}`: the value of `{key}` is not a valid HTTP header value",
                    config.name
                ))
            })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let credential = config.get(props::CREDENTIAL).map(|c| {
            let (client_id, client_secret) = match c.split_once(':') {
                Some((id, secret)) => (Some(id.to_string()), secret.to_string()),
                None => (None, c.to_string()),
            };
            let mut params = vec![(
                "scope",
                config
                    .get(props::SCOPE)
                    .unwrap_or(DEFAULT_SCOPE)
                    .to_string(),
            )];
            for key in ["audience", "resource"] {
                if let Some(v) = config.get(key) {
                    params.push((key, v.to_string()));
                }
            }
            Credential {
                client_id,
                client_secret,
                token_uri: config
                    .get(props::OAUTH2_SERVER_URI)
                    .map_or_else(|| format!("{uri}/v1/oauth/tokens"), str::to_string),
                params,
            }
        });
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("cryo/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| {
                Error::config(format!(
                    "catalog `{}`: cannot build an HTTP client: {e}",
                    config.name
                ))
            })?;
        Ok(Self {
            token: Mutex::new(config.get(props::TOKEN).map(str::to_string)),
            config: config.clone(),
            uri,
            client,
            headers,
            credential,
            endpoint: OnceCell::new(),
        })
    }

    fn has_static_token(&self) -> bool {
        self.config.get(props::TOKEN).is_some()
    }

    /// The server prefix in use (after `/v1/config`), e.g. a warehouse's table bucket.
    pub async fn prefix(&self) -> Result<String> {
        Ok(self.endpoint().await?.prefix.join("/"))
    }

    /// `message` without any configured secret or the current bearer token.
    fn scrub(&self, message: &str) -> String {
        let mut out = self.config.redact(message);
        let token = self.token.lock().ok().and_then(|t| t.clone());
        if let Some(t) = token.filter(|t| t.len() >= 8) {
            out = out.replace(&t, "***");
        }
        out
    }

    fn catalog_error(&self, message: &str, retryable: bool) -> Error {
        Error::Catalog {
            catalog: self.config.name.clone(),
            message: self.scrub(message),
            source: None,
            retryable,
        }
    }

    /// A transport failure (no HTTP status): connection refused, reset, timeout.
    fn transport_error(&self, what: &str, e: &reqwest::Error, sent: bool) -> Error {
        // reqwest's Display names the URL (no credentials: they travel in headers); the source
        // chain says why.
        let mut detail = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            detail.push_str(": ");
            detail.push_str(&s.to_string());
            source = s.source();
        }
        let state = if sent && !e.is_connect() {
            "; the request may have reached the server (state unknown)"
        } else {
            ""
        };
        self.catalog_error(&format!("{what}: {detail}{state}"), true)
    }

    async fn endpoint(&self) -> Result<&Endpoint> {
        self.endpoint
            .get_or_try_init(|| async {
                let mut url = self.url(&self.uri, &["v1", "config"])?;
                if let Some(w) = self.config.get(props::WAREHOUSE) {
                    url.query_pairs_mut().append_pair("warehouse", w);
                }
                let response = self
                    .send("read the catalog configuration", |c| c.get(url.clone()))
                    .await?;
                let config: ConfigResponse = if response.status() == StatusCode::OK {
                    self.json(response, "read the catalog configuration")
                        .await?
                } else {
                    return Err(self
                        .status_error(response, "read the catalog configuration")
                        .await);
                };
                let prop = |key: &str| {
                    config
                        .overrides
                        .get(key)
                        .or_else(|| self.config.properties.get(key))
                        .or_else(|| config.defaults.get(key))
                        .cloned()
                };
                let uri = config
                    .overrides
                    .get(props::URI)
                    .map_or_else(|| self.uri.clone(), |u| u.trim_end_matches('/').to_string());
                // The prefix is a piece of path as the server spells it, escapes and all
                // (Nessie's `main%7Cwarehouse`): kept verbatim, as Java's client keeps it.
                let prefix = prop("prefix")
                    .map(|p| {
                        p.split('/')
                            .filter(|s| !s.is_empty())
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                Ok(Endpoint { uri, prefix })
            })
            .await
    }

    /// `base` with `segments` appended, each percent-encoded as one path segment.
    fn url(&self, base: &str, segments: &[&str]) -> Result<url::Url> {
        let mut url = url::Url::parse(base).map_err(|e| {
            Error::config(format!(
                "catalog `{}`: invalid REST uri: {e}",
                self.config.name
            ))
        })?;
        url.path_segments_mut()
            .map_err(|()| {
                Error::config(format!(
                    "catalog `{}`: REST uri cannot take a path",
                    self.config.name
                ))
            })?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }

    /// `{uri}/v1/{prefix}/namespaces/{ns}[/tables[/{table}]]`; namespace levels joined by the
    /// unit separator (0x1F), as the REST spec asks.
    async fn namespace_url(&self, id: &TableId, tail: &[&str]) -> Result<url::Url> {
        let endpoint = self.endpoint().await?;
        let ns = id.namespace.0.join("\u{1f}");
        let mut url = self.url(&endpoint.uri, &["v1"])?;
        with_prefix(&mut url, &endpoint.prefix);
        let mut segments: Vec<&str> = vec!["namespaces", ns.as_str()];
        segments.extend(tail);
        self.url(url.as_str(), &segments)
    }

    async fn table_url(&self, id: &TableId) -> Result<url::Url> {
        self.namespace_url(id, &["tables", &id.name]).await
    }

    /// The bearer token to send, fetching one for the credential when none is cached.
    async fn bearer(&self, refresh: bool) -> Result<Option<String>> {
        if !refresh && let Some(t) = self.token.lock().ok().and_then(|t| t.clone()) {
            return Ok(Some(t));
        }
        let Some(cred) = &self.credential else {
            return Ok(self.token.lock().ok().and_then(|t| t.clone()));
        };
        let mut form: Vec<(&str, &str)> = vec![("grant_type", "client_credentials")];
        if let Some(id) = &cred.client_id {
            form.push(("client_id", id));
        }
        form.push(("client_secret", &cred.client_secret));
        form.extend(cred.params.iter().map(|(k, v)| (*k, v.as_str())));
        let response = self
            .client
            .post(&cred.token_uri)
            .headers(self.headers.clone())
            .form(&form)
            .send()
            .await
            .map_err(|e| self.transport_error("fetch an OAuth2 token", &e, false))?;
        let status = response.status();
        if status != StatusCode::OK {
            let body = response.text().await.unwrap_or_default();
            let message = format!(
                "fetch an OAuth2 token: HTTP {status}: {}",
                truncate(&body, MAX_MESSAGE)
            );
            return Err(self.catalog_error(&message, status.is_server_error()));
        }
        let token: TokenResponse = response.json().await.map_err(|e| {
            self.catalog_error(
                &format!("fetch an OAuth2 token: unexpected response: {e}"),
                false,
            )
        })?;
        if let Ok(mut t) = self.token.lock() {
            *t = Some(token.access_token.clone());
        }
        Ok(Some(token.access_token))
    }

    /// Send a request with the configured headers and bearer token; on 401, with a credential,
    /// fetch a new token and send it once more (tokens expire; a 401 means nothing was applied).
    async fn send(
        &self,
        what: &str,
        build: impl Fn(&reqwest::Client) -> RequestBuilder,
    ) -> Result<Response> {
        let (mut refreshed, mut throttled) = (false, 0_u32);
        loop {
            let mut request = build(&self.client).headers(self.headers.clone());
            if let Some(token) = self.bearer(refreshed).await? {
                let mut value =
                    HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                        self.catalog_error(
                            &format!("{what}: the token is not a valid header"),
                            false,
                        )
                    })?;
                value.set_sensitive(true);
                request = request.header(AUTHORIZATION, value);
            }
            let request = request
                .build()
                .map_err(|e| self.transport_error(what, &e, false))?;
            // Reads are tried again when the server sheds load; a commit's 429/503 goes back to
            // the commit driver, which reloads and backs off by the table's retry properties.
            let read = matches!(*request.method(), Method::GET | Method::HEAD);
            let response = self
                .client
                .execute(request)
                .await
                .map_err(|e| self.transport_error(what, &e, true))?;
            let status = response.status();
            if status == StatusCode::UNAUTHORIZED && self.credential.is_some() && !refreshed {
                refreshed = true;
                continue;
            }
            if read
                && matches!(
                    status,
                    StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
                )
                && throttled < READ_RETRIES
            {
                let wait = backoff(throttled, retry_after(&response));
                throttled += 1;
                tracing::debug!(what, %status, wait_ms = wait.as_millis() as u64, "the catalog is shedding load; trying again");
                tokio::time::sleep(wait).await;
                continue;
            }
            return Ok(response);
        }
    }

    async fn json<T: DeserializeOwned>(&self, response: Response, what: &str) -> Result<T> {
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.transport_error(what, &e, true))?;
        serde_json::from_slice(&bytes).map_err(|e| {
            self.catalog_error(
                &format!("{what}: the server's response does not match the REST spec: {e}"),
                false,
            )
        })
    }

    /// The error for a non-success response outside a commit.
    async fn status_error(&self, response: Response, what: &str) -> Error {
        let status = response.status();
        let message = format!("{what}: {}", self.describe(response).await);
        match status {
            StatusCode::NOT_FOUND => Error::NotFound {
                what: self.scrub(&message),
            },
            StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => Error::Validation {
                message: self.scrub(&message),
            },
            s => self.catalog_error(
                &message,
                s.is_server_error() || s == StatusCode::TOO_MANY_REQUESTS,
            ),
        }
    }

    /// `HTTP <status>: <server message>` from an error response.
    async fn describe(&self, response: Response) -> String {
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        let detail = match serde_json::from_str::<ErrorBody>(&body) {
            Ok(b) => format!("{} ({})", b.error.message, b.error.r#type),
            Err(_) => body,
        };
        format!("HTTP {status}: {}", truncate(detail.trim(), MAX_MESSAGE))
    }

    /// The table as the server has it now (`GET …/tables/{table}`).
    pub async fn load_table_result(&self, id: &TableId) -> Result<LoadTableResult> {
        let url = self.table_url(id).await?;
        let what = format!("load table {id}");
        let response = self.send(&what, |c| c.get(url.clone())).await?;
        if response.status() == StatusCode::OK {
            self.json(response, &what).await
        } else {
            Err(self.status_error(response, &what).await)
        }
    }

    /// Create a table (`POST …/namespaces/{ns}/tables`); the server picks the location unless
    /// the table gives one and writes the first `metadata.json`.
    pub(crate) async fn create_table(&self, id: &TableId, table: NewTable) -> Result<()> {
        if let Some(l) = &table.location {
            super::create::check_new_location(&id.to_string(), l)?;
        }
        let url = self.namespace_url(id, &["tables"]).await?;
        let mut properties = table.properties;
        // The REST spec has no format-version field: servers take it from this property.
        properties
            .entry("format-version".to_string())
            .or_insert_with(|| (table.format_version as u8).to_string());
        let request = CreateTableRequest {
            name: id.name.clone(),
            location: table.location,
            schema: table.schema,
            partition_spec: Some(table.partition_spec),
            write_order: Some(table.sort_order),
            stage_create: Some(false),
            properties,
        };
        let what = format!("create table {id}");
        let response = self
            .send(&what, |c| c.post(url.clone()).json(&request))
            .await?;
        match response.status() {
            StatusCode::OK => Ok(()),
            StatusCode::CONFLICT => {
                Err(self.catalog_error(&format!("{what}: the table already exists"), false))
            }
            _ => Err(self.status_error(response, &what).await),
        }
    }

    /// The error for a commit the server did not answer with 200.
    async fn commit_error(
        &self,
        response: Response,
        id: &TableId,
        changes: &TableChanges,
    ) -> Error {
        let status = response.status();
        let described = self.describe(response).await;
        let what = format!("commit to {id}");
        match status {
            StatusCode::CONFLICT => Error::CommitConflict {
                retryable: true,
                table: id.to_string(),
                message: self.scrub(&format!("the server refused the requirements: {described}")),
            },
            StatusCode::NOT_FOUND => Error::NotFound {
                what: self.scrub(&format!("table {id}: {described}")),
            },
            StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => Error::Validation {
                message: self.scrub(&format!(
                    "{what}: the server refused the changes: {described}"
                )),
            },
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => self.catalog_error(
                &format!("{what}: {described}; not applied, try again"),
                true,
            ),
            s if s.is_server_error() => self.catalog_error(
                &format!(
                    "{what}: {described}; commit state unknown{}",
                    snapshot_hint(changes)
                ),
                true,
            ),
            _ => self.catalog_error(&format!("{what}: {described}"), false),
        }
    }
}

/// Names the snapshot a commit adds, so an unknown outcome can be checked by hand.
fn snapshot_hint(changes: &TableChanges) -> String {
    changes
        .updates
        .iter()
        .find_map(|u| match u {
            TableUpdate::AddSnapshot { snapshot } => Some(format!(
                " (look for snapshot {} in the table's history)",
                snapshot.snapshot_id()
            )),
            _ => None,
        })
        .unwrap_or_default()
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[async_trait]
impl CatalogCommitter for RestCommitter {
    async fn load_head(&self, base: &LoadedTable) -> Result<LoadedTable> {
        let loaded = self.load_table_result(&base.id).await?;
        Ok(LoadedTable {
            id: base.id.clone(),
            metadata_location: loaded.metadata_location,
            metadata: Arc::new(loaded.metadata),
            storage: base.storage.clone(),
            file_io: base.file_io.clone(),
        })
    }

    /// Send `changes` to the server, which checks the requirements against its head and
    /// applies the updates; returns the server's new head.
    async fn commit(&self, base: &LoadedTable, changes: TableChanges) -> Result<LoadedTable> {
        let id = &base.id;
        let request = CommitTableRequest {
            identifier: Some(id.to_iceberg()?),
            requirements: changes.requirements.clone(),
            updates: changes.updates.clone(),
        };
        let url = self.table_url(id).await?;
        let what = format!("commit to {id}");
        let response = self
            .send(&what, |c| {
                c.request(Method::POST, url.clone()).json(&request)
            })
            .await?;
        if response.status() != StatusCode::OK {
            return Err(self.commit_error(response, id, &changes).await);
        }
        let committed: CommitTableResponse = self.json(response, &what).await?;
        Ok(LoadedTable {
            id: id.clone(),
            metadata_location: Some(committed.metadata_location),
            metadata: Arc::new(committed.metadata),
            storage: base.storage.clone(),
            file_io: base.file_io.clone(),
        })
    }

    async fn publish(&self, head: &LoadedTable, _metadata: &TableMetadata) -> Result<String> {
        Err(Error::unsupported(format!(
            "{}: a REST catalog writes table metadata on the server; commit through \
             CatalogCommitter::commit",
            head.id
        )))
    }
}

/// `url`'s path with the server's `prefix` segments appended verbatim: they are path as the
/// server spells it (escapes included), not names to escape once more.
fn with_prefix(url: &mut url::Url, prefix: &[String]) {
    if prefix.is_empty() {
        return;
    }
    let path = format!("{}/{}", url.path().trim_end_matches('/'), prefix.join("/"));
    url.set_path(&path);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &[(&str, &str)]) -> CatalogConfig {
        let mut props = vec![("type", "rest"), ("uri", "http://127.0.0.1:1/api/")];
        props.extend_from_slice(extra);
        CatalogConfig::new("r", props)
    }

    #[test]
    fn backoff_doubles_honours_retry_after_and_is_capped() {
        for attempt in 0..4 {
            let w = backoff(attempt, None).as_millis() as u64;
            let base = 100 << attempt;
            assert!((base..=base + base / 4).contains(&w), "{attempt}: {w}");
        }
        assert_eq!(
            backoff(0, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(backoff(0, Some(Duration::from_secs(61))), MAX_BACKOFF);
        assert_eq!(backoff(30, None), MAX_BACKOFF);
    }

    #[test]
    fn the_prefix_goes_into_urls_as_the_server_spells_it() {
        // Nessie's `/v1/config` gives `main%7Cwh` for branch `main`, warehouse `wh`.
        let c = RestCommitter::new(&config(&[])).unwrap();
        let mut url = c.url("http://127.0.0.1:1/iceberg/", &["v1"]).unwrap();
        with_prefix(&mut url, &["main%7Cwh".to_string(), "x y".to_string()]);
        let url = c.url(url.as_str(), &["namespaces", "a\u{1f}b"]).unwrap();
        assert_eq!(url.path(), "/iceberg/v1/main%7Cwh/x%20y/namespaces/a%1Fb");
        let mut plain = c.url("http://127.0.0.1:1", &["v1"]).unwrap();
        with_prefix(&mut plain, &[]);
        assert_eq!(plain.path(), "/v1");
    }

    #[test]
    fn debug_and_errors_never_show_credentials() {
        let c = RestCommitter::new(&config(&[
            ("credential", "client:sup3r-secret"),
            ("header.x-api-key", "k3y-value"),
            ("token", "tok-abcdef123"),
        ]))
        .unwrap();
        let dbg = format!("{c:?}");
        for s in ["sup3r-secret", "k3y-value", "tok-abcdef123"] {
            assert!(!dbg.contains(s), "{s} in {dbg}");
        }
        *c.token.lock().unwrap() = Some("runtime-token-xyz".into());
        let e = c.catalog_error("echo sup3r-secret k3y-value runtime-token-xyz", false);
        let shown = format!("{e} {e:?}");
        for s in ["sup3r-secret", "k3y-value", "runtime-token-xyz"] {
            assert!(!shown.contains(s), "{s} in {shown}");
        }
    }

    #[test]
    fn bad_configuration_is_refused_without_echoing_values() {
        let e = RestCommitter::new(&config(&[("header.bad name", "v")])).unwrap_err();
        assert!(matches!(e, Error::Config { .. }), "{e}");
        let e =
            RestCommitter::new(&config(&[("header.x-secret", "line\nbreak-s3cret")])).unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
        let e =
            RestCommitter::new(&CatalogConfig::new("r", [("uri", "sqlite:///x.db")])).unwrap_err();
        assert!(matches!(e, Error::Config { .. }), "{e}");
    }

    #[test]
    fn urls_encode_namespaces_and_prefixes() {
        let c = RestCommitter::new(&config(&[])).unwrap();
        let url = c
            .url(
                "http://h:8181/api",
                &[
                    "v1",
                    "ice",
                    "wh",
                    "namespaces",
                    "a\u{1f}b c",
                    "tables",
                    "t/x",
                ],
            )
            .unwrap();
        assert_eq!(
            url.as_str(),
            "http://h:8181/api/v1/ice/wh/namespaces/a%1Fb%20c/tables/t%2Fx"
        );
        assert_eq!(truncate("héllo", 2), "hé");
    }

    #[tokio::test]
    async fn unreachable_servers_are_retryable_catalog_errors() {
        let c = RestCommitter::new(&config(&[("warehouse", "w")])).unwrap();
        let e = c.prefix().await.unwrap_err();
        assert!(
            matches!(e, Error::Catalog { .. }) && e.is_retryable(),
            "{e}"
        );
    }
}
