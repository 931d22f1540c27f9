-- Cryo maintenance for trino (engine catalog lake, source catalog source_catalog)
-- plan d5abb5a5f62a249b12bc8c61b8d6f5d99c7c930f38faa142bc5671916949a18d, made at 2026-06-01T00:00:00.000Z

-- table lake.expire_1d

-- expire_snapshots
-- note: Trino takes a duration: the cutoff is computed when the statement runs (now - 1d), not the plan's older_than
-- chunk 0: whole table
ALTER TABLE "lake"."lake"."expire_1d" EXECUTE expire_snapshots(retention_threshold => '1d', retain_last => 1);

-- table lake.expire_3d

-- expire_snapshots
-- note: Trino takes a duration: the cutoff is computed when the statement runs (now - 3d), not the plan's older_than
-- chunk 0: whole table
ALTER TABLE "lake"."lake"."expire_3d" EXECUTE expire_snapshots(retention_threshold => '3d', retain_last => 2);

-- table lake.expire_7d

-- expire_snapshots
-- note: Trino takes a duration: the cutoff is computed when the statement runs (now - 7d), not the plan's older_than
-- chunk 0: whole table
ALTER TABLE "lake"."lake"."expire_7d" EXECUTE expire_snapshots(retention_threshold => '7d', retain_last => 2);

-- table lake.expire_30d

-- expire_snapshots
-- note: Trino takes a duration: the cutoff is computed when the statement runs (now - 30d), not the plan's older_than
-- chunk 0: whole table
ALTER TABLE "lake"."lake"."expire_30d" EXECUTE expire_snapshots(retention_threshold => '30d', retain_last => 2);

-- table lake.orphans_12h
-- skipped remove_orphan_files: the plan asks for a dry run, and Trino's remove_orphan_files has none (it always deletes): nothing is rendered. Render this step for Spark (dry_run => true), or re-plan with dry_run = false

-- table lake.orphans_1d
-- skipped remove_orphan_files: retention 1d is below this cluster's iceberg.remove-orphan-files.min-retention (2d): Trino refuses it ("Retention specified … is shorter than the minimum retention configured in the system"); raise the plan's retention, or lower the floor in the catalog properties and in these options

-- table lake.orphans_3d_dry_run
-- skipped remove_orphan_files: the plan asks for a dry run, and Trino's remove_orphan_files has none (it always deletes): nothing is rendered. Render this step for Spark (dry_run => true), or re-plan with dry_run = false

-- table lake.orphans_7d

-- remove_orphan_files
-- note: Trino takes a duration: files older than now - 7d when the statement runs are removed
-- chunk 0: whole table
ALTER TABLE "lake"."lake"."orphans_7d" EXECUTE remove_orphan_files(retention_threshold => '7d');

-- table lake.orphans_36h
-- skipped remove_orphan_files: retention 36h is below this cluster's iceberg.remove-orphan-files.min-retention (2d): Trino refuses it ("Retention specified … is shorter than the minimum retention configured in the system"); raise the plan's retention, or lower the floor in the catalog properties and in these options
