//! Planner invariants, checked on generated tables (proptest).

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;
use crate::catalog::{Namespace, TableId};
use crate::grade::{GradeOptions, grade};
use crate::io::IoSnapshot;
use crate::ops::Operation;
use crate::scan::*;

const MIB: u64 = 1 << 20;

/// A synthetic partition: (data files, small files, bytes per file, position deletes, eq deletes, spec).
type PartSpec = (u64, u64, u64, u64, u64, bool);

#[allow(
    clippy::too_many_lines,
    reason = "a fixture: one literal spelling out every field of a TableScan"
)]
pub(crate) fn synthetic_scan(parts: &[PartSpec], snapshots: usize, now_ms: i64) -> TableScan {
    let target = 128 * MIB;
    let day0 = 19_000i64;
    let mut data = FileStats::default();
    let mut deletes = DeleteStats::default();
    let mut partitions = Vec::new();
    for (i, (files, small, size, pos, eq, old)) in parts.iter().enumerate() {
        let spec_id = i32::from(!*old);
        let mut fs = FileStats::default();
        for f in 0..*files {
            let s = if f < *small {
                (*size).min(target / 2)
            } else {
                target
            };
            fs.add(s.max(1), 100, target * 3 / 4);
        }
        let mut ds = DeleteStats::default();
        ds.position.files = *pos;
        ds.position.bytes = pos * 4096;
        ds.position.records = pos * 10;
        ds.equality.files = *eq;
        ds.equality.bytes = eq * 4096;
        ds.equality.records = eq * 5;
        data.merge(&fs);
        deletes.merge(&ds);
        let v = day0 + i as i64;
        partitions.push(PartitionStats {
            spec_id,
            values: vec![PartitionFieldValue {
                field: "ts_day".into(),
                value: PartitionValue::Int(v),
                human: format!("d{v}"),
            }],
            path: format!("ts_day=d{v:08}"),
            data_files: fs,
            delete_files: ds,
            last_modified_ms: Some(now_ms - 1000),
            min_data_sequence_number: Some(1),
        });
    }
    let spec = |id| PartitionSpecInfo {
        spec_id: id,
        fields: vec![PartitionFieldInfo {
            field_id: 1000,
            name: "ts_day".into(),
            source_id: 2,
            source_column: Some("ts".into()),
            source_type: Some("timestamptz".into()),
            transform: "day".into(),
        }],
    };
    let snaps: Vec<SnapshotInfo> = (0..snapshots)
        .map(|i| SnapshotInfo {
            snapshot_id: i as i64 + 1,
            parent_id: (i > 0).then_some(i as i64),
            sequence_number: i as i64 + 1,
            timestamp_ms: now_ms - (snapshots - i) as i64 * 3_600_000,
            operation: "append".into(),
            manifest_count: Some(i as u32 + 1),
            manifest_list_bytes: Some(1000),
            added_data_files: Some(1),
            added_records: Some(100),
            removed_files_bytes: None,
        })
        .collect();
    TableScan {
        catalog: "c".into(),
        table: TableId::new(Namespace::new(["db"]), "t"),
        metadata_location: None,
        location: "file:///wh/db/t".into(),
        table_uuid: "00000000-0000-0000-0000-000000000000".into(),
        format_version: 2,
        scanned_at_ms: now_ms,
        last_updated_ms: now_ms,
        current_snapshot_id: snaps.last().map(|s| s.snapshot_id),
        properties: BTreeMap::new(),
        write: WriteSettings {
            target_file_size_bytes: target,
            small_file_threshold_bytes: target * 3 / 4,
            parquet_codec: None,
            file_format: "parquet".into(),
            delete_mode: "merge-on-read".into(),
            update_mode: "merge-on-read".into(),
            merge_mode: "merge-on-read".into(),
            manifest_target_size_bytes: 8 * MIB,
            max_snapshot_age_ms: 5 * 86_400_000,
            min_snapshots_to_keep: 1,
            metadata_previous_versions_max: 100,
            metadata_delete_after_commit: false,
            metrics_default: None,
        },
        schema: SchemaInfo {
            schema_id: 0,
            schema_count: 1,
            columns: vec![],
            leaf_column_count: 2,
        },
        partitioning: PartitioningInfo {
            default_spec_id: 1,
            specs: vec![spec(0), spec(1)],
        },
        sort_order: SortOrderInfo {
            order_id: 0,
            fields: vec![],
        },
        snapshots: SnapshotStats {
            count: snaps.len(),
            oldest_ms: snaps.first().map(|s| s.timestamp_ms),
            newest_ms: snaps.last().map(|s| s.timestamp_ms),
            refs: vec![],
            snapshots: snaps,
        },
        manifests: ManifestStats {
            count: 40,
            small_count: 40,
            total_bytes: 40 * 8000,
            ..ManifestStats::default()
        },
        data_files: data,
        delete_files: deletes,
        metadata_files: MetadataFileStats::default(),
        column_stats: ColumnStatsCoverage::default(),
        partitions,
        io: IoSnapshot::default(),
        duration_ms: 0,
    }
}

