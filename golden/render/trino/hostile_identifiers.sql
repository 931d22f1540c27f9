-- Cryo maintenance for trino (engine catalog lake"prod, source catalog source_catalog)
-- plan 964deed39e3e787bde1258b3ac6e88b63a3f3d87f39e817c349a5c4733f0af57, made at 2026-06-01T00:00:00.000Z

-- table "my.ns"."a""b"

-- rewrite_data_files
-- note: file_size_threshold => '96MB' selects files smaller than the plan's min_file_size_bytes; files with deletes attached are rewritten whatever their size
-- note: output files are sized by the catalog's iceberg.target-max-file-size (session property target_max_file_size), not the plan's target of 134217728 bytes
-- note: Trino does not split files above 241591910 bytes, and merges a partition's selected files once there are two (or one with deletes) instead of 5
-- chunk 0: weird=#0, weird=#1, weird=#2, weird=#3, weird=#4
ALTER TABLE "lake""prod"."my.ns"."a""b" EXECUTE optimize(file_size_threshold => '96MB') WHERE "col""quote`tick'apos" = '''; DROP TABLE x; --' OR "col""quote`tick'apos" = 'back\slash \'' \\' OR "col""quote`tick'apos" = 'quote"double `tick`' OR "col""quote`tick'apos" = U&'tab\0009here\000D\000Anewline' OR "col""quote`tick'apos" = '{{ jinja }} {% raw %} $$ /* c */ -- ;';

-- rewrite_manifests
-- note: manifest size comes from the table property commit.manifest.target-size-bytes; the plan's 8388608 bytes is not an argument
-- chunk 0: whole table
ALTER TABLE "lake""prod"."my.ns"."a""b" EXECUTE optimize_manifests;

-- compute_statistics
-- note: ANALYZE collects number-of-distinct-values statistics into a Puffin file (what Spark's compute_table_stats writes); it always reads the whole table
-- note: Trino shows column names in lower case, so ANALYZE's columns are passed in lower case
-- chunk 0: whole table
ANALYZE "lake""prod"."my.ns"."a""b" WITH (columns = ARRAY['col"quote`tick''apos', 'über']);

-- table "we`ird".nested."Ünïcödé 表"
-- note: the nested namespace "we`ird".nested is addressed as the single Trino schema "we`ird.nested" (REST catalogs need iceberg.rest-catalog.nested-namespace-enabled)
-- skipped rewrite_data_files: unaddressable table name "we`ird".nested."Ünïcödé 表": Trino folds identifiers to lower case, quoted or not, and would look up "we`ird".nested."ünïcödé 表" — another table or none (a REST catalog with iceberg.rest-catalog.case-insensitive-name-matching: set case_insensitive_name_matching)
-- skipped rewrite_manifests: unaddressable table name "we`ird".nested."Ünïcödé 表": Trino folds identifiers to lower case, quoted or not, and would look up "we`ird".nested."ünïcödé 表" — another table or none (a REST catalog with iceberg.rest-catalog.case-insensitive-name-matching: set case_insensitive_name_matching)
-- skipped compute_statistics: unaddressable table name "we`ird".nested."Ünïcödé 表": Trino folds identifiers to lower case, quoted or not, and would look up "we`ird".nested."ünïcödé 表" — another table or none (a REST catalog with iceberg.rest-catalog.case-insensitive-name-matching: set case_insensitive_name_matching)

-- table db."x; drop table y; --"

-- rewrite_data_files
-- note: file_size_threshold => '96MB' selects files smaller than the plan's min_file_size_bytes; files with deletes attached are rewritten whatever their size
-- note: output files are sized by the catalog's iceberg.target-max-file-size (session property target_max_file_size), not the plan's target of 134217728 bytes
-- note: Trino does not split files above 241591910 bytes, and merges a partition's selected files once there are two (or one with deletes) instead of 5
-- chunk 0: x=1
ALTER TABLE "lake""prod"."db"."x; drop table y; --" EXECUTE optimize(file_size_threshold => '96MB') WHERE "x" = '1';

-- rewrite_manifests
-- note: manifest size comes from the table property commit.manifest.target-size-bytes; the plan's 8388608 bytes is not an argument
-- chunk 0: whole table
ALTER TABLE "lake""prod"."db"."x; drop table y; --" EXECUTE optimize_manifests;

-- compute_statistics
-- note: ANALYZE collects number-of-distinct-values statistics into a Puffin file (what Spark's compute_table_stats writes); it always reads the whole table
-- note: Trino shows column names in lower case, so ANALYZE's columns are passed in lower case
-- chunk 0: whole table
ANALYZE "lake""prod"."db"."x; drop table y; --" WITH (columns = ARRAY['col"quote`tick''apos', 'über']);

-- table db."line\nbreak"

-- rewrite_data_files
-- note: file_size_threshold => '96MB' selects files smaller than the plan's min_file_size_bytes; files with deletes attached are rewritten whatever their size
-- note: output files are sized by the catalog's iceberg.target-max-file-size (session property target_max_file_size), not the plan's target of 134217728 bytes
-- note: Trino does not split files above 241591910 bytes, and merges a partition's selected files once there are two (or one with deletes) instead of 5
-- chunk 0: x=1
ALTER TABLE "lake""prod"."db"."line
break" EXECUTE optimize(file_size_threshold => '96MB') WHERE "x" = '1';

-- rewrite_manifests
-- note: manifest size comes from the table property commit.manifest.target-size-bytes; the plan's 8388608 bytes is not an argument
-- chunk 0: whole table
ALTER TABLE "lake""prod"."db"."line
break" EXECUTE optimize_manifests;

-- compute_statistics
-- note: ANALYZE collects number-of-distinct-values statistics into a Puffin file (what Spark's compute_table_stats writes); it always reads the whole table
-- note: Trino shows column names in lower case, so ANALYZE's columns are passed in lower case
-- chunk 0: whole table
ANALYZE "lake""prod"."db"."line
break" WITH (columns = ARRAY['col"quote`tick''apos', 'über']);
