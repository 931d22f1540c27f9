// Writes a metadata-only Iceberg table at lake scale through Iceberg's Java library: real
// manifests, manifest lists and metadata.json versions committed through a JDBC catalog on
// sqlite, with data file entries that carry realistic paths, sizes, row counts and column
// statistics; no Parquet bytes (the files are never read by a metadata scan).
//
// Built and run by benches/scale/run.py (javac against Spark's Iceberg runtime and Hadoop jars):
//
//   java -cp ... Generate --dir DIR --table scale.events --files 1000000 --snapshots 2000 \
//       --partitions 365 --stat-columns 5 --manifests fast --metadata-versions 100 --seed 1
//
// `--warehouse s3://bucket/prefix --s3-endpoint URL --s3-access-key K --s3-secret-key S` writes the
// table to S3 instead (Iceberg's S3FileIO, path-style requests); the catalog stays in DIR.
// `--catalog-type rest --uri URI --credential KEY:SECRET --warehouse NAME` and the same s3 flags
// commit through an Iceberg REST catalog instead (OAuth2 client credentials, S3FileIO); the
// server chooses the table's location, and tables of the same name are dropped first.
//
// Each snapshot appends files/snapshots data files (the last one the remainder), most of them to
// one day (a daily ingest walking through the partitions, one day after another), a tenth to
// random earlier days (late data). `--manifests fast` commits with FastAppend (one new manifest
// per snapshot, as streaming writers leave tables); `merged` with MergeAppend (Iceberg's
// default append, which merges small manifests as it commits). Prints one JSON line at the end.
//
// `--rewrite-every K` makes every K-th commit a compaction instead (RewriteFiles): the oldest
// live appended files, as many as one append adds, are replaced by one file per partition they
// sat in, so that expiring the older snapshots has data files to delete. `--files` counts the
// appended files; the JSON's `files` is what is live at the end, `removed_files` what was replaced.
// `--real-files true` also creates every committed data file on storage, empty, and `--orphans N`
// N files no snapshot references (in the partitions' directories, a few in metadata/): a table
// an orphan listing and a real expiry can run on.
//
// With `--tables N` (N > 1) it writes a fleet instead: N tables `<table>_0000`, ... of mixed sizes
// (one in twenty is large, one in four medium, the rest small: weights 50, 5 and 1, splitting
// `--files` among them), each with at most `--snapshots` snapshots (and `--orphans` each).

