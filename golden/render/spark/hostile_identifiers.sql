-- Cryo maintenance for spark (engine catalog lake`prod, source catalog source_catalog)
-- plan 964deed39e3e787bde1258b3ac6e88b63a3f3d87f39e817c349a5c4733f0af57, made at 2026-06-01T00:00:00.000Z

-- table "my.ns"."a""b"

-- rewrite_data_files
-- chunk 0: weird=#0, weird=#1, weird=#2, weird=#3, weird=#4
CALL `lake``prod`.system.rewrite_data_files(table => '`lake``prod`.`my.ns`.`a"b`', strategy => 'binpack', where => '`col"quote``tick\'apos` = \'\\\'; DROP TABLE x; --\' OR `col"quote``tick\'apos` = \'back\\\\slash \\\\\\\' \\\\\\\\\' OR `col"quote``tick\'apos` = \'quote"double `tick`\' OR `col"quote``tick\'apos` = \'tab\\there\\r\\nnewline\' OR `col"quote``tick\'apos` = \'{{ jinja }} {% raw %} $$ /* c */ -- ;\'', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));

-- rewrite_manifests
-- note: manifest size comes from the table property commit.manifest.target-size-bytes; the plan's 8388608 bytes is not an argument
-- chunk 0: whole table
CALL `lake``prod`.system.rewrite_manifests(table => '`lake``prod`.`my.ns`.`a"b`');

-- compute_statistics
-- note: statistics column `col"quote`tick'apos`: compute_table_stats checks each name against the schema as written, then resolves it again with Spark's col(), which refuses a backtick in a column name (a quoted name fails the schema check instead); left out, the other columns are computed
-- chunk 0: whole table
CALL `lake``prod`.system.compute_table_stats(table => '`lake``prod`.`my.ns`.`a"b`', columns => array('ÜBER'));

-- table "we`ird".nested."Ünïcödé 表"

-- rewrite_data_files
-- chunk 0: x=1
CALL `lake``prod`.system.rewrite_data_files(table => '`lake``prod`.`we``ird`.`nested`.`Ünïcödé 表`', strategy => 'binpack', where => '`x` = \'\\\'; DROP TABLE x; --\'', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));

-- rewrite_manifests
-- note: manifest size comes from the table property commit.manifest.target-size-bytes; the plan's 8388608 bytes is not an argument
-- chunk 0: whole table
CALL `lake``prod`.system.rewrite_manifests(table => '`lake``prod`.`we``ird`.`nested`.`Ünïcödé 表`');

-- compute_statistics
-- note: statistics column `col"quote`tick'apos`: compute_table_stats checks each name against the schema as written, then resolves it again with Spark's col(), which refuses a backtick in a column name (a quoted name fails the schema check instead); left out, the other columns are computed
-- chunk 0: whole table
CALL `lake``prod`.system.compute_table_stats(table => '`lake``prod`.`we``ird`.`nested`.`Ünïcödé 表`', columns => array('ÜBER'));

-- table db."x; drop table y; --"

-- rewrite_data_files
-- chunk 0: x=1
CALL `lake``prod`.system.rewrite_data_files(table => '`lake``prod`.`db`.`x; drop table y; --`', strategy => 'binpack', where => '`x` = \'1\'', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));

-- rewrite_manifests
-- note: manifest size comes from the table property commit.manifest.target-size-bytes; the plan's 8388608 bytes is not an argument
-- chunk 0: whole table
CALL `lake``prod`.system.rewrite_manifests(table => '`lake``prod`.`db`.`x; drop table y; --`');

-- compute_statistics
-- note: statistics column `col"quote`tick'apos`: compute_table_stats checks each name against the schema as written, then resolves it again with Spark's col(), which refuses a backtick in a column name (a quoted name fails the schema check instead); left out, the other columns are computed
-- chunk 0: whole table
CALL `lake``prod`.system.compute_table_stats(table => '`lake``prod`.`db`.`x; drop table y; --`', columns => array('ÜBER'));

-- table db."line\nbreak"

-- rewrite_data_files
-- chunk 0: x=1
CALL `lake``prod`.system.rewrite_data_files(table => '`lake``prod`.`db`.`line\nbreak`', strategy => 'binpack', where => '`x` = \'1\'', options => map('target-file-size-bytes', '134217728', 'min-file-size-bytes', '100663296', 'max-file-size-bytes', '241591910', 'min-input-files', '5', 'delete-file-threshold', '1'));

-- rewrite_manifests
-- note: manifest size comes from the table property commit.manifest.target-size-bytes; the plan's 8388608 bytes is not an argument
-- chunk 0: whole table
CALL `lake``prod`.system.rewrite_manifests(table => '`lake``prod`.`db`.`line\nbreak`');

-- compute_statistics
-- note: statistics column `col"quote`tick'apos`: compute_table_stats checks each name against the schema as written, then resolves it again with Spark's col(), which refuses a backtick in a column name (a quoted name fails the schema check instead); left out, the other columns are computed
-- chunk 0: whole table
CALL `lake``prod`.system.compute_table_stats(table => '`lake``prod`.`db`.`line\nbreak`', columns => array('ÜBER'));
