-- Cryo maintenance for trino (engine catalog fixtures, source catalog fixtures)
-- plan (fixture plan, rebased to a fixed now, without the ids and uuids of one fixture run), made at 2026-06-01T00:00:00.000Z

-- table spark.upserts_eq

-- convert_equality_deletes
-- note: Trino has no equality-delete conversion: OPTIMIZE with file_size_threshold => '1PB' (no file is that large) selects every data file of the selected partitions and rewrites them, applying their deletes (Trino leaves a partition alone when it holds a single file and no delete applies to it); whether Trino also drops the applied delete files from metadata depends on the release
-- chunk 0: whole table
ALTER TABLE "fixtures"."spark"."upserts_eq" EXECUTE optimize(file_size_threshold => '1PB');

-- rewrite_manifests
-- note: manifest size comes from the table property commit.manifest.target-size-bytes; the plan's 8388608 bytes is not an argument
-- chunk 0: whole table
ALTER TABLE "fixtures"."spark"."upserts_eq" EXECUTE optimize_manifests;

-- expire_snapshots
-- note: Trino takes a duration: the cutoff is computed when the statement runs (now - 1d), not the plan's older_than
-- chunk 0: whole table
ALTER TABLE "fixtures"."spark"."upserts_eq" EXECUTE expire_snapshots(retention_threshold => '1d', retain_last => 2);
-- skipped remove_orphan_files: the plan asks for a dry run, and Trino's remove_orphan_files has none (it always deletes): nothing is rendered. Render this step for Spark (dry_run => true), or re-plan with dry_run = false
