//! `metadata.json`: read with typed errors (missing, corrupt, compressed, unknown versions,
//! timestamps that are no instants, format-v3 features Cryo does not support).

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;

use iceberg::spec::{
    MAIN_BRANCH, SnapshotRef, SnapshotReference, SnapshotRetention, TableMetadata, TableMetadataRef,
};

use crate::error::{Error, Result};
use crate::io::ObjectStorage;

/// Format versions Cryo understands.
pub const SUPPORTED_FORMAT_VERSIONS: [u64; 3] = [1, 2, 3];

/// The table's snapshots in commit order (sequence number, then timestamp, then id).
/// `TableMetadata::snapshots` iterates a hash map: its order differs from one load to the next,
/// and Cryo's requests, warnings and receipts follow the order it reads snapshots in.
pub(crate) fn snapshots(md: &TableMetadata) -> Vec<&SnapshotRef> {
    let mut out: Vec<&SnapshotRef> = md.snapshots().collect();
    out.sort_by_key(|s| (s.sequence_number(), s.timestamp_ms(), s.snapshot_id()));
    out
}

/// Read and parse a table's `metadata.json` (plain or gzip-compressed).
pub async fn read_table_metadata(
    storage: &ObjectStorage,
    table: &str,
    location: &str,
) -> Result<TableMetadataRef> {
    let bytes = super::read_file(storage, table, location, "metadata file").await?;
    parse_table_metadata(table, location, &bytes).map(Arc::new)
}

/// Parse `metadata.json` bytes.
pub fn parse_table_metadata(table: &str, location: &str, bytes: &[u8]) -> Result<TableMetadata> {
    let decompressed;
    let json: &[u8] = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut out)
            .map_err(|e| Error::metadata(table, location, format!("corrupt gzip: {e}")))?;
        decompressed = out;
        &decompressed
    } else {
        bytes
    };
    // The checks below read a few fields: a light read takes them, the metadata is then parsed
    // once, straight from the bytes. Whatever that way does not take (not JSON, odd shapes,
    // duplicate keys, a metadata upstream refuses) goes the long way, through a JSON value,
    // which gives the errors their messages.
    if let Ok(checked) = serde_json::from_slice::<Checked>(json) {
        check(table, location, &checked.into_value())?;
        if let Ok(md) = serde_json::from_slice::<TableMetadata>(json) {
            return Ok(md);
        }
    }
    parse_through_value(table, location, json)
}

fn parse_through_value(table: &str, location: &str, json: &[u8]) -> Result<TableMetadata> {
    let value: serde_json::Value = serde_json::from_slice(json)
        .map_err(|e| Error::metadata(table, location, format!("not valid JSON: {e}")))?;
    check(table, location, &value)?;
    serde_json::from_value(value).map_err(|e| {
        Error::metadata(
            table,
            location,
            format!("does not match the Iceberg spec: {e}"),
        )
    })
}

/// The format version, the timestamps and the format-v3 features Cryo does not support, checked
/// before the full parse: an unknown version gets its own error instead of a serde message
/// about enum variants, and upstream never sees a timestamp it would overflow on.
fn check(table: &str, location: &str, value: &serde_json::Value) -> Result<()> {
    let version = value
        .get("format-version")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| Error::metadata(table, location, "no numeric `format-version`"))?;
    if !SUPPORTED_FORMAT_VERSIONS.contains(&version) {
        return Err(Error::Unsupported {
            message: format!(
                "{table}: table format version {version} (Cryo supports 1, 2 and 3) in {location}"
            ),
        });
    }
    check_timestamps(table, location, value)?;
    if let Some(feature) = unsupported_feature(value) {
        return Err(Error::Unsupported {
            message: format!("{table}: {feature}, which Cryo does not support yet, in {location}"),
        });
    }
    Ok(())
}

