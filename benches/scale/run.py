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
then a plan of it.

Operations: Cryo ``scan`` (load + scan + grade), ``files`` (live-file listing), ``plan`` (scan +
grade + plan), ``expire-dry`` (expiry to the last snapshot, dry run); PyIceberg
``inspect.files()``, ``inspect.partitions()``, ``scan().plan_files()``; Spark (warm session: each
query once to warm, then timed) ``SELECT count(*)`` over the ``files`` and ``partitions``
metadata tables. Prints a Markdown table; the full record goes to
``target/bench/scale/result-<time>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
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
    shape = f"f{args.files}-s{args.snapshots}-p{args.partitions}-c{args.stat_columns}-{args.manifests}"
    if tables > 1:
        shape += f"-t{tables}"
    s3 = s3_env() if getattr(args, "s3", False) else None
    if s3:
        shape += "-s3"
    table_dir = out / shape
    done = table_dir / "generated.json"
    if done.exists() and not args.regenerate:
        log(f"reusing {table_dir}")
        return table_dir
    runtime, hadoop = jars()
    classes = out / "classes"
    source = HERE / "Generate.java"
    if not (classes / "Generate.class").exists() or (classes / "Generate.class").stat().st_mtime < source.stat().st_mtime:
        classes.mkdir(parents=True, exist_ok=True)
        subprocess.run(["javac", "-nowarn", "-cp", f"{runtime}:{hadoop}", "-d", str(classes), str(source)], check=True)
    subprocess.run(["rm", "-rf", str(table_dir)], check=True)
    table_dir.mkdir(parents=True)
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
            "--tables",
            str(tables),
        ]
        + (
            [
                "--warehouse",
                f"s3://{s3['CRYO_SEAWEED_BUCKET']}/scale/{shape}",
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
    if tables > 1:
        broken_table(table_dir, args.table)
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


def s3_props(endpoint: str, s3: dict[str, str]) -> list[str]:
    """Cryo's catalog properties for the S3 warehouse at ``endpoint`` (the proxy's, or the server's)."""
    props = {
        "s3.endpoint": endpoint,
        "s3.access-key-id": s3["CRYO_SEAWEED_ACCESS_KEY"],
        "s3.secret-access-key": s3["CRYO_SEAWEED_SECRET_KEY"],
        "s3.region": "us-east-1",
        "s3.path-style-access": "true",
    }
    return [a for k, v in props.items() for a in ("--prop", f"{k}={v}")]


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
import json, os, sys, time
sys.path.insert(0, sys.argv[4])
import cryo_peers
d, table, op = sys.argv[1:4]
spark = cryo_peers.spark_session(f"{d}/catalog.db", f"{d}/warehouse", app_name="cryo-scale", memory="4g")
sql = f"SELECT count(*) FROM fixtures.{table}.{op}"
spark.sql(sql).collect()  # warm: the session, the catalog, the JIT
t0 = time.monotonic()
n = spark.sql(sql).collect()[0][0]
seconds = time.monotonic() - t0
pid = spark._jvm.java.lang.ProcessHandle.current().pid()
hwm = next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmHWM"))
print(json.dumps({"op": op, "rows": n, "seconds": seconds, "peak_rss_mib": round(hwm / 1024)}))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--files", type=int, default=100_000)
    p.add_argument("--snapshots", type=int, default=200)
    p.add_argument("--partitions", type=int, default=365)
    p.add_argument("--stat-columns", type=int, default=5)
    p.add_argument("--manifests", choices=["fast", "merged"], default="fast")
    p.add_argument("--metadata-versions", type=int, default=100)
    p.add_argument("--table", default="scale.events")
    p.add_argument("--tables", type=int, default=1, help="a fleet of this many tables (cryo only: fleet scan + plan)")
    p.add_argument("--contenders", default="cryo,pyiceberg,spark")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--out", type=Path, default=ROOT / "target" / "bench" / "scale")
    p.add_argument("--generator-memory", default="4g")
    p.add_argument("--regenerate", action="store_true")
    p.add_argument("--generate-only", action="store_true")
    p.add_argument("--s3", action="store_true", help="the table on the loopback S3 (scripts/services.sh start); Cryo only")
    p.add_argument("--latency-ms", type=float, default=0, help="with --s3: every S3 request delayed this much by a proxy")
    p.add_argument("--concurrency", type=int, help="Cryo's scan concurrency (default: Cryo's)")
    p.add_argument("--cryo-binary", help="a built `scale` bench binary (default: cargo bench builds it)")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    table_dir = generate(args, args.out)
    if args.generate_only:
        print((table_dir / "generated.json").read_text())
        return
    contenders = args.contenders.split(",")
    jobs: list[tuple[str, str, list[str]]] = []
    if args.tables > 1 or args.s3:
        contenders = ["cryo"]
    if "cryo" in contenders:
        binary = args.cryo_binary or cryo_binary()
        for op in ("fleet",) if args.tables > 1 else ("scan", "files", "plan", "expire-dry"):
            argv = [binary, "--dir", str(table_dir), "--table", args.table, "--op", op]
            if args.concurrency:
                argv += ["--concurrency", str(args.concurrency)]
            jobs.append(("cryo", op, argv))
    if "pyiceberg" in contenders:
        for op in ("inspect.files", "inspect.partitions", "plan_files"):
            jobs.append(("pyiceberg", op, [sys.executable, "-c", PYICEBERG, str(table_dir), args.table, op]))
    if "spark" in contenders:
        for op in ("files", "partitions"):
            jobs.append(("spark", op, [sys.executable, "-c", SPARK, str(table_dir), args.table, op, str(ROOT / "tests" / "py")]))
    results = []
    for run in range(args.runs):
        for who, op, argv in jobs:
            log(f"run {run + 1}/{args.runs}: {who} {op}")
            proxy = None
            if args.s3:
                s3 = s3_env()
                if args.latency_ms > 0:
                    proxy = LatencyProxy(s3["CRYO_SEAWEED_S3_ENDPOINT"], args.latency_ms)
                argv = argv + s3_props(proxy.endpoint if proxy else s3["CRYO_SEAWEED_S3_ENDPOINT"], s3)
            try:
                r = measured(argv)
            finally:
                if proxy:
                    r_proxy = proxy.stop()
            if proxy:
                r["s3"] = r_proxy | {"latency_ms": args.latency_ms}
            r.update(contender=who, op=op, run=run)
            log(f"  {r['seconds']:.2f} s, {r['cpu_s']} CPU-s, {r['peak_rss_mib']} MiB: {json.dumps(r)}")
            results.append(r)
    generated = json.loads((table_dir / "generated.json").read_text())
    record = {"table": generated, "args": vars(args) | {"out": str(args.out)}, "results": results, "machine": {"platform": platform.platform(), "cpus": os.cpu_count()}}
    out = args.out / f"result-{dt.datetime.now():%Y%m%d-%H%M%S}.json"
    out.write_text(json.dumps(record, indent=1))
    where = f"on S3, {args.latency_ms:g} ms per request" if args.s3 else f"{generated['metadata_mb']} MB of metadata"
    print(f"\n{generated.get('tables', 1):,} tables, {generated['files']:,} data files, {generated['snapshots']:,} snapshots (per table, at most), {where} ({out.name})\n")
    print("| contender | operation | time (median) | CPU s | peak RSS |")
    print("|---|---|---:|---:|---:|")
    for who, op, _ in jobs:
        mine = sorted((r for r in results if r["contender"] == who and r["op"] == op), key=lambda r: r["seconds"])
        m = mine[len(mine) // 2]
        print(f"| {who} | {op} | {m['seconds']:.2f} s | {m['cpu_s']} | {m['peak_rss_mib']} MiB |")


if __name__ == "__main__":
    main()
