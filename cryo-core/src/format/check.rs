//! The fast readers held to upstream's: the fuzz target `expire_readers` calls
//! [`check_fast_readers`], and the tests below call it on every manifest list and manifest of
//! tables written by Cryo, PyIceberg and Spark, and on generated ones.

use iceberg::spec::{DataContentType, Manifest};

use super::guarded;
use super::manifest::{DeletedRef, Inheritance, LiveRef, deleted_fast, live_fast, parse_fast};
use super::manifest_list::{
    EntryCounts, ListedPaths, fnv1a, parse_paths_fast, parse_paths_upstream,
};
use super::summary;

/// The fast Avro readers against upstream's, for the fuzz target `expire_readers` and the
/// property tests (not API). Reads `bytes` as a manifest list and as a manifest. Panics when a
/// fast reader accepts the bytes and reads something else than upstream's reader (a list under
/// the format version its header declares, as callers pass the table's): expiry would then keep
/// or delete the wrong files, and a commit would rewrite wrong entries.
#[doc(hidden)]
pub fn check_fast_readers(bytes: &[u8]) {
    use iceberg::spec::FormatVersion;
    // The header's `format-version` entry: the key, then the value as Avro bytes (a zigzag
    // length, here one byte, and the digit).
    let declared = bytes
        .windows(16)
        .position(|w| &w[..14] == b"format-version")
        .and_then(|i| bytes.get(i + 14..i + 16))
        .and_then(|v| match v {
            [2, b'1'] => Some(FormatVersion::V1),
            [2, b'2'] => Some(FormatVersion::V2),
            [2, b'3'] => Some(FormatVersion::V3),
            _ => None,
        });
    let view = |r: &ListedPaths| -> Vec<ListView> {
        r.manifests
            .iter()
            .map(|m| {
                let p = r.arena.get(m.start..m.end).unwrap_or_default();
                assert_eq!(m.hash, fnv1a(p.as_bytes()), "hash of {p}");
                let (id, counts) = (m.added_snapshot_id, m.counts);
                (
                    p.to_string(),
                    m.length,
                    m.may_have_live,
                    m.deletes,
                    id,
                    counts,
                    m.encrypted,
                )
            })
            .collect()
    };
    if let (Ok(fast), Some(version)) = (parse_paths_fast(bytes), declared)
        && let Ok(upstream) = parse_paths_upstream("fuzz", "fuzz", bytes, version)
    {
        let (fast, upstream) = (view(&fast), view(&upstream));
        // A v1 list has no `content` (v1 tables have no delete files): upstream's v1 reader
        // drops it, so only v2 on compares it. Upstream's v1 reader also knows the file counts
        // only by their v1 names (`added_data_files_count`), which Java 1.5+ writes as
        // `added_files_count`; the fast reader finds them by field id. So on v1 the fast reader
        // may know a manifest has no live files where upstream cannot tell; it must never
        // claim live files where upstream knows there are none.
        let strip = |mut v: Vec<ListView>| {
            if version == FormatVersion::V1 {
                for m in &mut v {
                    m.2 = true;
                    m.3 = false;
                    m.4 = None;
                    m.5 = EntryCounts::default();
                }
            }
            v
        };
        if version == FormatVersion::V1 {
            for (f, u) in fast.iter().zip(&upstream) {
                assert!(
                    u.2 || !f.2,
                    "manifest list (V1): the fast reader says {} may have live files, upstream says it has none",
                    f.0
                );
            }
        }
        assert_eq!(
            strip(fast),
            strip(upstream),
            "manifest list ({version:?}): fast reader vs upstream"
        );
    }
    let mut fast = Vec::new();
    let mut push = |e: LiveRef<'_>| fast.push(owned(e));
    let upstream = guarded(|| Manifest::parse_avro(bytes));
    if live_fast(bytes, &mut push).is_ok()
        && let Ok(m) = &upstream
    {
        let upstream: Vec<_> = m
            .entries()
            .iter()
            .filter(|e| e.is_alive())
            .map(|e| {
                owned(LiveRef {
                    path: e.file_path(),
                    content: e.content_type(),
                    records: e.record_count(),
                    bytes: e.file_size_in_bytes(),
                })
            })
            .collect();
        assert_eq!(fast, upstream, "manifest: live-entry reader vs upstream");
    }
    if let Ok(m) = &upstream {
        check_deleted(bytes, m);
    }
    if let (Some(fast), Ok(upstream)) = (parse_fast(bytes), &upstream) {
        assert_manifests_agree(&fast, upstream);
    }
    // The scan's entry summaries: inheritance applied, bounds reduced to the columns having
    // both, the referenced data file found either way.
    let inherit = Inheritance::with(7, 3);
    let mut fast = Vec::new();
    if summary::fast(bytes, inherit, &mut |e| fast.push(owned_summary(e))).is_ok()
        && let Ok(m) = &upstream
    {
        let mut theirs = Vec::new();
        summary::upstream(m, inherit, &mut |e| theirs.push(owned_summary(e)));
        assert_eq!(fast, theirs, "manifest: the scan's summaries vs upstream");
    }
}