/// The fields of `metadata.json` that [`check`] reads, and nothing else: snapshots and logs are
/// reduced to their timestamps (thousands of snapshots are not turned into JSON values only to
/// be dropped).
#[derive(serde::Deserialize)]
struct Checked {
    #[serde(rename = "format-version")]
    format_version: Option<serde_json::Value>,
    #[serde(rename = "last-updated-ms")]
    last_updated_ms: Option<serde_json::Value>,
    snapshots: Option<Vec<Stamped>>,
    #[serde(rename = "snapshot-log")]
    snapshot_log: Option<Vec<Stamped>>,
    #[serde(rename = "metadata-log")]
    metadata_log: Option<Vec<Stamped>>,
    schemas: Option<serde_json::Value>,
    schema: Option<serde_json::Value>,
    #[serde(rename = "partition-specs")]
    partition_specs: Option<serde_json::Value>,
    #[serde(rename = "sort-orders")]
    sort_orders: Option<serde_json::Value>,
}

#[derive(serde::Deserialize)]
struct Stamped {
    #[serde(rename = "timestamp-ms")]
    timestamp_ms: Option<serde_json::Value>,
}

impl Checked {
    /// The same fields as a JSON object, for [`check`].
    fn into_value(self) -> serde_json::Value {
        use serde_json::Value;
        let stamps = |list: Option<Vec<Stamped>>| {
            list.map(|l| {
                Value::Array(
                    l.into_iter()
                        .map(|s| {
                            let mut o = serde_json::Map::new();
                            if let Some(ts) = s.timestamp_ms {
                                o.insert("timestamp-ms".into(), ts);
                            }
                            Value::Object(o)
                        })
                        .collect(),
                )
            })
        };
        let fields = [
            ("format-version", self.format_version),
            ("last-updated-ms", self.last_updated_ms),
            ("snapshots", stamps(self.snapshots)),
            ("snapshot-log", stamps(self.snapshot_log)),
            ("metadata-log", stamps(self.metadata_log)),
            ("schemas", self.schemas),
            ("schema", self.schema),
            ("partition-specs", self.partition_specs),
            ("sort-orders", self.sort_orders),
        ];
        Value::Object(
            fields
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
                .collect(),
        )
    }
}

/// A format-v3 feature of the metadata that Cryo cannot read or keep, named: types Cryo has no
/// reader or writer for (`variant`, `geometry`, `geography`, `unknown`) and partition or sort
/// fields over several source columns. `None` when there is none.
///
/// Checked before the full parse, so the error names the feature rather than a serde variant,
/// and so that nothing is ever planned on a table whose columns Cryo would drop.
fn unsupported_feature(value: &serde_json::Value) -> Option<String> {
    use serde_json::Value;
    fn in_type(t: &Value, column: &str) -> Option<String> {
        match t {
            Value::String(s) => {
                let name = s.split('(').next().unwrap_or(s).trim();
                matches!(name, "variant" | "geometry" | "geography" | "unknown")
                    .then(|| format!("column `{column}` has the format-v3 type `{s}`"))
            }
            Value::Object(o) => {
                let nested = |key: &str, name: &str| {
                    o.get(key)
                        .and_then(|t| in_type(t, &format!("{column}.{name}")))
                };
                if let Some(fields) = o.get("fields").and_then(Value::as_array) {
                    return fields.iter().find_map(|f| {
                        let name = f.get("name").and_then(Value::as_str).unwrap_or("?");
                        f.get("type")
                            .and_then(|t| in_type(t, &format!("{column}.{name}")))
                    });
                }
                nested("element", "element")
                    .or_else(|| nested("key", "key"))
                    .or_else(|| nested("value", "value"))
            }
            _ => None,
        }
    }
    let schemas = value
        .get("schemas")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .chain(value.get("schema"));
    for schema in schemas {
        for f in schema
            .get("fields")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = f.get("name").and_then(Value::as_str).unwrap_or("?");
            if let Some(found) = f.get("type").and_then(|t| in_type(t, name)) {
                return Some(found);
            }
        }
    }
    let multi = |list: &str| {
        value
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .flat_map(|spec| {
                spec.get("fields")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
            })
            .find(|f| {
                f.get("source-ids")
                    .and_then(Value::as_array)
                    .is_some_and(|ids| ids.len() > 1)
            })
            .map(|f| {
                let name = f.get("name").and_then(Value::as_str).unwrap_or("a field");
                let transform = f.get("transform").and_then(Value::as_str).unwrap_or("?");
                format!(
                    "{name} of {list} applies {transform} to several source columns (format v3)"
                )
            })
    };
    multi("partition-specs").or_else(|| multi("sort-orders"))
}

