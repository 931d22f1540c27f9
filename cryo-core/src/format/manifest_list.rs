//! Manifest lists: every reader of one goes through here.
//!
//! Two readers, for two kinds of caller. [`read`] gives upstream's [`ManifestFile`] entries
//! (partition summaries, counts, `first_row_id`: what the scanner and the commit layer need).
//! [`read_paths`] gives only each manifest's path, length, content and whether its counts allow
//! live entries, for callers that walk every list of a long history (expiry, orphan removal):
//! its fast path decodes the Avro records with [`super::avro`] into one string arena per list,
//! and falls back to upstream's reader on anything it does not expect.

use iceberg::spec::{FormatVersion, ManifestContentType, ManifestFile, ManifestList};

use super::avro;
use crate::error::{Error, Result};
use crate::io::ObjectStorage;

/// Parse a manifest list with upstream's reader; `Err` is the reason, for the caller's error.
///
/// A panic inside the reader becomes an error. This is a last resort, on purpose: apache-avro
/// 0.21 (under iceberg 0.10) `unwrap`s while it parses the schema in an Avro file's header (a
/// record name, an alias or a default that is not valid Avro), and that header is as untrusted
/// as the rest of the file. Found by fuzzing (`fuzz/`, targets `manifest` and `manifest_list`).
pub fn parse_manifest_list(
    bytes: &[u8],
    version: FormatVersion,
) -> std::result::Result<ManifestList, String> {
    super::guarded(|| ManifestList::parse_with_version(bytes, version))
}

/// The manifests the manifest list at `location` names, in list order, and the list's size in
/// bytes.
pub(crate) async fn read(
    storage: &ObjectStorage,
    table: &str,
    location: &str,
    version: FormatVersion,
) -> Result<(u64, Vec<ManifestFile>)> {
    let bytes = super::read_file(storage, table, location, "manifest list").await?;
    let list = parse_manifest_list(&bytes, version)
        .map_err(|e| Error::metadata(table, location, format!("corrupt manifest list: {e}")))?;
    Ok((
        bytes.len() as u64,
        list.consume_entries().into_iter().collect(),
    ))
}

/// A manifest list reduced to what reachability needs.
pub(crate) struct ListedPaths {
    /// The list's size in bytes.
    pub(crate) bytes: u64,
    /// The manifest paths, one after the other (one allocation per list, not per entry).
    pub(crate) arena: String,
    pub(crate) manifests: Vec<ListedManifest>,
}

/// One entry of a manifest list, its path a range of the list's arena.
pub(crate) struct ListedManifest {
    /// [`fnv1a`] of the path.
    pub(crate) hash: u64,
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) length: u64,
    /// Whether the manifest may list live files (false: its counts say it holds `DELETED`
    /// entries only).
    pub(crate) may_have_live: bool,
    pub(crate) deletes: bool,
    /// The snapshot that wrote the manifest, and its entry counts, as listed (`None` where the
    /// list leaves them out, which only v1 may).
    pub(crate) added_snapshot_id: Option<i64>,
    pub(crate) counts: EntryCounts,
    /// Whether the list gives the manifest a `key_metadata` (an encrypted manifest).
    pub(crate) encrypted: bool,
}

/// A manifest's entry counts by status, as its manifest-list entry gives them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct EntryCounts {
    pub(crate) added: Option<i64>,
    pub(crate) existing: Option<i64>,
    pub(crate) deleted: Option<i64>,
}

impl ListedPaths {
    /// The path of `m`, one of this list's manifests.
    pub(crate) fn path(&self, m: &ListedManifest) -> &str {
        &self.arena[m.start..m.end]
    }
}

/// The manifest list at `path`, reduced to [`ListedPaths`]: the fast reader, or upstream's
/// when the fast one gives up.
pub(crate) async fn read_paths(
    storage: &ObjectStorage,
    table: &str,
    path: &str,
    version: FormatVersion,
) -> Result<ListedPaths> {
    let bytes = super::read_file(storage, table, path, "manifest list").await?;
    match parse_paths_fast(&bytes) {
        Ok(read) => Ok(read),
        Err(why) => {
            tracing::debug!(table, path, why, "manifest list read by upstream's reader");
            parse_paths_upstream(table, path, &bytes, version)
        }
    }
}

/// The fields of a manifest-list entry [`parse_paths_fast`] reads.
#[derive(Clone, Copy)]
enum ListField {
    Path,
    Length,
    Content,
    AddedSnapshot,
    Added,
    Existing,
    Deleted,
    KeyMetadata,
}