/// A manifest's file shape, as the views below compare it.
type ListView = (String, u64, bool, bool, Option<i64>, EntryCounts, bool);

/// The `DELETED`-entry reader against upstream's entries.
fn check_deleted(bytes: &[u8], m: &Manifest) {
    let mut fast = Vec::new();
    let mut push = |e: DeletedRef<'_>| fast.push((owned(e.file), e.snapshot_id));
    if deleted_fast(bytes, &mut push).is_ok() {
        let upstream: Vec<_> = m
            .entries()
            .iter()
            .filter(|e| !e.is_alive())
            .map(|e| {
                let file = LiveRef {
                    path: e.file_path(),
                    content: e.content_type(),
                    records: e.record_count(),
                    bytes: e.file_size_in_bytes(),
                };
                (owned(file), e.snapshot_id())
            })
            .collect();
        assert_eq!(fast, upstream, "manifest: deleted-entry reader vs upstream");
    }
}

type OwnedSummary = (
    String,
    iceberg::spec::ManifestStatus,
    Option<i64>,
    Option<i64>,
    i32,
    DataContentType,
    iceberg::spec::DataFileFormat,
    iceberg::spec::Struct,
    (u64, u64),
    Vec<i32>,
    Option<String>,
    Option<i64>,
);

fn owned_summary(e: &summary::Summary<'_>) -> OwnedSummary {
    (
        e.path.to_string(),
        e.status,
        e.snapshot_id,
        e.sequence_number,
        e.spec_id,
        e.content,
        e.format,
        e.partition.clone(),
        (e.records, e.bytes),
        e.bounded.to_vec(),
        e.referenced.map(str::to_string),
        e.content_size,
    )
}

fn owned(e: LiveRef<'_>) -> (String, DataContentType, u64, u64) {
    (e.path.to_string(), e.content, e.records, e.bytes)
}

/// The fast manifest decoder's manifest equals upstream's: the same metadata and the same
/// entries, field by field.
fn assert_manifests_agree(fast: &Manifest, upstream: &Manifest) {
    assert_eq!(
        fast.metadata(),
        upstream.metadata(),
        "manifest metadata: fast decoder vs upstream"
    );
    assert_eq!(
        fast.entries().len(),
        upstream.entries().len(),
        "manifest entries: fast decoder vs upstream"
    );
    for (f, u) in fast.entries().iter().zip(upstream.entries()) {
        assert_eq!(f, u, "manifest entry: fast decoder vs upstream");
    }
}

#[cfg(test)]
mod tests {
    use super::super::avro;
    use super::*;
    /// A container with the same metadata and records, its blocks deflated (as Java writes them).
    fn deflated(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let c = avro::open(bytes).unwrap();
        // The header's metadata map (open() keeps only the parsed schema).
        let mut at = 4;
        let mut meta: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let read = |at: &mut usize| {
            let (len, n) = zigzag(&bytes[*at..]);
            *at += n;
            let v = bytes[*at..*at + len as usize].to_vec();
            *at += len as usize;
            v
        };
        loop {
            let (count, n) = zigzag(&bytes[at..]);
            at += n;
            if count == 0 {
                break;
            }
            for _ in 0..count {
                let k = read(&mut at);
                let v = read(&mut at);
                meta.push((k, v));
            }
        }
        let sync = [7u8; 16];
        let mut out = b"Obj\x01".to_vec();
        out.extend(varint(meta.len() as i64));
        for (k, v) in &meta {
            let v: &[u8] = if k == b"avro.codec" { b"deflate" } else { v };
            out.extend(varint(k.len() as i64));
            out.extend(k);
            out.extend(varint(v.len() as i64));
            out.extend(v);
        }
        out.extend(varint(0));
        out.extend(sync);
        for (count, data) in &c.blocks {
            let mut enc =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
            enc.write_all(data).unwrap();
            let z = enc.finish().unwrap();
            out.extend(varint(*count as i64));
            out.extend(varint(z.len() as i64));
            out.extend(z);
            out.extend(sync);
        }
        out
    }

