-- Cryo maintenance for spark (engine catalog lake, source catalog source_catalog)
-- plan 5ec2945ccd5d57b083dc6de7a17da42b3b895d18c2dd001471724016c33fd7b9, made at 2026-06-01T00:00:00.000Z

-- table lake.events

-- rewrite_data_files
-- note: predicate on at: Spark has no TIME type; dropped, so the statement selects a superset of partitions (safe)
-- note: predicate on d: date literal `2024-13-40` is not YYYY-MM-DD (a malformed plan literal); dropped, so the statement selects a superset of partitions (safe)
-- note: predicate on nanos: Spark has no nanosecond timestamps; dropped, so the statement selects a superset of partitions (safe)
-- note: predicate on v (void): a void partition field constrains nothing; dropped, so the statement selects a superset of partitions (safe)
-- chunk 0: flag=true/small=-7/big=-9223372036854775808
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`events`', strategy => 'binpack', where => '`flag` = true AND `small` = -7 AND `big` = -9223372036854775808', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));
-- chunk 1: ratio=0.5/score=-1.25/amount=1234.50
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`events`', strategy => 'binpack', where => '`ratio` = 0.5F AND `score` = -1.25D AND `amount` = 1234.50BD', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));
-- chunk 2: category=it's \ a\nline/name=Ünïcödé 日本 🙂
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`events`', strategy => 'binpack', where => '`category` = \'it\\\'s \\\\ a\\nline\' AND `name` = \'Ünïcödé 日本 🙂\'', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));
-- chunk 3: id=123e4567-e89b-12d3-a456-426614174000/blob=00ff/tag=cafe
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`events`', strategy => 'binpack', where => '`id` = \'123e4567-e89b-12d3-a456-426614174000\' AND `blob` = X\'00FF\' AND `tag` = X\'CAFE\'', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));
-- chunk 4: d=2024-02-29/local=2024-02-29T10:15:30.5/instant=2024-02-29T10:15:30
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`events`', strategy => 'binpack', where => '`d` = DATE \'2024-02-29\' AND `local` = TIMESTAMP_NTZ \'2024-02-29 10:15:30.5\' AND `instant` = TIMESTAMP \'2024-02-29 10:15:30+00:00\'', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));
-- chunk 5: category=null/ts_day=null
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`events`', strategy => 'binpack', where => '`category` IS NULL AND `ts` IS NULL', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));
-- chunk 6: local_year=2024/d_month=2024-02/ts_day=2024-02-29/local_hour=2024-02-29-23
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`events`', strategy => 'binpack', where => '`local` >= TIMESTAMP_NTZ \'2024-01-01 00:00:00\' AND `local` < TIMESTAMP_NTZ \'2025-01-01 00:00:00\' AND `d` >= DATE \'2024-02-01\' AND `d` < DATE \'2024-03-01\' AND `ts` >= TIMESTAMP \'2024-02-29 00:00:00+00:00\' AND `ts` < TIMESTAMP \'2024-03-01 00:00:00+00:00\' AND `local` >= TIMESTAMP_NTZ \'2024-02-29 23:00:00\' AND `local` < TIMESTAMP_NTZ \'2024-03-01 00:00:00\'', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));
-- chunk 7: user_id_trunc=-20
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`events`', strategy => 'binpack', where => '`user_id` >= -20 AND `user_id` < -10', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));
-- chunk 8: category_trunc=ab%_/region_trunc=eu
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`events`', strategy => 'binpack', where => 'startswith(`category`, \'ab%_\') AND `region` = \'eu\'', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));
-- chunk 9: ts_day=2024-02-29/user_bucket=3, ts_day=2024-03-01
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`events`', strategy => 'binpack', where => '(`ts` >= TIMESTAMP \'2024-02-29 00:00:00+00:00\' AND `ts` < TIMESTAMP \'2024-03-01 00:00:00+00:00\' AND `lake`.system.bucket(8, `user_id`) = 3) OR (`ts` >= TIMESTAMP \'2024-03-01 00:00:00+00:00\' AND `ts` < TIMESTAMP \'2024-03-02 00:00:00+00:00\')', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));
-- chunk 11: address.zip=12345
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`events`', strategy => 'binpack', where => '`address`.`zip` = 12345', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));
-- chunk 12: ts_day=2024-02-29 (misaligned)
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`events`', strategy => 'binpack', where => '`ts` >= TIMESTAMP \'2024-02-29 06:00:00+00:00\' AND `ts` < TIMESTAMP \'2024-03-01 00:00:00+00:00\'', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));
-- chunk 13: d=2024-13-40/category=a
CALL `lake`.system.rewrite_data_files(table => '`lake`.`lake`.`events`', strategy => 'binpack', where => '`category` = \'a\'', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));
-- skipped rewrite_data_files chunk 10 (at=10:30:00): no partition of this chunk can be selected on spark (nothing spark can express selects it: predicate on at: Spark has no TIME type); a partitioned chunk is never turned into a whole-table statement
-- skipped rewrite_data_files chunk 14 (nanos=2024-02-29T10:15:30.123456789): no partition of this chunk can be selected on spark (nothing spark can express selects it: predicate on nanos: Spark has no nanosecond timestamps); a partitioned chunk is never turned into a whole-table statement
-- skipped rewrite_data_files chunk 15 (v=null): no partition of this chunk can be selected on spark (nothing spark can express selects it: predicate on v (void): a void partition field constrains nothing); a partitioned chunk is never turned into a whole-table statement
