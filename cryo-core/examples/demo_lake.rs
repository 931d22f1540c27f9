//! Build (or reopen) the demo lake and print its manifest path.
//!
//! ```text
//! cargo run -p cryo-core --release --example demo_lake -- /tmp/cryo-demo [--force]
//! ```
//!
//! The manifest (`<root>/demo-lake.json`) names the catalog (`uri`, `warehouse`) and lists every
//! table with the rows, files, snapshots and deletes a reader must find.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line example reports on the terminal"
)]

use std::path::PathBuf;
use std::process::ExitCode;

use cryo_core::demo::{DemoOptions, create_demo_lake};

#[tokio::main]
async fn main() -> ExitCode {
    let mut root = None;
    let mut options = DemoOptions::default();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--force" => options.force_rebuild = true,
            "-h" | "--help" => {
                println!("usage: demo_lake <root> [--force]");
                return ExitCode::SUCCESS;
            }
            other => root = Some(PathBuf::from(other)),
        }
    }
    let Some(root) = root else {
        eprintln!("usage: demo_lake <root> [--force]");
        return ExitCode::from(2);
    };
    match create_demo_lake(&root, &options).await {
        Ok(lake) => {
            eprintln!(
                "{} demo lake in {} ({} ms to build)",
                if lake.built { "built" } else { "reopened" },
                lake.root.display(),
                lake.manifest.build_duration_ms
            );
            for t in &lake.manifest.tables {
                eprintln!(
                    "  {:<18} v{} rows={:<6} snapshots={:<4} data_files={:<4} pos_deletes={:<3} eq_deletes={:<3} dangling={}",
                    t.identifier,
                    t.format_version,
                    t.rows,
                    t.snapshots,
                    t.data_files,
                    t.position_delete_files,
                    t.equality_delete_files,
                    t.dangling_delete_files
                );
            }
            println!("{}", lake.manifest_path().display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error [{}]: {e}", e.code());
            ExitCode::FAILURE
        }
    }
}
