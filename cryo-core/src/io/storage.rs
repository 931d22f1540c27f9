use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, LazyLock, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use iceberg::io::{
    FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage, StorageConfig,
    StorageFactory,
};
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{
    ObjectMeta, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion,
    WriteMultipart,
};
use serde::{Deserialize, Serialize};

use super::IoCounters;
use crate::catalog::props;
use crate::error::{BoxError, Error, Result};

/// In-memory stores live for the whole process, one per `memory://<authority>`.
static MEMORY_STORES: LazyLock<Mutex<HashMap<String, Arc<dyn ObjectStore>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Serve `memory://<authority>` from `store` for the rest of the process (storages that already
/// used the authority keep the store they had). For tests and the commit-protocol simulator,
/// whose store schedules every request and injects faults. Not API.
#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub fn install_memory_store(authority: &str, store: Arc<dyn ObjectStore>) -> Result<()> {
    MEMORY_STORES
        .lock()
        .map_err(|_| Error::Internal("memory store lock poisoned".into()))?
        .insert(authority.to_string(), store);
    Ok(())
}

/// Stop serving `memory://<authority>` (storages that already use it keep their store): what
/// [`install_memory_store`] installed is freed once they are dropped. Not API.
#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub fn uninstall_memory_store(authority: &str) -> Result<()> {
    MEMORY_STORES
        .lock()
        .map_err(|_| Error::Internal("memory store lock poisoned".into()))?
        .remove(authority);
    Ok(())
}

/// Writes smaller than this are one PUT; larger ones stream as a multipart upload.
const MULTIPART_THRESHOLD: usize = 8 * 1024 * 1024;

/// The storage scheme of a location.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Scheme {
    File,
    Memory,
    S3,
    /// `gs://bucket/key` (PyIceberg also accepts `gcs://`).
    Gcs,
    /// `abfss://container@account.dfs.core.windows.net/key`, `wasbs://container@account.blob…`,
    /// or `abfs://container/key` with the account in the catalog's properties.
    Azure,
}

/// A location split into what selects the store (scheme + authority) and the key inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreLocation {
    scheme: Scheme,
    /// How the location spelled an Azure scheme (`abfss`, `wasb`, …): Azure's schemes name
    /// endpoints, so they are kept as written rather than made one.
    azure_scheme: Option<String>,
    authority: String,
    key: ObjectPath,
}

impl StoreLocation {
    /// Parse an Iceberg location (`s3://bucket/key`, `s3a://…`, `gs://bucket/key`,
    /// `abfss://container@account.dfs.core.windows.net/key`, `file:///abs`, `/abs`,
    /// `memory://x/key`).
    ///
    /// Locations are not URLs (`#` and `?` are legal in object keys), so they are split by hand.
    pub fn parse(location: &str) -> Result<Self> {
        let (scheme, rest) = match location.split_once("://") {
            Some((s, rest)) => (s.to_ascii_lowercase(), rest),
            None => match location.strip_prefix("file:") {
                Some(rest) => ("file".to_string(), rest),
                None if location.starts_with('/') => ("file".to_string(), location),
                None => {
                    return Err(Error::config(format!(
                        "`{location}` is not an absolute location (expected s3://, gs://, abfss://, file://, memory:// or /path)"
                    )));
                }
            },
        };
        let scheme_kind = match scheme.as_str() {
            "file" => Scheme::File,
            "memory" => Scheme::Memory,
            "s3" | "s3a" | "s3n" => Scheme::S3,
            "gs" | "gcs" => Scheme::Gcs,
            "abfs" | "abfss" | "wasb" | "wasbs" => Scheme::Azure,
            other => {
                return Err(Error::unsupported(format!(
                    "storage scheme `{other}://` (supported: s3, s3a, gs, abfss, abfs, wasbs, wasb, file, memory)"
                )));
            }
        };
        let azure_scheme = (scheme_kind == Scheme::Azure).then(|| scheme.clone());
        let (authority, key) = if scheme_kind == Scheme::File {
            // file:///abs → "", "/abs"; file://host/abs is not meaningful locally.
            let rest = rest.trim_start_matches('/');
            (String::new(), rest)
        } else {
            match rest.split_once('/') {
                Some((a, k)) => (a.to_string(), k),
                None => (rest.to_string(), ""),
            }
        };
        let bucketed = matches!(scheme_kind, Scheme::S3 | Scheme::Gcs | Scheme::Azure);
        if bucketed && (authority.is_empty() || authority.starts_with('@')) {
            let what = if scheme_kind == Scheme::Azure {
                "container"
            } else {
                "bucket"
            };
            return Err(Error::config(format!("`{location}` has no {what}")));
        }
        let key = ObjectPath::parse(key).unwrap_or_else(|_| ObjectPath::from(key));
        Ok(StoreLocation {
            scheme: scheme_kind,
            azure_scheme,
            authority,
            key,
        })
    }

    fn store_key(&self) -> String {
        format!("{:?}://{}", self.scheme, self.authority)
    }

    /// The key inside the store.
    pub fn key(&self) -> &ObjectPath {
        &self.key
    }

    /// Render back to a canonical location string (`s3a://` becomes `s3://`).
    pub fn to_location(&self, key: &ObjectPath) -> String {
        match self.scheme {
            Scheme::File => format!("file:///{key}"),
            Scheme::Memory => format!("memory://{}/{key}", self.authority),
            Scheme::S3 => format!("s3://{}/{key}", self.authority),
            Scheme::Gcs => format!("gs://{}/{key}", self.authority),
            Scheme::Azure => format!(
                "{}://{}/{key}",
                self.azure_scheme.as_deref().unwrap_or("abfss"),
                self.authority
            ),
        }
    }
}

/// Canonical form of a location for comparisons: one spelling per scheme (`s3a`/`s3n` → `s3`,
/// `gcs` → `gs`, `file:/x`, `/x` → `file:///x`), no duplicate or trailing slashes. Azure's
/// schemes stay as written (`abfss` and `wasbs` name different endpoints, as Java's orphan
/// removal treats them).
pub fn normalize_location(location: &str) -> Result<String> {
    if is_normal(location) {
        return Ok(location.to_string());
    }
    parse_normal(location)
}

fn parse_normal(location: &str) -> Result<String> {
    let loc = StoreLocation::parse(location)?;
    Ok(loc.to_location(&loc.key))
}

/// Whether `location` is already its normal form (as nearly every location a table's metadata
/// lists is): a scheme as [`normalize_location`] spells it, a bucket or container where one is
/// needed, and a key of segments that are not empty, `.`, `..` or hold control characters. Such
/// a location parses to itself, so it is not parsed.
fn is_normal(location: &str) -> bool {
    let Some((scheme, rest)) = location.split_once("://") else {
        return false;
    };
    let key = match scheme {
        "file" => match rest.strip_prefix('/') {
            Some(key) => key,
            None => return false,
        },
        "memory" | "s3" | "gs" | "abfss" | "abfs" | "wasbs" | "wasb" => {
            match rest.split_once('/') {
                Some((authority, key))
                    if scheme == "memory"
                        || !(authority.is_empty() || authority.starts_with('@')) =>
                {
                    key
                }
                _ => return false,
            }
        }
        _ => return false,
    };
    !key.is_empty()
        && key.split('/').all(|s| {
            !s.is_empty() && s != "." && s != ".." && !s.bytes().any(|b| b.is_ascii_control())
        })
}

/// Builds [`ObjectStorage`] for iceberg's `FileIO`; shares one set of [`IoCounters`].
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct ObjectStorageFactory {
    #[serde(skip)]
    counters: Arc<IoCounters>,
}

impl fmt::Debug for ObjectStorageFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectStorageFactory")
            .finish_non_exhaustive()
    }
}

impl ObjectStorageFactory {
    /// A factory with fresh counters.
    pub fn new() -> Self {
        Self::default()
    }

