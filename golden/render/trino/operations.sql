-- Cryo maintenance for trino (engine catalog lake, source catalog source_catalog)
-- plan 4b77d8c0b02d17f6560d25a1a5a798249cbd9ee1d153ddbebd47a7e052755821, made at 2026-06-01T00:00:00.000Z

-- table sales.orders

-- convert_equality_deletes
-- note: Trino has no equality-delete conversion: OPTIMIZE with file_size_threshold => '1PB' (no file is that large) selects every data file of the selected partitions and rewrites them, applying their deletes (Trino leaves a partition alone when it holds a single file and no delete applies to it); whether Trino also drops the applied delete files from metadata depends on the release
-- chunk 0: ts_day=2026-05-01
ALTER TABLE "lake"."sales"."orders" EXECUTE optimize(file_size_threshold => '1PB') WHERE "ts" >= TIMESTAMP '2026-05-01 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-05-02 00:00:00.000000 UTC';

-- rewrite_data_files
-- note: file_size_threshold => '96MB' selects files smaller than the plan's min_file_size_bytes; files with deletes attached are rewritten whatever their size
-- note: output files are sized by the catalog's iceberg.target-max-file-size (session property target_max_file_size), not the plan's target of 134217728 bytes
-- note: Trino does not split files above 241591910 bytes, and merges a partition's selected files once there are two (or one with deletes) instead of 5
-- chunk 0: ts_day=2026-05-03, ts_day=2026-05-04
ALTER TABLE "lake"."sales"."orders" EXECUTE optimize(file_size_threshold => '96MB') WHERE ("ts" >= TIMESTAMP '2026-05-03 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-05-04 00:00:00.000000 UTC') OR ("ts" >= TIMESTAMP '2026-05-04 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-05-05 00:00:00.000000 UTC');
-- chunk 1: ts_day=2026-05-05
ALTER TABLE "lake"."sales"."orders" EXECUTE optimize(file_size_threshold => '96MB') WHERE "ts" >= TIMESTAMP '2026-05-05 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-05-06 00:00:00.000000 UTC';

-- compute_statistics
-- note: ANALYZE collects number-of-distinct-values statistics into a Puffin file (what Spark's compute_table_stats writes); it always reads the whole table
-- chunk 0: whole table
ANALYZE "lake"."sales"."orders" WITH (columns = ARRAY['order_id', 'customer_id']);

-- rewrite_manifests
-- note: manifest size comes from the table property commit.manifest.target-size-bytes; the plan's 8388608 bytes is not an argument
-- chunk 0: whole table
ALTER TABLE "lake"."sales"."orders" EXECUTE optimize_manifests;

-- expire_snapshots
-- note: Trino takes a duration: the cutoff is computed when the statement runs (now - 7d), not the plan's older_than
-- chunk 0: whole table
ALTER TABLE "lake"."sales"."orders" EXECUTE expire_snapshots(retention_threshold => '7d', retain_last => 5);
-- skipped rewrite_position_deletes: Trino has no procedure that rewrites position-delete files (its OPTIMIZE applies them while rewriting data files); run this step on Spark (rewrite_position_delete_files)
-- skipped remove_orphan_files: the plan asks for a dry run, and Trino's remove_orphan_files has none (it always deletes): nothing is rendered. Render this step for Spark (dry_run => true), or re-plan with dry_run = false

-- table sales.returns

-- convert_equality_deletes
-- note: Trino has no equality-delete conversion: OPTIMIZE with file_size_threshold => '1PB' (no file is that large) selects every data file of the selected partitions and rewrites them, applying their deletes (Trino leaves a partition alone when it holds a single file and no delete applies to it); whether Trino also drops the applied delete files from metadata depends on the release
-- chunk 0: whole table
ALTER TABLE "lake"."sales"."returns" EXECUTE optimize(file_size_threshold => '1PB');

-- rewrite_data_files
-- note: file_size_threshold => '96MB' selects files smaller than the plan's min_file_size_bytes; files with deletes attached are rewritten whatever their size
-- note: output files are sized by the catalog's iceberg.target-max-file-size (session property target_max_file_size), not the plan's target of 134217728 bytes
-- note: Trino does not split files above 241591910 bytes, and merges a partition's selected files once there are two (or one with deletes) instead of 5
-- chunk 0: whole table
ALTER TABLE "lake"."sales"."returns" EXECUTE optimize(file_size_threshold => '96MB');

-- compute_statistics
-- note: ANALYZE collects number-of-distinct-values statistics into a Puffin file (what Spark's compute_table_stats writes); it always reads the whole table
-- chunk 0: whole table
ANALYZE "lake"."sales"."returns";

-- rewrite_manifests
-- note: manifest size comes from the table property commit.manifest.target-size-bytes; the plan's 8388608 bytes is not an argument
-- chunk 0: whole table
ALTER TABLE "lake"."sales"."returns" EXECUTE optimize_manifests;

-- expire_snapshots
-- note: Trino takes a duration: the cutoff is computed when the statement runs (now - 14d), not the plan's older_than
-- chunk 0: whole table
ALTER TABLE "lake"."sales"."returns" EXECUTE expire_snapshots(retention_threshold => '14d', retain_last => 1);

-- remove_orphan_files
-- note: Trino takes a duration: files older than now - 7d when the statement runs are removed
-- chunk 0: whole table
ALTER TABLE "lake"."sales"."returns" EXECUTE remove_orphan_files(retention_threshold => '7d');
-- skipped rewrite_position_deletes: Trino has no procedure that rewrites position-delete files (its OPTIMIZE applies them while rewriting data files); run this step on Spark (rewrite_position_delete_files)