/// The largest magnitude a timestamp in `metadata.json` may have: the end of year 9999, in ms
/// from the epoch. Upstream's parser subtracts log timestamps from one another unchecked (a
/// panic in debug builds, a wrong answer in release ones, for values near `i64::MAX`); no
/// writer means such values as instants, and refusing them also keeps every age Cryo computes
/// in range.
const MAX_TIMESTAMP_MS: i64 = 253_402_300_799_999;

/// Every `timestamp-ms` of snapshots and logs, and `last-updated-ms`, lies within
/// ±[`MAX_TIMESTAMP_MS`]. Values that are not integers are left to the full parse.
fn check_timestamps(table: &str, location: &str, value: &serde_json::Value) -> Result<()> {
    let listed = ["snapshots", "snapshot-log", "metadata-log"]
        .into_iter()
        .flat_map(|list| {
            value
                .get(list)
                .and_then(serde_json::Value::as_array)
                .into_iter()
                .flatten()
                .map(move |e| (list, e.get("timestamp-ms")))
        });
    let fields = std::iter::once(("table", value.get("last-updated-ms"))).chain(listed);
    for (what, v) in fields {
        if let Some(ms) = v.and_then(serde_json::Value::as_i64)
            && !(-MAX_TIMESTAMP_MS..=MAX_TIMESTAMP_MS).contains(&ms)
        {
            return Err(Error::metadata(
                table,
                location,
                format!("a timestamp in `{what}` is no instant of years -9999 to 9999: {ms} ms"),
            ));
        }
    }
    Ok(())
}

/// A table's refs (every branch and tag), as its `metadata.json` has them, and `main` for v1
/// metadata that gives only `current-snapshot-id`. Upstream keeps the map private; its JSON form
/// is read here without building the rest (a history of thousands of snapshots would be turned
/// into JSON values, only to be dropped).
pub(crate) fn refs(
    md: &TableMetadata,
) -> std::result::Result<BTreeMap<String, SnapshotReference>, String> {
    let json = serde::Serialize::serialize(md, refs_only::Top).map_err(|e| e.0)?;
    let mut refs: BTreeMap<String, SnapshotReference> = match json {
        Some(v) if !v.is_null() => {
            serde_json::from_value(v).map_err(|e| format!("invalid refs: {e}"))?
        }
        _ => BTreeMap::new(),
    };
    if !refs.contains_key(MAIN_BRANCH)
        && let Some(id) = md.current_snapshot_id()
    {
        refs.insert(
            MAIN_BRANCH.to_string(),
            SnapshotReference::new(id, SnapshotRetention::branch(None, None, None)),
        );
    }
    Ok(refs)
}

/// A serializer of `TableMetadata` that keeps its `refs` entry and steps over the others
/// without serializing them.
mod refs_only {
    use serde::Serialize;
    use serde::ser::{self, Impossible};

    #[derive(Debug)]
    pub(super) struct Failed(pub(super) String);

    impl std::fmt::Display for Failed {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl std::error::Error for Failed {}

    impl ser::Error for Failed {
        fn custom<T: std::fmt::Display>(msg: T) -> Self {
            Failed(msg.to_string())
        }
    }