    /// The counters every storage built by this factory reports to.
    pub fn counters(&self) -> &Arc<IoCounters> {
        &self.counters
    }

    /// Build a storage for a set of properties.
    pub fn storage(&self, props: HashMap<String, String>) -> ObjectStorage {
        ObjectStorage {
            props,
            counters: Arc::clone(&self.counters),
            stores: Arc::default(),
        }
    }
}

#[typetag::serde(name = "cryo_object_store")]
impl StorageFactory for ObjectStorageFactory {
    fn build(&self, config: &StorageConfig) -> iceberg::Result<Arc<dyn Storage>> {
        Ok(Arc::new(self.storage(config.props().clone())))
    }
}

/// An `object_store`-backed storage for any location scheme Cryo supports.
#[derive(Clone, Serialize, Deserialize)]
pub struct ObjectStorage {
    props: HashMap<String, String>,
    #[serde(skip)]
    counters: Arc<IoCounters>,
    #[serde(skip)]
    stores: Arc<Mutex<HashMap<String, Arc<dyn ObjectStore>>>>,
}

impl fmt::Debug for ObjectStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Keys only: values may be credentials.
        let mut keys: Vec<_> = self.props.keys().collect();
        keys.sort();
        f.debug_struct("ObjectStorage")
            .field("property_keys", &keys)
            .finish_non_exhaustive()
    }
}

/// An object read with its version ([`ObjectStorage::read_versioned`]).
#[derive(Debug, Clone)]
pub(crate) struct Versioned {
    /// Its content.
    pub bytes: Bytes,
    /// Its version, for [`ObjectStorage::replace_if`].
    pub version: UpdateVersion,
    /// Last modification, milliseconds since the epoch.
    pub last_modified_ms: i64,
}

/// A listed object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedObject {
    /// Canonical location.
    pub location: String,
    /// Size in bytes.
    pub size: u64,
    /// Last modification, milliseconds since the epoch.
    pub last_modified_ms: i64,
}

impl ObjectStorage {
    /// The counters this storage reports to.
    pub fn counters(&self) -> &Arc<IoCounters> {
        &self.counters
    }

    /// The same storage (same configuration and connections) reporting to new counters.
    #[must_use]
    pub fn with_fresh_counters(&self) -> ObjectStorage {
        ObjectStorage {
            props: self.props.clone(),
            counters: Arc::default(),
            stores: Arc::clone(&self.stores),
        }
    }

    fn store(&self, loc: &StoreLocation) -> Result<Arc<dyn ObjectStore>> {
        let key = loc.store_key();
        let mut stores = self
            .stores
            .lock()
            .map_err(|_| Error::Internal("storage registry lock poisoned".into()))?;
        if let Some(store) = stores.get(&key) {
            return Ok(Arc::clone(store));
        }
        let store: Arc<dyn ObjectStore> = match loc.scheme {
            Scheme::File => Arc::new(object_store::local::LocalFileSystem::new()),
            Scheme::Memory => {
                let mut mem = MEMORY_STORES
                    .lock()
                    .map_err(|_| Error::Internal("memory store lock poisoned".into()))?;
                let store = mem
                    .entry(loc.authority.clone())
                    .or_insert_with(|| Arc::new(InMemory::new()));
                Arc::clone(store)
            }
            Scheme::S3 => self.build_s3(&loc.authority)?,
            Scheme::Gcs => self.build_gcs(&loc.authority)?,
            Scheme::Azure => self.build_azure(&loc.authority)?,
        };
        stores.insert(key, Arc::clone(&store));
        Ok(store)
    }

