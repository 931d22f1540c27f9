//! Catalog and storage property names, spelled as PyIceberg and Java spell them, so a user can
//! paste the configuration they already have.

/// Catalog type: `sql`, `rest`, `hadoop` or `static`. Inferred from `uri` when absent.
pub const TYPE: &str = "type";
/// SQL: SQLAlchemy / JDBC URI of the catalog database. REST: base URL of the catalog server.
pub const URI: &str = "uri";
/// Warehouse location (SQL/Hadoop: a path or URL; REST: the warehouse name sent to `/v1/config`).
pub const WAREHOUSE: &str = "warehouse";
/// REST: a bearer token.
pub const TOKEN: &str = "token";
/// REST: OAuth2 client credentials, `client_id:client_secret`.
pub const CREDENTIAL: &str = "credential";
/// REST: OAuth2 token endpoint, if not `<uri>/v1/oauth/tokens`.
pub const OAUTH2_SERVER_URI: &str = "oauth2-server-uri";
/// REST: OAuth2 scope.
pub const SCOPE: &str = "scope";
/// Static: location of one table's `metadata.json` (or its table directory).
pub const METADATA_LOCATION: &str = "metadata-location";

/// S3 endpoint URL (for S3-compatible servers).
pub const S3_ENDPOINT: &str = "s3.endpoint";
/// S3 access key id.
pub const S3_ACCESS_KEY_ID: &str = "s3.access-key-id";
/// S3 secret access key.
pub const S3_SECRET_ACCESS_KEY: &str = "s3.secret-access-key";
/// S3 session token.
pub const S3_SESSION_TOKEN: &str = "s3.session-token";
/// S3 region.
pub const S3_REGION: &str = "s3.region";
/// Region for all clients.
pub const CLIENT_REGION: &str = "client.region";
/// Java's switch for path-style S3 requests.
pub const S3_PATH_STYLE_ACCESS: &str = "s3.path-style-access";
/// PyIceberg's switch for virtual-hosted S3 requests.
pub const S3_FORCE_VIRTUAL_ADDRESSING: &str = "s3.force-virtual-addressing";
/// Anonymous S3 access.
pub const S3_ALLOW_ANONYMOUS: &str = "s3.allow-anonymous";

/// Whether a property holds a credential that must never be logged, stored or shown.
pub fn is_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "secret",
        "token",
        "credential",
        "password",
        "access-key",
        "sas",
        "account-key",
        "private",
    ]
    .iter()
    .any(|s| k.contains(s))
        || k.starts_with("header.")
}

/// PyIceberg's shared AWS access key id (used for S3 when `s3.access-key-id` is not set).
pub const CLIENT_ACCESS_KEY_ID: &str = "client.access-key-id";
/// PyIceberg's shared AWS secret access key.
pub const CLIENT_SECRET_ACCESS_KEY: &str = "client.secret-access-key";
/// PyIceberg's shared AWS session token.
pub const CLIENT_SESSION_TOKEN: &str = "client.session-token";

/// What Cryo makes of a catalog property.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "support", content = "detail", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Support {
    /// Cryo uses it.
    Used,
    /// Understood, and without effect on Cryo (why).
    Ignored(&'static str),
    /// Understood, and not served yet (what is missing): logged by name and ignored, or, where
    /// ignoring it would write files against the user's settings, the catalog is refused.
    Missing(&'static str),
    /// Not a property Cryo knows: reported by name and ignored.
    Unknown,
}

/// A property Cryo does not simply use, with what it makes of it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PropertyNote {
    /// The property's name (never its value).
    pub key: String,
    /// What Cryo makes of it.
    #[serde(flatten)]
    pub support: Support,
}

/// Catalog types PyIceberg and Java know that Cryo does not serve yet, with what they are.
pub(crate) fn missing_kind(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "dynamodb" => "DynamoDB",
        "bigquery" => "BigQuery metastore",
        "in-memory" | "in_memory" => "an in-memory catalog other engines cannot share",
        "nessie" => "Nessie's own API (Nessie serves the REST catalog too: type rest)",
        _ => return None,
    })
}

/// Whether a catalog with the unserved property `key` is refused rather than warned about: Cryo
/// would write files without the server-side encryption asked for, or cannot run Python code.
pub(crate) fn refuses(key: &str) -> bool {
    matches!(
        key.to_ascii_lowercase().as_str(),
        "s3.server-side-encryption" | "s3.sse-kms-key-id" | "py-catalog-impl"
    )
}