/// Each field of a manifest-list entry, by id and name (see [`avro::is`]).
fn list_field(f: &avro::Field) -> std::result::Result<Option<ListField>, String> {
    Ok(Some(if avro::is(f, 500, &["manifest_path"])? {
        ListField::Path
    } else if avro::is(f, 501, &["manifest_length"])? {
        ListField::Length
    } else if avro::is(f, 517, &["content"])? {
        ListField::Content
    } else if avro::is(f, 503, &["added_snapshot_id"])? {
        ListField::AddedSnapshot
    } else if avro::is(f, 504, &["added_files_count", "added_data_files_count"])? {
        ListField::Added
    } else if avro::is(
        f,
        505,
        &["existing_files_count", "existing_data_files_count"],
    )? {
        ListField::Existing
    } else if avro::is(f, 506, &["deleted_files_count", "deleted_data_files_count"])? {
        ListField::Deleted
    } else if avro::is(f, 519, &["key_metadata"])? {
        ListField::KeyMetadata
    } else {
        return Ok(None);
    }))
}

pub(crate) fn parse_paths_fast(bytes: &[u8]) -> std::result::Result<ListedPaths, String> {
    let container = avro::open(bytes)?;
    let avro::Schema::Record(fields) = &container.schema else {
        return Err("the file's schema is not a record".into());
    };
    // The fields are planned once per file, not matched by name in every entry.
    let plan = avro::plan(fields, list_field)?;
    let mut arena = String::with_capacity(bytes.len() / 2);
    let mut manifests = Vec::new();
    container.for_each(|cur, fields| {
        let (mut path, mut length, mut content) = (None, None, 0);
        let (mut added_snapshot_id, mut counts) = (None, EntryCounts::default());
        let mut encrypted = false;
        for step in &plan {
            let Some((role, i)) = cur.step(step)? else {
                continue;
            };
            let leaf = cur.leaf(&fields[i].schema)?;
            match role {
                ListField::Path => path = Some(leaf.str()?),
                ListField::Length => length = leaf.long(),
                ListField::Content => content = leaf.long().unwrap_or(0),
                ListField::AddedSnapshot => added_snapshot_id = leaf.long(),
                ListField::Added => counts.added = leaf.long(),
                ListField::Existing => counts.existing = leaf.long(),
                ListField::Deleted => counts.deleted = leaf.long(),
                ListField::KeyMetadata => encrypted = leaf != avro::Leaf::Null,
            }
        }
        let path = path.ok_or("a manifest list entry without manifest_path")?;
        let length = length.ok_or("a manifest list entry without manifest_length")?;
        let start = arena.len();
        arena.push_str(path);
        manifests.push(ListedManifest {
            hash: fnv1a(path.as_bytes()),
            start,
            end: arena.len(),
            length: length.max(0) as u64,
            may_have_live: !matches!((counts.added, counts.existing), (Some(0), Some(0))),
            deletes: content == 1,
            added_snapshot_id,
            counts,
            encrypted,
        });
        Ok(())
    })?;
    Ok(ListedPaths {
        bytes: bytes.len() as u64,
        arena,
        manifests,
    })
}

pub(crate) fn parse_paths_upstream(
    table: &str,
    path: &str,
    bytes: &[u8],
    version: FormatVersion,
) -> Result<ListedPaths> {
    let list = parse_manifest_list(bytes, version)
        .map_err(|e| Error::metadata(table, path, format!("corrupt manifest list: {e}")))?;
    let mut arena = String::new();
    let mut manifests = Vec::new();
    for m in list.entries() {
        let start = arena.len();
        arena.push_str(&m.manifest_path);
        manifests.push(ListedManifest {
            hash: fnv1a(m.manifest_path.as_bytes()),
            start,
            end: arena.len(),
            length: m.manifest_length.max(0) as u64,
            may_have_live: !matches!(
                (m.added_files_count, m.existing_files_count),
                (Some(0), Some(0))
            ),
            deletes: m.content == ManifestContentType::Deletes,
            added_snapshot_id: Some(m.added_snapshot_id),
            counts: EntryCounts {
                added: m.added_files_count.map(i64::from),
                existing: m.existing_files_count.map(i64::from),
                deleted: m.deleted_files_count.map(i64::from),
            },
            encrypted: m.key_metadata.is_some(),
        });
    }
    Ok(ListedPaths {
        bytes: bytes.len() as u64,
        arena,
        manifests,
    })
}

/// 64-bit FNV-1a: a fast hash for deduplicating paths (hits are confirmed by comparing bytes).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A hasher for keys that are hashes already.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}
