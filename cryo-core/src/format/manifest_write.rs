//! Writing manifests: Avro encoded straight from the entries.
//!
//! Upstream's `ManifestWriter` turns every entry into a tree of `apache_avro::Value`s, resolves
//! that tree against the schema and only then encodes it; the resolve step is most of its cost
//! (a compaction of 3328 files spent ~2.6% of all its instructions there). [`ManifestOut`] keeps
//! upstream's header (the Avro schema, the table schema, the partition spec, the format version
//! and the content type, as upstream writes them) and encodes the entries itself, field by field
//! in the schema's order, into the same bytes. Format v1 manifests and partition types whose
//! Avro form is not a plain primitive (decimal, uuid, fixed) go through upstream's writer
//! unchanged, as does any entry this encoder does not expect.

use std::cmp::min;
use std::sync::{Arc, LazyLock};

use iceberg::io::{FileIO, FileIOBuilder, OutputFile};
use iceberg::spec::{
    DataContentType, DataFile, Datum, FieldSummary, FormatVersion, Literal, ManifestContentType,
    ManifestEntry, ManifestFile, ManifestStatus, ManifestWriter, ManifestWriterBuilder,
    PartitionSpec, PrimitiveLiteral, PrimitiveType, SchemaRef, StructType, Type,
    UNASSIGNED_SEQUENCE_NUMBER,
};
use iceberg::{Error as IcebergError, ErrorKind};

/// Bytes of encoded entries per Avro block (Java's `DataFileWriter` default sync interval).
const BLOCK_BYTES: usize = 64_000;

/// Avro object container files start with these four bytes.
const AVRO_MAGIC: &[u8; 4] = b"Obj\x01";

/// The in-memory store upstream's header is written to and read back from.
static HEADER_IO: LazyLock<FileIO> =
    LazyLock::new(|| FileIOBuilder::new(Arc::new(crate::io::ObjectStorageFactory::new())).build());

type IceResult<T> = iceberg::Result<T>;

/// A manifest being written: the entries of one content type in one partition spec.
///
/// The methods mirror upstream's [`ManifestWriter`]: the same checks, the same entry statuses,
/// snapshot ids and sequence numbers, the same [`ManifestFile`] back.
pub(crate) struct ManifestOut {
    output: OutputFile,
    kind: Kind,
    entries: Vec<ManifestEntry>,
}

/// What a manifest is written for: its snapshot, table schema, partition spec, format version
/// and content type.
struct Kind {
    snapshot_id: Option<i64>,
    schema: SchemaRef,
    spec: PartitionSpec,
    format_version: FormatVersion,
    content: ManifestContentType,
}

impl Kind {
    /// Upstream's writer for such a manifest, with no entries.
    fn upstream(&self, output: OutputFile) -> ManifestWriter {
        let builder = ManifestWriterBuilder::new(
            output,
            self.snapshot_id,
            Arc::clone(&self.schema),
            self.spec.clone(),
        );
        match (self.format_version, self.content) {
            (FormatVersion::V1, _) => builder.build_v1(),
            (FormatVersion::V2, ManifestContentType::Data) => builder.build_v2_data(),
            (FormatVersion::V2, ManifestContentType::Deletes) => builder.build_v2_deletes(),
            (FormatVersion::V3, ManifestContentType::Data) => builder.build_v3_data(),
            (FormatVersion::V3, ManifestContentType::Deletes) => builder.build_v3_deletes(),
        }
    }

    /// Upstream's header for such a manifest: written with no entries to memory and read back.
    async fn header(&self) -> IceResult<Header> {
        let location = format!(
            "memory://cryo-manifest-headers/{}.avro",
            crate::random::uuid()
        );
        let written = async {
            self.upstream(HEADER_IO.new_output(&location)?)
                .write_manifest_file()
                .await?;
            HEADER_IO.new_input(&location)?.read().await
        }
        .await;
        HEADER_IO.delete(&location).await?;
        let bytes = written?.to_vec();
        if bytes.len() < AVRO_MAGIC.len() + 16 || !bytes.starts_with(AVRO_MAGIC) {
            return Err(IcebergError::new(
                ErrorKind::Unexpected,
                "upstream's manifest header is not an Avro container header",
            ));
        }
        let mut sync = [0u8; 16];
        sync.copy_from_slice(&bytes[bytes.len() - 16..]);
        Ok(Header { bytes, sync })
    }
}

impl ManifestOut {
    pub(crate) fn new(
        output: OutputFile,
        snapshot_id: Option<i64>,
        schema: SchemaRef,
        spec: PartitionSpec,
        format_version: FormatVersion,
        content: ManifestContentType,
    ) -> Self {
        Self {
            output,
            kind: Kind {
                snapshot_id,
                schema,
                spec,
                format_version,
                content,
            },
            entries: Vec::new(),
        }
    }

    /// `data_file` as `ADDED` by this manifest's snapshot, with `sequence_number` as its data
    /// sequence number (none when negative: inherited at commit).
    pub(crate) fn add_file(&mut self, data_file: DataFile, sequence_number: i64) -> IceResult<()> {
        self.check_data_file(&data_file)?;
        self.entries.push(ManifestEntry {
            status: ManifestStatus::Added,
            snapshot_id: self.kind.snapshot_id,
            sequence_number: (sequence_number >= 0).then_some(sequence_number),
            file_sequence_number: None,
            data_file,
        });
        Ok(())
    }

    /// `data_file` as `EXISTING`, keeping the snapshot id and sequence numbers it was added with.
    pub(crate) fn add_existing_file(
        &mut self,
        data_file: DataFile,
        snapshot_id: i64,
        sequence_number: i64,
        file_sequence_number: Option<i64>,
    ) -> IceResult<()> {
        let status = ManifestStatus::Existing;
        let ids = (Some(snapshot_id), sequence_number, file_sequence_number);
        self.add_with_sequence_numbers(status, data_file, ids)
    }

    /// `data_file` as `DELETED` by this manifest's snapshot, keeping its sequence numbers.
    pub(crate) fn add_delete_file(
        &mut self,
        data_file: DataFile,
        sequence_number: i64,
        file_sequence_number: Option<i64>,
    ) -> IceResult<()> {
        let ids = (self.kind.snapshot_id, sequence_number, file_sequence_number);
        self.add_with_sequence_numbers(ManifestStatus::Deleted, data_file, ids)
    }

