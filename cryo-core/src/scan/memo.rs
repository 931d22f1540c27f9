//! What a scan learned from a table's immutable metadata files, kept for the next scan.
//!
//! Iceberg never changes a manifest list or a manifest once written: a new snapshot writes new
//! ones. So what a scan folded out of them (a list's size and manifests, a manifest's
//! per-partition figures) holds for as long as the file is in the table, and a scan with
//! [`ScanOptions::cache_dir`](super::ScanOptions::cache_dir) reads only the files the memo does
//! not have: a table scanned every cycle costs what changed since the last scan, not its size.
//!
//! One file per table, named by the table's UUID (a table dropped and made again at the same
//! location is another table): a header in JSON (names: lists, manifests, partitions) and the
//! bulk (manifest hashes, each list's manifests as indices into them, each fold's figures) as
//! little-endian integers, so a memo of a million-file table reads back in milliseconds. Written to
//! a temporary file and renamed, so a reader sees a whole memo or none; two scans of one table
//! at once each write a whole one. A memo that cannot be read, of another version or another
//! table, is ignored (the scan reads everything, and writes a new one); one that cannot be
//! written is a warning. A memo never changes a scan's result, only what it reads.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::model::{DeleteKindStats, DeleteStats, FileStats, PartitionFieldValue, SizeHistogram};
use super::scanner::{DeleteKind, ManifestFold, PartitionAcc};
use crate::format::manifest_list::IdHasher;

const MAGIC: &[u8; 8] = b"CRYOSCAN";
/// Bumped whenever what is kept, or how a fold is made, changes.
const VERSION: u32 = 1;

/// What a fold depends on besides the manifest: a fold made under another key is not reused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct FoldKey {
    pub(super) format_version: u8,
    pub(super) small_file_threshold: u64,
    pub(super) with_deletes: bool,
    /// [`fnv1a`](crate::format::manifest_list::fnv1a) of the partition specs as the scan
    /// decodes them (fields, transforms, source types).
    pub(super) specs: u64,
}

/// A manifest as its list entry names it: a fold is reused only for the same entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct FoldId {
    pub(super) path: String,
    pub(super) length: i64,
    pub(super) sequence_number: i64,
    pub(super) added_snapshot_id: i64,
}

impl FoldId {
    pub(super) fn of(mf: &iceberg::spec::ManifestFile) -> Self {
        Self {
            path: mf.manifest_path.clone(),
            length: mf.manifest_length,
            sequence_number: mf.sequence_number,
            added_snapshot_id: mf.added_snapshot_id,
        }
    }
}

/// A fold's figures that are not per partition (those are in the bulk).
#[derive(Serialize, Deserialize)]
struct FoldHead {
    id: FoldId,
    deleted_entries: u64,
    live_entries: u64,
    data_file_count: u64,
    bounded: Vec<(Vec<i32>, u64)>,
    parts: u32,
    live_paths: u32,
}

#[derive(Serialize, Deserialize)]
struct Header {
    table_uuid: String,
    key: FoldKey,
    /// The snapshots when the folds were made: a fold dates partitions by its entries'
    /// snapshots, so once one of these is gone (expired) the folds are not reused.
    snapshots: Vec<i64>,
    /// Distinct manifests (their hash and length in the bulk).
    manifests: u32,
    /// Manifest lists: location, size, manifests (indices in the bulk).
    lists: Vec<(String, u64, u32)>,
    /// The partitions the folds name: key, spec, values.
    partitions: Vec<(String, i32, Vec<PartitionFieldValue>)>,
    folds: Vec<FoldHead>,
}

/// A manifest list as the memo keeps it.
pub(super) struct MemoList {
    pub(super) bytes: u64,
    /// Its manifests, as indices into [`Memo::manifests`] (each in range).
    pub(super) indices: Vec<u32>,
}

/// A memo read back.
#[derive(Default)]
pub(super) struct Memo {
    /// `(path hash, length)` of every manifest its lists name.
    pub(super) manifests: Vec<(u64, u64)>,
    pub(super) lists: HashMap<String, MemoList>,
    folds: HashMap<String, (FoldId, ManifestFold)>,
    key: Option<FoldKey>,
    snapshots: Vec<i64>,
}

impl Memo {
    /// Keep the folds only if they were made under `key` and every snapshot they may date
    /// partitions by is still in the table (`snapshots`).
    pub(super) fn keep_folds_if(&mut self, key: &FoldKey, snapshots: &[i64]) {
        let current: std::collections::HashSet<i64> = snapshots.iter().copied().collect();
        if self.key.as_ref() != Some(key) || !self.snapshots.iter().all(|s| current.contains(s)) {
            self.folds.clear();
        }
    }

