// Writes a metadata-only Iceberg table at lake scale through Iceberg's Java library: real
// manifests, manifest lists and metadata.json versions committed through a JDBC catalog on
// sqlite, with data file entries that carry realistic paths, sizes, row counts and column
// statistics; no Parquet bytes (the files are never read by a metadata scan).
//
// Built and run by benches/scale/run.sh (javac against Spark's Iceberg runtime and Hadoop jars):
//
//   java -cp ... Generate --dir DIR --table scale.events --files 1000000 --snapshots 2000 \
//       --partitions 365 --stat-columns 5 --manifests fast --metadata-versions 100 --seed 1
//
// `--warehouse s3://bucket/prefix --s3-endpoint URL --s3-access-key K --s3-secret-key S` writes the
// table to S3 instead (Iceberg's S3FileIO, path-style requests); the catalog stays in DIR.
//
// Each snapshot appends files/snapshots data files (the last one the remainder), most of them to
// one day (a daily ingest walking through the partitions, one day after another), a tenth to
// random earlier days (late data). `--manifests fast` commits with FastAppend (one new manifest
// per snapshot, as streaming writers leave tables); `merged` with MergeAppend (Iceberg's
// default append, which merges small manifests as it commits). Prints one JSON line at the end.
//
// With `--tables N` (N > 1) it writes a fleet instead: N tables `<table>_0000`, ... of mixed sizes
// (one in twenty is large, one in four medium, the rest small: weights 50, 5 and 1, splitting
// `--files` among them), each with at most `--snapshots` snapshots.

import java.nio.ByteBuffer;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.AppendFiles;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DataFiles;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.Metrics;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Table;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.types.Conversions;
import org.apache.iceberg.types.Type;
import org.apache.iceberg.types.Types;

public class Generate {
  public static void main(String[] args) throws Exception {
    Map<String, String> o = new HashMap<>();
    for (int i = 0; i + 1 < args.length; i += 2) {
      if (!args[i].startsWith("--")) throw new IllegalArgumentException("expected --option, got " + args[i]);
      o.put(args[i].substring(2), args[i + 1]);
    }
    String dir = required(o, "dir");
    String ident = o.getOrDefault("table", "scale.events");
    long files = Long.parseLong(o.getOrDefault("files", "100000"));
    int snapshots = Integer.parseInt(o.getOrDefault("snapshots", "200"));
    int partitions = Integer.parseInt(o.getOrDefault("partitions", "365"));
    int statColumns = Integer.parseInt(o.getOrDefault("stat-columns", "5"));
    String mode = o.getOrDefault("manifests", "fast");
    int metadataVersions = Integer.parseInt(o.getOrDefault("metadata-versions", "100"));
    long seed = Long.parseLong(o.getOrDefault("seed", "1"));
    if (files < snapshots || snapshots < 1 || partitions < 1 || statColumns < 1) {
      throw new IllegalArgumentException("need files >= snapshots >= 1, partitions >= 1, stat-columns >= 1");
    }
    if (!mode.equals("fast") && !mode.equals("merged")) {
      throw new IllegalArgumentException("--manifests is fast or merged, not " + mode);
    }

    // Columns: the partition column `day`, then stat-columns columns alternating long, string,
    // double, timestamp; every column has statistics (the writer's default for few columns).
    List<Types.NestedField> fields = new ArrayList<>();
    fields.add(Types.NestedField.required(1, "day", Types.DateType.get()));
    Type[] kinds = {
      Types.LongType.get(), Types.StringType.get(), Types.DoubleType.get(), Types.TimestampType.withZone()
    };
    for (int c = 0; c < statColumns - 1; c++) {
      fields.add(Types.NestedField.optional(2 + c, "c" + c, kinds[c % kinds.length]));
    }
    Schema schema = new Schema(fields);
    PartitionSpec spec = PartitionSpec.builderFor(schema).identity("day").build();

    JdbcCatalog catalog = new JdbcCatalog();
    catalog.setConf(new Configuration());
    Map<String, String> props = new HashMap<>();
    props.put("uri", "jdbc:sqlite:" + dir + "/catalog.db");
    props.put("warehouse", o.getOrDefault("warehouse", "file://" + dir + "/warehouse"));
    if (o.containsKey("s3-endpoint")) {
      // An S3 warehouse (the loopback SeaweedFS of scripts/services.sh): Iceberg's S3FileIO.
      props.put("io-impl", "org.apache.iceberg.aws.s3.S3FileIO");
      props.put("s3.endpoint", o.get("s3-endpoint"));
      props.put("s3.path-style-access", "true");
      props.put("s3.access-key-id", required(o, "s3-access-key"));
      props.put("s3.secret-access-key", required(o, "s3-secret-key"));
      props.put("client.region", "us-east-1");
    }
    props.put("jdbc.schema-version", "V1");
    catalog.initialize(o.getOrDefault("catalog", "fixtures"), props);
    TableIdentifier id = TableIdentifier.parse(ident);
    if (!catalog.namespaceExists(id.namespace())) catalog.createNamespace(id.namespace());
    Map<String, String> tableProps = new HashMap<>();
    tableProps.put("format-version", "2");
    tableProps.put("write.metadata.delete-after-commit.enabled", "true");
    tableProps.put("write.metadata.previous-versions-max", String.valueOf(metadataVersions));
    tableProps.put("commit.manifest-merge.enabled", String.valueOf(mode.equals("merged")));
    int tables = Integer.parseInt(o.getOrDefault("tables", "1"));
    if (tables < 1) throw new IllegalArgumentException("--tables must be at least 1");

    SplittableRandom random = new SplittableRandom(seed);
    long started = System.nanoTime();
    long written = 0;
    if (tables == 1) {
      Table table = catalog.createTable(id, schema, spec, tableProps);
      written = append(table, spec, schema, files, snapshots, partitions, mode, random, true);
    } else {
      long weights = 0;
      for (int t = 0; t < tables; t++) weights += weight(t);
      for (int t = 0; t < tables; t++) {
        long n = Math.max(1, files * weight(t) / weights);
        int snaps = (int) Math.min(n, snapshots);
        TableIdentifier tid = TableIdentifier.of(id.namespace(), String.format("%s_%04d", id.name(), t));
        Table table = catalog.createTable(tid, schema, spec, tableProps);
        written += append(table, spec, schema, n, snaps, partitions, mode, random, false);
        if ((t + 1) % 100 == 0) {
          System.err.printf("%d/%d tables, %d files, %.1f s%n", t + 1, tables, written, (System.nanoTime() - started) / 1e9);
        }
      }
    }
    System.out.printf(
        "{\"table\": \"%s\", \"tables\": %d, \"files\": %d, \"snapshots\": %d, \"partitions\": %d, \"stat_columns\": %d, \"manifests\": \"%s\", \"seconds\": %.1f}%n",
        ident, tables, written, snapshots, partitions, statColumns, mode, (System.nanoTime() - started) / 1e9);
  }

