//! Creating tables in SQL and Hadoop catalogs.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use iceberg::spec::{
    FormatVersion, Schema, SortOrder, TableMetadata, TableMetadataBuilder, UnboundPartitionSpec,
};

use super::committer::{discard, encode_metadata, metadata_dir};
use crate::catalog::{SqlCatalog, TableId};
use crate::clock::{self, Clock};
use crate::error::iceberg_error;
use crate::error::{Error, Result};
use crate::io::{ObjectStorage, normalize_location};

/// A table to create: schema, partition spec, sort order, properties and format version.
///
/// Field ids in the schema (and the ids the spec and sort order refer to) are reassigned from 1
/// in schema order, as Java and `PyIceberg` do for new tables; read the final ids from the
/// returned table's metadata.
#[derive(Debug, Clone)]
pub struct NewTable {
    /// Columns.
    pub schema: Schema,
    /// Partitioning (unpartitioned by default).
    pub partition_spec: UnboundPartitionSpec,
    /// Sort order (unsorted by default).
    pub sort_order: SortOrder,
    /// Table properties (`write.*`, `history.*`, …).
    pub properties: HashMap<String, String>,
    /// Format version: v2 by default; v1 and v3 are allowed.
    pub format_version: FormatVersion,
    /// Table location; by default the catalog's (SQL: `<warehouse>/<namespace>/<name>`, as
    /// `PyIceberg` lays it out; Hadoop: the table directory).
    pub location: Option<String>,
    /// Source of the creation time (`last-updated-ms`).
    pub clock: Arc<dyn Clock>,
}

impl NewTable {
    /// An unpartitioned, unsorted v2 table with no properties.
    pub fn new(schema: Schema) -> Self {
        Self {
            schema,
            partition_spec: UnboundPartitionSpec::builder().build(),
            sort_order: SortOrder::unsorted_order(),
            properties: HashMap::new(),
            format_version: FormatVersion::V2,
            location: None,
            clock: clock::system(),
        }
    }

    /// Partition the table.
    #[must_use]
    pub fn with_partition_spec(mut self, spec: UnboundPartitionSpec) -> Self {
        self.partition_spec = spec;
        self
    }

    /// Sort the table.
    #[must_use]
    pub fn with_sort_order(mut self, order: SortOrder) -> Self {
        self.sort_order = order;
        self
    }

