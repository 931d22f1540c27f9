//! Human-readable text for scans, grades and plans (the quickstart and CLI print it).

use std::fmt::Write;

use crate::grade::{Finding, HealthReport, Severity};
use crate::plan::{MaintenancePlan, PlannedStep, StepParams};
use crate::scan::{FleetScan, TableScan};

/// Bytes for people: `48.2 MiB`.
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i < UNITS.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

fn usd(v: f64) -> String {
    if v >= 100.0 {
        format!("${v:.0}")
    } else if v >= 1.0 {
        format!("${v:.2}")
    } else {
        format!("${v:.4}")
    }
}

fn utc(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |t| t.format("%Y-%m-%d %H:%M UTC").to_string(),
    )
}

fn measured(f: &Finding) -> String {
    match f.unit.as_str() {
        "ratio" | "coverage" => format!(
            "{:.0}% (threshold {:.0}%)",
            f.measured * 100.0,
            f.threshold * 100.0
        ),
        unit => format!(
            "{} {unit} (threshold {})",
            trim(f.measured),
            trim(f.threshold)
        ),
    }
}

fn trim(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// One line per table: grade, score, size, files, snapshots, deletes, monthly cost.
pub fn fleet_table(scans: &[TableScan], reports: &[HealthReport]) -> String {
    let mut out = String::new();
    let width = reports
        .iter()
        .map(|r| r.table.to_string().len())
        .max()
        .unwrap_or(5)
        .max(5);
    let _ = writeln!(
        out,
        "{:<width$}  GRADE  SCORE  {:>7}  {:>10}  {:>9}  {:>8}  {:>10}",
        "TABLE", "FILES", "SIZE", "SNAPSHOTS", "DELETES", "COST/MONTH"
    );
    for r in reports {
        let Some(s) = scans.iter().find(|s| s.table == r.table) else {
            continue;
        };
        let _ = writeln!(
            out,
            "{:<width$}  {:<5}  {:>5}  {:>7}  {:>10}  {:>9}  {:>8}  {:>10}",
            r.table.to_string(),
            r.grade.to_string(),
            r.score,
            s.data_files.count,
            bytes(s.data_files.bytes),
            s.snapshots.count,
            s.delete_files.files(),
            usd(r.cost.storage_usd_month + r.cost.request_usd_month),
        );
    }
    out
}

/// A table's grade with every deduction, its fix and the cost.
pub fn health_report(r: &HealthReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}  grade {} ({}/100)", r.table, r.grade, r.score);
    if r.findings.is_empty() {
        let _ = writeln!(out, "  all {} checks pass", r.passed.len());
    }
    for f in &r.findings {
        let sev = match f.severity {
            Severity::Crit => "CRIT",
            Severity::Warn => "WARN",
        };
        let _ = writeln!(
            out,
            "  {sev} -{:<2} {:<24} {}",
            f.points,
            f.code,
            measured(f)
        );
        let _ = writeln!(out, "           {}", f.reason);
        let _ = writeln!(out, "           fix: {}", f.remedy);
    }
    let c = &r.cost;
    let _ = write!(
        out,
        "  cost: {} storage + {} requests per month",
        usd(c.storage_usd_month),
        usd(c.request_usd_month)
    );
    if c.retained_by_snapshots_bytes > 0 {
        let _ = write!(
            out,
            "; {} held only by old snapshots",
            bytes(c.retained_by_snapshots_bytes)
        );
    }
    out.push('\n');
    for s in &c.savings {
        let _ = write!(
            out,
            "        {} saves {}/month",
            s.operation,
            usd(s.usd_month)
        );
        if s.files_fewer > 0 {
            let _ = write!(out, " ({} fewer files to open)", s.files_fewer);
        }
        if s.bytes_freed > 0 {
            let _ = write!(out, " ({} freed)", bytes(s.bytes_freed));
        }
        out.push('\n');
    }
    out
}

