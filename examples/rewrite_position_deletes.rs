//! Rewrite one table's position deletes natively and print the outcome as JSON (used by the
//! cross-engine tests; the Python package will wrap the same call).
//!
//! ```text
//! cargo run --example rewrite_position_deletes -- --catalog catalog.json --table db.events \
//!     [--dry-run] [--min-input-files N] [--small-file-size BYTES] [--keep-dangling] \
//!     [--pause-before-commit FILE]
//! ```
//!
//! `catalog.json` is `{"name": "...", "properties": {"uri": "...", ...}}` (PyIceberg's property
//! names). With `--pause-before-commit FILE` the combined delete files are written, `REWRITTEN <n>`
//! is printed (`n` files written), and the commit waits until FILE exists — so a test can let
//! another writer commit in between.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line example reports on the terminal"
)]

use std::path::PathBuf;
use std::process::ExitCode;

use cryo_core::maintain::{RewritePositionDeletes, RewritePositionDeletesOptions};
use cryo_core::{Catalog, CatalogConfig, Error, Result, TableId};

struct Args {
    catalog: PathBuf,
    table: String,
    pause: Option<PathBuf>,
    options: RewritePositionDeletesOptions,
}

fn parse() -> std::result::Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let (mut catalog, mut table, mut pause) = (None, None, None);
    let mut options = RewritePositionDeletesOptions::default();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--catalog" => catalog = Some(PathBuf::from(value()?)),
            "--table" => table = Some(value()?),
            "--dry-run" => options.dry_run = true,
            "--pause-before-commit" => pause = Some(PathBuf::from(value()?)),
            "--min-input-files" => {
                options.min_input_files = value()?.parse().map_err(|e| format!("{a}: {e}"))?;
            }
            "--small-file-size" => {
                options.small_file_size_bytes =
                    Some(value()?.parse().map_err(|e| format!("{a}: {e}"))?);
            }
            "--keep-dangling" => options.remove_dangling = false,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Args {
        catalog: catalog.ok_or("--catalog is required")?,
        table: table.ok_or("--table is required")?,
        pause,
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
    let prepared = RewritePositionDeletes::new(&catalog, id)
        .with_options(args.options)
        .prepare()
        .await?;
    if let Some(flag) = &args.pause {
        println!("REWRITTEN {}", prepared.written_files().len());
        while !flag.exists() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
    let outcome = prepared.commit().await?;
    let mut json = serde_json::to_value(&outcome).map_err(|e| Error::Internal(e.to_string()))?;
    json["before"] = serde_json::json!(outcome.before());
    json["after"] = serde_json::json!(outcome.after());
    json["committed_groups"] = outcome.committed_groups().into();
    json["conflicted_groups"] = outcome.conflicted_groups().into();
    json["failed_groups"] = outcome.failed_groups().into();
    json["files_combined"] = outcome.files_combined().into();
    json["files_dangling"] = outcome.files_dangling().into();
    json["files_added"] = outcome.files_added().into();
    json["rows_dropped"] = outcome.rows_dropped().into();
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
                "usage: rewrite_position_deletes --catalog catalog.json --table ns.table [--dry-run] [--min-input-files N] [--small-file-size BYTES] [--keep-dangling] [--pause-before-commit FILE]"
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
