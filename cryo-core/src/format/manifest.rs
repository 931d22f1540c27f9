//! Manifests: every reader of one goes through here, and so does the spec's inheritance.
//!
//! [`read`] gives a manifest's entries with what they inherit from their manifest-list entry
//! ([`Inheritance`], the one place the rule is written), [`for_each_live`] only the path,
//! content and size of its live entries (for callers that walk whole histories). Both decode
//! with the fast path below first and fall back to upstream's reader.
//!
//! The fast path decodes Avro straight into entries, with the file's own writer schema.
//! Upstream's reader decodes every record into a tree of `apache_avro::Value`s, resolves it
//! against its reader schema, deserializes it through serde and converts that into a
//! `ManifestEntry` (~500,000 instructions per entry of a Spark-written manifest). This decoder
//! walks each record with the writer schema ([`super::avro`]: `null` and `deflate` blocks, as
//! Java, PyIceberg and Cryo write them), finds the fields by Iceberg field id and name, skips
//! the ones it does not need, and builds the entry. It reads format v2 and v3 manifests whose
//! partition values are plain primitives. Anything else (v1, decimal, uuid, fixed or nanosecond
//! partition values, a schema it cannot follow, any byte it does not expect) is left to
//! upstream: [`parse_fast`] returns `None` and the caller parses the bytes as before, so the errors
//! on bad input stay upstream's.

use std::collections::HashMap;

use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, FormatVersion, Literal,
    Manifest, ManifestContentType, ManifestEntry, ManifestFile, ManifestMetadata, ManifestStatus,
    PrimitiveLiteral, PrimitiveType, Schema, Struct, StructType, Type,
};

use super::avro::{self, Cursor, Field, Leaf, Skip, Step};
use crate::error::{Error, Result};
use crate::io::ObjectStorage;

type R<T> = std::result::Result<T, String>;

/// `bytes` as a manifest, when they are one this decoder reads; `None` otherwise (the caller
/// falls back to upstream's reader). Entries are as written: nothing is inherited yet.
pub(crate) fn parse_fast(bytes: &[u8]) -> Option<Manifest> {
    match decode(bytes) {
        Ok(manifest) => Some(manifest),
        Err(why) => {
            tracing::trace!(why, "manifest read by upstream's reader");
            None
        }
    }
}

/// Parse a manifest (entries as written: nothing inherited from the manifest list yet).
///
/// Cryo's decoder (`parse_fast`) reads the manifests it can (v2/v3, plain partition
/// types, `null` or `deflate` blocks, whoever wrote them) without upstream's value trees; the
/// rest go to upstream's reader, and so do its errors on bad input (a panic inside it becomes an
/// error, see [`super::parse_manifest_list`]).
pub fn parse_manifest(bytes: &[u8]) -> std::result::Result<Manifest, String> {
    match parse_fast(bytes) {
        Some(manifest) => Ok(manifest),
        None => super::guarded(|| Manifest::parse_avro(bytes)),
    }
}

/// The bytes of the manifest at `path`.
pub(crate) async fn read_bytes(
    storage: &ObjectStorage,
    table: &str,
    path: &str,
) -> Result<bytes::Bytes> {
    super::read_file(storage, table, path, "manifest").await
}

/// The manifest `mf` names, its entries with what they inherit from `mf` applied
/// ([`Inheritance`]); its `first_row_id`s are left to [`RowIdInheritance`].
pub(crate) async fn read(
    storage: &ObjectStorage,
    table: &str,
    mf: &ManifestFile,
) -> Result<Manifest> {
    if mf.key_metadata.is_some() {
        return Err(Error::unsupported(format!(
            "{table}: encrypted manifest {}",
            mf.manifest_path
        )));
    }
    let path = mf.manifest_path.as_str();
    let bytes = read_bytes(storage, table, path).await?;
    let manifest = parse_manifest(&bytes)
        .map_err(|e| Error::metadata(table, path, format!("corrupt manifest: {e}")))?;
    Ok(Inheritance::of(mf).apply(manifest))
}

/// What a manifest's entries inherit from the manifest list's entry for it (the spec's
/// "Sequence Number Inheritance" and "Snapshot ID Inheritance", as Java's `ManifestReader` and
/// upstream's `load_manifest` apply them): an entry without a snapshot id takes the manifest's
/// `added_snapshot_id`; an `ADDED` entry, or any entry of a manifest of sequence number 0
/// (written before sequence numbers existed), without a data or file sequence number takes the
/// manifest's. Row ids are [`RowIdInheritance`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Inheritance {
    snapshot_id: i64,
    sequence_number: i64,
}

impl Inheritance {
    /// What entries inherit from a manifest of this snapshot and sequence number (the checks).
    #[cfg(any(test, feature = "fuzz"))]
    pub(crate) fn with(snapshot_id: i64, sequence_number: i64) -> Self {
        Self {
            snapshot_id,
            sequence_number,
        }
    }

    pub(crate) fn of(mf: &ManifestFile) -> Self {
        Self {
            snapshot_id: mf.added_snapshot_id,
            sequence_number: mf.sequence_number,
        }
    }

