"""The scale benchmark's table generator (benches/scale), at a size that takes seconds.

Iceberg's Java library writes the table (fast-append manifests, one per snapshot, and merged ones);
Cryo's scan, grade and file listing read it as PyIceberg does, reading each manifest once with
no more reads at once than asked for. The benchmark's own sizes (a million files) are run by hand:
benches/scale/README.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
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


@pytest.fixture(scope="module", params=["fast", "merged"])
def generated(request, tmp_path_factory):
    missing = spark_line_missing("3.5")
    require(missing is None, missing or "")
    env = spark_line_env("3.5")
    saved = {k: os.environ.get(k) for k in ("SPARK_JARS", "PATH")}
    os.environ["SPARK_JARS"] = env["jars"]
    if env["java_home"]:
        os.environ["PATH"] = f"{env['java_home']}/bin:{os.environ['PATH']}"
    try:
        args = argparse.Namespace(
            files=FILES,
            snapshots=SNAPSHOTS,
            partitions=12,
            stat_columns=3,
            manifests=request.param,
            metadata_versions=10,
            table="scale.events",
            generator_memory="1g",
            regenerate=True,
        )
        yield request.param, _bench_module().generate(args, tmp_path_factory.mktemp(f"scale-{request.param}"))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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
