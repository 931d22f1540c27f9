//! Build a table with a long snapshot history through Cryo's commit layer, for the expiry
//! benchmark (`benches/maintenance/expire.py`).
//!
//! ```text
//! cargo run --release --example make_history -- --root DIR [--snapshots 3000] [--delete-every 10]
//! ```
//!
//! Creates the sqlite catalog `DIR/catalog.db` (catalog name `fixtures`, the schema PyIceberg and
//! Java's `JdbcCatalog` share) with the table `db.history` under `DIR/warehouse`, then commits
//! `--snapshots` snapshots, one second apart in snapshot time (the last one a minute before
//! now): small appends of one file each, and every `--delete-every`-th commit an overwrite that
//! removes the file appended seven commits earlier and adds one, so that expiry has data files,
//! manifests and manifest lists to delete. Old `metadata.json` files are deleted as the table
//! goes (`write.metadata.delete-after-commit.enabled`). Prints a JSON summary: the snapshot ids
//! and timestamps, oldest first.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line benchmark helper reports on the terminal"
)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema as ArrowSchema};
use cryo_core::clock::FixedClock;
use cryo_core::commit::{NewTable, SnapshotProducer, write_data_files};
use cryo_core::{Catalog, CatalogConfig, Error, Namespace, Result, TableId};
use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

struct Args {
    root: PathBuf,
    snapshots: i64,
    delete_every: i64,
}

fn parse() -> std::result::Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut args = Args {
        root: PathBuf::new(),
        snapshots: 3000,
        delete_every: 10,
    };
    let mut root = None;
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--root" => root = Some(PathBuf::from(value()?)),
            "--snapshots" => args.snapshots = value()?.parse().map_err(|e| format!("{a}: {e}"))?,
            "--delete-every" => {
                args.delete_every = value()?.parse().map_err(|e| format!("{a}: {e}"))?;
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    args.root = root.ok_or("--root is required")?;
    if args.snapshots < 1 || args.delete_every < 8 {
        return Err("--snapshots must be positive and --delete-every at least 8".into());
    }
    Ok(args)
}

fn batch(first: i64, n: i64) -> Result<RecordBatch> {
    let schema = Arc::new(ArrowSchema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
    ]));
    let ids: Vec<i64> = (first..first + n).collect();
    let names: Vec<String> = ids.iter().map(|i| format!("row-{i}")).collect();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(ids)) as ArrayRef,
            Arc::new(StringArray::from(names)),
        ],
    )
    .map_err(|e| Error::Internal(format!("batch: {e}")))
}

async fn run(args: Args) -> Result<()> {
    std::fs::create_dir_all(&args.root).map_err(|e| Error::Config {
        message: format!("cannot create {}: {e}", args.root.display()),
    })?;
    let mut config = CatalogConfig::local("fixtures", &args.root);
    config
        .properties
        .insert("init_catalog_tables".into(), "true".into());
    let catalog = Catalog::connect(config).await?;
    catalog.create_namespace(&Namespace::new(["db"])).await?;
    let id = TableId::parse("db.history")?;
    let schema = Schema::builder()
        .with_fields(vec![
            NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            NestedField::optional(2, "name", Type::Primitive(PrimitiveType::String)).into(),
        ])
        .build()
        .map_err(|e| Error::Internal(format!("schema: {e}")))?;
    let now = chrono::Utc::now().timestamp_millis();
    let start = now - 60_000 - args.snapshots * 1000;
    let mut table = catalog
        .create_table(
            &id,
            NewTable::new(schema)
                .with_property("write.metadata.delete-after-commit.enabled", "true")
                .with_property("write.parquet.compression-codec", "zstd")
                .with_clock(Arc::new(FixedClock(start - 1000))),
        )
        .await?;
    let committer = catalog.committer()?;
    let started = Instant::now();
    let mut appended: Vec<String> = Vec::new();
    let mut snapshots = Vec::new();
    for i in 0..args.snapshots {
        let clock = Arc::new(FixedClock(start + i * 1000));
        let written = write_data_files(&table, [batch(i * 10, 10)?]).await?;
        let path = written
            .files
            .first()
            .map(|f| f.file_path().to_string())
            .ok_or_else(|| Error::Internal("no file written".into()))?;
        let mut producer = SnapshotProducer::new(&table)
            .with_clock(clock)
            .add_data_files(written.files);
        if i > 0 && i % args.delete_every == 0 {
            let victim = appended.len().checked_sub(7).map(|k| appended.remove(k));
            producer = producer.delete_data_files(victim);
        }
        let outcome = producer.commit(committer.as_ref()).await?;
        snapshots.push((outcome.snapshot_id, outcome.timestamp_ms));
        table = outcome.table;
        appended.push(path);
        if (i + 1) % 500 == 0 {
            eprintln!(
                "{} snapshots in {:.1}s",
                i + 1,
                started.elapsed().as_secs_f64()
            );
        }
    }
    println!(
        "{}",
        serde_json::json!({
            "table": id.to_string(),
            "metadata_location": table.metadata_location,
            "snapshots": snapshots,
            "seconds": started.elapsed().as_secs_f64(),
        })
    );
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("error: {e}");
            }
            eprintln!("usage: make_history --root DIR [--snapshots N] [--delete-every K]");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error [{}]: {e}", e.code());
            ExitCode::FAILURE
        }
    }
}
