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
