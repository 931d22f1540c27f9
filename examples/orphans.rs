//! Find (and on request delete) a table's orphan files, or report its missing files, and print
//! the outcome as JSON (used by the cross-engine tests and the benchmark harness).
//!
//! ```text
//! cargo run --example orphans -- [remove] --catalog catalog.json --table db.events \
//!     [--delete] [--older-than 'YYYY-MM-DD HH:MM:SS' | --older-than-ms MS] \
//!     [--allow-short-retention] [--prefix-mismatch error|ignore|delete] \
//!     [--equal-scheme s3a,s3n=s3]... [--equal-authority host=bucket]... \
//!     [--protect-shared] [--concurrency N] [--now-ms MS]
//! cargo run --example orphans -- missing --catalog catalog.json --table db.events [--concurrency N]
//! ```
//!
//! Without `--delete` nothing is deleted (the dry run is the default in core). `--older-than` is
//! UTC. `--now-ms` fixes the clock (for the default 3-day window and the 1-day floor).
//! `catalog.json` is `{"name": "...", "properties": {"uri": "...", ...}}` (PyIceberg's names).

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line example reports on the terminal"
)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use cryo_core::clock::{Clock, FixedClock, SystemClock};
use cryo_core::maintain::{
    FindMissingFiles, FindMissingFilesOptions, PrefixMismatchMode, RemoveOrphanFiles,
    RemoveOrphanFilesOptions, SharedLocationMode,
};
use cryo_core::{Catalog, CatalogConfig, Error, Result, TableId};

enum Command {
    Remove(RemoveOrphanFilesOptions),
    Missing(FindMissingFilesOptions),
}

struct Args {
    catalog: PathBuf,
    table: String,
    now_ms: Option<i64>,
    command: Command,
}

fn parse_mapping(v: &str) -> std::result::Result<(String, String), String> {
    v.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("`{v}` is not FROM=TO"))
}

fn parse_timestamp(v: &str) -> std::result::Result<i64, String> {
    let t = chrono::NaiveDateTime::parse_from_str(v, "%Y-%m-%d %H:%M:%S%.f")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(v, "%Y-%m-%dT%H:%M:%S%.f"))
        .map_err(|e| format!("--older-than `{v}`: {e}"))?;
    Ok(t.and_utc().timestamp_millis())
}

fn parse() -> std::result::Result<Args, String> {
    let mut it = std::env::args().skip(1).peekable();
    let missing = match it.peek().map(String::as_str) {
        Some("missing") => {
            it.next();
            true
        }
        Some("remove") => {
            it.next();
            false
        }
        _ => false,
    };
    let (mut catalog, mut table, mut now_ms) = (None, None, None);
    let mut remove = RemoveOrphanFilesOptions::default();
    let mut check = FindMissingFilesOptions::default();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        let num = |v: String| v.parse::<i64>().map_err(|e| format!("{a}: {e}"));
        match a.as_str() {
            "--catalog" => catalog = Some(PathBuf::from(value()?)),
            "--table" => table = Some(value()?),
            "--now-ms" => now_ms = Some(num(value()?)?),
            "--concurrency" => {
                let n = value()?.parse().map_err(|e| format!("{a}: {e}"))?;
                remove.concurrency = n;
                check.concurrency = n;
            }
            "--delete" if !missing => remove.dry_run = false,
            "--older-than" if !missing => remove.older_than_ms = Some(parse_timestamp(&value()?)?),
            "--older-than-ms" if !missing => remove.older_than_ms = Some(num(value()?)?),
            "--allow-short-retention" if !missing => remove.allow_short_retention = true,
            "--protect-shared" if !missing => {
                remove.shared_location = SharedLocationMode::ProtectReferenced;
            }
            "--prefix-mismatch" if !missing => {
                remove.prefix_mismatch = match value()?.as_str() {
                    "error" => PrefixMismatchMode::Error,
                    "ignore" => PrefixMismatchMode::Ignore,
                    "delete" => PrefixMismatchMode::Delete,
                    other => return Err(format!("unknown prefix-mismatch mode `{other}`")),
                };
            }
            "--equal-scheme" if !missing => {
                let (k, v) = parse_mapping(&value()?)?;
                remove.equal_schemes.insert(k, v);
            }
            "--equal-authority" if !missing => {
                let (k, v) = parse_mapping(&value()?)?;
                remove.equal_authorities.insert(k, v);
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Args {
        catalog: catalog.ok_or("--catalog is required")?,
        table: table.ok_or("--table is required")?,
        now_ms,
        command: if missing {
            Command::Missing(check)
        } else {
            Command::Remove(remove)
        },
    })
}

async fn run(args: Args) -> Result<serde_json::Value> {
    let text = std::fs::read_to_string(&args.catalog).map_err(|e| Error::Config {
        message: format!("cannot read {}: {e}", args.catalog.display()),
    })?;
    let config: CatalogConfig = serde_json::from_str(&text).map_err(|e| Error::Config {
        message: format!("{} is not a catalog config: {e}", args.catalog.display()),
    })?;
    let catalog = Catalog::connect(config).await?;
    let id = TableId::parse(&args.table)?;
    let clock: Arc<dyn Clock> = match args.now_ms {
        Some(ms) => Arc::new(FixedClock(ms)),
        None => Arc::new(SystemClock),
    };
    let to_json = |v: serde_json::Result<serde_json::Value>| {
        v.map_err(|e| Error::Internal(format!("outcome does not serialize: {e}")))
    };
    match args.command {
        Command::Remove(options) => {
            let out = RemoveOrphanFiles::new(&catalog, id)
                .with_options(options)
                .with_clock(clock)
                .execute()
                .await?;
            let mut v = to_json(serde_json::to_value(&out))?;
            v["before"] = to_json(serde_json::to_value(out.before()))?;
            v["after"] = to_json(serde_json::to_value(out.after()))?;
            Ok(v)
        }
        Command::Missing(options) => {
            let out = FindMissingFiles::new(&catalog, id)
                .with_options(options)
                .with_clock(clock)
                .execute()
                .await?;
            let mut v = to_json(serde_json::to_value(&out))?;
            v["before"] = to_json(serde_json::to_value(out.before()))?;
            v["after"] = to_json(serde_json::to_value(out.after()))?;
            Ok(v)
        }
    }
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
                "usage: orphans [remove] --catalog catalog.json --table ns.table [--delete] [--older-than 'YYYY-MM-DD HH:MM:SS' | --older-than-ms MS] [--allow-short-retention] [--prefix-mismatch error|ignore|delete] [--equal-scheme FROM=TO]... [--equal-authority FROM=TO]... [--protect-shared] [--concurrency N] [--now-ms MS]\n       orphans missing --catalog catalog.json --table ns.table [--concurrency N]"
            );
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(v) => {
            println!("{v}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            // The error's code lets callers tell a refusal from a failure.
            eprintln!(
                "{}",
                serde_json::json!({"error": e.code(), "message": e.to_string()})
            );
            ExitCode::from(match e {
                Error::Refused { .. } => 3,
                _ => 1,
            })
        }
    }
}
