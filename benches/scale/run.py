"""Metadata at lake scale: Cryo beside PyIceberg and Spark on one generated table.

    bash scripts/peers.sh                       # once: PyIceberg, Spark + Iceberg, the JDBC driver
    $PEERS_PYTHON benches/scale/run.py --files 100000 --snapshots 200
    $PEERS_PYTHON benches/scale/run.py --files 1000000 --snapshots 2000 --contenders cryo,spark

The table is written by ``Generate.java`` through Iceberg's Java library (compiled here against
Spark's Iceberg runtime and Hadoop jars) into ``target/bench/scale/<shape>/`` and reused; every
operation then runs in a process of its own, one after another, and is measured from outside:
wall seconds, CPU seconds (user + system) and peak RSS of that process (for Spark, of its JVM).

With ``--tables N`` it writes a fleet of N tables of mixed sizes (and registers one more whose
metadata.json is corrupt) and times Cryo's ``fleet`` operation: a fleet scan of the whole catalog,
then a plan of it. ``--rewrite-every K`` makes every K-th commit a compaction (a history with
replaced data files), ``--real-files`` creates the data files on storage (empty) and ``--orphans N``
N unreferenced files beside them: a table for real expiry and orphan listing. ``--rest`` puts the
table (or fleet) in the loopback REST catalog (``scripts/services.sh start``).

Operations (``--ops`` picks among them): Cryo ``scan`` (load + scan + grade), ``scan-memo`` (the
same with a scan memo the scan before it left, as a scheduled scan finds it), ``files`` (live-file
listing), ``plan`` (scan + grade + plan), ``expire-dry`` (expiry to the last snapshot, dry run),
``expire`` (that expiry, for real), ``orphans`` (orphan listing, dry run); PyIceberg
``inspect.files()``, ``inspect.partitions()``, ``scan().plan_files()``; Spark (warm session: each
query once to warm, then timed) ``SELECT count(*)`` over the ``files`` and ``partitions``
metadata tables, and the procedures ``expire_snapshots`` and ``remove_orphan_files`` (dry run),
timed once after a cheap query. ``expire`` and ``expire_snapshots`` change the table: each starts
from the table as generated, restored after it. Prints a Markdown table; the full record goes to
``target/bench/scale/result-<time>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def log(msg: str) -> None:
    print(f"[scale {dt.datetime.now():%H:%M:%S}] {msg}", file=sys.stderr, flush=True)


def measured(argv: list[str], env: dict[str, str] | None = None) -> dict:
    """Run ``argv`` to completion; its stdout's last line (JSON), wall and CPU seconds, peak RSS."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[:3]} exited {proc.returncode}")
    result = json.loads(out.strip().splitlines()[-1])
    result.setdefault("process_s", round(wall, 2))
    result["cpu_s"] = round(usage.ru_utime + usage.ru_stime, 2)
    result.setdefault("peak_rss_mib", round(usage.ru_maxrss / 1024))
    return result


def jars() -> tuple[str, str]:
    """The class path for Generate.java: Iceberg's Spark runtime, the sqlite JDBC driver, Hadoop."""
    import pyspark

    listed = [j for j in os.environ.get("SPARK_JARS", "").split(",") if j]
    runtime = [j for j in listed if "iceberg-spark-runtime" in j or "sqlite-jdbc" in j or "iceberg-aws-bundle" in j]
    if len(runtime) < 2:
        sys.exit("SPARK_JARS lacks the Iceberg runtime or the sqlite driver: run scripts/peers.sh and source peers.env")
    spark_jars = Path(pyspark.__file__).parent / "jars"
    return ":".join(runtime), f"{spark_jars}/*"