    type Refs = Option<serde_json::Value>;

    /// The metadata itself: a map (its version's fields flattened) or a struct.
    pub(super) struct Top;

    /// The entries seen so far: whether the last key was `refs`, and what it held.
    #[derive(Default)]
    pub(super) struct Entries {
        at_refs: bool,
        refs: Refs,
    }

    fn capture<T: Serialize + ?Sized>(value: &T) -> Result<Refs, Failed> {
        serde_json::to_value(value)
            .map(Some)
            .map_err(|e| Failed(format!("refs: {e}")))
    }

    impl ser::SerializeMap for Entries {
        type Ok = Refs;
        type Error = Failed;
        fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Failed> {
            self.at_refs = serde_json::to_value(key).is_ok_and(|k| k == "refs");
            Ok(())
        }
        fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Failed> {
            if self.at_refs {
                self.refs = capture(value)?;
            }
            Ok(())
        }
        fn end(self) -> Result<Refs, Failed> {
            Ok(self.refs)
        }
    }

    impl ser::SerializeStruct for Entries {
        type Ok = Refs;
        type Error = Failed;
        fn serialize_field<T: Serialize + ?Sized>(
            &mut self,
            key: &'static str,
            value: &T,
        ) -> Result<(), Failed> {
            if key == "refs" {
                self.refs = capture(value)?;
            }
            Ok(())
        }
        fn end(self) -> Result<Refs, Failed> {
            Ok(self.refs)
        }
    }

    fn not_metadata<T>() -> Result<T, Failed> {
        Err(Failed("table metadata that is not a map".into()))
    }

    macro_rules! refuse {
        ($($name:ident($($arg:ty),*)),* $(,)?) => {
            $(fn $name(self, $(_: $arg),*) -> Result<Refs, Failed> { not_metadata() })*
        };
    }

    impl ser::Serializer for Top {
        type Ok = Refs;
        type Error = Failed;
        type SerializeSeq = Impossible<Refs, Failed>;
        type SerializeTuple = Impossible<Refs, Failed>;
        type SerializeTupleStruct = Impossible<Refs, Failed>;
        type SerializeTupleVariant = Impossible<Refs, Failed>;
        type SerializeMap = Entries;
        type SerializeStruct = Entries;
        type SerializeStructVariant = Impossible<Refs, Failed>;