    /// An `EXISTING` or `DELETED` entry: `(snapshot id, data sequence number, file sequence
    /// number)`, the last required as upstream requires it.
    fn add_with_sequence_numbers(
        &mut self,
        status: ManifestStatus,
        data_file: DataFile,
        (snapshot_id, sequence_number, file_sequence_number): (Option<i64>, i64, Option<i64>),
    ) -> IceResult<()> {
        self.check_data_file(&data_file)?;
        if file_sequence_number.is_none() {
            return Err(IcebergError::new(
                ErrorKind::DataInvalid,
                "Manifest entry with status Existing or Deleted should have sequence number",
            ));
        }
        self.entries.push(ManifestEntry {
            status,
            snapshot_id,
            sequence_number: Some(sequence_number),
            file_sequence_number,
            data_file,
        });
        Ok(())
    }

    fn check_data_file(&self, data_file: &DataFile) -> IceResult<()> {
        let fits = match self.kind.content {
            ManifestContentType::Data => data_file.content_type() == DataContentType::Data,
            ManifestContentType::Deletes => matches!(
                data_file.content_type(),
                DataContentType::PositionDeletes | DataContentType::EqualityDeletes
            ),
        };
        if fits {
            Ok(())
        } else {
            Err(IcebergError::new(
                ErrorKind::DataInvalid,
                format!(
                    "file {} has content {:?}, which a {} manifest cannot list",
                    data_file.file_path(),
                    data_file.content_type(),
                    self.kind.content
                ),
            ))
        }
    }

    /// Write the manifest and describe it for the manifest list (its sequence numbers are
    /// assigned there).
    pub(crate) async fn write_manifest_file(self) -> IceResult<ManifestFile> {
        let partition_type = self.kind.spec.partition_type(&self.kind.schema)?;
        if self.kind.format_version == FormatVersion::V1 || !encodable(&partition_type) {
            return Box::pin(self.write_upstream()).await;
        }
        let Some(partitions) = partition_summaries(&self.entries, &partition_type) else {
            // A partition value of another type: upstream decides (and errs as it does).
            return Box::pin(self.write_upstream()).await;
        };
        let mut body = Vec::new();
        let mut block = Vec::with_capacity(BLOCK_BYTES + 4096);
        let mut in_block = 0usize;
        let header = Box::pin(self.kind.header()).await?;
        let sync = header.sync;
        body.extend_from_slice(&header.bytes);
        for entry in &self.entries {
            if encode_entry(&mut block, entry, &partition_type).is_none() {
                // A value this encoder does not expect: upstream decides (and errs as it does).
                return Box::pin(self.write_upstream()).await;
            }
            in_block += 1;
            if block.len() >= BLOCK_BYTES {
                flush_block(&mut body, &mut block, &mut in_block, &sync);
            }
        }
        flush_block(&mut body, &mut block, &mut in_block, &sync);
        let length = body.len() as i64;
        self.output.write(body.into()).await?;
        Ok(self.manifest_file(length, partitions))
    }

    fn manifest_file(&self, length: i64, partitions: Vec<FieldSummary>) -> ManifestFile {
        let (mut added, mut existing, mut deleted) = ((0u32, 0u64), (0u32, 0u64), (0u32, 0u64));
        let mut min_seq: Option<i64> = None;
        for e in &self.entries {
            let counter = match e.status {
                ManifestStatus::Added => &mut added,
                ManifestStatus::Existing => &mut existing,
                ManifestStatus::Deleted => &mut deleted,
            };
            counter.0 += 1;
            counter.1 += e.data_file.record_count();
            if e.is_alive()
                && let Some(seq) = e.sequence_number
            {
                min_seq = Some(min_seq.map_or(seq, |m| min(m, seq)));
            }
        }
        ManifestFile {
            manifest_path: self.output.location().to_string(),
            manifest_length: length,
            partition_spec_id: self.kind.spec.spec_id(),
            content: self.kind.content,
            sequence_number: UNASSIGNED_SEQUENCE_NUMBER,
            min_sequence_number: min_seq.unwrap_or(UNASSIGNED_SEQUENCE_NUMBER),
            added_snapshot_id: self.kind.snapshot_id.unwrap_or(-1),
            added_files_count: Some(added.0),
            existing_files_count: Some(existing.0),
            deleted_files_count: Some(deleted.0),
            added_rows_count: Some(added.1),
            existing_rows_count: Some(existing.1),
            deleted_rows_count: Some(deleted.1),
            partitions: Some(partitions),
            key_metadata: None,
            first_row_id: None,
        }
    }

    /// The whole manifest through upstream's writer.
    async fn write_upstream(self) -> IceResult<ManifestFile> {
        let Self {
            output,
            kind,
            entries,
        } = self;
        let mut writer = kind.upstream(output);
        for e in entries {
            let seq = e.sequence_number;
            match e.status {
                ManifestStatus::Added => writer.add_file(e.data_file, seq.unwrap_or(-1))?,
                ManifestStatus::Existing => writer.add_existing_file(
                    e.data_file,
                    e.snapshot_id.unwrap_or(-1),
                    seq.unwrap_or(-1),
                    e.file_sequence_number,
                )?,
                ManifestStatus::Deleted => writer.add_delete_file(
                    e.data_file,
                    seq.unwrap_or(-1),
                    e.file_sequence_number,
                )?,
            }
        }
        writer.write_manifest_file().await
    }
}

/// An Avro container header and the sync marker it ends with.
struct Header {
    bytes: Vec<u8>,
    sync: [u8; 16],
}

/// Whether every partition field's Avro form is one this encoder writes.
pub(super) fn encodable(partition_type: &StructType) -> bool {
    partition_type.fields().iter().all(|f| {
        matches!(
            *f.field_type,
            Type::Primitive(
                PrimitiveType::Boolean
                    | PrimitiveType::Int
                    | PrimitiveType::Long
                    | PrimitiveType::Float
                    | PrimitiveType::Double
                    | PrimitiveType::Date
                    | PrimitiveType::Time
                    | PrimitiveType::Timestamp
                    | PrimitiveType::Timestamptz
                    | PrimitiveType::TimestampNs
                    | PrimitiveType::TimestamptzNs
                    | PrimitiveType::String
                    | PrimitiveType::Binary
            )
        )
    })
}