    fn varint(v: i64) -> Vec<u8> {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        let mut out = Vec::new();
        loop {
            if z < 0x80 {
                out.push(z as u8);
                return out;
            }
            out.push((z as u8 & 0x7f) | 0x80);
            z >>= 7;
        }
    }

    fn zigzag(b: &[u8]) -> (i64, usize) {
        let (mut v, mut i) = (0u64, 0);
        loop {
            v |= u64::from(b[i] & 0x7f) << (7 * i);
            i += 1;
            if b[i - 1] & 0x80 == 0 {
                return ((v >> 1) as i64 ^ -((v & 1) as i64), i);
            }
        }
    }

    fn list_view(r: &ListedPaths) -> Vec<(String, u64, bool, bool, u64)> {
        r.manifests
            .iter()
            .map(|m| {
                let p = &r.arena[m.start..m.end];
                assert_eq!(m.hash, fnv1a(p.as_bytes()));
                (p.to_string(), m.length, m.may_have_live, m.deletes, m.hash)
            })
            .collect()
    }

    fn live_view(bytes: &[u8], fast: bool) -> Vec<(String, DataContentType, u64, u64)> {
        let mut out = Vec::new();
        let mut push = |e: LiveRef<'_>| out.push(owned(e));
        if fast {
            live_fast(bytes, &mut push).unwrap();
        } else {
            let m = iceberg::spec::Manifest::parse_avro(bytes).unwrap();
            for e in m.entries().iter().filter(|e| e.is_alive()) {
                push(LiveRef {
                    path: e.file_path(),
                    content: e.content_type(),
                    records: e.record_count(),
                    bytes: e.file_size_in_bytes(),
                });
            }
        }
        out
    }

