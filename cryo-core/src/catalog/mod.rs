//! Catalogs (the read side): where tables are discovered.
//!
//! A [`Catalog`] is configured exactly like PyIceberg's `load_catalog(name, **properties)`
//! ([`CatalogConfig`]); it lists namespaces and tables and loads a table's metadata into a
//! [`LoadedTable`]. Supported: SQL on sqlite (PyIceberg/Java schema), Iceberg REST (bearer token,
//! OAuth2 client credentials, prefix from `/v1/config`), Hadoop-style warehouses and single tables
//! given by their `metadata.json`. Storage for every kind is `object_store` ([`crate::io`]).

pub(crate) mod committer;
mod config;
mod create;
pub mod glue;
pub(crate) mod hadoop;
mod hive;
pub mod props;
mod pyiceberg;
mod rest;
pub(crate) mod sql;

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use iceberg::io::{FileIO, FileIOBuilder};
use iceberg::spec::TableMetadataRef;
use iceberg::{CatalogBuilder, NamespaceIdent, TableIdent};
use serde::{Deserialize, Serialize};

pub use committer::{
    CatalogCommitter, GlueCommitter, HadoopCommitter, HiveCommitter, SqlCommitter, TableChanges,
};
pub use config::{CatalogConfig, CatalogKind};
pub use create::NewTable;
use create::{create_hadoop_table, create_sql_table};
pub use pyiceberg::PyIcebergConfig;
pub use rest::RestCommitter;
pub use sql::{SqlCatalog, SqlDialect, SqlSchemaVersion};

use crate::error::{Error, Result};
use crate::io::{IoCounters, ObjectStorage, ObjectStorageFactory};

/// A (possibly nested) namespace.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
#[serde(transparent)]
pub struct Namespace(pub Vec<String>);

impl Namespace {
    /// A namespace from its levels.
    pub fn new(levels: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Namespace(levels.into_iter().map(Into::into).collect())
    }

    /// Split a dotted name (`a.b`) the way the SQL catalog stores it.
    pub fn parse_dotted(s: &str) -> Self {
        Namespace(s.split('.').map(str::to_string).collect())
    }

    /// The dotted form the SQL catalog stores.
    pub fn dotted(&self) -> String {
        self.0.join(".")
    }

    /// The one level of a namespace in catalogs whose databases do not nest (Glue, Hive), or a
    /// validation error saying `what` is one level.
    pub(crate) fn single_level(&self, what: &str) -> Result<&str> {
        match self.0.as_slice() {
            [level] => Ok(level),
            _ => Err(Error::validation(format!(
                "namespace `{self}`: {what} is one level"
            ))),
        }
    }

    fn to_iceberg(&self) -> Result<NamespaceIdent> {
        NamespaceIdent::from_vec(self.0.clone())
            .map_err(|e| Error::validation(format!("namespace `{self}`: {}", e.message())))
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_parts(f, &self.0)
    }
}

fn write_parts(f: &mut fmt::Formatter<'_>, parts: &[String]) -> fmt::Result {
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            f.write_str(".")?;
        }
        if p.is_empty() || p.contains(['.', '"', ' ', '\n', '\t', '`']) {
            write!(f, "\"{}\"", p.replace('"', "\"\""))?;
        } else {
            f.write_str(p)?;
        }
    }
    Ok(())
}

/// A table identifier: namespace levels and a name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TableId {
    /// Namespace levels.
    pub namespace: Namespace,
    /// Table name.
    pub name: String,
}

impl TableId {
    /// An identifier from a namespace and a name.
    pub fn new(namespace: Namespace, name: impl Into<String>) -> Self {
        Self {
            namespace,
            name: name.into(),
        }
    }

    /// Parse `ns.table` / `a.b.table`; parts with dots are written in double quotes
    /// (`"my.ns".t`), the way [`TableId`]'s `Display` writes them.
    pub fn parse(s: &str) -> Result<Self> {
        let mut parts = Vec::new();
        let mut cur = String::new();
        let mut chars = s.chars().peekable();
        let mut quoted = false;
        while let Some(c) = chars.next() {
            match c {
                '"' if quoted && chars.peek() == Some(&'"') => {
                    chars.next();
                    cur.push('"');
                }
                '"' => quoted = !quoted,
                '.' if !quoted => parts.push(std::mem::take(&mut cur)),
                c => cur.push(c),
            }
        }
        if quoted {
            return Err(Error::validation(format!(
                "table identifier `{s}`: unbalanced quote"
            )));
        }
        parts.push(cur);
        if parts.len() < 2 || parts.iter().any(String::is_empty) {
            return Err(Error::validation(format!(
                "table identifier `{s}` must be `namespace.table` with non-empty parts"
            )));
        }
        let name = parts.pop().unwrap_or_default();
        Ok(TableId::new(Namespace(parts), name))
    }

