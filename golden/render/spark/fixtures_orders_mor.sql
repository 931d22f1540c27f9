-- Cryo maintenance for spark (engine catalog fixtures, source catalog fixtures)
-- plan (fixture plan, rebased to a fixed now, without the ids and uuids of one fixture run), made at 2026-06-01T00:00:00.000Z

-- table spark.orders_mor

-- rewrite_position_deletes
-- chunk 0: order_date_month=2026-01, order_date_month=2026-02, order_date_month=2026-03
CALL `fixtures`.system.rewrite_position_delete_files(table => '`fixtures`.`spark`.`orders_mor`', where => '(`order_date` >= DATE \'2026-01-01\' AND `order_date` < DATE \'2026-02-01\') OR (`order_date` >= DATE \'2026-02-01\' AND `order_date` < DATE \'2026-03-01\') OR (`order_date` >= DATE \'2026-03-01\' AND `order_date` < DATE \'2026-04-01\')', options => map('min-input-files', '2'));

-- rewrite_data_files
-- chunk 0: order_date_month=2026-01, order_date_month=2026-02, order_date_month=2026-03
CALL `fixtures`.system.rewrite_data_files(table => '`fixtures`.`spark`.`orders_mor`', strategy => 'sort', sort_order => 'zorder(`customer_id`,`order_id`)', where => '(`order_date` >= DATE \'2026-01-01\' AND `order_date` < DATE \'2026-02-01\') OR (`order_date` >= DATE \'2026-02-01\' AND `order_date` < DATE \'2026-03-01\') OR (`order_date` >= DATE \'2026-03-01\' AND `order_date` < DATE \'2026-04-01\')', options => map('target-file-size-bytes', '536870912', 'min-file-size-bytes', '402653184', 'max-file-size-bytes', '966367641', 'min-input-files', '5', 'delete-file-threshold', '1'));

-- rewrite_manifests
-- note: manifest size comes from the table property commit.manifest.target-size-bytes; the plan's 8388608 bytes is not an argument
-- chunk 0: whole table
CALL `fixtures`.system.rewrite_manifests(table => '`fixtures`.`spark`.`orders_mor`');

-- expire_snapshots
-- chunk 0: whole table
CALL `fixtures`.system.expire_snapshots(table => '`fixtures`.`spark`.`orders_mor`', older_than => TIMESTAMP '2026-05-31 00:00:00.000+00:00', retain_last => 2);

-- remove_orphan_files
-- chunk 0: whole table
CALL `fixtures`.system.remove_orphan_files(table => '`fixtures`.`spark`.`orders_mor`', older_than => TIMESTAMP '2026-05-29 00:00:00.000+00:00', dry_run => true);
