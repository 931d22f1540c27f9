"""Run Cryo's plan for the demo lake on Spark: the governor admits each step by the session's load,
the steps run as Iceberg procedures in the session you hand in, receipts record every decision.

    . ~/.cache/cryo-peers/peers.env                       # SPARK_JARS, JAVA_HOME (scripts/peers.sh)
    $PEERS_PYTHON examples/fleet_spark.py target/fleet-demo             # dry run: statements, no change
    $PEERS_PYTHON examples/fleet_spark.py target/fleet-demo --execute   # run them on Spark

The demo lake is a sqlite catalog (the schema PyIceberg's SqlCatalog and Java's JdbcCatalog share)
and a local warehouse; Spark opens the same catalog as an Iceberg `jdbc` catalog named `demo`.
`--json FILE` writes grades before/after, the per-table report and the receipts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import cryo
from cryo.engines import SparkEngine


def spark_session(root: Path, jars: str):
    """A local Spark with Iceberg's extensions and the demo lake's catalog as `demo`."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    opts = os.environ.get("SPARK_EXTRA_JAVA_OPTS", "")
    conf = {
        "spark.master": "local[2]",
        "spark.app.name": "cryo-fleet",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.jars": jars,
        "spark.driver.extraJavaOptions": f"-Duser.timezone=UTC {opts}".strip(),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.warehouse.dir": str(root / "spark-warehouse"),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.catalog.demo": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.demo.type": "jdbc",
        "spark.sql.catalog.demo.uri": f"jdbc:sqlite:{root / 'catalog.db'}",
        "spark.sql.catalog.demo.warehouse": (root / "warehouse").as_uri(),
        "spark.sql.catalog.demo.jdbc.schema-version": "V1",
    }
    builder = SparkSession.builder
    for k, v in conf.items():
        builder = builder.config(k, v)
    return builder.getOrCreate()


def grades(catalog: cryo.Catalog) -> dict[str, str]:
    fleet = catalog.scan_fleet()
    return {s.table: f"{r.grade}({r.score})" for s, r in zip(fleet.tables, (cryo.grade(s) for s in fleet.tables))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lake", type=Path, help="demo lake directory (built if absent)")
    ap.add_argument("--execute", action="store_true", help="run the statements (default: dry run)")
    ap.add_argument("--spark-jars", default=os.environ.get("SPARK_JARS"), help="Iceberg runtime jars ($SPARK_JARS)")
    ap.add_argument("--json", type=Path, help="write the outcome here")
    args = ap.parse_args()
    if not args.spark_jars:
        ap.error("no Iceberg runtime for Spark: set SPARK_JARS (. ~/.cache/cryo-peers/peers.env) or --spark-jars")

    demo = cryo.demo_lake(args.lake)
    catalog = demo.catalog
    before = grades(catalog)
    plan = catalog.plan(catalog.scan_fleet().tables)

    spark = spark_session(args.lake.resolve(), args.spark_jars)
    engine = SparkEngine(spark, catalog="demo")
    # One maintenance statement at a time on this session, and only while it runs fewer than 2 jobs.
    governor = cryo.Governor(limits={"spark": {"max_maintenance_per_destination": 1, "max_running_queries": 2}})
    outcome = catalog.run_fleet(
        plan,
        {"spark": engine},
        default_destination="spark",
        governor=governor,
        dry_run=not args.execute,
        receipt_log=args.lake / "receipts.jsonl",
    )
    after = grades(catalog)

    print(outcome)
    def name(t: dict) -> str:
        return ".".join([*t["namespace"], t["name"]])

    for t in outcome.tables():
        t["table"] = name(t["table"])
        print(f"  {t['table']:<20} {t['destination']:<7} {t['status']:<9} {before.get(t['table'], '?'):>7} -> {after.get(t['table'], '?')}")
    for r in outcome.to_dict()["receipts"]:
        print(f"    {name(r['table']):<18} {r['operation'] or '-':<26} {r['status']:<9} {r['reason'] or ''}"[:160])
    if args.json:
        args.json.write_text(
            json.dumps(
                {"before": before, "after": after, "tables": outcome.tables(), "outcome": outcome.to_dict()},
                default=str,
                indent=1,
            )
        )
    spark.stop()
    return 1 if outcome.counts.get("failed") else 0


if __name__ == "__main__":
    sys.exit(main())