fn part_strategy() -> impl Strategy<Value = PartSpec> {
    (
        0u64..40,
        0u64..40,
        1u64..(300 * MIB),
        0u64..6,
        0u64..3,
        proptest::bool::weighted(0.2),
    )
        .prop_map(|(files, small, size, pos, eq, old)| {
            (files, small.min(files), size, pos, eq, old)
        })
}

fn options_strategy() -> impl Strategy<Value = PlanOptions> {
    (
        (64 * MIB)..(4 * 1024 * MIB),
        1usize..8,
        proptest::option::of((128 * MIB)..(8 * 1024 * MIB)),
        0u64..(2 * 1024 * MIB),
    )
        .prop_map(|(chunk, cap, table_budget, small_table)| PlanOptions {
            chunk_budget_bytes: chunk,
            max_partitions_per_chunk: cap,
            table_budget_bytes: table_budget,
            small_table_bytes: small_table,
            ..PlanOptions::default()
        })
}

const NOW: i64 = 1_800_000_000_000;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn no_partition_twice_and_budgets_hold(parts in proptest::collection::vec(part_strategy(), 0..40),
                                            snaps in 1usize..300,
                                            options in options_strategy()) {
        let scan = synthetic_scan(&parts, snaps, NOW);
        let report = grade(&scan, &GradeOptions::default(), NOW).unwrap();
        let plan = plan_table(&scan, &report, &options, &TableControl::default(), NOW).unwrap();

        // Operations appear once each, in the fixed order.
        let ops: Vec<Operation> = plan.steps.iter().map(|s| s.operation).collect();
        let mut sorted = ops.clone();
        sorted.sort();
        sorted.dedup();
        prop_assert_eq!(&ops, &sorted);

        let unpartitioned = scan.partitioning.specs.iter().any(crate::scan::PartitionSpecInfo::is_unpartitioned);
        // No partition in two chunks or two steps.
        let mut seen = BTreeSet::new();
        let mut rewritten = 0u64;
        for step in &plan.steps {
            let partitioned = matches!(step.operation,
                Operation::ConvertEqualityDeletes | Operation::RewritePositionDeletes | Operation::RewriteDataFiles);
            for chunk in &step.chunks {
                prop_assert!(chunk.partitions.len() <= options.max_partitions_per_chunk);
                if chunk.partitions.len() > 1 {
                    prop_assert!(chunk.input_bytes <= options.chunk_budget_bytes,
                        "chunk of {} partitions reads {} > budget {}", chunk.partitions.len(), chunk.input_bytes, options.chunk_budget_bytes);
                }
                prop_assert_eq!(chunk.input_bytes, if chunk.whole_table { chunk.input_bytes } else { chunk.partitions.iter().map(|p| p.bytes).sum::<u64>() });
                for p in &chunk.partitions {
                    prop_assert!(seen.insert((p.spec_id, p.path.clone())), "{} planned twice", p.path);
                    prop_assert!(!p.predicate.is_empty());
                }
                if partitioned {
                    rewritten += chunk.input_bytes;
                    if chunk.whole_table {
                        prop_assert!(scan.data_files.bytes + scan.delete_files.bytes() <= options.small_table_bytes
                            || step.operation == Operation::ConvertEqualityDeletes
                            || unpartitioned);
                    }
                }
            }
        }
        if let Some(budget) = options.table_budget_bytes {
            prop_assert!(rewritten <= budget, "rewrote {} over budget {}", rewritten, budget);
        }
        // Every operation a finding asks for is either planned or skipped with a reason.
        for op in report.operations() {
            prop_assert!(ops.contains(&op) || plan.skipped.iter().any(|s| s.operation == op && !s.reason.is_empty()),
                "{op} called for but neither planned nor skipped");
        }
    }

    #[test]
    fn fleet_plans_are_deterministic_and_round_trip(parts in proptest::collection::vec(part_strategy(), 0..20),
                                                    snaps in 1usize..50,
                                                    fleet_budget in proptest::option::of(0u64..(4 * 1024 * MIB))) {
        let scan = synthetic_scan(&parts, snaps, NOW);
        let report = grade(&scan, &GradeOptions::default(), NOW).unwrap();
        let options = PlanOptions { fleet_budget_bytes: fleet_budget, ..PlanOptions::default() };
        let a = plan_fleet("c", &[(scan.clone(), report.clone())], &options, &BTreeMap::new(), NOW).unwrap();
        let b = plan_fleet("c", &[(scan, report)], &options, &BTreeMap::new(), NOW).unwrap();
        prop_assert_eq!(&a.fingerprint, &b.fingerprint);
        let back = MaintenancePlan::from_json(&a.to_json().unwrap()).unwrap();
        prop_assert_eq!(&back, &a);
        if let Some(budget) = fleet_budget {
            let used: u64 = a.tables.iter().flat_map(|t| &t.steps)
                .filter(|s| matches!(s.operation, Operation::ConvertEqualityDeletes | Operation::RewritePositionDeletes | Operation::RewriteDataFiles))
                .map(PlannedStep::input_bytes).sum();
            prop_assert!(used <= budget);
        }
    }
}