    /// `entry` with what it inherits set.
    pub(crate) fn entry(self, mut e: ManifestEntry) -> ManifestEntry {
        (e.snapshot_id, e.sequence_number) = self.ids(e.status, e.snapshot_id, e.sequence_number);
        e.file_sequence_number = self.sequence(e.status, e.file_sequence_number);
        e
    }

    /// The snapshot id and data sequence number of an entry with `status` that was written with
    /// these (`None`: left to inherit).
    pub(crate) fn ids(
        self,
        status: ManifestStatus,
        snapshot_id: Option<i64>,
        sequence_number: Option<i64>,
    ) -> (Option<i64>, Option<i64>) {
        (
            snapshot_id.or(Some(self.snapshot_id)),
            self.sequence(status, sequence_number),
        )
    }

    /// A data or file sequence number of an entry with `status`, written as `written`.
    fn sequence(self, status: ManifestStatus, written: Option<i64>) -> Option<i64> {
        if status == ManifestStatus::Added || self.sequence_number == 0 {
            written.or(Some(self.sequence_number))
        } else {
            written
        }
    }

    /// Every entry of `manifest` with what it inherits set.
    pub(crate) fn apply(self, manifest: Manifest) -> Manifest {
        let (entries, metadata) = manifest.into_parts();
        let entries = entries
            .into_iter()
            .map(|e| self.entry(std::sync::Arc::unwrap_or_clone(e)))
            .collect();
        Manifest::new(metadata, entries)
    }
}

/// The spec's first-row-id inheritance over one manifest's entries, in manifest order: a data
/// file without a `first_row_id` of its own takes the manifest's `first_row_id` plus the record
/// counts of every earlier entry that had none (`DELETED` entries included). Delete manifests
/// have no row ids.
#[derive(Debug, Clone)]
pub(crate) struct RowIdInheritance {
    next: Option<i64>,
}

impl RowIdInheritance {
    pub(crate) fn new(mf: &ManifestFile) -> Self {
        let next = match mf.content {
            ManifestContentType::Data => mf.first_row_id.and_then(|id| i64::try_from(id).ok()),
            ManifestContentType::Deletes => None,
        };
        Self { next }
    }

    /// The row id `file` (the next entry) inherits, when it has none of its own and the
    /// manifest has one.
    pub(crate) fn next(&mut self, file: &DataFile) -> Option<i64> {
        if file.first_row_id().is_some() {
            return None;
        }
        let id = self.next?;
        self.next = Some(id.saturating_add(i64::try_from(file.record_count()).unwrap_or(i64::MAX)));
        Some(id)
    }
}

/// The file of a manifest entry: of a live (`ADDED` or `EXISTING`) one as [`for_each_live`]
/// sees it, or of a `DELETED` one in a [`DeletedRef`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LiveRef<'a> {
    pub(crate) path: &'a str,
    pub(crate) content: DataContentType,
    pub(crate) records: u64,
    pub(crate) bytes: u64,
}

/// Call `visit` for every live entry of the manifest `bytes` (read from `path` of `table`,
/// for errors), in file order.
pub(crate) fn for_each_live(
    table: &str,
    path: &str,
    bytes: &[u8],
    mut visit: impl FnMut(LiveRef<'_>),
) -> Result<()> {
    for_each_entry(
        table,
        path,
        bytes,
        |s| s != ManifestStatus::Deleted,
        |e| visit(e.live),
    )
}

/// A `DELETED` entry of a manifest, as [`for_each_deleted`] sees it: the file, and the snapshot
/// that removed it (`None` when the entry leaves it to the manifest-list entry to say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeletedRef<'a> {
    pub(crate) file: LiveRef<'a>,
    pub(crate) snapshot_id: Option<i64>,
}

/// Call `visit` for every `DELETED` entry of the manifest `bytes`, in file order: the files the
/// snapshot that wrote the manifest removed (expiry's incremental clean-up).
pub(crate) fn for_each_deleted(
    table: &str,
    path: &str,
    bytes: &[u8],
    mut visit: impl FnMut(DeletedRef<'_>),
) -> Result<()> {
    for_each_entry(
        table,
        path,
        bytes,
        |s| s == ManifestStatus::Deleted,
        |e| {
            visit(DeletedRef {
                file: e.live,
                snapshot_id: e.snapshot_id,
            });
        },
    )
}

/// One entry as the history walkers see it: status, snapshot id as written, file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryRef<'a> {
    pub(crate) status: ManifestStatus,
    pub(crate) snapshot_id: Option<i64>,
    pub(crate) live: LiveRef<'a>,
}