    /// Upstream identifier.
    pub fn to_iceberg(&self) -> Result<TableIdent> {
        Ok(TableIdent::new(
            self.namespace.to_iceberg()?,
            self.name.clone(),
        ))
    }

    /// All parts, namespace first.
    pub fn parts(&self) -> Vec<&str> {
        self.namespace
            .0
            .iter()
            .map(String::as_str)
            .chain(std::iter::once(self.name.as_str()))
            .collect()
    }
}

impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = self.namespace.0.clone();
        parts.push(self.name.clone());
        write_parts(f, &parts)
    }
}

/// A table's metadata as loaded from a catalog, with the storage to read the rest.
///
/// `Debug` leaves out the `FileIO`: upstream's derived `Debug` prints its storage properties,
/// credentials included.
#[derive(Clone)]
pub struct LoadedTable {
    /// Identifier in its catalog.
    pub id: TableId,
    /// Current `metadata.json` (absent only for REST catalogs that do not report it).
    pub metadata_location: Option<String>,
    /// Parsed metadata.
    pub metadata: TableMetadataRef,
    /// Storage for manifests and data files.
    pub storage: ObjectStorage,
    /// The same storage as an iceberg `FileIO` (for upstream readers and writers).
    pub file_io: FileIO,
}

impl fmt::Debug for LoadedTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedTable")
            .field("id", &self.id)
            .field("metadata_location", &self.metadata_location)
            .field("metadata", &self.metadata)
            .field("storage", &self.storage)
            .finish_non_exhaustive()
    }
}

impl LoadedTable {
    /// The upstream `Table` for this metadata (call it inside a Tokio runtime: upstream readers
    /// run on the current one).
    pub fn to_iceberg(&self) -> Result<iceberg::table::Table> {
        let runtime = iceberg::Runtime::try_current().map_err(|e| {
            Error::config(format!(
                "{}: upstream tables need a Tokio runtime: {}",
                self.id,
                e.message()
            ))
        })?;
        let mut b = iceberg::table::Table::builder()
            .runtime(runtime)
            .identifier(self.id.to_iceberg()?)
            .metadata(Arc::clone(&self.metadata))
            .file_io(self.file_io.clone());
        if let Some(loc) = &self.metadata_location {
            b = b.metadata_location(loc.clone());
        }
        Ok(b.build()?)
    }
}

enum Backend {
    Sql(SqlCatalog),
    Glue(Arc<glue::GlueClient>),
    Hive(Arc<hive::HiveClient>),
    Rest(Box<iceberg_catalog_rest::RestCatalog>),
    Hadoop { warehouse: String },
    Static { location: String, id: TableId },
}

/// A connected catalog.
pub struct Catalog {
    config: CatalogConfig,
    kind: CatalogKind,
    backend: Backend,
    factory: ObjectStorageFactory,
}

