//! Regenerates the fuzz lake (`fuzz/lake/`) and the seed corpora (`fuzz/corpus/`) from real
//! tables: Cryo's demo lake (built here) and the PyIceberg/Spark fixtures that
//! `scripts/test.sh` writes to `target/cryo-fixtures` (skipped, with a notice, when absent).
//!
//! ```text
//! cargo run --manifest-path fuzz/Cargo.toml --example make_seeds [-- FIXTURES_DIR]
//! ```
//!
//! Each source table becomes a *host table* of the lake: its `metadata.json`, the manifest
//! lists of its newest snapshots and the manifests they name, with every path relocated from
//! the table's directory to `memory://fuzz-lake/<host>` so the fuzz targets scan it from memory
//! on any machine. Avro files are re-encoded with their own writer schema, header metadata and
//! codec (only the path strings and `manifest_length` change). The lake is trimmed to stay
//! small: at most [`KEEP_SNAPSHOTS`] snapshots and [`KEEP_MANIFESTS`] manifests per list.
#![allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)] // a developer tool: fail loudly, report what it wrote

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use apache_avro::types::Value as Avro;
use apache_avro::{Codec, DeflateSettings, Reader, Writer};
use serde_json::{Value, json};

const KEEP_SNAPSHOTS: usize = 3;
const KEEP_MANIFESTS: usize = 6;
const LAKE_URL: &str = "memory://fuzz-lake";
const INPUT_MANIFEST: &str = "memory://fuzz-input/manifest.avro";

struct Source {
    host: String,
    metadata: PathBuf,
}

fn local(location: &str) -> PathBuf {
    PathBuf::from(
        location
            .strip_prefix("file://")
            .or_else(|| location.strip_prefix("file:"))
            .unwrap_or(location),
    )
}

/// Rewrites paths under one table directory to the host's memory location.
struct Relocate {
    from: Vec<String>,
    to: String,
}

impl Relocate {
    fn new(table_location: &str, host: &str) -> Self {
        let abs = local(table_location)
            .to_string_lossy()
            .trim_end_matches('/')
            .to_string();
        Self {
            // Longest first: `file:///a` must not be matched as `file:` + `//a`.
            from: vec![format!("file://{abs}"), format!("file:{abs}"), abs],
            to: format!("{LAKE_URL}/{host}"),
        }
    }

    fn str(&self, s: &str) -> Option<String> {
        self.from
            .iter()
            .find_map(|p| s.strip_prefix(p.as_str()))
            .filter(|rest| rest.is_empty() || rest.starts_with('/'))
            .map(|rest| format!("{}{rest}", self.to))
    }

    fn json(&self, v: &mut Value) {
        match v {
            Value::String(s) => {
                if let Some(n) = self.str(s) {
                    *s = n;
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|v| self.json(v)),
            Value::Object(o) => o.values_mut().for_each(|v| self.json(v)),
            _ => {}
        }
    }

    fn avro(&self, v: &mut Avro) {
        match v {
            Avro::String(s) => {
                if let Some(n) = self.str(s) {
                    *s = n;
                }
            }
            // Position delete files keep the data file path as bounds of `file_path`.
            Avro::Bytes(b) => {
                if let Some(n) = std::str::from_utf8(b).ok().and_then(|s| self.str(s)) {
                    *b = n.into_bytes();
                }
            }
            Avro::Union(_, inner) => self.avro(inner),
            Avro::Array(a) => a.iter_mut().for_each(|v| self.avro(v)),
            Avro::Map(m) => m.values_mut().for_each(|v| self.avro(v)),
            Avro::Record(fields) => fields.iter_mut().for_each(|(_, v)| self.avro(v)),
            _ => {}
        }
    }
}

/// The codec named in an Avro container header.
fn codec_of(bytes: &[u8]) -> Codec {
    let head = &bytes[..bytes.len().min(8192)];
    let key = b"avro.codec";
    match head.windows(key.len()).position(|w| w == key) {
        Some(i) if head[i + key.len() + 1..].starts_with(b"deflate") => {
            Codec::Deflate(DeflateSettings::default())
        }
        _ => Codec::Null,
    }
}

struct AvroFile {
    schema: apache_avro::Schema,
    meta: Vec<(String, Vec<u8>)>,
    codec: Codec,
    records: Vec<Avro>,
}

fn read_avro(bytes: &[u8]) -> AvroFile {
    let reader = Reader::new(bytes).unwrap();
    let schema = reader.writer_schema().clone();
    let mut meta: Vec<(String, Vec<u8>)> = reader
        .user_metadata()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    meta.sort();
    let records = reader.map(Result::unwrap).collect();
    AvroFile {
        schema,
        meta,
        codec: codec_of(bytes),
        records,
    }
}

fn write_avro(f: &AvroFile, records: &[Avro]) -> Vec<u8> {
    let mut w = Writer::with_codec(&f.schema, Vec::new(), f.codec);
    for (k, v) in &f.meta {
        w.add_user_metadata(k.clone(), v).unwrap();
    }
    for r in records {
        w.append_value_ref(r).unwrap();
    }
    w.into_inner().unwrap()
}

fn field<'a>(record: &'a Avro, name: &str) -> Option<&'a Avro> {
    match record {
        Avro::Record(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
        _ => None,
    }
}