    /// The fast Avro reader reads exactly what upstream's does, from Cryo's own manifest lists
    /// and manifests (format v1, v2, v3; ADDED, EXISTING and DELETED entries; data and delete
    /// manifests), uncompressed and deflated; it refuses codecs it does not know.
    #[tokio::test]
    #[allow(
        clippy::too_many_lines,
        reason = "one table per format version, every file compared"
    )]
    async fn fast_avro_reader_agrees_with_upstream() {
        use arrow_array::{ArrayRef, Int64Array, RecordBatch};
        use iceberg::spec::{FormatVersion, NestedField, PrimitiveType, Schema, Type};

        use crate::catalog::{Catalog, CatalogConfig, Namespace, TableId};
        use crate::commit::{NewTable, SnapshotProducer, write_data_files, write_position_deletes};

        let dir = tempfile::tempdir().unwrap();
        let mut config = CatalogConfig::local("t", dir.path());
        config
            .properties
            .insert("init_catalog_tables".into(), "true".into());
        let catalog = Catalog::connect(config).await.unwrap();
        catalog
            .create_namespace(&Namespace::new(["db"]))
            .await
            .unwrap();
        let committer = catalog.committer().unwrap();
        let batch = |first: i64| {
            let schema =
                std::sync::Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
                    "id",
                    arrow_schema::DataType::Int64,
                    false,
                )]));
            RecordBatch::try_new(
                schema,
                vec![
                    std::sync::Arc::new(Int64Array::from_iter_values(first..first + 5)) as ArrayRef,
                ],
            )
            .unwrap()
        };
        let (mut lists, mut manifests) = (0, 0);
        for version in [FormatVersion::V1, FormatVersion::V2, FormatVersion::V3] {
            let id = TableId::parse(&format!("db.t_{version}")).unwrap();
            let schema = Schema::builder()
                .with_fields(vec![
                    NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                ])
                .build()
                .unwrap();
            let mut t = catalog
                .create_table(&id, NewTable::new(schema).with_format_version(version))
                .await
                .unwrap();
            let mut first_file = None;
            for i in 0..3 {
                let w = write_data_files(&t, [batch(i * 5)]).await.unwrap();
                first_file.get_or_insert_with(|| w.files[0].file_path().to_string());
                t = SnapshotProducer::new(&t)
                    .add_data_files(w.files)
                    .commit(committer.as_ref())
                    .await
                    .unwrap()
                    .table;
            }
            let victim = first_file.unwrap();
            if version == FormatVersion::V2 {
                let d = write_position_deletes(&t, &[(victim.clone(), vec![0, 1])])
                    .await
                    .unwrap();
                t = SnapshotProducer::new(&t)
                    .add_delete_files(d.files)
                    .commit(committer.as_ref())
                    .await
                    .unwrap()
                    .table;
            }
            t = SnapshotProducer::new(&t)
                .delete_data_files([victim])
                .commit(committer.as_ref())
                .await
                .unwrap()
                .table;
            for s in t.metadata.snapshots() {
                let bytes = t.storage.read_all(s.manifest_list()).await.unwrap();
                let upstream = parse_paths_upstream("t", "l", &bytes, version).unwrap();
                let expect = list_view(&upstream);
                assert_eq!(list_view(&parse_paths_fast(&bytes).unwrap()), expect);
                assert_eq!(
                    list_view(&parse_paths_fast(&deflated(&bytes)).unwrap()),
                    expect
                );
                check_fast_readers(&bytes);
                check_fast_readers(&deflated(&bytes));
                lists += 1;
                for m in &upstream.manifests {
                    let mb = t.storage.read_all(upstream.path(m)).await.unwrap();
                    check_fast_readers(&mb);
                    check_fast_readers(&deflated(&mb));
                    if version != FormatVersion::V1 {
                        // v2 and v3 (deletes among them) are summarized by the fast path.
                        let inherit = Inheritance::with(1, 1);
                        summary::fast(&mb, inherit, &mut |_| ()).unwrap();
                    }
                    let expect = live_view(&mb, false);
                    assert_eq!(live_view(&mb, true), expect);
                    assert_eq!(live_view(&deflated(&mb), true), expect);
                    assert_eq!(
                        live_view(&deflated(&mb), false),
                        expect,
                        "a valid deflated file"
                    );
                    manifests += 1;
                }
            }
        }
        assert!(
            lists == 13 && manifests >= 30,
            "{lists} lists, {manifests} manifests"
        );
        // Unknown codecs and damaged files are refused (the caller then uses upstream's reader).
        let mut snappy = deflated(&std::fs::read(first_avro(dir.path())).unwrap());
        let at = snappy.windows(7).position(|w| w == b"deflate").unwrap();
        snappy.splice(at..at + 7, b"snappyX".iter().copied());
        assert!(avro::open(&snappy).is_err());
        let good = std::fs::read(first_avro(dir.path())).unwrap();
        assert!(parse_paths_fast(&good[..good.len() - 20]).is_err());
        assert!(parse_paths_fast(b"Obj\x01").is_err());
    }

    fn first_avro(root: &std::path::Path) -> std::path::PathBuf {
        fn walk(d: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(&p, out);
                } else if p
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("snap-")
                {
                    out.push(p);
                }
            }
        }
        let mut out = Vec::new();
        walk(root, &mut out);
        out.sort();
        out.remove(0)
    }

    /// Every manifest list and manifest of the tables under `fuzz/lake` (written by Cryo's demo,
    /// PyIceberg and Spark; format v1 and v2; partitioned and not; with deletes), as written and
    /// deflated: the fast readers read each as upstream's reader does, and they read files of
    /// every writer (so the comparison is not vacuous).
    #[test]
    fn every_file_of_the_committed_lake_reads_alike() {
        let lake = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/lake");
        let mut files = Vec::new();
        avro_files(&lake, &mut files);
        files.sort();
        let mut fast = std::collections::BTreeMap::<(String, &str), usize>::new();
        for path in &files {
            let bytes = std::fs::read(path).expect("read");
            check_fast_readers(&bytes);
            check_fast_readers(&deflated(&bytes));
            let table = path
                .strip_prefix(&lake)
                .ok()
                .and_then(|p| p.iter().next())
                .map(|t| t.to_string_lossy().into_owned())
                .unwrap_or_default();
            let writer = table.split('_').next().unwrap_or_default().to_string();
            if parse_paths_fast(&bytes).is_ok() {
                *fast.entry((writer.clone(), "list")).or_default() += 1;
            } else if live_fast(&bytes, &mut |_| ()).is_ok() {
                *fast.entry((writer.clone(), "manifest")).or_default() += 1;
            }
            if parse_fast(&bytes).is_some() {
                *fast.entry((writer.clone(), "decoded")).or_default() += 1;
            }
            if summary::fast(&bytes, Inheritance::with(1, 1), &mut |_| ()).is_ok() {
                *fast.entry((writer, "summarized")).or_default() += 1;
            }
        }
        for writer in ["demo", "pyiceberg", "spark"] {
            for kind in ["list", "manifest", "decoded", "summarized"] {
                assert!(
                    fast.get(&(writer.to_string(), kind)).copied().unwrap_or(0) > 0,
                    "no {kind} of {writer} read by the fast path: {fast:?}"
                );
            }
        }
    }

    fn avro_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).expect("fuzz/lake is in the repository") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                avro_files(&p, out);
            } else if p.extension().is_some_and(|x| x == "avro") {
                out.push(p);
            }
        }
    }
}