fn flush_block(body: &mut Vec<u8>, block: &mut Vec<u8>, count: &mut usize, sync: &[u8; 16]) {
    if *count == 0 {
        return;
    }
    put_long(body, *count as i64);
    put_long(body, block.len() as i64);
    body.extend_from_slice(block);
    body.extend_from_slice(sync);
    block.clear();
    *count = 0;
}

fn put_long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn put_int(out: &mut Vec<u8>, v: i32) {
    put_long(out, i64::from(v));
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_long(out, b.len() as i64);
    out.extend_from_slice(b);
}

/// A `["null", long]` union.
fn put_opt_long(out: &mut Vec<u8>, v: Option<i64>) {
    match v {
        None => out.push(0),
        Some(v) => {
            out.push(2);
            put_long(out, v);
        }
    }
}

fn put_opt_int(out: &mut Vec<u8>, v: Option<i32>) {
    put_opt_long(out, v.map(i64::from));
}

/// A `["null", array<{key: int, value: …}>]` union: an Iceberg map keyed by field id (always
/// the array, as upstream writes it). `None` for a value `put` cannot write.
fn put_map<V>(
    out: &mut Vec<u8>,
    map: &std::collections::HashMap<i32, V>,
    put: impl Fn(&mut Vec<u8>, &V) -> Option<()>,
) -> Option<()> {
    out.push(2);
    if !map.is_empty() {
        put_long(out, map.len() as i64);
        for (k, v) in map {
            put_int(out, *k);
            put(out, v)?;
        }
    }
    out.push(0);
    Some(())
}

/// A count of a metrics map.
fn put_count(out: &mut Vec<u8>, v: u64) -> Option<()> {
    put_long(out, i64::try_from(v).ok()?);
    Some(())
}

/// A bound of a metrics map, in its single-value serialization.
fn put_bound(out: &mut Vec<u8>, v: &Datum) -> Option<()> {
    put_bytes(out, &v.to_bytes().ok()?);
    Some(())
}

fn put_opt_array<T: Copy>(out: &mut Vec<u8>, items: Option<&[T]>, put: impl Fn(&mut Vec<u8>, T)) {
    match items {
        None => out.push(0),
        Some(items) => {
            out.push(2);
            if !items.is_empty() {
                put_long(out, items.len() as i64);
                for &i in items {
                    put(out, i);
                }
            }
            out.push(0);
        }
    }
}

/// One `manifest_entry` record of the v2/v3 schema (upstream writes both with the same schema).
/// `None` for a value the schema cannot hold as this encoder writes it.
fn encode_entry(out: &mut Vec<u8>, e: &ManifestEntry, partition_type: &StructType) -> Option<()> {
    let f = &e.data_file;
    put_int(out, e.status as i32);
    put_opt_long(out, e.snapshot_id);
    put_opt_long(out, e.sequence_number);
    put_opt_long(out, e.file_sequence_number);
    // data_file
    put_int(out, f.content_type() as i32);
    put_bytes(out, f.file_path().as_bytes());
    put_bytes(
        out,
        f.file_format().to_string().to_ascii_uppercase().as_bytes(),
    );
    let fields = partition_type.fields();
    if f.partition().fields().len() != fields.len() {
        return None;
    }
    for (value, field) in f.partition().iter().zip(fields) {
        let Type::Primitive(ty) = field.field_type.as_ref() else {
            return None;
        };
        match (value, field.required) {
            (None, true) => return None,
            (None, false) => out.push(0),
            (Some(v), required) => {
                if !required {
                    out.push(2);
                }
                put_partition_value(out, ty, v)?;
            }
        }
    }
    put_long(out, i64::try_from(f.record_count()).ok()?);
    put_long(out, i64::try_from(f.file_size_in_bytes()).ok()?);
    put_map(out, f.column_sizes(), |o, v| put_count(o, *v))?;
    put_map(out, f.value_counts(), |o, v| put_count(o, *v))?;
    put_map(out, f.null_value_counts(), |o, v| put_count(o, *v))?;
    put_map(out, f.nan_value_counts(), |o, v| put_count(o, *v))?;
    put_map(out, f.lower_bounds(), put_bound)?;
    put_map(out, f.upper_bounds(), put_bound)?;
    match f.key_metadata() {
        None => out.push(0),
        Some(k) => {
            out.push(2);
            put_bytes(out, k);
        }
    }
    put_opt_array(out, f.split_offsets(), put_long);
    put_opt_array(out, f.equality_ids().as_deref(), put_int);
    put_opt_int(out, f.sort_order_id());
    put_opt_long(out, f.first_row_id());
    match f.referenced_data_file() {
        None => out.push(0),
        Some(path) => {
            out.push(2);
            put_bytes(out, path.as_bytes());
        }
    }
    put_opt_long(out, f.content_offset());
    put_opt_long(out, f.content_size_in_bytes());
    Some(())
}

fn put_partition_value(out: &mut Vec<u8>, ty: &PrimitiveType, v: &Literal) -> Option<()> {
    let Literal::Primitive(p) = v else {
        return None;
    };
    match (ty, p) {
        (PrimitiveType::Boolean, PrimitiveLiteral::Boolean(b)) => out.push(u8::from(*b)),
        (PrimitiveType::Int | PrimitiveType::Date, PrimitiveLiteral::Int(i)) => put_int(out, *i),
        (
            PrimitiveType::Long
            | PrimitiveType::Time
            | PrimitiveType::Timestamp
            | PrimitiveType::Timestamptz
            | PrimitiveType::TimestampNs
            | PrimitiveType::TimestamptzNs,
            PrimitiveLiteral::Long(l),
        ) => put_long(out, *l),
        (PrimitiveType::Float, PrimitiveLiteral::Float(x)) => {
            out.extend_from_slice(&x.0.to_le_bytes());
        }
        (PrimitiveType::Double, PrimitiveLiteral::Double(x)) => {
            out.extend_from_slice(&x.0.to_le_bytes());
        }
        (PrimitiveType::String, PrimitiveLiteral::String(s)) => put_bytes(out, s.as_bytes()),
        (PrimitiveType::Binary, PrimitiveLiteral::Binary(b)) => put_bytes(out, b),
        _ => return None,
    }
    Some(())
}

