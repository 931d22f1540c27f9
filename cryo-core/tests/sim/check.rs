//! The invariants, checked whenever every actor is idle (faults off).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use cryo_core::LoadedTable;
use cryo_core::commit::live_files;
use iceberg::spec::{
    DataContentType, DataFileFormat, FormatVersion, Manifest, ManifestList, ManifestStatus,
};
use object_store::path::Path;

use super::table::{FileRows, Rows, live_of, model_rows, read_by_hand, read_table};
use super::world::SimStore;

/// Every file the table's metadata references: metadata files, and per retained snapshot its
/// manifest list, manifests and live files.
#[derive(Debug, Default)]
pub struct References {
    pub metadata: BTreeSet<String>,
    pub snapshots: BTreeSet<String>,
}

impl References {
    pub fn all(&self) -> BTreeSet<&str> {
        self.metadata
            .iter()
            .chain(&self.snapshots)
            .map(String::as_str)
            .collect()
    }
}

/// A location's key in the store (`memory://authority/key` → `key`).
pub fn key(location: &str) -> Path {
    let rest = location.split_once("://").map_or(location, |(_, r)| r);
    let key = rest.split_once('/').map_or("", |(_, k)| k);
    Path::from(key)
}

/// Manifest lists and manifests the checks parsed in earlier rounds of a run, by location: they
/// are written once (every round checks all the same that each still exists).
#[derive(Debug, Default)]
pub struct Parsed {
    lists: HashMap<String, Arc<ManifestList>>,
    manifests: HashMap<String, Arc<Manifest>>,
}

impl Parsed {
    async fn list(&mut self, table: &LoadedTable, path: &str) -> Result<Arc<ManifestList>, String> {
        if let Some(list) = self.lists.get(path) {
            return Ok(Arc::clone(list));
        }
        let bytes = table
            .storage
            .read_all(path)
            .await
            .map_err(|e| e.to_string())?;
        let list = ManifestList::parse_with_version(&bytes, table.metadata.format_version())
            .map_err(|e| e.to_string())?;
        let list = Arc::new(list);
        self.lists.insert(path.to_string(), Arc::clone(&list));
        Ok(list)
    }

    async fn manifest(&mut self, table: &LoadedTable, path: &str) -> Result<Arc<Manifest>, String> {
        if let Some(m) = self.manifests.get(path) {
            return Ok(Arc::clone(m));
        }
        let bytes = table
            .storage
            .read_all(path)
            .await
            .map_err(|e| e.to_string())?;
        let m = Arc::new(Manifest::parse_avro(&bytes).map_err(|e| e.to_string())?);
        self.manifests.insert(path.to_string(), Arc::clone(&m));
        Ok(m)
    }
}

/// Format v3: the lineage (`_row_id`, `_last_updated_sequence_number`) each row version had
/// when first seen live.
#[derive(Debug, Default)]
pub struct Lineage(BTreeMap<(i64, String), (i64, i64)>);

/// Rows: the table, read by upstream's reader and by hand, must be the model. Upstream's reader
/// does not read deletion vectors: where the table has some, the reader by hand is the one.
/// On v3, row lineage as well: every row of a live data file has a row id of its own, below
/// the table's `next-row-id`, and a row version keeps the row id and last-updated sequence
/// number it was first seen with (a rewrite moves rows, it does not change them).
pub async fn rows_match(
    table: &LoadedTable,
    model: &Rows,
    lineage: &mut Lineage,
) -> Result<(), String> {
    let want = model_rows(model);
    let files = read_by_hand(table).await.map_err(|e| e.to_string())?;
    compare("read by hand", &live_of(&files), &want)?;
    lineage_holds(table, &files, lineage)?;
    let vectors = live_files(table)
        .await
        .map_err(|e| e.to_string())?
        .iter()
        .any(|f| f.file.file_format() == DataFileFormat::Puffin);
    if vectors {
        return Ok(());
    }
    let got = read_table(table).await?;
    compare("upstream's reader", &got, &want)
}

