-- Cryo maintenance for trino (engine catalog lake, source catalog source_catalog)
-- plan 1f66c79d4dc38bde7840b234610ac3101fd96622b8eb17fdbf09da991c109891, made at 2026-06-01T00:00:00.000Z

-- table lake.binpack

-- rewrite_data_files
-- note: file_size_threshold => '96MB' selects files smaller than the plan's min_file_size_bytes; files with deletes attached are rewritten whatever their size
-- note: output files are sized by the catalog's iceberg.target-max-file-size (session property target_max_file_size), not the plan's target of 134217728 bytes
-- note: Trino does not split files above 241591910 bytes, and merges a partition's selected files once there are two (or one with deletes) instead of 5
-- chunk 0: whole table
ALTER TABLE "lake"."lake"."binpack" EXECUTE optimize(file_size_threshold => '96MB');

-- table lake.sort_table_order

-- rewrite_data_files
-- note: Trino's OPTIMIZE writes in the table's sort order (sorted_by) by itself; no sort argument is passed
-- note: file_size_threshold => '96MB' selects files smaller than the plan's min_file_size_bytes; files with deletes attached are rewritten whatever their size
-- note: output files are sized by the catalog's iceberg.target-max-file-size (session property target_max_file_size), not the plan's target of 134217728 bytes
-- note: Trino does not split files above 241591910 bytes, and merges a partition's selected files once there are two (or one with deletes) instead of 5
-- chunk 0: whole table
ALTER TABLE "lake"."lake"."sort_table_order" EXECUTE optimize(file_size_threshold => '96MB');

-- table lake.sort_columns
-- skipped rewrite_data_files: Trino's OPTIMIZE cannot sort by given columns (it bin-packs, following only the table's sorted_by property): set sorted_by and re-plan with the table's order, or run this step on Spark

-- table lake.zorder
-- skipped rewrite_data_files: Trino's OPTIMIZE has no z-order (it bin-packs only); run this step on Spark (strategy => 'sort', sort_order => 'zorder(...)')

-- table lake.zorder_quoted
-- skipped rewrite_data_files: Trino's OPTIMIZE has no z-order (it bin-packs only); run this step on Spark (strategy => 'sort', sort_order => 'zorder(...)')
