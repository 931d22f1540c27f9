"""Dagster definitions: grade the demo lake, then run its maintenance plan (a dry run by default).

    export CRYO_DEMO_LAKE=/tmp/cryo-demo          # built on first use (cryo.demo_lake)
    dagster asset materialize -f examples/dagster_defs.py --select '*'
    # CRYO_DRY_RUN=false to change the tables
"""

from __future__ import annotations

import os

import dagster as dg

import cryo
from cryo.dagster import CryoResource, cryo_maintenance_assets

LAKE = os.environ.get("CRYO_DEMO_LAKE", "/tmp/cryo-demo")
PROPERTIES = cryo.demo_lake(LAKE).to_dict()["catalog"]["properties"]

defs = dg.Definitions(
    assets=cryo_maintenance_assets(
        dry_run=os.environ.get("CRYO_DRY_RUN", "true").lower() != "false",
        lock_dir=f"{LAKE}/locks",
        receipt_log=f"{LAKE}/receipts.jsonl",
    ),
    resources={"cryo": CryoResource(catalog_name="demo", properties=PROPERTIES)},
)
