-- Cryo maintenance for trino (engine catalog lake, source catalog source_catalog)
-- plan 5ec2945ccd5d57b083dc6de7a17da42b3b895d18c2dd001471724016c33fd7b9, made at 2026-06-01T00:00:00.000Z

-- table lake.events

-- rewrite_data_files
-- note: file_size_threshold => '96MB' selects files smaller than the plan's min_file_size_bytes; files with deletes attached are rewritten whatever their size
-- note: output files are sized by the catalog's iceberg.target-max-file-size (session property target_max_file_size), not the plan's target of 134217728 bytes
-- note: Trino does not split files above 241591910 bytes, and merges a partition's selected files once there are two (or one with deletes) instead of 5
-- note: prefix predicate on category (truncate[4]): Trino cannot enforce a string prefix in OPTIMIZE's WHERE; dropped, so the statement selects a superset of partitions (safe)
-- note: equality on region (truncate[4]): Trino enforces a single value only on identity partitions; dropped, so the statement selects a superset of partitions (safe)
-- note: bucket[8] predicate on user_id: Trino's OPTIMIZE WHERE cannot select one bucket; dropped, so the statement selects a superset of partitions (safe)
-- note: predicate on nested column address.zip: Trino's OPTIMIZE WHERE is only relied on for top-level partition source columns; dropped, so the statement selects a superset of partitions (safe)
-- note: range on ts (day): its bounds are not on partition boundaries, which Trino's OPTIMIZE refuses; dropped, so the statement selects a superset of partitions (safe)
-- note: predicate on d: date literal `2024-13-40` is not YYYY-MM-DD (a malformed plan literal); dropped, so the statement selects a superset of partitions (safe)
-- note: predicate on v (void): a void partition field constrains nothing; dropped, so the statement selects a superset of partitions (safe)
-- chunk 0: flag=true/small=-7/big=-9223372036854775808
ALTER TABLE "lake"."lake"."events" EXECUTE optimize(file_size_threshold => '96MB') WHERE "flag" = true AND "small" = -7 AND "big" = -9223372036854775808;
-- chunk 1: ratio=0.5/score=-1.25/amount=1234.50
ALTER TABLE "lake"."lake"."events" EXECUTE optimize(file_size_threshold => '96MB') WHERE "ratio" = REAL '0.5' AND "score" = DOUBLE '-1.25' AND "amount" = DECIMAL '1234.50';
-- chunk 2: category=it's \ a\nline/name=Ünïcödé 日本 🙂
ALTER TABLE "lake"."lake"."events" EXECUTE optimize(file_size_threshold => '96MB') WHERE "category" = U&'it''s \\ a\000Aline' AND "name" = 'Ünïcödé 日本 🙂';
-- chunk 4: d=2024-02-29/local=2024-02-29T10:15:30.5/instant=2024-02-29T10:15:30
ALTER TABLE "lake"."lake"."events" EXECUTE optimize(file_size_threshold => '96MB') WHERE "d" = DATE '2024-02-29' AND "local" = TIMESTAMP '2024-02-29 10:15:30.500000' AND "instant" = TIMESTAMP '2024-02-29 10:15:30.000000 UTC';
-- chunk 5: category=null/ts_day=null
ALTER TABLE "lake"."lake"."events" EXECUTE optimize(file_size_threshold => '96MB') WHERE "category" IS NULL AND "ts" IS NULL;
-- chunk 6: local_year=2024/d_month=2024-02/ts_day=2024-02-29/local_hour=2024-02-29-23
ALTER TABLE "lake"."lake"."events" EXECUTE optimize(file_size_threshold => '96MB') WHERE "local" >= TIMESTAMP '2024-01-01 00:00:00.000000' AND "local" < TIMESTAMP '2025-01-01 00:00:00.000000' AND "d" >= DATE '2024-02-01' AND "d" < DATE '2024-03-01' AND "ts" >= TIMESTAMP '2024-02-29 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2024-03-01 00:00:00.000000 UTC' AND "local" >= TIMESTAMP '2024-02-29 23:00:00.000000' AND "local" < TIMESTAMP '2024-03-01 00:00:00.000000';
-- chunk 7: user_id_trunc=-20
ALTER TABLE "lake"."lake"."events" EXECUTE optimize(file_size_threshold => '96MB') WHERE "user_id" >= -20 AND "user_id" < -10;
-- chunk 9: ts_day=2024-02-29/user_bucket=3, ts_day=2024-03-01
ALTER TABLE "lake"."lake"."events" EXECUTE optimize(file_size_threshold => '96MB') WHERE ("ts" >= TIMESTAMP '2024-02-29 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2024-03-01 00:00:00.000000 UTC') OR ("ts" >= TIMESTAMP '2024-03-01 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2024-03-02 00:00:00.000000 UTC');
-- chunk 10: at=10:30:00
ALTER TABLE "lake"."lake"."events" EXECUTE optimize(file_size_threshold => '96MB') WHERE "at" = TIME '10:30:00.000000';
-- chunk 13: d=2024-13-40/category=a
ALTER TABLE "lake"."lake"."events" EXECUTE optimize(file_size_threshold => '96MB') WHERE "category" = 'a';
-- chunk 14: nanos=2024-02-29T10:15:30.123456789
ALTER TABLE "lake"."lake"."events" EXECUTE optimize(file_size_threshold => '96MB') WHERE "nanos" = TIMESTAMP '2024-02-29 10:15:30.123456789 UTC';
-- skipped rewrite_data_files chunk 3 (id=123e4567-e89b-12d3-a456-426614174000/blob=00ff/tag=cafe): no partition of this chunk can be selected on trino (partitioned by tag (fixed[2]): Trino cannot scan a table partitioned by a fixed column (split generation fails with "Unsupported iceberg type: fixed[2]", seen on Trino 483), so no statement on this partition could run); a partitioned chunk is never turned into a whole-table statement
-- skipped rewrite_data_files chunk 8 (category_trunc=ab%_/region_trunc=eu): no partition of this chunk can be selected on trino (nothing trino can express selects it: prefix predicate on category (truncate[4]): Trino cannot enforce a string prefix in OPTIMIZE's WHERE; equality on region (truncate[4]): Trino enforces a single value only on identity partitions); a partitioned chunk is never turned into a whole-table statement
-- skipped rewrite_data_files chunk 11 (address.zip=12345): no partition of this chunk can be selected on trino (nothing trino can express selects it: predicate on nested column address.zip: Trino's OPTIMIZE WHERE is only relied on for top-level partition source columns); a partitioned chunk is never turned into a whole-table statement
-- skipped rewrite_data_files chunk 12 (ts_day=2024-02-29 (misaligned)): no partition of this chunk can be selected on trino (nothing trino can express selects it: range on ts (day): its bounds are not on partition boundaries, which Trino's OPTIMIZE refuses); a partitioned chunk is never turned into a whole-table statement
-- skipped rewrite_data_files chunk 15 (v=null): no partition of this chunk can be selected on trino (nothing trino can express selects it: predicate on v (void): a void partition field constrains nothing); a partitioned chunk is never turned into a whole-table statement