fn lineage_holds(
    table: &LoadedTable,
    files: &[FileRows],
    seen: &mut Lineage,
) -> Result<(), String> {
    let md = table.metadata.as_ref();
    if md.format_version() < FormatVersion::V3 {
        return Ok(());
    }
    let next = i64::try_from(md.next_row_id()).map_err(|e| e.to_string())?;
    let mut ids: BTreeMap<i64, (i64, &str)> = BTreeMap::new();
    for (path, rows) in files {
        for r in rows {
            let Some((row_id, updated)) = r.lineage else {
                return Err(format!("{path}: a row of a v3 table without lineage"));
            };
            if row_id < 0 || row_id >= next {
                return Err(format!(
                    "row {}.{} ({path}) has row id {row_id}, outside [0, next-row-id {next})",
                    r.id, r.v
                ));
            }
            if let Some((other, other_path)) = ids.insert(row_id, (r.id, path.as_str())) {
                return Err(format!(
                    "row id {row_id} is held by rows {other} ({other_path}) and {} ({path})",
                    r.id
                ));
            }
            if !r.live {
                continue;
            }
            let key = (r.id, r.v.clone());
            match seen.0.get(&key) {
                Some(&was) if was != (row_id, updated) => {
                    return Err(format!(
                        "row lineage lost: row {} version {} had (_row_id, _last_updated_sequence_number) {was:?}, now {:?} in {path}",
                        r.id,
                        r.v,
                        (row_id, updated)
                    ));
                }
                Some(_) => {}
                None => {
                    seen.0.insert(key, (row_id, updated));
                }
            }
        }
    }
    Ok(())
}

fn compare(
    reader: &str,
    got: &[(i64, i32, String)],
    want: &[(i64, i32, String)],
) -> Result<(), String> {
    if got == want {
        return Ok(());
    }
    let got_ids: BTreeMap<i64, usize> = got.iter().fold(BTreeMap::new(), |mut m, r| {
        *m.entry(r.0).or_default() += 1;
        m
    });
    let lost: Vec<_> = want.iter().filter(|r| !got.contains(r)).take(5).collect();
    let extra: Vec<_> = got.iter().filter(|r| !want.contains(r)).take(5).collect();
    let dup: Vec<_> = got_ids.iter().filter(|(_, n)| **n > 1).take(5).collect();
    Err(format!(
        "{reader}: rows differ from the model: {} read, {} expected; lost {lost:?}; resurrected or stale {extra:?}; duplicated ids {dup:?}",
        got.len(),
        want.len()
    ))
}