import java.io.Closeable;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.iceberg.AppendFiles;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DataFiles;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.ManifestFiles;
import org.apache.iceberg.ManifestReader;
import org.apache.iceberg.Metrics;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.RewriteFiles;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Table;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.SupportsNamespaces;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.io.FileIO;
import org.apache.iceberg.io.SupportsPrefixOperations;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.rest.RESTCatalog;
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
    String catalogType = o.getOrDefault("catalog-type", "jdbc");
    String ident = o.getOrDefault("table", "scale.events");
    long files = Long.parseLong(o.getOrDefault("files", "100000"));
    int snapshots = Integer.parseInt(o.getOrDefault("snapshots", "200"));
    int partitions = Integer.parseInt(o.getOrDefault("partitions", "365"));
    int statColumns = Integer.parseInt(o.getOrDefault("stat-columns", "5"));
    String mode = o.getOrDefault("manifests", "fast");
    int metadataVersions = Integer.parseInt(o.getOrDefault("metadata-versions", "100"));
    long seed = Long.parseLong(o.getOrDefault("seed", "1"));
    boolean realFiles = Boolean.parseBoolean(o.getOrDefault("real-files", "false"));
    long orphans = Long.parseLong(o.getOrDefault("orphans", "0"));
    int rewriteEvery = Integer.parseInt(o.getOrDefault("rewrite-every", "0"));
    if (files < snapshots || snapshots < 1 || partitions < 1 || statColumns < 1) {
      throw new IllegalArgumentException("need files >= snapshots >= 1, partitions >= 1, stat-columns >= 1");
    }
    if (!mode.equals("fast") && !mode.equals("merged")) {
      throw new IllegalArgumentException("--manifests is fast or merged, not " + mode);
    }
    // K = 1 would leave only the first commit an append: nothing older to replace.
    if (rewriteEvery < 0 || rewriteEvery == 1 || orphans < 0) {
      throw new IllegalArgumentException("--rewrite-every is 0 (off) or at least 2; --orphans at least 0");
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

    boolean rest = catalogType.equals("rest");
    Catalog catalog;
    if (rest) {
      catalog = restCatalog(o);
    } else if (catalogType.equals("jdbc")) {
      catalog = jdbcCatalog(o, required(o, "dir"));
    } else {
      throw new IllegalArgumentException("--catalog-type is jdbc or rest, not " + catalogType);
    }
    SupportsNamespaces namespaces = (SupportsNamespaces) catalog;
    TableIdentifier id = TableIdentifier.parse(ident);
    if (!namespaces.namespaceExists(id.namespace())) namespaces.createNamespace(id.namespace());
    if (rest) dropPrevious(catalog, id);
    Map<String, String> tableProps = new HashMap<>();
    tableProps.put("format-version", "2");
    tableProps.put("write.metadata.delete-after-commit.enabled", "true");
    tableProps.put("write.metadata.previous-versions-max", String.valueOf(metadataVersions));
    tableProps.put("commit.manifest-merge.enabled", String.valueOf(mode.equals("merged")));
    // Merged manifests grow to this size (Iceberg's default 8 MB). Each commit merges the bins
    // of older manifests up to it: at a hundred files a commit, thousands of commits rewrite
    // megabytes each (the cost of a long-lived streaming table), a smaller target less.
    if (o.containsKey("manifest-target-kb")) {
      tableProps.put("commit.manifest.target-size-bytes", String.valueOf(Long.parseLong(o.get("manifest-target-kb")) * 1024));
    }
    int tables = Integer.parseInt(o.getOrDefault("tables", "1"));
    if (tables < 1) throw new IllegalArgumentException("--tables must be at least 1");

    SplittableRandom random = new SplittableRandom(seed);
    Creator creator = realFiles || orphans > 0 ? new Creator(8) : null;
    Totals totals = new Totals();
    long started = System.nanoTime();
    if (tables == 1) {
      Table table = catalog.createTable(id, schema, spec, tableProps);
      generate(table, spec, schema, files, snapshots, partitions, mode, rewriteEvery, realFiles, orphans, creator, random,
          totals, true);
    } else {
      long weights = 0;
      for (int t = 0; t < tables; t++) weights += weight(t);
      for (int t = 0; t < tables; t++) {
        long n = Math.max(1, files * weight(t) / weights);
        int snaps = (int) Math.min(n, snapshots);
        TableIdentifier tid = TableIdentifier.of(id.namespace(), String.format("%s_%04d", id.name(), t));
        Table table = catalog.createTable(tid, schema, spec, tableProps);
        generate(table, spec, schema, n, snaps, partitions, mode, rewriteEvery, realFiles, orphans, creator, random,
            totals, false);
        if ((t + 1) % 100 == 0) {
          System.err.printf("%d/%d tables, %d files, %.1f s%n", t + 1, tables, totals.live(), (System.nanoTime() - started) / 1e9);
        }
      }
    }
    double committed = (System.nanoTime() - started) / 1e9;
    long created = 0;
    if (creator != null) created = creator.finish();
    if (catalog instanceof Closeable c) c.close();
    System.out.printf(
        "{\"table\": \"%s\", \"tables\": %d, \"files\": %d, \"removed_files\": %d, \"snapshots\": %d, \"partitions\": %d, "
            + "\"stat_columns\": %d, \"manifests\": \"%s\", \"rewrite_every\": %d, \"orphans\": %d, \"created_files\": %d, "
            + "\"catalog\": \"%s\", \"commit_seconds\": %.1f, \"seconds\": %.1f}%n",
        ident, tables, totals.live(), totals.removed, snapshots, partitions, statColumns, mode, rewriteEvery, orphans, created,
        catalogType, committed, (System.nanoTime() - started) / 1e9);
  }

  /** The generator's catalog `fixtures`: JDBC on sqlite in `dir`, the warehouse local or on S3. */
  static Catalog jdbcCatalog(Map<String, String> o, String dir) {
    JdbcCatalog catalog = new JdbcCatalog();
    Configuration conf = new Configuration();
    conf.set("fs.file.impl", LocalFs.class.getName());
    catalog.setConf(conf);
    Map<String, String> props = new HashMap<>();
    props.put("uri", "jdbc:sqlite:" + dir + "/catalog.db");
    props.put("warehouse", o.getOrDefault("warehouse", "file://" + dir + "/warehouse"));
    // An S3 warehouse (the loopback SeaweedFS of scripts/services.sh): Iceberg's S3FileIO.
    if (o.containsKey("s3-endpoint")) s3(o, props);
    props.put("jdbc.schema-version", "V1");
    catalog.initialize(o.getOrDefault("catalog", "fixtures"), props);
    return catalog;
  }

  /**
   * The local file system for file:// warehouses. Hadoop's default writes a hidden .crc file
   * beside every file (twice the files to create, and noise for an orphan listing) and, without
   * its native library, sets every new file's permission by running chmod: a process per file.
   * This one does neither (new files get the umask's permissions).
   */
  public static final class LocalFs extends RawLocalFileSystem {
    @Override
    public void setPermission(Path p, FsPermission permission) {}
  }

  /** An Iceberg REST catalog with OAuth2 client credentials (SeaweedFS: the S3 keys) and S3FileIO. */
  static Catalog restCatalog(Map<String, String> o) {
    String uri = required(o, "uri");
    Map<String, String> props = new HashMap<>();
    props.put("uri", uri);
    props.put("warehouse", required(o, "warehouse"));
    props.put("credential", required(o, "credential"));
    props.put("oauth2-server-uri", uri.replaceAll("/+$", "") + "/v1/oauth/tokens");
    s3(o, props);
    RESTCatalog catalog = new RESTCatalog();
    catalog.initialize(o.getOrDefault("catalog", "fixtures"), props);
    return catalog;
  }

  static void s3(Map<String, String> o, Map<String, String> props) {
    props.put("io-impl", "org.apache.iceberg.aws.s3.S3FileIO");
    props.put("s3.endpoint", required(o, "s3-endpoint"));
    props.put("s3.path-style-access", "true");
    props.put("s3.access-key-id", required(o, "s3-access-key"));
    props.put("s3.secret-access-key", required(o, "s3-secret-key"));
    props.put("client.region", "us-east-1");
  }

  /**
   * Drop the tables a previous run left in the REST catalog (`name`, `name_0000`, ...), and their
   * files: the server gives a new table of the same name the same location, where old files would
   * be orphans.
   */
  static void dropPrevious(Catalog catalog, TableIdentifier id) {
    for (TableIdentifier t : catalog.listTables(id.namespace())) {
      if (!t.name().equals(id.name()) && !t.name().startsWith(id.name() + "_")) continue;
      String location = null;
      FileIO io = null;
      try {
        Table old = catalog.loadTable(t);
        location = old.location();
        io = old.io();
      } catch (RuntimeException e) {
        System.err.printf("dropping %s, unreadable (%s): its files stay%n", t, e.getMessage());
      }
      catalog.dropTable(t, false);
      // The trailing slash: `events` is a prefix of `events_0000` too.
      if (io instanceof SupportsPrefixOperations prefixed) prefixed.deletePrefix(location + "/");
    }
  }

  /** A fleet table's share of the files: one in twenty large, one in four medium, the rest small. */
  static long weight(int t) {
    return t % 20 == 0 ? 50 : t % 4 == 0 ? 5 : 1;
  }

  /** What the tables hold at the end, summed. */
  static final class Totals {
    long appended;
    long removed;
    long replacements;

    long live() {
      return appended - removed + replacements;
    }
  }

  /**
   * Commit `snapshots` snapshots: appends of `files` data files in all, and with `rewriteEvery` a
   * rewrite in place of every K-th append; `creator` creates the committed files on storage with
   * `realFiles`, and `orphans` files no snapshot references.
   */
  static void generate(Table table, PartitionSpec spec, Schema schema, long files, int snapshots, int partitions,
      String mode, int rewriteEvery, boolean realFiles, long orphans, Creator creator, SplittableRandom random,
      Totals totals, boolean report) throws IOException {
    String location = table.location();
    LocalDate firstDay = LocalDate.of(2024, 1, 1);
    int rewrites = rewriteEvery > 0 ? (snapshots - 1) / rewriteEvery : 0;
    int appends = snapshots - rewrites;
    long perAppend = files / appends;
    long written = 0;
    int appended = 0;
    long started = System.nanoTime();
    for (int s = 0; s < snapshots; s++) {
      if (rewriteEvery > 0 && s > 0 && s % rewriteEvery == 0) {
        rewrite(table, spec, schema, location, s, perAppend, realFiles ? creator : null, random, totals);
      } else {
        long n = ++appended == appends ? files - written : perAppend;
        int today = (int) ((long) s * partitions / snapshots);
        AppendFiles append = mode.equals("fast") ? table.newFastAppend() : table.newAppend();
        for (long i = 0; i < n; i++) {
          int day = random.nextInt(10) == 0 ? random.nextInt(today + 1) : today;
          DataFile file = dataFile(spec, schema, location, firstDay.plusDays(day), s, written + i, random);
          append.appendFile(file);
          if (realFiles) creator.create(table, file.location());
        }
        append.commit();
        written += n;
      }
      if (report && (s + 1) % 100 == 0) {
        System.err.printf("%d/%d snapshots, %d files, %.1f s%n", s + 1, snapshots, written, (System.nanoTime() - started) / 1e9);
      }
    }
    totals.appended += written;
    // In the directories of the days written (and one in fifty in metadata/): where the leftovers
    // of failed writes and commits end up.
    int lastDay = (int) ((long) (snapshots - 1) * partitions / snapshots);
    for (long i = 0; i < orphans; i++) {
      creator.create(table, i % 50 == 49
          ? String.format("%s/metadata/orphan-%06d.avro", location, i)
          : String.format("%s/data/day=%s/orphan-%06d.parquet", location, firstDay.plusDays(i * 7919 % (lastDay + 1)), i));
    }
  }

  /**
   * Replace the oldest live appended files, perAppend of them, by one file per partition they sat
   * in (their rows and bytes summed), as a compaction of small files does. They are read from the
   * oldest manifests, so each carries its manifest's location: the commit then rewrites those
   * manifests only, where files given by path alone would have it read every manifest that may
   * hold their partitions (most of them, with late data), at every rewrite.
   */
  static void rewrite(Table table, PartitionSpec spec, Schema schema, String location, int s, long perAppend,
      Creator dataFiles, SplittableRandom random, Totals totals) throws IOException {
    List<ManifestFile> manifests = new ArrayList<>(table.currentSnapshot().dataManifests(table.io()));
    manifests.sort(Comparator.comparingLong(ManifestFile::minSequenceNumber));
    RewriteFiles rewrite = table.newRewrite();
    TreeMap<Integer, long[]> byDay = new TreeMap<>();
    long taken = 0;
    for (ManifestFile manifest : manifests) {
      try (ManifestReader<DataFile> reader = ManifestFiles.read(manifest, table.io(), table.specs())) {
        for (DataFile f : reader.select(List.of("file_path", "partition", "record_count", "file_size_in_bytes"))) {
          if (taken == perAppend) break;
          if (f.location().contains("/rewrite-")) continue;  // compacted already
          rewrite.deleteFile(f);
          long[] sum = byDay.computeIfAbsent(f.partition().get(0, Integer.class), d -> new long[2]);
          sum[0] += f.recordCount();
          sum[1] += f.fileSizeInBytes();
          taken++;
        }
      }
      if (taken == perAppend) break;
    }
    int k = 0;
    for (Map.Entry<Integer, long[]> e : byDay.entrySet()) {
      LocalDate day = LocalDate.ofEpochDay(e.getKey());
      String prefix = String.format("%s/data/day=%s/rewrite-%05d-%d", location, day, s, k++);
      DataFile file = entry(spec, schema, prefix, day, e.getValue()[0], e.getValue()[1], s, random);
      rewrite.addFile(file);
      if (dataFiles != null) dataFiles.create(table, file.location());
    }
    rewrite.commit();
    totals.removed += taken;
    totals.replacements += byDay.size();
  }

  /**
   * Creates empty files on a table's storage (through its FileIO: local or S3) on a few threads,
   * while the commits go on. The task holds the table: a REST catalog closes a table's FileIO once
   * the table is unreachable.
   */
  static final class Creator {
    static final int BATCH = 512;
    final ThreadPoolExecutor pool;
    final AtomicLong created = new AtomicLong();
    final AtomicReference<Throwable> failed = new AtomicReference<>();
    Table table;
    List<String> batch = new ArrayList<>();

    Creator(int threads) {
      // A short queue, then the caller runs the batch: memory stays bounded at a million files.
      pool = new ThreadPoolExecutor(threads, threads, 0, TimeUnit.SECONDS, new ArrayBlockingQueue<>(threads * 4),
          new ThreadPoolExecutor.CallerRunsPolicy());
    }

    void create(Table t, String path) {
      if (t != table) flush();
      table = t;
      batch.add(path);
      if (batch.size() == BATCH) flush();
    }

    void flush() {
      if (batch.isEmpty()) return;
      Table t = table;
      List<String> paths = batch;
      batch = new ArrayList<>();
      pool.execute(() -> {
        try {
          for (String path : paths) {
            t.io().newOutputFile(path).create().close();
            created.incrementAndGet();
          }
        } catch (IOException e) {
          failed.compareAndSet(null, new UncheckedIOException(e));
        } catch (RuntimeException e) {
          failed.compareAndSet(null, e);
        }
      });
    }

    /** Wait for every file; the count created. */
    long finish() throws Exception {
      flush();
      pool.shutdown();
      pool.awaitTermination(1, TimeUnit.DAYS);
      if (failed.get() != null) throw new RuntimeException("creating files failed", failed.get());
      return created.get();
    }
  }

  static String required(Map<String, String> o, String key) {
    String v = o.get(key);
    if (v == null) throw new IllegalArgumentException("--" + key + " is required");
    return v;
  }

  /** One appended data file entry: 100-500 KB, 3,000-15,000 rows, bounds for every column. */
  static DataFile dataFile(PartitionSpec spec, Schema schema, String location, LocalDate day, int snapshot, long n,
      SplittableRandom random) {
    long rows = 3_000 + random.nextInt(12_000);
    long bytes = 100_000 + random.nextInt(400_000);
    String prefix = String.format("%s/data/day=%s/%05d-%d", location, day, snapshot, n);
    return entry(spec, schema, prefix, day, rows, bytes, n, random);
  }

  /** A data file entry of `rows` rows and `bytes` bytes at `prefix-<random>.parquet`, with bounds. */
  static DataFile entry(PartitionSpec spec, Schema schema, String prefix, LocalDate day, long rows, long bytes, long n,
      SplittableRandom random) {
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
    String path = String.format("%s-%016x.parquet", prefix, random.nextLong());
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
