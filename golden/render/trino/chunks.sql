-- Cryo maintenance for trino (engine catalog lake, source catalog source_catalog)
-- plan e814982bd6b79502ff20a32ba388bb9b3afb8448333cf33d48f40249ad7fb94f, made at 2026-06-01T00:00:00.000Z

-- table lake.clicks

-- rewrite_data_files
-- note: file_size_threshold => '96MB' selects files smaller than the plan's min_file_size_bytes; files with deletes attached are rewritten whatever their size
-- note: output files are sized by the catalog's iceberg.target-max-file-size (session property target_max_file_size), not the plan's target of 134217728 bytes
-- note: Trino does not split files above 241591910 bytes, and merges a partition's selected files once there are two (or one with deletes) instead of 5
-- note: the chunk's partitions form a full cross product of column values, written as an AND of per-column ORs (a WHERE Trino can enforce)
-- note: Trino's OPTIMIZE takes a WHERE only when it reduces to one value set per column; partitions that differ in several columns without forming a cross product render as one statement each
-- note: bucket[16] predicate on user_id: Trino's OPTIMIZE WHERE cannot select one bucket; dropped, so the statement selects a superset of partitions (safe)
-- note: partitions that differ only in dropped predicates share one statement
-- chunk 0: ts_day=2026-05-01, ts_day=2026-05-02, ts_day=2026-05-03
ALTER TABLE "lake"."lake"."clicks" EXECUTE optimize(file_size_threshold => '96MB') WHERE ("ts" >= TIMESTAMP '2026-05-01 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-05-02 00:00:00.000000 UTC') OR ("ts" >= TIMESTAMP '2026-05-02 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-05-03 00:00:00.000000 UTC') OR ("ts" >= TIMESTAMP '2026-05-03 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-05-04 00:00:00.000000 UTC');
-- chunk 1: ts_day=2026-05-04/category=a, ts_day=2026-05-04/category=b, ts_day=2026-05-05/category=a, ts_day=2026-05-05/category=b
ALTER TABLE "lake"."lake"."clicks" EXECUTE optimize(file_size_threshold => '96MB') WHERE (("ts" >= TIMESTAMP '2026-05-04 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-05-05 00:00:00.000000 UTC') OR ("ts" >= TIMESTAMP '2026-05-05 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-05-06 00:00:00.000000 UTC')) AND ("category" = 'a' OR "category" = 'b');
-- chunk 2: ts_day=2026-05-06/category=a
ALTER TABLE "lake"."lake"."clicks" EXECUTE optimize(file_size_threshold => '96MB') WHERE "ts" >= TIMESTAMP '2026-05-06 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-05-07 00:00:00.000000 UTC' AND "category" = 'a';
-- chunk 2: ts_day=2026-05-07/category=b
ALTER TABLE "lake"."lake"."clicks" EXECUTE optimize(file_size_threshold => '96MB') WHERE "ts" >= TIMESTAMP '2026-05-07 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-05-08 00:00:00.000000 UTC' AND "category" = 'b';
-- chunk 2: ts_day=2026-05-07/category=null
ALTER TABLE "lake"."lake"."clicks" EXECUTE optimize(file_size_threshold => '96MB') WHERE "ts" >= TIMESTAMP '2026-05-07 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-05-08 00:00:00.000000 UTC' AND "category" IS NULL;
-- chunk 3: ts_day=2026-05-08/user_bucket=1, ts_day=2026-05-08/user_bucket=2
ALTER TABLE "lake"."lake"."clicks" EXECUTE optimize(file_size_threshold => '96MB') WHERE "ts" >= TIMESTAMP '2026-05-08 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-05-09 00:00:00.000000 UTC';
-- chunk 5: category=c
ALTER TABLE "lake"."lake"."clicks" EXECUTE optimize(file_size_threshold => '96MB') WHERE "category" = 'c';
-- chunk 6: whole table
ALTER TABLE "lake"."lake"."clicks" EXECUTE optimize(file_size_threshold => '96MB');
-- skipped rewrite_data_files chunk 4 (user_bucket=5, user_bucket=6): no partition of this chunk can be selected on trino (nothing trino can express selects it: bucket[16] predicate on user_id: Trino's OPTIMIZE WHERE cannot select one bucket); a partitioned chunk is never turned into a whole-table statement
-- skipped rewrite_data_files chunk 5 (user_bucket=7): partition left out of its chunk (nothing trino can express selects it: bucket[16] predicate on user_id: Trino's OPTIMIZE WHERE cannot select one bucket); a whole-table statement is never substituted
-- skipped rewrite_data_files chunk 7 (category=x): malformed plan: a whole-table chunk that also lists partitions is ambiguous
-- skipped rewrite_data_files chunk 8: malformed plan: a partitioned chunk without partitions would become a whole-table statement