#[test]
fn tampered_plans_are_refused() {
    let scan = synthetic_scan(&[(30, 30, MIB, 3, 0, false)], 10, NOW);
    let report = grade(&scan, &GradeOptions::default(), NOW).unwrap();
    let plan = plan_fleet(
        "c",
        &[(scan, report)],
        &PlanOptions::default(),
        &BTreeMap::new(),
        NOW,
    )
    .unwrap();
    assert!(!plan.tables.is_empty());
    plan.verify_reviewed(&plan.fingerprint).unwrap();
    let json = plan
        .to_json()
        .unwrap()
        .replace("\"min_input_files\": 5", "\"min_input_files\": 1");
    let err = MaintenancePlan::from_json(&json).unwrap_err();
    assert!(err.to_string().contains("fingerprint mismatch"), "{err}");
    assert!(plan.verify_reviewed("0000").is_err());
}

#[test]
fn pauses_cooldowns_windows_and_deadlines_say_why() {
    let scan = synthetic_scan(
        &[(30, 30, MIB, 0, 0, false), (30, 30, MIB, 0, 0, false)],
        200,
        NOW,
    );
    let report = grade(&scan, &GradeOptions::default(), NOW).unwrap();
    assert!(report.operations().contains(&Operation::RewriteDataFiles));

    let paused = TableControl {
        paused: true,
        pause_reason: Some("migration".into()),
        ..TableControl::default()
    };
    let plan = plan_fleet(
        "c",
        &[(scan.clone(), report.clone())],
        &PlanOptions::default(),
        &BTreeMap::from([(scan.table.clone(), paused)]),
        NOW,
    )
    .unwrap();
    assert!(plan.tables.is_empty());
    assert_eq!(plan.skipped_tables[0].reason, "paused: migration");

    let recent = TableControl {
        last_runs: BTreeMap::from([(Operation::RewriteDataFiles, NOW - 3_600_000)]),
        ..TableControl::default()
    };
    let tp = plan_table(&scan, &report, &PlanOptions::default(), &recent, NOW).unwrap();
    assert!(
        tp.steps
            .iter()
            .all(|s| s.operation != Operation::RewriteDataFiles)
    );
    let skip = tp
        .skipped
        .iter()
        .find(|s| s.operation == Operation::RewriteDataFiles)
        .unwrap();
    assert!(
        skip.reason.starts_with("cooldown: last ran 1.0h ago"),
        "{}",
        skip.reason
    );

    // NOW is 08:00 UTC; a 02:00-05:00 window is closed, 22:00-09:00 (wrapping) is open.
    let windowed = PlanOptions {
        window: Some(Window {
            start_hour: 2,
            end_hour: 5,
        }),
        ..PlanOptions::default()
    };
    let tp = plan_table(&scan, &report, &windowed, &TableControl::default(), NOW).unwrap();
    assert!(tp.steps.is_empty());
    assert!(
        tp.skipped.iter().all(|s| s
            .reason
            .starts_with("outside the off-peak window 02:00-05:00 UTC")),
        "{:?}",
        tp.skipped
    );
    let open = PlanOptions {
        window: Some(Window {
            start_hour: 22,
            end_hour: 9,
        }),
        ..PlanOptions::default()
    };
    assert!(
        !plan_table(&scan, &report, &open, &TableControl::default(), NOW)
            .unwrap()
            .steps
            .is_empty()
    );

    let big = synthetic_scan(&[(400, 400, 60 * MIB, 0, 0, false)], 3, NOW);
    let big_report = grade(&big, &GradeOptions::default(), NOW).unwrap();
    let rushed = TableControl {
        deadline_ms: Some(NOW + 10_000),
        ..TableControl::default()
    };
    let tp = plan_table(&big, &big_report, &PlanOptions::default(), &rushed, NOW).unwrap();
    let skip = tp
        .skipped
        .iter()
        .find(|s| s.operation == Operation::RewriteDataFiles)
        .unwrap();
    assert!(skip.reason.starts_with("deadline:"), "{}", skip.reason);
}