/// The entries whose status `want` keeps, in file order.
fn for_each_entry(
    table: &str,
    path: &str,
    bytes: &[u8],
    want: impl Fn(ManifestStatus) -> bool,
    mut visit: impl FnMut(EntryRef<'_>),
) -> Result<()> {
    match entries_fast(bytes, &want, &mut visit) {
        Ok(()) => Ok(()),
        Err(why) => {
            tracing::debug!(table, path, why, "manifest read by upstream's reader");
            let manifest = parse_manifest(bytes)
                .map_err(|e| Error::metadata(table, path, format!("corrupt manifest: {e}")))?;
            for e in manifest.entries().iter().filter(|e| want(e.status())) {
                visit(EntryRef {
                    status: e.status(),
                    snapshot_id: e.snapshot_id(),
                    live: LiveRef {
                        path: e.file_path(),
                        content: e.content_type(),
                        records: e.record_count(),
                        bytes: e.file_size_in_bytes(),
                    },
                });
            }
            Ok(())
        }
    }
}

/// [`for_each_live`] with the fast reader; visits nothing unless the whole file decodes.
#[cfg(any(test, feature = "fuzz"))]
pub(crate) fn live_fast(
    bytes: &[u8],
    visit: &mut impl FnMut(LiveRef<'_>),
) -> std::result::Result<(), String> {
    entries_fast(bytes, |s| s != ManifestStatus::Deleted, &mut |e| {
        visit(e.live);
    })
}

/// [`for_each_deleted`] with the fast reader; visits nothing unless the whole file decodes.
#[cfg(any(test, feature = "fuzz"))]
pub(crate) fn deleted_fast(
    bytes: &[u8],
    visit: &mut impl FnMut(DeletedRef<'_>),
) -> std::result::Result<(), String> {
    entries_fast(bytes, |s| s == ManifestStatus::Deleted, &mut |e| {
        visit(DeletedRef {
            file: e.live,
            snapshot_id: e.snapshot_id,
        });
    })
}

/// The fields of `manifest_entry` Cryo's readers ([`decode`], [`entries_fast`],
/// [`super::summary`]) read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum EntryField {
    Status,
    SnapshotId,
    Sequence,
    FileSequence,
    DataFile,
}

/// The fields of `data_file` Cryo's readers read.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum FileField {
    Content,
    Path,
    Format,
    Partition,
    Records,
    Size,
    Lower,
    Upper,
    Referenced,
    ContentSize,
    ColumnSizes,
    ValueCounts,
    NullCounts,
    NanCounts,
    KeyMetadata,
    SplitOffsets,
    EqualityIds,
    SortOrderId,
    FirstRowId,
    ContentOffset,
}

impl FileField {
    /// What the summary reads: a file's identity, size, partition and bounds.
    pub(super) const SUMMARY: [FileField; 10] = [
        FileField::Content,
        FileField::Path,
        FileField::Format,
        FileField::Partition,
        FileField::Records,
        FileField::Size,
        FileField::Lower,
        FileField::Upper,
        FileField::Referenced,
        FileField::ContentSize,
    ];

    /// Everything a `DataFile` holds ([`decode`]): [`Self::SUMMARY`] and the rest.
    const FULL: [FileField; 20] = {
        let rest = [
            FileField::ColumnSizes,
            FileField::ValueCounts,
            FileField::NullCounts,
            FileField::NanCounts,
            FileField::KeyMetadata,
            FileField::SplitOffsets,
            FileField::EqualityIds,
            FileField::SortOrderId,
            FileField::FirstRowId,
            FileField::ContentOffset,
        ];
        let mut all = [FileField::Content; 20];
        let mut i = 0;
        while i < 10 {
            all[i] = Self::SUMMARY[i];
            all[10 + i] = rest[i];
            i += 1;
        }
        all
    };

    /// Whether every data file has it (v1 has no `content`; the rest are optional).
    fn required(self) -> bool {
        matches!(
            self,
            FileField::Path
                | FileField::Format
                | FileField::Partition
                | FileField::Records
                | FileField::Size
        )
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            FileField::Content => "content",
            FileField::Path => "file_path",
            FileField::Format => "file_format",
            FileField::Partition => "partition",
            FileField::Records => "record_count",
            FileField::Size => "file_size_in_bytes",
            FileField::Lower => "lower_bounds",
            FileField::Upper => "upper_bounds",
            FileField::Referenced => "referenced_data_file",
            FileField::ContentSize => "content_size_in_bytes",
            FileField::ColumnSizes => "column_sizes",
            FileField::ValueCounts => "value_counts",
            FileField::NullCounts => "null_value_counts",
            FileField::NanCounts => "nan_value_counts",
            FileField::KeyMetadata => "key_metadata",
            FileField::SplitOffsets => "split_offsets",
            FileField::EqualityIds => "equality_ids",
            FileField::SortOrderId => "sort_order_id",
            FileField::FirstRowId => "first_row_id",
            FileField::ContentOffset => "content_offset",
        }
    }
}

/// Each field of `manifest_entry`, by id and name (see [`avro::is`]).
fn entry_field(f: &Field) -> R<Option<EntryField>> {
    Ok(Some(if avro::is(f, 0, &["status"])? {
        EntryField::Status
    } else if avro::is(f, 1, &["snapshot_id"])? {
        EntryField::SnapshotId
    } else if avro::is(f, 3, &["sequence_number"])? {
        EntryField::Sequence
    } else if avro::is(f, 4, &["file_sequence_number"])? {
        EntryField::FileSequence
    } else if avro::is(f, 2, &["data_file"])? {
        EntryField::DataFile
    } else {
        return Ok(None);
    }))
}