def generate(args: argparse.Namespace, out: Path) -> Path:
    tables = getattr(args, "tables", 1)
    rewrite_every = getattr(args, "rewrite_every", 0)
    real_files = getattr(args, "real_files", False)
    orphans = getattr(args, "orphans", 0)
    rest = getattr(args, "rest", False)
    shape = f"f{args.files}-s{args.snapshots}-p{args.partitions}-c{args.stat_columns}-{args.manifests}"
    if getattr(args, "manifest_target_kb", None):
        shape += f"{args.manifest_target_kb}k"
    if tables > 1:
        shape += f"-t{tables}"
    if rewrite_every:
        shape += f"-r{rewrite_every}"
    if real_files:
        shape += "-real"
    if orphans:
        shape += f"-o{orphans}"
    s3 = s3_env() if getattr(args, "s3", False) or rest else None
    shape += "-rest" if rest else "-s3" if s3 else ""
    table_dir = out / shape
    done = table_dir / "generated.json"
    # The REST catalog holds one generated shape at a time (the generator drops the previous one).
    in_rest = out / "rest-shape"
    if done.exists() and not args.regenerate:
        if not rest or (in_rest.exists() and in_rest.read_text() == shape):
            log(f"reusing {table_dir}")
            return table_dir
        log(f"the REST catalog holds another shape now: regenerating {shape}")
    runtime, hadoop = jars()
    classes = out / "classes"
    source = HERE / "Generate.java"
    if not (classes / "Generate.class").exists() or (classes / "Generate.class").stat().st_mtime < source.stat().st_mtime:
        classes.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-nowarn", "-cp", f"{runtime}:{hadoop}", "-d", str(classes), str(source)], check=True)
    subprocess.run(["rm", "-rf", str(table_dir)], check=True)
    table_dir.mkdir(parents=True)
    warehouse = f"s3://{s3['CRYO_SEAWEED_BUCKET']}/scale/{shape}" if s3 and not rest else None
    if warehouse:
        clear_s3(s3, warehouse)  # a regenerated table's stale files would be orphans
    log(f"generating {shape} (Iceberg's Java library)")
    record = measured(
        [
            "java",
            f"-Xmx{args.generator_memory}",
            "-cp",
            f"{classes}:{runtime}:{hadoop}",
            "Generate",
            "--dir",
            str(table_dir),
            "--table",
            args.table,
            "--files",
            str(args.files),
            "--snapshots",
            str(args.snapshots),
            "--partitions",
            str(args.partitions),
            "--stat-columns",
            str(args.stat_columns),
            "--manifests",
            args.manifests,
            "--metadata-versions",
            str(args.metadata_versions),
            *(["--manifest-target-kb", str(args.manifest_target_kb)] if getattr(args, "manifest_target_kb", None) else []),
            "--tables",
            str(tables),
            "--rewrite-every",
            str(rewrite_every),
            "--real-files",
            str(real_files).lower(),
            "--orphans",
            str(orphans),
        ]
        + (["--warehouse", warehouse] if warehouse else [])
        + (rest_flags(s3) if rest else [])
        + (
            [
                "--s3-endpoint",
                s3["CRYO_SEAWEED_S3_ENDPOINT"],
                "--s3-access-key",
                s3["CRYO_SEAWEED_ACCESS_KEY"],
                "--s3-secret-key",
                s3["CRYO_SEAWEED_SECRET_KEY"],
            ]
            if s3
            else []
        )
    )
    if tables > 1 and not rest:
        broken_table(table_dir, args.table)
    elif tables > 1:
        broken_rest_table(s3, f"{args.table}_{tables - 1:04d}")
    if rest:
        in_rest.write_text(shape)
    if s3:
        record["metadata_mb"] = None  # on S3: not summed here
    else:
        metadata = sum(f.stat().st_size for f in (table_dir / "warehouse").rglob("*") if f.is_file())
        record["metadata_mb"] = round(metadata / 1e6, 1)
    done.write_text(json.dumps(record))
    log(f"generated in {record['process_s']} s: {record['metadata_mb']} MB of metadata")
    return table_dir


def s3_env() -> dict[str, str]:
    """The loopback SeaweedFS S3 endpoint and keys (``scripts/services.sh start`` writes them)."""
    sys.path.insert(0, str(ROOT / "tests" / "py"))
    import cryo_peers

    env = cryo_peers.services_env()
    if not env.get("CRYO_SEAWEED_S3_ENDPOINT"):
        sys.exit("no S3 endpoint: run scripts/services.sh start")
    return env


