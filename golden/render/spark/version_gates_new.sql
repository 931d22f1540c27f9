-- Cryo maintenance for spark (engine catalog lake, source catalog source_catalog)
-- plan fb56e5f6257d35c7873432a8b1cdb97e810e09d835abed837d43030b8ad4e477, made at 2026-06-01T00:00:00.000Z

-- table lake.gated

-- convert_equality_deletes
-- note: Iceberg has no procedure that converts equality deletes: rewrite_data_files with rewrite-all rewrites every data file of the selected partitions, applying their deletes (delete-file-threshold alone would leave files whose stats rule the deletes out, and the deletes would still apply to them by sequence number)
-- note: remove-dangling-deletes then drops the delete files older than every rewritten file (Iceberg's sequence-number rule; unpartitioned tables drop them at commit)
-- chunk 0: whole table
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`gated`', strategy => 'binpack', options => map('rewrite-all', 'true', 'remove-dangling-deletes', 'true'));

-- rewrite_position_deletes
-- chunk 0: whole table
CALL `lake`.system.rewrite_position_delete_files(table => '`lake`.`lake`.`gated`', options => map('min-input-files', '2'));

-- rewrite_data_files
-- chunk 0: local=2026-05-01T00:00:00/category_trunc=ab/user_bucket=1
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`gated`', strategy => 'binpack', where => '`local` = TIMESTAMP_NTZ \'2026-05-01 00:00:00\' AND startswith(`category`, \'ab\') AND `lake`.system.bucket(4, `user_id`) = 1', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));

-- compute_statistics
-- chunk 0: whole table
CALL `lake`.system.compute_table_stats(table => '`lake`.`lake`.`gated`');

-- rewrite_manifests
-- note: manifest size comes from the table property commit.manifest.target-size-bytes; the plan's 8388608 bytes is not an argument
-- chunk 0: whole table
CALL `lake`.system.rewrite_manifests(table => '`lake`.`lake`.`gated`');

-- expire_snapshots
-- chunk 0: whole table
CALL `lake`.system.expire_snapshots(table => '`lake`.`lake`.`gated`', older_than => TIMESTAMP '2026-05-25 00:00:00.000+00:00', retain_last => 5);

-- table lake.keep_one

-- expire_snapshots
-- chunk 0: whole table
CALL `lake`.system.expire_snapshots(table => '`lake`.`lake`.`keep_one`', older_than => TIMESTAMP '2026-05-25 00:00:00.000+00:00', retain_last => 1);