  /** A fleet table's share of the files: one in twenty large, one in four medium, the rest small. */
  static long weight(int t) {
    return t % 20 == 0 ? 50 : t % 4 == 0 ? 5 : 1;
  }

  /** Commit `snapshots` appends of `files` data files in all; the files written. */
  static long append(Table table, PartitionSpec spec, Schema schema, long files, int snapshots, int partitions,
      String mode, SplittableRandom random, boolean report) {
    String location = table.location();
    LocalDate firstDay = LocalDate.of(2024, 1, 1);
    long perSnapshot = files / snapshots;
    long written = 0;
    long started = System.nanoTime();
    for (int s = 0; s < snapshots; s++) {
      long n = s == snapshots - 1 ? files - written : perSnapshot;
      int today = (int) ((long) s * partitions / snapshots);
      AppendFiles append = mode.equals("fast") ? table.newFastAppend() : table.newAppend();
      for (long i = 0; i < n; i++) {
        int day = random.nextInt(10) == 0 ? random.nextInt(today + 1) : today;
        append.appendFile(dataFile(spec, schema, location, firstDay.plusDays(day), s, written + i, random));
      }
      append.commit();
      written += n;
      if (report && (s + 1) % 100 == 0) {
        System.err.printf("%d/%d snapshots, %d files, %.1f s%n", s + 1, snapshots, written, (System.nanoTime() - started) / 1e9);
      }
    }
    return written;
  }

  static String required(Map<String, String> o, String key) {
    String v = o.get(key);
    if (v == null) throw new IllegalArgumentException("--" + key + " is required");
    return v;
  }

  /** One data file entry: 100-500 KB, 3,000-15,000 rows, bounds for every column. */
  static DataFile dataFile(PartitionSpec spec, Schema schema, String location, LocalDate day, int snapshot, long n,
      SplittableRandom random) {
    long rows = 3_000 + random.nextInt(12_000);
    long bytes = 100_000 + random.nextInt(400_000);
    Map<Integer, Long> sizes = new HashMap<>();
    Map<Integer, Long> values = new HashMap<>();
    Map<Integer, Long> nulls = new HashMap<>();
    Map<Integer, ByteBuffer> lower = new HashMap<>();
    Map<Integer, ByteBuffer> upper = new HashMap<>();
    int dayValue = (int) day.toEpochDay();
    for (Types.NestedField f : schema.columns()) {
      int fid = f.fieldId();
      sizes.put(fid, bytes / schema.columns().size());
      values.put(fid, rows);
      nulls.put(fid, fid == 1 ? 0L : (long) random.nextInt(50));
      Object lo;
      Object hi;
      switch (f.type().typeId()) {
        case DATE:
          lo = dayValue;
          hi = dayValue;
          break;
        case LONG:
          long base = n * 20_000L;
          lo = base;
          hi = base + rows;
          break;
        case STRING:
          lo = String.format("user-%08d", random.nextInt(1_000_000));
          hi = String.format("user-%08d", 1_000_000 + random.nextInt(1_000_000));
          break;
        case DOUBLE:
          lo = random.nextDouble() * 10;
          hi = 10 + random.nextDouble() * 1000;
          break;
        case TIMESTAMP:
          long micros = dayValue * 86_400_000_000L;
          lo = micros + random.nextInt(1_000_000) * 1_000L;
          hi = micros + 86_000_000_000L + random.nextInt(400_000) * 1_000L;
          break;
        default:
          throw new IllegalStateException("no bounds for " + f.type());
      }
      lower.put(fid, Conversions.toByteBuffer(f.type(), lo));
      upper.put(fid, Conversions.toByteBuffer(f.type(), hi));
    }
    String path = String.format("%s/data/day=%s/%05d-%d-%016x.parquet", location, day, snapshot, n, random.nextLong());
    return DataFiles.builder(spec)
        .withPath(path)
        .withFormat(FileFormat.PARQUET)
        .withPartitionPath("day=" + day)
        .withFileSizeInBytes(bytes)
        .withRecordCount(rows)
        .withMetrics(new Metrics(rows, sizes, values, nulls, null, lower, upper))
        .build();
  }
}
