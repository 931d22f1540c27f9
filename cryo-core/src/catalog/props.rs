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

/// GCS endpoint, for an emulator or a private endpoint (PyIceberg and Java).
pub const GCS_SERVICE_HOST: &str = "gcs.service.host";
/// GCS OAuth2 bearer token.
pub const GCS_OAUTH2_TOKEN: &str = "gcs.oauth2.token";
/// Java's switch for unauthenticated GCS requests (emulators).
pub const GCS_NO_AUTH: &str = "gcs.no-auth";
/// Azure storage account name.
pub const ADLS_ACCOUNT_NAME: &str = "adls.account-name";
/// Azure storage account key (shared-key authorization).
pub const ADLS_ACCOUNT_KEY: &str = "adls.account-key";
/// Azure SAS token.
pub const ADLS_SAS_TOKEN: &str = "adls.sas-token";
/// Java's per-account SAS token, `adls.sas-token.<account>`.
pub const ADLS_SAS_TOKEN_PREFIX: &str = "adls.sas-token.";
/// An Azure connection string (`AccountName=…;AccountKey=…;BlobEndpoint=…`).
pub const ADLS_CONNECTION_STRING: &str = "adls.connection-string";
/// Java's per-account endpoint, `adls.connection-string.<account>`.
pub const ADLS_CONNECTION_STRING_PREFIX: &str = "adls.connection-string.";
/// Java's shared-key account name.
pub const ADLS_SHARED_KEY_ACCOUNT_NAME: &str = "adls.auth.shared-key.account.name";
/// Java's shared-key account key.
pub const ADLS_SHARED_KEY_ACCOUNT_KEY: &str = "adls.auth.shared-key.account.key";
/// Azure service principal: tenant.
pub const ADLS_TENANT_ID: &str = "adls.tenant-id";
/// Azure service principal: client id.
pub const ADLS_CLIENT_ID: &str = "adls.client-id";
/// Azure service principal: client secret.
pub const ADLS_CLIENT_SECRET: &str = "adls.client-secret";
/// An Azure bearer token.
pub const ADLS_TOKEN: &str = "adls.token";
/// Anonymous Azure access.
pub const ADLS_ANON: &str = "adls.anon";
/// The blob endpoint's host, as PyArrow takes it (`127.0.0.1:10000`, or `.blob.core.windows.net`).
pub const ADLS_BLOB_STORAGE_AUTHORITY: &str = "adls.blob-storage-authority";
/// The blob endpoint's scheme (`http` for an emulator).
pub const ADLS_BLOB_STORAGE_SCHEME: &str = "adls.blob-storage-scheme";
/// The account's host, as adlfs takes it (`https://<host>`).
pub const ADLS_ACCOUNT_HOST: &str = "adls.account-host";

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
        "account.key",
        "connection-string",
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

/// What Cryo makes of a `gcs.*` or `adls.*` property (lowercase).
fn cloud_storage_support(k: &str) -> Support {
    use Support::{Ignored, Missing, Used};
    match k {
        GCS_SERVICE_HOST
        | GCS_OAUTH2_TOKEN
        | GCS_NO_AUTH
        | ADLS_ACCOUNT_NAME
        | ADLS_ACCOUNT_KEY
        | ADLS_SAS_TOKEN
        | ADLS_CONNECTION_STRING
        | ADLS_SHARED_KEY_ACCOUNT_NAME
        | ADLS_SHARED_KEY_ACCOUNT_KEY
        | ADLS_TENANT_ID
        | ADLS_CLIENT_ID
        | ADLS_CLIENT_SECRET
        | ADLS_TOKEN
        | ADLS_ANON
        | ADLS_BLOB_STORAGE_AUTHORITY
        | ADLS_BLOB_STORAGE_SCHEME
        | ADLS_ACCOUNT_HOST => Used,
        _ if k.starts_with(ADLS_SAS_TOKEN_PREFIX)
            || k.starts_with(ADLS_CONNECTION_STRING_PREFIX) =>
        {
            Used
        }
        "gcs.project-id"
        | "gcs.default-bucket-location"
        | "gcs.access"
        | "gcs.consistency"
        | "gcs.cache-timeout"
        | "gcs.version-aware"
        | "gcs.session-kwargs" => {
            Ignored("a GCS client setting without effect on reading and writing existing buckets")
        }
        "gcs.requester-pays" | "gcs.user-project" => Missing("GCS requester-pays buckets"),
        "gcs.oauth2.token-expires-at" | "gcs.oauth2.refresh-credentials-enabled" => {
            Ignored("the token is used as given until the server refuses it")
        }
        "adls.dfs-storage-authority" | "adls.dfs-storage-scheme" => {
            Ignored("Cryo reaches ADLS Gen2 files through the blob endpoint")
        }
        "adls.credential" => Missing("an Azure credential object (give a key, SAS or token)"),
        _ if k.starts_with("gcs.") => Missing("this GCS setting"),
        _ => Missing("this Azure storage setting"),
    }
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
        _ if prefixed("gcs.") || prefixed("adls.") => cloud_storage_support(&k),
        _ if prefixed("hdfs.") => Missing("HDFS storage"),
        _ if prefixed("oss.") => Missing("Alibaba OSS storage"),
        _ if prefixed("hf.") => Missing("Hugging Face storage"),
        "glue.profile-name" => Missing("AWS profiles"),
        _ if prefixed("dynamodb.") => Missing("DynamoDB catalogs"),
        _ => Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloud_storage_properties_are_classified() {
        for used in [
            "gcs.service.host",
            "GCS.OAUTH2.TOKEN",
            "adls.account-name",
            "adls.account-key",
            "adls.sas-token.acct",
            "adls.connection-string.acct",
            "adls.blob-storage-authority",
        ] {
            assert_eq!(support(used), Support::Used, "{used}");
        }
        assert!(matches!(support("gcs.project-id"), Support::Ignored(_)));
        assert!(matches!(
            support("adls.dfs-storage-scheme"),
            Support::Ignored(_)
        ));
        assert!(matches!(support("gcs.requester-pays"), Support::Missing(_)));
        assert!(matches!(support("adls.something-new"), Support::Missing(_)));
        for secret in [
            "adls.account-key",
            "adls.sas-token.acct",
            "adls.connection-string",
            "adls.auth.shared-key.account.key",
            "gcs.oauth2.token",
            "adls.client-secret",
        ] {
            assert!(is_secret(secret), "{secret}");
        }
        assert!(!is_secret("adls.account-name") && !is_secret("gcs.service.host"));
    }
}
