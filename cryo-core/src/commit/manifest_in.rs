//! Reading manifests Cryo (or upstream `iceberg`) wrote: Avro decoded straight into entries.
//!
//! Upstream's reader decodes every record into a tree of `apache_avro::Value`s, resolves it
//! against the reader schema, deserializes it through serde and converts that into a
//! `ManifestEntry`. A manifest whose writer schema is exactly the one [`ManifestOut`] writes
//! (upstream's v2/v3 schema for a partition type of plain primitives, no codec) is decoded here
//! field by field with [`crate::avro`] instead. Anything else (Java's and PyIceberg's
//! manifests, v1, other partition types, and any byte this decoder does not expect) is left to
//! upstream: [`parse`] returns `None` and the caller parses the bytes as before, so the errors
//! on bad input are upstream's.
//!
//! [`ManifestOut`]: super::manifest_out::ManifestOut

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, Datum, FormatVersion, Literal, Manifest,
    ManifestEntry, ManifestMetadata, ManifestStatus, PrimitiveLiteral, PrimitiveType, Schema,
    Struct, StructType, Type,
};

use super::manifest_out::expected_header_schema;
use crate::avro::{self, Cursor};

type R<T> = std::result::Result<T, String>;

/// Writer schemas [`parse`] decodes, by format version, content and partition type.
static EXPECTED: LazyLock<Mutex<HashMap<String, Arc<Vec<u8>>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Schemas kept in [`EXPECTED`] at most (it is emptied when full).
const EXPECTED_CAP: usize = 256;

/// `bytes` as a manifest, when they are one this decoder reads; `None` otherwise (the caller
/// falls back to upstream's reader). Entries are as written: nothing is inherited yet.
pub(crate) async fn parse(bytes: &[u8]) -> Option<Manifest> {
    match decode(bytes).await {
        Ok(manifest) => Some(manifest),
        Err(why) => {
            tracing::trace!(why, "manifest read by upstream's reader");
            None
        }
    }
}

async fn decode(bytes: &[u8]) -> R<Manifest> {
    let container = avro::open(bytes)?;
    let meta: HashMap<String, Vec<u8>> = container
        .meta
        .iter()
        .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v.to_vec()))
        .collect();
    if meta
        .get("avro.codec")
        .is_some_and(|c| c.as_slice() != b"null")
    {
        return Err("a compressed manifest".into());
    }
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
    let expected = expected_schema(&metadata, &partition_type)
        .await
        .ok_or("no expected schema")?;
    if meta.get("avro.schema").map(Vec::as_slice) != Some(expected.as_slice()) {
        return Err("a writer schema other than Cryo's".into());
    }
    let mut entries = Vec::new();
    for (count, data) in &container.blocks {
        let mut cur = Cursor::new(data);
        for _ in 0..*count {
            entries.push(entry(&mut cur, &metadata, &partition_type)?);
        }
        if !cur.done() {
            return Err("a block holds more than its records".into());
        }
    }
    Ok(Manifest::new(metadata, entries))
}

/// The writer schema upstream (and [`ManifestOut`](super::manifest_out::ManifestOut)) writes
/// for manifests like `metadata`.
async fn expected_schema(
    metadata: &ManifestMetadata,
    partition_type: &StructType,
) -> Option<Arc<Vec<u8>>> {
    let key = format!(
        "{}/{}/{}",
        metadata.format_version as u8,
        metadata.content,
        serde_json::to_string(partition_type).ok()?
    );
    if let Some(found) = EXPECTED.lock().ok()?.get(&key) {
        return Some(Arc::clone(found));
    }
    let schema = Arc::new(expected_header_schema(metadata).await?);
    let mut cache = EXPECTED.lock().ok()?;
    if cache.len() >= EXPECTED_CAP {
        cache.clear();
    }
    cache.insert(key, Arc::clone(&schema));
    Some(schema)
}

/// Partition types this decoder reads: those [`ManifestOut`](super::manifest_out::ManifestOut)
/// writes, but for nanosecond timestamps, which upstream's reader refuses (and so this one does,
/// by leaving them to it).
fn readable(partition_type: &StructType) -> bool {
    super::manifest_out::encodable(partition_type)
        && partition_type.fields().iter().all(|f| {
            !matches!(
                *f.field_type,
                Type::Primitive(PrimitiveType::TimestampNs | PrimitiveType::TimestamptzNs)
            )
        })
}

/// An optional Iceberg map of counts (a missing map reads as empty; negative counts are
/// dropped, as upstream drops them).
fn counts(cur: &mut Cursor<'_>) -> R<HashMap<i32, u64>> {
    let mut out = HashMap::new();
    if cur.present()? {
        cur.items(|c| {
            let key = c.int()?;
            if let Ok(v) = u64::try_from(c.long()?) {
                out.insert(key, v);
            }
            Ok(())
        })?;
    }
    Ok(out)
}

/// An optional Iceberg map of bounds, each read as its field's type in `schema` (bounds of
/// fields the schema no longer has are dropped, as upstream drops them).
fn bounds(cur: &mut Cursor<'_>, schema: &Schema) -> R<HashMap<i32, Datum>> {
    let mut out = HashMap::new();
    if cur.present()? {
        cur.items(|c| {
            let key = c.int()?;
            let value = c.bytes()?;
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
            Ok(())
        })?;
    }
    Ok(out)
}

