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
use crate::format::manifest::for_each_deleted;
use crate::format::manifest::for_each_live;
use crate::format::manifest::read_bytes as read_manifest_bytes;
use crate::format::manifest_list::EntryCounts;
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
    pub(super) added_snapshot_id: Option<i64>,
    pub(super) counts: EntryCounts,
}

/// A live entry of an expired-only manifest, or a file a `DELETED` entry names.
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
    /// The `DELETED` entries of manifests the incremental proof read, as indices into `entries`
    /// with the snapshot each names (`None`: its manifest's).
    pub(super) deleted: HashMap<String, Removed>,
    /// The indices `live` and `deleted` hold.
    pub(super) live_ids: usize,
    /// Every distinct live entry the expired-only manifests listed.
    pub(super) entries: EntryTable,
    /// The candidate keys each retained manifest lists as live, valid for the candidates in
    /// `strikes_for` only (another set of candidates needs the manifests read again).
    pub(super) strikes: HashMap<String, Arc<Vec<String>>>,
    pub(super) strikes_for: HashSet<String>,
    /// Sizes of metadata files.
    pub(super) sizes: HashMap<String, u64>,
    /// The snapshot graph of each `metadata.json` an attempt staged on or proved from: its refs
    /// are read back from the metadata's serialized form, which takes tens of milliseconds on a
    /// history of thousands of snapshots, and each is asked for several times.
    pub(super) histories: HashMap<String, Arc<super::History>>,
    /// Prove by reachability even where the history is linear (tests hold the two proofs to
    /// one answer).
    pub(super) full_only: bool,
}

/// The `DELETED` entries of one manifest: indices into [`EntryTable`], each with the snapshot it
/// names.
pub(super) type Removed = Arc<Vec<(u32, Option<i64>)>>;

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
                        added_snapshot_id: m.added_snapshot_id,
                        counts: m.counts,
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