/// Each field of `data_file`, by id and name.
fn file_field(f: &Field) -> R<Option<FileField>> {
    Ok(Some(if avro::is(f, 134, &["content"])? {
        FileField::Content
    } else if avro::is(f, 100, &["file_path"])? {
        FileField::Path
    } else if avro::is(f, 101, &["file_format"])? {
        FileField::Format
    } else if avro::is(f, 102, &["partition"])? {
        if !matches!(f.schema, avro::Schema::Record(_)) {
            return Err("partition is not a record".into());
        }
        FileField::Partition
    } else if avro::is(f, 103, &["record_count"])? {
        FileField::Records
    } else if avro::is(f, 104, &["file_size_in_bytes"])? {
        FileField::Size
    } else if avro::is(f, 125, &["lower_bounds"])? {
        FileField::Lower
    } else if avro::is(f, 128, &["upper_bounds"])? {
        FileField::Upper
    } else if avro::is(f, 143, &["referenced_data_file"])? {
        FileField::Referenced
    } else if avro::is(f, 145, &["content_size_in_bytes"])? {
        FileField::ContentSize
    } else if avro::is(f, 108, &["column_sizes"])? {
        FileField::ColumnSizes
    } else if avro::is(f, 109, &["value_counts"])? {
        FileField::ValueCounts
    } else if avro::is(f, 110, &["null_value_counts"])? {
        FileField::NullCounts
    } else if avro::is(f, 137, &["nan_value_counts"])? {
        FileField::NanCounts
    } else if avro::is(f, 131, &["key_metadata"])? {
        FileField::KeyMetadata
    } else if avro::is(f, 132, &["split_offsets"])? {
        FileField::SplitOffsets
    } else if avro::is(f, 135, &["equality_ids"])? {
        FileField::EqualityIds
    } else if avro::is(f, 140, &["sort_order_id"])? {
        FileField::SortOrderId
    } else if avro::is(f, 142, &["first_row_id"])? {
        FileField::FirstRowId
    } else if avro::is(f, 144, &["content_offset"])? {
        FileField::ContentOffset
    } else {
        return Ok(None);
    }))
}

/// How the fast readers walk a manifest's entries, planned once per file from its writer
/// schema: the fields a reader wants, and the rest compiled into skips.
pub(super) struct EntryPlan {
    pub(super) entry: Vec<Step<EntryField>>,
    /// The fields of `data_file`.
    pub(super) file: Vec<Step<FileField>>,
    /// The whole `data_file`, for an entry whose status the reader does not want.
    pub(super) skip_file: Skip,
}

impl EntryPlan {
    /// The plan for a reader of the entry fields `entry` (status and data file always) and the
    /// `data_file` fields `wanted`; the others are skipped.
    pub(super) fn new(top: &[Field], entry: &[EntryField], wanted: &[FileField]) -> R<Self> {
        let entry = avro::plan(top, |f| {
            Ok(entry_field(f)?.filter(|role| {
                matches!(role, EntryField::Status | EntryField::DataFile) || entry.contains(role)
            }))
        })?;
        let mut data_file = None;
        let mut status = false;
        for step in &entry {
            match step {
                Step::Take(EntryField::Status, _) => status = true,
                Step::Take(EntryField::DataFile, i) => data_file = Some(&top[*i]),
                _ => {}
            }
        }
        if !status {
            return Err("a manifest entry without status".into());
        }
        let data_file = data_file.ok_or("a manifest entry without data_file")?;
        let avro::Schema::Record(inner) = &data_file.schema else {
            return Err("data_file is not a record".into());
        };
        let file = avro::plan(inner, |f| {
            Ok(file_field(f)?.filter(|role| wanted.contains(role)))
        })?;
        for role in wanted.iter().filter(|r| r.required()) {
            if !file
                .iter()
                .any(|s| matches!(s, Step::Take(r, _) if r == role))
            {
                return Err(format!("a manifest entry without {}", role.name()));
            }
        }
        Ok(Self {
            entry,
            file,
            skip_file: Skip::of(&data_file.schema)?,
        })
    }
}