/// Per partition field: nulls, NaNs and bounds over every entry (as upstream summarizes them);
/// `None` for a partition value that is not of its field's type.
fn partition_summaries(
    entries: &[ManifestEntry],
    partition_type: &StructType,
) -> Option<Vec<FieldSummary>> {
    let mut out = Vec::with_capacity(partition_type.fields().len());
    for (i, field) in partition_type.fields().iter().enumerate() {
        let Type::Primitive(ty) = field.field_type.as_ref() else {
            return None;
        };
        let mut summary = FieldSummary {
            contains_null: false,
            contains_nan: Some(false),
            lower_bound: None,
            upper_bound: None,
        };
        let (mut lower, mut upper): (Option<Datum>, Option<Datum>) = (None, None);
        for e in entries {
            let Some(value) = e.data_file.partition().fields().get(i)?.as_ref() else {
                summary.contains_null = true;
                continue;
            };
            let Literal::Primitive(p) = value else {
                return None;
            };
            let datum = datum(ty, p)?;
            if datum.is_nan() {
                summary.contains_nan = Some(true);
                continue;
            }
            if lower.as_ref().is_none_or(|l| datum < *l) {
                lower = Some(datum.clone());
            }
            if upper.as_ref().is_none_or(|u| datum > *u) {
                upper = Some(datum);
            }
        }
        summary.lower_bound = lower.map(|d| d.to_bytes()).transpose().ok()?;
        summary.upper_bound = upper.map(|d| d.to_bytes()).transpose().ok()?;
        out.push(summary);
    }
    Some(out)
}

