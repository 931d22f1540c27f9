"""The scale benchmark's table generator (benches/scale), at a size that takes seconds.

Iceberg's Java library writes the table (fast-append manifests, one per snapshot, and merged ones);
Cryo's scan, grade and file listing read it as PyIceberg does, reading each manifest once with
no more reads at once than asked for. The benchmark's own sizes (a million files) are run by hand:
benches/scale/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import os
import re
from pathlib import Path

import pyarrow as pa
import pytest

import cryo
from cryo_peers import require, spark_line_env, spark_line_missing, sql_catalog

ROOT = Path(__file__).resolve().parents[2]
FILES, SNAPSHOTS = 3000, 30


def _bench_module():
    spec = importlib.util.spec_from_file_location("scale_run", ROOT / "benches" / "scale" / "run.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _generate(out: Path, **shape) -> Path:
    """The benchmark's generator (Iceberg's Java library) writing one table of ``shape`` into ``out``."""
    missing = spark_line_missing("3.5")
    require(missing is None, missing or "")
    env = spark_line_env("3.5")
    saved = {k: os.environ.get(k) for k in ("SPARK_JARS", "PATH")}
    os.environ["SPARK_JARS"] = env["jars"]
    if env["java_home"]:
        os.environ["PATH"] = f"{env['java_home']}/bin:{os.environ['PATH']}"
    try:
        args = argparse.Namespace(
            **{
                "files": FILES,
                "snapshots": SNAPSHOTS,
                "partitions": 12,
                "stat_columns": 3,
                "manifests": "fast",
                "metadata_versions": 10,
                "table": "scale.events",
                "generator_memory": "1g",
                "regenerate": True,
                **shape,
            }
        )
        return _bench_module().generate(args, out)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module", params=["fast", "merged"])
def generated(request, tmp_path_factory):
    return request.param, _generate(tmp_path_factory.mktemp(f"scale-{request.param}"), manifests=request.param)


def test_cryo_reads_the_generated_table_as_pyiceberg_does(generated):
    shape, table_dir = generated
    cat = cryo.Catalog("fixtures", type="sql", uri=f"sqlite:///{table_dir}/catalog.db", warehouse=f"file://{table_dir}/warehouse")
    theirs = sql_catalog(table_dir / "catalog.db", table_dir / "warehouse").load_table("scale.events")
    files = theirs.inspect.files()
    assert files.num_rows == FILES

    scan = cat.scan("scale.events", concurrency=3).to_dict()
    assert scan["data_files"]["count"] == FILES
    assert scan["data_files"]["bytes"] == pa.compute.sum(files["file_size_in_bytes"]).as_py()
    assert scan["data_files"]["records"] == pa.compute.sum(files["record_count"]).as_py()
    assert scan["snapshots"]["count"] == SNAPSHOTS == len(theirs.snapshots())
    partitions = theirs.inspect.partitions()
    assert len(scan["partitions"]) == partitions.num_rows
    # Every column has bounds in every file (the generator writes them for all columns).
    assert scan["column_stats"]["files_with_bounds"] == FILES

    # One read per manifest list and per current manifest, never more than 3 at once.
    reads = {kind: n for kind, n, _ in scan["io"]["reads"]}
    assert reads.get("data_file", 0) == 0, reads
    assert reads["manifest_list"] == SNAPSHOTS, reads
    assert reads["manifest"] == scan["manifests"]["count"], reads
    assert 1 <= scan["io"]["max_in_flight_reads"] <= 3, scan["io"]
    if shape == "fast":
        assert scan["manifests"]["count"] == SNAPSHOTS  # one manifest per fast append
    else:
        # MergeAppend merges from 100 manifests on (commit.manifest.min-count-to-merge).
        assert scan["manifests"]["count"] <= SNAPSHOTS

    # The listing (one Arrow batch per manifest) holds PyIceberg's files.
    listing = pa.table(cat.files("scale.events"))
    assert sorted(listing["path"].to_pylist()) == sorted(files["file_path"].to_pylist())
    assert cryo.grade(cat.scan("scale.events")).grade in "ABCDF"


def test_a_rewrite_history_expires_and_lists_orphans_on_real_files(tmp_path):
    """A history in which every fifth commit compacts the oldest files, with every data file on
    disk and 20 files nobody references: the expiry deletes exactly the replaced files (and
    keeps every live one), the orphan listing finds exactly the 20, and PyIceberg reads the
    same rows after."""
    import json

    table_dir = _generate(tmp_path, rewrite_every=5, real_files=True, orphans=20, manifests="merged")
    generated = json.loads((table_dir / "generated.json").read_text())
    # Created: every appended file, every replacement and the orphans.
    assert generated["removed_files"] > 0
    assert generated["created_files"] == generated["files"] + generated["removed_files"] + 20
    cat = cryo.Catalog("fixtures", type="sql", uri=f"sqlite:///{table_dir}/catalog.db", warehouse=f"file://{table_dir}/warehouse")
    theirs = sql_catalog(table_dir / "catalog.db", table_dir / "warehouse").load_table("scale.events")
    live = theirs.inspect.files()
    assert live.num_rows == generated["files"]
    rows = int(theirs.current_snapshot().summary["total-records"])

    orphans = cat.remove_orphan_files("scale.events", older_than=dt.datetime.now(dt.timezone.utc), allow_short_retention=True)
    assert orphans.dry_run and orphans.orphan_count == 20
    found = pa.table(orphans.orphans())["path"].to_pylist()
    assert all("/orphan-" in p for p in found), found

    now = dt.datetime.now(dt.timezone.utc)
    dry = cat.expire_snapshots("scale.events", older_than=now, retain_last=1)
    out = cat.expire_snapshots("scale.events", older_than=now, retain_last=1, dry_run=False)
    assert len(out.expired_snapshot_ids) == SNAPSHOTS - 1 == len(dry.expired_snapshot_ids)
    deleted = out.to_dict()["deleted"]
    assert deleted["data"]["files"] == generated["removed_files"], deleted
    assert dry.to_dict()["deleted"] == deleted  # the dry run named exactly what went

    # Every live file is still on disk; every replaced one is gone; the rows are the same.
    after = sql_catalog(table_dir / "catalog.db", table_dir / "warehouse").load_table("scale.events")
    assert len(after.snapshots()) == 1
    paths = after.inspect.files()["file_path"].to_pylist()
    assert sorted(paths) == sorted(live["file_path"].to_pylist())
    on_disk = {str(p) for p in (table_dir / "warehouse").rglob("*.parquet") if "/orphan-" not in str(p)}
    assert on_disk == {re.sub("^file:/*", "/", p) for p in paths}
    assert sum(after.inspect.files()["record_count"].to_pylist()) == rows
    assert cat.remove_orphan_files("scale.events", older_than=dt.datetime.now(dt.timezone.utc), allow_short_retention=True).orphan_count == 20