impl fmt::Debug for Catalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Catalog")
            .field("config", &self.config)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl Catalog {
    /// Connect to the catalog a configuration describes.
    pub async fn connect(config: CatalogConfig) -> Result<Self> {
        // Before anything in this process decodes Avro (the limit is set once per process).
        crate::format::limit_avro_allocations();
        let kind = config.kind()?;
        if config.name.trim().is_empty() {
            return Err(Error::config("catalog name must not be empty"));
        }
        config.check_properties()?;
        let factory = ObjectStorageFactory::new();
        let backend = match kind {
            CatalogKind::Sql => Backend::Sql(SqlCatalog::connect(&config).await?),
            CatalogKind::Glue => {
                let client = glue::GlueClient::new(&config)?;
                // Ask for the databases now so a wrong endpoint or credential fails here.
                client.list_namespaces().await?;
                Backend::Glue(Arc::new(client))
            }
            CatalogKind::Hive => {
                let client = hive::HiveClient::new(&config)?;
                // Ask for the databases now so a wrong URI fails here.
                client.list_namespaces().await?;
                Backend::Hive(Arc::new(client))
            }
            CatalogKind::Rest => {
                let props = config
                    .properties
                    .iter()
                    .filter(|(k, _)| k.as_str() != props::TYPE)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let catalog = iceberg_catalog_rest::RestCatalogBuilder::default()
                    .with_storage_factory(Arc::new(factory.clone()))
                    .load(config.name.clone(), props)
                    .await
                    .map_err(|e| catalog_err(&config, "connect", &e))?;
                // The REST client connects lazily: ask for namespaces now so a wrong URI or
                // credential fails here, with a clear error, rather than mid-scan.
                iceberg::Catalog::list_namespaces(&catalog, None)
                    .await
                    .map_err(|e| catalog_err(&config, "connect", &e))?;
                Backend::Rest(Box::new(catalog))
            }
            CatalogKind::Hadoop => Backend::Hadoop {
                warehouse: crate::io::normalize_location(config.require(props::WAREHOUSE)?)?,
            },
            CatalogKind::Static => {
                let location = config.require(props::METADATA_LOCATION)?.to_string();
                let id = static_table_id(&location);
                Backend::Static { location, id }
            }
        };
        Ok(Catalog {
            config,
            kind,
            backend,
            factory,
        })
    }

    /// Connect to catalog `name` as PyIceberg's configuration describes it: `.pyiceberg.yaml`
    /// (in `$PYICEBERG_HOME`, the home directory, then the current directory) with the
    /// `PYICEBERG_CATALOG__<NAME>__<PROPERTY>` environment variables on top
    /// ([`PyIcebergConfig`]); PyIceberg's `load_catalog(name)`.
    pub async fn load(name: &str) -> Result<Self> {
        Self::connect(PyIcebergConfig::from_env()?.catalog(Some(name), [])?).await
    }

    /// Catalog name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Its configuration.
    pub fn config(&self) -> &CatalogConfig {
        &self.config
    }

    /// Its kind.
    pub fn kind(&self) -> CatalogKind {
        self.kind
    }

    /// Counters of every storage read and write made through this catalog.
    pub fn io_counters(&self) -> &Arc<IoCounters> {
        self.factory.counters()
    }

    /// Close the catalog's connections now and wait until they are closed (a SQL catalog's
    /// `SQLite` connections; the other kinds hold none that need it). Later calls through this
    /// catalog fail. Dropping a catalog closes them too, but in the background: a process that
    /// forks right after (Python's `os.fork()`) can copy a lock `SQLite` holds while closing, and
    /// the child then hangs on its first `SQLite` call. Bindings close before they drop.
    pub async fn close(&self) {
        if let Backend::Sql(s) = &self.backend {
            s.close().await;
        }
    }

    /// The SQL backend, if this is a SQL catalog.
    pub fn as_sql(&self) -> Option<&SqlCatalog> {
        match &self.backend {
            Backend::Sql(s) => Some(s),
            _ => None,
        }
    }

    /// Storage configured with the catalog's properties.
    pub fn storage(&self) -> ObjectStorage {
        self.factory.storage(self.config.storage_properties())
    }

    pub(crate) fn file_io(&self, props: std::collections::HashMap<String, String>) -> FileIO {
        FileIOBuilder::new(Arc::new(self.factory.clone()))
            .with_props(props)
            .build()
    }

    /// The warehouse location new tables go to, if the catalog has one.
    pub fn warehouse(&self) -> Option<&str> {
        self.config.get(props::WAREHOUSE)
    }

    /// Every namespace, at every level.
    pub async fn list_namespaces(&self) -> Result<Vec<Namespace>> {
        match &self.backend {
            Backend::Sql(s) => s.list_namespaces().await,
            Backend::Glue(g) => g.list_namespaces().await,
            Backend::Hive(h) => h.list_namespaces().await,
            Backend::Rest(r) => {
                let mut out = Vec::new();
                let mut queue: Vec<Option<NamespaceIdent>> = vec![None];
                while let Some(parent) = queue.pop() {
                    let children = iceberg::Catalog::list_namespaces(r.as_ref(), parent.as_ref())
                        .await
                        .map_err(|e| catalog_err(&self.config, "list namespaces", &e))?;
                    for ns in children {
                        // Servers without nested namespaces may echo the parent back.
                        if Some(&ns) == parent.as_ref() {
                            continue;
                        }
                        out.push(Namespace(ns.clone().inner()));
                        queue.push(Some(ns));
                    }
                }
                out.sort();
                out.dedup();
                Ok(out)
            }
            Backend::Hadoop { warehouse } => {
                let tables = hadoop::walk_warehouse(&self.storage(), warehouse).await?;
                let mut out: Vec<Namespace> = tables.into_iter().map(|t| t.namespace).collect();
                out.sort();
                out.dedup();
                Ok(out)
            }
            Backend::Static { id, .. } => Ok(vec![id.namespace.clone()]),
        }
    }

    /// Tables in one namespace.
    pub async fn list_tables(&self, ns: &Namespace) -> Result<Vec<TableId>> {
        match &self.backend {
            Backend::Sql(s) => s.list_tables(ns).await,
            Backend::Glue(g) => g.list_tables(ns).await,
            Backend::Hive(h) => h.list_tables(ns).await,
            Backend::Rest(r) => {
                let tables = iceberg::Catalog::list_tables(r.as_ref(), &ns.to_iceberg()?)
                    .await
                    .map_err(|e| catalog_err(&self.config, &format!("list tables in {ns}"), &e))?;
                let mut out: Vec<TableId> = tables
                    .into_iter()
                    .map(|t| TableId::new(Namespace(t.namespace().clone().inner()), t.name()))
                    .collect();
                out.sort();
                Ok(out)
            }
            Backend::Hadoop { warehouse } => Ok(hadoop::walk_warehouse(&self.storage(), warehouse)
                .await?
                .into_iter()
                .filter(|t| &t.namespace == ns)
                .collect()),
            Backend::Static { id, .. } => Ok(if &id.namespace == ns {
                vec![id.clone()]
            } else {
                vec![]
            }),
        }
    }

    /// Every table in the catalog.
    pub async fn list_all_tables(&self) -> Result<Vec<TableId>> {
        let mut out = Vec::new();
        for ns in self.list_namespaces().await? {
            out.extend(self.list_tables(&ns).await?);
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Load a table's current metadata.
    pub async fn load_table(&self, id: &TableId) -> Result<LoadedTable> {
        let table_name = id.to_string();
        match &self.backend {
            Backend::Sql(s) => {
                let location = s.metadata_location(id).await?;
                self.load_from_location(id, location).await
            }
            Backend::Glue(g) => {
                let location = g.metadata_location(id).await?;
                self.load_from_location(id, location).await
            }
            Backend::Hive(h) => {
                let location = h.metadata_location(id).await?;
                self.load_from_location(id, location).await
            }
            Backend::Rest(r) => {
                let table = iceberg::Catalog::load_table(r.as_ref(), &id.to_iceberg()?)
                    .await
                    .map_err(|e| {
                        if matches!(
                            e.kind(),
                            iceberg::ErrorKind::TableNotFound
                                | iceberg::ErrorKind::NamespaceNotFound
                        ) {
                            Error::NotFound {
                                what: format!("table {id} in catalog `{}`", self.config.name),
                            }
                        } else {
                            catalog_err(&self.config, &format!("load table {table_name}"), &e)
                        }
                    })?;
                let props = table.file_io().config().props().clone();
                Ok(LoadedTable {
                    id: id.clone(),
                    metadata_location: table.metadata_location().map(str::to_string),
                    metadata: table.metadata_ref(),
                    storage: self.factory.storage(props.clone()),
                    file_io: self.file_io(props),
                })
            }
            Backend::Hadoop { warehouse } => {
                let dir = hadoop::table_dir(warehouse, id)?;
                let location =
                    hadoop::current_metadata_file(&self.storage(), &table_name, &dir).await?;
                self.load_from_location(id, location).await
            }
            Backend::Static { location, id: sid } => {
                if sid != id {
                    return Err(Error::NotFound {
                        what: format!("table {id} (this catalog holds only {sid})"),
                    });
                }
                let location = if names_json_file(location) {
                    location.clone()
                } else {
                    hadoop::current_metadata_file(&self.storage(), &table_name, location).await?
                };
                self.load_from_location(id, location).await
            }
        }
    }

    /// The committer for this catalog's tables (see [`CatalogCommitter`]).
    ///
    /// SQL, Hadoop and REST catalogs are supported (REST with the catalog's own auth and
    /// prefix: [`RestCommitter`]); a single `metadata.json` (static) table is
    /// read-only.
    pub fn committer(&self) -> Result<std::sync::Arc<dyn CatalogCommitter>> {
        match &self.backend {
            Backend::Sql(s) => Ok(Arc::new(SqlCommitter::new(s.clone()))),
            Backend::Glue(g) => Ok(Arc::new(GlueCommitter::new(Arc::clone(g)))),
            Backend::Hive(h) => Ok(Arc::new(HiveCommitter::new(Arc::clone(h)))),
            Backend::Hadoop { .. } => Ok(Arc::new(HadoopCommitter::new())),
            Backend::Rest(_) => Ok(Arc::new(RestCommitter::new(&self.config)?)),
            Backend::Static { .. } => Err(Error::unsupported(format!(
                "catalog `{}` is a single metadata file and read-only",
                self.config.name
            ))),
        }
    }

    /// Create a namespace; creating one that exists is not an error.
    ///
    /// SQL catalogs record it the way `PyIceberg` does (an `exists` property); Hadoop warehouses
    /// have no namespace objects (a namespace is a directory, created with its first table).
    pub async fn create_namespace(&self, ns: &Namespace) -> Result<()> {
        if ns.0.is_empty() || ns.0.iter().any(String::is_empty) {
            return Err(Error::validation(format!(
                "namespace `{ns}` has an empty level"
            )));
        }
        match &self.backend {
            Backend::Sql(s) => s.create_namespace(ns).await,
            Backend::Glue(g) => g.create_database(ns).await,
            Backend::Hive(h) => h.create_database(ns).await,
            Backend::Hadoop { .. } => Ok(()),
            Backend::Rest(r) => {
                let ident = ns.to_iceberg()?;
                let exists = iceberg::Catalog::namespace_exists(r.as_ref(), &ident)
                    .await
                    .map_err(|e| {
                        catalog_err(&self.config, &format!("create namespace {ns}"), &e)
                    })?;
                if !exists {
                    iceberg::Catalog::create_namespace(
                        r.as_ref(),
                        &ident,
                        std::collections::HashMap::new(),
                    )
                    .await
                    .map_err(|e| {
                        catalog_err(&self.config, &format!("create namespace {ns}"), &e)
                    })?;
                }
                Ok(())
            }
            Backend::Static { .. } => Err(Error::unsupported(format!(
                "catalog `{}` is a single metadata file and read-only",
                self.config.name
            ))),
        }
    }

    /// Register a table whose `metadata.json` already exists (Iceberg's `register_table`: a
    /// migration, or a table written elsewhere) under `id`, and return it as loaded. Served by
    /// SQL, Glue and Hive catalogs; an existing table is an [`Error::Catalog`].
    pub async fn register_table(
        &self,
        id: &TableId,
        metadata_location: &str,
    ) -> Result<LoadedTable> {
        let storage = self.storage();
        let metadata =
            crate::format::read_table_metadata(&storage, &id.to_string(), metadata_location)
                .await?;
        match &self.backend {
            Backend::Sql(s) => s.insert_table(id, metadata_location).await?,
            Backend::Glue(g) => {
                g.register_table(id, metadata.location(), metadata_location)
                    .await?;
            }
            Backend::Hive(h) => {
                h.register_table(id, metadata.location(), metadata_location)
                    .await?;
            }
            Backend::Rest(_) | Backend::Hadoop { .. } | Backend::Static { .. } => {
                return Err(Error::unsupported(format!(
                    "catalog `{}`: registering tables is served by sql, glue and hive catalogs",
                    self.config.name
                )));
            }
        }
        self.load_table(id).await
    }

    /// Create a table and return it as loaded (see [`NewTable`]).
    ///
    /// SQL catalogs write `<location>/metadata/00000-<uuid>.metadata.json` and insert the row
    /// (the namespace must exist); Hadoop catalogs create `<warehouse>/<ns…>/<name>/metadata/
    /// v1.metadata.json` and the version hint; REST catalogs send a create-table request and the
    /// server writes the metadata (its clock stamps it). An existing table is an
    /// [`Error::Catalog`].
    pub async fn create_table(&self, id: &TableId, table: NewTable) -> Result<LoadedTable> {
        let storage = self.storage();
        match &self.backend {
            Backend::Sql(s) => {
                create_sql_table(s, &storage, self.warehouse(), id, table).await?;
            }
            Backend::Hadoop { warehouse } => {
                let dir = hadoop::table_dir(warehouse, id)?;
                create_hadoop_table(&storage, &self.config.name, &dir, id, table).await?;
            }
            Backend::Rest(_) => {
                RestCommitter::new(&self.config)?
                    .create_table(id, table)
                    .await?;
            }
            Backend::Static { .. } => {
                return Err(Error::unsupported(format!(
                    "catalog `{}` is a single metadata file and read-only",
                    self.config.name
                )));
            }
            Backend::Glue(_) | Backend::Hive(_) => {
                return Err(Error::unsupported(format!(
                    "catalog `{}`: creating tables in Glue or a Hive Metastore is not supported yet (create them with PyIceberg or Spark)",
                    self.config.name
                )));
            }
        }
        self.load_table(id).await
    }

    async fn load_from_location(&self, id: &TableId, location: String) -> Result<LoadedTable> {
        let storage = self.storage();
        let metadata =
            crate::format::read_table_metadata(&storage, &id.to_string(), &location).await?;
        let props = self.config.storage_properties();
        Ok(LoadedTable {
            id: id.clone(),
            metadata_location: Some(location),
            metadata,
            storage,
            file_io: self.file_io(props),
        })
    }
}

/// Whether a static location names a metadata file rather than a table directory. The extension
/// is compared ignoring ASCII case: object stores keep whatever case the writer chose.
fn names_json_file(location: &str) -> bool {
    Path::new(location)
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("json"))
}

/// `…/<ns>/<table>/metadata/vN.metadata.json` → `<ns>.<table>`; falls back to `default.<dir>`.
fn static_table_id(location: &str) -> TableId {
    let trimmed = location.trim_end_matches('/');
    let table_dir = if names_json_file(trimmed) {
        trimmed
            .rsplit_once('/')
            .map_or(trimmed, |(d, _)| d)
            .trim_end_matches("/metadata")
    } else {
        trimmed
    };
    let mut parts = table_dir.rsplit('/');
    let name = parts.next().filter(|s| !s.is_empty()).unwrap_or("table");
    let ns = parts
        .next()
        .filter(|s| !s.is_empty() && !s.contains(':'))
        .unwrap_or("default");
    TableId::new(Namespace::new([ns]), name)
}

fn catalog_err(config: &CatalogConfig, what: &str, e: &iceberg::Error) -> Error {
    Error::Catalog {
        catalog: config.name.clone(),
        // Upstream messages can echo request details; scrub every configured secret.
        message: config.redact(&format!("{what}: {e}")),
        source: None,
        retryable: e.retryable() || unreachable(e),
    }
}

/// Whether an upstream error comes from a server that could not be reached or did not answer
/// in time (a catalog that is down, for now): worth trying again later.
fn unreachable(e: &iceberg::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        if let Some(r) = c.downcast_ref::<reqwest::Error>()
            && (r.is_connect() || r.is_timeout())
        {
            return true;
        }
        cause = c.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_ids_round_trip() {
        for s in ["db.t", "a.b.t", "\"my.ns\".t", "db.\"we\"\"ird\""] {
            let id = TableId::parse(s).unwrap();
            assert_eq!(TableId::parse(&id.to_string()).unwrap(), id, "{s}");
        }
        assert_eq!(
            TableId::parse("\"my.ns\".t").unwrap().namespace.0,
            vec!["my.ns"]
        );
        assert!(TableId::parse("t").is_err());
        assert!(TableId::parse("a..t").is_err());
        assert!(TableId::parse("\"a.t").is_err());
    }

    #[test]
    fn static_ids_from_paths() {
        assert_eq!(
            static_table_id("/wh/db/events/metadata/00001-x.metadata.json").to_string(),
            "db.events"
        );
        assert_eq!(static_table_id("s3://b/db/t/").to_string(), "db.t");
        assert_eq!(static_table_id("/t").to_string(), "default.t");
    }

    #[test]
    fn static_locations_name_files_or_directories() {
        assert!(names_json_file("s3://b/db/t/metadata/v1.metadata.json"));
        assert!(names_json_file("/wh/db/t/metadata/V1.METADATA.JSON"));
        assert!(!names_json_file("s3://b/db/t"));
        assert!(!names_json_file("/wh/db/t/"));
    }
}