    /// Whether folds are left that no manifest took.
    pub(super) fn has_folds(&self) -> bool {
        !self.folds.is_empty()
    }

    /// The fold of the manifest `id` names, if kept.
    pub(super) fn take_fold(&mut self, id: &FoldId) -> Option<ManifestFold> {
        let (kept, fold) = self.folds.remove(&id.path)?;
        (kept == *id).then_some(fold)
    }
}

/// The memo file of the table with this UUID.
pub(super) fn path_of(dir: &Path, table_uuid: &str) -> PathBuf {
    // A UUID is hex and dashes; anything else is hashed rather than trusted as a file name.
    let name = if !table_uuid.is_empty()
        && table_uuid
            .chars()
            .all(|c| c.is_ascii_hexdigit() || c == '-')
    {
        table_uuid.to_string()
    } else {
        format!(
            "{:016x}",
            crate::format::manifest_list::fnv1a(table_uuid.as_bytes())
        )
    };
    dir.join(format!("{name}.cryoscan"))
}

/// Read the memo at `path` for this table; an empty memo when there is none or it is not one
/// this scan can use.
pub(super) fn load(path: &Path, table_uuid: &str) -> Memo {
    match std::fs::read(path) {
        Ok(bytes) => match decode(&bytes, table_uuid) {
            Ok(memo) => memo,
            Err(why) => {
                tracing::warn!(memo = %path.display(), %why, "scan memo ignored");
                Memo::default()
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Memo::default(),
        Err(e) => {
            tracing::warn!(memo = %path.display(), error = %e, "scan memo unreadable");
            Memo::default()
        }
    }
}

/// Little-endian integers, written.
#[derive(Default)]
struct Put(Vec<u8>);

impl Put {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn opt(&mut self, v: Option<u64>) {
        match v {
            Some(v) => {
                self.u8(1);
                self.u64(v);
            }
            None => self.u8(0),
        }
    }
    fn file_stats(&mut self, f: &FileStats) {
        for v in [f.count, f.bytes, f.records, f.small_count, f.small_bytes] {
            self.u64(v);
        }
        self.opt(f.min_bytes);
        self.opt(f.max_bytes);
        for c in f.histogram.counts {
            self.u64(c);
        }
    }
    fn deletes(&mut self, d: &DeleteStats) {
        for k in [&d.position, &d.equality, &d.deletion_vectors] {
            for v in [k.files, k.bytes, k.records, k.dangling] {
                self.u64(v);
            }
        }
    }
}

/// Little-endian integers, read back.
struct Take<'a>(&'a [u8]);

impl Take<'_> {
    fn u8(&mut self) -> Result<u8, String> {
        let (head, rest) = self.0.split_first().ok_or("truncated")?;
        self.0 = rest;
        Ok(*head)
    }
    fn u32(&mut self) -> Result<u32, String> {
        let (head, rest) = self.0.split_first_chunk::<4>().ok_or("truncated")?;
        self.0 = rest;
        Ok(u32::from_le_bytes(*head))
    }
    fn u64(&mut self) -> Result<u64, String> {
        let (head, rest) = self.0.split_first_chunk::<8>().ok_or("truncated")?;
        self.0 = rest;
        Ok(u64::from_le_bytes(*head))
    }
    fn opt(&mut self) -> Result<Option<u64>, String> {
        match self.u8()? {
            0 => Ok(None),
            1 => self.u64().map(Some),
            _ => Err("bad option".into()),
        }
    }
    fn file_stats(&mut self) -> Result<FileStats, String> {
        let mut f = FileStats {
            count: self.u64()?,
            bytes: self.u64()?,
            records: self.u64()?,
            small_count: self.u64()?,
            small_bytes: self.u64()?,
            min_bytes: self.opt()?,
            max_bytes: self.opt()?,
            histogram: SizeHistogram::default(),
        };
        for c in &mut f.histogram.counts {
            *c = self.u64()?;
        }
        Ok(f)
    }
    fn deletes(&mut self) -> Result<DeleteStats, String> {
        let mut kind = || -> Result<DeleteKindStats, String> {
            Ok(DeleteKindStats {
                files: self.u64()?,
                bytes: self.u64()?,
                records: self.u64()?,
                dangling: self.u64()?,
            })
        };
        Ok(DeleteStats {
            position: kind()?,
            equality: kind()?,
            deletion_vectors: kind()?,
        })
    }
}

