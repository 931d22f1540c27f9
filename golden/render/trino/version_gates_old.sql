-- Cryo maintenance for trino (engine catalog lake, source catalog source_catalog)
-- plan fb56e5f6257d35c7873432a8b1cdb97e810e09d835abed837d43030b8ad4e477, made at 2026-06-01T00:00:00.000Z

-- table lake.gated

-- convert_equality_deletes
-- note: Trino has no equality-delete conversion: OPTIMIZE with file_size_threshold => '1PB' (no file is that large) selects every data file of the selected partitions and rewrites them, applying their deletes (Trino leaves a partition alone when it holds a single file and no delete applies to it); whether Trino also drops the applied delete files from metadata depends on the release
-- chunk 0: whole table
ALTER TABLE "lake"."lake"."gated" EXECUTE optimize(file_size_threshold => '1PB');

-- rewrite_data_files
-- note: file_size_threshold => '96MB' selects files smaller than the plan's min_file_size_bytes; files with deletes attached are rewritten whatever their size
-- note: output files are sized by the catalog's iceberg.target-max-file-size (session property target_max_file_size), not the plan's target of 134217728 bytes
-- note: Trino does not split files above 241591910 bytes, and merges a partition's selected files once there are two (or one with deletes) instead of 5
-- note: prefix predicate on category (truncate[2]): Trino cannot enforce a string prefix in OPTIMIZE's WHERE; dropped, so the statement selects a superset of partitions (safe)
-- note: bucket[4] predicate on user_id: Trino's OPTIMIZE WHERE cannot select one bucket; dropped, so the statement selects a superset of partitions (safe)
-- chunk 0: local=2026-05-01T00:00:00/category_trunc=ab/user_bucket=1
ALTER TABLE "lake"."lake"."gated" EXECUTE optimize(file_size_threshold => '96MB') WHERE "local" = TIMESTAMP '2026-05-01 00:00:00.000000';

-- compute_statistics
-- note: ANALYZE collects number-of-distinct-values statistics into a Puffin file (what Spark's compute_table_stats writes); it always reads the whole table
-- chunk 0: whole table
ANALYZE "lake"."lake"."gated";
-- skipped rewrite_position_deletes: Trino has no procedure that rewrites position-delete files (its OPTIMIZE applies them while rewriting data files); run this step on Spark (rewrite_position_delete_files)
-- skipped rewrite_manifests: Trino 469 has no optimize_manifests (added in Trino 470); upgrade, or run this step on Spark (rewrite_manifests)
-- skipped expire_snapshots: the plan keeps the newest 5 snapshots, but Trino 469's expire_snapshots has no retain_last (from Trino 479); it would expire more than planned. Upgrade, run this step on Spark, or re-plan with retain_last 1

-- table lake.keep_one

-- expire_snapshots
-- note: retain_last is not passed (Trino 469 has no such argument); the current snapshot is always kept
-- note: Trino takes a duration: the cutoff is computed when the statement runs (now - 7d), not the plan's older_than
-- chunk 0: whole table
ALTER TABLE "lake"."lake"."keep_one" EXECUTE expire_snapshots(retention_threshold => '7d');