        refuse!(
            serialize_bool(bool),
            serialize_i8(i8),
            serialize_i16(i16),
            serialize_i32(i32),
            serialize_i64(i64),
            serialize_u8(u8),
            serialize_u16(u16),
            serialize_u32(u32),
            serialize_u64(u64),
            serialize_f32(f32),
            serialize_f64(f64),
            serialize_char(char),
            serialize_str(&str),
            serialize_bytes(&[u8]),
            serialize_none(),
            serialize_unit(),
            serialize_unit_struct(&'static str),
            serialize_unit_variant(&'static str, u32, &'static str),
        );

        fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Refs, Failed> {
            value.serialize(self)
        }
        fn serialize_newtype_struct<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            value: &T,
        ) -> Result<Refs, Failed> {
            value.serialize(self)
        }
        fn serialize_newtype_variant<T: Serialize + ?Sized>(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            value: &T,
        ) -> Result<Refs, Failed> {
            value.serialize(self)
        }
        fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Failed> {
            not_metadata()
        }
        fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Failed> {
            not_metadata()
        }
        fn serialize_tuple_struct(
            self,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleStruct, Failed> {
            not_metadata()
        }
        fn serialize_tuple_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeTupleVariant, Failed> {
            not_metadata()
        }
        fn serialize_map(self, _: Option<usize>) -> Result<Entries, Failed> {
            Ok(Entries::default())
        }
        fn serialize_struct(self, _: &'static str, _: usize) -> Result<Entries, Failed> {
            Ok(Entries::default())
        }
        fn serialize_struct_variant(
            self,
            _: &'static str,
            _: u32,
            _: &'static str,
            _: usize,
        ) -> Result<Self::SerializeStructVariant, Failed> {
            not_metadata()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The refs read without serializing the metadata are the refs its JSON has.
    #[test]
    fn refs_are_those_of_the_json() {
        let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus/table_metadata");
        let mut read = 0;
        for entry in std::fs::read_dir(corpus).unwrap() {
            let path = entry.unwrap().path();
            let Ok(md) = parse_table_metadata("t", "m", &std::fs::read(&path).unwrap()) else {
                continue;
            };
            read += 1;
            let json = serde_json::to_value(&md).unwrap();
            let mut expected: BTreeMap<String, SnapshotReference> = json
                .get("refs")
                .filter(|r| !r.is_null())
                .map(|r| serde_json::from_value(r.clone()).unwrap())
                .unwrap_or_default();
            if let Some(id) = md.current_snapshot_id() {
                expected.entry(MAIN_BRANCH.to_string()).or_insert_with(|| {
                    SnapshotReference::new(id, SnapshotRetention::branch(None, None, None))
                });
            }
            assert_eq!(refs(&md).unwrap(), expected, "{}", path.display());
        }
        assert!(
            read >= 10,
            "the corpus has metadata of every version: {read} read"
        );
    }

    /// The light read and the parse straight from the bytes give what the parse through a JSON
    /// value gives (the metadata, or the same error), on every metadata file of the fuzz corpus.
    #[test]
    fn the_short_way_parses_as_the_long_way() {
        let corpus = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus/table_metadata");
        let (mut parsed, mut refused) = (0, 0);
        for entry in std::fs::read_dir(corpus).unwrap() {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            if bytes.starts_with(&[0x1f, 0x8b]) {
                continue; // the long way takes the JSON, not its gzip
            }
            let short = parse_table_metadata("t", "m", &bytes);
            let long = parse_through_value("t", "m", &bytes);
            match (&short, &long) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a, b, "{}", path.display());
                    parsed += 1;
                }
                (Err(a), Err(b)) => {
                    assert_eq!(a.to_string(), b.to_string(), "{}", path.display());
                    refused += 1;
                }
                _ => panic!("{}: {short:?} / {long:?}", path.display()),
            }
        }
        assert!(
            parsed >= 10 && refused >= 1,
            "{parsed} parsed, {refused} refused"
        );
    }

    #[test]
    fn typed_errors_for_bad_metadata() {
        let e = parse_table_metadata("t", "m.json", b"{not json").unwrap_err();
        assert!(matches!(e, Error::Metadata { .. }), "{e}");
        let e = parse_table_metadata("t", "m.json", br#"{"format-version": 9}"#).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        assert!(e.to_string().contains("format version 9"));
        let e = parse_table_metadata("t", "m.json", br#"{"format-version": 2}"#).unwrap_err();
        assert!(matches!(e, Error::Metadata { .. }), "{e}");
        let e = parse_table_metadata("t", "m.json", b"").unwrap_err();
        assert!(matches!(e, Error::Metadata { .. }), "{e}");
        let e = parse_table_metadata("t", "m.json", &[0x1f, 0x8b, 0, 1]).unwrap_err();
        assert!(e.to_string().contains("gzip"), "{e}");
    }

    fn with_log(last_updated: i64, logged: i64) -> Vec<u8> {
        format!(
            r#"{{"format-version":2,"table-uuid":"9c12d441-03fe-4693-9a96-a0705ddf69c1",
            "location":"s3://b/wh/t","last-sequence-number":0,"last-updated-ms":{last_updated},
            "last-column-id":1,"current-schema-id":0,"schemas":[{{"type":"struct","schema-id":0,
            "fields":[{{"id":1,"name":"x","required":true,"type":"long"}}]}}],"default-spec-id":0,
            "partition-specs":[{{"spec-id":0,"fields":[]}}],"last-partition-id":999,
            "default-sort-order-id":0,"sort-orders":[{{"order-id":0,"fields":[]}}],
            "properties":{{}},"snapshots":[],"snapshot-log":[],
            "metadata-log":[{{"metadata-file":"s3://b/wh/t/metadata/v1.json","timestamp-ms":{logged}}}]}}"#
        )
        .into_bytes()
    }