fn field_mut<'a>(record: &'a mut Avro, name: &str) -> Option<&'a mut Avro> {
    match record {
        Avro::Record(fields) => fields.iter_mut().find(|(n, _)| n == name).map(|(_, v)| v),
        _ => None,
    }
}

fn avro_str(v: Option<&Avro>) -> Option<&str> {
    match v? {
        Avro::String(s) => Some(s),
        Avro::Union(_, inner) => avro_str(Some(inner)),
        _ => None,
    }
}

fn avro_int(v: Option<&Avro>) -> Option<i64> {
    match v? {
        Avro::Int(i) => Some(i64::from(*i)),
        Avro::Long(l) => Some(*l),
        Avro::Union(_, inner) => avro_int(Some(inner)),
        _ => None,
    }
}

/// A host table written to `lake/<host>/metadata/`.
struct Host {
    name: String,
    metadata: Vec<u8>,
    raw_metadata: Vec<u8>,
    /// Relocated manifest lists, current first.
    lists: Vec<Vec<u8>>,
    /// Relocated manifests of the current snapshot.
    manifests: Vec<Vec<u8>>,
}

/// Keep the list entries whose manifests are in `keep` (and at most [`KEEP_MANIFESTS`]).
fn pick_manifests(records: &[Avro]) -> BTreeSet<String> {
    // One of each (spec, content) first, then the rest in list order.
    let mut seen = BTreeSet::new();
    let mut first = Vec::new();
    let mut rest = Vec::new();
    for r in records {
        let path = avro_str(field(r, "manifest_path")).unwrap().to_string();
        let key = (
            avro_int(field(r, "partition_spec_id")),
            avro_int(field(r, "content")),
        );
        if seen.insert(key) {
            first.push(path);
        } else {
            rest.push(path);
        }
    }
    first.into_iter().chain(rest).take(KEEP_MANIFESTS).collect()
}

