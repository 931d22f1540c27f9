-- Cryo maintenance for trino (engine catalog fixtures, source catalog fixtures)
-- plan (fixture plan, rebased to a fixed now, without the ids and uuids of one fixture run), made at 2026-06-01T00:00:00.000Z

-- table pyiceberg.unpartitioned

-- rewrite_manifests
-- note: manifest size comes from the table property commit.manifest.target-size-bytes; the plan's 8388608 bytes is not an argument
-- chunk 0: whole table
ALTER TABLE "fixtures"."pyiceberg"."unpartitioned" EXECUTE optimize_manifests;

-- expire_snapshots
-- note: Trino takes a duration: the cutoff is computed when the statement runs (now - 1d), not the plan's older_than
-- chunk 0: whole table
ALTER TABLE "fixtures"."pyiceberg"."unpartitioned" EXECUTE expire_snapshots(retention_threshold => '1d', retain_last => 2);
-- skipped rewrite_data_files: Trino's OPTIMIZE cannot sort by given columns (it bin-packs, following only the table's sorted_by property): set sorted_by and re-plan with the table's order, or run this step on Spark
-- skipped remove_orphan_files: the plan asks for a dry run, and Trino's remove_orphan_files has none (it always deletes): nothing is rendered. Render this step for Spark (dry_run => true), or re-plan with dry_run = false