    fn build_s3(&self, bucket: &str) -> Result<Arc<dyn ObjectStore>> {
        use object_store::aws::AmazonS3Builder;
        let p = |k: &str| self.props.get(k).map(String::as_str);
        let mut b = AmazonS3Builder::from_env().with_bucket_name(bucket);
        if let Some(endpoint) = p(props::S3_ENDPOINT) {
            b = b
                .with_endpoint(endpoint)
                .with_allow_http(endpoint.starts_with("http://"));
        }
        // PyIceberg's precedence: the `s3.*` credential, else the shared `client.*` one.
        if let Some(v) = p(props::S3_ACCESS_KEY_ID).or_else(|| p(props::CLIENT_ACCESS_KEY_ID)) {
            b = b.with_access_key_id(v);
        }
        if let Some(v) =
            p(props::S3_SECRET_ACCESS_KEY).or_else(|| p(props::CLIENT_SECRET_ACCESS_KEY))
        {
            b = b.with_secret_access_key(v);
        }
        if let Some(v) = p(props::S3_SESSION_TOKEN).or_else(|| p(props::CLIENT_SESSION_TOKEN)) {
            b = b.with_token(v);
        }
        if let Some(v) = p(props::S3_REGION).or_else(|| p(props::CLIENT_REGION)) {
            b = b.with_region(v);
        } else if p(props::S3_ENDPOINT).is_some() {
            // Loopback S3 servers ignore the region but the signer needs one.
            b = b.with_region("us-east-1");
        }
        let path_style = p(props::S3_PATH_STYLE_ACCESS).map(|v| v.eq_ignore_ascii_case("true"));
        let virtual_hosted = p(props::S3_FORCE_VIRTUAL_ADDRESSING)
            .map(|v| v.eq_ignore_ascii_case("true"))
            .or(path_style.map(|ps| !ps));
        if let Some(vh) = virtual_hosted {
            b = b.with_virtual_hosted_style_request(vh);
        }
        if p(props::S3_ALLOW_ANONYMOUS).is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            b = b.with_skip_signature(true);
        }
        let store = b.build().map_err(|e| {
            // object_store's builder errors name the option, never its value.
            Error::config(format!("S3 storage for bucket `{bucket}`: {e}"))
        })?;
        Ok(Arc::new(store))
    }

    /// GCS with PyIceberg's and Java's property names: `gcs.service.host` (an emulator or a
    /// private endpoint), `gcs.oauth2.token` (a bearer token), `gcs.no-auth`; otherwise the
    /// environment's Google credentials (`GOOGLE_SERVICE_ACCOUNT`, application default
    /// credentials, the metadata server), as every Google client finds them.
    fn build_gcs(&self, bucket: &str) -> Result<Arc<dyn ObjectStore>> {
        use object_store::gcp::{GcpCredential, GoogleCloudStorageBuilder};
        let p = |k: &str| self.props.get(k).map(String::as_str);
        let mut b = GoogleCloudStorageBuilder::from_env().with_bucket_name(bucket);
        let host = p(props::GCS_SERVICE_HOST);
        if let Some(host) = host {
            let host = host.trim_end_matches('/');
            b = b.with_base_url(host).with_client_options(
                object_store::ClientOptions::new().with_allow_http(host.starts_with("http://")),
            );
        }
        let token = p(props::GCS_OAUTH2_TOKEN);
        if let Some(token) = token {
            b = b.with_credentials(Arc::new(object_store::StaticCredentialProvider::new(
                GcpCredential {
                    bearer: token.to_string(),
                },
            )));
        }
        // An emulator on plain HTTP takes no credentials (PyArrow and Java's `gcs.no-auth`
        // send none to one either); a token is never sent over plain HTTP.
        let no_auth = is_true(p(props::GCS_NO_AUTH))
            || (token.is_none() && host.is_some_and(|h| h.starts_with("http://")));
        if no_auth {
            // object_store 0.13 asks the credential provider on some requests even when
            // skipping signatures: an empty static token keeps it off the metadata server.
            b = b.with_skip_signature(true).with_credentials(Arc::new(
                object_store::StaticCredentialProvider::new(GcpCredential {
                    bearer: String::new(),
                }),
            ));
        }
        let store = b
            .build()
            .map_err(|e| Error::config(format!("GCS storage for bucket `{bucket}`: {e}")))?;
        Ok(Arc::new(store))
    }

    /// Azure Blob Storage (and ADLS Gen2, whose files are blobs) with PyIceberg's property
    /// names, and Java's per-account ones. The account is the location's
    /// (`container@account.dfs.core.windows.net`), else `adls.account-name`. The endpoint is
    /// `adls.blob-storage-authority` as PyArrow builds it (an authority starting with `.` is a
    /// host suffix after the account, any other is a host the account follows as a path, as for
    /// Azurite), else `adls.account-host`, else Java's `adls.connection-string.<account>`,
    /// else `https://<account>.blob.core.windows.net`. Credentials: an account key, a SAS
    /// token, a bearer token, a service principal, a connection string, or the environment's.
    fn build_azure(&self, authority: &str) -> Result<Arc<dyn ObjectStore>> {
        use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
        let p = |k: &str| {
            self.props
                .get(k)
                .map(String::as_str)
                .filter(|v| !v.is_empty())
        };
        let target = azure_target(&self.props, authority)?;
        let (container, account) = (target.container.as_str(), target.account.as_str());
        let mut b = MicrosoftAzureBuilder::from_env()
            .with_account(account)
            .with_container_name(container);
        if let Some(endpoint) = &target.endpoint {
            b = b
                .with_allow_http(endpoint.starts_with("http://"))
                .with_endpoint(endpoint.clone());
        }
        let (key, sas) = (target.key.as_deref(), target.sas.as_deref());
        if let Some(key) = key {
            b = b.with_access_key(key);
        } else if let Some(sas) = sas {
            b = b.with_config(AzureConfigKey::SasKey, sas.trim_start_matches('?'));
        } else if let Some(token) = p(props::ADLS_TOKEN) {
            b = b.with_bearer_token_authorization(token);
        } else if let (Some(id), Some(secret), Some(tenant)) = (
            p(props::ADLS_CLIENT_ID),
            p(props::ADLS_CLIENT_SECRET),
            p(props::ADLS_TENANT_ID),
        ) {
            b = b.with_client_secret_authorization(id, secret, tenant);
        } else if is_true(p(props::ADLS_ANON)) {
            b = b.with_skip_signature(true);
        }
        let store = b.build().map_err(|e| {
            Error::config(format!("Azure storage for container `{container}`: {e}"))
        })?;
        Ok(Arc::new(store))
    }

    fn secrets(&self) -> Secrets {
        Secrets::of(&self.props)
    }

    fn resolve(&self, location: &str) -> Result<(Arc<dyn ObjectStore>, StoreLocation)> {
        let loc = StoreLocation::parse(location)?;
        Ok((self.store(&loc)?, loc))
    }

    /// Read a whole object.
    pub async fn read_all(&self, location: &str) -> Result<Bytes> {
        let (store, loc) = self.resolve(location)?;
        let _in_flight = self.counters.start_read();
        let bytes = store
            .get(&loc.key)
            .await
            .map_err(|e| storage_error(&self.secrets(), location, "read", e))?
            .bytes()
            .await
            .map_err(|e| storage_error(&self.secrets(), location, "read", e))?;
        self.counters.record_read(location, bytes.len() as u64);
        Ok(bytes)
    }

    /// Size of an object, or `None` if it does not exist.
    pub async fn head(&self, location: &str) -> Result<Option<ListedObject>> {
        let (store, loc) = self.resolve(location)?;
        match store.head(&loc.key).await {
            Ok(meta) => Ok(Some(listed(&loc, &meta))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(storage_error(&self.secrets(), location, "head", e)),
        }
    }

    /// Write an object, replacing any previous content.
    pub async fn write_all(&self, location: &str, bytes: Bytes) -> Result<()> {
        let (store, loc) = self.resolve(location)?;
        store
            .put(&loc.key, PutPayload::from(bytes))
            .await
            .map_err(|e| storage_error(&self.secrets(), location, "write", e))?;
        self.counters.record_write(location);
        Ok(())
    }

    /// Write an object only if nothing exists at `location`; `Ok(false)` if something does.
    ///
    /// This is the compare-and-swap primitive for file-system (Hadoop-style) tables.
    pub async fn write_if_absent(&self, location: &str, bytes: Bytes) -> Result<bool> {
        let (store, loc) = self.resolve(location)?;
        let opts = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        match store
            .put_opts(&loc.key, PutPayload::from(bytes), opts)
            .await
        {
            Ok(_) => {
                self.counters.record_write(location);
                Ok(true)
            }
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(storage_error(&self.secrets(), location, "create", e)),
        }
    }

    /// Read an object with its version, for a compare-and-swap ([`Self::replace_if`]); `None`
    /// if it does not exist.
    pub(crate) async fn read_versioned(&self, location: &str) -> Result<Option<Versioned>> {
        let (store, loc) = self.resolve(location)?;
        let got = match store.get(&loc.key).await {
            Ok(g) => g,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(storage_error(&self.secrets(), location, "read", e)),
        };
        let version = UpdateVersion {
            e_tag: got.meta.e_tag.clone(),
            version: got.meta.version.clone(),
        };
        let last_modified_ms = got.meta.last_modified.timestamp_millis();
        let bytes = got
            .bytes()
            .await
            .map_err(|e| storage_error(&self.secrets(), location, "read", e))?;
        self.counters.record_read(location, bytes.len() as u64);
        Ok(Some(Versioned {
            bytes,
            version,
            last_modified_ms,
        }))
    }

    /// Create an object only if nothing exists at `location`: its version, or `None` if
    /// something does.
    pub(crate) async fn create_versioned(
        &self,
        location: &str,
        bytes: Bytes,
    ) -> Result<Option<UpdateVersion>> {
        self.put_mode(location, bytes, PutMode::Create).await
    }

    /// Replace an object only if it is still at `version`: its new version, or `None` if it
    /// changed (or went) meanwhile. Stores without conditional updates (local files) refuse.
    pub(crate) async fn replace_if(
        &self,
        location: &str,
        bytes: Bytes,
        version: UpdateVersion,
    ) -> Result<Option<UpdateVersion>> {
        self.put_mode(location, bytes, PutMode::Update(version))
            .await
    }

    async fn put_mode(
        &self,
        location: &str,
        bytes: Bytes,
        mode: PutMode,
    ) -> Result<Option<UpdateVersion>> {
        let (store, loc) = self.resolve(location)?;
        let opts = PutOptions {
            mode,
            ..PutOptions::default()
        };
        match store
            .put_opts(&loc.key, PutPayload::from(bytes), opts)
            .await
        {
            Ok(r) => {
                self.counters.record_write(location);
                Ok(Some(UpdateVersion {
                    e_tag: r.e_tag,
                    version: r.version,
                }))
            }
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. }
                | object_store::Error::NotFound { .. },
            ) => Ok(None),
            Err(e) => Err(storage_error(
                &self.secrets(),
                location,
                "conditional write",
                e,
            )),
        }
    }

    /// Delete every object of `locations` (a missing one counts as deleted), at most
    /// `concurrency` requests at a time, and give each its result, in order. Where the store
    /// deletes in bulk it does (S3: a thousand keys a request); a local disk deletes in batches
    /// on blocking threads, not a task a file.
    pub async fn delete_all(&self, locations: &[String], concurrency: usize) -> Vec<Result<()>> {
        const BATCH: usize = 1000;
        futures::stream::iter(locations.chunks(BATCH).map(|c| self.delete_batch(c)))
            .buffered(concurrency.clamp(1, 16))
            .flat_map(futures::stream::iter)
            // Boxed: without it rustc cannot prove the stream's borrows `Send` for every
            // lifetime, and callers could not `tokio::spawn` an expiry.
            .boxed()
            .collect()
            .await
    }

    async fn delete_batch(&self, locations: &[String]) -> Vec<Result<()>> {
        let mut out: Vec<Option<Result<()>>> = locations.iter().map(|_| None).collect();
        let mut local: Vec<(usize, std::path::PathBuf)> = Vec::new();
        let mut remote: Vec<StoreKeys> = Vec::new();
        for (i, location) in locations.iter().enumerate() {
            // Most of a table's files are plain local paths: no parse, no URL (a hundred
            // thousand of them took a second of the calling thread that way).
            if let Some(path) = plain_local_path(location) {
                local.push((i, std::path::PathBuf::from(path)));
                continue;
            }
            match self.resolve(location) {
                Err(e) => out[i] = Some(Err(e)),
                Ok((_, loc)) if loc.scheme == Scheme::File => match local_file_path(location) {
                    Some(path) => local.push((i, path)),
                    None => {
                        out[i] = Some(Err(Error::Storage {
                            path: location.clone(),
                            message: "delete: not a local path".into(),
                            source: None,
                            retryable: false,
                        }));
                    }
                },
                Ok((store, loc)) => match remote.iter_mut().find(|(s, _)| Arc::ptr_eq(s, &store)) {
                    Some((_, keys)) => keys.push((i, loc.key)),
                    None => remote.push((store, vec![(i, loc.key)])),
                },
            }
        }
        if !local.is_empty() {
            for (i, r) in delete_local(locations, local).await {
                out[i] = Some(r);
            }
        }
        for (store, keys) in remote {
            for (i, r) in self.delete_remote(locations, &store, keys).await {
                out[i] = Some(r);
            }
        }
        out.into_iter()
            .map(|o| o.unwrap_or_else(|| Err(Error::Internal("delete: no result".into()))))
            .collect()
    }

    /// Delete `keys` of one store through its bulk delete, each key's result at its index.
    async fn delete_remote(
        &self,
        locations: &[String],
        store: &Arc<dyn ObjectStore>,
        keys: Vec<(usize, ObjectPath)>,
    ) -> Vec<(usize, Result<()>)> {
        let stream =
            futures::stream::iter(keys.iter().map(|(_, k)| Ok(k.clone())).collect::<Vec<_>>());
        let results: Vec<_> = store.delete_stream(stream.boxed()).collect().await;
        let mut done = std::collections::HashSet::new();
        let mut failed = None;
        for r in results {
            match r {
                Ok(key) => {
                    done.insert(key.to_string());
                }
                Err(object_store::Error::NotFound { path, .. }) => {
                    done.insert(path);
                }
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        // A store that fails a request names no key: every key it did not confirm failed,
        // with the first error (scrubbed) as their message.
        let failure = failed.map(|e| {
            let first = keys.iter().find(|(_, k)| !done.contains(k.as_ref()));
            let at = first.map_or("", |(i, _)| locations[*i].as_str());
            match storage_error(&self.secrets(), at, "delete", e) {
                Error::Storage {
                    message, retryable, ..
                } => (message, retryable),
                other => (other.to_string(), other.is_retryable()),
            }
        });
        keys.into_iter()
            .map(|(i, key)| {
                let r = if done.contains(key.as_ref()) {
                    Ok(())
                } else {
                    let (message, retryable) = failure.clone().unwrap_or_else(|| {
                        ("delete: the store did not confirm it".to_string(), true)
                    });
                    Err(Error::Storage {
                        path: locations[i].clone(),
                        message,
                        source: None,
                        retryable,
                    })
                };
                (i, r)
            })
            .collect()
    }

    /// Delete an object; deleting a missing object is not an error.
    pub async fn delete(&self, location: &str) -> Result<()> {
        let (store, loc) = self.resolve(location)?;
        if loc.scheme == Scheme::File
            && let Some(path) = local_path(location).filter(|p| is_unfinished_upload(p))
        {
            // object_store refuses these names (see `list_unfinished_uploads`).
            return match tokio::fs::remove_file(&path).await {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io_error(location, "delete", e)),
            };
        }
        match store.delete(&loc.key).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(storage_error(&self.secrets(), location, "delete", e)),
        }
    }

    /// List every object under a directory-like prefix, recursively.
    pub async fn list(&self, prefix: &str) -> Result<Vec<ListedObject>> {
        let (store, loc) = self.resolve(prefix)?;
        self.counters.record_list();
        let key = loc.key.clone();
        let prefix_arg = if key.as_ref().is_empty() {
            None
        } else {
            Some(&key)
        };
        let metas: Vec<ObjectMeta> = match store.list(prefix_arg).try_collect().await {
            Ok(m) => m,
            // A missing local directory lists as empty, as it does on object stores.
            Err(object_store::Error::NotFound { .. }) => Vec::new(),
            Err(e) => return Err(storage_error(&self.secrets(), prefix, "list", e)),
        };
        Ok(metas.iter().map(|m| listed(&loc, m)).collect())
    }

    /// Every object under `prefix`, as [`Self::list`] gives them, listed in parallel: the
    /// directory-like prefixes of the first `depth` levels are found with delimited listings,
    /// and each is then listed whole, `concurrency` listings at once. An object store answers
    /// a listing a thousand keys a page, one page after another: a table of a hundred thousand
    /// files took a hundred round trips in a row, its partitions' directories now take a few.
    pub(crate) async fn list_parallel(
        &self,
        prefix: &str,
        depth: usize,
        concurrency: usize,
    ) -> Result<Vec<ListedObject>> {
        let (store, loc) = self.resolve(prefix)?;
        let fail = |e| storage_error(&self.secrets(), prefix, "list", e);
        let mut out = Vec::new();
        let mut frontier = vec![loc.key.clone()];
        for _ in 0..depth {
            let mut listings =
                futures::stream::iter(std::mem::take(&mut frontier).into_iter().map(|key| {
                    let store = Arc::clone(&store);
                    self.counters.record_list();
                    async move {
                        let arg = (!key.as_ref().is_empty()).then_some(&key);
                        match store.list_with_delimiter(arg).await {
                            Ok(l) => Ok((l.objects, l.common_prefixes)),
                            Err(object_store::Error::NotFound { .. }) => {
                                Ok((Vec::new(), Vec::new()))
                            }
                            Err(e) => Err(e),
                        }
                    }
                }))
                .buffer_unordered(concurrency.max(1));
            let mut next = Vec::new();
            while let Some(listing) = listings.next().await {
                let (objects, prefixes) = listing.map_err(fail)?;
                out.extend(objects.iter().map(|m| listed(&loc, m)));
                next.extend(prefixes);
            }
            drop(listings);
            frontier = next;
        }
        let mut listings = futures::stream::iter(frontier.into_iter().map(|key| {
            let store = Arc::clone(&store);
            self.counters.record_list();
            async move {
                let arg = (!key.as_ref().is_empty()).then_some(&key);
                match store.list(arg).try_collect::<Vec<ObjectMeta>>().await {
                    Err(object_store::Error::NotFound { .. }) => Ok(Vec::new()),
                    r => r,
                }
            }
        }))
        .buffer_unordered(concurrency.max(1));
        while let Some(metas) = listings.next().await {
            out.extend(metas.map_err(fail)?.iter().map(|m| listed(&loc, m)));
        }
        Ok(out)
    }

    /// The staging files of local writes that never finished under a directory-like prefix:
    /// `<name>#<digits>`, where `object_store` streams a file before renaming it into place. A
    /// process killed mid-write leaves one behind; `object_store`'s listing hides such names
    /// (and refuses to delete them), so without this no orphan scan would ever find them.
    /// Nothing references them. Empty for object stores, where an unfinished upload is not an
    /// object.
    pub async fn list_unfinished_uploads(&self, prefix: &str) -> Result<Vec<ListedObject>> {
        let loc = StoreLocation::parse(prefix)?;
        if loc.scheme != Scheme::File {
            return Ok(Vec::new());
        }
        let Some(root) = local_path(prefix) else {
            return Ok(Vec::new());
        };
        self.counters.record_list();
        let owned = prefix.to_string();
        tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            walk_unfinished_uploads(&root, &mut out).map_err(|e| io_error(&owned, "list", e))?;
            Ok(out)
        })
        .await
        .map_err(|e| Error::compute(format!("listing {prefix}"), e))?
    }
}

