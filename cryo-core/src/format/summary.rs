//! A manifest's entries as a metadata scan folds them: [`for_each_summary`].
//!
//! A scan needs of each entry its status, sequence number and snapshot (inherited), content,
//! path, partition, size, row count, which columns have bounds, and for a delete file the data
//! file it names. It does not need the bounds themselves, the counts maps or the split offsets,
//! which are most of an entry's bytes and, built into upstream's `DataFile`, most of its cost
//! (maps of `Datum`s, a few dozen allocations per entry). This reader walks the records with a
//! plan made once per file from its writer schema (no field lookup per record), skips what the
//! scan does not read, decodes each distinct partition tuple once per manifest, and hands out
//! entries borrowed from the block: nothing is allocated per entry.
//!
//! Like the other fast paths it reads format v2 and v3 manifests with plain partition types and
//! `null` or `deflate` blocks, and gives up on the whole file at anything else; the entries are
//! then read by [`super::manifest::parse_manifest`] (and its errors are the caller's). Bounds are
//! not decoded, so a bound whose bytes do not fit its column's type is not an error here.

use std::collections::HashMap;
use std::ops::Range;

use iceberg::spec::{
    DataContentType, DataFileFormat, Datum, ManifestFile, ManifestStatus, PrimitiveLiteral, Struct,
};

use super::avro::{self, Cursor, Field, Step};
use super::manifest::{self, EntryField, EntryPlan, FileField, Inheritance};
use crate::error::{Error, Result};

type R<T> = std::result::Result<T, String>;

/// The keys and raw values of one side's bounds.
type BoundKeys<'a> = Vec<(i32, &'a [u8])>;

/// Field id of the `file_path` column of position delete files (whose bounds name the data file
/// a delete file applies to, when it applies to one).
pub(crate) const POS_DELETE_FILE_PATH_ID: i32 = 2_147_483_546;

/// One manifest entry as a scan folds it, with what it inherits from its manifest-list entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Summary<'a> {
    pub(crate) status: ManifestStatus,
    pub(crate) snapshot_id: Option<i64>,
    /// The data sequence number.
    pub(crate) sequence_number: Option<i64>,
    pub(crate) spec_id: i32,
    pub(crate) content: DataContentType,
    /// The file's format (Puffin: a deletion vector, for a position delete file).
    pub(crate) format: DataFileFormat,
    pub(crate) path: &'a str,
    pub(crate) partition: &'a Struct,
    /// Which of this manifest's partition tuples `partition` is (entries of one tuple share
    /// it; a fold decodes each once).
    pub(crate) partition_index: usize,
    pub(crate) records: u64,
    pub(crate) bytes: u64,
    /// Field ids with both a lower and an upper bound (fields of the manifest's schema), in
    /// the order the lower bounds list them.
    pub(crate) bounded: &'a [i32],
    /// The data file a position delete file or deletion vector applies to: its
    /// `referenced_data_file`, or the `file_path` bounds when both name one file.
    pub(crate) referenced: Option<&'a str>,
    pub(crate) content_size: Option<i64>,
}