impl ProofCache {
    /// The history of `table`, read once per `metadata.json` (metadata files never change).
    pub(super) fn history(&mut self, table: &LoadedTable) -> Result<Arc<super::History>> {
        let name = table.id.to_string();
        let Some(at) = &table.metadata_location else {
            return super::History::of(&name, &table.metadata).map(Arc::new);
        };
        if let Some(h) = self.histories.get(at) {
            return Ok(Arc::clone(h));
        }
        let h = Arc::new(super::History::of(&name, &table.metadata)?);
        self.histories.insert(at.clone(), Arc::clone(&h));
        Ok(h)
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
    for s in crate::format::snapshots(&base.metadata) {
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
    for s in crate::format::snapshots(&after.metadata) {
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

    // 2. Manifests only expired snapshots list: they go, and their live entries are candidates.
    let expired_only: Vec<ManifestRef> = cache
        .manifests
        .refs
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

    // The candidates: on a linear history, the files the expired snapshots (and the oldest one
    // kept) removed; otherwise every live entry of the expired-only manifests.
    let scope = if cache.full_only {
        None
    } else {
        incremental_scope(&name, base, after, expired, cache)?
    };
    let mut candidates = match scope {
        Some(deleting) => {
            removed_candidates(
                base,
                &name,
                &sides,
                &deleting,
                concurrency,
                cache,
                &mut warnings,
            )
            .await?
        }
        None => {
            live_candidates(base, &name, expired_only, concurrency, cache, &mut warnings).await?
        }
    };
    let manifests = &cache.manifests.refs;

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

/// The live entries of the expired-only manifests, each distinct file once (the reachability
/// proof's candidates).
async fn live_candidates(
    base: &LoadedTable,
    name: &Arc<str>,
    expired_only: Vec<ManifestRef>,
    concurrency: usize,
    cache: &mut ProofCache,
    warnings: &mut Vec<String>,
) -> Result<HashMap<String, LiveEntry>> {
    let mut candidates: HashMap<String, LiveEntry> = HashMap::new(); // key → entry
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
        let name = Arc::clone(name);
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
    Ok(candidates)
}

/// The snapshots whose removals an expiry from `base` to `after` may make unreachable, when
/// the history allows the incremental proof (Java's `IncrementalFileCleanup`, kept exact):
///
/// - `main` is the only ref, every snapshot is an ancestor of its head, and the expiry removes
///   the oldest ancestors and keeps the newest (no snapshot in the middle);
/// - then a file that only expired snapshots reach was removed by a snapshot whose parent is
///   expired (that snapshot expired too, or is the oldest one kept), which wrote a `DELETED`
///   entry for it in a manifest of its own;
/// - the lists of those snapshots and of their parents say so by their counts: every file a
///   snapshot's parent listed live is live in it or `DELETED` by it (live = parent's live +
///   added − deleted, counting the manifests each snapshot wrote). A writer that drops files
///   without `DELETED` entries fails this check, and the proof by reachability runs instead.
///
/// `None` when any of it does not hold. Candidates found this way are still struck by every
/// file a kept snapshot lists live (a path added again after its removal stays).
pub(super) fn incremental_scope(
    name: &str,
    base: &LoadedTable,
    after: &LoadedTable,
    expired: &BTreeSet<i64>,
    cache: &mut ProofCache,
) -> Result<Option<HashSet<i64>>> {
    let history = cache.history(base)?;
    if history.refs.len() != 1 {
        return Ok(None);
    }
    let Some(main) = history.refs.get(iceberg::spec::MAIN_BRANCH) else {
        return Ok(None);
    };
    // Newest first.
    let mut chain: Vec<i64> = Vec::new();
    let mut next = Some(main.snapshot_id);
    while let Some(id) = next {
        let Some((parent, _)) = history.snapshots.get(&id) else {
            break;
        };
        if chain.len() > history.snapshots.len() {
            return Ok(None); // a cycle in corrupt metadata
        }
        chain.push(id);
        next = *parent;
    }
    if chain.len() != history.snapshots.len() {
        return Ok(None); // snapshots off main's line: rolled back, staged, or on a dropped branch
    }
    let kept = chain.iter().take_while(|id| !expired.contains(id)).count();
    let after_ids: HashSet<i64> = after
        .metadata
        .snapshots()
        .map(|s| s.snapshot_id())
        .collect();
    if kept == 0
        || chain[kept..].iter().any(|id| !expired.contains(id))
        || after_ids.len() != kept
        || chain[..kept].iter().any(|id| !after_ids.contains(id))
    {
        return Ok(None);
    }
    let listed = |id: i64| -> Option<&ListedIds> {
        let list = base.metadata.snapshot_by_id(id)?.manifest_list();
        cache.lists.get(list).map(AsRef::as_ref)
    };
    let refs = &cache.manifests.refs;
    // The live files a list counts, and the files its snapshot added and removed (in the
    // manifests it wrote); `None` when a count is missing.
    let counts = |list: &ListedIds, id: i64| -> Option<(i64, i64, i64)> {
        list.manifests
            .iter()
            .try_fold((0i64, 0i64, 0i64), |(live, added, deleted), &i| {
                let m = &refs[i as usize];
                let c = m.counts;
                let own = m.added_snapshot_id? == id;
                Some((
                    live + c.added? + c.existing?,
                    added + if own { c.added? } else { 0 },
                    deleted + if own { c.deleted? } else { 0 },
                ))
            })
    };
    let mut deleting = HashSet::new();
    // Each snapshot with an expired parent (in `chain`, the next one is its parent).
    for pair in chain[kept - 1..].windows(2) {
        let (id, parent) = (pair[0], pair[1]);
        let (Some(list), Some(parent_list)) = (listed(id), listed(parent)) else {
            return Ok(None); // an unreadable list: what it held cannot be known
        };
        let (Some((now, added, deleted)), Some((before, _, _))) =
            (counts(list, id), counts(parent_list, parent))
        else {
            return Ok(None);
        };
        if now != before + added - deleted {
            tracing::debug!(
                table = name,
                snapshot = id,
                "manifest counts do not account for every removed file: proving by reachability"
            );
            return Ok(None);
        }
        deleting.insert(id);
    }
    Ok(Some(deleting))
}

/// The files `deleting`'s snapshots removed: the `DELETED` entries of the manifests they wrote.
async fn removed_candidates(
    base: &LoadedTable,
    name: &Arc<str>,
    sides: &[(bool, bool)],
    deleting: &HashSet<i64>,
    concurrency: usize,
    cache: &mut ProofCache,
    warnings: &mut Vec<String>,
) -> Result<HashMap<String, LiveEntry>> {
    let mut candidates: HashMap<String, LiveEntry> = HashMap::new(); // key → entry
    let jobs: Vec<(ManifestRef, Option<Removed>)> = cache
        .manifests
        .refs
        .iter()
        .zip(sides)
        .filter(|(m, (e, r))| {
            (*e || *r)
                && m.counts.deleted != Some(0)
                && m.added_snapshot_id.is_some_and(|by| deleting.contains(&by))
        })
        .map(|(m, _)| (m.clone(), cache.deleted.get(&m.path).cloned()))
        .collect();
    let mut reads = futures::stream::iter(jobs.into_iter().map(|(m, known)| {
        let storage = base.storage.clone();
        let name = Arc::clone(name);
        tokio::spawn(async move {
            let r = match known {
                Some(ids) => Ok(Ok(ids)),
                None => deleted_entries(&storage, &name, &m.path).await.map(Err),
            };
            (m, r)
        })
    }))
    .buffer_unordered(concurrency);
    while let Some(joined) = reads.next().await {
        let (m, r) =
            joined.map_err(|e| Error::compute(format!("{name}: manifest task failed"), e))?;
        let removed = match r {
            Ok(Ok(known)) => known,
            Ok(Err(fresh)) => {
                let (entries, snapshots): (Vec<LiveEntry>, Vec<Option<i64>>) =
                    fresh.into_iter().unzip();
                let ids = cache.entries.index(entries);
                let removed: Removed = Arc::new(ids.into_iter().zip(snapshots).collect());
                if cache.live_ids + removed.len() <= LIVE_IDS_KEPT {
                    cache.live_ids += removed.len();
                    cache.deleted.insert(m.path.clone(), Arc::clone(&removed));
                }
                removed
            }
            Err(e) => {
                warnings.push(format!(
                    "manifest {} unreadable, the files its snapshot removed are kept: {e}",
                    m.path
                ));
                continue;
            }
        };
        for &(i, by) in removed.iter() {
            if by
                .or(m.added_snapshot_id)
                .is_some_and(|by| deleting.contains(&by))
            {
                let e = &cache.entries.entries[i as usize];
                candidates.entry(key(&e.path)).or_insert_with(|| e.clone());
            }
        }
    }
    Ok(candidates)
}

/// The `DELETED` entries of one manifest, with the snapshot each names.
async fn deleted_entries(
    storage: &ObjectStorage,
    table: &str,
    path: &str,
) -> Result<Vec<(LiveEntry, Option<i64>)>> {
    let bytes = read_manifest_bytes(storage, table, path).await?;
    let mut out = Vec::new();
    for_each_deleted(table, path, &bytes, |e| {
        out.push((
            LiveEntry {
                path: e.file.path.to_string(),
                kind: ExpiredFileKind::of_content(e.file.content),
                bytes: e.file.bytes,
            },
            e.snapshot_id,
        ));
    })?;
    Ok(out)
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