/// The file a `file:` location reads and deletes, as the local store maps its key (it decodes
/// the key's escapes); `None` for other schemes. Staging files, which the store does not map,
/// are their plain path.
pub(crate) fn local_file_path(location: &str) -> Option<std::path::PathBuf> {
    match plain_local_path(location) {
        Some(path) => Some(std::path::PathBuf::from(path)),
        None => parsed_local_path(location),
    }
}

fn parsed_local_path(location: &str) -> Option<std::path::PathBuf> {
    let loc = StoreLocation::parse(location).ok()?;
    if loc.scheme != Scheme::File {
        return None;
    }
    object_store::local::LocalFileSystem::new()
        .path_to_filesystem(&loc.key)
        .ok()
        .or_else(|| local_path(location))
}

/// Where an Azure location's container lives and the shared key or SAS token for it, from
/// the properties or a connection string: see [`ObjectStorage::build_azure`].
struct AzureTarget {
    container: String,
    account: String,
    endpoint: Option<String>,
    key: Option<String>,
    sas: Option<String>,
}

impl fmt::Debug for AzureTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The key and the token are credentials: only whether they are set.
        f.debug_struct("AzureTarget")
            .field("container", &self.container)
            .field("account", &self.account)
            .field("endpoint", &self.endpoint)
            .field("key", &self.key.as_ref().map(|_| "<set>"))
            .field("sas", &self.sas.as_ref().map(|_| "<set>"))
            .finish()
    }
}

