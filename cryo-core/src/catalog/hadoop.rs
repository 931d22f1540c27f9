//! Hadoop-style warehouses (`<warehouse>/<ns…>/<table>/metadata/vN.metadata.json` plus
//! `version-hint.text`, as Spark's `hadoop` catalog writes them) and single tables given by a
//! `metadata.json` path or a table directory.

use super::{Namespace, TableId};
use crate::error::{Error, Result};
use crate::io::ObjectStorage;

/// Resolve a table directory to its current `metadata.json`: the version hint if present and
/// valid, else the highest `vN.metadata.json` (what Java's `HadoopTableOperations` does).
pub(crate) async fn current_metadata_file(
    storage: &ObjectStorage,
    table: &str,
    table_dir: &str,
) -> Result<String> {
    let dir = table_dir.trim_end_matches('/');
    let hint = format!("{dir}/metadata/version-hint.text");
    if storage.head(&hint).await?.is_some() {
        let bytes = storage.read_all(&hint).await?;
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(v) = text.trim().parse::<u64>()
            && let Some(mut current) = metadata_file_at(storage, dir, v).await?
        {
            // The hint is written after the commit that made a version current, and may have
            // failed to be: the versions after it that exist are newer heads (as Java's
            // HadoopTableOperations probes). Trusting the hint alone would load a head that a
            // committed expiry had already left, whose files it deleted.
            let mut next = v + 1;
            while let Some(found) = metadata_file_at(storage, dir, next).await? {
                current = found;
                next += 1;
            }
            return Ok(current);
        }
        tracing::warn!(
            table,
            "version-hint.text is stale or invalid; listing metadata/"
        );
    }
    let listed = storage.list(&format!("{dir}/metadata/")).await?;
    listed
        .iter()
        .filter_map(|o| {
            let name = o.location.rsplit('/').next()?;
            let v = name
                .strip_prefix('v')?
                .strip_suffix(".metadata.json")?
                .trim_end_matches(".gz")
                .parse::<u64>()
                .ok()?;
            Some((v, o.location.clone()))
        })
        .max_by_key(|(v, _)| *v)
        .map(|(_, loc)| loc)
        .ok_or_else(|| Error::NotFound {
            what: format!("table {table}: no metadata.json under {dir}/metadata"),
        })
}

/// `v{version}.metadata.json` (or its gzip form) under `dir/metadata`, if it exists.
async fn metadata_file_at(
    storage: &ObjectStorage,
    dir: &str,
    version: u64,
) -> Result<Option<String>> {
    for candidate in [
        format!("{dir}/metadata/v{version}.metadata.json"),
        format!("{dir}/metadata/v{version}.gz.metadata.json"),
    ] {
        if storage.head(&candidate).await?.is_some() {
            return Ok(Some(candidate));
        }
    }
    Ok(None)
}

/// Walk a Hadoop warehouse: every directory holding `metadata/` is a table, every other
/// directory on the way is a namespace.
pub(crate) async fn walk_warehouse(
    storage: &ObjectStorage,
    warehouse: &str,
) -> Result<Vec<TableId>> {
    let root = crate::io::normalize_location(warehouse)?;
    let listed = storage.list(&format!("{root}/")).await?;
    let mut tables = std::collections::BTreeSet::new();
    for obj in &listed {
        let Some(rel) = obj.location.strip_prefix(&root) else {
            continue;
        };
        let parts: Vec<&str> = rel.trim_start_matches('/').split('/').collect();
        // <ns…>/<table>/metadata/<file>
        if let Some(mi) = parts.iter().position(|p| *p == "metadata") {
            let is_meta = parts
                .last()
                .is_some_and(|f| f.ends_with(".metadata.json") || *f == "version-hint.text");
            if mi >= 2 && is_meta {
                let ns = Namespace(parts[..mi - 1].iter().map(|s| (*s).to_string()).collect());
                tables.insert(TableId::new(ns, parts[mi - 1].to_string()));
            }
        }
    }
    Ok(tables.into_iter().collect())
}

/// A table directory for an identifier inside a warehouse.
pub(crate) fn table_dir(warehouse: &str, id: &TableId) -> Result<String> {
    let root = crate::io::normalize_location(warehouse)?;
    let mut out = root;
    for part in id.namespace.0.iter().chain(std::iter::once(&id.name)) {
        if part.is_empty() || part == "." || part == ".." || part.contains('/') {
            return Err(Error::validation(format!(
                "identifier part `{part}` cannot name a directory"
            )));
        }
        out.push('/');
        out.push_str(part);
    }
    Ok(out)
}