fn step_line(step: &PlannedStep) -> String {
    let scope = if step.chunks.iter().any(|c| c.whole_table) {
        "whole table".to_string()
    } else {
        let parts: usize = step.chunks.iter().map(|c| c.partitions.len()).sum();
        format!("{parts} partitions in {} chunks", step.chunks.len())
    };
    let detail = match &step.params {
        StepParams::RewriteDataFiles {
            target_file_size_bytes,
            ..
        } => format!(
            "{scope}: {} files / {} -> ~{} files of {}",
            step.input_files(),
            bytes(step.input_bytes()),
            step.chunks
                .iter()
                .map(|c| c.expected_output_files)
                .sum::<u64>(),
            bytes(*target_file_size_bytes)
        ),
        StepParams::ConvertEqualityDeletes { .. } | StepParams::RewritePositionDeletes { .. } => {
            format!(
                "{scope}: {} files / {}",
                step.input_files(),
                bytes(step.input_bytes())
            )
        }
        StepParams::ComputeStatistics { .. } => "all columns".to_string(),
        StepParams::RewriteManifests {
            target_manifest_size_bytes,
        } => format!(
            "{} manifests -> manifests of ~{}",
            step.input_files(),
            bytes(*target_manifest_size_bytes)
        ),
        StepParams::ExpireSnapshots {
            older_than_ms,
            retain_last,
            ..
        } => format!(
            "{} snapshots older than {}, keeping the newest {retain_last}",
            step.input_files(),
            utc(*older_than_ms)
        ),
        StepParams::RemoveOrphanFiles {
            older_than_ms,
            dry_run,
            ..
        } => format!(
            "files older than {}{}",
            utc(*older_than_ms),
            if *dry_run { " (dry run)" } else { "" }
        ),
    };
    format!(
        "{:<26} {detail}  [{}]",
        step.operation.as_str(),
        step.because.join(", ")
    )
}

/// The plan, table by table.
pub fn plan_text(plan: &MaintenancePlan) -> String {
    let mut out = String::new();
    let steps: usize = plan.tables.iter().map(|t| t.steps.len()).sum();
    let _ = writeln!(
        out,
        "plan {} for catalog `{}`: {} tables, {} steps (made for {})",
        &plan.fingerprint.get(..12).unwrap_or(&plan.fingerprint),
        plan.catalog,
        plan.tables.len(),
        steps,
        utc(plan.created_at_ms)
    );
    if let Some(policy) = &plan.policy {
        let _ = writeln!(out, "  under policy {}", policy.get(..12).unwrap_or(policy));
    }
    for t in &plan.tables {
        let _ = write!(out, "  {} (grade {}, {})", t.table, t.grade, t.score);
        if let Some(p) = &t.policy {
            let _ = write!(
                out,
                ": preset {} on {}, by {}",
                p.preset, p.destination, p.assignment
            );
        }
        out.push('\n');
        for (i, s) in t.steps.iter().enumerate() {
            let _ = writeln!(out, "    {}. {}", i + 1, step_line(s));
        }
        for s in &t.skipped {
            let _ = writeln!(out, "    skipped {}: {}", s.operation, s.reason);
        }
    }
    for s in &plan.skipped_tables {
        let _ = writeln!(out, "  {}: {}", s.table, s.reason);
    }
    out
}

/// One line per receipt: table, operation, status, files and bytes before → after, reason.
pub fn receipts_text(receipts: &[crate::receipt::Receipt]) -> String {
    let mut out = String::new();
    for r in receipts {
        let op = r.operation.map_or("-", crate::ops::Operation::as_str);
        let change = match (r.before, r.after) {
            (Some(b), Some(a)) if a.files > 0 || a.bytes > 0 => format!(
                "{} files / {} -> {} files / {}",
                b.files,
                bytes(b.bytes),
                a.files,
                bytes(a.bytes)
            ),
            (Some(b), _) if b.files > 0 => format!("{} files / {}", b.files, bytes(b.bytes)),
            _ => String::new(),
        };
        let _ = write!(
            out,
            "  {:<22} {:<26} {:<9}",
            r.table.to_string(),
            op,
            r.status.as_str()
        );
        if !change.is_empty() {
            let _ = write!(out, " {change}");
        }
        if let Some(ms) = r.duration_ms {
            let _ = write!(out, " ({ms} ms)");
        }
        if let Some(reason) = &r.reason {
            let _ = write!(out, " - {reason}");
        }
        out.push('\n');
    }
    out
}

/// Errors of a fleet scan, one per line.
pub fn scan_errors(fleet: &FleetScan) -> String {
    let mut out = String::new();
    for e in &fleet.errors {
        let _ = writeln!(out, "  ! {} [{}]: {}", e.target, e.code, e.message);
    }
    out
}