fn azure_target(props: &HashMap<String, String>, authority: &str) -> Result<AzureTarget> {
    let p = |k: &str| props.get(k).map(String::as_str).filter(|v| !v.is_empty());
    let conn = p(props::ADLS_CONNECTION_STRING).map(parse_connection_string);
    let conn_get = |k: &str| {
        conn.as_ref()
            .and_then(|c| c.iter().find(|(n, _)| n.eq_ignore_ascii_case(k)))
            .map(|(_, v)| v.as_str())
    };
    let (container, host) = match authority.split_once('@') {
        Some((c, h)) => (c, Some(h)),
        None => (authority, None),
    };
    // `container@account.dfs.core.windows.net`: the account is the host's first label (not
    // for an address such as `127.0.0.1:10000`).
    let account = host
        .filter(|h| h.contains('.') && !h.starts_with(|c: char| c.is_ascii_digit()))
        .and_then(|h| h.split('.').next())
        .or_else(|| p(props::ADLS_ACCOUNT_NAME))
        .or_else(|| p(props::ADLS_SHARED_KEY_ACCOUNT_NAME))
        .or_else(|| conn_get("AccountName"))
        .ok_or_else(|| {
            Error::config(format!(
                "Azure location `{authority}` names no account: write it \
                 `container@account.dfs.core.windows.net`, or set `{}`",
                props::ADLS_ACCOUNT_NAME
            ))
        })?
        .to_string();
    let per_account = |prefix: &str| p(&format!("{prefix}{account}"));
    let endpoint = if let Some(authority) = p(props::ADLS_BLOB_STORAGE_AUTHORITY) {
        let scheme = p(props::ADLS_BLOB_STORAGE_SCHEME).unwrap_or("https");
        Some(match authority.strip_prefix('.') {
            Some(suffix) => format!("{scheme}://{account}.{suffix}"),
            None => format!("{scheme}://{authority}/{account}"),
        })
    } else if let Some(host) = p(props::ADLS_ACCOUNT_HOST) {
        Some(if host.contains("://") {
            host.to_string()
        } else {
            format!("https://{host}")
        })
    } else if let Some(url) = per_account(props::ADLS_CONNECTION_STRING_PREFIX) {
        Some(url.to_string())
    } else if let Some(url) = conn_get("BlobEndpoint") {
        Some(url.to_string())
    } else if is_true(conn_get("UseDevelopmentStorage")) {
        Some(format!("http://127.0.0.1:10000/{account}"))
    } else {
        conn_get("EndpointSuffix").map(|suffix| {
            let scheme = conn_get("DefaultEndpointsProtocol").unwrap_or("https");
            format!("{scheme}://{account}.blob.{suffix}")
        })
    };
    let key = p(props::ADLS_ACCOUNT_KEY)
        .or_else(|| p(props::ADLS_SHARED_KEY_ACCOUNT_KEY))
        .or_else(|| conn_get("AccountKey"))
        .map(str::to_string);
    let sas = p(props::ADLS_SAS_TOKEN)
        .or_else(|| per_account(props::ADLS_SAS_TOKEN_PREFIX))
        .or_else(|| conn_get("SharedAccessSignature"))
        .map(str::to_string);
    Ok(AzureTarget {
        container: container.to_string(),
        account,
        endpoint: endpoint.map(|e| e.trim_end_matches('/').to_string()),
        key,
        sas,
    })
}

fn is_true(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// An Azure connection string, `Name=value;Name=value` (values may hold `=`, as SAS tokens do).
fn parse_connection_string(text: &str) -> Vec<(String, String)> {
    text.split(';')
        .filter_map(|part| part.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// The local path of a `file:` location (`file:///a`, `file:/a`, `/a`).
/// The keys of one store a batch deletes, each with its index in the batch.
type StoreKeys = (Arc<dyn ObjectStore>, Vec<(usize, ObjectPath)>);

/// Delete local files on a blocking thread, one batch a task (a missing file counts as
/// deleted); each result at its index into `locations`.
async fn delete_local(
    locations: &[String],
    files: Vec<(usize, std::path::PathBuf)>,
) -> Vec<(usize, Result<()>)> {
    let indices: Vec<usize> = files.iter().map(|(i, _)| *i).collect();
    let removed = tokio::task::spawn_blocking(move || {
        files
            .into_iter()
            .map(|(i, path)| match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => (i, Some(e)),
                _ => (i, None),
            })
            .collect::<Vec<_>>()
    })
    .await;
    match removed {
        Ok(removed) => removed
            .into_iter()
            .map(|(i, e)| {
                let r = match e {
                    None => Ok(()),
                    Some(e) => Err(io_error(&locations[i], "delete", e)),
                };
                (i, r)
            })
            .collect(),
        Err(e) => {
            let message = format!("delete: a deleting thread failed: {e}");
            indices
                .into_iter()
                .map(|i| (i, Err(Error::Internal(message.clone()))))
                .collect()
        }
    }
}

/// The filesystem path of a `file:///` or `/` location whose segments are plain (ASCII letters
/// and digits, `-_.=+,@~`; not `.` or `..`): what [`local_file_path`] gives for it through
/// `object_store`'s path and a `file://` URL, neither of which encodes any of those bytes, but
/// without building either. `None` for any other location.
fn plain_local_path(location: &str) -> Option<&str> {
    let path = location.strip_prefix("file://").unwrap_or(location);
    let plain = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.=+,@~".contains(&b))
    };
    path.strip_prefix('/')?
        .split('/')
        .all(plain)
        .then_some(path)
}

fn local_path(location: &str) -> Option<std::path::PathBuf> {
    let rest = location
        .strip_prefix("file://")
        .or_else(|| location.strip_prefix("file:"))
        .unwrap_or(location);
    rest.starts_with('/')
        .then(|| std::path::PathBuf::from(format!("/{}", rest.trim_start_matches('/'))))
}

/// `object_store`'s rule for its local staging files: the part after the first `#` of the file
/// name is all digits.
fn is_unfinished_upload(path: &std::path::Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.split_once('#'))
        .is_some_and(|(_, suffix)| !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit()))
}

