"""Cryo against full Iceberg REST servers run offline: Iceberg's own REST fixture and Nessie.

Run with the peers venv and the services up (scripts/services.sh start):
    $PEERS_PYTHON -m pytest tests/py/test_rest_servers.py

Each server is started by scripts/services.sh, with its warehouse on moto S3:

- ``iceberg-rest``: the runnable REST fixture of iceberg-open-api 1.10.1 behind
  scripts/rest/LoopbackRestServer.java. OAuth2 client credentials at ``{uri}/v1/oauth/tokens``
  (a wrong secret is refused), the prefix ``cryo-fixture`` in ``/v1/config`` *overrides*, S3
  credentials vended only to ``X-Iceberg-Access-Delegation: vended-credentials``.
- ``nessie``: Nessie's server (in-memory store), OIDC bearer tokens from an external OAuth2 server
  (``oauth2-server-uri``; scripts/rest/oauth2-server.mjs), the prefix ``{branch}|{warehouse}`` in
  ``/v1/config`` *defaults* (URL-encoded: ``main%7Ccryo``; ``main`` when the client names no
  warehouse), S3 credentials vended from moto's STS. Nessie vends unless the header names other
  modes only (no header: "we don't know what the client accepts", so it vends).

PyIceberg writes a fragmented table through the server (OAuth2, vended credentials). Cryo is then
given the REST properties only (``uri``, ``credential``, ``oauth2-server-uri``, ``scope``,
``warehouse``, the delegation header) and ``s3.endpoint`` (moto on loopback), never S3 keys: it
scans, grades, compacts (a real commit through the server) and expires snapshots, and PyIceberg
reads the same rows and Cryo's snapshot back. Without vended credentials Cryo has none at all (no
keys, no environment's, and the instance metadata service is a loopback stand-in that has none), so
storage access fails: the vended ones are what made it work.
"""

from __future__ import annotations

import datetime as dt
import http.server
import json
import os
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cryo_peers  # noqa: E402

DELEGATION = "header.X-Iceberg-Access-Delegation"
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
BATCHES = 6  # appends: 6 small data files, more than compaction's default minimum of 5
ROWS = 20


@dataclass(frozen=True)
class Server:
    name: str
    uri: str
    credential: str
    token_uri: str
    s3_endpoint: str
    # The properties a client needs for the catalog itself (PyIceberg's and Cryo's names).
    rest: dict[str, str] = field(default_factory=dict)
    # The prefix the server announces for those properties (as it sends it: URL-encoded).
    prefix: str = ""

    def cryo_props(self, **extra: str) -> dict[str, str]:
        """What Cryo gets: the catalog's properties, the loopback S3 endpoint, no S3 keys."""
        return {"type": "rest", **self.rest, "s3.endpoint": self.s3_endpoint, **extra}


def _servers(env: dict[str, str]) -> dict[str, Server | None]:
    out: dict[str, Server | None] = {"iceberg-rest": None, "nessie": None}
    if env.get("CRYO_ICEBERG_REST_URI"):
        uri = env["CRYO_ICEBERG_REST_URI"]
        out["iceberg-rest"] = Server(
            name="iceberg-rest",
            uri=uri,
            credential=env["CRYO_ICEBERG_REST_CREDENTIAL"],
            token_uri=f"{uri}/v1/oauth/tokens",
            s3_endpoint=env["CRYO_ICEBERG_REST_S3_ENDPOINT"],
            # The token endpoint is the catalog's own (the default): no oauth2-server-uri.
            rest={"uri": uri, "credential": env["CRYO_ICEBERG_REST_CREDENTIAL"], "scope": "catalog"},
            prefix=env["CRYO_ICEBERG_REST_PREFIX"],
        )
    if env.get("CRYO_NESSIE_URI"):
        out["nessie"] = Server(
            name="nessie",
            uri=env["CRYO_NESSIE_URI"],
            credential=env["CRYO_NESSIE_CREDENTIAL"],
            token_uri=env["CRYO_NESSIE_OAUTH2_URI"],
            s3_endpoint=env["CRYO_NESSIE_S3_ENDPOINT"],
            # No `warehouse`: the server's default one, and the prefix `main` (see
            # test_cryo_commits_with_an_encoded_prefix for the named warehouse).
            rest={
                "uri": env["CRYO_NESSIE_URI"],
                "credential": env["CRYO_NESSIE_CREDENTIAL"],
                "oauth2-server-uri": env["CRYO_NESSIE_OAUTH2_URI"],
                "scope": "catalog",
            },
            prefix="main",
        )
    return out