/// An optional array.
fn opt_vec<'a, T>(
    cur: &mut Cursor<'a>,
    item: impl Fn(&mut Cursor<'a>) -> R<T>,
) -> R<Option<Vec<T>>> {
    if !cur.present()? {
        return Ok(None);
    }
    let mut out = Vec::new();
    cur.items(|c| {
        out.push(item(c)?);
        Ok(())
    })?;
    Ok(Some(out))
}

/// An optional value.
fn opt<'a, T>(cur: &mut Cursor<'a>, value: impl Fn(&mut Cursor<'a>) -> R<T>) -> R<Option<T>> {
    Ok(if cur.present()? {
        Some(value(cur)?)
    } else {
        None
    })
}

fn partition_value(cur: &mut Cursor<'_>, ty: &PrimitiveType) -> R<Literal> {
    let p = match ty {
        PrimitiveType::Boolean => match cur.fixed::<1>()? {
            [0] => PrimitiveLiteral::Boolean(false),
            [1] => PrimitiveLiteral::Boolean(true),
            _ => return Err("a boolean that is neither 0 nor 1".into()),
        },
        PrimitiveType::Int | PrimitiveType::Date => PrimitiveLiteral::Int(cur.int()?),
        PrimitiveType::Long
        | PrimitiveType::Time
        | PrimitiveType::Timestamp
        | PrimitiveType::Timestamptz => PrimitiveLiteral::Long(cur.long()?),
        PrimitiveType::Float => PrimitiveLiteral::Float(f32::from_le_bytes(cur.fixed()?).into()),
        PrimitiveType::Double => PrimitiveLiteral::Double(f64::from_le_bytes(cur.fixed()?).into()),
        PrimitiveType::String => PrimitiveLiteral::String(cur.string()?.to_string()),
        PrimitiveType::Binary => PrimitiveLiteral::Binary(cur.bytes()?.to_vec()),
        other => return Err(format!("a partition value of type {other}")),
    };
    Ok(Literal::Primitive(p))
}

/// One `manifest_entry` record, its fields in the order `ManifestOut` writes them.
fn entry(
    cur: &mut Cursor<'_>,
    metadata: &ManifestMetadata,
    partition_type: &StructType,
) -> R<ManifestEntry> {
    let ice = |e: iceberg::Error| e.to_string();
    let status = ManifestStatus::try_from(cur.int()?).map_err(ice)?;
    let snapshot_id = opt(cur, Cursor::long)?;
    let sequence_number = opt(cur, Cursor::long)?;
    let file_sequence_number = opt(cur, Cursor::long)?;
    let content = DataContentType::try_from(cur.int()?).map_err(ice)?;
    let file_path = cur.string()?.to_string();
    let file_format: DataFileFormat = cur.string()?.parse().map_err(ice)?;
    let mut partition = Vec::with_capacity(partition_type.fields().len());
    for field in partition_type.fields() {
        let ty = field
            .field_type
            .as_primitive_type()
            .ok_or("a nested partition field")?;
        partition.push(if field.required || cur.present()? {
            Some(partition_value(cur, ty)?)
        } else {
            None
        });
    }
    let count = |v: i64| u64::try_from(v).map_err(|_| "a negative count".to_string());
    let mut b = DataFileBuilder::default();
    b.content(content)
        .file_path(file_path)
        .file_format(file_format)
        .partition(partition.into_iter().collect::<Struct>())
        .partition_spec_id(metadata.partition_spec.spec_id())
        .record_count(count(cur.long()?)?)
        .file_size_in_bytes(count(cur.long()?)?)
        .column_sizes(counts(cur)?)
        .value_counts(counts(cur)?)
        .null_value_counts(counts(cur)?)
        .nan_value_counts(counts(cur)?)
        .lower_bounds(bounds(cur, &metadata.schema)?)
        .upper_bounds(bounds(cur, &metadata.schema)?)
        .key_metadata(opt(cur, |c| c.bytes().map(<[u8]>::to_vec))?)
        .split_offsets(opt_vec(cur, Cursor::long)?)
        .equality_ids(opt_vec(cur, Cursor::int)?);
    if let Some(order) = opt(cur, Cursor::int)? {
        b.sort_order_id(order);
    }
    b.first_row_id(opt(cur, Cursor::long)?)
        .referenced_data_file(opt(cur, |c| c.string().map(str::to_string))?)
        .content_offset(opt(cur, Cursor::long)?)
        .content_size_in_bytes(opt(cur, Cursor::long)?);
    Ok(ManifestEntry {
        status,
        snapshot_id,
        sequence_number,
        file_sequence_number,
        data_file: b.build().map_err(|e| e.to_string())?,
    })
}

/// The `avro.schema` of an Avro container header.
pub(super) fn header_schema(header: &[u8]) -> Option<Vec<u8>> {
    let container = avro::open(header).ok()?;
    container.meta.get(&b"avro.schema"[..]).map(|s| s.to_vec())
}
