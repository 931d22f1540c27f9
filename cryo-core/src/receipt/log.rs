//! The durable receipt log: JSON lines, appended under an exclusive file lock so concurrent
//! processes never interleave lines.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{
    Int64Builder, StringBuilder, TimestampMillisecondBuilder, UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};

use super::Receipt;
use crate::error::{Error, Result};

/// An append-only JSON-lines file of receipts.
#[derive(Debug, Clone)]
pub struct JsonLinesLog {
    path: PathBuf,
}

fn io_err(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::local_file(path, format_args!("receipt log: {what}"), e)
}

impl JsonLinesLog {
    /// A log at `path` (created on first append, with its directory).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append receipts, one line each, atomically with respect to other appenders.
    pub fn append(&self, receipts: &[Receipt]) -> Result<()> {
        if receipts.is_empty() {
            return Ok(());
        }
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| io_err(&self.path, "create directory", e))?;
        }
        let mut buf = Vec::new();
        for r in receipts {
            serde_json::to_writer(&mut buf, r).map_err(|e| Error::compute("receipt to JSON", e))?;
            buf.push(b'\n');
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| io_err(&self.path, "open", e))?;
        file.lock().map_err(|e| io_err(&self.path, "lock", e))?;
        let res = file.write_all(&buf).and_then(|()| file.sync_data());
        let _ = file.unlock();
        res.map_err(|e| io_err(&self.path, "append", e))
    }

    /// Every receipt in the log, oldest first. A torn last line (a crash mid-write) is skipped;
    /// any other malformed line is an error naming its number.
    pub fn read(&self) -> Result<Vec<Receipt>> {
        let file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err(&self.path, "open", e)),
        };
        let lines: Vec<String> = BufReader::new(file)
            .lines()
            .collect::<std::io::Result<_>>()
            .map_err(|e| io_err(&self.path, "read", e))?;
        let mut out = Vec::with_capacity(lines.len());
        let last = lines.len().saturating_sub(1);
        for (i, line) in lines.iter().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Receipt>(line) {
                Ok(r) => out.push(r),
                Err(_) if i == last => {
                    tracing::warn!(path = %self.path.display(), "skipping a torn last receipt line");
                }
                Err(e) => {
                    return Err(Error::validation(format!(
                        "receipt log {} line {}: {e}",
                        self.path.display(),
                        i + 1
                    )));
                }
            }
        }
        Ok(out)
    }
}

/// Schema of [`receipts_batch`].
pub fn receipts_schema() -> SchemaRef {
    let ts = DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()));
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("at", ts, false),
        Field::new("catalog", DataType::Utf8, false),
        Field::new("table", DataType::Utf8, false),
        Field::new("operation", DataType::Utf8, true),
        Field::new("engine", DataType::Utf8, false),
        Field::new("status", DataType::Utf8, false),
        Field::new("reason", DataType::Utf8, true),
        Field::new("duration_ms", DataType::UInt64, true),
        Field::new("files_before", DataType::UInt64, true),
        Field::new("bytes_before", DataType::UInt64, true),
        Field::new("files_after", DataType::UInt64, true),
        Field::new("bytes_after", DataType::UInt64, true),
        Field::new("snapshot_before", DataType::Int64, true),
        Field::new("snapshot_after", DataType::Int64, true),
        Field::new("plan_fingerprint", DataType::Utf8, true),
        Field::new("actor", DataType::Utf8, false),
        Field::new("details", DataType::Utf8, false),
    ]))
}