def _token(server: Server, secret: str | None = None) -> str:
    client, _, right = server.credential.partition(":")
    body = urllib.parse.urlencode(
        {"grant_type": "client_credentials", "client_id": client, "client_secret": secret or right, "scope": "catalog"}
    ).encode()
    with urllib.request.urlopen(urllib.request.Request(server.token_uri, data=body), timeout=10) as r:
        return json.load(r)["access_token"]


def _get(url: str, token: str) -> tuple[int, Any]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        body = e.read()
        return e.code, json.loads(body) if body.strip() else None


def _up(server: Server) -> bool:
    try:
        return _get(f"{server.uri}/v1/config", _token(server))[0] == 200
    except Exception:
        return False


@pytest.fixture(scope="module")
def no_ambient_credentials() -> Iterator[list[str]]:
    """No S3 credentials but the vended ones: none in the environment, and the instance metadata
    service (where object_store looks last) is a loopback stand-in that has none (it answers 404 and
    records the request), so no test looks beyond this machine. Yields the requests it got."""
    asked: list[str] = []

    class NoCredentials(http.server.BaseHTTPRequestHandler):
        def _none(self) -> None:
            asked.append(f"{self.command} {self.path}")
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_PUT = _none

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    imds = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NoCredentials)
    threading.Thread(target=imds.serve_forever, daemon=True).start()
    with pytest.MonkeyPatch.context() as mp:
        for key in list(os.environ):
            if key.startswith("AWS_"):
                mp.delenv(key)
        mp.setenv("AWS_METADATA_ENDPOINT", f"http://127.0.0.1:{imds.server_address[1]}")
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")  # PyArrow's AWS SDK (PyIceberg)
        yield asked
    imds.shutdown()


def _require(name: str) -> Server:
    found = _servers(cryo_peers.services_env())[name]
    cryo_peers.require(
        found is not None and _up(found),
        f"the {name} REST server is not running (scripts/peers.sh installs it, scripts/services.sh start runs it)",
    )
    assert found is not None
    return found


@pytest.fixture(scope="module", params=["iceberg-rest", "nessie"])
def server(request: pytest.FixtureRequest, no_ambient_credentials: list[str]) -> Server:
    return _require(request.param)


@pytest.fixture(scope="module")
def nessie(no_ambient_credentials: list[str]) -> Server:
    return _require("nessie")


def _pyiceberg(server: Server, delegation: str = "vended-credentials", **extra: str):
    from pyiceberg.catalog.rest import RestCatalog

    # PyIceberg warns when the token endpoint is left to its default: named here.
    props = {**server.rest, "oauth2-server-uri": server.token_uri}
    if server.name == "nessie":
        props["warehouse"] = cryo_peers.services_env()["CRYO_NESSIE_WAREHOUSE"]
    props[DELEGATION] = delegation
    return RestCatalog(f"py-{server.name}", **{**props, **extra})


def _load(cat, ident: str):
    """The table as PyIceberg loads it. Nessie's table config names PyIceberg's fsspec FileIO
    (``py-io-impl``), which needs s3fs (not in the peers venv): the same properties go to the
    PyArrow FileIO instead."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    tbl = cat.load_table(ident)
    if "py-io-impl" in tbl.io.properties:
        tbl.io = PyArrowFileIO({k: v for k, v in tbl.io.properties.items() if k != "py-io-impl"})
    return tbl


def _exists(server: Server, location: str) -> bool:
    """Whether the object is in moto (the checker's own client; moto takes any keys)."""
    import boto3
    import botocore.exceptions

    bucket, _, key = location.removeprefix("s3://").partition("/")
    s3 = boto3.client(
        "s3", endpoint_url=server.s3_endpoint, region_name="us-east-1", aws_access_key_id="check", aws_secret_access_key="check"
    )
    try:
        s3.head_object(Bucket=bucket, Key=key)
        return True
    except botocore.exceptions.ClientError as e:
        if e.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
            return False
        raise


def _rows(lo: int) -> pa.Table:
    ids = list(range(lo, lo + ROWS))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [None if i % 7 == 0 else f"n{i}" for i in ids]}, schema=SCHEMA)


def _create(server: Server, batches: int, **properties: str) -> tuple[str, cryo_peers.Fingerprint]:
    """A table written by PyIceberg through the server, one data file per batch."""
    cat = _pyiceberg(server)
    ns = "cryo_rest_servers"
    cat.create_namespace_if_not_exists(ns)
    ident = f"{ns}.t_{uuid.uuid4().hex[:10]}"
    cat.create_table(ident, schema=SCHEMA, properties={"format-version": "2", **properties})
    for b in range(batches):
        _load(cat, ident).append(_rows(b * ROWS))
    tbl = _load(cat, ident)
    assert len(tbl.inspect.files()) == batches
    return ident, cryo_peers.fingerprint(tbl.scan().to_arrow())