fn walk_unfinished_uploads(
    dir: &std::path::Path,
    out: &mut Vec<ListedObject>,
) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        let path = entry.path();
        // Symbolic links are not followed into directories (no cycles); staging files are
        // regular files.
        let kind = entry.file_type()?;
        if kind.is_dir() {
            walk_unfinished_uploads(&path, out)?;
        } else if kind.is_file() && is_unfinished_upload(&path) {
            let (Some(text), Ok(meta)) = (path.to_str(), entry.metadata()) else {
                continue; // not UTF-8 (no Iceberg location can name it), or gone meanwhile
            };
            let modified = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_millis() as i64);
            out.push(ListedObject {
                location: format!("file://{text}"),
                size: meta.len(),
                last_modified_ms: modified,
            });
        }
    }
    Ok(())
}

fn io_error(location: &str, op: &str, e: std::io::Error) -> Error {
    let (message, retryable) = match e.kind() {
        std::io::ErrorKind::NotFound => (format!("{op}: file not found"), false),
        std::io::ErrorKind::PermissionDenied => (format!("{op}: access denied"), false),
        _ => (format!("{op} failed"), true),
    };
    Error::Storage {
        path: location.to_string(),
        message,
        source: Some(Box::new(e)),
        retryable,
    }
}

fn listed(loc: &StoreLocation, meta: &ObjectMeta) -> ListedObject {
    ListedObject {
        location: loc.to_location(&meta.location),
        size: meta.size,
        last_modified_ms: meta.last_modified.timestamp_millis(),
    }
}

/// The credential values of a storage configuration, scrubbed from every storage error: an
/// object store's error carries the server's response body, and servers echo requests there
/// (S3's `SignatureDoesNotMatch` holds the access key id and the canonical request, session
/// token included; a proxy may echo every header).
#[derive(Clone, Default)]
pub(crate) struct Secrets(Arc<Vec<String>>);

impl Secrets {
    fn of(props: &HashMap<String, String>) -> Self {
        let mut values: Vec<String> = Vec::new();
        for (k, v) in props {
            if !props::is_secret(k) {
                continue;
            }
            values.push(v.clone());
            // OAuth2 credentials (`id:secret`) may appear split, and so may the parts of a SAS
            // token (`sv=…&sig=…`, a URL's query) and of a connection string (`AccountKey=…;`).
            if let Some((_, secret)) = v.split_once(':').filter(|_| !v.contains(['=', ';'])) {
                values.push(secret.to_string());
            }
            for part in v.split(['&', ';']) {
                let secret_part = part.split_once('=').filter(|(name, _)| {
                    let name = name.trim().to_ascii_lowercase();
                    name == "sig"
                        || ["key", "signature", "secret", "token"]
                            .iter()
                            .any(|s| name.contains(s))
                });
                if let Some((_, value)) = secret_part {
                    values.push(value.to_string());
                    // As a URL's query carries it.
                    let encoded: String =
                        url::form_urlencoded::byte_serialize(value.as_bytes()).collect();
                    values.push(encoded);
                    let decoded: String =
                        url::form_urlencoded::parse(format!("v={value}").as_bytes())
                            .map(|(_, v)| v.into_owned())
                            .collect();
                    values.push(decoded);
                }
            }
        }
        // Short values would scrub ordinary words; longest first, so no secret is left half-scrubbed.
        values.retain(|v| v.len() >= 3);
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Secrets(Arc::new(values))
    }

    fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for v in self.0.iter() {
            out = out.replace(v.as_str(), "***");
        }
        out
    }
}

/// The error text of an object store error and its sources, scrubbed (the source of a
/// [`Error::Storage`] that could hold a server's words).
#[derive(Debug)]
struct ScrubbedError(String);

impl fmt::Display for ScrubbedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScrubbedError {}

/// The first 400 characters of what a store said.
fn shortened(text: &str) -> String {
    text.chars().take(400).collect()
}

fn storage_error(secrets: &Secrets, location: &str, op: &str, e: object_store::Error) -> Error {
    let (message, retryable) = match &e {
        object_store::Error::NotFound { .. } => (format!("{op}: file not found"), false),
        object_store::Error::AlreadyExists { .. } => (format!("{op}: file already exists"), false),
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => (format!("{op}: access denied"), false),
        _ => (format!("{op} failed"), true),
    };
    // Not-found and already-exists name only the path, and callers look for not-found by
    // type; every other error keeps its text (scrubbed), not the object, and says it.
    let (source, said): (BoxError, Option<String>) = match e {
        object_store::Error::NotFound { .. } | object_store::Error::AlreadyExists { .. } => {
            (Box::new(e), None)
        }
        other => {
            let mut text = other.to_string();
            let mut cause = std::error::Error::source(&other);
            while let Some(c) = cause {
                text.push_str(": ");
                text.push_str(&c.to_string());
                cause = c.source();
            }
            let text = secrets.scrub(&text);
            (Box::new(ScrubbedError(text.clone())), Some(text))
        }
    };
    let (message, retryable) = match said {
        // A symbolic-link loop under a local directory (the listing follows links) stays a
        // loop however often it is retried.
        Some(text) if text.contains("File system loop found") => (
            format!("{op}: a symbolic link loops back to one of its parent directories"),
            false,
        ),
        // object_store looks for S3 credentials on the instance metadata service last.
        Some(text)
            if text.contains("/latest/api/token") || text.contains("/latest/meta-data/iam") =>
        {
            (
                format!(
                    "{message}: no S3 credentials: none configured (s3.access-key-id, a \
                 profile, AWS_* variables, or vended by a REST catalog asked with \
                 header.X-Iceberg-Access-Delegation) and the instance metadata service \
                 gave none: {}",
                    shortened(&text)
                ),
                false,
            )
        }
        // What the store said: "no credentials", "connection refused".
        Some(text) => (format!("{message}: {}", shortened(&text)), retryable),
        None => (message, retryable),
    };
    Error::Storage {
        path: location.to_string(),
        message,
        source: Some(source),
        retryable,
    }
}

fn is_not_found(e: &Error) -> bool {
    matches!(e, Error::Storage { source: Some(s), .. }
        if matches!(s.downcast_ref::<object_store::Error>(), Some(object_store::Error::NotFound { .. })))
}

#[allow(
    clippy::needless_pass_by_value,
    reason = "a `map_err` adapter: taking the error by value keeps call sites `.map_err(ice)`"
)]
fn ice(e: Error) -> iceberg::Error {
    let kind = if is_not_found(&e) {
        // iceberg has no "not found" kind for files; DataInvalid is what its own FS storage uses.
        iceberg::ErrorKind::DataInvalid
    } else {
        iceberg::ErrorKind::Unexpected
    };
    let retryable = e.is_retryable();
    iceberg::Error::new(kind, e.to_string()).with_retryable(retryable)
}