    /// Set one table property.
    #[must_use]
    pub fn with_property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.insert(key.into(), value.into());
        self
    }

    /// Set table properties.
    #[must_use]
    pub fn with_properties(
        mut self,
        properties: impl IntoIterator<Item = (impl Into<String>, impl Into<String>)>,
    ) -> Self {
        self.properties
            .extend(properties.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// Choose the format version.
    #[must_use]
    pub fn with_format_version(mut self, version: FormatVersion) -> Self {
        self.format_version = version;
        self
    }

    /// Put the table somewhere other than the catalog's default location.
    #[must_use]
    pub fn with_location(mut self, location: impl Into<String>) -> Self {
        self.location = Some(location.into());
        self
    }

    /// Take the creation time from `clock`.
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The metadata of the new table at `location`.
    fn build_metadata(self, table: &str, location: String) -> Result<TableMetadata> {
        check_new_location(table, &location)?;
        let now = self.clock.now_ms();
        let built = TableMetadataBuilder::new(
            self.schema,
            self.partition_spec,
            self.sort_order,
            location,
            self.format_version,
            self.properties,
        )
        .and_then(TableMetadataBuilder::build)
        .map_err(|e| iceberg_error(table, "create table metadata", e))?;
        stamp_last_updated(table, &built.metadata, now)
    }
}

/// Set `last-updated-ms` to the injected clock's time.
///
/// `TableMetadataBuilder` stamps a new table with the wall clock and offers no setter, and it
/// refuses snapshots more than a minute older than `last-updated-ms`; a replayed or simulated
/// history (the demo lake, tests) needs the creation time to come from the same clock as the
/// snapshots. The JSON form is the spec's, so a round trip through it is lossless.
fn stamp_last_updated(table: &str, metadata: &TableMetadata, now_ms: i64) -> Result<TableMetadata> {
    let internal =
        |e: serde_json::Error| Error::Internal(format!("{table}: metadata JSON round trip: {e}"));
    let mut json = serde_json::to_value(metadata).map_err(internal)?;
    if let Some(obj) = json.as_object_mut() {
        obj.insert("last-updated-ms".into(), serde_json::Value::from(now_ms));
    }
    serde_json::from_value(json).map_err(internal)
}

/// A new table's location must not climb out of where it is spelled: no `.` or `..` segment
/// (also percent-encoded), which a local store would resolve into another directory and an
/// object store would keep as a literal key no other engine spells the same way.
pub(crate) fn check_new_location(table: &str, location: &str) -> Result<()> {
    let path = location
        .split_once("://")
        .map_or(location, |(_, rest)| rest);
    let dotted = path.split('/').any(|seg| {
        let decoded = seg.replace("%2E", ".").replace("%2e", ".");
        decoded == "." || decoded == ".."
    });
    if dotted {
        return Err(Error::validation(format!(
            "{table}: location {location} has a `.` or `..` segment"
        )));
    }
    Ok(())
}

/// Create a table in a SQL catalog: write `00000-<uuid>.metadata.json`, then insert the row.
pub(crate) async fn create_sql_table(
    sql: &SqlCatalog,
    storage: &ObjectStorage,
    warehouse: Option<&str>,
    id: &TableId,
    table: NewTable,
) -> Result<String> {
    let name = id.to_string();
    if !sql.list_namespaces().await?.contains(&id.namespace) {
        return Err(Error::NotFound {
            what: format!(
                "namespace {} in catalog `{}` (create it first)",
                id.namespace,
                sql.name()
            ),
        });
    }
    if sql.list_tables(&id.namespace).await?.contains(id) {
        return Err(already_exists(sql.name(), id));
    }
    let location = if let Some(l) = &table.location {
        normalize_location(l)?
    } else {
        let warehouse = warehouse.ok_or_else(|| {
            Error::config(format!(
                "catalog `{}` has no `warehouse`; give the new table a location",
                sql.name()
            ))
        })?;
        // PyIceberg 0.12's layout: <warehouse>/<dotted namespace>/<table>.
        format!(
            "{}/{}/{}",
            normalize_location(warehouse)?,
            id.namespace.dotted(),
            id.name
        )
    };
    let metadata = table.build_metadata(&name, location)?;
    let (bytes, suffix) = encode_metadata(&name, &metadata)?;
    let metadata_location = format!(
        "{}/00000-{}{suffix}",
        metadata_dir(&metadata),
        crate::random::uuid()
    );
    if !storage.write_if_absent(&metadata_location, bytes).await? {
        return Err(Error::Internal(format!(
            "{metadata_location} already exists"
        )));
    }
    if let Err(e) = sql.insert_table(id, &metadata_location).await {
        // Most likely another writer created the table between our check and the insert.
        discard(storage, &metadata_location).await;
        return Err(
            if sql
                .list_tables(&id.namespace)
                .await
                .is_ok_and(|t| t.contains(id))
            {
                already_exists(sql.name(), id)
            } else {
                e
            },
        );
    }
    Ok(metadata_location)
}

/// Create a Hadoop-style table: `<dir>/metadata/v1.metadata.json`, created only if absent, then
/// `version-hint.text`.
pub(crate) async fn create_hadoop_table(
    storage: &ObjectStorage,
    catalog: &str,
    table_dir: &str,
    id: &TableId,
    table: NewTable,
) -> Result<String> {
    let name = id.to_string();
    if !storage
        .list(&format!("{table_dir}/metadata/"))
        .await?
        .is_empty()
    {
        return Err(already_exists(catalog, id));
    }
    if let Some(l) = &table.location
        && normalize_location(l)? != normalize_location(table_dir)?
    {
        return Err(Error::validation(format!(
            "{name}: a Hadoop table lives in its directory {table_dir}; it cannot be created at {l}"
        )));
    }
    let metadata = table.build_metadata(&name, table_dir.to_string())?;
    let (bytes, suffix) = encode_metadata(&name, &metadata)?;
    let metadata_location = format!("{table_dir}/metadata/v1{suffix}");
    if !storage.write_if_absent(&metadata_location, bytes).await? {
        return Err(already_exists(catalog, id));
    }
    storage
        .write_all(
            &format!("{table_dir}/metadata/version-hint.text"),
            Bytes::from_static(b"1"),
        )
        .await?;
    Ok(metadata_location)
}

fn already_exists(catalog: &str, id: &TableId) -> Error {
    Error::Catalog {
        catalog: catalog.to_string(),
        message: format!("table {id} already exists"),
        source: None,
        retryable: false,
    }
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{NestedField, PrimitiveType, Type};

    use super::*;
    use crate::clock::FixedClock;

    #[test]
    fn creation_time_comes_from_the_clock() {
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            ])
            .build()
            .unwrap();
        for v in [FormatVersion::V1, FormatVersion::V2, FormatVersion::V3] {
            let md = NewTable::new(schema.clone())
                .with_format_version(v)
                .with_clock(Arc::new(FixedClock(1_600_000_000_000)))
                .build_metadata("t", "file:///tmp/t".into())
                .unwrap();
            assert_eq!(md.last_updated_ms(), 1_600_000_000_000);
            assert_eq!(md.format_version(), v);
        }
    }
}
