-- Cryo maintenance for spark (engine catalog lake, source catalog source_catalog)
-- plan 4b77d8c0b02d17f6560d25a1a5a798249cbd9ee1d153ddbebd47a7e052755821, made at 2026-06-01T00:00:00.000Z

-- table sales.orders

-- convert_equality_deletes
-- note: Iceberg has no procedure that converts equality deletes: rewrite_data_files with rewrite-all rewrites every data file of the selected partitions, applying their deletes (delete-file-threshold alone would leave files whose stats rule the deletes out, and the deletes would still apply to them by sequence number)
-- note: remove-dangling-deletes then drops the delete files older than every rewritten file (Iceberg's sequence-number rule; unpartitioned tables drop them at commit)
-- chunk 0: ts_day=2026-05-01
CALL `lake`.system.rewrite_data_files(table => '`lake`.`sales`.`orders`', strategy => 'binpack', where => '`ts` >= TIMESTAMP \'2026-05-01 00:00:00+00:00\' AND `ts` < TIMESTAMP \'2026-05-02 00:00:00+00:00\'', options => map('rewrite-all', 'true', 'remove-dangling-deletes', 'true'));

-- rewrite_position_deletes
-- chunk 0: ts_day=2026-05-02
CALL `lake`.system.rewrite_position_delete_files(table => '`lake`.`sales`.`orders`', where => '`ts` >= TIMESTAMP \'2026-05-02 00:00:00+00:00\' AND `ts` < TIMESTAMP \'2026-05-03 00:00:00+00:00\'', options => map('min-input-files', '2'));

-- rewrite_data_files
-- chunk 0: ts_day=2026-05-03, ts_day=2026-05-04
CALL `lake`.system.rewrite_data_files(table => '`lake`.`sales`.`orders`', strategy => 'binpack', where => '(`ts` >= TIMESTAMP \'2026-05-03 00:00:00+00:00\' AND `ts` < TIMESTAMP \'2026-05-04 00:00:00+00:00\') OR (`ts` >= TIMESTAMP \'2026-05-04 00:00:00+00:00\' AND `ts` < TIMESTAMP \'2026-05-05 00:00:00+00:00\')', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));
-- chunk 1: ts_day=2026-05-05
CALL `lake`.system.rewrite_data_files(table => '`lake`.`sales`.`orders`', strategy => 'binpack', where => '`ts` >= TIMESTAMP \'2026-05-05 00:00:00+00:00\' AND `ts` < TIMESTAMP \'2026-05-06 00:00:00+00:00\'', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));

-- compute_statistics
-- chunk 0: whole table
CALL `lake`.system.compute_table_stats(table => '`lake`.`sales`.`orders`', columns => array('order_id', 'customer_id'));

-- rewrite_manifests
-- note: manifest size comes from the table property commit.manifest.target-size-bytes; the plan's 8388608 bytes is not an argument
-- chunk 0: whole table
CALL `lake`.system.rewrite_manifests(table => '`lake`.`sales`.`orders`');

-- expire_snapshots
-- chunk 0: whole table
CALL `lake`.system.expire_snapshots(table => '`lake`.`sales`.`orders`', older_than => TIMESTAMP '2026-05-25 00:00:00.000+00:00', retain_last => 5);

-- remove_orphan_files
-- chunk 0: whole table
CALL `lake`.system.remove_orphan_files(table => '`lake`.`sales`.`orders`', older_than => TIMESTAMP '2026-05-25 00:00:00.000+00:00', dry_run => true);

-- table sales.returns

-- convert_equality_deletes
-- note: Iceberg has no procedure that converts equality deletes: rewrite_data_files with rewrite-all rewrites every data file of the selected partitions, applying their deletes (delete-file-threshold alone would leave files whose stats rule the deletes out, and the deletes would still apply to them by sequence number)
-- note: remove-dangling-deletes then drops the delete files older than every rewritten file (Iceberg's sequence-number rule; unpartitioned tables drop them at commit)
-- chunk 0: whole table
CALL `lake`.system.rewrite_data_files(table => '`lake`.`sales`.`returns`', strategy => 'binpack', options => map('rewrite-all', 'true', 'remove-dangling-deletes', 'true'));

-- rewrite_position_deletes
-- chunk 0: whole table
CALL `lake`.system.rewrite_position_delete_files(table => '`lake`.`sales`.`returns`', options => map('min-input-files', '3'));

-- rewrite_data_files
-- chunk 0: whole table
CALL `lake`.system.rewrite_data_files(table => '`lake`.`sales`.`returns`', strategy => 'binpack', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));

-- compute_statistics
-- chunk 0: whole table
CALL `lake`.system.compute_table_stats(table => '`lake`.`sales`.`returns`');

-- rewrite_manifests
-- note: manifest size comes from the table property commit.manifest.target-size-bytes; the plan's 8388608 bytes is not an argument
-- chunk 0: whole table
CALL `lake`.system.rewrite_manifests(table => '`lake`.`sales`.`returns`');

-- expire_snapshots
-- chunk 0: whole table
CALL `lake`.system.expire_snapshots(table => '`lake`.`sales`.`returns`', older_than => TIMESTAMP '2026-05-18 00:00:00.000+00:00', retain_last => 1);

-- remove_orphan_files
-- chunk 0: whole table
CALL `lake`.system.remove_orphan_files(table => '`lake`.`sales`.`returns`', older_than => TIMESTAMP '2026-05-25 00:00:00.000+00:00', dry_run => false);