#[test]
fn small_tables_run_whole_and_big_partitions_alone() {
    let small = synthetic_scan(
        &[(20, 20, MIB, 0, 0, false), (20, 20, MIB, 0, 0, false)],
        2,
        NOW,
    );
    let r = grade(&small, &GradeOptions::default(), NOW).unwrap();
    let tp = plan_table(
        &small,
        &r,
        &PlanOptions::default(),
        &TableControl::default(),
        NOW,
    )
    .unwrap();
    let step = tp
        .steps
        .iter()
        .find(|s| s.operation == Operation::RewriteDataFiles)
        .unwrap();
    assert_eq!(step.chunks.len(), 1);
    assert!(step.chunks[0].whole_table);

    let big = synthetic_scan(
        &[
            (40, 40, 60 * MIB, 0, 0, false),
            (6, 6, MIB, 0, 0, false),
            (6, 6, MIB, 0, 0, false),
        ],
        2,
        NOW,
    );
    let r = grade(&big, &GradeOptions::default(), NOW).unwrap();
    let opts = PlanOptions {
        chunk_budget_bytes: 1024 * MIB,
        small_table_bytes: 0,
        ..PlanOptions::default()
    };
    let tp = plan_table(&big, &r, &opts, &TableControl::default(), NOW).unwrap();
    let step = tp
        .steps
        .iter()
        .find(|s| s.operation == Operation::RewriteDataFiles)
        .unwrap();
    assert!(step.chunks.iter().all(|c| !c.whole_table));
    let alone = step
        .chunks
        .iter()
        .find(|c| c.input_bytes > 1024 * MIB)
        .unwrap();
    assert_eq!(alone.partitions.len(), 1);
    assert_eq!(
        step.chunks
            .iter()
            .map(|c| c.partitions.len())
            .sum::<usize>(),
        3
    );
}