fn kind_code(kind: DeleteKind) -> u8 {
    match kind {
        DeleteKind::Position => 0,
        DeleteKind::Equality => 1,
        DeleteKind::Vector => 2,
    }
}

fn decode(bytes: &[u8], table_uuid: &str) -> Result<Memo, String> {
    let rest = bytes.strip_prefix(&MAGIC[..]).ok_or("not a scan memo")?;
    let mut bulk = Take(rest);
    if bulk.u32()? != VERSION {
        return Err("another version".into());
    }
    let len = bulk.u32()? as usize;
    if bulk.0.len() < len {
        return Err("truncated".into());
    }
    let (json, rest) = bulk.0.split_at(len);
    bulk.0 = rest;
    let header: Header = serde_json::from_slice(json).map_err(|e| e.to_string())?;
    if header.table_uuid != table_uuid {
        return Err("another table's".into());
    }
    let manifests = (0..header.manifests)
        .map(|_| Ok((bulk.u64()?, bulk.u64()?)))
        .collect::<Result<Vec<_>, String>>()?;
    let mut lists = HashMap::with_capacity(header.lists.len());
    for (location, size, count) in header.lists {
        let indices = (0..count)
            .map(|_| {
                let i = bulk.u32()?;
                if i as usize >= manifests.len() {
                    return Err("index out of range".to_string());
                }
                Ok(i)
            })
            .collect::<Result<Vec<_>, String>>()?;
        lists.insert(
            location,
            MemoList {
                bytes: size,
                indices,
            },
        );
    }
    let partitions: Vec<(
        std::sync::Arc<str>,
        i32,
        std::sync::Arc<[PartitionFieldValue]>,
    )> = header
        .partitions
        .into_iter()
        .map(|(key, spec, values)| (key.into(), spec, values.into()))
        .collect();
    let mut folds = HashMap::with_capacity(header.folds.len());
    for head in header.folds {
        let mut fold = ManifestFold {
            deleted_entries: head.deleted_entries,
            live_entries: head.live_entries,
            data_file_count: head.data_file_count,
            bounded: head.bounded,
            data_files: bulk.file_stats()?,
            ..ManifestFold::default()
        };
        for _ in 0..head.parts {
            let (key, spec_id, values) = partitions
                .get(bulk.u32()? as usize)
                .ok_or("partition out of range")?;
            let mut acc = PartitionAcc {
                spec_id: *spec_id,
                values: values.clone(),
                data: bulk.file_stats()?,
                deletes: bulk.deletes()?,
                last_modified_ms: bulk.opt()?.map(|v| v as i64),
                min_data_seq: bulk.opt()?.map(|v| v as i64),
                pending_deletes: Vec::new(),
            };
            for _ in 0..bulk.u32()? {
                let kind = match bulk.u8()? {
                    0 => DeleteKind::Position,
                    1 => DeleteKind::Equality,
                    2 => DeleteKind::Vector,
                    _ => return Err("bad delete kind".into()),
                };
                acc.pending_deletes
                    .push((kind, bulk.opt()?.map(|v| v as i64), bulk.opt()?));
            }
            fold.parts.push((key.clone(), acc));
        }
        fold.live_data_paths = (0..head.live_paths)
            .map(|_| bulk.u64())
            .collect::<Result<Vec<_>, String>>()?;
        folds.insert(head.id.path.clone(), (head.id, fold));
    }
    if !bulk.0.is_empty() {
        return Err("trailing bytes".into());
    }
    Ok(Memo {
        manifests,
        lists,
        folds,
        key: Some(header.key),
        snapshots: header.snapshots,
    })
}

/// A memo being written: every list and current manifest of this scan.
pub(super) struct MemoWriter {
    index: HashMap<u64, u32, std::hash::BuildHasherDefault<IdHasher>>,
    manifests: Vec<(u64, u64)>,
    lists: Vec<(String, u64, Vec<u32>)>,
    partition_index: HashMap<std::sync::Arc<str>, u32>,
    partitions: Vec<(String, i32, Vec<PartitionFieldValue>)>,
    folds: Vec<FoldHead>,
    fold_bulk: Put,
    /// Whether a fold could not be kept (the memo then differs from what the scan found).
    pub(super) changed: bool,
}

