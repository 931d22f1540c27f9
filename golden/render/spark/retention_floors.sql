-- Cryo maintenance for spark (engine catalog lake, source catalog source_catalog)
-- plan d5abb5a5f62a249b12bc8c61b8d6f5d99c7c930f38faa142bc5671916949a18d, made at 2026-06-01T00:00:00.000Z

-- table lake.expire_1d

-- expire_snapshots
-- chunk 0: whole table
CALL `lake`.system.expire_snapshots(table => '`lake`.`lake`.`expire_1d`', older_than => TIMESTAMP '2026-05-31 00:00:00.000+00:00', retain_last => 1);

-- table lake.expire_3d

-- expire_snapshots
-- chunk 0: whole table
CALL `lake`.system.expire_snapshots(table => '`lake`.`lake`.`expire_3d`', older_than => TIMESTAMP '2026-05-29 00:00:00.000+00:00', retain_last => 2);

-- table lake.expire_7d

-- expire_snapshots
-- chunk 0: whole table
CALL `lake`.system.expire_snapshots(table => '`lake`.`lake`.`expire_7d`', older_than => TIMESTAMP '2026-05-25 00:00:00.000+00:00', retain_last => 2);

-- table lake.expire_30d

-- expire_snapshots
-- chunk 0: whole table
CALL `lake`.system.expire_snapshots(table => '`lake`.`lake`.`expire_30d`', older_than => TIMESTAMP '2026-05-02 00:00:00.000+00:00', retain_last => 2);

-- table lake.orphans_12h
-- skipped remove_orphan_files: orphan older_than is 12h before the plan's now, under the floor of 1d: Spark's remove_orphan_files refuses anything under 24 hours ("Cannot remove orphan files with an interval less than 24 hours"); raise the plan's retention

-- table lake.orphans_1d

-- remove_orphan_files
-- chunk 0: whole table
CALL `lake`.system.remove_orphan_files(table => '`lake`.`lake`.`orphans_1d`', older_than => TIMESTAMP '2026-05-31 00:00:00.000+00:00', dry_run => false);

-- table lake.orphans_3d_dry_run

-- remove_orphan_files
-- chunk 0: whole table
CALL `lake`.system.remove_orphan_files(table => '`lake`.`lake`.`orphans_3d_dry_run`', older_than => TIMESTAMP '2026-05-29 00:00:00.000+00:00', dry_run => true);

-- table lake.orphans_7d

-- remove_orphan_files
-- chunk 0: whole table
CALL `lake`.system.remove_orphan_files(table => '`lake`.`lake`.`orphans_7d`', older_than => TIMESTAMP '2026-05-25 00:00:00.000+00:00', dry_run => false);

-- table lake.orphans_36h

-- remove_orphan_files
-- chunk 0: whole table
CALL `lake`.system.remove_orphan_files(table => '`lake`.`lake`.`orphans_36h`', older_than => TIMESTAMP '2026-05-30 12:00:00.000+00:00', dry_run => false);