/// Receipts as one Arrow record batch (`details` as a JSON string).
pub fn receipts_batch(receipts: &[Receipt]) -> Result<RecordBatch> {
    let mut id = StringBuilder::new();
    let mut at = TimestampMillisecondBuilder::new().with_timezone("UTC");
    let mut catalog = StringBuilder::new();
    let mut table = StringBuilder::new();
    let mut operation = StringBuilder::new();
    let mut engine = StringBuilder::new();
    let mut status = StringBuilder::new();
    let mut reason = StringBuilder::new();
    let mut duration = UInt64Builder::new();
    let (mut fb, mut bb, mut fa, mut ba) = (
        UInt64Builder::new(),
        UInt64Builder::new(),
        UInt64Builder::new(),
        UInt64Builder::new(),
    );
    let mut snap_before = Int64Builder::new();
    let mut snap_after = Int64Builder::new();
    let mut plan = StringBuilder::new();
    let mut actor = StringBuilder::new();
    let mut details = StringBuilder::new();
    for r in receipts {
        id.append_value(&r.id);
        at.append_value(r.at_ms);
        catalog.append_value(&r.catalog);
        table.append_value(r.table.to_string());
        operation.append_option(r.operation.map(crate::ops::Operation::as_str));
        engine.append_value(&r.engine);
        status.append_value(r.status.as_str());
        reason.append_option(r.reason.as_deref());
        duration.append_option(r.duration_ms);
        fb.append_option(r.before.map(|f| f.files));
        bb.append_option(r.before.map(|f| f.bytes));
        fa.append_option(r.after.map(|f| f.files));
        ba.append_option(r.after.map(|f| f.bytes));
        snap_before.append_option(r.snapshot_before);
        snap_after.append_option(r.snapshots_after.last().copied());
        plan.append_option(r.plan_fingerprint.as_deref());
        actor.append_value(&r.actor);
        details.append_value(
            serde_json::to_string(&r.details).map_err(|e| Error::compute("receipt details", e))?,
        );
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(id.finish()),
        Arc::new(at.finish()),
        Arc::new(catalog.finish()),
        Arc::new(table.finish()),
        Arc::new(operation.finish()),
        Arc::new(engine.finish()),
        Arc::new(status.finish()),
        Arc::new(reason.finish()),
        Arc::new(duration.finish()),
        Arc::new(fb.finish()),
        Arc::new(bb.finish()),
        Arc::new(fa.finish()),
        Arc::new(ba.finish()),
        Arc::new(snap_before.finish()),
        Arc::new(snap_after.finish()),
        Arc::new(plan.finish()),
        Arc::new(actor.finish()),
        Arc::new(details.finish()),
    ];
    RecordBatch::try_new(receipts_schema(), columns).map_err(|e| Error::compute("arrow", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{CatalogConfig, TableId};
    use crate::ops::Operation;
    use crate::receipt::{Footprint, ReceiptStatus};

    fn sample(i: i64) -> Receipt {
        Receipt::new(
            1_800_000_000_000 + i,
            "c",
            TableId::parse("db.t").unwrap(),
            Some(Operation::RewriteDataFiles),
            "native",
            ReceiptStatus::Succeeded,
            "tester",
        )
        .with_reason("compacted")
        .with_detail("retries", 1)
    }

    #[test]
    fn append_read_and_arrow() {
        let dir = tempfile::tempdir().unwrap();
        let log = JsonLinesLog::new(dir.path().join("sub/receipts.jsonl"));
        assert!(log.read().unwrap().is_empty());
        let mut r = sample(0);
        r.before = Some(Footprint {
            files: 10,
            bytes: 1000,
        });
        r.after = Some(Footprint {
            files: 1,
            bytes: 900,
        });
        r.snapshots_after = vec![7, 8];
        log.append(&[r.clone(), sample(1)]).unwrap();
        log.append(&[sample(2)]).unwrap();
        let back = log.read().unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(back[0], r);
        let batch = receipts_batch(&back).unwrap();
        assert_eq!(batch.num_rows(), 3);
        assert_eq!(batch.schema(), receipts_schema());
    }

    #[test]
    fn torn_last_line_is_skipped_but_corruption_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let log = JsonLinesLog::new(&path);
        log.append(&[sample(0)]).unwrap();
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"id\":\"torn");
        std::fs::write(&path, &text).unwrap();
        assert_eq!(log.read().unwrap().len(), 1);
        std::fs::write(&path, format!("garbage\n{text}\n")).unwrap();
        assert!(log.read().is_err());
    }

    #[test]
    fn receipts_never_carry_configured_secrets() {
        let config = CatalogConfig::new(
            "c",
            [
                ("credential", "client:sup3r-secret"),
                ("token", "tok-abcdef"),
            ],
        );
        let r = sample(0)
            .with_reason("401 for client:sup3r-secret with tok-abcdef")
            .with_detail("error", "bearer tok-abcdef")
            .redact(&config);
        let json = serde_json::to_string(&r).unwrap();
        assert!(
            !json.contains("sup3r-secret") && !json.contains("tok-abcdef"),
            "{json}"
        );
    }

    #[test]
    fn concurrent_appenders_never_interleave() {
        let dir = tempfile::tempdir().unwrap();
        let log = JsonLinesLog::new(dir.path().join("r.jsonl"));
        std::thread::scope(|s| {
            for t in 0..4 {
                let log = log.clone();
                s.spawn(move || {
                    for i in 0..50 {
                        log.append(&[sample(t * 1000 + i)]).unwrap();
                    }
                });
            }
        });
        assert_eq!(log.read().unwrap().len(), 200);
    }
}

