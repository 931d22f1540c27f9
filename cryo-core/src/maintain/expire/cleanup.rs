//! Deleting what an expiry made unreachable, and the metadata files its commit dropped from
//! the log.

use super::DeleteFailure;
use super::ExpiredFile;
use super::ExpiredFileKind;
use super::reach::key;
use super::select::DELETE_AFTER_COMMIT;
use super::select::prop_true;
use crate::catalog::LoadedTable;
use crate::io::ObjectStorage;
use std::collections::HashMap;
use std::collections::HashSet;

pub(super) async fn delete_files(
    storage: &ObjectStorage,
    files: Vec<ExpiredFile>,
    concurrency: usize,
) -> (Vec<ExpiredFile>, Vec<DeleteFailure>) {
    let mut done = Vec::new();
    let mut failed = Vec::new();
    let paths: Vec<String> = files.iter().map(|f| f.path.clone()).collect();
    let results = storage.delete_all(&paths, concurrency).await;
    for (f, r) in files.into_iter().zip(results) {
        match r {
            Ok(()) => done.push(f),
            Err(e) => {
                tracing::warn!(file = f.path, error = %e, "could not delete an expired file");
                failed.push(DeleteFailure {
                    kind: f.kind,
                    path: f.path,
                    bytes: f.bytes,
                    message: e.to_string(),
                });
            }
        }
    }
    (done, failed)
}

/// Sizes of existing files among `paths` (missing or unreadable ones are left out).
/// Sizes already in `known` are not asked again (and new ones are added to it).
pub(super) async fn stat_all(
    storage: &ObjectStorage,
    paths: &[String],
    known: &mut HashMap<String, u64>,
) -> HashMap<String, u64> {
    let mut out = HashMap::new();
    for p in paths {
        if let Some(size) = known.get(p) {
            out.insert(p.clone(), *size);
        } else if let Ok(Some(o)) = storage.head(p).await {
            known.insert(p.clone(), o.size);
            out.insert(p.clone(), o.size);
        }
    }
    out
}

/// Metadata files `head` knew that the committed metadata no longer logs.
pub(super) fn dropped_from_log(head: &LoadedTable, committed: &LoadedTable) -> Vec<String> {
    if !prop_true(committed.metadata.properties(), DELETE_AFTER_COMMIT) {
        return Vec::new();
    }
    let kept: HashSet<String> = committed
        .metadata
        .metadata_log()
        .iter()
        .map(|m| key(&m.metadata_file))
        .chain(committed.metadata_location.iter().map(|l| key(l)))
        .collect();
    head.metadata
        .metadata_log()
        .iter()
        .map(|m| m.metadata_file.clone())
        .chain(head.metadata_location.iter().cloned())
        .filter(|p| !kept.contains(&key(p)))
        .collect()
}

/// A pointer catalog's commit already deleted the metadata files it dropped from the log (a
/// REST server may have too): delete what is left, and report them all.
pub(super) async fn finish_metadata_cleanup(
    storage: &ObjectStorage,
    dropped: Vec<String>,
    sizes: &HashMap<String, u64>,
) -> (Vec<ExpiredFile>, Vec<DeleteFailure>) {
    let mut done = Vec::new();
    let mut failed = Vec::new();
    for path in dropped {
        let bytes = sizes.get(&path).copied().unwrap_or(0);
        let gone = match storage.head(&path).await {
            Ok(None) => Ok(()),
            Ok(Some(_)) => storage.delete(&path).await,
            Err(e) => Err(e),
        };
        match gone {
            Ok(()) => done.push(ExpiredFile {
                kind: ExpiredFileKind::MetadataJson,
                path,
                bytes,
            }),
            Err(e) => failed.push(DeleteFailure {
                kind: ExpiredFileKind::MetadataJson,
                path,
                bytes,
                message: e.to_string(),
            }),
        }
    }
    (done, failed)
}