/// Metadata: sequence numbers, parents and the current snapshot's summary; every referenced
/// file exists. Returns what the metadata references.
pub async fn metadata_valid(
    table: &LoadedTable,
    store: &SimStore,
    parsed: &mut Parsed,
) -> Result<References, String> {
    let md = table.metadata.as_ref();
    let mut refs = References::default();
    if let Some(loc) = &table.metadata_location {
        refs.metadata.insert(loc.clone());
    }
    for log in md.metadata_log() {
        refs.metadata.insert(log.metadata_file.clone());
    }
    let mut seqs = BTreeSet::new();
    // v3: the snapshots' row-id ranges, by first row id (they must not overlap).
    let mut ranges: BTreeMap<u64, (u64, i64)> = BTreeMap::new();
    for s in md.snapshots() {
        if let Some((first, added)) = s.first_row_id().zip(s.added_rows_count()) {
            if first + added > md.next_row_id() {
                return Err(format!(
                    "snapshot {} assigns row ids [{first}, {}) past next-row-id {}",
                    s.snapshot_id(),
                    first + added,
                    md.next_row_id()
                ));
            }
            if added > 0 {
                ranges.insert(first, (first + added, s.snapshot_id()));
            }
        } else if md.format_version() >= FormatVersion::V3 {
            return Err(format!(
                "snapshot {} of a v3 table has no first-row-id or added-rows",
                s.snapshot_id()
            ));
        }
        if !seqs.insert(s.sequence_number()) {
            return Err(format!(
                "sequence number {} is used by two snapshots",
                s.sequence_number()
            ));
        }
        if s.sequence_number() > md.last_sequence_number() {
            return Err(format!(
                "snapshot {} has sequence number {} past the table's last {}",
                s.snapshot_id(),
                s.sequence_number(),
                md.last_sequence_number()
            ));
        }
        if let Some(parent) = s.parent_snapshot_id().and_then(|p| md.snapshot_by_id(p))
            && parent.sequence_number() >= s.sequence_number()
        {
            {
                return Err(format!(
                    "snapshot {} (sequence {}) is not after its parent {} (sequence {})",
                    s.snapshot_id(),
                    s.sequence_number(),
                    parent.snapshot_id(),
                    parent.sequence_number()
                ));
            }
        }
        refs.snapshots.insert(s.manifest_list().to_string());
        let list = parsed
            .list(table, s.manifest_list())
            .await
            .map_err(|e| format!("snapshot {}: manifest list: {e}", s.snapshot_id()))?;
        let current = md.current_snapshot_id() == Some(s.snapshot_id());
        let (mut data_files, mut delete_files, mut records) = (0u64, 0u64, 0u64);
        for mf in list.entries() {
            refs.snapshots.insert(mf.manifest_path.clone());
            let manifest = parsed
                .manifest(table, &mf.manifest_path)
                .await
                .map_err(|e| {
                    format!(
                        "snapshot {}: manifest {}: {e}",
                        s.snapshot_id(),
                        mf.manifest_path
                    )
                })?;
            for entry in manifest.entries() {
                if entry.status() == ManifestStatus::Deleted {
                    continue;
                }
                let f = entry.data_file();
                refs.snapshots.insert(f.file_path().to_string());
                match f.content_type() {
                    DataContentType::Data => {
                        data_files += 1;
                        records += f.record_count();
                    }
                    _ => delete_files += 1,
                }
            }
        }
        if current {
            let summary = &s.summary().additional_properties;
            let want = |k: &str, v: u64| -> Result<(), String> {
                match summary.get(k).map(|x| x.parse::<u64>()) {
                    Some(Ok(n)) if n != v => Err(format!(
                        "current snapshot {}: summary {k} = {n}, the manifests list {v}",
                        s.snapshot_id()
                    )),
                    _ => Ok(()),
                }
            };
            want("total-data-files", data_files)?;
            want("total-delete-files", delete_files)?;
            want("total-records", records)?;
        }
    }
    for ((_, (end, a)), (start, (_, b))) in ranges.iter().zip(ranges.iter().skip(1)) {
        if start < end {
            return Err(format!(
                "snapshots {a} and {b} assign overlapping row ids (one ends at {end}, the next starts at {start})"
            ));
        }
    }
    for f in md.statistics_iter() {
        refs.snapshots.insert(f.statistics_path.clone());
    }
    // Every file a retained snapshot (or the metadata log's newest entries) needs exists.
    for loc in &refs.snapshots {
        if !store.exists(&key(loc)).await {
            return Err(format!(
                "{loc} is referenced by a retained snapshot but was deleted"
            ));
        }
    }
    if let Some(loc) = &table.metadata_location
        && !store.exists(&key(loc)).await
    {
        return Err(format!("the current metadata file {loc} is missing"));
    }
    Ok(refs)
}

/// After the final orphan removal: nothing is left that nothing references.
pub async fn no_leftovers(store: &SimStore, refs: &References, root: &str) -> Result<(), String> {
    let referenced: BTreeSet<String> = refs.all().into_iter().map(|l| key(l).to_string()).collect();
    let root = key(root).to_string();
    let mut left = Vec::new();
    for o in store.all_objects().await {
        let k = o.location.to_string();
        if !k.starts_with(&root) || referenced.contains(&k) || k.ends_with("version-hint.text") {
            continue;
        }
        left.push(k);
    }
    if left.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} files no metadata references were left after orphan removal: {:?}",
            left.len(),
            &left[..left.len().min(5)]
        ))
    }
}