/// Receipts appended to object storage: one object per append (`<root>/<ms>-<uuid>.jsonl`,
/// JSON lines), for maintainers on machines that share a bucket and no filesystem. Objects are
/// written whole, so appenders never interleave; reading lists them in name (time) order.
#[derive(Debug, Clone)]
pub struct ObjectReceiptLog {
    storage: crate::io::ObjectStorage,
    root: String,
}

impl ObjectReceiptLog {
    /// A log under `root` (`s3://bucket/cryo/receipts`, `abfss://…`, `gs://…`), reached through
    /// `storage` (the catalog's, with its credentials).
    pub fn new(storage: crate::io::ObjectStorage, root: &str) -> Result<Self> {
        Ok(Self {
            storage,
            root: crate::io::normalize_location(root)?,
        })
    }

    /// Its location.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// Append receipts as one new object.
    pub async fn append(&self, receipts: &[Receipt]) -> Result<()> {
        let Some(first) = receipts.first() else {
            return Ok(());
        };
        let mut buf = Vec::new();
        for r in receipts {
            serde_json::to_writer(&mut buf, r).map_err(|e| Error::compute("receipt to JSON", e))?;
            buf.push(b'\n');
        }
        // Zero-padded milliseconds sort by time; the uuid keeps appenders apart.
        let name = format!(
            "{}/{:013}-{}.jsonl",
            self.root,
            first.at_ms.max(0),
            crate::random::uuid().simple()
        );
        if !self
            .storage
            .write_if_absent(&name, bytes::Bytes::from(buf))
            .await?
        {
            return Err(Error::Internal(format!("receipt object {name} exists")));
        }
        Ok(())
    }

    /// Every receipt, oldest object first.
    pub async fn read(&self) -> Result<Vec<Receipt>> {
        let mut objects = self.storage.list(&format!("{}/", self.root)).await?;
        objects.retain(|o| {
            std::path::Path::new(&o.location)
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("jsonl"))
        });
        objects.sort_by(|a, b| a.location.cmp(&b.location));
        let mut out = Vec::new();
        for o in objects {
            let bytes = self.storage.read_all(&o.location).await?;
            for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                let r = serde_json::from_slice::<Receipt>(line).map_err(|e| {
                    Error::validation(format!("receipt object {} line {}: {e}", o.location, i + 1))
                })?;
                out.push(r);
            }
        }
        Ok(out)
    }
}

/// Where a run's receipts go: a local JSON-lines file or objects on object storage.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ReceiptLog {
    /// A local file ([`JsonLinesLog`]).
    Lines(JsonLinesLog),
    /// Objects under a location on object storage ([`ObjectReceiptLog`]).
    Objects(ObjectReceiptLog),
}

impl From<JsonLinesLog> for ReceiptLog {
    fn from(log: JsonLinesLog) -> Self {
        ReceiptLog::Lines(log)
    }
}

impl From<ObjectReceiptLog> for ReceiptLog {
    fn from(log: ObjectReceiptLog) -> Self {
        ReceiptLog::Objects(log)
    }
}

impl ReceiptLog {
    /// The log `spec` names: a location on object storage (`s3://…`, `abfss://…`, `gs://…`,
    /// reached with `catalog`'s storage properties), else a local file (`file://` or a path).
    pub fn open(catalog: &crate::catalog::Catalog, spec: &str) -> Result<Self> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err(Error::validation("the receipt log's location is empty"));
        }
        if spec.contains("://") && !spec.starts_with("file:") {
            return Ok(ObjectReceiptLog::new(catalog.storage(), spec)?.into());
        }
        Ok(JsonLinesLog::new(spec.strip_prefix("file://").unwrap_or(spec)).into())
    }

    /// Append receipts.
    pub async fn append(&self, receipts: &[Receipt]) -> Result<()> {
        match self {
            ReceiptLog::Lines(l) => {
                let (l, receipts) = (l.clone(), receipts.to_vec());
                tokio::task::spawn_blocking(move || l.append(&receipts))
                    .await
                    .map_err(|e| Error::compute("appending receipts", e))?
            }
            ReceiptLog::Objects(o) => o.append(receipts).await,
        }
    }

    /// Every receipt, oldest first.
    pub async fn read(&self) -> Result<Vec<Receipt>> {
        match self {
            ReceiptLog::Lines(l) => {
                let l = l.clone();
                tokio::task::spawn_blocking(move || l.read())
                    .await
                    .map_err(|e| Error::compute("reading receipts", e))?
            }
            ReceiptLog::Objects(o) => o.read().await,
        }
    }
}