def rest_flags(env: dict[str, str]) -> list[str]:
    """The generator's flags for the loopback REST catalog (its S3 flags come with them)."""
    if not env.get("CRYO_REST_URI"):
        sys.exit("no REST catalog: run scripts/services.sh start")
    return [
        "--catalog-type",
        "rest",
        "--uri",
        env["CRYO_REST_URI"],
        "--warehouse",
        env["CRYO_REST_WAREHOUSE"],
        "--credential",
        env["CRYO_REST_CREDENTIAL"],
    ]


def rest_props(env: dict[str, str]) -> list[str]:
    """Cryo's catalog properties for the loopback REST catalog (the S3 ones are ``s3_props``)."""
    props = {"type": "rest", "uri": env["CRYO_REST_URI"], "warehouse": env["CRYO_REST_WAREHOUSE"], "credential": env["CRYO_REST_CREDENTIAL"]}
    return [a for k, v in props.items() for a in ("--prop", f"{k}={v}")]


def s3_filesystem(env: dict[str, str]):
    """The loopback S3 as a PyArrow file system."""
    import pyarrow.fs as pafs

    endpoint = env["CRYO_SEAWEED_S3_ENDPOINT"]
    return pafs.S3FileSystem(
        endpoint_override=endpoint.split("://", 1)[-1],
        scheme=endpoint.split("://", 1)[0],
        access_key=env["CRYO_SEAWEED_ACCESS_KEY"],
        secret_key=env["CRYO_SEAWEED_SECRET_KEY"],
        region="us-east-1",
    )


def clear_s3(env: dict[str, str], url: str) -> None:
    """Delete everything under the S3 prefix ``url``."""
    s3_filesystem(env).delete_dir_contents(url.split("://", 1)[-1], missing_dir_ok=True)


def s3_properties(endpoint: str, s3: dict[str, str]) -> dict[str, str]:
    """Catalog properties (PyIceberg's names, which Cryo shares) for the S3 warehouse at ``endpoint``."""
    return {
        "s3.endpoint": endpoint,
        "s3.access-key-id": s3["CRYO_SEAWEED_ACCESS_KEY"],
        "s3.secret-access-key": s3["CRYO_SEAWEED_SECRET_KEY"],
        "s3.region": "us-east-1",
        "s3.path-style-access": "true",
    }


def s3_props(endpoint: str, s3: dict[str, str]) -> list[str]:
    """Cryo's catalog properties for the S3 warehouse at ``endpoint`` (the proxy's, or the server's)."""
    return [a for k, v in s3_properties(endpoint, s3).items() for a in ("--prop", f"{k}={v}")]


class LatencyProxy:
    """``latency_proxy.py`` in front of the S3 endpoint for one measured operation."""

    def __init__(self, target: str, latency_ms: float) -> None:
        hostport = target.split("://", 1)[-1].rstrip("/")
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "latency_proxy.py"), "--to", hostport, "--latency-ms", str(latency_ms)],
            stdout=subprocess.PIPE,
            text=True,
        )
        ready = self.proc.stdout.readline().split() if self.proc.stdout else []
        if ready[:1] != ["listening"]:
            sys.exit("the latency proxy did not start")
        self.endpoint = f"http://127.0.0.1:{ready[1]}"

    def stop(self) -> dict:
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=30)
        return json.loads(out.strip().splitlines()[-1])


def broken_rest_table(env: dict[str, str], table: str) -> None:
    """Break the fleet's last table in the REST catalog: delete its current manifest list, so
    that a fleet scan reports it as one error entry. (SeaweedFS serves a table's metadata from
    its own store: a metadata.json that is not JSON, registered or overwritten, is never read.)"""
    from pyiceberg.catalog.rest import RestCatalog

    props = s3_properties(env["CRYO_SEAWEED_S3_ENDPOINT"], env)
    catalog = RestCatalog("fixtures", uri=env["CRYO_REST_URI"], warehouse=env["CRYO_REST_WAREHOUSE"], credential=env["CRYO_REST_CREDENTIAL"], **props)
    snapshot = catalog.load_table(table).current_snapshot()
    assert snapshot is not None
    s3_filesystem(env).delete_file(snapshot.manifest_list.split("://", 1)[-1])
    log(f"broke {table}: deleted its manifest list {snapshot.manifest_list}")