fn build_host(src: &Source, lake: &Path) -> Host {
    let raw_metadata = std::fs::read(&src.metadata).unwrap();
    let mut md: Value = serde_json::from_slice(&raw_metadata).unwrap();
    let table_location = md["location"].as_str().unwrap().to_string();
    let reloc = Relocate::new(&table_location, &src.host);
    let current = md["current-snapshot-id"].as_i64();

    // Newest snapshots (and the current one).
    let mut snaps: Vec<Value> = md["snapshots"].as_array().cloned().unwrap_or_default();
    snaps.sort_by_key(|s| {
        (
            s["sequence-number"].as_i64().unwrap_or(0),
            s["timestamp-ms"].as_i64().unwrap_or(0),
        )
    });
    let n = snaps.len();
    let kept: Vec<Value> = snaps
        .into_iter()
        .enumerate()
        .filter(|(i, s)| *i + KEEP_SNAPSHOTS >= n || s["snapshot-id"].as_i64() == current)
        .map(|(_, s)| s)
        .collect();
    let kept_ids: BTreeSet<i64> = kept
        .iter()
        .filter_map(|s| s["snapshot-id"].as_i64())
        .collect();
    if md.get("snapshots").is_some() {
        md["snapshots"] = Value::Array(kept.clone());
    }
    if let Some(log) = md.get_mut("snapshot-log").and_then(Value::as_array_mut) {
        log.retain(|e| {
            e["snapshot-id"]
                .as_i64()
                .is_some_and(|id| kept_ids.contains(&id))
        });
    }
    if let Some(refs) = md.get_mut("refs").and_then(Value::as_object_mut) {
        refs.retain(|_, r| {
            r["snapshot-id"]
                .as_i64()
                .is_some_and(|id| kept_ids.contains(&id))
        });
    }

    // The current list decides which manifests the lake keeps.
    let list_of = |s: &Value| s["manifest-list"].as_str().map(str::to_string);
    let current_list = kept
        .iter()
        .find(|s| s["snapshot-id"].as_i64() == current)
        .and_then(list_of);
    let mut keep_manifests = BTreeSet::new();
    let mut lists_in: Vec<(String, AvroFile)> = Vec::new();
    for s in kept.iter().rev() {
        let Some(loc) = list_of(s) else { continue };
        let f = read_avro(&std::fs::read(local(&loc)).unwrap());
        if Some(&loc) == current_list.as_ref() {
            keep_manifests = pick_manifests(&f.records);
        }
        lists_in.push((loc, f));
    }
    // Current list first.
    lists_in.sort_by_key(|(loc, _)| Some(loc) != current_list.as_ref());

    let dir = lake.join(&src.host).join("metadata");
    std::fs::create_dir_all(&dir).unwrap();
    let name_of = |loc: &str| loc.rsplit('/').next().unwrap().to_string();

    // Manifests: relocated and re-encoded, their new sizes noted for the lists.
    let mut sizes: HashMap<String, i64> = HashMap::new();
    let mut manifests = Vec::new();
    for m in &keep_manifests {
        let mut f = read_avro(&std::fs::read(local(m)).unwrap());
        let mut records = std::mem::take(&mut f.records);
        records.iter_mut().for_each(|r| reloc.avro(r));
        let bytes = write_avro(&f, &records);
        std::fs::write(dir.join(name_of(m)), &bytes).unwrap();
        sizes.insert(reloc.str(m).unwrap(), bytes.len() as i64);
        manifests.push(bytes);
    }

    let mut lists = Vec::new();
    for (i, (loc, mut f)) in lists_in.into_iter().enumerate() {
        let mut records: Vec<Avro> = std::mem::take(&mut f.records)
            .into_iter()
            .filter(|r| keep_manifests.contains(avro_str(field(r, "manifest_path")).unwrap()))
            .collect();
        for r in &mut records {
            reloc.avro(r);
            let path = avro_str(field(r, "manifest_path")).unwrap().to_string();
            if let (Some(size), Some(Avro::Long(len))) =
                (sizes.get(&path), field_mut(r, "manifest_length"))
            {
                *len = *size;
            }
        }
        let bytes = write_avro(&f, &records);
        std::fs::write(dir.join(name_of(&loc)), &bytes).unwrap();
        if i == 0 {
            // The host's list for the `manifest` target: its first manifest is the input.
            let mut fuzz = records.clone();
            if let Some(Avro::String(p)) =
                fuzz.first_mut().and_then(|r| field_mut(r, "manifest_path"))
            {
                *p = INPUT_MANIFEST.to_string();
            }
            std::fs::write(dir.join("fuzz-input-list.avro"), write_avro(&f, &fuzz)).unwrap();
        }
        lists.push(bytes);
    }

    reloc.json(&mut md);
    let metadata = serde_json::to_vec_pretty(&md).unwrap();
    std::fs::write(dir.join(format!("{}.metadata.json", src.host)), &metadata).unwrap();
    Host {
        name: src.host.clone(),
        metadata,
        raw_metadata,
        lists,
        manifests,
    }
}

/// The same Avro file without compression: mutations then land on field values instead of
/// breaking the deflate stream (the lake keeps the writers' codecs, so those paths stay covered).
fn uncompressed(bytes: &[u8]) -> Vec<u8> {
    let mut f = read_avro(bytes);
    f.codec = Codec::Null;
    let records = std::mem::take(&mut f.records);
    write_avro(&f, &records)
}

