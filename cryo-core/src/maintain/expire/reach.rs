//! Reachability: the files of the expired snapshots that no snapshot left reaches (Spark's
//! `expireFiles`), read through the format layer's fast manifest-list and manifest readers.

use super::ExpiredFile;
use super::ExpiredFileKind;
use super::select::FOLDER_STORAGE_PATH;
use super::select::OBJECT_STORAGE_PATH;
use super::select::WRITE_DATA_PATH;
use super::select::WRITE_METADATA_PATH;
use crate::catalog::LoadedTable;
use crate::error::Error;
use crate::error::Result;
use crate::format::manifest::for_each_live;
use crate::format::manifest::read_bytes as read_manifest_bytes;
use crate::format::manifest_list::IdHasher;
use crate::format::manifest_list::ListedPaths;
use crate::format::manifest_list::fnv1a;
use crate::format::manifest_list::read_paths as read_list;
use crate::io::ObjectStorage;
use crate::io::normalize_location;
use futures::StreamExt;
use iceberg::spec::TableMetadata;
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::collections::HashSet;
use std::hash::BuildHasherDefault;
use std::sync::Arc;

// ------------------------------------------------------------------------------------------------

#[derive(Clone)]
pub(super) struct ManifestRef {
    pub(super) path: String,
    pub(super) length: u64,
    /// Whether the manifest may list live files (false: its counts say it holds `DELETED`
    /// entries only).
    pub(super) may_have_live: bool,
    pub(super) deletes: bool,
}

/// A live entry of an expired-only manifest.
#[derive(Clone)]
pub(super) struct LiveEntry {
    pub(super) path: String,
    pub(super) kind: ExpiredFileKind,
    pub(super) bytes: u64,
}

/// The files reachable from the expired snapshots and from no snapshot left.
pub(super) struct Unreachable {
    pub(super) files: Vec<ExpiredFile>,
    pub(super) warnings: Vec<String>,
}

/// What the proofs of one expiry read, kept across its attempts: manifest lists and manifests
/// are immutable, so a retry (or the proof made again inside the commit fence) reads only what
/// the head added since. Failed reads are not kept.
#[derive(Default)]
pub(super) struct ProofCache {
    /// The manifest lists read, each reduced to its size and its manifests' indices into
    /// `manifests`: four bytes an entry, so a history of thousands of lists of thousands of
    /// manifests is held in megabytes (their paths once, not once per list).
    pub(super) lists: HashMap<String, Arc<ListedIds>>,
    /// Every distinct manifest the lists named.
    pub(super) manifests: ManifestTable,
    /// The live entries of expired-only manifests, as indices into `entries`: a history whose
    /// manifests were merged at every commit lists each file in thousands of them.
    pub(super) live: HashMap<String, Arc<Vec<u32>>>,
    /// The indices `live` holds.
    pub(super) live_ids: usize,
    /// Every distinct live entry the expired-only manifests listed.
    pub(super) entries: EntryTable,
    /// The candidate keys each retained manifest lists as live, valid for the candidates in
    /// `strikes_for` only (another set of candidates needs the manifests read again).
    pub(super) strikes: HashMap<String, Arc<Vec<String>>>,
    pub(super) strikes_for: HashSet<String>,
    /// Sizes of metadata files.
    pub(super) sizes: HashMap<String, u64>,
}

/// The live entries of expired-only manifests kept for a retry, at most (16 MiB of indices).
const LIVE_IDS_KEPT: usize = 4 << 20;

/// The distinct live entries (by raw path) of the expired-only manifests read.
#[derive(Default)]
pub(super) struct EntryTable {
    pub(super) entries: Vec<LiveEntry>,
    by_hash: HashMap<u64, Vec<u32>, BuildHasherDefault<IdHasher>>,
}

impl EntryTable {
    /// The indices of `live`, new entries added.
    fn index(&mut self, live: Vec<LiveEntry>) -> Vec<u32> {
        live.into_iter()
            .map(|e| {
                let slots = self.by_hash.entry(fnv1a(e.path.as_bytes())).or_default();
                if let Some(&i) = slots
                    .iter()
                    .find(|&&i| self.entries[i as usize].path == e.path)
                {
                    return i;
                }
                let i = self.entries.len() as u32;
                self.entries.push(e);
                slots.push(i);
                i
            })
            .collect()
    }
}

/// A manifest list as the proof keeps it.
pub(super) struct ListedIds {
    pub(super) bytes: u64,
    /// Indices into [`ProofCache::manifests`].
    pub(super) manifests: Vec<u32>,
}

