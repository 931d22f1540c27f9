//! Compact one table natively and print the outcome as JSON (used by the cross-engine tests and
//! the benchmark harness; the Python package will wrap the same call).
//!
//! ```text
//! cargo run --release --example compact -- --catalog catalog.json --table db.events \
//!     [--dry-run] [--target-file-size BYTES] [--max-commits N] [--parallel-groups N] \
//!     [--strategy binpack | sort:col,col | zorder:col,col | hilbert:col,col] \
//!     [--pause-before-commit FILE]
//! ```
//!
//! `catalog.json` is `{"name": "...", "properties": {"uri": "...", ...}}` (PyIceberg's property
//! names). With `--pause-before-commit FILE` the files are rewritten, `REWRITTEN` is printed, and
//! the commit waits until FILE exists — so a test can let another writer commit in between.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line example reports on the terminal"
)]

use std::path::PathBuf;
use std::process::ExitCode;

use cryo_core::compact::{CompactOptions, Compaction, RunOptions};
use cryo_core::plan::RewriteStrategy;
use cryo_core::{Catalog, CatalogConfig, Error, Result, TableId};

struct Args {
    catalog: PathBuf,
    table: String,
    dry_run: bool,
    pause: Option<PathBuf>,
    options: CompactOptions,
    run: RunOptions,
}

fn parse() -> std::result::Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let (mut catalog, mut table, mut dry_run, mut pause) = (None, None, false, None);
    let mut options = CompactOptions::default();
    let mut run = RunOptions::default();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--catalog" => catalog = Some(PathBuf::from(value()?)),
            "--table" => table = Some(value()?),
            "--dry-run" => dry_run = true,
            "--pause-before-commit" => pause = Some(PathBuf::from(value()?)),
            "--target-file-size" => {
                options.target_file_size_bytes =
                    Some(value()?.parse().map_err(|e| format!("{a}: {e}"))?);
            }
            "--max-commits" => {
                run.max_commits = value()?.parse().map_err(|e| format!("{a}: {e}"))?;
            }
            "--parallel-groups" => {
                run.parallel_groups = value()?.parse().map_err(|e| format!("{a}: {e}"))?;
            }
            "--memory-budget" => {
                options.memory_budget_bytes = value()?.parse().map_err(|e| format!("{a}: {e}"))?;
            }
            "--strategy" => {
                let v = value()?;
                let cols = |s: &str| s.split(',').map(str::to_string).collect::<Vec<_>>();
                options.strategy = match v.split_once(':') {
                    None if v == "binpack" => RewriteStrategy::BinPack,
                    None if v == "sort" => RewriteStrategy::Sort {
                        columns: Vec::new(),
                    },
                    Some(("sort", c)) => RewriteStrategy::Sort { columns: cols(c) },
                    Some(("zorder", c)) => RewriteStrategy::ZOrder { columns: cols(c) },
                    Some(("hilbert", c)) => RewriteStrategy::Hilbert { columns: cols(c) },
                    _ => return Err(format!("unknown strategy `{v}`")),
                };
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Args {
        catalog: catalog.ok_or("--catalog is required")?,
        table: table.ok_or("--table is required")?,
        dry_run,
        pause,
        options,
        run,
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
    let compaction = Compaction::new(&catalog, id)
        .with_options(args.options)
        .with_run_options(RunOptions {
            dry_run: args.dry_run,
            ..args.run
        });
    let outcome = if let Some(flag) = &args.pause {
        // Two phases, so that a test can commit to the table between the rewrite and the commit.
        let rewritten = compaction.rewrite().await?;
        println!("REWRITTEN {}", rewritten.groups().len());
        while !flag.exists() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        rewritten.commit().await?
    } else {
        // Batches commit while the other groups are still being rewritten.
        compaction.execute().await?
    };
    println!(
        "{}",
        serde_json::json!({
            "table": outcome.table.to_string(),
            "dry_run": outcome.dry_run,
            "base_snapshot_id": outcome.base_snapshot_id,
            "snapshot_ids": outcome.snapshot_ids,
            "groups": outcome.groups,
            "committed_groups": outcome.committed_groups(),
            "conflicted_groups": outcome.conflicted_groups(),
            "failed_groups": outcome.failed_groups(),
            "files_in": outcome.files_in(),
            "bytes_in": outcome.bytes_in(),
            "files_out": outcome.files_out(),
            "bytes_out": outcome.bytes_out(),
            "rows_deleted": outcome.rows_deleted(),
            "delete_files_removed": outcome.delete_files_removed(),
            "retries": outcome.retries(),
            "codec": outcome.codec,
            "duration_ms": outcome.duration_ms,
            "commit_ms": outcome.commit_ms,
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
            eprintln!(
                "usage: compact --catalog catalog.json --table ns.table [--dry-run] [--target-file-size BYTES] [--max-commits N] [--parallel-groups N] [--memory-budget BYTES] [--strategy binpack|sort:a,b|zorder:a,b|hilbert:a,b] [--pause-before-commit FILE]"
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