/// The entries `want` keeps (by status), with the fast reader; visits nothing unless the whole
/// file decodes. An entry's `data_file` is skipped, not decoded, when its status (written
/// first) says it is not wanted.
fn entries_fast(
    bytes: &[u8],
    want: impl Fn(ManifestStatus) -> bool,
    visit: &mut impl FnMut(EntryRef<'_>),
) -> std::result::Result<(), String> {
    let container = avro::open(bytes)?;
    let avro::Schema::Record(top) = &container.schema else {
        return Err("the file's schema is not a record".into());
    };
    let plan = EntryPlan::new(
        top,
        &[EntryField::SnapshotId],
        &[
            FileField::Path,
            FileField::Content,
            FileField::Records,
            FileField::Size,
        ],
    )?;
    let mut entries: Vec<EntryRef<'_>> = Vec::new();
    container.for_each(|cur, fields| {
        let (mut status, mut snapshot_id) = (None, None);
        let (mut file, mut content, mut records, mut size) = (None, 0, None, None);
        let mut skipped = false;
        for step in &plan.entry {
            let Some((role, i)) = cur.step(step)? else {
                continue;
            };
            let f = &fields[i];
            match role {
                EntryField::Status => {
                    status = Some(match cur.leaf(&f.schema)?.long() {
                        // 0 EXISTING, 1 ADDED, 2 DELETED.
                        Some(0) => ManifestStatus::Existing,
                        Some(1) => ManifestStatus::Added,
                        Some(2) => ManifestStatus::Deleted,
                        Some(other) => return Err(format!("unknown status {other}")),
                        None => return Err("a manifest entry without status".into()),
                    });
                }
                EntryField::SnapshotId => snapshot_id = cur.leaf(&f.schema)?.long(),
                EntryField::Sequence | EntryField::FileSequence => {
                    return Err("sequence numbers are not planned here".into());
                }
                EntryField::DataFile => {
                    if status.is_some_and(|s| !want(s)) {
                        cur.pass(&plan.skip_file)?;
                        skipped = true;
                        continue;
                    }
                    let avro::Schema::Record(inner) = &f.schema else {
                        return Err("data_file is not a record".into());
                    };
                    for step in &plan.file {
                        let Some((role, j)) = cur.step(step)? else {
                            continue;
                        };
                        let leaf = cur.leaf(&inner[j].schema)?;
                        match role {
                            FileField::Path => file = Some(leaf.str()?),
                            FileField::Content => content = leaf.long().unwrap_or(0),
                            FileField::Records => records = leaf.long(),
                            FileField::Size => size = leaf.long(),
                            other => return Err(format!("{} is not planned here", other.name())),
                        }
                    }
                }
            }
        }
        let status = status.ok_or("a manifest entry without status")?;
        if skipped || !want(status) {
            return Ok(());
        }
        let path = file.ok_or("a manifest entry without file_path")?;
        let records = records.ok_or("a manifest entry without record_count")?;
        let size = size.ok_or("a manifest entry without file_size_in_bytes")?;
        entries.push(EntryRef {
            status,
            snapshot_id,
            live: LiveRef {
                path,
                content: match content {
                    0 => DataContentType::Data,
                    1 => DataContentType::PositionDeletes,
                    2 => DataContentType::EqualityDeletes,
                    _ => return Err(format!("unknown content {content}")),
                },
                records: records.max(0) as u64,
                bytes: size.max(0) as u64,
            },
        });
        Ok(())
    })?;
    for e in entries {
        visit(e);
    }
    Ok(())
}

fn decode(bytes: &[u8]) -> R<Manifest> {
    let (container, metadata, partition_type) = open_fast(bytes)?;
    let mut entries = Vec::new();
    // Planned on the first entry (a manifest without entries is read whatever its schema).
    let mut plan: Option<FullPlan> = None;
    container.for_each(|cur, fields| {
        let plan = match &mut plan {
            Some(p) => p,
            None => plan.insert(FullPlan::new(fields, &partition_type)?),
        };
        entries.push(entry(cur, fields, plan, &metadata, &partition_type)?);
        Ok(())
    })?;
    Ok(Manifest::new(metadata, entries))
}

/// The container, metadata and partition type of a manifest the fast readers read (format v2 or
/// v3, a plain partition type); an error for any other, which the caller leaves to upstream.
pub(super) fn open_fast(bytes: &[u8]) -> R<(avro::Container<'_>, ManifestMetadata, StructType)> {
    let container = avro::open(bytes)?;
    let meta: HashMap<String, Vec<u8>> = container
        .meta
        .iter()
        .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v.to_vec()))
        .collect();
    let metadata = ManifestMetadata::parse(&meta).map_err(|e| e.to_string())?;
    if metadata.format_version == FormatVersion::V1 {
        return Err("a v1 manifest".into());
    }
    let partition_type = metadata
        .partition_spec
        .partition_type(&metadata.schema)
        .map_err(|e| e.to_string())?;
    if !readable(&partition_type) {
        return Err("a partition type left to upstream".into());
    }
    Ok((container, metadata, partition_type))
}

/// Partition types this decoder reads: those [`ManifestOut`] writes (plain primitives), but
/// for nanosecond timestamps, which upstream's reader refuses (and so this one does, by leaving
/// them to it).
///
/// [`ManifestOut`]: super::manifest_write::ManifestOut
fn readable(partition_type: &StructType) -> bool {
    super::manifest_write::encodable(partition_type)
        && partition_type.fields().iter().all(|f| {
            !matches!(
                *f.field_type,
                Type::Primitive(PrimitiveType::TimestampNs | PrimitiveType::TimestamptzNs)
            )
        })
}

