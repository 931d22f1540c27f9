-- Cryo maintenance for spark (engine catalog fixtures, source catalog fixtures)
-- plan (fixture plan, rebased to a fixed now, without the ids and uuids of one fixture run), made at 2026-06-01T00:00:00.000Z

-- table spark.upserts_eq

-- convert_equality_deletes
-- note: Iceberg has no procedure that converts equality deletes: rewrite_data_files with rewrite-all rewrites every data file of the selected partitions, applying their deletes (delete-file-threshold alone would leave files whose stats rule the deletes out, and the deletes would still apply to them by sequence number)
-- note: remove-dangling-deletes then drops the delete files older than every rewritten file (Iceberg's sequence-number rule; unpartitioned tables drop them at commit)
-- chunk 0: whole table
CALL `fixtures`.system.rewrite_data_files(table => '`fixtures`.`spark`.`upserts_eq`', strategy => 'binpack', options => map('rewrite-all', 'true', 'remove-dangling-deletes', 'true'));

-- rewrite_manifests
-- note: manifest size comes from the table property commit.manifest.target-size-bytes; the plan's 8388608 bytes is not an argument
-- chunk 0: whole table
CALL `fixtures`.system.rewrite_manifests(table => '`fixtures`.`spark`.`upserts_eq`');

-- expire_snapshots
-- chunk 0: whole table
CALL `fixtures`.system.expire_snapshots(table => '`fixtures`.`spark`.`upserts_eq`', older_than => TIMESTAMP '2026-05-31 00:00:00.000+00:00', retain_last => 2);

-- remove_orphan_files
-- chunk 0: whole table
CALL `fixtures`.system.remove_orphan_files(table => '`fixtures`.`spark`.`upserts_eq`', older_than => TIMESTAMP '2026-05-29 00:00:00.000+00:00', dry_run => true);