#[async_trait]
#[typetag::serde(name = "cryo_object_storage")]
impl Storage for ObjectStorage {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        Ok(self.head(path).await.map_err(ice)?.is_some())
    }

    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        match self.head(path).await.map_err(ice)? {
            Some(o) => Ok(FileMetadata { size: o.size }),
            None => Err(iceberg::Error::new(
                iceberg::ErrorKind::DataInvalid,
                format!("file not found: {path}"),
            )),
        }
    }

    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        self.read_all(path).await.map_err(ice)
    }

    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        let (store, loc) = self.resolve(path).map_err(ice)?;
        Ok(Box::new(ObjectRead {
            store,
            key: loc.key,
            location: path.to_string(),
            counters: Arc::clone(&self.counters),
            secrets: self.secrets(),
        }))
    }

    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        self.write_all(path, bs).await.map_err(ice)
    }

    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        let (store, loc) = self.resolve(path).map_err(ice)?;
        self.counters.record_write(path);
        Ok(Box::new(ObjectWrite {
            store,
            key: loc.key,
            location: path.to_string(),
            buffer: Vec::new(),
            buffered: 0,
            upload: None,
            closed: false,
            secrets: self.secrets(),
        }))
    }

    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        ObjectStorage::delete(self, path).await.map_err(ice)
    }

    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        let prefix = if path.ends_with('/') {
            path.to_string()
        } else {
            format!("{path}/")
        };
        for obj in self.list(&prefix).await.map_err(ice)? {
            ObjectStorage::delete(self, &obj.location)
                .await
                .map_err(ice)?;
        }
        Ok(())
    }

    async fn delete_stream(&self, mut paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        while let Some(p) = paths.next().await {
            ObjectStorage::delete(self, &p).await.map_err(ice)?;
        }
        Ok(())
    }

    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

struct ObjectRead {
    store: Arc<dyn ObjectStore>,
    key: ObjectPath,
    location: String,
    counters: Arc<IoCounters>,
    secrets: Secrets,
}

#[async_trait]
impl FileRead for ObjectRead {
    async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
        let len = range.end.saturating_sub(range.start);
        let _in_flight = self.counters.start_read();
        let bytes = self
            .store
            .get_range(&self.key, range)
            .await
            .map_err(|e| ice(storage_error(&self.secrets, &self.location, "read", e)))?;
        self.counters.record_read(&self.location, len);
        Ok(bytes)
    }
}

struct ObjectWrite {
    store: Arc<dyn ObjectStore>,
    key: ObjectPath,
    location: String,
    buffer: Vec<Bytes>,
    buffered: usize,
    upload: Option<WriteMultipart>,
    closed: bool,
    secrets: Secrets,
}

#[async_trait]
impl FileWrite for ObjectWrite {
    async fn write(&mut self, bs: Bytes) -> iceberg::Result<()> {
        if self.closed {
            return Err(iceberg::Error::new(
                iceberg::ErrorKind::Unexpected,
                format!("write after close: {}", self.location),
            ));
        }
        if let Some(up) = self.upload.as_mut() {
            up.wait_for_capacity(4)
                .await
                .map_err(|e| ice(storage_error(&self.secrets, &self.location, "write", e)))?;
            // Handed over, not copied: the part holds the writer's buffers as they are.
            up.put(bs);
            return Ok(());
        }
        self.buffered += bs.len();
        self.buffer.push(bs);
        if self.buffered >= MULTIPART_THRESHOLD {
            let upload = self
                .store
                .put_multipart(&self.key)
                .await
                .map_err(|e| ice(storage_error(&self.secrets, &self.location, "write", e)))?;
            let mut up = WriteMultipart::new(upload);
            for chunk in self.buffer.drain(..) {
                up.put(chunk);
            }
            self.buffered = 0;
            self.upload = Some(up);
        }
        Ok(())
    }