/// The fields of a record schema (through a `["null", record]` union).
pub(super) fn record_fields(schema: &avro::Schema) -> R<&[Field]> {
    match schema {
        avro::Schema::Record(fields) => Ok(fields),
        avro::Schema::Union(branches) => match branches.as_slice() {
            [avro::Schema::Null, avro::Schema::Record(fields)] => Ok(fields),
            _ => Err("a union that is not an optional record".into()),
        },
        _ => Err("not a record".into()),
    }
}

pub(super) fn long(leaf: Leaf<'_>) -> R<Option<i64>> {
    match leaf {
        Leaf::Null => Ok(None),
        Leaf::Long(v) => Ok(Some(v)),
        other => Err(format!("expected an integer, found {other:?}")),
    }
}

/// An int field: written as an Avro `int` (upstream's reader does not narrow a `long`).
pub(super) fn int(cur: &mut Cursor<'_>, schema: &avro::Schema) -> R<Option<i32>> {
    if matches!(non_null(schema), avro::Schema::Long) {
        return Err("a long where an int is read".into());
    }
    long(cur.leaf(schema)?)?
        .map(|v| i32::try_from(v).map_err(|_| "an int out of range".to_string()))
        .transpose()
}

/// The value branch of a `["null", T]` union, or the schema itself.
pub(super) fn non_null(schema: &avro::Schema) -> &avro::Schema {
    match schema {
        avro::Schema::Union(branches) => match branches.as_slice() {
            [avro::Schema::Null, value] | [value, avro::Schema::Null] => value,
            _ => schema,
        },
        other => other,
    }
}

pub(super) fn string(leaf: Leaf<'_>) -> R<Option<&str>> {
    match leaf {
        Leaf::Null => Ok(None),
        Leaf::Bytes(b) => std::str::from_utf8(b)
            .map(Some)
            .map_err(|_| "a string that is not UTF-8".into()),
        other => Err(format!("expected a string, found {other:?}")),
    }
}

pub(super) fn bytes(leaf: Leaf<'_>) -> R<Option<&[u8]>> {
    match leaf {
        Leaf::Null => Ok(None),
        Leaf::Bytes(b) => Ok(Some(b)),
        other => Err(format!("expected bytes, found {other:?}")),
    }
}

/// The items of an optional array of `item` schema (`None` for a null).
pub(super) fn items<'a, T>(
    cur: &mut Cursor<'a>,
    schema: &avro::Schema,
    mut item: impl FnMut(&mut Cursor<'a>, &avro::Schema) -> R<T>,
) -> R<Option<Vec<T>>> {
    let schema = match schema {
        avro::Schema::Union(branches) => {
            let branch = cur.branch(branches)?;
            if matches!(branch, avro::Schema::Null) {
                return Ok(None);
            }
            branch
        }
        other => other,
    };
    let avro::Schema::Array(item_schema) = schema else {
        return Err("expected an array".into());
    };
    let mut out = Vec::new();
    cur.items(|c| {
        out.push(item(c, item_schema)?);
        Ok(())
    })?;
    Ok(Some(out))
}

