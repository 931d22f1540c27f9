"""The Python face of fleet runs: ``cryo.Governor`` and ``cryo.engines.trino`` (cryo-core's Trino client)
against the real Trino that scripts/services.sh starts (skipped, saying why, when it is not running;
failing under CRYO_REQUIRE_PEERS=1). Spark destinations: test_fleet_spark.py.
"""

from __future__ import annotations

import json
import os

import pytest

cryo = pytest.importorskip("cryo", reason="install the package first: $PEERS_PYTHON -m maturin develop -m cryo-py/Cargo.toml")
from cryo.engines import trino  # noqa: E402

SECRET = "planted-Secret-7c1e"


def _trino_url() -> str:
    url = os.environ.get("TRINO_URL")
    if not url:
        if os.environ.get("CRYO_REQUIRE_PEERS") == "1":
            pytest.fail("TRINO_URL is not set: scripts/services.sh did not start Trino")
        pytest.skip("TRINO_URL not set (Trino not running: scripts/services.sh)")
    return url


def test_governor_limits_validate_and_state_round_trips():
    g = cryo.Governor(limits={"trino": {"max_maintenance_per_destination": 3}}, bandit={"trino": {"min_observations": 5}})
    assert g.limits("trino")["max_maintenance_per_destination"] == 3
    assert g.limits("other")["max_maintenance_per_destination"] == 2  # cryo-core's default
    assert g.in_flight("trino") == 0 and g.observations("trino") == 0
    again = cryo.Governor.from_json(g.to_json())
    assert json.loads(again.to_json()) == json.loads(g.to_json())
    with pytest.raises(cryo.ValidationError):
        cryo.Governor(limits={"trino": {"max_maintenance_per_destination": 0}})
    with pytest.raises(cryo.ValidationError):
        cryo.Governor(limits={"trino": {"no_such_limit": 1}})
    with pytest.raises(cryo.ValidationError):
        cryo.Governor.from_json("{not json")


def test_trino_engine_runs_statements_and_probes_load():
    url = _trino_url()
    engine = trino(url, catalog="lake", version=int(os.environ.get("TRINO_VERSION", "483")), user="cryo-py")
    assert engine.kind == "trino" and engine.coordinators == [url]
    out = engine.execute("SELECT 41 + 1 AS answer")
    assert out["columns"] == ["answer"] and out["rows"] == [[42]] and out["query_id"]
    load = engine.probe()
    (c,) = load["coordinators"]
    assert c["coordinator"] == url and c["running_queries"] >= 0
    with pytest.raises(cryo.EngineError) as e:
        engine.execute("SELECT * FROM lake.no_such_schema_cryo_py.t")
    assert e.value.code == "engine" and "SCHEMA_NOT_FOUND" in str(e.value)


def test_trino_credentials_stay_out_of_errors_and_reprs():
    # Trino takes a password only over https: refused before anything is sent, without the secret.
    with pytest.raises(cryo.ConfigError) as e:
        trino("http://127.0.0.1:8089", catalog="lake", version=483, password=SECRET)
    assert SECRET not in str(e.value)
    engine = trino("https://127.0.0.1:9", catalog="lake", version=483, password=SECRET, max_retries=0)
    assert SECRET not in repr(engine)
    with pytest.raises(cryo.EngineError) as e:
        engine.execute("SELECT 1")
    assert SECRET not in str(e.value)
    with pytest.raises(cryo.EngineError) as e:
        engine.probe()
    assert SECRET not in str(e.value)


def _trino_https() -> tuple:
    _trino_url()
    env = {k: os.environ.get(k) for k in ("TRINO_HTTPS_URL", "TRINO_AUTH_USER", "TRINO_AUTH_PASSWORD", "TRINO_CA_CERT")}
    missing = [k for k, v in env.items() if not v]
    if missing:
        if os.environ.get("CRYO_REQUIRE_PEERS") == "1":
            pytest.fail(f"{missing} not set: scripts/services.sh did not start Trino's HTTPS port")
        pytest.skip(f"{missing} not set (Trino's HTTPS port: scripts/services.sh)")
    return env["TRINO_HTTPS_URL"], env["TRINO_AUTH_USER"], env["TRINO_AUTH_PASSWORD"], env["TRINO_CA_CERT"]


def test_trino_engine_authenticates_with_a_password_over_https():
    url, user, password, ca = _trino_https()
    version = int(os.environ.get("TRINO_VERSION", "483"))
    engine = trino(url, catalog="lake", version=version, user=user, password=password, ca_cert_path=ca)
    out = engine.execute("SELECT current_user AS me")
    assert out["rows"] == [[user]]
    seen = engine.execute(f"SELECT user, source FROM system.runtime.queries WHERE query_id = '{out['query_id']}'")
    assert seen["rows"] == [[user, "cryo"]]
    assert engine.probe()["coordinators"][0]["coordinator"] == url
    assert password not in repr(engine)

    # A wrong password: Trino answers 401, a typed EngineError that says so and shows no secret.
    wrong = trino(url, catalog="lake", version=version, user=user, password=SECRET, ca_cert_path=ca, max_retries=0)
    with pytest.raises(cryo.EngineError) as e:
        wrong.execute("SELECT 1")
    shown = str(e.value) + repr(e.value) + repr(wrong)
    assert "HTTP 401" in str(e.value) and f"refused the credentials of user `{user}`" in str(e.value)
    assert SECRET not in shown and password not in shown

    # Without the private CA the certificate is refused (there is no switch to skip verification).
    untrusting = trino(url, catalog="lake", version=version, user=user, password=password, max_retries=0)
    with pytest.raises(cryo.EngineError) as e:
        untrusting.execute("SELECT 1")
    assert "TLS handshake failed" in str(e.value) and password not in str(e.value)
    # A CA bundle that holds no certificate is a configuration error, before anything is sent.
    with pytest.raises(cryo.ConfigError) as e:
        trino(url, catalog="lake", version=version, user=user, password=password, ca_cert_path=__file__)
    assert "holds no certificate" in str(e.value) and password not in str(e.value)
