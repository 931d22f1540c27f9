//! Expire snapshots of one table natively and print the outcome as JSON (used by the Spark
//! interop test and the maintenance benchmark; the Python package will wrap the same call).
//!
//! ```text
//! cargo run --release --example expire -- --catalog catalog.json --table db.events \
//!     [--older-than-ms MS] [--retain-last N] [--snapshot-id ID]... [--no-clean-files] \
//!     [--concurrency N] [--execute]
//! ```
//!
//! Without `--execute` this is a dry run (the default lives in core): it prints exactly which
//! snapshots and files a real run would remove and changes nothing. `catalog.json` is
//! `{"name": "...", "properties": {"uri": "...", ...}}` (PyIceberg's property names).

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line example reports on the terminal"
)]

use std::path::PathBuf;
use std::process::ExitCode;

use cryo_core::maintain::{ExpireOptions, ExpireSnapshots};
use cryo_core::{Catalog, CatalogConfig, Error, Result, TableId};

struct Args {
    catalog: PathBuf,
    table: String,
    options: ExpireOptions,
}

fn parse() -> std::result::Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let (mut catalog, mut table) = (None, None);
    let mut options = ExpireOptions::default();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--catalog" => catalog = Some(PathBuf::from(value()?)),
            "--table" => table = Some(value()?),
            "--older-than-ms" => {
                options.older_than_ms = Some(value()?.parse().map_err(|e| format!("{a}: {e}"))?);
            }
            "--retain-last" => {
                options.retain_last = Some(value()?.parse().map_err(|e| format!("{a}: {e}"))?);
            }
            "--snapshot-id" => {
                options
                    .snapshot_ids
                    .push(value()?.parse().map_err(|e| format!("{a}: {e}"))?);
            }
            "--concurrency" => {
                let n: usize = value()?.parse().map_err(|e| format!("{a}: {e}"))?;
                options.max_concurrent_reads = n;
                options.max_concurrent_deletes = n;
            }
            "--no-clean-files" => options.clean_files = false,
            "--execute" => options.dry_run = false,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Args {
        catalog: catalog.ok_or("--catalog is required")?,
        table: table.ok_or("--table is required")?,
        options,
    })
}

async fn run(args: Args) -> Result<()> {
    let text = std::fs::read_to_string(&args.catalog).map_err(|e| Error::Config {
        message: format!("cannot read {}: {e}", args.catalog.display()),
    })?;
    let config: CatalogConfig = serde_json::from_str(&text).map_err(|e| Error::Config {
        message: format!("{} is not a catalog config: {e}", args.catalog.display()),
    })?;
    let catalog = Catalog::connect(config).await?;
    let id = TableId::parse(&args.table)?;
    let outcome = ExpireSnapshots::new(&catalog, id)
        .with_options(args.options)
        .execute()
        .await?;
    let mut json = serde_json::to_value(&outcome)
        .map_err(|e| Error::Internal(format!("outcome to JSON: {e}")))?;
    json["before"] = serde_json::json!(outcome.before());
    json["after"] = serde_json::json!(outcome.after());
    println!("{json}");
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
            eprintln!(
                "usage: expire --catalog catalog.json --table ns.table [--older-than-ms MS] [--retain-last N] [--snapshot-id ID]... [--no-clean-files] [--concurrency N] [--execute]"
            );
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