/// One `{key: int, value: …}` item of an Iceberg map written as an Avro array.
fn key_value<'a>(cur: &mut Cursor<'a>, schema: &avro::Schema) -> R<(i32, Leaf<'a>)> {
    let (mut key, mut value) = (None, None);
    cur.record(record_fields(schema)?, |f, c| {
        match f.name.as_str() {
            "key" => key = int(c, &f.schema)?,
            "value" => value = Some(c.leaf(&f.schema)?),
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok((
        key.ok_or("a map item without key")?,
        value.ok_or("a map item without value")?,
    ))
}

/// An Iceberg map of counts (a missing map reads as empty; negative counts are dropped, as
/// upstream drops them).
fn counts(cur: &mut Cursor<'_>, schema: &avro::Schema) -> R<HashMap<i32, u64>> {
    let mut out = HashMap::new();
    for (key, value) in items(cur, schema, key_value)?.unwrap_or_default() {
        let value = long(value)?.ok_or("a null count")?;
        if let Ok(v) = u64::try_from(value) {
            out.insert(key, v);
        }
    }
    Ok(out)
}

/// An Iceberg map of bounds, each read as its field's type in `schema` (bounds of fields the
/// schema no longer has are dropped, as upstream drops them).
fn bounds(
    cur: &mut Cursor<'_>,
    avro_schema: &avro::Schema,
    schema: &Schema,
) -> R<HashMap<i32, Datum>> {
    let mut out = HashMap::new();
    for (key, value) in items(cur, avro_schema, key_value)?.unwrap_or_default() {
        let value = bytes(value)?.ok_or("a null bound")?;
        let field = schema
            .field_by_id(key)
            .or_else(|| iceberg::metadata_columns::get_metadata_field(key).ok());
        if let Some(field) = field {
            let ty = field
                .field_type
                .as_primitive_type()
                .ok_or("a bound of a nested field")?
                .clone();
            let datum = Datum::try_from_bytes(value, ty).map_err(|e| e.to_string())?;
            out.insert(key, datum);
        }
    }
    Ok(out)
}

/// A partition value of type `ty` (`None` for a null), with Avro's promotions.
fn partition_value(leaf: Leaf<'_>, ty: &PrimitiveType) -> R<Option<Literal>> {
    let p = match (ty, leaf) {
        (_, Leaf::Null) => return Ok(None),
        (PrimitiveType::Boolean, Leaf::Boolean(b)) => PrimitiveLiteral::Boolean(b),
        (PrimitiveType::Int | PrimitiveType::Date, Leaf::Long(v)) => {
            PrimitiveLiteral::Int(i32::try_from(v).map_err(|_| "an int out of range")?)
        }
        (
            PrimitiveType::Long
            | PrimitiveType::Time
            | PrimitiveType::Timestamp
            | PrimitiveType::Timestamptz,
            Leaf::Long(v),
        ) => PrimitiveLiteral::Long(v),
        (PrimitiveType::Float, Leaf::Float(v)) => PrimitiveLiteral::Float(v.into()),
        (PrimitiveType::Double, Leaf::Double(v)) => PrimitiveLiteral::Double(v.into()),
        (PrimitiveType::String, Leaf::Bytes(b)) => PrimitiveLiteral::String(
            std::str::from_utf8(b)
                .map_err(|_| "a string that is not UTF-8")?
                .to_string(),
        ),
        (PrimitiveType::Binary, Leaf::Bytes(b)) => PrimitiveLiteral::Binary(b.to_vec()),
        (ty, leaf) => return Err(format!("a partition value {leaf:?} for type {ty}")),
    };
    Ok(Some(Literal::Primitive(p)))
}

/// The partition tuple: the writer's partition fields matched to the spec's by field id and
/// name (a field the writer left out is null; one the spec does not have is skipped).
pub(super) fn partition(
    cur: &mut Cursor<'_>,
    schema: &avro::Schema,
    partition_type: &StructType,
) -> R<Struct> {
    let fields = record_fields(schema)?;
    let steps = partition_plan(fields, partition_type)?;
    planned_partition(cur, fields, &steps, partition_type)
}

/// Which partition field (its index in `partition_type`) each of the writer's `fields` is.
fn partition_plan(fields: &[Field], partition_type: &StructType) -> R<Vec<Step<usize>>> {
    let spec = partition_type.fields();
    avro::plan(fields, |f| {
        for (i, field) in spec.iter().enumerate() {
            if avro::is(f, i64::from(field.id), &[field.name.as_str()])? {
                let ty = field
                    .field_type
                    .as_primitive_type()
                    .ok_or("a nested partition field")?;
                if matches!(ty, PrimitiveType::Int | PrimitiveType::Date)
                    && matches!(non_null(&f.schema), avro::Schema::Long)
                {
                    return Err("a long partition value for an int field".into());
                }
                return Ok(Some(i));
            }
        }
        Ok(None)
    })
}

/// A partition tuple of the writer's `fields`, read as [`partition_plan`] planned.
fn planned_partition(
    cur: &mut Cursor<'_>,
    fields: &[Field],
    steps: &[Step<usize>],
    partition_type: &StructType,
) -> R<Struct> {
    let spec = partition_type.fields();
    let mut values: Vec<Option<Literal>> = vec![None; spec.len()];
    for step in steps {
        let Some((&i, j)) = cur.step(step)? else {
            continue;
        };
        let ty = spec[i]
            .field_type
            .as_primitive_type()
            .ok_or("a nested partition field")?;
        values[i] = partition_value(cur.leaf(&fields[j].schema)?, ty)?;
    }
    Ok(values.into_iter().collect())
}

/// The index of the field a plan reads in role `want`.
fn taken<T: PartialEq>(steps: &[Step<T>], want: &T) -> Option<usize> {
    steps.iter().find_map(|s| match s {
        Step::Take(role, i) if role == want => Some(*i),
        _ => None,
    })
}

/// How [`decode`] walks a manifest's entries: every field it reads, planned once per file.
struct FullPlan {
    entry: EntryPlan,
    /// The writer's partition fields, and their plan.
    partition: (Vec<Field>, Vec<Step<usize>>),
}

impl FullPlan {
    fn new(top: &[Field], partition_type: &StructType) -> R<Self> {
        let entry = EntryPlan::new(
            top,
            &[
                EntryField::SnapshotId,
                EntryField::Sequence,
                EntryField::FileSequence,
            ],
            &FileField::FULL,
        )?;
        // Where the plan found `data_file` and its `partition` (it refuses a file without them).
        let file = taken(&entry.entry, &EntryField::DataFile)
            .ok_or("a manifest entry without data_file")?;
        let avro::Schema::Record(file) = &top[file].schema else {
            return Err("data_file is not a record".into());
        };
        let partition = taken(&entry.file, &FileField::Partition)
            .ok_or("a manifest entry without partition")?;
        let fields = record_fields(&file[partition].schema)?.to_vec();
        let steps = partition_plan(&fields, partition_type)?;
        Ok(Self {
            entry,
            partition: (fields, steps),
        })
    }
}

/// One `manifest_entry` record.
fn entry(
    cur: &mut Cursor<'_>,
    fields: &[Field],
    plan: &FullPlan,
    metadata: &ManifestMetadata,
    partition_type: &StructType,
) -> R<ManifestEntry> {
    let (mut status, mut snapshot_id, mut sequence_number, mut file_sequence_number) =
        (None, None, None, None);
    let mut data_file = None;
    for step in &plan.entry.entry {
        let Some((role, i)) = cur.step(step)? else {
            continue;
        };
        let s = &fields[i].schema;
        match role {
            EntryField::Status => status = int(cur, s)?,
            EntryField::SnapshotId => snapshot_id = long(cur.leaf(s)?)?,
            EntryField::Sequence => sequence_number = long(cur.leaf(s)?)?,
            EntryField::FileSequence => file_sequence_number = long(cur.leaf(s)?)?,
            EntryField::DataFile => {
                let avro::Schema::Record(inner) = s else {
                    return Err("data_file is not a record".into());
                };
                data_file = Some(data_file_of(cur, inner, plan, metadata, partition_type)?);
            }
        }
    }
    let status = status.ok_or("an entry without status")?;
    Ok(ManifestEntry {
        status: ManifestStatus::try_from(status).map_err(|e| e.to_string())?,
        snapshot_id,
        sequence_number,
        file_sequence_number,
        data_file: data_file.ok_or("an entry without data_file")?,
    })
}

/// The `data_file` record of an entry (its writer's `fields`).
fn data_file_of(
    cur: &mut Cursor<'_>,
    fields: &[Field],
    plan: &FullPlan,
    metadata: &ManifestMetadata,
    partition_type: &StructType,
) -> R<iceberg::spec::DataFile> {
    use FileField as F;
    let ice = |e: iceberg::Error| e.to_string();
    let count = |v: Option<i64>, what: &str| -> R<u64> {
        u64::try_from(v.ok_or_else(|| format!("a data file without {what}"))?)
            .map_err(|_| format!("a negative {what}"))
    };
    let mut b = DataFileBuilder::default();
    b.partition_spec_id(metadata.partition_spec.spec_id())
        .content(DataContentType::Data);
    let (mut path, mut format, mut tuple, mut records, mut size) = (None, None, None, None, None);
    for step in &plan.entry.file {
        let Some((role, i)) = cur.step(step)? else {
            continue;
        };
        let s = &fields[i].schema;
        let c = &mut *cur;
        match role {
            F::Content => {
                let content = int(c, s)?.ok_or("a null content")?;
                b.content(DataContentType::try_from(content).map_err(ice)?);
            }
            F::Path => path = string(c.leaf(s)?)?.map(str::to_string),
            F::Format => {
                let name = string(c.leaf(s)?)?.ok_or("a null file_format")?;
                format = Some(name.parse::<DataFileFormat>().map_err(ice)?);
            }
            F::Partition => {
                let (fields, steps) = &plan.partition;
                tuple = Some(planned_partition(c, fields, steps, partition_type)?);
            }
            F::Records => records = long(c.leaf(s)?)?,
            F::Size => size = long(c.leaf(s)?)?,
            F::ColumnSizes => _ = b.column_sizes(counts(c, s)?),
            F::ValueCounts => _ = b.value_counts(counts(c, s)?),
            F::NullCounts => _ = b.null_value_counts(counts(c, s)?),
            F::NanCounts => _ = b.nan_value_counts(counts(c, s)?),
            F::Lower => _ = b.lower_bounds(bounds(c, s, &metadata.schema)?),
            F::Upper => _ = b.upper_bounds(bounds(c, s, &metadata.schema)?),
            F::KeyMetadata => _ = b.key_metadata(bytes(c.leaf(s)?)?.map(<[u8]>::to_vec)),
            F::SplitOffsets => {
                b.split_offsets(items(c, s, |c, s| {
                    long(c.leaf(s)?)?.ok_or_else(|| "a null offset".to_string())
                })?);
            }
            F::EqualityIds => {
                b.equality_ids(items(c, s, |c, s| {
                    int(c, s)?.ok_or_else(|| "a null id".to_string())
                })?);
            }
            F::SortOrderId => {
                if let Some(order) = int(c, s)? {
                    b.sort_order_id(order);
                }
            }
            F::FirstRowId => _ = b.first_row_id(long(c.leaf(s)?)?),
            F::Referenced => {
                b.referenced_data_file(string(c.leaf(s)?)?.map(str::to_string));
            }
            F::ContentOffset => _ = b.content_offset(long(c.leaf(s)?)?),
            F::ContentSize => _ = b.content_size_in_bytes(long(c.leaf(s)?)?),
        }
    }
    b.file_path(path.ok_or("a data file without file_path")?)
        .file_format(format.ok_or("a data file without file_format")?)
        .partition(tuple.ok_or("a data file without partition")?)
        .record_count(count(records, "record_count")?)
        .file_size_in_bytes(count(size, "file_size_in_bytes")?);
    b.build().map_err(|e| e.to_string())
}