/// Call `visit` for every entry (deleted ones too) of the manifest `bytes`, which `mf` names,
/// in file order; `table` and `mf`'s path name the file in errors. Nothing is visited unless the
/// whole file decodes.
pub(crate) fn for_each_summary(
    table: &str,
    mf: &ManifestFile,
    bytes: &[u8],
    mut visit: impl FnMut(&Summary<'_>),
) -> Result<()> {
    let path = mf.manifest_path.as_str();
    if mf.key_metadata.is_some() {
        return Err(Error::unsupported(format!(
            "{table}: encrypted manifest {path}"
        )));
    }
    let inherit = Inheritance::of(mf);
    match fast(bytes, inherit, &mut visit) {
        Ok(()) => Ok(()),
        Err(why) => {
            tracing::trace!(
                table,
                path,
                why,
                "manifest summarized from upstream's entries"
            );
            let parsed = manifest::parse_manifest(bytes)
                .map_err(|e| Error::metadata(table, path, format!("corrupt manifest: {e}")))?;
            upstream(&parsed, inherit, &mut visit);
            Ok(())
        }
    }
}

/// The summaries of entries upstream's reader (or the fast decoder) built.
pub(super) fn upstream(
    parsed: &iceberg::spec::Manifest,
    inherit: Inheritance,
    visit: &mut impl FnMut(&Summary<'_>),
) {
    let spec_id = parsed.metadata().partition_spec().spec_id();
    let mut bounded = Vec::new();
    for (i, e) in parsed.entries().iter().enumerate() {
        let (snapshot_id, sequence_number) =
            inherit.ids(e.status, e.snapshot_id, e.sequence_number);
        let df = e.data_file();
        bounded.clear();
        bounded.extend(
            df.lower_bounds()
                .keys()
                .filter(|id| df.upper_bounds().contains_key(id))
                .copied(),
        );
        bounded.sort_unstable();
        let lo = df.lower_bounds().get(&POS_DELETE_FILE_PATH_ID);
        let hi = df.upper_bounds().get(&POS_DELETE_FILE_PATH_ID);
        let from_bounds = match (lo.map(Datum::literal), hi.map(Datum::literal)) {
            (Some(PrimitiveLiteral::String(a)), Some(PrimitiveLiteral::String(b))) if a == b => {
                Some(a.as_str())
            }
            _ => None,
        };
        let referenced = df.referenced_data_file();
        visit(&Summary {
            status: e.status,
            snapshot_id,
            sequence_number,
            spec_id,
            content: df.content_type(),
            format: df.file_format(),
            path: df.file_path(),
            partition: df.partition(),
            partition_index: i,
            records: df.record_count(),
            bytes: df.file_size_in_bytes(),
            bounded: &bounded,
            referenced: referenced.as_deref().or(from_bounds),
            content_size: df.content_size_in_bytes(),
        });
    }
}

/// One entry, its borrowed parts as indices into the per-file buffers.
struct Row<'a> {
    status: ManifestStatus,
    snapshot_id: Option<i64>,
    sequence_number: Option<i64>,
    content: DataContentType,
    format: DataFileFormat,
    path: &'a str,
    partition: usize,
    records: u64,
    bytes: u64,
    bounded: Range<usize>,
    referenced: Option<&'a str>,
    content_size: Option<i64>,
}

/// Which fields of the manifest's schema bounds may name: `true` for primitive ones (a bound of
/// a nested field is an error, as upstream's reader makes it). Looked up for every bound of
/// every entry, so by index where the ids are small (they are numbered from 1).
struct SchemaIds {
    /// By id: 0 not in the schema, 1 primitive, 2 nested.
    dense: Vec<u8>,
    sparse: HashMap<i32, bool>,
}

/// Ids below this are looked up by index.
const DENSE_IDS: i32 = 1 << 16;

impl SchemaIds {
    fn of(schema: &iceberg::spec::Schema) -> Self {
        let mut out = Self {
            dense: Vec::new(),
            sparse: HashMap::new(),
        };
        let mut stack: Vec<&iceberg::spec::NestedFieldRef> =
            schema.as_struct().fields().iter().collect();
        while let Some(f) = stack.pop() {
            let primitive = match f.field_type.as_ref() {
                iceberg::spec::Type::Primitive(_) => true,
                iceberg::spec::Type::Struct(s) => {
                    stack.extend(s.fields().iter());
                    false
                }
                iceberg::spec::Type::List(l) => {
                    stack.push(&l.element_field);
                    false
                }
                iceberg::spec::Type::Map(m) => {
                    stack.push(&m.key_field);
                    stack.push(&m.value_field);
                    false
                }
            };
            out.insert(f.id, primitive);
        }
        out
    }

    fn insert(&mut self, id: i32, primitive: bool) {
        match usize::try_from(id) {
            Ok(i) if id < DENSE_IDS => {
                if self.dense.len() <= i {
                    self.dense.resize(i + 1, 0);
                }
                self.dense[i] = if primitive { 1 } else { 2 };
            }
            _ => {
                self.sparse.insert(id, primitive);
            }
        }
    }

    fn get(&self, id: i32) -> Option<bool> {
        match usize::try_from(id) {
            Ok(i) if id < DENSE_IDS => match self.dense.get(i) {
                Some(1) => Some(true),
                Some(2) => Some(false),
                _ => None,
            },
            _ => self.sparse.get(&id).copied(),
        }
    }

    /// Whether a bound of field `id` is kept (upstream keeps those of the schema's primitive
    /// fields and of metadata columns; it drops the rest and fails on nested ones).
    fn keeps(&self, id: i32) -> R<bool> {
        match self.get(id) {
            Some(true) => Ok(true),
            Some(false) => Err("a bound of a nested field".into()),
            None => Ok(iceberg::metadata_columns::get_metadata_field(id).is_ok()),
        }
    }
}

pub(super) fn fast(
    bytes: &[u8],
    inherit: Inheritance,
    visit: &mut impl FnMut(&Summary<'_>),
) -> R<()> {
    let (container, metadata, partition_type) = manifest::open_fast(bytes)?;
    let avro::Schema::Record(top) = &container.schema else {
        return Err("the file's schema is not a record".into());
    };
    let plan = EntryPlan::new(
        top,
        &[EntryField::SnapshotId, EntryField::Sequence],
        &FileField::SUMMARY,
    )?;
    let ids = SchemaIds::of(&metadata.schema);
    let part_schema = partition_schema(top);

    let mut rows: Vec<Row<'_>> = Vec::new();
    let mut bounded: Vec<i32> = Vec::new();
    let mut tuples: Vec<Struct> = Vec::new();
    let mut tuple_of: HashMap<&[u8], usize> = HashMap::new();
    let (mut lower, mut upper): (BoundKeys<'_>, BoundKeys<'_>) = (Vec::new(), Vec::new());
    container.for_each(|cur, fields| {
        let (mut status, mut snapshot_id, mut sequence_number) = (None, None, None);
        let mut file = None;
        for step in &plan.entry {
            let Some((role, i)) = cur.step(step)? else {
                continue;
            };
            let f = &fields[i];
            match role {
                EntryField::Status => status = manifest::int(cur, &f.schema)?,
                EntryField::SnapshotId => snapshot_id = manifest::long(cur.leaf(&f.schema)?)?,
                EntryField::Sequence => sequence_number = manifest::long(cur.leaf(&f.schema)?)?,
                EntryField::FileSequence => {
                    return Err("file_sequence_number is not planned here".into());
                }
                EntryField::DataFile => {
                    let avro::Schema::Record(inner) = &f.schema else {
                        return Err("data_file is not a record".into());
                    };
                    lower.clear();
                    upper.clear();
                    file = Some(data_file(cur, inner, &plan.file, &mut lower, &mut upper)?);
                }
            }
        }
        let status = status.ok_or("an entry without status")?;
        let status = ManifestStatus::try_from(status).map_err(|e| e.to_string())?;
        let file = file.ok_or("an entry without data_file")?;
        let partition = if let Some(i) = tuple_of.get(file.partition) {
            *i
        } else {
            let schema = part_schema.ok_or("no partition schema")?;
            let tuple =
                manifest::partition(&mut Cursor::new(file.partition), schema, &partition_type)?;
            tuples.push(tuple);
            tuple_of.insert(file.partition, tuples.len() - 1);
            tuples.len() - 1
        };
        let start = bounded.len();
        let from_bounds = bounds(&ids, &lower, &upper, &mut bounded)?;
        // Inheritance, as `Inheritance::entry` applies it (one rule, one place).
        let (snapshot_id, sequence_number) = inherit.ids(status, snapshot_id, sequence_number);
        rows.push(Row {
            status,
            snapshot_id,
            sequence_number,
            content: file.content,
            format: file.format,
            path: file.path,
            partition,
            records: file.records,
            bytes: file.bytes,
            bounded: start..bounded.len(),
            referenced: file.referenced.or(from_bounds),
            content_size: file.content_size,
        });
        Ok(())
    })?;
    let spec_id = metadata.partition_spec.spec_id();
    for r in rows {
        visit(&Summary {
            status: r.status,
            snapshot_id: r.snapshot_id,
            sequence_number: r.sequence_number,
            spec_id,
            content: r.content,
            format: r.format,
            path: r.path,
            partition: &tuples[r.partition],
            partition_index: r.partition,
            records: r.records,
            bytes: r.bytes,
            bounded: &bounded[r.bounded],
            referenced: r.referenced,
            content_size: r.content_size,
        });
    }
    Ok(())
}

/// The writer schema of `data_file.partition`.
fn partition_schema(top: &[Field]) -> Option<&avro::Schema> {
    let data_file = top.iter().find(|f| f.name == "data_file")?;
    let avro::Schema::Record(fields) = &data_file.schema else {
        return None;
    };
    fields
        .iter()
        .find(|f| f.name == "partition")
        .map(|f| &f.schema)
}

/// A `data_file` record, its parts borrowed.
struct File<'a> {
    content: DataContentType,
    format: DataFileFormat,
    path: &'a str,
    partition: &'a [u8],
    records: u64,
    bytes: u64,
    referenced: Option<&'a str>,
    content_size: Option<i64>,
}

fn data_file<'a>(
    cur: &mut Cursor<'a>,
    fields: &[Field],
    plan: &[Step<FileField>],
    lower: &mut Vec<(i32, &'a [u8])>,
    upper: &mut Vec<(i32, &'a [u8])>,
) -> R<File<'a>> {
    let count = |v: Option<i64>, what: &str| -> R<u64> {
        u64::try_from(v.ok_or_else(|| format!("a data file without {what}"))?)
            .map_err(|_| format!("a negative {what}"))
    };
    let mut content = DataContentType::Data;
    let (mut path, mut format, mut partition, mut records, mut size) =
        (None, None, None, None, None);
    let (mut referenced, mut content_size) = (None, None);
    for step in plan {
        let Some((role, i)) = cur.step(step)? else {
            continue;
        };
        let s = &fields[i].schema;
        match role {
            FileField::Content => {
                let c = manifest::int(cur, s)?.ok_or("a null content")?;
                content = DataContentType::try_from(c).map_err(|e| e.to_string())?;
            }
            FileField::Path => path = manifest::string(cur.leaf(s)?)?,
            FileField::Format => {
                let name = manifest::string(cur.leaf(s)?)?.ok_or("a null file_format")?;
                format = Some(name.parse::<DataFileFormat>().map_err(|e| e.to_string())?);
            }
            FileField::Partition => partition = Some(cur.raw(s)?),
            FileField::Records => records = manifest::long(cur.leaf(s)?)?,
            FileField::Size => size = manifest::long(cur.leaf(s)?)?,
            FileField::Lower => bound_keys(cur, s, lower)?,
            FileField::Upper => bound_keys(cur, s, upper)?,
            FileField::Referenced => referenced = manifest::string(cur.leaf(s)?)?,
            FileField::ContentSize => content_size = manifest::long(cur.leaf(s)?)?,
            other => return Err(format!("{} is not planned here", other.name())),
        }
    }
    Ok(File {
        content,
        format: format.ok_or("a data file without file_format")?,
        path: path.ok_or("a data file without file_path")?,
        partition: partition.ok_or("a data file without partition")?,
        records: count(records, "record_count")?,
        bytes: count(size, "file_size_in_bytes")?,
        referenced,
        content_size,
    })
}

/// The keys and raw values of an Iceberg map of bounds (a missing map reads as empty).
fn bound_keys<'a>(
    cur: &mut Cursor<'a>,
    schema: &avro::Schema,
    out: &mut Vec<(i32, &'a [u8])>,
) -> R<()> {
    let schema = match schema {
        avro::Schema::Union(branches) => {
            let branch = cur.branch(branches)?;
            if matches!(branch, avro::Schema::Null) {
                return Ok(());
            }
            branch
        }
        other => other,
    };
    let avro::Schema::Array(item) = schema else {
        return Err("expected an array".into());
    };
    let fields = manifest::record_fields(item)?;
    // The item's fields by position, found once per map rather than by name in every item.
    let (mut key_at, mut value_at) = (None, None);
    for (i, f) in fields.iter().enumerate() {
        match f.name.as_str() {
            "key" => key_at = Some(i),
            "value" => value_at = Some(i),
            _ => {}
        }
    }
    let (key_at, value_at) = (
        key_at.ok_or("a map item without key")?,
        value_at.ok_or("a map item without value")?,
    );
    cur.items(|c| {
        let (mut key, mut value) = (None, None);
        for (i, f) in fields.iter().enumerate() {
            if i == key_at {
                key = manifest::int(c, &f.schema)?;
            } else if i == value_at {
                value = manifest::bytes(c.leaf(&f.schema)?)?;
            } else {
                c.skip(&f.schema)?;
            }
        }
        out.push((
            key.ok_or("a map item without key")?,
            value.ok_or("a null bound")?,
        ));
        Ok(())
    })
}

/// Append to `bounded` the fields of the manifest's schema that have both bounds (sorted), and
/// give the data file the `file_path` bounds name, when both name one.
fn bounds<'a>(
    ids: &SchemaIds,
    lower: &[(i32, &'a [u8])],
    upper: &[(i32, &'a [u8])],
    bounded: &mut Vec<i32>,
) -> R<Option<&'a str>> {
    let start = bounded.len();
    for (id, _) in lower {
        if ids.keeps(*id)? && upper.iter().any(|(u, _)| u == id) && !bounded[start..].contains(id) {
            bounded.push(*id);
        }
    }
    for (id, _) in upper {
        ids.keeps(*id)?;
    }
    bounded[start..].sort_unstable();
    Ok(match (path_bound(lower), path_bound(upper)) {
        (Some(a), Some(b)) if a == b => {
            Some(std::str::from_utf8(a).map_err(|_| "a file_path bound that is not UTF-8")?)
        }
        _ => None,
    })
}

/// The last `file_path` bound of one side.
fn path_bound<'a>(side: &[(i32, &'a [u8])]) -> Option<&'a [u8]> {
    side.iter()
        .rev()
        .find(|(id, _)| *id == POS_DELETE_FILE_PATH_ID)
        .map(|(_, v)| *v)
}
