//! AWS Glue Data Catalog: list, load and commit over Glue's JSON API (`AWSGlue.*` targets, AWS JSON
//! 1.1, Signature Version 4), configured with PyIceberg's property names.
//!
//! A Glue database is a namespace (one level); an Iceberg table is a Glue table whose
//! `table_type` parameter is `ICEBERG` and whose `metadata_location` parameter points at its
//! current `metadata.json`. A commit swaps that parameter the way Java's `GlueTableOperations`
//! does: read the table, check `metadata_location` is still the head the commit was built on, then
//! `UpdateTable` with the `VersionId` that was read (Glue refuses it with
//! `ConcurrentModificationException` if the table changed in between), carrying every other field
//! of the table over and recording `previous_metadata_location`.
//!
//! Upstream's `iceberg-catalog-glue` is not used: its commit sends no `VersionId` check Cryo's
//! committer can rely on, and the AWS SDK it links is minutes of build on two cores for four calls.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::{CatalogConfig, Namespace, TableId};
use crate::error::{Error, Result};

/// Glue's region.
pub const GLUE_REGION: &str = "glue.region";
/// Glue endpoint URL (for emulators and VPC endpoints).
pub const GLUE_ENDPOINT: &str = "glue.endpoint";
/// The Glue catalog id (an AWS account id) when not the caller's own.
pub const GLUE_ID: &str = "glue.id";
/// Glue access key id.
pub const GLUE_ACCESS_KEY_ID: &str = "glue.access-key-id";
/// Glue secret access key.
pub const GLUE_SECRET_ACCESS_KEY: &str = "glue.secret-access-key";
/// Glue session token.
pub const GLUE_SESSION_TOKEN: &str = "glue.session-token";
/// Whether `UpdateTable` skips archiving the old table version (PyIceberg's and Java's default:
/// `true`).
pub const GLUE_SKIP_ARCHIVE: &str = "glue.skip-archive";

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const REQUEST_TIMEOUT: Duration = Duration::from_mins(1);
/// The fields of a Glue `Table` that its `TableInput` takes back (the rest are read-only).
const TABLE_INPUT_FIELDS: &[&str] = &[
    "Name",
    "Description",
    "Owner",
    "LastAccessTime",
    "LastAnalyzedTime",
    "Retention",
    "StorageDescriptor",
    "PartitionKeys",
    "ViewOriginalText",
    "ViewExpandedText",
    "TableType",
    "Parameters",
    "TargetTable",
];

struct Credentials {
    key_id: String,
    secret: String,
    token: Option<String>,
}

/// A Glue client for one catalog configuration.
pub(crate) struct GlueClient {
    config: CatalogConfig,
    endpoint: url::Url,
    region: String,
    catalog_id: Option<String>,
    skip_archive: bool,
    credentials: Credentials,
    http: reqwest::Client,
}

impl std::fmt::Debug for GlueClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlueClient")
            .field("catalog", &self.config.name)
            .field("endpoint", &self.endpoint.as_str())
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

/// One Glue table, as `GetTable` returned it.
pub(crate) struct GlueTable {
    table: Map<String, Value>,
}

impl GlueTable {
    fn parameter(&self, key: &str) -> Option<&str> {
        self.table
            .get("Parameters")
            .and_then(|p| p.get(key))
            .and_then(Value::as_str)
    }

    fn is_iceberg(&self) -> bool {
        self.parameter("table_type")
            .is_some_and(|t| t.eq_ignore_ascii_case("iceberg"))
    }

    fn version_id(&self) -> Option<&str> {
        self.table.get("VersionId").and_then(Value::as_str)
    }
}