/// `p` as a value of partition type `ty` (one of the types [`encodable`] accepts).
fn datum(ty: &PrimitiveType, p: &PrimitiveLiteral) -> Option<Datum> {
    Some(match (ty, p) {
        (PrimitiveType::Boolean, PrimitiveLiteral::Boolean(b)) => Datum::bool(*b),
        (PrimitiveType::Int, PrimitiveLiteral::Int(i)) => Datum::int(*i),
        (PrimitiveType::Date, PrimitiveLiteral::Int(i)) => Datum::date(*i),
        (PrimitiveType::Long, PrimitiveLiteral::Long(l)) => Datum::long(*l),
        (PrimitiveType::Time, PrimitiveLiteral::Long(l)) => Datum::time_micros(*l).ok()?,
        (PrimitiveType::Timestamp, PrimitiveLiteral::Long(l)) => Datum::timestamp_micros(*l),
        (PrimitiveType::Timestamptz, PrimitiveLiteral::Long(l)) => Datum::timestamptz_micros(*l),
        (PrimitiveType::TimestampNs, PrimitiveLiteral::Long(l)) => Datum::timestamp_nanos(*l),
        (PrimitiveType::TimestamptzNs, PrimitiveLiteral::Long(l)) => Datum::timestamptz_nanos(*l),
        (PrimitiveType::Float, PrimitiveLiteral::Float(x)) => Datum::float(x.0),
        (PrimitiveType::Double, PrimitiveLiteral::Double(x)) => Datum::double(x.0),
        (PrimitiveType::String, PrimitiveLiteral::String(s)) => Datum::string(s),
        (PrimitiveType::Binary, PrimitiveLiteral::Binary(b)) => Datum::binary(b.iter().copied()),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use iceberg::spec::{
        DataFileBuilder, DataFileFormat, Manifest, NestedField, PartitionSpec, Schema, Struct,
        Transform,
    };
    use proptest::prelude::*;

    use super::*;

    const ALL_TYPES: [PrimitiveType; 13] = [
        PrimitiveType::Boolean,
        PrimitiveType::Int,
        PrimitiveType::Long,
        PrimitiveType::Float,
        PrimitiveType::Double,
        PrimitiveType::Date,
        PrimitiveType::Time,
        PrimitiveType::Timestamp,
        PrimitiveType::Timestamptz,
        PrimitiveType::TimestampNs,
        PrimitiveType::TimestamptzNs,
        PrimitiveType::String,
        PrimitiveType::Binary,
    ];

    /// A table with a column of each type and a spec partitioning by each of `identity`.
    fn table(types: &[PrimitiveType]) -> (SchemaRef, PartitionSpec) {
        let mut fields: Vec<_> = types
            .iter()
            .enumerate()
            .map(|(i, t)| {
                Arc::new(NestedField::optional(
                    i as i32 + 1,
                    format!("c{i}"),
                    Type::Primitive(t.clone()),
                ))
            })
            .collect();
        fields.push(Arc::new(NestedField::required(
            100,
            "payload",
            Type::Primitive(PrimitiveType::String),
        )));
        let schema = Arc::new(
            Schema::builder()
                .with_fields(fields)
                .build()
                .expect("schema"),
        );
        let mut spec = PartitionSpec::builder(Arc::clone(&schema)).with_spec_id(3);
        for i in 0..types.len() {
            spec = spec
                .add_partition_field(format!("c{i}"), format!("p{i}"), Transform::Identity)
                .expect("partition field");
        }
        (schema, spec.build().expect("spec"))
    }

    fn value(t: &PrimitiveType, n: i64) -> Literal {
        Literal::Primitive(match t {
            PrimitiveType::Boolean => PrimitiveLiteral::Boolean(n % 2 == 0),
            PrimitiveType::Int | PrimitiveType::Date => PrimitiveLiteral::Int(n as i32 - 3),
            PrimitiveType::Float => PrimitiveLiteral::Float(if n == 4 {
                f32::NAN.into()
            } else {
                (n as f32 * -1.5).into()
            }),
            PrimitiveType::Double => PrimitiveLiteral::Double((n as f64 / 3.0).into()),
            PrimitiveType::String => PrimitiveLiteral::String(format!("v-{n}-é")),
            PrimitiveType::Binary => PrimitiveLiteral::Binary(vec![n as u8, 0, 255]),
            PrimitiveType::Decimal { .. } => PrimitiveLiteral::Int128(i128::from(n) * 100 + 1),
            _ => PrimitiveLiteral::Long(n * 1_000_003 - 7),
        })
    }

    /// A bound of column `i` (of type `types[i]`).
    fn bound(types: &[PrimitiveType], i: i32, n: i64) -> Datum {
        let t = &types[i as usize];
        let Literal::Primitive(p) = value(t, n + 1) else {
            unreachable!()
        };
        datum(t, &p).expect("bound")
    }

    /// Files with every field set in some and unset in others; `maps` entries per metrics map.
    fn files(types: &[PrimitiveType], content: DataContentType, maps: usize) -> Vec<DataFile> {
        (0..7i64)
            .map(|n| {
                let partition: Struct = types
                    .iter()
                    .enumerate()
                    .map(|(i, _)| !(n as usize + i).is_multiple_of(5))
                    .zip(types)
                    .map(|(present, t)| present.then(|| value(t, n)))
                    .collect();
                let ids = 0..maps as i32;
                let bounded = 0..maps.min(types.len()) as i32;
                let mut b = DataFileBuilder::default();
                b.content(content)
                    .file_path(format!("s3://b/t/data/{n}-ünï.parquet"))
                    .file_format(if n == 6 {
                        DataFileFormat::Puffin
                    } else {
                        DataFileFormat::Parquet
                    })
                    .partition(partition)
                    .partition_spec_id(3)
                    .record_count(1000 * n as u64 + 1)
                    .file_size_in_bytes(1 << (10 + n))
                    .column_sizes(
                        ids.clone()
                            .map(|i| (i + 1, 7 * i as u64 + n as u64))
                            .collect(),
                    )
                    .value_counts(ids.clone().map(|i| (i + 1, 1000 + i as u64)).collect())
                    .null_value_counts(ids.clone().map(|i| (i + 1, i as u64)).collect())
                    .nan_value_counts(if n % 2 == 0 {
                        HashMap::new()
                    } else {
                        ids.clone().map(|i| (i + 1, 0)).collect()
                    })
                    .lower_bounds(
                        bounded
                            .clone()
                            .map(|i| (i + 1, bound(types, i, n)))
                            .collect(),
                    )
                    .upper_bounds(
                        bounded
                            .clone()
                            .map(|i| (i + 1, bound(types, i, n + 1)))
                            .collect(),
                    )
                    .key_metadata((n == 3).then(|| vec![1, 2, 3]))
                    .split_offsets((n % 3 != 0).then(|| vec![4, 4 + n * 100]))
                    .equality_ids(
                        (content == DataContentType::EqualityDeletes).then(|| vec![1, 100]),
                    )
                    .first_row_id((n == 2).then_some(12_345))
                    .referenced_data_file((n == 5).then(|| "s3://b/t/data/x.parquet".to_string()))
                    .content_offset((n == 5).then_some(4))
                    .content_size_in_bytes((n == 5).then_some(40));
                if n % 2 == 1 {
                    b.sort_order_id(n as i32);
                }
                b.build().expect("data file")
            })
            .collect()
    }

    /// A manifest to write to memory, and its location.
    fn memory_manifest(
        schema: &SchemaRef,
        spec: &PartitionSpec,
        version: FormatVersion,
        content: ManifestContentType,
    ) -> (String, ManifestOut) {
        let location = format!("memory://manifest-out-test/{}.avro", uuid::Uuid::new_v4());
        let output = HEADER_IO.new_output(&location).expect("output");
        let m = ManifestOut::new(
            output,
            Some(77),
            Arc::clone(schema),
            spec.clone(),
            version,
            content,
        );
        (location, m)
    }

    /// The bytes written to `location`, which is then removed.
    async fn take(location: &str) -> Vec<u8> {
        let bytes = HEADER_IO
            .new_input(location)
            .expect("in")
            .read()
            .await
            .expect("read");
        HEADER_IO.delete(location).await.expect("delete");
        bytes.to_vec()
    }

    /// The same entries through `ManifestOut` and through upstream's writer, each read back.
    async fn both(
        types: &[PrimitiveType],
        version: FormatVersion,
        content: ManifestContentType,
        maps: usize,
    ) -> [(ManifestFile, Vec<u8>); 2] {
        let (schema, spec) = table(types);
        let file_content = match content {
            ManifestContentType::Data => DataContentType::Data,
            ManifestContentType::Deletes => DataContentType::EqualityDeletes,
        };
        let files = files(types, file_content, maps);
        let mut out = Vec::new();
        for fast in [true, false] {
            let (location, mut m) = memory_manifest(&schema, &spec, version, content);
            for (n, f) in files.iter().enumerate() {
                match n % 3 {
                    0 => m.add_file(f.clone(), if n == 3 { -1 } else { 9 }),
                    1 => m.add_existing_file(f.clone(), 55, 4, Some(5)),
                    _ => m.add_delete_file(f.clone(), 6, Some(6)),
                }
                .expect("add");
            }
            let mf = if fast {
                m.write_manifest_file().await
            } else {
                m.write_upstream().await
            }
            .expect("write");
            out.push((mf, take(&location).await));
        }
        let slow = out.pop().expect("upstream");
        let fast = out.pop().expect("fast");
        [fast, slow]
    }

    fn same_listing(fast: &ManifestFile, slow: &ManifestFile) {
        let strip = |m: &ManifestFile| ManifestFile {
            manifest_path: String::new(),
            manifest_length: 0,
            ..m.clone()
        };
        assert_eq!(strip(fast), strip(slow));
    }

    #[tokio::test]
    async fn entries_read_back_as_upstream_writes_them_for_every_partition_type() {
        for version in [FormatVersion::V2, FormatVersion::V3] {
            for content in [ManifestContentType::Data, ManifestContentType::Deletes] {
                // Upstream's reader cannot read nanosecond partition values back (it takes their
                // Avro longs for a type mismatch): they are left out here, compared as bytes
                // below.
                let types: Vec<_> = ALL_TYPES
                    .iter()
                    .filter(|t| {
                        !matches!(t, PrimitiveType::TimestampNs | PrimitiveType::TimestamptzNs)
                    })
                    .cloned()
                    .collect();
                let [(fast_mf, fast), (slow_mf, slow)] = both(&types, version, content, 5).await;
                same_listing(&fast_mf, &slow_mf);
                assert_eq!(fast_mf.manifest_length as usize, fast.len());
                let fast = Manifest::parse_avro(&fast).expect("fast manifest parses");
                let slow = Manifest::parse_avro(&slow).expect("upstream manifest parses");
                assert_eq!(fast.metadata(), slow.metadata());
                assert_eq!(fast.entries().len(), 7);
                assert_eq!(fast.entries(), slow.entries(), "{version:?} {content:?}");
                // The summaries saw nulls and NaNs.
                let partitions = fast_mf.partitions.as_ref().expect("summaries");
                assert!(partitions.iter().all(|p| p.contains_null));
                assert_eq!(partitions[3].contains_nan, Some(true));
                assert_eq!(partitions[4].contains_nan, Some(false));
                assert!(partitions[0].lower_bound.is_some());
            }
        }
    }

    #[tokio::test]
    async fn bytes_equal_upstream_s_but_for_the_sync_marker() {
        // With at most one entry per map, upstream's map order is fixed: the files must be the
        // same bytes (one block each), the random sync marker aside.
        for maps in [0, 1] {
            let [(_, fast), (_, slow)] = both(
                &ALL_TYPES,
                FormatVersion::V2,
                ManifestContentType::Data,
                maps,
            )
            .await;
            // Headers differ in the order of their metadata keys (a hash map upstream), so the
            // blocks after them are compared, each header's sync marker blanked out.
            let blocks = |bytes: &[u8]| {
                let sync = &bytes[bytes.len() - 16..];
                let header_end = bytes
                    .windows(16)
                    .position(|w| w == sync)
                    .expect("sync marker")
                    + 16;
                let mut out = bytes[header_end..].to_vec();
                let end = out.len();
                out[end - 16..].fill(0);
                out
            };
            let (fast, slow) = (blocks(&fast), blocks(&slow));
            assert!(fast.len() > 500);
            let first_difference = fast.iter().zip(&slow).position(|(a, b)| a != b);
            assert_eq!(
                (first_difference, fast.len()),
                (None, slow.len()),
                "maps {maps}: the blocks differ"
            );
        }
    }

    #[tokio::test]
    async fn many_entries_span_blocks() {
        let (schema, spec) = table(&[PrimitiveType::String]);
        let (location, mut m) =
            memory_manifest(&schema, &spec, FormatVersion::V2, ManifestContentType::Data);
        let template = files(&[PrimitiveType::String], DataContentType::Data, 8);
        for n in 0..2000 {
            let f = &template[n % template.len()];
            m.add_existing_file(f.clone(), n as i64, 3, Some(4))
                .expect("add");
        }
        let mf = m.write_manifest_file().await.expect("write");
        let bytes = take(&location).await;
        assert!(bytes.len() > 3 * BLOCK_BYTES);
        assert_eq!(mf.existing_files_count, Some(2000));
        let read = Manifest::parse_avro(&bytes).expect("parses");
        assert_eq!(read.entries().len(), 2000);
        for (n, e) in read.entries().iter().enumerate() {
            assert_eq!(e.snapshot_id, Some(n as i64));
            assert_eq!(e.sequence_number, Some(3));
            assert_eq!(e.data_file, template[n % template.len()]);
        }
    }

    #[tokio::test]
    async fn v1_and_decimal_partitions_go_through_upstream() {
        let decimal = PrimitiveType::Decimal {
            precision: 9,
            scale: 2,
        };
        let (schema, spec) = table(std::slice::from_ref(&decimal));
        assert!(!encodable(&spec.partition_type(&schema).expect("type")));
        let (schema, spec) = table(&[PrimitiveType::Int]);
        for version in [FormatVersion::V1, FormatVersion::V2] {
            let (location, mut m) =
                memory_manifest(&schema, &spec, version, ManifestContentType::Data);
            for f in files(&[PrimitiveType::Int], DataContentType::Data, 2) {
                m.add_existing_file(f, 1, 0, Some(0)).expect("add");
            }
            m.write_manifest_file().await.expect("write");
            let read = Manifest::parse_avro(&take(&location).await).expect("parses");
            assert_eq!(read.entries().len(), 7);
            assert_eq!(read.metadata().format_version(), &version);
        }
    }

    #[tokio::test]
    async fn a_delete_file_in_a_data_manifest_is_refused() {
        let (schema, spec) = table(&[PrimitiveType::Int]);
        let (_, mut m) =
            memory_manifest(&schema, &spec, FormatVersion::V2, ManifestContentType::Data);
        let f = files(&[PrimitiveType::Int], DataContentType::PositionDeletes, 0).remove(0);
        assert!(m.add_file(f.clone(), 1).is_err());
        assert!(m.add_existing_file(f, 1, 1, None).is_err());
    }
    /// What the fast manifest reader makes of `bytes`, against upstream's reader.
    fn read_both(bytes: &[u8]) -> (Option<Manifest>, Result<Manifest, String>) {
        // Upstream's reader may panic on a corrupt header (see `format::guarded`).
        crate::format::limit_avro_allocations();
        let upstream = std::panic::catch_unwind(|| Manifest::parse_avro(bytes))
            .map_err(|_| "upstream's reader panicked".to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
        (crate::format::manifest::parse_fast(bytes), upstream)
    }

    #[tokio::test]
    async fn cryo_s_reader_reads_what_upstream_reads_from_these_manifests() {
        let types: Vec<_> = ALL_TYPES
            .iter()
            .filter(|t| !matches!(t, PrimitiveType::TimestampNs | PrimitiveType::TimestamptzNs))
            .cloned()
            .collect();
        for version in [FormatVersion::V2, FormatVersion::V3] {
            for content in [ManifestContentType::Data, ManifestContentType::Deletes] {
                for maps in [0, 5] {
                    // Written by Cryo and by upstream: the same schema, so both decode here.
                    for (_, bytes) in both(&types, version, content, maps).await {
                        let (fast, slow) = read_both(&bytes);
                        let (fast, slow) =
                            (fast.expect("decoded by Cryo"), slow.expect("upstream"));
                        assert_eq!(fast.metadata(), slow.metadata());
                        assert_eq!(fast.entries().len(), 7);
                        assert_eq!(fast.entries(), slow.entries(), "{version:?} {content:?}");
                    }
                }
            }
        }
        // Unpartitioned.
        let [(_, bytes), _] = both(&[], FormatVersion::V2, ManifestContentType::Data, 3).await;
        let (fast, slow) = read_both(&bytes);
        assert_eq!(
            fast.expect("decoded").entries(),
            slow.expect("upstream").entries()
        );
    }

    #[tokio::test]
    async fn cryo_s_reader_leaves_other_manifests_to_upstream() {
        // v1, and partition types it does not read.
        let (schema, spec) = table(&[PrimitiveType::Int]);
        let (location, mut m) =
            memory_manifest(&schema, &spec, FormatVersion::V1, ManifestContentType::Data);
        for f in files(&[PrimitiveType::Int], DataContentType::Data, 2) {
            m.add_existing_file(f, 1, 0, Some(0)).expect("add");
        }
        m.write_manifest_file().await.expect("write");
        let (fast, slow) = read_both(&take(&location).await);
        assert!(fast.is_none() && slow.is_ok());
        let decimal = PrimitiveType::Decimal {
            precision: 9,
            scale: 2,
        };
        for t in [PrimitiveType::TimestampNs, decimal] {
            let [(_, bytes), _] = both(
                std::slice::from_ref(&t),
                FormatVersion::V2,
                ManifestContentType::Data,
                0,
            )
            .await;
            assert!(read_both(&bytes).0.is_none(), "{t}");
        }
        // Another writer's schema for the same partition type (a field renamed in the header).
        let [(_, bytes), _] = both(
            &[PrimitiveType::Long],
            FormatVersion::V2,
            ManifestContentType::Data,
            1,
        )
        .await;
        let renamed =
            String::from_utf8_lossy(&bytes).replacen("\"sort_order_id\"", "\"sort_order_iX\"", 1);
        assert_ne!(renamed.as_bytes(), &bytes[..]);
        assert!(read_both(renamed.as_bytes()).0.is_none());
    }

    #[tokio::test]
    async fn cryo_s_reader_never_accepts_what_upstream_refuses() {
        let [(_, bytes), _] = both(
            &[PrimitiveType::String, PrimitiveType::Date],
            FormatVersion::V2,
            ManifestContentType::Data,
            2,
        )
        .await;
        let mut decoded = 0;
        for len in 0..bytes.len() {
            let (fast, slow) = read_both(&bytes[..len]);
            assert!(fast.is_none() || slow.is_ok(), "a prefix of {len} bytes");
        }
        // Flips in the entries: whatever Cryo decodes, upstream decodes alike. (In the header,
        // upstream's schema parser is stricter about JSON that does not change how the entries
        // are laid out; there Cryo must only never disagree with an upstream that reads it.)
        let header_end = {
            let sync = &bytes[bytes.len() - 16..];
            bytes.windows(16).position(|w| w == sync).expect("sync") + 16
        };
        for at in (0..bytes.len()).step_by(3) {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x5a;
            let (fast, slow) = read_both(&flipped);
            match (fast, slow) {
                (Some(fast), Ok(slow)) => {
                    decoded += 1;
                    assert_eq!(fast.entries(), slow.entries(), "byte {at}");
                }
                (Some(_), Err(e)) => assert!(at < header_end, "byte {at}: upstream refused: {e}"),
                (None, _) => {}
            }
        }
        assert!(decoded > 0);
    }

    /// Every `*.avro` under `dir` but manifest lists.
    fn manifests_under(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.filter_map(std::result::Result::ok) {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                manifests_under(&path, out);
            } else if path
                .extension()
                .is_some_and(|x| x.eq_ignore_ascii_case("avro"))
                && !name.starts_with("snap-")
            {
                out.push(path);
            }
        }
    }

    /// The manifests PyIceberg and Spark wrote for the fixtures (`tests/fixtures`, v1/v2/v3,
    /// merge-on-read position and equality deletes, deletion vectors): Cryo's reader decodes
    /// every v2/v3 one itself, into the entries upstream's reader gives.
    #[tokio::test]
    #[ignore = "needs the peers: scripts/test.sh runs it (cargo test -- --include-ignored)"]
    async fn cryo_s_reader_reads_the_peers_manifests_as_upstream_does() {
        // Where the integration tests look for them too (`tests/it/common.rs`).
        let dir = std::env::var("CRYO_FIXTURES").map_or_else(
            |_| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/cryo-fixtures"),
            std::path::PathBuf::from,
        );
        assert!(
            dir.join("manifest.json").is_file(),
            "this test needs the peers' fixtures, missing at {}. Run scripts/test.sh (it writes \
             them and runs these tests), or write them with tests/fixtures/make_fixtures.py \
             (scripts/README.md) into target/cryo-fixtures or $CRYO_FIXTURES",
            dir.display()
        );
        let mut files = Vec::new();
        manifests_under(&dir, &mut files);
        files.sort();
        let mut decoded = std::collections::BTreeMap::<String, usize>::new();
        for path in &files {
            let bytes = std::fs::read(path).expect("read manifest");
            let (fast, slow) = read_both(&bytes);
            let slow = slow.unwrap_or_else(|e| panic!("upstream: {}: {e}", path.display()));
            let v1 = *slow.metadata().format_version() == FormatVersion::V1;
            match fast {
                Some(fast) => {
                    assert!(!v1, "{}", path.display());
                    assert_eq!(fast.metadata(), slow.metadata(), "{}", path.display());
                    assert_eq!(fast.entries(), slow.entries(), "{}", path.display());
                    let writer = path
                        .strip_prefix(&dir)
                        .ok()
                        .and_then(|p| p.parent()?.parent())
                        .map(|p| p.display().to_string())
                        .unwrap_or_default();
                    *decoded.entry(writer).or_default() += 1;
                }
                None => assert!(v1, "left to upstream: {}", path.display()),
            }
        }
        eprintln!("decoded by Cryo, per table: {decoded:?}");
        for writer in ["pyiceberg", "spark"] {
            assert!(
                decoded.keys().any(|t| t.contains(writer)),
                "no manifest of {writer} decoded: {decoded:?}"
            );
        }
    }

    /// One generated entry: (status 0 added / 1 existing / 2 deleted, content 0 data / 1
    /// position / 2 equality, path, records, bytes, an explicit first row id).
    type GenEntry = (u8, u8, String, u64, u64, Option<u64>);

    fn gen_entry() -> impl proptest::strategy::Strategy<Value = GenEntry> {
        (
            0u8..3,
            0u8..3,
            "[a-zA-Z0-9/_.=é-]{1,40}",
            0u64..1 << 40,
            1u64..1 << 40,
            proptest::option::of(0u64..1 << 40),
        )
    }

    /// Generated manifests of every format version and content, written by Cryo's encoder and
    /// by upstream's writer: every fast reader reads them as upstream's reader does
    /// ([`crate::format::check_fast_readers`], which panics otherwise), and the fast decoder
    /// decodes every v2/v3 one.
    #[test]
    fn generated_manifests_read_alike_by_the_fast_paths_and_upstream() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let config = ProptestConfig {
            cases: 48,
            ..ProptestConfig::default()
        };
        proptest!(config, |(
            version in prop_oneof![Just(FormatVersion::V1), Just(FormatVersion::V2), Just(FormatVersion::V3)],
            deletes in any::<bool>(),
            types in proptest::sample::subsequence(ALL_TYPES.to_vec(), 0..3),
            entries in proptest::collection::vec(gen_entry(), 0..40),
        )| {
            let (schema, spec) = table(&types);
            let content = if deletes && version != FormatVersion::V1 {
                ManifestContentType::Deletes
            } else {
                ManifestContentType::Data
            };
            for fast in [true, false] {
                let (location, mut m) = memory_manifest(&schema, &spec, version, content);
                for (n, (status, kind, path, records, size, row_id)) in entries.iter().enumerate() {
                    let kind = match (content, kind) {
                        (ManifestContentType::Data, _) => DataContentType::Data,
                        (_, 1) => DataContentType::PositionDeletes,
                        _ => DataContentType::EqualityDeletes,
                    };
                    let mut b = DataFileBuilder::default();
                    b.content(kind)
                        .file_path(format!("s3://b/t/data/{n}/{path}"))
                        .file_format(DataFileFormat::Parquet)
                        .partition(types.iter().map(|t| Some(value(t, n as i64))).collect::<Struct>())
                        .partition_spec_id(3)
                        .record_count(*records)
                        .file_size_in_bytes(*size)
                        .equality_ids((kind == DataContentType::EqualityDeletes).then(|| vec![1]))
                        .first_row_id(
                            (version == FormatVersion::V3 && kind == DataContentType::Data)
                                .then_some(row_id.map(|r| r as i64))
                                .flatten(),
                        );
                    let f = b.build().expect("data file");
                    match status {
                        0 => m.add_file(f, 9),
                        1 => m.add_existing_file(f, 55, 4, Some(5)),
                        _ => m.add_delete_file(f, 6, Some(6)),
                    }
                    .expect("add");
                }
                let written = runtime.block_on(async {
                    let r = if fast { m.write_manifest_file().await } else { m.write_upstream().await };
                    r.map(|_| ())?;
                    Ok::<_, IcebergError>(take(&location).await)
                });
                let bytes = written.expect("write");
                crate::format::check_fast_readers(&bytes);
                let decoded = crate::format::manifest::parse_fast(&bytes).is_some();
                let nanos = types
                    .iter()
                    .any(|t| matches!(t, PrimitiveType::TimestampNs | PrimitiveType::TimestamptzNs));
                prop_assert_eq!(
                    decoded,
                    version != FormatVersion::V1 && !nanos,
                    "the fast decoder reads v2/v3 manifests of plain partition types"
                );
            }
        });
    }

    /// The spec's inheritance, written once: snapshot ids always, sequence numbers for `ADDED`
    /// entries and for any entry of a manifest of sequence number 0, explicit values kept.
    #[test]
    fn entries_inherit_what_the_spec_says() {
        use crate::format::manifest::Inheritance;
        let file = files(&[], DataContentType::Data, 0).remove(0);
        let entry = |status, seq: Option<i64>, snap: Option<i64>| ManifestEntry {
            status,
            snapshot_id: snap,
            sequence_number: seq,
            file_sequence_number: seq,
            data_file: file.clone(),
        };
        let list = |seq: i64| ManifestFile {
            manifest_path: "m.avro".into(),
            manifest_length: 1,
            partition_spec_id: 0,
            content: ManifestContentType::Data,
            sequence_number: seq,
            min_sequence_number: seq,
            added_snapshot_id: 42,
            added_files_count: None,
            existing_files_count: None,
            deleted_files_count: None,
            added_rows_count: None,
            existing_rows_count: None,
            deleted_rows_count: None,
            partitions: None,
            key_metadata: None,
            first_row_id: None,
        };
        let seqs = |e: &ManifestEntry| (e.snapshot_id, e.sequence_number, e.file_sequence_number);
        let on = |seq, e| seqs(&Inheritance::of(&list(seq)).entry(e));
        assert_eq!(
            on(7, entry(ManifestStatus::Added, None, None)),
            (Some(42), Some(7), Some(7))
        );
        assert_eq!(
            on(7, entry(ManifestStatus::Existing, None, None)),
            (Some(42), None, None)
        );
        assert_eq!(
            on(7, entry(ManifestStatus::Deleted, None, Some(3))),
            (Some(3), None, None)
        );
        assert_eq!(
            on(0, entry(ManifestStatus::Existing, None, None)),
            (Some(42), Some(0), Some(0))
        );
        assert_eq!(
            on(7, entry(ManifestStatus::Added, Some(5), Some(3))),
            (Some(3), Some(5), Some(5))
        );
    }
}