/// The distinct manifests (by normalized path) of the manifest lists read.
#[derive(Default)]
pub(super) struct ManifestTable {
    pub(super) refs: Vec<ManifestRef>,
    /// Thousands of lists repeat the same manifests: a raw path is found by its hash (its bytes
    /// compared on a hit) and normalized once.
    by_hash: HashMap<u64, Vec<usize>, BuildHasherDefault<IdHasher>>,
    /// Raw path, index into `refs`.
    raw: Vec<(String, u32)>,
    by_key: HashMap<String, u32>,
}

impl ManifestTable {
    /// The indices of `list`'s manifests, new ones added.
    fn index(&mut self, list: &ListedPaths) -> Vec<u32> {
        list.manifests
            .iter()
            .map(|m| {
                let text = list.path(m);
                let slots = self.by_hash.entry(m.hash).or_default();
                if let Some(r) = slots.iter().find(|r| self.raw[**r].0 == text) {
                    return self.raw[*r].1;
                }
                let refs = &mut self.refs;
                let idx = *self.by_key.entry(key(text)).or_insert_with(|| {
                    refs.push(ManifestRef {
                        path: text.to_string(),
                        length: m.length,
                        may_have_live: m.may_have_live,
                        deletes: m.deletes,
                    });
                    (refs.len() - 1) as u32
                });
                slots.push(self.raw.len());
                self.raw.push((text.to_string(), idx));
                idx
            })
            .collect()
    }
}

pub(super) fn key(path: &str) -> String {
    normalize_location(path).unwrap_or_else(|_| path.to_string())
}