impl MemoWriter {
    pub(super) fn new() -> Self {
        Self {
            index: HashMap::default(),
            manifests: Vec::new(),
            lists: Vec::new(),
            partition_index: HashMap::new(),
            partitions: Vec::new(),
            folds: Vec::new(),
            fold_bulk: Put::default(),
            changed: false,
        }
    }

    pub(super) fn list(
        &mut self,
        location: &str,
        bytes: u64,
        manifests: impl Iterator<Item = (u64, u64)>,
    ) {
        let indices = manifests
            .map(|(hash, len)| {
                *self.index.entry(hash).or_insert_with(|| {
                    self.manifests.push((hash, len));
                    (self.manifests.len() - 1) as u32
                })
            })
            .collect();
        self.lists.push((location.to_string(), bytes, indices));
    }

    /// Take the folds `other` recorded (its lists are not taken).
    pub(super) fn take_folds(&mut self, other: MemoWriter) {
        debug_assert!(self.folds.is_empty() && self.partitions.is_empty());
        self.partitions = other.partitions;
        self.partition_index = other.partition_index;
        self.folds = other.folds;
        self.fold_bulk = other.fold_bulk;
    }

    /// A list the memo read had, its manifests in `table` (the old memo's).
    pub(super) fn list_kept(&mut self, table: &[(u64, u64)], location: &str, list: &MemoList) {
        self.list(
            location,
            list.bytes,
            list.indices.iter().map(|i| table[*i as usize]),
        );
    }

    pub(super) fn fold(&mut self, id: &FoldId, fold: &ManifestFold) {
        // A fold whose partition values JSON cannot give back as they were (NaN, infinity)
        // is not kept: a memo never changes a scan's result.
        if !fold.round_trips() {
            self.changed = true;
            return;
        }
        let out = &mut self.fold_bulk;
        out.file_stats(&fold.data_files);
        for (key, acc) in &fold.parts {
            let partitions = &mut self.partitions;
            let index = *self
                .partition_index
                .entry(std::sync::Arc::clone(key))
                .or_insert_with(|| {
                    partitions.push((key.to_string(), acc.spec_id, acc.values.to_vec()));
                    (partitions.len() - 1) as u32
                });
            out.u32(index);
            out.file_stats(&acc.data);
            out.deletes(&acc.deletes);
            out.opt(acc.last_modified_ms.map(|v| v as u64));
            out.opt(acc.min_data_seq.map(|v| v as u64));
            out.u32(acc.pending_deletes.len() as u32);
            for (kind, seq, referenced) in &acc.pending_deletes {
                out.u8(kind_code(*kind));
                out.opt(seq.map(|v| v as u64));
                out.opt(*referenced);
            }
        }
        for h in &fold.live_data_paths {
            out.u64(*h);
        }
        self.folds.push(FoldHead {
            id: id.clone(),
            deleted_entries: fold.deleted_entries,
            live_entries: fold.live_entries,
            data_file_count: fold.data_file_count,
            bounded: fold.bounded.clone(),
            parts: fold.parts.len() as u32,
            live_paths: fold.live_data_paths.len() as u32,
        });
    }

    /// Write the memo to `path` (a temporary file renamed over it).
    pub(super) fn write(
        self,
        path: &Path,
        table_uuid: &str,
        key: FoldKey,
        snapshots: Vec<i64>,
    ) -> std::io::Result<()> {
        let mut bulk = Put::default();
        for (hash, len) in &self.manifests {
            bulk.u64(*hash);
            bulk.u64(*len);
        }
        let mut lists = Vec::with_capacity(self.lists.len());
        for (location, bytes, indices) in self.lists {
            for i in &indices {
                bulk.u32(*i);
            }
            lists.push((location, bytes, indices.len() as u32));
        }
        let header = Header {
            table_uuid: table_uuid.to_string(),
            key,
            snapshots,
            manifests: self.manifests.len() as u32,
            lists,
            partitions: self.partitions,
            folds: self.folds,
        };
        let json = serde_json::to_vec(&header).map_err(std::io::Error::other)?;
        let mut out = Vec::with_capacity(16 + json.len() + bulk.0.len() + self.fold_bulk.0.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(json.len() as u32).to_le_bytes());
        out.extend_from_slice(&json);
        out.extend_from_slice(&bulk.0);
        out.extend_from_slice(&self.fold_bulk.0);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension(format!(
            "tmp-{}-{}",
            std::process::id(),
            crate::random::uuid().simple()
        ));
        std::fs::write(&tmp, &out)?;
        std::fs::rename(&tmp, path).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }
}
