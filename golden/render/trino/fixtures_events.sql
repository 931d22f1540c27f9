-- Cryo maintenance for trino (engine catalog fixtures, source catalog fixtures)
-- plan (fixture plan, rebased to a fixed now, without the ids and uuids of one fixture run), made at 2026-06-01T00:00:00.000Z

-- table pyiceberg.events

-- rewrite_data_files
-- note: partitions of several partition specs (0, 1): Trino filters only on columns every spec with manifests in the current snapshot partitions alike, including specs this plan does not touch
-- note: file_size_threshold => '384MB' selects files smaller than the plan's min_file_size_bytes; files with deletes attached are rewritten whatever their size
-- note: output files are sized by the catalog's iceberg.target-max-file-size (session property target_max_file_size), not the plan's target of 536870912 bytes
-- note: Trino does not split files above 966367641 bytes, and merges a partition's selected files once there are two (or one with deletes) instead of 5
-- note: Trino's OPTIMIZE takes a WHERE only when it reduces to one value set per column; partitions that differ in several columns without forming a cross product render as one statement each
-- note: predicate on user_id: the step's partition specs (0, 1) do not all partition user_id the same way, and Trino enforces a WHERE column only when every spec with files does; dropped, so the statement selects a superset of partitions (safe)
-- note: partitions that differ only in dropped predicates share one statement
-- chunk 0: ts_day=2026-03-03/category=click, ts_day=2026-03-03/category=purchase, ts_day=2026-03-03/category=signup, ts_day=2026-03-03/category=view
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-03 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-04 00:00:00.000000 UTC' AND ("category" = 'click' OR "category" = 'purchase' OR "category" = 'signup' OR "category" = 'view');
-- chunk 1: ts_day=2026-03-04/category=click, ts_day=2026-03-04/category=purchase, ts_day=2026-03-04/category=signup, ts_day=2026-03-04/category=view
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-04 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-05 00:00:00.000000 UTC' AND ("category" = 'click' OR "category" = 'purchase' OR "category" = 'signup' OR "category" = 'view');
-- chunk 2: ts_day=2026-03-05/category=click
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-05 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-06 00:00:00.000000 UTC' AND "category" = 'click';
-- chunk 2: ts_day=2026-03-05/category=purchase
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-05 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-06 00:00:00.000000 UTC' AND "category" = 'purchase';
-- chunk 2: ts_day=2026-03-05/category=view
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-05 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-06 00:00:00.000000 UTC' AND "category" = 'view';
-- chunk 2: ts_day=2026-03-02/category=click
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-02 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-03 00:00:00.000000 UTC' AND "category" = 'click';
-- chunk 3: ts_day=2026-03-02/category=purchase
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-02 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-03 00:00:00.000000 UTC' AND "category" = 'purchase';
-- chunk 3: ts_day=2026-03-02/category=view
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-02 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-03 00:00:00.000000 UTC' AND "category" = 'view';
-- chunk 3: ts_day=2026-03-05/category=signup
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-05 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-06 00:00:00.000000 UTC' AND "category" = 'signup';
-- chunk 3: ts_day=2026-03-02/category=signup
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-02 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-03 00:00:00.000000 UTC' AND "category" = 'signup';
-- chunk 4: ts_day=2026-03-06/category=click, ts_day=2026-03-06/category=purchase, ts_day=2026-03-06/category=signup, ts_day=2026-03-06/category=view
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-06 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-07 00:00:00.000000 UTC' AND ("category" = 'click' OR "category" = 'purchase' OR "category" = 'signup' OR "category" = 'view');
-- chunk 5: ts_day=2026-03-07/category=click, ts_day=2026-03-07/category=purchase, ts_day=2026-03-07/category=signup, ts_day=2026-03-07/category=view
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-07 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-08 00:00:00.000000 UTC' AND ("category" = 'click' OR "category" = 'purchase' OR "category" = 'signup' OR "category" = 'view');
-- chunk 6: ts_day=2026-03-08/category=click, ts_day=2026-03-08/category=purchase, ts_day=2026-03-08/category=signup, ts_day=2026-03-08/category=view
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-08 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-09 00:00:00.000000 UTC' AND ("category" = 'click' OR "category" = 'purchase' OR "category" = 'signup' OR "category" = 'view');
-- chunk 7: ts_day=2026-03-01/category=click, ts_day=2026-03-01/category=purchase, ts_day=2026-03-01/category=signup, ts_day=2026-03-01/category=view
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-01 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-02 00:00:00.000000 UTC' AND ("category" = 'click' OR "category" = 'purchase' OR "category" = 'signup' OR "category" = 'view');
-- chunk 8: ts_day=2026-03-09/category=click, ts_day=2026-03-09/category=purchase, ts_day=2026-03-09/category=signup, ts_day=2026-03-09/category=view
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-09 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-10 00:00:00.000000 UTC' AND ("category" = 'click' OR "category" = 'purchase' OR "category" = 'signup' OR "category" = 'view');
-- chunk 9: ts_day=2026-03-10/category=purchase/user_bucket=0
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-10 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-11 00:00:00.000000 UTC' AND "category" = 'purchase';
-- chunk 9: ts_day=2026-03-10/category=signup/user_bucket=0, ts_day=2026-03-10/category=signup/user_bucket=2
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-10 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-11 00:00:00.000000 UTC' AND "category" = 'signup';
-- chunk 9: ts_day=2026-03-11/category=purchase/user_bucket=7
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-11 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-12 00:00:00.000000 UTC' AND "category" = 'purchase';
-- chunk 10: ts_day=2026-03-10/category=click/user_bucket=2, ts_day=2026-03-10/category=click/user_bucket=7, ts_day=2026-03-10/category=purchase/user_bucket=4, ts_day=2026-03-10/category=purchase/user_bucket=7
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-10 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-11 00:00:00.000000 UTC' AND ("category" = 'click' OR "category" = 'purchase');
-- chunk 11: ts_day=2026-03-10/category=signup/user_bucket=1, ts_day=2026-03-10/category=signup/user_bucket=6, ts_day=2026-03-10/category=view/user_bucket=3, ts_day=2026-03-10/category=view/user_bucket=4
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-10 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-11 00:00:00.000000 UTC' AND ("category" = 'signup' OR "category" = 'view');
-- chunk 12: ts_day=2026-03-11/category=click/user_bucket=3, ts_day=2026-03-11/category=purchase/user_bucket=3, ts_day=2026-03-11/category=purchase/user_bucket=5, ts_day=2026-03-11/category=signup/user_bucket=1
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-11 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-12 00:00:00.000000 UTC' AND ("category" = 'click' OR "category" = 'purchase' OR "category" = 'signup');
-- chunk 13: ts_day=2026-03-11/category=view/user_bucket=0, ts_day=2026-03-11/category=view/user_bucket=3, ts_day=2026-03-11/category=view/user_bucket=6
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize(file_size_threshold => '384MB') WHERE "ts" >= TIMESTAMP '2026-03-11 00:00:00.000000 UTC' AND "ts" < TIMESTAMP '2026-03-12 00:00:00.000000 UTC' AND "category" = 'view';

-- compute_statistics
-- note: ANALYZE collects number-of-distinct-values statistics into a Puffin file (what Spark's compute_table_stats writes); it always reads the whole table
-- chunk 0: whole table
ANALYZE "fixtures"."pyiceberg"."events" WITH (columns = ARRAY['event_id', 'category']);

-- rewrite_manifests
-- note: manifest size comes from the table property commit.manifest.target-size-bytes; the plan's 8388608 bytes is not an argument
-- chunk 0: whole table
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE optimize_manifests;

-- expire_snapshots
-- note: Trino takes a duration: the cutoff is computed when the statement runs (now - 1d), not the plan's older_than
-- chunk 0: whole table
ALTER TABLE "fixtures"."pyiceberg"."events" EXECUTE expire_snapshots(retention_threshold => '1d', retain_last => 2);
-- skipped remove_orphan_files: the plan asks for a dry run, and Trino's remove_orphan_files has none (it always deletes): nothing is rendered. Render this step for Spark (dry_run => true), or re-plan with dry_run = false