    async fn close(&mut self) -> iceberg::Result<()> {
        if self.closed {
            return Err(iceberg::Error::new(
                iceberg::ErrorKind::Unexpected,
                format!("file already closed: {}", self.location),
            ));
        }
        self.closed = true;
        if let Some(up) = self.upload.take() {
            up.finish()
                .await
                .map_err(|e| ice(storage_error(&self.secrets, &self.location, "write", e)))?;
        } else {
            let payload: PutPayload = std::mem::take(&mut self.buffer).into_iter().collect();
            self.store
                .put(&self.key, payload)
                .await
                .map_err(|e| ice(storage_error(&self.secrets, &self.location, "write", e)))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_spellings() {
        let n = |s| normalize_location(s).unwrap();
        assert_eq!(n("s3a://b/wh/t/"), "s3://b/wh/t");
        assert_eq!(n("s3://b//wh///t"), n("s3n://b/wh/t"));
        assert_eq!(n("/tmp/wh/t"), "file:///tmp/wh/t");
        assert_eq!(n("file:/tmp/wh/t"), "file:///tmp/wh/t");
        assert_eq!(n("file:///tmp/wh/t/"), "file:///tmp/wh/t");
        assert!(normalize_location("relative/path").is_err());
        assert!(normalize_location("gs2://x/y").is_err());
        assert!(normalize_location("s3:///nobucket").is_err());
    }

    /// Locations spelled from the bytes that matter to a parse: slashes, dots, schemes, `@`,
    /// `#`, `%`, a space, a control character, upper case.
    fn spelled() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let scheme = prop_oneof![
            Just(""),
            Just("file:"),
            Just("file://"),
            Just("s3://"),
            Just("S3://"),
            Just("s3a://"),
            Just("gs://"),
            Just("gcs://"),
            Just("memory://"),
            Just("abfss://"),
            Just("wasb://"),
            Just("x://"),
        ];
        let piece = prop_oneof![
            4 => Just("/"),
            4 => Just("a"),
            2 => Just("b="),
            1 => Just("."),
            1 => Just(".."),
            1 => Just("@"),
            1 => Just("#1"),
            1 => Just("%41"),
            1 => Just(" "),
            1 => Just("\u{1}"),
            1 => Just("://"),
            1 => Just("Z"),
        ];
        (scheme, proptest::collection::vec(piece, 0..12))
            .prop_map(|(s, p)| format!("{s}{}", p.concat()))
    }

    proptest::proptest! {
        /// A location taken as already normal is what the parse makes of it.
        #[test]
        fn normal_locations_are_their_own_parse(location in spelled()) {
            let parsed = parse_normal(&location).ok();
            if is_normal(&location) {
                proptest::prop_assert_eq!(parsed.as_deref(), Some(location.as_str()));
            }
            proptest::prop_assert_eq!(normalize_location(&location).ok(), parsed);
        }

        /// A plain local path is the path object_store's local store would use.
        #[test]
        fn plain_local_paths_are_those_of_the_store(location in spelled()) {
            if let Some(path) = plain_local_path(&location) {
                proptest::prop_assert_eq!(
                    parsed_local_path(&location),
                    Some(std::path::PathBuf::from(path))
                );
            }
        }
    }

    #[test]
    fn plain_locations_take_the_short_way() {
        assert!(is_normal("s3://b/wh/t/data/x=1/f.parquet"));
        assert!(is_normal("file:///tmp/wh/t/metadata/snap-1.avro"));
        assert!(!is_normal("s3a://b/wh/t"));
        assert!(!is_normal("s3://b/wh/t/"));
        let local = "/tmp/wh/t/data/day=2024-01-01/00000-1-a.parquet";
        assert_eq!(plain_local_path(local), Some(local));
        assert_eq!(plain_local_path(&format!("file://{local}")), Some(local));
        assert_eq!(plain_local_path("/tmp/wh/t/data/f#1.parquet"), None);
        assert_eq!(plain_local_path("/tmp/wh/../etc"), None);
    }

    #[test]
    fn gcs_and_azure_locations() {
        let n = |s| normalize_location(s).unwrap();
        assert_eq!(n("gcs://b/wh/t/"), "gs://b/wh/t");
        assert_eq!(n("gs://b//wh/t"), "gs://b/wh/t");
        // Azure's schemes name endpoints: kept as written.
        let adls = "abfss://c@acct.dfs.core.windows.net/wh/t";
        let with_slash = format!("{adls}/");
        assert_eq!(n(&with_slash), adls);
        assert_eq!(
            n("WASBS://c@acct.blob.core.windows.net//wh"),
            "wasbs://c@acct.blob.core.windows.net/wh"
        );
        assert!(normalize_location("gs:///nobucket").is_err());
        assert!(normalize_location("abfss://@acct.dfs.core.windows.net/x").is_err());
        let loc = StoreLocation::parse("abfs://c/wh/t").unwrap();
        assert_eq!(loc.key().as_ref(), "wh/t");
    }

    #[test]
    fn azure_accounts_and_endpoints_as_pyarrow_and_java_build_them() {
        let props = |kv: &[(&str, &str)]| -> HashMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let t = |kv: &[(&str, &str)], authority: &str| azure_target(&props(kv), authority);
        // The account comes from the location's host; the endpoint is Azure's by default.
        let plain = t(&[], "c@acct.dfs.core.windows.net").unwrap();
        assert_eq!(
            (plain.container.as_str(), plain.account.as_str()),
            ("c", "acct")
        );
        assert_eq!(plain.endpoint, None);
        // An emulator: PyArrow's blob storage authority is a host the account follows as a path.
        let azurite = [
            (props::ADLS_BLOB_STORAGE_AUTHORITY, "127.0.0.1:10000"),
            (props::ADLS_BLOB_STORAGE_SCHEME, "http"),
        ];
        let e = t(&azurite, "c@devstoreaccount1.dfs.core.windows.net").unwrap();
        assert_eq!(
            e.endpoint.as_deref(),
            Some("http://127.0.0.1:10000/devstoreaccount1")
        );
        // An authority starting with `.` is a suffix after the account.
        let sovereign = [(
            props::ADLS_BLOB_STORAGE_AUTHORITY,
            ".blob.core.chinacloudapi.cn",
        )];
        let e = t(&sovereign, "c@acct.dfs.core.chinacloudapi.cn").unwrap();
        assert_eq!(
            e.endpoint.as_deref(),
            Some("https://acct.blob.core.chinacloudapi.cn")
        );
        // `abfs://container/path` takes the account from the properties.
        let named = [(props::ADLS_ACCOUNT_NAME, "named")];
        assert_eq!(t(&named, "c").unwrap().account, "named");
        let e = t(&[], "c").unwrap_err();
        assert!(e.to_string().contains(props::ADLS_ACCOUNT_NAME), "{e}");
        // Java's per-account endpoint, and a connection string's.
        let java = [(
            "adls.connection-string.acct",
            "http://localhost:10000/acct/",
        )];
        let e = t(&java, "c@acct.dfs.core.windows.net").unwrap();
        assert_eq!(e.endpoint.as_deref(), Some("http://localhost:10000/acct"));
        let conn = [(
            props::ADLS_CONNECTION_STRING,
            "DefaultEndpointsProtocol=http;AccountName=dev;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:10000/dev;",
        )];
        let e = t(&conn, "c").unwrap();
        assert_eq!(e.account, "dev");
        assert_eq!(e.key.as_deref(), Some("a2V5"));
        assert!(!format!("{e:?}").contains("a2V5"));
        assert_eq!(e.endpoint.as_deref(), Some("http://127.0.0.1:10000/dev"));
    }

    #[test]
    fn sas_tokens_and_connection_strings_are_scrubbed_in_parts() {
        let secrets = Secrets::of(
            &[
                (
                    props::ADLS_SAS_TOKEN.to_string(),
                    "sv=2024-08-04&ss=b&sig=AbC%2Bd3f%2Fsecretsig%3D".to_string(),
                ),
                (
                    props::ADLS_CONNECTION_STRING.to_string(),
                    "AccountName=dev;AccountKey=S3cretKeyValue==;BlobEndpoint=http://h/dev"
                        .to_string(),
                ),
            ]
            .into_iter()
            .collect(),
        );
        let text = "GET http://h/dev/c/x?sv=2024-08-04&sig=AbC%2Bd3f%2Fsecretsig%3D failed; \
                    decoded AbC+d3f/secretsig=; key S3cretKeyValue==";
        let out = secrets.scrub(text);
        assert!(
            !out.contains("secretsig") && !out.contains("S3cretKeyValue"),
            "{out}"
        );
        // What is not secret stays readable.
        assert!(
            out.contains("sv=2024-08-04") && out.contains("http://h/dev/c/x"),
            "{out}"
        );
    }

    #[test]
    fn staging_file_names_follow_object_store() {
        let staged = |s: &str| is_unfinished_upload(std::path::Path::new(s));
        assert!(staged("/t/data/x.parquet#1"));
        assert!(staged("/t/metadata/snap-1.avro#12"));
        assert!(!staged("/t/data/x.parquet"));
        assert!(!staged("/t/data/x.parquet#"));
        assert!(!staged("/t/data/a#b.parquet"));
        assert!(
            !staged("/t/data/a#1#2"),
            "object_store splits at the first `#`"
        );
        assert!(!staged("/t/data#1/x.parquet"), "only the file name counts");
        let p = |s: &str| local_path(s).map(|p| p.display().to_string());
        assert_eq!(p("file:///tmp/t/x#1").as_deref(), Some("/tmp/t/x#1"));
        assert_eq!(p("file:/tmp/t/").as_deref(), Some("/tmp/t/"));
        assert_eq!(p("/tmp/t").as_deref(), Some("/tmp/t"));
        assert_eq!(p("file://host/t"), None);
    }

    #[tokio::test]
    async fn staging_files_are_listed_and_deleted_on_local_storage_only() {
        let dir = tempfile::tempdir().unwrap();
        let storage = ObjectStorageFactory::new().storage(HashMap::new());
        let root = format!("file://{}", dir.path().display());
        storage
            .write_all(
                &format!("{root}/t/data/ok.parquet"),
                Bytes::from_static(b"ok"),
            )
            .await
            .unwrap();
        std::fs::write(dir.path().join("t/data/ok.parquet#1"), b"half").unwrap();
        std::fs::create_dir_all(dir.path().join("t/metadata")).unwrap();
        std::fs::write(dir.path().join("t/metadata/m.avro#2"), b"h").unwrap();
        let names = |v: Vec<ListedObject>| {
            let mut v: Vec<String> = v.into_iter().map(|o| o.location).collect();
            v.sort();
            v
        };
        assert_eq!(
            names(storage.list(&format!("{root}/t/")).await.unwrap()),
            vec![format!("{root}/t/data/ok.parquet")],
            "object_store hides them"
        );
        let staged = storage
            .list_unfinished_uploads(&format!("{root}/t/"))
            .await
            .unwrap();
        assert!(staged.iter().all(|o| o.size > 0 && o.last_modified_ms > 0));
        assert_eq!(
            names(staged),
            vec![
                format!("{root}/t/data/ok.parquet#1"),
                format!("{root}/t/metadata/m.avro#2")
            ]
        );
        storage
            .delete(&format!("{root}/t/data/ok.parquet#1"))
            .await
            .unwrap();
        storage
            .delete(&format!("{root}/t/data/ok.parquet#1"))
            .await
            .unwrap();
        assert!(!dir.path().join("t/data/ok.parquet#1").exists());
        assert!(dir.path().join("t/data/ok.parquet").exists());
        assert!(
            storage
                .list_unfinished_uploads(&format!("{root}/missing/"))
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            storage
                .list_unfinished_uploads("memory://x/t/")
                .await
                .unwrap()
                .is_empty()
        );
    }

    #[tokio::test]
    async fn memory_roundtrip_and_create_if_absent() {
        let storage = ObjectStorageFactory::new().storage(HashMap::new());
        let loc = "memory://unit-rt/t/metadata/v1.metadata.json";
        assert!(
            storage
                .write_if_absent(loc, Bytes::from_static(b"{}"))
                .await
                .unwrap()
        );
        assert!(
            !storage
                .write_if_absent(loc, Bytes::from_static(b"{}"))
                .await
                .unwrap()
        );
        assert_eq!(
            storage.read_all(loc).await.unwrap(),
            Bytes::from_static(b"{}")
        );
        let listed = storage.list("memory://unit-rt/t").await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].location, loc);
        let snap = storage.counters().snapshot();
        assert_eq!(snap.reads_of(super::super::PathKind::MetadataJson), 1);
    }
}