    /// Upstream's parser subtracts these unchecked (`attempt to subtract with overflow` in debug
    /// builds): the check must refuse them first, with a typed error naming table and file.
    #[test]
    fn timestamps_that_are_no_instants_are_refused_before_upstream_parses_them() {
        let ok = parse_table_metadata(
            "t",
            "m.json",
            &with_log(1_602_638_573_590, 1_602_638_500_000),
        );
        assert!(ok.is_ok(), "{ok:?}");
        for (updated, logged) in [
            (i64::MAX, i64::MIN),
            (1_602_638_573_590, i64::MIN),
            (i64::MIN, 1_602_638_573_590),
            (MAX_TIMESTAMP_MS + 1, 0),
        ] {
            let e = parse_table_metadata("db.t", "m.json", &with_log(updated, logged)).unwrap_err();
            assert!(
                matches!(&e, Error::Metadata { table, location, .. } if table == "db.t" && location == "m.json"),
                "{e}"
            );
            assert!(e.to_string().contains("no instant"), "{e}");
        }
    }

    fn v3_with(field_type: &str, partition_field: &str) -> Vec<u8> {
        format!(
            r#"{{"format-version":3,"table-uuid":"9c12d441-03fe-4693-9a96-a0705ddf69c1",
            "location":"s3://b/wh/t","last-sequence-number":0,"last-updated-ms":1602638573590,
            "next-row-id":0,
            "last-column-id":3,"current-schema-id":0,"schemas":[{{"type":"struct","schema-id":0,
            "fields":[{{"id":1,"name":"x","required":true,"type":"long"}},
                      {{"id":2,"name":"s","required":false,"type":{{"type":"struct","fields":[
                        {{"id":3,"name":"v","required":false,"type":{field_type}}}]}}}}]}}],
            "default-spec-id":0,
            "partition-specs":[{{"spec-id":0,"fields":[{partition_field}]}}],"last-partition-id":1000,
            "default-sort-order-id":0,"sort-orders":[{{"order-id":0,"fields":[]}}],
            "properties":{{}},"snapshots":[],"snapshot-log":[],"metadata-log":[]}}"#
        )
        .into_bytes()
    }

    #[test]
    fn v3_features_cryo_does_not_support_are_named() {
        let ok = parse_table_metadata("t", "m.json", &v3_with(r#""string""#, ""));
        assert!(ok.is_ok(), "{ok:?}");
        for (t, want) in [
            (r#""variant""#, "`s.v` has the format-v3 type `variant`"),
            (r#""geometry(srid:4326)""#, "type `geometry(srid:4326)`"),
            (r#""geography""#, "type `geography`"),
            (r#""unknown""#, "type `unknown`"),
            (
                r#"{"type":"list","element-id":4,"element-required":false,"element":"variant"}"#,
                "`s.v.element` has the format-v3 type `variant`",
            ),
        ] {
            let e = parse_table_metadata("db.t", "m.json", &v3_with(t, "")).unwrap_err();
            assert!(matches!(e, Error::Unsupported { .. }), "{e}");
            assert!(e.to_string().contains(want), "{e}");
        }
        let multi = r#"{"source-ids":[1,3],"field-id":1000,"name":"xv","transform":"bucket[8]"}"#;
        let e = parse_table_metadata("db.t", "m.json", &v3_with(r#""string""#, multi)).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("xv of partition-specs applies bucket[8] to several source columns"),
            "{e}"
        );
    }
}
