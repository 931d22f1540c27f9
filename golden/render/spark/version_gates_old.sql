-- Cryo maintenance for spark (engine catalog lake, source catalog source_catalog)
-- plan fb56e5f6257d35c7873432a8b1cdb97e810e09d835abed837d43030b8ad4e477, made at 2026-06-01T00:00:00.000Z

-- table lake.gated

-- convert_equality_deletes
-- note: Iceberg has no procedure that converts equality deletes: rewrite_data_files with rewrite-all rewrites every data file of the selected partitions, applying their deletes (delete-file-threshold alone would leave files whose stats rule the deletes out, and the deletes would still apply to them by sequence number)
-- note: Iceberg 1.2.1 has no remove-dangling-deletes (from 1.6.0): the applied delete files stay listed (applying to nothing) until a later rewrite
-- chunk 0: whole table
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`gated`', strategy => 'binpack', options => map('rewrite-all', 'true'));

-- rewrite_manifests
-- note: manifest size comes from the table property commit.manifest.target-size-bytes; the plan's 8388608 bytes is not an argument
-- chunk 0: whole table
CALL `lake`.system.rewrite_manifests(table => '`lake`.`lake`.`gated`');

-- expire_snapshots
-- chunk 0: whole table
CALL `lake`.system.expire_snapshots(table => '`lake`.`lake`.`gated`', older_than => TIMESTAMP '2026-05-25 00:00:00.000+00:00', retain_last => 5);
-- skipped rewrite_position_deletes: Iceberg 1.2.1 has no rewrite_position_delete_files procedure (from 1.3.0); upgrade the runtime
-- skipped rewrite_data_files chunk 0 (local=2026-05-01T00:00:00/category_trunc=ab/user_bucket=1): no partition of this chunk can be selected on spark (nothing spark can express selects it: predicate on local (timestamp without zone): Spark 3.2.4 has no TIMESTAMP_NTZ literal (from 3.4.0), and any other literal makes Iceberg refuse the filter; prefix predicate on category: Spark 3.2.4 has no startswith (from 3.3.0); bucket[4] predicate on user_id: a system.bucket term in a procedure's where is verified from Iceberg 1.10.0 (this is 1.2.1)); a partitioned chunk is never turned into a whole-table statement
-- skipped compute_statistics: Iceberg 1.2.1 has no compute_table_stats procedure (from 1.8.0); upgrade the runtime

-- table lake.keep_one

-- expire_snapshots
-- chunk 0: whole table
CALL `lake`.system.expire_snapshots(table => '`lake`.`lake`.`keep_one`', older_than => TIMESTAMP '2026-05-25 00:00:00.000+00:00', retain_last => 1);