pub(super) fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Spark's `expireFiles`: files of the expired snapshots (manifest lists, manifests, their live
/// entries, statistics) minus those of every snapshot `after` keeps.
///
/// Each manifest list and manifest is read once, in parallel tasks: shared manifests are not
/// re-read per snapshot, manifests that both sides list are never opened (their entries are
/// reachable anyway), and the retained side is only opened when there are candidates to strike.
#[allow(
    clippy::too_many_lines,
    reason = "one pass: lists, expired-only manifests, retained manifests, statistics"
)]
pub(super) async fn unreachable_files(
    base: &LoadedTable,
    after: &LoadedTable,
    expired: &BTreeSet<i64>,
    concurrency: usize,
    cache: &mut ProofCache,
) -> Result<Unreachable> {
    let name: Arc<str> = Arc::from(base.id.to_string());
    let version = base.metadata.format_version();
    let mut warnings = Vec::new();

    let mut expired_lists: Vec<String> = Vec::new();
    for s in base.metadata.snapshots() {
        if expired.contains(&s.snapshot_id()) {
            if s.manifest_list().is_empty() {
                return Err(Error::unsupported(format!(
                    "{name}: snapshot {} has no manifest list (v1 inline manifests)",
                    s.snapshot_id()
                )));
            }
            expired_lists.push(s.manifest_list().to_string());
        }
    }
    let mut retained_lists: Vec<String> = Vec::new();
    for s in after.metadata.snapshots() {
        if s.manifest_list().is_empty() {
            return Err(Error::unsupported(format!(
                "{name}: snapshot {} has no manifest list (v1 inline manifests)",
                s.snapshot_id()
            )));
        }
        retained_lists.push(s.manifest_list().to_string());
    }
    let retained_list_keys: HashSet<String> = retained_lists.iter().map(|p| key(p)).collect();

    // 1. Manifest lists, both sides, each once.
    // Per manifest of `cache.manifests`: (listed by an expired snapshot, by a retained one).
    let mut sides: Vec<(bool, bool)> = Vec::new();
    let mut list_candidates: Vec<ExpiredFile> = Vec::new();
    {
        let mut jobs: Vec<(String, bool, Option<Arc<ListedIds>>)> = Vec::new();
        let mut seen = HashSet::new();
        for (p, expired_side) in retained_lists
            .iter()
            .map(|p| (p, false))
            .chain(expired_lists.iter().map(|p| (p, true)))
        {
            if seen.insert(p.clone()) {
                jobs.push((p.clone(), expired_side, cache.lists.get(p).cloned()));
            }
        }
        let mut reads =
            futures::stream::iter(jobs.into_iter().map(|(path, expired_side, known)| {
                let storage = base.storage.clone();
                let name = Arc::clone(&name);
                tokio::spawn(async move {
                    let read = match known {
                        Some(r) => Ok(Ok(r)),
                        None => read_list(&storage, &name, &path, version).await.map(Err),
                    };
                    (path, expired_side, read)
                })
            }))
            .buffer_unordered(concurrency);
        while let Some(joined) = reads.next().await {
            let (path, expired_side, read) = joined
                .map_err(|e| Error::compute(format!("{name}: manifest list task failed"), e))?;
            let read = match read {
                Ok(Ok(known)) => known,
                Ok(Err(fresh)) => {
                    let ids = Arc::new(ListedIds {
                        bytes: fresh.bytes,
                        manifests: cache.manifests.index(&fresh),
                    });
                    cache.lists.insert(path.clone(), Arc::clone(&ids));
                    ids
                }
                // What an expired snapshot referenced cannot be known: its files stay.
                Err(e) if expired_side => {
                    warnings.push(format!(
                        "expired manifest list unreadable, its files are kept: {e}"
                    ));
                    continue;
                }
                Err(e) => return Err(e),
            };
            if expired_side && !retained_list_keys.contains(&key(&path)) {
                list_candidates.push(ExpiredFile {
                    kind: ExpiredFileKind::ManifestList,
                    path: path.clone(),
                    bytes: read.bytes,
                });
            }
            sides.resize(cache.manifests.refs.len(), (false, false));
            for &idx in &read.manifests {
                let slot = &mut sides[idx as usize];
                if expired_side {
                    slot.0 = true;
                } else {
                    slot.1 = true;
                }
            }
        }
    }
    let manifests = &cache.manifests.refs;

    // 2. Manifests only expired snapshots list: they go, and their live entries are candidates.
    let expired_only: Vec<ManifestRef> = manifests
        .iter()
        .zip(&sides)
        .filter(|(_, (e, r))| *e && !*r)
        .map(|(m, _)| m.clone())
        .collect();
    let mut files: Vec<ExpiredFile> = expired_only
        .iter()
        .map(|m| ExpiredFile {
            kind: ExpiredFileKind::Manifest,
            path: m.path.clone(),
            bytes: m.length,
        })
        .collect();
    files.extend(list_candidates);

    let mut candidates: HashMap<String, LiveEntry> = HashMap::new(); // key → entry
    {
        let jobs: Vec<(ManifestRef, Option<Arc<Vec<u32>>>)> = expired_only
            .into_iter()
            .filter(|m| m.may_have_live)
            .map(|m| {
                let known = cache.live.get(&m.path).cloned();
                (m, known)
            })
            .collect();
        let mut reads = futures::stream::iter(jobs.into_iter().map(|(m, known)| {
            let storage = base.storage.clone();
            let name = Arc::clone(&name);
            tokio::spawn(async move {
                let r = match known {
                    Some(ids) => Ok(Ok(ids)),
                    None => live_entries(&storage, &name, &m.path).await.map(Err),
                };
                (m.path, r)
            })
        }))
        .buffer_unordered(concurrency);
        // Each distinct entry becomes a candidate once, its path normalized once.
        let mut seen = vec![false; cache.entries.entries.len()];
        while let Some(joined) = reads.next().await {
            let (path, r) =
                joined.map_err(|e| Error::compute(format!("{name}: manifest task failed"), e))?;
            let ids = match r {
                Ok(Ok(known)) => known,
                Ok(Err(fresh)) => {
                    let ids = Arc::new(cache.entries.index(fresh));
                    // Kept for a retry up to a bound: a history merged at every commit lists
                    // tens of millions of entries, which a retry reads again instead.
                    if cache.live_ids + ids.len() <= LIVE_IDS_KEPT {
                        cache.live_ids += ids.len();
                        cache.live.insert(path, Arc::clone(&ids));
                    }
                    ids
                }
                Err(e) => {
                    warnings.push(format!(
                        "expired manifest {path} unreadable, the files it lists are kept: {e}"
                    ));
                    continue;
                }
            };
            seen.resize(cache.entries.entries.len(), false);
            for &i in ids.iter() {
                if !std::mem::replace(&mut seen[i as usize], true) {
                    let e = &cache.entries.entries[i as usize];
                    candidates.entry(key(&e.path)).or_insert_with(|| e.clone());
                }
            }
        }
    }

    // 3. Retained manifests strike out candidates they list as live.
    if !candidates.is_empty() {
        let want_data = candidates.values().any(|c| c.kind == ExpiredFileKind::Data);
        let want_deletes = candidates.values().any(|c| c.kind != ExpiredFileKind::Data);
        let mut by_name: HashMap<String, Vec<String>> = HashMap::new();
        for (k, c) in &candidates {
            by_name
                .entry(file_name(&c.path).to_string())
                .or_default()
                .push(k.clone());
        }
        let by_name = Arc::new(by_name);
        // Strikes found for other candidates say nothing of these: only exactly the same
        // candidates may reuse them.
        if cache.strikes_for.len() != candidates.len()
            || !candidates.keys().all(|k| cache.strikes_for.contains(k))
        {
            cache.strikes.clear();
            cache.strikes_for = candidates.keys().cloned().collect();
        }
        let mut jobs: Vec<ManifestRef> = Vec::new();
        for (m, (_, r)) in manifests.iter().zip(&sides) {
            if !(*r && m.may_have_live && if m.deletes { want_deletes } else { want_data }) {
                continue;
            }
            match cache.strikes.get(&m.path) {
                Some(hits) => {
                    for k in hits.iter() {
                        candidates.remove(k);
                    }
                }
                None => jobs.push(m.clone()),
            }
        }
        if candidates.is_empty() {
            jobs.clear(); // everything was struck by manifests read before
        }
        let mut reads = futures::stream::iter(jobs.into_iter().map(|m| {
            let storage = base.storage.clone();
            let name = Arc::clone(&name);
            let by_name = Arc::clone(&by_name);
            tokio::spawn(async move {
                let hits = reachable_candidates(&storage, &name, &m.path, &by_name).await;
                (m.path, hits)
            })
        }))
        .buffer_unordered(concurrency);
        while let Some(joined) = reads.next().await {
            let (path, hits) =
                joined.map_err(|e| Error::compute(format!("{name}: manifest task failed"), e))?;
            let hits = hits?;
            for k in &hits {
                candidates.remove(k);
            }
            cache.strikes.insert(path, Arc::new(hits));
            if candidates.is_empty() {
                break; // nothing left to prove: the other reads would only strike nothing
            }
        }
    }
    files.extend(candidates.into_values().map(|c| ExpiredFile {
        kind: c.kind,
        path: c.path,
        bytes: c.bytes,
    }));

    // 4. Statistics of expired snapshots that no kept snapshot's statistics share.
    let kept_stats: HashSet<String> = after
        .metadata
        .statistics_iter()
        .map(|s| key(&s.statistics_path))
        .chain(
            after
                .metadata
                .partition_statistics_iter()
                .map(|s| key(&s.statistics_path)),
        )
        .collect();
    let mut stats_seen = HashSet::new();
    let stats = base
        .metadata
        .statistics_iter()
        .map(|s| (s.snapshot_id, &s.statistics_path, s.file_size_in_bytes))
        .chain(
            base.metadata
                .partition_statistics_iter()
                .map(|s| (s.snapshot_id, &s.statistics_path, s.file_size_in_bytes)),
        );
    for (id, path, size) in stats {
        let k = key(path);
        if expired.contains(&id) && !kept_stats.contains(&k) && stats_seen.insert(k) {
            files.push(ExpiredFile {
                kind: ExpiredFileKind::Statistics,
                path: path.clone(),
                bytes: size.max(0) as u64,
            });
        }
    }
    Ok(Unreachable { files, warnings })
}