fn write_seed(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

fn with_host(i: usize, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![u8::try_from(i).unwrap()];
    out.extend_from_slice(bytes);
    out
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// Hand-made edge cases for `table_metadata`, derived from a host's metadata.
fn metadata_edge_cases(host: &Host) -> Vec<(String, Vec<u8>)> {
    let md: Value = serde_json::from_slice(&host.metadata).unwrap();
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut v = md.clone();
        f(&mut v);
        serde_json::to_vec(&v).unwrap()
    };
    vec![
        ("gzip.metadata.json".into(), gzip(&host.metadata)),
        (
            "truncated.metadata.json".into(),
            host.metadata[..host.metadata.len() / 2].to_vec(),
        ),
        (
            "future-version.metadata.json".into(),
            edit(&|v| v["format-version"] = json!(4)),
        ),
        (
            "v3-no-snapshots.metadata.json".into(),
            edit(&|v| {
                v["format-version"] = json!(3);
                v["next-row-id"] = json!(0);
                v["snapshots"] = json!([]);
                v["snapshot-log"] = json!([]);
                v["refs"] = json!({});
                v.as_object_mut().unwrap().remove("current-snapshot-id");
            }),
        ),
        (
            "missing-list.metadata.json".into(),
            edit(&|v| {
                for s in v["snapshots"].as_array_mut().into_iter().flatten() {
                    s["manifest-list"] =
                        json!(format!("{LAKE_URL}/{}/metadata/gone.avro", host.name));
                }
            }),
        ),
        (
            "far-timestamps.metadata.json".into(),
            edit(&|v| {
                for s in v["snapshots"].as_array_mut().into_iter().flatten() {
                    s["timestamp-ms"] = json!(i64::MAX - 1);
                }
            }),
        ),
        (
            "props.metadata.json".into(),
            edit(&|v| {
                v["properties"] = json!({
                    "write.target-file-size-bytes": "0",
                    "commit.manifest.target-size-bytes": "18446744073709551615",
                    "history.expire.max-snapshot-age-ms": "-9223372036854775808",
                    "history.expire.min-snapshots-to-keep": "4294967295",
                    "write.delete.mode": "merge-on-read",
                    "write.metadata.metrics.default": "none"
                });
            }),
        ),
        (
            "relative-list.metadata.json".into(),
            edit(&|v| {
                for s in v["snapshots"].as_array_mut().into_iter().flatten() {
                    s["manifest-list"] = json!("metadata/snap.avro");
                }
            }),
        ),
    ]
}

/// A manifest of `host` whose first entry is repeated twice: once with partition field `name`
/// null and once with it the string "null" (two partitions whose Hive-style paths Iceberg
/// writes alike). The field is made optional in the Avro schema if the writer made it required.
fn null_and_string_null(host: &Host, name: &str) -> Option<Vec<u8>> {
    fn optional(schema: &mut Value, name: &str) -> bool {
        match schema {
            Value::Object(o) => {
                if o.get("name").and_then(Value::as_str) == Some(name) && o.contains_key("field-id")
                {
                    if o["type"].is_string() {
                        let t = o["type"].take();
                        o.insert("type".into(), json!(["null", t]));
                        o.insert("default".into(), Value::Null);
                    }
                    return true;
                }
                o.values_mut().any(|v| optional(v, name))
            }
            Value::Array(a) => a.iter_mut().any(|v| optional(v, name)),
            _ => false,
        }
    }
    for bytes in &host.manifests {
        let mut f = read_avro(bytes);
        let first = f.records.first().cloned()?;
        let mut schema = serde_json::to_value(&f.schema).ok()?;
        if !optional(&mut schema, name) {
            continue;
        }
        f.schema = apache_avro::Schema::parse(&schema).ok()?;
        let set = |value: Avro, suffix: &str| {
            let mut r = first.clone();
            let data = field_mut(&mut r, "data_file")?;
            if let Some(Avro::String(p)) = field_mut(data, "file_path") {
                p.push_str(suffix);
            }
            let slot = field_mut(field_mut(data, "partition")?, name)?;
            *slot = Avro::Union(u32::from(!matches!(value, Avro::Null)), Box::new(value));
            Some(r)
        };
        let a = set(Avro::Null, "-null")?;
        let b = set(Avro::String("null".into()), "-string")?;
        return Some(write_avro(&f, &[a, b]));
    }
    None
}

fn main() {
    let fuzz_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let repo = fuzz_dir.parent().unwrap().to_path_buf();
    let fixtures = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("target/cryo-fixtures"));
    let work = tempfile_dir();

    // Cryo's demo lake, small: every kind of decay it models.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let demo = runtime
        .block_on(cryo_core::demo::create_demo_lake(
            &work.join("demo"),
            &cryo_core::demo::DemoOptions {
                clickstream_commits: 12,
                force_rebuild: true,
                ..cryo_core::demo::DemoOptions::default()
            },
        ))
        .unwrap();
    let mut sources = Vec::new();
    for t in &demo.manifest.tables {
        sources.push(Source {
            host: format!("demo_{}", t.identifier.rsplit('.').next().unwrap()),
            metadata: local(&t.metadata_location),
        });
    }
    // PyIceberg and Spark fixtures on local storage.
    match std::fs::read(fixtures.join("manifest.json")) {
        Ok(bytes) => {
            let m: Value = serde_json::from_slice(&bytes).unwrap();
            for (key, t) in m["tables"].as_object().unwrap() {
                let loc = t["metadata_location"].as_str().unwrap_or_default();
                if !loc.starts_with("file:") || key.starts_with("fixtures.pyiceberg.unpartitioned")
                {
                    continue; // S3/REST tables need services; `unpartitioned` repeats `healthy`
                }
                let parts: Vec<&str> = key.split('.').collect();
                let writer = if t["writer"].as_str().unwrap_or("").starts_with("spark") {
                    "spark"
                } else {
                    "pyiceberg"
                };
                sources.push(Source {
                    host: format!("{writer}_{}", parts[parts.len() - 1]),
                    metadata: local(loc),
                });
            }
        }
        Err(e) => eprintln!(
            "no fixtures at {} ({e}): the lake gets the demo tables only; `bash scripts/test.sh` writes them",
            fixtures.display()
        ),
    }
    sources.sort_by(|a, b| a.host.cmp(&b.host));

    let lake = fuzz_dir.join("lake");
    let corpus = fuzz_dir.join("corpus");
    for d in [
        &lake,
        &corpus.join("table_metadata"),
        &corpus.join("manifest_list"),
        &corpus.join("manifest"),
    ] {
        let _ = std::fs::remove_dir_all(d);
    }
    let hosts: Vec<Host> = sources.iter().map(|s| build_host(s, &lake)).collect();
    let mut index = BTreeMap::new();
    for (i, h) in hosts.iter().enumerate() {
        index.insert(i, h.name.clone());
        let c = corpus.join("table_metadata");
        write_seed(&c, &format!("{}.metadata.json", h.name), &h.metadata);
        if h.name.starts_with("spark") || h.name == "demo_metrics_v1" {
            // As the writer left it: paths outside the lake (the target parses, never scans them).
            write_seed(
                &c,
                &format!("{}-raw.metadata.json", h.name),
                &h.raw_metadata,
            );
        }
        for (j, l) in h.lists.iter().enumerate().take(2) {
            let l = uncompressed(l);
            write_seed(
                &corpus.join("manifest_list"),
                &format!("{}-{j}", h.name),
                &with_host(i, &l),
            );
        }
        for (j, m) in h.manifests.iter().enumerate().take(2) {
            let m = uncompressed(m);
            write_seed(
                &corpus.join("manifest"),
                &format!("{}-{j}", h.name),
                &with_host(i, &m),
            );
        }
    }
    if let Some((i, events)) = hosts
        .iter()
        .enumerate()
        .find(|(_, h)| h.name == "pyiceberg_events")
        && let Some(m) = null_and_string_null(events, "category")
    {
        let m = uncompressed(&m);
        write_seed(
            &corpus.join("manifest"),
            "pyiceberg_events-null-and-string-null",
            &with_host(i, &m),
        );
    }
    let healthy = hosts
        .iter()
        .find(|h| h.name == "demo_orders")
        .unwrap_or(&hosts[0]);
    for (name, bytes) in metadata_edge_cases(healthy) {
        write_seed(&corpus.join("table_metadata"), &name, &bytes);
    }
    std::fs::write(
        lake.join("hosts.json"),
        serde_json::to_vec_pretty(&json!({
            "note": "the first byte of a manifest_list or manifest input picks the host: byte % hosts",
            "hosts": index,
        }))
        .unwrap(),
    )
    .unwrap();
    let _ = std::fs::remove_dir_all(&work);
    println!(
        "wrote {} host tables to {} and seeds to {}",
        hosts.len(),
        lake.display(),
        corpus.display()
    );
}

fn tempfile_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("cryo-fuzz-seeds-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
