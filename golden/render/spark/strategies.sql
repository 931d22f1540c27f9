-- Cryo maintenance for spark (engine catalog lake, source catalog source_catalog)
-- plan 1f66c79d4dc38bde7840b234610ac3101fd96622b8eb17fdbf09da991c109891, made at 2026-06-01T00:00:00.000Z

-- table lake.binpack

-- rewrite_data_files
-- chunk 0: whole table
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`binpack`', strategy => 'binpack', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));

-- table lake.sort_table_order

-- rewrite_data_files
-- note: strategy 'sort' without sort_order uses the table's sort order; Spark refuses when the table has none
-- chunk 0: whole table
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`sort_table_order`', strategy => 'sort', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));

-- table lake.sort_columns

-- rewrite_data_files
-- chunk 0: whole table
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`sort_columns`', strategy => 'sort', sort_order => '`customer_id` DESC NULLS LAST, `address`.`zip`, `order id` ASC NULLS FIRST', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));

-- table lake.zorder
-- skipped rewrite_data_files: z-order column `lon`x`: Iceberg's Spark z-order resolves each name again with Dataset.col, which refuses a backtick in a column name ("Syntax error in attribute name"); a sort strategy can take it

-- table lake.zorder_quoted

-- rewrite_data_files
-- chunk 0: whole table
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`zorder_quoted`', strategy => 'sort', sort_order => 'zorder(`lat`,`lon "deg"`)', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));