/// The live entries of one manifest.
pub(super) async fn live_entries(
    storage: &ObjectStorage,
    table: &str,
    path: &str,
) -> Result<Vec<LiveEntry>> {
    let bytes = read_manifest_bytes(storage, table, path).await?;
    let mut out = Vec::new();
    for_each_live(table, path, &bytes, |e| {
        out.push(LiveEntry {
            path: e.path.to_string(),
            kind: ExpiredFileKind::of_content(e.content),
            bytes: e.bytes,
        });
    })?;
    Ok(out)
}

/// The candidate keys one retained manifest lists as live.
pub(super) async fn reachable_candidates(
    storage: &ObjectStorage,
    table: &str,
    path: &str,
    by_name: &HashMap<String, Vec<String>>,
) -> Result<Vec<String>> {
    let bytes = read_manifest_bytes(storage, table, path).await?;
    let mut hits = Vec::new();
    for_each_live(table, path, &bytes, |e| {
        let file = e.path;
        // File names are unique in practice: normalize only the few paths whose name matches.
        if let Some(keys) = by_name.get(file_name(file)) {
            let k = key(file);
            if keys.contains(&k) {
                hits.push(k);
            }
        }
    })?;
    Ok(hits)
}

/// The prefixes a table writes under: its location, and its data and metadata paths.
pub(super) fn table_roots(metadata: &TableMetadata) -> Vec<String> {
    let mut roots = vec![metadata.location().to_string()];
    for k in [
        WRITE_DATA_PATH,
        WRITE_METADATA_PATH,
        OBJECT_STORAGE_PATH,
        FOLDER_STORAGE_PATH,
    ] {
        if let Some(v) = metadata.properties().get(k)
            && !v.trim().is_empty()
        {
            roots.push(v.trim().to_string());
        }
    }
    roots
        .iter()
        .filter_map(|r| normalize_location(r).ok())
        .map(|r| format!("{}/", r.trim_end_matches('/')))
        .collect()
}

pub(super) fn within(roots: &[String], path: &str) -> bool {
    normalize_location(path).is_ok_and(|p| roots.iter().any(|r| p.starts_with(r.as_str())))
}