@pytest.fixture(scope="module")
def table(server: Server) -> tuple[str, cryo_peers.Fingerprint]:
    # Nessie marks its tables gc.enabled=false (a branch's expiry could delete files another branch
    # still reads) and Cryo then refuses to expire (test_nessie_tables_keep_their_files); this
    # one says it may.
    return _create(server, BATCHES, **({"gc.enabled": "true"} if server.name == "nessie" else {}))


def test_pyiceberg_gets_vended_credentials(server: Server, table: tuple[str, Any]) -> None:
    ident, _ = table
    io = _load(_pyiceberg(server), ident).io.properties
    assert io.get("s3.access-key-id") and io.get("s3.secret-access-key") and io.get("s3.session-token")
    # PyIceberg always sends the header (vended-credentials unless told otherwise): a client that
    # asks for another mode only gets none.
    other = _load(_pyiceberg(server, delegation="remote-signing"), ident).io.properties
    assert "s3.access-key-id" not in other and "s3.session-token" not in other


def test_routes_need_the_prefix(server: Server) -> None:
    """The server answers only under its prefix, so every read and commit of Cryo's that succeeds
    below went through the prefix it announced."""
    token = _token(server)
    status, config = _get(f"{server.uri}/v1/config", token)
    assert status == 200
    announced = {**config.get("defaults", {}), **config.get("overrides", {})}["prefix"]
    assert announced == server.prefix
    if server.name == "nessie":  # a named warehouse: `{branch}|{warehouse}`, URL-encoded
        warehouse = cryo_peers.services_env()["CRYO_NESSIE_WAREHOUSE"]
        status, config = _get(f"{server.uri}/v1/config?warehouse={warehouse}", token)
        assert status == 200 and config["defaults"]["prefix"] == f"main%7C{warehouse}"
    assert _get(f"{server.uri}/v1/{server.prefix}/namespaces", token)[0] == 200
    assert _get(f"{server.uri}/v1/namespaces", token)[0] == 404


def test_cryo_scans_compacts_and_expires(server: Server, table: tuple[str, cryo_peers.Fingerprint]) -> None:
    import cryo

    ident, want = table
    cat = cryo.Catalog(f"cryo-{server.name}", **server.cryo_props(**{DELEGATION: "vended-credentials"}))
    assert ident in cat.list_tables()

    scan = cat.scan(ident)
    assert scan.data_files == BATCHES and scan.records == BATCHES * ROWS
    report = cryo.grade(scan)
    assert report.table == ident and report.grade in "ABCDF"

    before = _load(_pyiceberg(server), ident).current_snapshot()
    out = cat.compact(ident, dry_run=False)
    assert out.failed_groups == 0 and out.committed_groups == 1, out.to_dict()
    assert len(out.snapshot_ids) == 1

    tbl = _load(_pyiceberg(server), ident)
    head = tbl.current_snapshot()
    assert head.snapshot_id == out.snapshot_ids[0] and head.sequence_number > before.sequence_number
    if server.name == "iceberg-rest":  # Nessie's metadata keeps no parent (its history is its commit log)
        assert head.parent_snapshot_id == before.snapshot_id
    assert head.summary.operation.value == "replace"
    assert head.summary["deleted-data-files"] == str(BATCHES) and head.summary["added-data-files"] == "1"
    assert len(tbl.inspect.files()) == 1
    assert cryo_peers.fingerprint(tbl.scan().to_arrow()) == want

    expired = cat.expire_snapshots(ident, older_than=dt.timedelta(0), retain_last=1, dry_run=False)
    tbl = _load(_pyiceberg(server), ident)
    assert [s.snapshot_id for s in tbl.snapshots()] == [head.snapshot_id]
    assert expired.retained_snapshot_ids == [head.snapshot_id]
    if server.name == "iceberg-rest":
        # The appends' snapshots go, and with them the files only they referenced (deleted with
        # the vended credentials): the six small data files among them.
        assert len(expired.expired_snapshot_ids) == BATCHES
        deleted = expired.to_dict()["deleted"]
        assert deleted["data"]["files"] == BATCHES and deleted["manifest_lists"]["files"] == BATCHES
        gone = [p for p in pa.table(expired.files()).column("path").to_pylist() if "/data/" in p]
        assert len(gone) == BATCHES and not any(_exists(server, p) for p in gone)
    else:
        # Nessie's metadata holds the current snapshot only (history is Nessie's commit log):
        # nothing for Cryo to expire.
        assert expired.expired_snapshot_ids == []
    assert cryo_peers.fingerprint(tbl.scan().to_arrow()) == want
    assert cat.scan(ident).data_files == 1