fn env(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

impl GlueClient {
    /// A client for the catalog `config` describes; nothing is sent yet.
    pub(crate) fn new(config: &CatalogConfig) -> Result<Self> {
        let get = |keys: &[&str]| keys.iter().find_map(|k| config.get(k).map(str::to_string));
        let region = get(&[GLUE_REGION, super::props::CLIENT_REGION])
            .or_else(|| env("AWS_REGION"))
            .or_else(|| env("AWS_DEFAULT_REGION"))
            .ok_or_else(|| {
                Error::config(format!(
                    "catalog `{}`: a Glue catalog needs a region: `glue.region` (or `client.region`, AWS_REGION)",
                    config.name
                ))
            })?;
        let endpoint =
            get(&[GLUE_ENDPOINT]).unwrap_or_else(|| format!("https://glue.{region}.amazonaws.com"));
        let endpoint = url::Url::parse(&endpoint)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
            .ok_or_else(|| {
                Error::config(format!(
                    "catalog `{}`: `glue.endpoint` must be an http(s) URL",
                    config.name
                ))
            })?;
        let key_id = get(&[GLUE_ACCESS_KEY_ID, super::props::CLIENT_ACCESS_KEY_ID])
            .or_else(|| env("AWS_ACCESS_KEY_ID"));
        let secret = get(&[
            GLUE_SECRET_ACCESS_KEY,
            super::props::CLIENT_SECRET_ACCESS_KEY,
        ])
        .or_else(|| env("AWS_SECRET_ACCESS_KEY"));
        let token = get(&[GLUE_SESSION_TOKEN, super::props::CLIENT_SESSION_TOKEN])
            .or_else(|| env("AWS_SESSION_TOKEN"));
        let (Some(key_id), Some(secret)) = (key_id, secret) else {
            return Err(Error::config(format!(
                "catalog `{}`: a Glue catalog needs credentials: `glue.access-key-id` and \
                 `glue.secret-access-key` (or `client.*`, or AWS_ACCESS_KEY_ID and \
                 AWS_SECRET_ACCESS_KEY); profiles and instance roles are not supported yet",
                config.name
            )));
        };
        let skip_archive = config
            .get(GLUE_SKIP_ARCHIVE)
            .is_none_or(|v| !v.eq_ignore_ascii_case("false"));
        let http = reqwest::Client::builder()
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
            config: config.clone(),
            endpoint,
            region,
            catalog_id: get(&[GLUE_ID]),
            skip_archive,
            credentials: Credentials {
                key_id,
                secret,
                token,
            },
            http,
        })
    }

    fn error(&self, message: &str, retryable: bool) -> Error {
        Error::Catalog {
            catalog: self.config.name.clone(),
            message: self.config.redact(message),
            source: None,
            retryable,
        }
    }

    /// Sign and send one Glue call; its JSON answer, or a typed error.
    async fn call(&self, what: &str, operation: &str, mut body: Value) -> Result<Value> {
        if let (Some(id), Some(obj)) = (&self.catalog_id, body.as_object_mut()) {
            obj.insert("CatalogId".into(), Value::String(id.clone()));
        }
        let payload = serde_json::to_vec(&body)
            .map_err(|e| Error::Internal(format!("Glue request body: {e}")))?;
        // Reads are tried again when Glue throttles; an update's throttling goes back to the
        // commit driver, which reloads and backs off by the table's retry properties.
        let read = operation.starts_with("Get");
        let mut throttled = 0;
        loop {
            let now = chrono::Utc::now();
            let headers = self.signed_headers(operation, &payload, now);
            let mut request = self.http.post(self.endpoint.clone()).body(payload.clone());
            for (k, v) in headers {
                request = request.header(k, v);
            }
            let response = request.send().await.map_err(|e| {
                let state = if e.is_connect() {
                    ""
                } else {
                    "; the request may have reached the server (state unknown)"
                };
                self.error(&format!("{what}: {e}{state}"), true)
            })?;
            let status = response.status();
            let text = response
                .text()
                .await
                .map_err(|e| self.error(&format!("{what}: reading the answer: {e}"), true))?;
            if status.is_success() {
                return serde_json::from_str(if text.is_empty() { "{}" } else { &text }).map_err(
                    |e| self.error(&format!("{what}: the answer is not JSON: {e}"), false),
                );
            }
            let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let kind = answer
                .get("__type")
                .and_then(Value::as_str)
                .map(|t| t.rsplit('#').next().unwrap_or(t).to_string())
                .unwrap_or_default();
            let shed = kind == "ThrottlingException"
                || status == StatusCode::TOO_MANY_REQUESTS
                || status == StatusCode::SERVICE_UNAVAILABLE;
            if read && shed && throttled < super::rest::READ_RETRIES {
                let wait = super::rest::backoff(throttled, None);
                throttled += 1;
                tracing::debug!(what, %status, wait_ms = wait.as_millis() as u64, "Glue is throttling; trying again");
                tokio::time::sleep(wait).await;
                continue;
            }
            let message = answer
                .get("message")
                .or_else(|| answer.get("Message"))
                .and_then(Value::as_str)
                .unwrap_or("");
            return Err(self.glue_error(what, status, &kind, message));
        }
    }

    fn glue_error(&self, what: &str, status: StatusCode, kind: &str, message: &str) -> Error {
        let detail = format!("{what}: Glue answered {status} {kind}: {message}");
        match kind {
            "EntityNotFoundException" => Error::NotFound {
                what: self.config.redact(&format!(
                    "{what} in Glue catalog `{}`: {message}",
                    self.config.name
                )),
            },
            "ConcurrentModificationException" => Error::CommitConflict {
                table: what.to_string(),
                message: self.config.redact(&detail),
                retryable: true,
            },
            "ThrottlingException"
            | "InternalServiceException"
            | "OperationTimeoutException"
            | "ResourceNumberLimitExceededException" => self.error(&detail, true),
            "AccessDeniedException"
            | "UnrecognizedClientException"
            | "InvalidSignatureException"
            | "ExpiredTokenException"
            | "InvalidClientTokenId"
            | "SignatureDoesNotMatch" => {
                self.error(&format!("{detail} (the credentials were refused)"), false)
            }
            _ => self.error(
                &detail,
                status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error(),
            ),
        }
    }

    /// Signature Version 4 headers for a POST of `payload` to the endpoint's root.
    fn signed_headers(
        &self,
        operation: &str,
        payload: &[u8],
        now: chrono::DateTime<chrono::Utc>,
    ) -> Vec<(&'static str, String)> {
        let amz_date = now.format("%Y%m%dT%H%M%SZ").to_string();
        let date = &amz_date[..8];
        let host = match self.endpoint.port() {
            Some(port) => format!("{}:{port}", self.endpoint.host_str().unwrap_or_default()),
            None => self.endpoint.host_str().unwrap_or_default().to_string(),
        };
        let mut headers: BTreeMap<&'static str, String> = BTreeMap::from([
            ("content-type", "application/x-amz-json-1.1".to_string()),
            ("host", host),
            ("x-amz-date", amz_date.clone()),
            ("x-amz-target", format!("AWSGlue.{operation}")),
        ]);
        if let Some(token) = &self.credentials.token {
            headers.insert("x-amz-security-token", token.clone());
        }
        let signed: Vec<&str> = headers.keys().copied().collect();
        let canonical_headers = headers.iter().fold(String::new(), |mut out, (k, v)| {
            let _ = writeln!(out, "{k}:{}", v.trim());
            out
        });
        let path = if self.endpoint.path().is_empty() {
            "/"
        } else {
            self.endpoint.path()
        };
        let canonical_request = format!(
            "POST\n{path}\n\n{canonical_headers}\n{}\n{}",
            signed.join(";"),
            hex(&Sha256::digest(payload))
        );
        let scope = format!("{date}/{}/glue/aws4_request", self.region);
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
            hex(&Sha256::digest(canonical_request.as_bytes()))
        );
        let mut key = hmac(
            format!("AWS4{}", self.credentials.secret).as_bytes(),
            date.as_bytes(),
        );
        for part in [self.region.as_str(), "glue", "aws4_request"] {
            key = hmac(&key, part.as_bytes());
        }
        let signature = hex(&hmac(&key, to_sign.as_bytes()));
        headers.insert(
            "authorization",
            format!(
                "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={}, Signature={signature}",
                self.credentials.key_id,
                signed.join(";")
            ),
        );
        headers.remove("host");
        headers.into_iter().collect()
    }

    fn database(ns: &Namespace) -> Result<&str> {
        ns.single_level("a Glue database")
    }

    /// Every database.
    pub(crate) async fn list_namespaces(&self) -> Result<Vec<Namespace>> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut body = json!({});
            if let Some(t) = &token {
                body["NextToken"] = Value::String(t.clone());
            }
            let page = self.call("list databases", "GetDatabases", body).await?;
            for db in page
                .get("DatabaseList")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(name) = db.get("Name").and_then(Value::as_str) {
                    out.push(Namespace::new([name]));
                }
            }
            token = next_token(&page);
            if token.is_none() {
                break;
            }
        }
        out.sort();
        Ok(out)
    }

    /// The Iceberg tables of one database.
    pub(crate) async fn list_tables(&self, ns: &Namespace) -> Result<Vec<TableId>> {
        let db = Self::database(ns)?;
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut body = json!({ "DatabaseName": db });
            if let Some(t) = &token {
                body["NextToken"] = Value::String(t.clone());
            }
            let page = self
                .call(&format!("list tables in {ns}"), "GetTables", body)
                .await?;
            for table in page
                .get("TableList")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let Some(obj) = table.as_object() else {
                    continue;
                };
                let t = GlueTable { table: obj.clone() };
                if let (true, Some(name)) =
                    (t.is_iceberg(), obj.get("Name").and_then(Value::as_str))
                {
                    out.push(TableId::new(ns.clone(), name));
                }
            }
            token = next_token(&page);
            if token.is_none() {
                break;
            }
        }
        out.sort();
        Ok(out)
    }

    /// One table as Glue holds it; `NotFound` if it is absent or not an Iceberg table.
    pub(crate) async fn get_table(&self, id: &TableId) -> Result<GlueTable> {
        let db = Self::database(&id.namespace)?;
        let answer = self
            .call(
                &format!("table {id}"),
                "GetTable",
                json!({ "DatabaseName": db, "Name": id.name }),
            )
            .await?;
        let table = answer
            .get("Table")
            .and_then(Value::as_object)
            .cloned()
            .ok_or_else(|| self.error(&format!("table {id}: GetTable answered no table"), false))?;
        let table = GlueTable { table };
        if !table.is_iceberg() {
            return Err(Error::NotFound {
                what: format!(
                    "Iceberg table {id} in Glue catalog `{}` (the Glue table is not `table_type=ICEBERG`)",
                    self.config.name
                ),
            });
        }
        Ok(table)
    }

    /// The table's current `metadata.json`.
    pub(crate) async fn metadata_location(&self, id: &TableId) -> Result<String> {
        let table = self.get_table(id).await?;
        table
            .parameter("metadata_location")
            .map(str::to_string)
            .ok_or_else(|| {
                Error::metadata(
                    id,
                    "<catalog>",
                    "the Glue table has no metadata_location parameter",
                )
            })
    }

    /// Create a database (`AlreadyExists` is not an error).
    pub(crate) async fn create_database(&self, ns: &Namespace) -> Result<()> {
        let db = Self::database(ns)?;
        match self
            .call(
                &format!("create namespace {ns}"),
                "CreateDatabase",
                json!({ "DatabaseInput": { "Name": db } }),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(Error::Catalog { message, .. }) if message.contains("AlreadyExistsException") => {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Register an existing table (its `metadata.json` at `metadata_location`, its files under
    /// `location`) as a Glue Iceberg table.
    pub(crate) async fn register_table(
        &self,
        id: &TableId,
        location: &str,
        metadata_location: &str,
    ) -> Result<()> {
        let db = Self::database(&id.namespace)?;
        self.call(
            &format!("register {id}"),
            "CreateTable",
            json!({
                "DatabaseName": db,
                "TableInput": {
                    "Name": id.name,
                    "TableType": "EXTERNAL_TABLE",
                    "Parameters": { "table_type": "ICEBERG", "metadata_location": metadata_location, "EXTERNAL": "TRUE" },
                    "StorageDescriptor": { "Location": location },
                }
            }),
        )
        .await
        .map(|_| ())
    }

    /// Swap the table's `metadata_location` from `expected` to `new`: `Ok(false)` when another
    /// writer moved it first (seen before the update, or refused by Glue's `VersionId` check).
    pub(crate) async fn swap_metadata_location(
        &self,
        id: &TableId,
        expected: &str,
        new: &str,
    ) -> Result<bool> {
        let table = self.get_table(id).await?;
        if table.parameter("metadata_location") != Some(expected) {
            return Ok(false);
        }
        let mut input = Map::new();
        for key in TABLE_INPUT_FIELDS {
            if let Some(v) = table.table.get(*key) {
                input.insert((*key).to_string(), v.clone());
            }
        }
        let mut parameters = input
            .get("Parameters")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        parameters.insert("metadata_location".into(), Value::String(new.into()));
        parameters.insert(
            "previous_metadata_location".into(),
            Value::String(expected.into()),
        );
        parameters.insert("table_type".into(), Value::String("ICEBERG".into()));
        input.insert("Parameters".into(), Value::Object(parameters));
        input
            .entry("TableType")
            .or_insert_with(|| Value::String("EXTERNAL_TABLE".into()));
        let mut body = json!({
            "DatabaseName": Self::database(&id.namespace)?,
            "TableInput": input,
            "SkipArchive": self.skip_archive,
        });
        if let Some(version) = table.version_id() {
            body["VersionId"] = Value::String(version.to_string());
        }
        match self
            .call(&format!("commit {id}"), "UpdateTable", body)
            .await
        {
            Ok(_) => Ok(true),
            Err(Error::CommitConflict { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

fn next_token(page: &Value) -> Option<String> {
    page.get("NextToken")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes keys of any length.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AWS's published Signature Version 4 example key derivation and signature
    /// (`wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY`, 20150830, us-east-1, iam).
    #[test]
    fn signing_key_matches_aws_example() {
        let mut key = hmac(b"AWS4wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", b"20150830");
        for part in ["us-east-1", "iam", "aws4_request"] {
            key = hmac(&key, part.as_bytes());
        }
        assert_eq!(
            hex(&key),
            "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9"
        );
        let to_sign = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/iam/aws4_request\nf536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59";
        assert_eq!(
            hex(&hmac(&key, to_sign.as_bytes())),
            "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
        );
    }

    #[test]
    fn configuration_errors_name_what_is_missing_and_no_secret() {
        let c = |p: &[(&str, &str)]| CatalogConfig::new("g", p.iter().copied());
        let e = GlueClient::new(&c(&[("type", "glue"), ("glue.region", "us-east-1")]));
        // Only when the environment holds no credentials either.
        if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
            let msg = e.unwrap_err().to_string();
            assert!(msg.contains("needs credentials"), "{msg}");
        }
        let e = GlueClient::new(&c(&[
            ("glue.region", "us-east-1"),
            ("glue.endpoint", "not a url"),
            ("glue.access-key-id", "AKIDEXAMPLE"),
            ("glue.secret-access-key", "planted-secret-x"),
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("glue.endpoint"), "{e}");
        assert!(!e.to_string().contains("planted-secret-x"));
        let ok = GlueClient::new(&c(&[
            ("glue.region", "eu-west-1"),
            ("glue.access-key-id", "AKIDEXAMPLE"),
            ("glue.secret-access-key", "planted-secret-x"),
        ]))
        .unwrap();
        assert_eq!(
            ok.endpoint.as_str(),
            "https://glue.eu-west-1.amazonaws.com/"
        );
        assert!(!format!("{ok:?}").contains("planted-secret-x"));
        let headers = ok.signed_headers("GetTable", b"{}", chrono::Utc::now());
        let auth = &headers
            .iter()
            .find(|(k, _)| *k == "authorization")
            .unwrap()
            .1;
        assert!(auth.contains("/eu-west-1/glue/aws4_request"), "{auth}");
        assert!(
            auth.contains("SignedHeaders=content-type;host;x-amz-date;x-amz-target"),
            "{auth}"
        );
        assert!(!auth.contains("planted-secret-x"));
    }
}