/// A small table runs whole: its `convert_equality_deletes` is a rewrite-all of the whole
/// table, so the chunk must count (and take) every partition, not only those with deletes.
#[test]
fn a_whole_table_convert_counts_the_whole_table() {
    let scan = synthetic_scan(
        &[(4, 4, MIB, 0, 2, false), (20, 20, MIB, 0, 0, false)],
        2,
        NOW,
    );
    let r = grade(&scan, &GradeOptions::default(), NOW).unwrap();
    let tp = plan_table(
        &scan,
        &r,
        &PlanOptions::default(),
        &TableControl::default(),
        NOW,
    )
    .unwrap();
    let convert: Vec<_> = tp
        .steps
        .iter()
        .filter(|s| s.operation == Operation::ConvertEqualityDeletes)
        .collect();
    assert_eq!(convert.len(), 1, "{tp:#?}");
    let c = &convert[0].chunks[0];
    assert!(c.whole_table);
    assert_eq!(
        c.input_bytes,
        scan.data_files.bytes + scan.delete_files.bytes()
    );
    // The rewrite-all already rewrites the small files: no second whole-table rewrite.
    assert!(
        tp.steps
            .iter()
            .all(|s| s.operation != Operation::RewriteDataFiles),
        "{tp:#?}"
    );
}

#[test]
fn unpartitioned_tables_run_whole_even_when_large() {
    let mut scan = synthetic_scan(&[(40, 40, 60 * MIB, 0, 0, false)], 2, NOW);
    for spec in &mut scan.partitioning.specs {
        spec.fields.clear();
    }
    for p in &mut scan.partitions {
        p.values.clear();
        p.path.clear();
    }
    let r = grade(&scan, &GradeOptions::default(), NOW).unwrap();
    let opts = PlanOptions {
        small_table_bytes: 0,
        chunk_budget_bytes: MIB,
        ..PlanOptions::default()
    };
    let tp = plan_table(&scan, &r, &opts, &TableControl::default(), NOW).unwrap();
    let step = tp
        .steps
        .iter()
        .find(|s| s.operation == Operation::RewriteDataFiles)
        .unwrap();
    assert_eq!(step.chunks.len(), 1);
    assert!(step.chunks[0].whole_table && step.chunks[0].partitions.is_empty());

    // A partition whose source column was dropped cannot be targeted: skipped, with the reason.
    let mut scan = synthetic_scan(
        &[(40, 40, MIB, 0, 0, false), (40, 40, MIB, 0, 0, false)],
        2,
        NOW,
    );
    scan.partitioning.specs[1].fields[0].source_column = None;
    let r = grade(&scan, &GradeOptions::default(), NOW).unwrap();
    let tp = plan_table(&scan, &r, &opts, &TableControl::default(), NOW).unwrap();
    assert!(
        tp.steps
            .iter()
            .all(|s| s.operation != Operation::RewriteDataFiles)
    );
    assert!(
        tp.skipped
            .iter()
            .any(|s| s.operation == Operation::RewriteDataFiles
                && s.reason.contains("source column was dropped")),
        "{:?}",
        tp.skipped
    );
}

#[test]
fn invalid_options_are_rejected() {
    for bad in [
        PlanOptions {
            chunk_budget_bytes: 0,
            ..PlanOptions::default()
        },
        PlanOptions {
            max_partitions_per_chunk: 0,
            ..PlanOptions::default()
        },
        PlanOptions {
            orphans: OrphanPolicy {
                retention_ms: 60_000,
                ..OrphanPolicy::default()
            },
            ..PlanOptions::default()
        },
        PlanOptions {
            strategy: RewriteStrategy::ZOrder {
                columns: vec!["a".into()],
            },
            ..PlanOptions::default()
        },
        PlanOptions {
            window: Some(Window {
                start_hour: 25,
                end_hour: 3,
            }),
            ..PlanOptions::default()
        },
    ] {
        assert!(matches!(
            bad.validate(),
            Err(crate::Error::Validation { .. })
        ));
    }
}

#[test]
fn windows_wrap_past_midnight() {
    let h = |hour: i64| hour * 3_600_000;
    let open = |w, at| super::window_opens_in(w, at).is_none();
    let night = Window {
        start_hour: 22,
        end_hour: 4,
    };
    assert!(open(night, h(23)));
    assert!(open(night, h(24 + 3)));
    assert!(!open(night, h(4)));
    assert!(!open(night, h(12)));
    let day = Window {
        start_hour: 9,
        end_hour: 17,
    };
    assert!(open(day, h(9)));
    assert!(!open(day, h(17)));
}