def test_wrong_secret_is_a_typed_error(server: Server) -> None:
    import cryo

    client, _, right = server.credential.partition(":")
    wrong = f"wrong-{uuid.uuid4().hex}"
    props = server.cryo_props(**{DELEGATION: "vended-credentials", "credential": f"{client}:{wrong}"})
    with pytest.raises(cryo.CatalogError) as e:
        cryo.Catalog(f"cryo-{server.name}", **props)
    text = f"{e.value!s} {e.value!r} {e.value.args!r}"
    assert e.value.code == "catalog" and not e.value.retryable
    assert "401" in text and "invalid_client" in text
    assert wrong not in text and right not in text


def _no_vending(server: Server) -> dict[str, str]:
    """Cryo's properties for no vended credentials: the fixture vends only on the header (Cryo
    sends none unless told); Nessie vends unless the header names other modes only."""
    return {} if server.name == "iceberg-rest" else {DELEGATION: "remote-signing"}


def test_storage_needs_the_vended_credentials(server: Server, no_ambient_credentials: list[str]) -> None:
    import cryo

    ident, _ = _create(server, 2)
    asked = len(no_ambient_credentials)
    cat = cryo.Catalog(f"cryo-{server.name}-bare", **server.cryo_props(**_no_vending(server)))
    assert ident in cat.list_tables()  # the catalog answers: only storage is out of reach
    with pytest.raises((cryo.StorageError, cryo.MetadataError)) as e:
        cat.scan(ident)
    assert "s3://" in str(e.value)
    # With nothing vended object_store looked for credentials where AWS keeps them last: the
    # stand-in, which had none.
    assert any("/latest/api/token" in r for r in no_ambient_credentials[asked:])
    # The same catalog with the header reads the table.
    vended = cryo.Catalog(f"cryo-{server.name}-vended", **server.cryo_props(**{DELEGATION: "vended-credentials"}))
    assert vended.scan(ident).data_files == 2
    if server.name == "nessie":
        # Without the header Nessie vends all the same ("we don't know what the client accepts").
        assert cryo.Catalog("cryo-nessie-no-header", **server.cryo_props()).scan(ident).data_files == 2


def test_missing_credentials_are_a_storage_error_that_says_so(server: Server) -> None:
    import cryo

    ident, _ = _create(server, 1)
    cat = cryo.Catalog(f"cryo-{server.name}-bare", **server.cryo_props(**_no_vending(server)))
    with pytest.raises(cryo.CryoError) as e:
        cat.scan(ident)
    assert isinstance(e.value, cryo.StorageError), repr(e.value)
    assert "credential" in str(e.value).lower()


def test_nessie_tables_keep_their_files(nessie: Server) -> None:
    """Nessie creates tables with gc.enabled=false; Cryo then refuses to delete files."""
    import cryo

    ident, _ = _create(nessie, 1)
    assert _load(_pyiceberg(nessie), ident).properties.get("gc.enabled") == "false"
    cat = cryo.Catalog("cryo-nessie", **nessie.cryo_props(**{DELEGATION: "vended-credentials"}))
    with pytest.raises(cryo.RefusedError, match="gc.enabled"):
        cat.expire_snapshots(ident, older_than=dt.timedelta(0), retain_last=1, dry_run=False)


def test_cryo_commits_with_an_encoded_prefix(nessie: Server) -> None:
    """Nessie with a named warehouse: the prefix `main|cryo`, URL-encoded by the server."""
    import cryo

    ident, want = _create(nessie, 2)
    warehouse = cryo_peers.services_env()["CRYO_NESSIE_WAREHOUSE"]
    cat = cryo.Catalog("cryo-nessie-wh", **nessie.cryo_props(**{DELEGATION: "vended-credentials", "warehouse": warehouse}))
    out = cat.compact(ident, dry_run=False, min_input_files=2)
    assert out.failed_groups == 0 and out.committed_groups == 1, out.to_dict()
    tbl = _load(_pyiceberg(nessie), ident)
    assert tbl.current_snapshot().snapshot_id == out.snapshot_ids[0]
    assert cryo_peers.fingerprint(tbl.scan().to_arrow()) == want