def broken_table(table_dir: Path, prefix: str) -> None:
    """Register one more table whose metadata.json is not JSON: a fleet scan reports it as one
    error entry and scans the rest."""
    import sqlite3

    ns, _, name = prefix.rpartition(".")
    bad = table_dir / "warehouse" / ns / f"{name}_broken" / "metadata" / "00000-broken.metadata.json"
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text("{ this is not metadata")
    with sqlite3.connect(table_dir / "catalog.db") as db:
        db.execute(
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location, iceberg_type) VALUES (?, ?, ?, ?, NULL, 'TABLE')",
            ("fixtures", ns, f"{name}_broken", f"file://{bad}"),
        )


def cryo_binary() -> str:
    out = subprocess.run(
        ["cargo", "bench", "-q", "-p", "cryo-core", "--bench", "scale", "--no-run", "--message-format=json"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("target", {}).get("name") == "scale" and msg.get("executable"):
            return msg["executable"]
    sys.exit("cargo built no `scale` bench binary")


PYICEBERG = """
import json, sys, time
from pyiceberg.catalog.sql import SqlCatalog
d, table, op = sys.argv[1:4]
t0 = time.monotonic()
t = SqlCatalog("fixtures", uri=f"sqlite:///{d}/catalog.db", warehouse=f"file://{d}/warehouse").load_table(table)
if op == "inspect.files":
    n = t.inspect.files().num_rows
elif op == "inspect.partitions":
    n = t.inspect.partitions().num_rows
else:
    n = sum(1 for _ in t.scan().plan_files())
print(json.dumps({"op": op, "rows": n, "seconds": time.monotonic() - t0}))
"""

SPARK = """
import datetime as dt, json, os, sys, time
sys.path.insert(0, sys.argv[4])
import cryo_peers
d, table, op = sys.argv[1:4]
spark = cryo_peers.spark_session(f"{d}/catalog.db", f"{d}/warehouse", app_name="cryo-scale", memory="4g")
if op in ("files", "partitions"):
    sql = f"SELECT count(*) FROM fixtures.{table}.{op}"
    spark.sql(sql).collect()  # warm: the session, the catalog, the JIT
    t0 = time.monotonic()
    out = {"rows": spark.sql(sql).collect()[0][0]}
else:
    # A procedure cannot run twice on the same table: warm the session and the catalog with a
    # cheap query, then time one call. The session's time zone is UTC.
    spark.sql(f"SELECT count(*) FROM fixtures.{table}.snapshots").collect()
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    more = "retain_last => 1" if op == "expire_snapshots" else "dry_run => true"
    if op == "remove_orphan_files":
        # The procedure refuses an older_than under a day ago unless the session is a test's; the
        # flag is read from the session's runtime conf, which takes a core key only with this.
        spark.conf.set("spark.sql.legacy.setCommandRejectsSparkCoreConfs", "false")
        spark.conf.set("spark.testing", "true")
    sql = f"CALL fixtures.system.{op}(table => '{table}', older_than => TIMESTAMP '{now}', {more})"
    t0 = time.monotonic()
    rows = spark.sql(sql).collect()
    out = rows[0].asDict() if op == "expire_snapshots" else {"orphans": len(rows)}
seconds = time.monotonic() - t0
pid = spark._jvm.java.lang.ProcessHandle.current().pid()
hwm = next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmHWM"))
print(json.dumps({"op": op, **out, "seconds": seconds, "peak_rss_mib": round(hwm / 1024)}))
"""

# The operations of each contender; the first list is what runs without --ops.
OPS = {
    "cryo": (["scan", "scan-memo", "files", "plan", "expire-dry"], ["expire", "orphans"]),
    "pyiceberg": (["inspect.files", "inspect.partitions", "plan_files"], []),
    "spark": (["files", "partitions"], ["expire_snapshots", "remove_orphan_files"]),
}
# Operations that change the table: each runs on the table as generated, restored after it.
DESTRUCTIVE = {("cryo", "expire"), ("spark", "expire_snapshots")}


class Pristine:
    """The table as generated, kept beside it: a hard-link copy of the warehouse (Iceberg never
    changes a file in place, and a deleted file keeps its other link) and a copy of the sqlite
    catalog. Metadata holds absolute paths, so the table is restored where it was, not copied."""

    def __init__(self, table_dir: Path) -> None:
        self.dir = table_dir
        self.copy = table_dir / "warehouse.pristine"
        self.db = table_dir / "catalog.db.pristine"
        # Written before a destructive operation and removed by the restore after it: an
        # interrupted run leaves it, and the next one restores before any operation.
        self.dirty = table_dir / "warehouse.dirty"
        if self.dirty.exists():
            self.restore()

    def before(self) -> None:
        if not self.copy.exists():
            t0 = time.monotonic()
            subprocess.run(["cp", "-al", str(self.dir / "warehouse"), str(self.copy)], check=True)
            shutil.copy2(self.dir / "catalog.db", self.db)
            log(f"  kept the table as generated ({time.monotonic() - t0:.1f} s)")
        self.dirty.touch()

    def restore(self) -> None:
        t0 = time.monotonic()
        shutil.rmtree(self.dir / "warehouse")
        subprocess.run(["cp", "-al", str(self.copy), str(self.dir / "warehouse")], check=True)
        for f in self.dir.glob("catalog.db-*"):  # a journal left by a failed commit
            f.unlink()
        shutil.copy2(self.db, self.dir / "catalog.db")
        self.dirty.unlink(missing_ok=True)
        log(f"  restored the table as generated ({time.monotonic() - t0:.1f} s)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", type=int, default=100_000)
    p.add_argument("--snapshots", type=int, default=200)
    p.add_argument("--partitions", type=int, default=365)
    p.add_argument("--stat-columns", type=int, default=5)
    p.add_argument("--manifests", choices=["fast", "merged"], default="fast")
    p.add_argument("--metadata-versions", type=int, default=100)
    p.add_argument("--manifest-target-kb", type=int, help="merged manifests' target size (default: Iceberg's, 8 MB)")
    p.add_argument("--table", default="scale.events")
    p.add_argument("--tables", type=int, default=1, help="a fleet of this many tables (cryo only: fleet scan + plan)")
    p.add_argument("--contenders", default="cryo,pyiceberg,spark")
    p.add_argument("--ops", help="the operations to run, comma-separated, of every contender that has them (default: the read-only ones)")
    p.add_argument("--rewrite-every", type=int, default=0, help="every K-th commit a compaction of the oldest files (0: none)")
    p.add_argument("--real-files", action="store_true", help="create the data files on storage (empty)")
    p.add_argument("--orphans", type=int, default=0, help="create this many unreferenced files under the table")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--out", type=Path, default=ROOT / "target" / "bench" / "scale")
    p.add_argument("--generator-memory", default="4g")
    p.add_argument("--regenerate", action="store_true")
    p.add_argument("--generate-only", action="store_true")
    p.add_argument("--s3", action="store_true", help="the table on the loopback S3 (scripts/services.sh start); Cryo only")
    p.add_argument("--rest", action="store_true", help="the table in the loopback REST catalog, on its S3 (scripts/services.sh start); Cryo only")
    p.add_argument("--latency-ms", type=float, default=0, help="with --s3 or --rest: every S3 request delayed this much by a proxy")
    p.add_argument("--concurrency", type=int, help="Cryo's scan concurrency (default: Cryo's)")
    p.add_argument("--cryo-binary", help="a built `scale` bench binary (default: cargo bench builds it)")
    args = p.parse_args()
    if args.s3 and args.rest:
        sys.exit("--s3 or --rest, not both")
    remote = args.s3 or args.rest
    args.out = args.out.resolve()  # the catalog holds absolute paths
    args.out.mkdir(parents=True, exist_ok=True)
    contenders = args.contenders.split(",")
    if args.tables > 1 or remote:
        contenders = ["cryo"]
    ops = args.ops.split(",") if args.ops else None
    known = {op for who in OPS for op in OPS[who][0] + OPS[who][1]} | {"fleet"}
    if ops and set(ops) - known:
        sys.exit(f"unknown operations {sorted(set(ops) - known)}: known are {sorted(known)}")
    if args.tables > 1:
        if ops and ops != ["fleet"]:
            sys.exit("a fleet (--tables) runs Cryo's fleet operation only")
        picked = [("cryo", "fleet")]
    else:
        picked = [(who, op) for who in contenders for op in (OPS[who][0] if ops is None else [o for o in ops if o in OPS[who][0] + OPS[who][1]])]
    if remote and any(job in DESTRUCTIVE for job in picked):
        sys.exit("expire changes the table and is run on local tables only (restored from a hard-link copy after each run)")
    if not picked:
        sys.exit(f"none of {ops} is an operation of {', '.join(contenders)}")
    table_dir = generate(args, args.out)
    if args.generate_only:
        print((table_dir / "generated.json").read_text())
        return
    jobs: list[tuple[str, str, list[str]]] = []
    binary = (args.cryo_binary or cryo_binary()) if any(who == "cryo" for who, _ in picked) else None
    for who, op in picked:
        if who == "cryo":
            argv = [binary, "--dir", str(table_dir), "--table", args.table, "--op", op]
            if op == "scan-memo":
                # A scan with a memo (`ScanOptions::cache_dir`) of the scan before it: primed
                # once, untimed, then timed like `scan`.
                argv = argv[:-1] + ["scan", "--cache", str(table_dir / "scan-memo")]
            if args.concurrency:
                argv += ["--concurrency", str(args.concurrency)]
        elif who == "pyiceberg":
            argv = [sys.executable, "-c", PYICEBERG, str(table_dir), args.table, op]
        else:
            argv = [sys.executable, "-c", SPARK, str(table_dir), args.table, op, str(ROOT / "tests" / "py")]
        jobs.append((who, op, argv))
    pristine = Pristine(table_dir)
    results = []
    for run in range(args.runs):
        for who, op, argv in jobs:
            log(f"run {run + 1}/{args.runs}: {who} {op}")
            proxy = None
            if remote:
                s3 = s3_env()
                if args.latency_ms > 0:
                    proxy = LatencyProxy(s3["CRYO_SEAWEED_S3_ENDPOINT"], args.latency_ms)
                argv = argv + (rest_props(s3) if args.rest else []) + s3_props(proxy.endpoint if proxy else s3["CRYO_SEAWEED_S3_ENDPOINT"], s3)
            destructive = (who, op) in DESTRUCTIVE
            if destructive:
                pristine.before()
            try:
                if op == "scan-memo":
                    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
                r = measured(argv)
            finally:
                if proxy:
                    r_proxy = proxy.stop()
                if destructive:
                    pristine.restore()
            if proxy:
                r["s3"] = r_proxy | {"latency_ms": args.latency_ms}
            r.update(contender=who, op=op, run=run)
            log(f"  {r['seconds']:.2f} s, {r['cpu_s']} CPU-s, {r['peak_rss_mib']} MiB: {json.dumps(r)}")
            results.append(r)
    generated = json.loads((table_dir / "generated.json").read_text())
    record = {"table": generated, "args": vars(args) | {"out": str(args.out)}, "results": results, "machine": {"platform": platform.platform(), "cpus": os.cpu_count()}}
    out = args.out / f"result-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    out.write_text(json.dumps(record, indent=1))
    where = f"on S3, {args.latency_ms:g} ms per request" if remote else f"{generated['metadata_mb']} MB of metadata"
    history = f" ({generated['removed_files']:,} more replaced by rewrites)" if generated.get("removed_files") else ""
    print(f"\n{generated.get('tables', 1):,} tables, {generated['files']:,} data files{history}, {generated['snapshots']:,} snapshots (per table, at most), {where} ({out.name})\n")
    print("| contender | operation | time (median) | CPU s | peak RSS | counts |")
    print("|---|---|---:|---:|---:|---|")
    measures = {"op", "seconds", "process_s", "cpu_s", "peak_rss_mib", "contender", "run", "reads", "max_in_flight_reads", "scan_seconds", "plan_seconds"}
    for who, op, _ in jobs:
        mine = sorted((r for r in results if r["contender"] == who and r["op"] == op), key=lambda r: r["seconds"])
        m = mine[len(mine) // 2]
        counts = ", ".join(f"{k.removesuffix('_count')} {v:,}" for k, v in m.items() if k not in measures and type(v) is int and v)
        print(f"| {who} | {op} | {m['seconds']:.2f} s | {m['cpu_s']} | {m['peak_rss_mib']} MiB | {counts} |")


if __name__ == "__main__":
    main()