/// What Cryo makes of the property `key`, by PyIceberg's (and Java's) names.
pub fn support(key: &str) -> Support {
    use Support::{Ignored, Missing, Unknown, Used};
    let k = key.to_ascii_lowercase();
    let prefixed = |p: &str| k.starts_with(p);
    match k.as_str() {
        TYPE
        | URI
        | WAREHOUSE
        | TOKEN
        | CREDENTIAL
        | OAUTH2_SERVER_URI
        | SCOPE
        | METADATA_LOCATION
        | "audience"
        | "resource"
        | "prefix"
        | "init_catalog_tables"
        | "pool.max-connections"
        | S3_ENDPOINT
        | S3_ACCESS_KEY_ID
        | S3_SECRET_ACCESS_KEY
        | S3_SESSION_TOKEN
        | S3_REGION
        | CLIENT_REGION
        | S3_PATH_STYLE_ACCESS
        | S3_FORCE_VIRTUAL_ADDRESSING
        | S3_ALLOW_ANONYMOUS
        | CLIENT_ACCESS_KEY_ID
        | CLIENT_SECRET_ACCESS_KEY
        | CLIENT_SESSION_TOKEN
        | "jdbc.user"
        | "jdbc.password" => Used,
        _ if prefixed("header.") => Used,
        "py-io-impl" => Ignored("Cryo reads and writes storage through its own object store"),
        "echo" | "pool_pre_ping" => Ignored("a SQLAlchemy engine setting"),
        "s3.connect-timeout"
        | "s3.request-timeout"
        | "s3.retry-strategy-impl"
        | "s3.resolve-region" => Ignored("Cryo's own timeouts and retries apply"),
        "snapshot-loading-mode"
        | "scan-planning-mode"
        | "view-endpoints-supported"
        | "rest-page-size"
        | "rest-metrics-reporting-enabled" => {
            Ignored("a PyIceberg REST client setting without effect on maintenance")
        }
        "downcast-ns-timestamp-to-us-on-write" | "max-workers" | "legacy-current-snapshot-id" => {
            Ignored("a PyIceberg write or read setting")
        }
        _ if prefixed("pyarrow.") => Ignored("a PyArrow file I/O setting"),
        "py-catalog-impl" => Missing("a Python catalog class; Cryo cannot load Python code"),
        "s3.role-arn" | "s3.role-session-name" | "client.role-arn" | "client.role-session-name" => {
            Missing("assuming an IAM role")
        }
        "s3.profile-name" | "client.profile-name" => Missing("AWS profiles"),
        "s3.proxy-uri" => Missing("an S3 proxy"),
        "s3.server-side-encryption" | "s3.sse-kms-key-id" => {
            Missing("server-side encryption settings for the files Cryo writes")
        }
        "s3.anonymous" => Missing("anonymous S3 access by this name (use s3.allow-anonymous)"),
        "namespace-separator" => {
            Missing("a REST namespace separator other than the unit separator")
        }
        _ if prefixed("jdbc.") => Missing(
            "JDBC driver properties other than jdbc.user and jdbc.password (give libpq parameters in the URI)",
        ),
        _ if prefixed("s3.signer") => Missing("remote S3 request signing"),
        _ if prefixed("rest.sigv4") || prefixed("rest.signing-") => {
            Missing("SigV4-signed REST catalog requests")
        }
        _ if prefixed("ssl.") => {
            Missing("TLS client certificates and CA bundles for the REST client")
        }
        _ if prefixed("auth.") || k == "auth" => {
            Missing("PyIceberg's pluggable REST `auth` block (use `token` or `credential`)")
        }
        _ if prefixed("gcs.") => Missing("GCS storage"),
        _ if prefixed("adls.") => Missing("Azure storage"),
        _ if prefixed("hdfs.") => Missing("HDFS storage"),
        _ if prefixed("oss.") => Missing("Alibaba OSS storage"),
        _ if prefixed("hf.") => Missing("Hugging Face storage"),
        "glue.profile-name" => Missing("AWS profiles"),
        _ if prefixed("dynamodb.") => Missing("DynamoDB catalogs"),
        _ => Unknown,
    }
}
