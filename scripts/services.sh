#!/usr/bin/env bash
# Start/stop the loopback Iceberg services Cryo's catalog tests talk to.
#
#   bash scripts/services.sh start|stop|status|restart
#
#   SeaweedFS `weed mini`: Iceberg REST catalog http://127.0.0.1:8181 (table bucket `icetables`),
#                          S3 http://127.0.0.1:8333 (plain bucket `warehouse`)
#   moto S3:               http://127.0.0.1:5055 (any credentials; in memory, empty after a restart)
#   Trino (if peers.sh installed it): http://127.0.0.1:8089, single node, Iceberg catalog `lake` =
#                          the sqlite JDBC catalog run/trino/lake/catalog.db + file:// warehouse
#                          run/trino/lake/warehouse, which Cryo and PyIceberg open too (scripts/README.md);
#                          and https://127.0.0.1:8443 with PASSWORD authentication (file authenticator,
#                          a user and a random password made at every start, a private CA made at every
#                          start: TRINO_HTTPS_URL, TRINO_AUTH_USER, TRINO_AUTH_PASSWORD, TRINO_CA_CERT).
#                          The HTTP port stays unauthenticated (X-Trino-User only).
#   PostgreSQL (PG_BIN from peers.env): 127.0.0.1:5433 (CRYO_POSTGRES_PORT), database `cryo_catalog`, user
#                          `cryo` (superuser) with SCRAM password auth; the password is random, made at the
#                          first initdb and kept in run/postgres-password (0600). The data dir run/postgres
#                          is made once and reused (CRYO_SERVICES_FRESH=1 wipes it). For the SQL catalog on a
#                          server: PyIceberg's SqlCatalog and Java's JdbcCatalog share its two tables
#                          (CRYO_POSTGRES_URI, CRYO_POSTGRES_JDBC_URL, CRYO_POSTGRES_USER/PASSWORD/HOST/PORT/DB).
#                          As root it runs as `nobody` in a user namespace of its own (Postgres refuses root).
#   Hive Metastore 3.1.3 (HMS_HOME from peers.env): thrift://127.0.0.1:9083 (CRYO_HMS_PORT), standalone, plain
#                          Thrift (no SASL), Derby database run/hms/metastore_db (schema made by the schema tool at
#                          the first start, kept afterwards; CRYO_SERVICES_FRESH=1 wipes it), warehouse
#                          run/hms/warehouse (CRYO_HMS_URI, CRYO_HMS_WAREHOUSE). Upstream's server binds every
#                          interface: scripts/hms/CryoMetastore.java (compiled by peers.sh) binds 127.0.0.1.
#   fake-gcs-server (FAKE_GCS_BIN from peers.env): GCS http://127.0.0.1:4443 (CRYO_GCS_PORT), any
#                          credentials or none, bucket `warehouse` made at start (CRYO_GCS_BUCKET); in memory,
#                          empty after a restart (CRYO_GCS_ENDPOINT, CRYO_GCS_PROJECT, CRYO_GCS_BUCKET). The
#                          server itself listens on 4444 (CRYO_GCS_SERVER_PORT, CRYO_GCS_SERVER_ENDPOINT);
#                          4443 is scripts/gcs/xml_adapter.py before it, which serves the XML API uploads
#                          object_store sends (fake-gcs-server has no XML uploads) with its JSON API.
#   Azurite Blob (AZURITE_BLOB_BIN from peers.env): http://127.0.0.1:10000/devstoreaccount1 (CRYO_AZURITE_PORT),
#                          the emulator's well-known account devstoreaccount1 and key (shared-key auth), container
#                          `warehouse` made at start (CRYO_AZURITE_CONTAINER); in memory, empty after a restart
#                          (CRYO_AZURITE_ENDPOINT, CRYO_AZURITE_AUTHORITY, CRYO_AZURITE_ACCOUNT, CRYO_AZURITE_KEY,
#                          CRYO_AZURITE_CONTAINER, CRYO_AZURITE_CONNECTION_STRING). No telemetry.
#   Iceberg's REST fixture (ICEBERG_REST_* from peers.env): http://127.0.0.1:8182 (CRYO_ICEBERG_REST_PORT), the
#                          runnable test server of iceberg-open-api 1.10.1 behind scripts/rest/LoopbackRestServer.java:
#                          prefix `cryo-fixture` (announced in /v1/config overrides; routes without it are 404),
#                          OAuth2 client credentials at /v1/oauth/tokens for client `cryo` (secret random, new at
#                          every start) and its bearer token on every other route, S3 credentials vended only to
#                          X-Iceberg-Access-Delegation: vended-credentials. Catalog in memory (sqlite); warehouse on
#                          moto S3, bucket `cryo-iceberg-rest` made at start (CRYO_ICEBERG_REST_URI, _CREDENTIAL,
#                          _PREFIX, _WAREHOUSE, _S3_ENDPOINT).
#   Nessie (NESSIE_* from peers.env): Iceberg REST at http://127.0.0.1:19120/iceberg (CRYO_NESSIE_PORT; its management
#                          interface on 19121, CRYO_NESSIE_MANAGEMENT_PORT), in-memory
#                          version store, warehouse `cryo` on moto S3 (bucket `cryo-nessie`, made at start), S3
#                          credentials vended from moto's STS (an AssumeRole per table load); OIDC bearer tokens from
#                          npm's oauth2-mock-server behind scripts/rest/oauth2-server.mjs at http://127.0.0.1:19122
#                          (CRYO_NESSIE_OAUTH2_PORT: client `cryo`, secret random, new at every start; token endpoint
#                          {issuer}/token). The prefix (branch|warehouse) comes in /v1/config defaults
#                          (CRYO_NESSIE_URI, _OAUTH2_URI, _CREDENTIAL, _WAREHOUSE, _S3_ENDPOINT).
#
# Everything binds to 127.0.0.1. Pids, logs and SeaweedFS data live under $CRYO_PEERS_DIR/run;
# endpoints and credentials are written to $CRYO_PEERS_DIR/run/services.env (shell-sourceable).
# CRYO_SERVICES_FRESH=1 wipes SeaweedFS data, the Trino lake, the Postgres cluster and the metastore's
# database and warehouse before starting; CRYO_SERVICES_TRINO=0 leaves Trino out, CRYO_SERVICES_POSTGRES=0
# Postgres, CRYO_SERVICES_HMS=0 the Hive Metastore, CRYO_SERVICES_GCS=0 fake-gcs-server, CRYO_SERVICES_AZURITE=0
# Azurite, CRYO_SERVICES_ICEBERG_REST=0 Iceberg's REST fixture, CRYO_SERVICES_NESSIE=0 Nessie. Needs scripts/peers.sh
# first.
set -uo pipefail

D=${CRYO_PEERS_DIR:-$HOME/.cache/cryo-peers}
R="$D/run"
V="$D/venv"
WEED="$V/bin/weed"
MOTO="$V/bin/moto_server"
S3_KEY=${CRYO_SEAWEED_ACCESS_KEY:-admin}
S3_SECRET=${CRYO_SEAWEED_SECRET_KEY:-adminsecret}
TABLE_BUCKET=${CRYO_SEAWEED_TABLE_BUCKET:-icetables}
PLAIN_BUCKET=${CRYO_SEAWEED_BUCKET:-warehouse}
REST_PORT=8181 SW_S3_PORT=8333 MOTO_PORT=5055
# weed mini silently moves to another port when one is busy: pin them all and check they are free.
SW_PORTS="9333 19333 9340 19340 8888 18888 $SW_S3_PORT 18333 $REST_PORT 23646 33646"

# Trino: installed by peers.sh into $TRINO_HOME (empty when it was skipped, e.g. no Java 25).
peer_env() { [ -f "$D/peers.env" ] && ( . "$D/peers.env" >/dev/null 2>&1; printenv "$1" ) || true; }
TRINO_HOME=$(peer_env TRINO_HOME) TRINO_VERSION=$(peer_env TRINO_VERSION) TRINO_JAVA_HOME=$(peer_env TRINO_JAVA_HOME)
TRINO_PORT=${CRYO_TRINO_PORT:-8089}
TRINO_HTTPS_PORT=${CRYO_TRINO_HTTPS_PORT:-8443}
# The user of the HTTPS port (its password is random, new at every start: run/services.env has it).
TRINO_AUTH_USER=cryo-auth
TRINO_HEAP=${CRYO_TRINO_HEAP:-2G}
TRINO_CATALOG=lake
# The catalog's retention floors (iceberg.expire-snapshots.min-retention, …): the render goldens assume
# 1d (fixtures, retention_floors_custom); Trino's default is 7d.
TRINO_EXPIRE_MIN_RETENTION=1d TRINO_ORPHANS_MIN_RETENTION=1d
TR="$R/trino"
TRINO_LAKE="$TR/lake"
TRINO_TLS="$TR/tls"
# PostgreSQL: Debian's server binaries, found (or installed) by peers.sh. 5432 is left to a system cluster.
PG_BIN=$(peer_env PG_BIN)
PG_PORT=${CRYO_POSTGRES_PORT:-5433}
PG_USER=cryo PG_DB=cryo_catalog
PG_DATA="$R/postgres"
PG_PASSWORD_FILE="$R/postgres-password"
# Hive Metastore: installed by peers.sh into $HMS_HOME (empty when it was skipped); Derby under run/hms.
HMS_HOME=$(peer_env HMS_HOME) HMS_VERSION=$(peer_env HMS_VERSION) HMS_JAVA_HOME=$(peer_env HMS_JAVA_HOME)
HMS_PORT=${CRYO_HMS_PORT:-9083}
HMS_HEAP=${CRYO_HMS_HEAP:-512m}
HR="$R/hms"
# GCS and Azure storage emulators: installed by peers.sh (empty when skipped); both keep data in memory only.
FAKE_GCS_BIN=$(peer_env FAKE_GCS_BIN) AZURITE_BLOB_BIN=$(peer_env AZURITE_BLOB_BIN)
GCS_PORT=${CRYO_GCS_PORT:-4443}
GCS_SERVER_PORT=${CRYO_GCS_SERVER_PORT:-4444}
GCS_PROJECT=${CRYO_GCS_PROJECT:-cryo}
GCS_BUCKET=${CRYO_GCS_BUCKET:-warehouse}
AZURITE_PORT=${CRYO_AZURITE_PORT:-10000}
AZURITE_CONTAINER=${CRYO_AZURITE_CONTAINER:-warehouse}
# More REST servers: installed by peers.sh (empty when skipped); both keep their catalog in memory and
# their warehouse in moto (empty after a restart of either).
SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ICEBERG_REST_FIXTURE_JAR=$(peer_env ICEBERG_REST_FIXTURE_JAR) ICEBERG_REST_WRAPPER_JAR=$(peer_env ICEBERG_REST_WRAPPER_JAR)
ICEBERG_REST_JAVA_HOME=$(peer_env ICEBERG_REST_JAVA_HOME) ICEBERG_REST_FIXTURE_VERSION=$(peer_env ICEBERG_REST_FIXTURE_VERSION)
ICEBERG_REST_PORT=${CRYO_ICEBERG_REST_PORT:-8182}
ICEBERG_REST_PREFIX=cryo-fixture ICEBERG_REST_CLIENT=cryo ICEBERG_REST_BUCKET=cryo-iceberg-rest
NESSIE_JAR=$(peer_env NESSIE_JAR) NESSIE_JAVA_HOME=$(peer_env NESSIE_JAVA_HOME) NESSIE_VERSION=$(peer_env NESSIE_VERSION)
OAUTH2_MOCK_DIR=$(peer_env OAUTH2_MOCK_DIR)
NESSIE_PORT=${CRYO_NESSIE_PORT:-19120}
NESSIE_OAUTH2_PORT=${CRYO_NESSIE_OAUTH2_PORT:-19122}
NESSIE_MANAGEMENT_PORT=${CRYO_NESSIE_MANAGEMENT_PORT:-19121}
NESSIE_CLIENT=cryo NESSIE_BUCKET=cryo-nessie NESSIE_WAREHOUSE=cryo
NR="$R/nessie"
# The emulator's built-in account and key: public, the same in every Azurite (and the old Storage Emulator).
AZURITE_ACCOUNT=devstoreaccount1
AZURITE_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

alive() { [ -f "$R/$1.pid" ] && kill -0 "$(cat "$R/$1.pid")" 2>/dev/null; }
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$@" 2>/dev/null; }
token() {
  curl -s --max-time 2 -X POST "http://127.0.0.1:$REST_PORT/v1/oauth/tokens" \
    -d "grant_type=client_credentials&client_id=$S3_KEY&client_secret=$S3_SECRET" \
    | sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p'
}
weed_ready() {  # REST answers, OAuth2 issues a token and the table bucket exists; S3 answers
  local t; t=$(token); [ -n "$t" ] || return 1
  [ "$(code -H "Authorization: Bearer $t" "http://127.0.0.1:$REST_PORT/v1/$TABLE_BUCKET/namespaces")" = 200 ] \
    && [ "$(code "http://127.0.0.1:$SW_S3_PORT/")" != 000 ]
}
# One statement over Trino's HTTP protocol (POST /v1/statement, follow nextUri); prints the rows as
# JSON lines, fails on a query error. No client library needed (the peers venv's python).
trino_query() {
  "$V/bin/python" - "http://127.0.0.1:$TRINO_PORT" "$1" <<'PYEOF'
import json, sys, urllib.request
url, sql = sys.argv[1], sys.argv[2]
req = urllib.request.Request(url + "/v1/statement", data=sql.encode(), method="POST",
                             headers={"X-Trino-User": "cryo", "X-Trino-Source": "cryo-services"})
while True:
    with urllib.request.urlopen(req, timeout=10) as r:
        d = json.load(r)
    if d.get("error"):
        sys.exit("trino: " + d["error"].get("message", "query failed"))
    for row in d.get("data") or []:
        print(json.dumps(row))
    if not d.get("nextUri"):
        break
    req = urllib.request.Request(d["nextUri"], headers={"X-Trino-User": "cryo"})
PYEOF
}
trino_ready() {  # started, the lake catalog answers a query, and the HTTPS port answers with the CA's certificate
  curl -s --max-time 2 "http://127.0.0.1:$TRINO_PORT/v1/info" 2>/dev/null | grep -q '"starting":false' \
    && trino_query "SHOW SCHEMAS FROM $TRINO_CATALOG" >/dev/null 2>&1 \
    && curl -s --max-time 2 --cacert "$TRINO_TLS/ca.pem" "https://127.0.0.1:$TRINO_HTTPS_PORT/v1/info" 2>/dev/null | grep -q '"starting":false'
}
moto_ready() { [ "$(code "http://127.0.0.1:$MOTO_PORT/moto-api/")" = 200 ]; }
# psql as `cryo` over TCP (the server has no Unix socket); the password goes through the environment.
pg_psql() {
  PGPASSWORD=$(cat "$PG_PASSWORD_FILE") PGCONNECT_TIMEOUT=2 "$PG_BIN/psql" -X -q -tA -v ON_ERROR_STOP=1 \
    -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" "$@"
}
postgres_ready() { [ "$(pg_psql -d postgres -c 'SELECT 1' 2>/dev/null)" = 1 ]; }
# One Thrift call, get_all_databases (binary protocol, what every metastore client speaks), answered
# with a list holding `default`: the server is up and its Derby schema is there. Standard library only.
hms_ready() {
  port_busy "$HMS_PORT" || return 1
  "$V/bin/python" - "$HMS_PORT" <<'PYEOF' 2>/dev/null
import socket, struct, sys
name = b"get_all_databases"
call = struct.pack(">Ii", 0x80010001, len(name)) + name + struct.pack(">i", 1) + b"\0"   # CALL, seqid 1, no args
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5) as s:
    s.sendall(call)
    s.settimeout(10)
    data = b""
    while len(data) < 4 or not data.endswith(b"\0"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
version, = struct.unpack(">I", data[:4])
sys.exit(0 if version & 0xFF == 2 and b"default" in data else 1)                       # REPLY
PYEOF
}
gcs_ready() { [ "$(code "http://127.0.0.1:$GCS_PORT/storage/v1/b?project=$GCS_PROJECT")" = 200 ]; }
# One Blob service request signed with the account key (Shared Key: what the Azure SDKs send); prints
# the HTTP status. Standard library only. $1 method, $2 path after the account (and query), e.g.
# "/warehouse?restype=container".
azurite_request() {
  "$V/bin/python" - "$AZURITE_PORT" "$AZURITE_ACCOUNT" "$AZURITE_KEY" "$1" "$2" <<'PYEOF' 2>/dev/null
import base64, email.utils, hashlib, hmac, sys, urllib.error, urllib.parse, urllib.request
port, account, key, method, path = sys.argv[1:]
url = f"http://127.0.0.1:{port}/{account}{path}"
u = urllib.parse.urlsplit(url)
headers = {"x-ms-date": email.utils.formatdate(usegmt=True), "x-ms-version": "2021-12-02"}
body = b"" if method in ("PUT", "POST") else None   # Content-Length: 0 (signed as empty)
ctype = "application/octet-stream" if body is not None else ""   # else urllib adds a form content type
resource = f"/{account}{u.path}" + "".join(
    f"\n{k.lower()}:{','.join(sorted(v))}" for k, v in sorted(urllib.parse.parse_qs(u.query).items()))
# VERB, Content-Encoding, -Language, -Length, -MD5, Content-Type, Date, If-*, Range; x-ms-* headers; resource
fields = [method, "", "", "", "", ctype] + [""] * 6
to_sign = "\n".join(fields + [f"{k}:{v}" for k, v in sorted(headers.items())] + [resource])
if ctype:
    headers["Content-Type"] = ctype
sig = base64.b64encode(hmac.new(base64.b64decode(key), to_sign.encode(), hashlib.sha256).digest()).decode()
headers["Authorization"] = f"SharedKey {account}:{sig}"
try:
    with urllib.request.urlopen(urllib.request.Request(url, data=body, method=method, headers=headers), timeout=5) as r:
        print(r.status)
except urllib.error.HTTPError as e:
    print(e.code)
except OSError:
    print("000")
PYEOF
}
# Up, and it takes the account key (a signed List Containers).
azurite_ready() { port_busy "$AZURITE_PORT" && [ "$(azurite_request GET "?comp=list")" = 200 ]; }
# An OAuth2 client-credentials token ($1 token endpoint, $2 client id, $3 file holding the secret); empty
# when refused.
oauth_token() {
  curl -s --max-time 2 -X POST "$1" --data-urlencode grant_type=client_credentials --data-urlencode "client_id=$2" \
    --data-urlencode "client_secret=$(cat "$3")" --data-urlencode scope=catalog 2>/dev/null \
    | sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p'
}
# The fixture issues a token to its client and answers /v1/config with it, announcing the prefix.
iceberg_rest_ready() {
  local t; t=$(oauth_token "http://127.0.0.1:$ICEBERG_REST_PORT/v1/oauth/tokens" "$ICEBERG_REST_CLIENT" "$R/iceberg-rest.secret")
  [ -n "$t" ] && curl -s --max-time 2 -H "Authorization: Bearer $t" "http://127.0.0.1:$ICEBERG_REST_PORT/v1/config" 2>/dev/null \
    | grep -q "\"prefix\":\"$ICEBERG_REST_PREFIX\""
}
nessie_oauth2_ready() { [ "$(code "http://127.0.0.1:$NESSIE_OAUTH2_PORT/.well-known/openid-configuration")" = 200 ]; }
# Nessie takes the provider's token (its OIDC discovery is done) and answers /v1/config for the warehouse.
nessie_ready() {
  local t; t=$(oauth_token "http://127.0.0.1:$NESSIE_OAUTH2_PORT/token" "$NESSIE_CLIENT" "$R/nessie.secret")
  [ -n "$t" ] && [ "$(code -H "Authorization: Bearer $t" "http://127.0.0.1:$NESSIE_PORT/iceberg/v1/config?warehouse=$NESSIE_WAREHOUSE")" = 200 ]
}
# A bucket in moto (which takes any credentials or none): 200 made, 409 there already.
moto_bucket() {
  case $(code -X PUT "http://127.0.0.1:$MOTO_PORT/$1") in
    200|409) ;;
    *) echo "moto: creating the bucket $1 failed" >&2; return 1 ;;
  esac
}
wait_for() {  # name check-fn seconds
  local i; for i in $(seq 1 $(( $3 * 5 ))); do
    "$2" && return 0
    alive "$1" || { echo "$1 exited during start-up; last log lines:" >&2; tail -n 20 "$R/$1.log" >&2; return 1; }
    sleep 0.2
  done
  echo "timeout waiting for $1 (log: $R/$1.log)" >&2; return 1
}

start_weed() {
  if alive weed; then echo "seaweedfs: already running (pid $(cat "$R/weed.pid"))"; return 0; fi
  local p; for p in $SW_PORTS; do port_busy "$p" && { echo "port 127.0.0.1:$p is busy: not starting SeaweedFS" >&2; return 1; }; done
  [ -n "${CRYO_SERVICES_FRESH:-}" ] && rm -rf "$R/seaweedfs"
  mkdir -p "$R/seaweedfs"
  # The S3 identity comes from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY at start-up; without it SeaweedFS
  # runs anonymous (no auth at all) and does not create the buckets.
  AWS_ACCESS_KEY_ID=$S3_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET setsid nohup "$WEED" mini -dir="$R/seaweedfs" \
    -ip=127.0.0.1 -ip.bind=127.0.0.1 -master.port=9333 -volume.port=9340 -filer.port=8888 \
    -s3.port=$SW_S3_PORT -s3.port.iceberg=$REST_PORT -s3.port.lance=0 -webdav=false -admin.ui=false \
    -master.telemetry=false -bucket="$PLAIN_BUCKET" -tableBucket="$TABLE_BUCKET" \
    </dev/null >"$R/weed.log" 2>&1 &
  echo $! >"$R/weed.pid"
  wait_for weed weed_ready 60 && echo "seaweedfs: ready (pid $(cat "$R/weed.pid"))"
}
start_moto() {
  if alive moto; then echo "moto: already running (pid $(cat "$R/moto.pid"))"; return 0; fi
  port_busy $MOTO_PORT && { echo "port 127.0.0.1:$MOTO_PORT is busy: not starting moto" >&2; return 1; }
  setsid nohup "$MOTO" -H 127.0.0.1 -p $MOTO_PORT </dev/null >"$R/moto.log" 2>&1 &
  echo $! >"$R/moto.pid"
  wait_for moto moto_ready 30 && echo "moto: ready (pid $(cat "$R/moto.pid"))"
}
# A private CA and a server certificate it signs (127.0.0.1 and localhost), the user's password
# (random) and its bcrypt hash in the file authenticator's password file, the internal shared
# secret: all new at every start, under run/trino/tls (0700). Clients trust ca.pem (TRINO_CA_CERT).
trino_tls_and_password() {
  local t=$TRINO_TLS
  ( umask 077; mkdir -p "$t" ) || return 1
  ( umask 077
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
      -subj "/CN=cryo test CA" -keyout "$t/ca.key" -out "$t/ca.pem" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" &&
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=127.0.0.1" \
      -keyout "$t/server.key" -out "$t/server.csr" &&
    printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$t/server.ext" &&
    openssl x509 -req -in "$t/server.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -CAcreateserial -days 30 \
      -extfile "$t/server.ext" -out "$t/server.crt" &&
    # Trino's keystore: one PEM with the key and the chain.
    cat "$t/server.key" "$t/server.crt" "$t/ca.pem" >"$t/server.pem" &&
    openssl rand -hex 16 >"$t/password" &&
    openssl rand -base64 32 >"$t/shared-secret" ) >/dev/null 2>"$t/openssl.log" \
    || { echo "trino: making the test CA and certificate failed:" >&2; cat "$t/openssl.log" >&2; return 1; }
  rm -f "$t/ca.key" "$t/server.csr" "$t/server.ext" "$t/ca.srl" "$t/openssl.log"
  chmod 644 "$t/ca.pem"
  # The password reaches python on stdin, never on a command line.
  ( umask 077; "$V/bin/python" -c '
import sys, bcrypt
user, pw = sys.argv[1], sys.stdin.read().strip().encode()
print(user + ":" + bcrypt.hashpw(pw, bcrypt.gensalt(rounds=10)).decode())' "$TRINO_AUTH_USER" <"$t/password" >"$t/password.db" ) \
    || { echo "trino: hashing the test password failed (bcrypt in the peers venv: scripts/peers.sh)" >&2; return 1; }
}
start_trino() {  # launches the JVM; wait_trino waits for it
  TRINO_STARTED=""
  if [ "${CRYO_SERVICES_TRINO:-1}" = 0 ]; then echo "trino: left out (CRYO_SERVICES_TRINO=0)"; return 0; fi
  if [ -z "$TRINO_HOME" ] || [ ! -f "$TRINO_HOME/main/cryo-trino-server-main.jar" ]; then
    echo "trino: not installed (scripts/peers.sh installs it when Java 25 is at hand): not starting"; return 0
  fi
  if alive trino; then echo "trino: already running (pid $(cat "$R/trino.pid"))"; TRINO_STARTED=1; return 0; fi
  local p; for p in "$TRINO_PORT" "$TRINO_HTTPS_PORT"; do
    port_busy "$p" && { echo "port 127.0.0.1:$p is busy: not starting Trino" >&2; return 1; }
  done
  if [ ! -f "$TRINO_HOME/plugin/cryo-password-file/cryo-password-file.jar" ]; then
    echo "trino: its password authenticator plugin is missing: run scripts/peers.sh" >&2; return 1
  fi
  [ -n "${CRYO_SERVICES_FRESH:-}" ] && rm -rf "$TRINO_LAKE"
  # etc/catalog is rewritten on every start: catalogs that tests created with CREATE CATALOG (the file
  # catalog store keeps them) do not outlive the server.
  rm -rf "$TR/etc" "$TR/var" "$TRINO_TLS"
  mkdir -p "$TR/etc/catalog" "$TR/var" "$TRINO_LAKE/warehouse"
  trino_tls_and_password || return 1
  # Trino's JDBC catalog does not create its tables; these are PyIceberg 0.12's (= Java JdbcCatalog V1).
  "$V/bin/python" - "$TRINO_LAKE/catalog.db" <<'PYEOF' || return 1
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
con.executescript("""
CREATE TABLE IF NOT EXISTS iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL, table_namespace VARCHAR(255) NOT NULL, table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000), previous_metadata_location VARCHAR(1000), iceberg_type VARCHAR(5),
    PRIMARY KEY (catalog_name, table_namespace, table_name));
CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
    catalog_name VARCHAR(255) NOT NULL, namespace VARCHAR(255) NOT NULL, property_key VARCHAR(255) NOT NULL,
    property_value VARCHAR(1000) NOT NULL, PRIMARY KEY (catalog_name, namespace, property_key));
""")
con.close()
PYEOF
  cat >"$TR/etc/config.properties" <<EOF
coordinator=true
node-scheduler.include-coordinator=true
node.environment=cryo
node.internal-address=127.0.0.1
node.bind-ip=127.0.0.1
http-server.http.port=$TRINO_PORT
http-server.log.enabled=false
# HTTPS with PASSWORD authentication beside the plain HTTP port, which stays open without a password
# (allow-insecure-over-http: the other tests send X-Trino-User only).
http-server.https.enabled=true
http-server.https.port=$TRINO_HTTPS_PORT
http-server.https.keystore.path=$TRINO_TLS/server.pem
http-server.authentication.type=PASSWORD
http-server.authentication.allow-insecure-over-http=true
internal-communication.shared-secret=$(cat "$TRINO_TLS/shared-secret")
discovery.uri=http://127.0.0.1:$TRINO_PORT
plugin.dir=$TRINO_HOME/plugin
# CREATE CATALOG / DROP CATALOG: tests point catalogs named like a golden's engine catalog at their tables
catalog.management=dynamic
query.max-memory=1GB
query.max-memory-per-node=1GB
EOF
  echo "catalog.config-dir=$TR/etc/catalog" >"$TR/etc/catalog-store.properties"
  printf 'password-authenticator.name=file\nfile.password-file=%s\n' "$TRINO_TLS/password.db" >"$TR/etc/password-authenticator.properties"
  chmod 600 "$TR/etc/config.properties"
  echo "io.trino=INFO" >"$TR/etc/log.properties"
  cat >"$TR/etc/catalog/$TRINO_CATALOG.properties" <<EOF
connector.name=iceberg
iceberg.catalog.type=jdbc
iceberg.jdbc-catalog.driver-class=org.sqlite.JDBC
iceberg.jdbc-catalog.connection-url=jdbc:sqlite:$TRINO_LAKE/catalog.db
iceberg.jdbc-catalog.catalog-name=$TRINO_CATALOG
iceberg.jdbc-catalog.default-warehouse-dir=file://$TRINO_LAKE/warehouse
iceberg.jdbc-catalog.schema-version=V1
fs.local.enabled=true
local.location=/
iceberg.expire-snapshots.min-retention=$TRINO_EXPIRE_MIN_RETENTION
iceberg.remove-orphan-files.min-retention=$TRINO_ORPHANS_MIN_RETENTION
EOF
  # Upstream's jvm.config essentials; a small heap so the Spark tests still fit beside it. The class
  # data archive (AppCDS, written when the JVM exits) makes later starts faster.
  ( cd "$TR" && exec setsid nohup "$TRINO_JAVA_HOME/bin/java" -Xmx"$TRINO_HEAP" -XX:+UseG1GC -XX:+ExitOnOutOfMemoryError \
      -XX:-OmitStackTraceInFastThrow -XX:ReservedCodeCacheSize=256M -Djdk.attach.allowAttachSelf=true \
      -XX:+EnableDynamicAgentLoading -Dfile.encoding=UTF-8 --enable-native-access=ALL-UNNAMED \
      --add-modules=jdk.incubator.vector -XX:SharedArchiveFile="$TRINO_HOME.jsa" -XX:+AutoCreateSharedArchive \
      -Dcryo.trino.version="$TRINO_VERSION" -Dconfig=etc/config.properties -Dlog.levels-file=etc/log.properties \
      -cp "$TRINO_HOME/lib/*:$TRINO_HOME/main/cryo-trino-server-main.jar" io.trino.server.TrinoServer </dev/null >"$R/trino.log" 2>&1 ) &
  echo $! >"$R/trino.pid"
  TRINO_STARTED=1
}
wait_trino() {
  [ -n "${TRINO_STARTED:-}" ] || return 0
  local t0; t0=$(date +%s)
  wait_for trino trino_ready 180 && echo "trino: ready (pid $(cat "$R/trino.pid"), $(( $(date +%s) - t0 ))s after the other services)"
}
# Postgres refuses to run as root (initdb and postgres check the effective uid). As root the server runs
# as `nobody` inside a user namespace of its own (unshare --user --map-user): outside it is still the
# invoking user, so the data dir can stay under $R although $HOME is 0700 (no real unprivileged user can
# reach it there) and everything in it stays root's. Where user namespaces are not allowed (a container's
# seccomp profile, say), or CRYO_POSTGRES_RUN_AS=<user> asks for it, it runs as that system user
# (default cryo-pg, created if missing) through setpriv: every directory above $R must then be searchable
# by it. Sets PG_RUN (the command prefix) and PG_OWNER (the uid the data dir must belong to, outside).
PG_RUN=() PG_OWNER=""
pg_runner() {
  PG_OWNER=$(id -u)
  [ "$PG_OWNER" = 0 ] || return 0
  local nu ng u
  nu=$(id -u nobody 2>/dev/null) ng=$(id -g nobody 2>/dev/null)
  if [ -z "${CRYO_POSTGRES_RUN_AS:-}" ] && [ -n "$nu" ] \
     && unshare --user --map-user="$nu" --map-group="$ng" true 2>/dev/null; then
    PG_RUN=(unshare --user --map-user="$nu" --map-group="$ng" --); return 0
  fi
  u=${CRYO_POSTGRES_RUN_AS:-cryo-pg}
  if ! id -u "$u" >/dev/null 2>&1; then
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$u" \
      || { echo "postgres: cannot create the system user $u" >&2; return 1; }
  fi
  PG_RUN=(setpriv --reuid="$u" --regid="$u" --init-groups) PG_OWNER=$(id -u "$u")
  "${PG_RUN[@]}" test -x "$R" || {
    echo "postgres: user $u cannot reach $R (a directory above it is not searchable, e.g. a 0700 \$HOME):" \
         "set CRYO_PEERS_DIR elsewhere, or allow user namespaces" >&2; return 1; }
}
start_postgres() {  # initdb (first start) and the server, in the background; wait_postgres waits for it
  PG_STARTED=""
  if [ "${CRYO_SERVICES_POSTGRES:-1}" = 0 ]; then echo "postgres: left out (CRYO_SERVICES_POSTGRES=0)"; return 0; fi
  if [ -z "$PG_BIN" ] || [ ! -x "$PG_BIN/postgres" ] || [ ! -x "$PG_BIN/initdb" ]; then
    echo "postgres: no server binaries (PG_BIN='$PG_BIN' in peers.env): run scripts/peers.sh" >&2; return 1
  fi
  if alive postgres; then echo "postgres: already running (pid $(cat "$R/postgres.pid"))"; PG_STARTED=1; return 0; fi
  port_busy "$PG_PORT" && { echo "port 127.0.0.1:$PG_PORT is busy: not starting Postgres" >&2; return 1; }
  pg_runner || return 1
  [ -n "${CRYO_SERVICES_FRESH:-}" ] && rm -rf "$PG_DATA" "$PG_PASSWORD_FILE"
  local init="" pwfile="$R/postgres-initdb.pw"
  if [ ! -f "$PG_DATA/PG_VERSION" ]; then
    # First start (or an initdb that did not finish): a new cluster, a new password.
    rm -rf "$PG_DATA"
    ( umask 077; openssl rand -hex 16 >"$PG_PASSWORD_FILE" ) || return 1
    mkdir -p "$PG_DATA" && chmod 700 "$PG_DATA" && chown "$PG_OWNER" "$PG_DATA" || return 1
    # initdb reads the password from a file the server's user can read; removed once initdb is done.
    ( umask 077; cp "$PG_PASSWORD_FILE" "$pwfile" ) && chown "$PG_OWNER" "$pwfile" || return 1
    init=1
  else
    [ -s "$PG_PASSWORD_FILE" ] || {
      echo "postgres: $PG_PASSWORD_FILE is missing for the existing cluster $PG_DATA (CRYO_SERVICES_FRESH=1 makes a new one)" >&2
      return 1; }
    # The data dir must belong to the server's user (another way of running it may have made it).
    [ "$(stat -c %u "$PG_DATA")" = "$PG_OWNER" ] || chown -R "$PG_OWNER" "$PG_DATA" || return 1
    # A postmaster.pid left by a server that is gone (machine restart, KILL): its pid may be reused by now.
    local old; old=$(head -n1 "$PG_DATA/postmaster.pid" 2>/dev/null)
    if [ -n "$old" ] && ! tr '\0' ' ' 2>/dev/null <"/proc/$old/cmdline" | grep -qF -- "-D $PG_DATA "; then
      rm -f "$PG_DATA/postmaster.pid"
    fi
  fi
  PG_T0=$(date +%s)
  # TCP on 127.0.0.1 only, no Unix socket; a throwaway test cluster: no fsync (after a machine crash,
  # CRYO_SERVICES_FRESH=1). The subshell's pid becomes the server's (exec), so it is the one recorded.
  ( if [ -n "$init" ]; then
      "${PG_RUN[@]}" "$PG_BIN/initdb" -D "$PG_DATA" -U "$PG_USER" --pwfile="$pwfile" --auth=scram-sha-256 \
        -E UTF8 --no-locale --no-sync || { rm -f "$pwfile"; exit 1; }
      rm -f "$pwfile"
    fi
    exec setsid nohup "${PG_RUN[@]}" "$PG_BIN/postgres" -D "$PG_DATA" -p "$PG_PORT" -c listen_addresses=127.0.0.1 \
      -c unix_socket_directories= -c password_encryption=scram-sha-256 -c max_connections=200 \
      -c fsync=off -c synchronous_commit=off -c full_page_writes=off
  ) </dev/null >"$R/postgres.log" 2>&1 &
  echo $! >"$R/postgres.pid"
  PG_STARTED=1
}
wait_postgres() {  # the server answers `cryo`'s password; the database exists (created on the first start)
  [ -n "${PG_STARTED:-}" ] || return 0
  wait_for postgres postgres_ready 60 || return 1
  if [ "$(pg_psql -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" != 1 ]; then
    pg_psql -d postgres -c "CREATE DATABASE $PG_DB" || { echo "postgres: CREATE DATABASE $PG_DB failed" >&2; return 1; }
  fi
  echo "postgres: ready (pid $(cat "$R/postgres.pid")) 127.0.0.1:$PG_PORT database $PG_DB${PG_T0:+, $(( $(date +%s) - PG_T0 ))s after its start}"
}
# The metastore's configuration, rewritten at every start: Derby under run/hms/metastore_db, the
# warehouse run/hms/warehouse, logs to stdout (run/hms.log). The bind address and port are the
# launcher's (-Dcryo.hms.host/-Dcryo.hms.port: scripts/hms/CryoMetastore.java).
hms_conf() {
  mkdir -p "$HR/conf" "$HR/warehouse" || return 1
  cat >"$HR/conf/metastore-site.xml" <<EOF
<?xml version="1.0"?>
<configuration>
  <property><name>javax.jdo.option.ConnectionURL</name><value>jdbc:derby:;databaseName=$HR/metastore_db;create=true</value></property>
  <property><name>javax.jdo.option.ConnectionDriverName</name><value>org.apache.derby.jdbc.EmbeddedDriver</value></property>
  <property><name>metastore.warehouse.dir</name><value>file://$HR/warehouse</value></property>
  <property><name>metastore.thrift.port</name><value>$HMS_PORT</value></property>
  <!-- From the bin tarball's template (the defaults name classes of the full Hive distribution). -->
  <property><name>metastore.task.threads.always</name><value>org.apache.hadoop.hive.metastore.events.EventCleanerTask</value></property>
  <property><name>metastore.expression.proxy</name><value>org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy</value></property>
  <!-- Required: the server fails at start-up otherwise. -->
  <property><name>metastore.async.log.enabled</name><value>false</value></property>
  <property><name>datanucleus.autoStartMechanismMode</name><value>ignored</value></property>
  <!-- Iceberg's schema evolution (drop, reorder, widen) rewrites the table's columns; Iceberg's own
       test metastore turns this check off too. -->
  <property><name>metastore.disallow.incompatible.col.type.changes</name><value>false</value></property>
</configuration>
EOF
  cat >"$HR/conf/metastore-log4j2.properties" <<'EOF'
status = WARN
name = CryoMetastore
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_OUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %5p [%t] %c{2}: %m%n
logger.DataNucleus.name = DataNucleus
logger.DataNucleus.level = ERROR
logger.Datastore.name = Datastore
logger.Datastore.level = ERROR
rootLogger.level = INFO
rootLogger.appenderRef.console.ref = console
EOF
}
# The schema tool and the server: one small JVM each (C1 only, serial GC: a test server, light on CPU).
hms_jvm() {
  HMS_JVM=("$HMS_JAVA_HOME/bin/java" -Xmx"$HMS_HEAP" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true
    -Dlog4j.configurationFile="$HR/conf/metastore-log4j2.properties" -Dderby.stream.error.file="$HR/derby.log"
    -Dcryo.hms.host=127.0.0.1 -Dcryo.hms.port="$HMS_PORT" -cp "$HR/conf:$HMS_HOME/lib/*:$HMS_HOME/cryo/cryo-metastore.jar")
}
start_hms() {  # the schema (first start) and the server, in the background; wait_hms waits for it
  HMS_STARTED=""
  if [ "${CRYO_SERVICES_HMS:-1}" = 0 ]; then echo "hive metastore: left out (CRYO_SERVICES_HMS=0)"; return 0; fi
  if [ -z "$HMS_HOME" ] || [ ! -f "$HMS_HOME/cryo/cryo-metastore.jar" ]; then
    echo "hive metastore: not installed (run scripts/peers.sh): not starting"; return 0
  fi
  if alive hms; then echo "hive metastore: already running (pid $(cat "$R/hms.pid"))"; HMS_STARTED=1; return 0; fi
  port_busy "$HMS_PORT" && { echo "port 127.0.0.1:$HMS_PORT is busy: not starting the Hive Metastore" >&2; return 1; }
  [ -n "${CRYO_SERVICES_FRESH:-}" ] && rm -rf "$HR"
  hms_conf || return 1
  hms_jvm
  HMS_T0=$(date +%s)
  # The schema tool runs at the first start only (run/hms/schema-initialized marks it done; an
  # interrupted run starts over). The subshell's pid becomes the server's (exec): it is the one recorded.
  ( cd "$HR" || exit 1
    if [ ! -f "$HR/schema-initialized" ]; then
      rm -rf "$HR/metastore_db"
      echo "initSchema (Derby $HR/metastore_db), log $HR/schematool.log"
      METASTORE_HOME=$HMS_HOME "${HMS_JVM[@]}" org.apache.hadoop.hive.metastore.tools.MetastoreSchemaTool -initSchema -dbType derby \
        >"$HR/schematool.log" 2>&1 || { echo "initSchema failed:"; tail -n 20 "$HR/schematool.log"; exit 1; }
      echo "initSchema: done in $(( $(date +%s) - HMS_T0 ))s"
      touch "$HR/schema-initialized"
    fi
    exec setsid nohup "${HMS_JVM[@]}" org.apache.hadoop.hive.metastore.CryoMetastore
  ) </dev/null >"$R/hms.log" 2>&1 &
  echo $! >"$R/hms.pid"
  HMS_STARTED=1
}
wait_hms() {
  [ -n "${HMS_STARTED:-}" ] || return 0
  wait_for hms hms_ready 180 \
    && echo "hive metastore: ready (pid $(cat "$R/hms.pid")) thrift://127.0.0.1:$HMS_PORT${HMS_T0:+, $(( $(date +%s) - HMS_T0 ))s after its start}"
}
start_gcs() {  # launches the server; wait_gcs waits for it and makes the bucket
  GCS_STARTED=""
  if [ "${CRYO_SERVICES_GCS:-1}" = 0 ]; then echo "fake-gcs-server: left out (CRYO_SERVICES_GCS=0)"; return 0; fi
  if [ -z "$FAKE_GCS_BIN" ] || [ ! -x "$FAKE_GCS_BIN" ]; then
    echo "fake-gcs-server: not installed (scripts/peers.sh installs it when \`go\` is at hand): not starting"; return 0
  fi
  if alive gcs && alive gcs-adapter; then echo "fake-gcs-server: already running (pid $(cat "$R/gcs.pid"))"; GCS_STARTED=1; return 0; fi
  for p in "$GCS_PORT" "$GCS_SERVER_PORT"; do
    port_busy "$p" && { echo "port 127.0.0.1:$p is busy: not starting fake-gcs-server" >&2; return 1; }
  done
  # Plain HTTP on loopback. The server's public host is its own address (the adapter sends that
  # host, and the server routes XML requests by it); the external URL, in the upload URLs it
  # hands out (resumable uploads' Location), is the adapter's.
  GCS_T0=$(date +%s)
  setsid nohup "$FAKE_GCS_BIN" -scheme http -host 127.0.0.1 -port "$GCS_SERVER_PORT" -backend memory \
    -public-host "127.0.0.1:$GCS_SERVER_PORT" -external-url "http://127.0.0.1:$GCS_PORT" </dev/null >"$R/gcs.log" 2>&1 &
  echo $! >"$R/gcs.pid"
  setsid nohup "$V/bin/python" "$SCRIPTS/gcs/xml_adapter.py" "$GCS_PORT" "127.0.0.1:$GCS_SERVER_PORT" \
    </dev/null >"$R/gcs-adapter.log" 2>&1 &
  echo $! >"$R/gcs-adapter.pid"
  GCS_STARTED=1
}
wait_gcs() {
  [ -n "${GCS_STARTED:-}" ] || return 0
  wait_for gcs gcs_ready 30 || return 1
  # 200: made, 409: there already (a running server).
  case $(code -X POST -H 'Content-Type: application/json' -d "{\"name\": \"$GCS_BUCKET\"}" \
           "http://127.0.0.1:$GCS_PORT/storage/v1/b?project=$GCS_PROJECT") in
    200|409) ;;
    *) echo "fake-gcs-server: creating the bucket $GCS_BUCKET failed" >&2; return 1 ;;
  esac
  echo "fake-gcs-server: ready (pid $(cat "$R/gcs.pid")) http://127.0.0.1:$GCS_PORT bucket $GCS_BUCKET${GCS_T0:+, $(( $(date +%s) - GCS_T0 ))s after its start}"
}
start_azurite() {  # launches Azurite's Blob service; wait_azurite waits for it and makes the container
  AZURITE_STARTED=""
  if [ "${CRYO_SERVICES_AZURITE:-1}" = 0 ]; then echo "azurite: left out (CRYO_SERVICES_AZURITE=0)"; return 0; fi
  if [ -z "$AZURITE_BLOB_BIN" ] || [ ! -x "$AZURITE_BLOB_BIN" ]; then
    echo "azurite: not installed (scripts/peers.sh installs it when \`npm\` is at hand): not starting"; return 0
  fi
  if alive azurite; then echo "azurite: already running (pid $(cat "$R/azurite.pid"))"; AZURITE_STARTED=1; return 0; fi
  port_busy "$AZURITE_PORT" && { echo "port 127.0.0.1:$AZURITE_PORT is busy: not starting Azurite" >&2; return 1; }
  # In memory (--inMemoryPersistence refuses --location; nothing is written to the working directory).
  # --disableProductStyleUrl: the account is always the first path segment; --loose and
  # --skipApiVersionCheck: any SDK's headers and API version. The subshell's pid becomes node's (exec).
  AZURITE_T0=$(date +%s)
  ( cd "$R" && exec setsid nohup "$AZURITE_BLOB_BIN" --blobHost 127.0.0.1 --blobPort "$AZURITE_PORT" --inMemoryPersistence \
      --disableTelemetry --disableProductStyleUrl --loose --skipApiVersionCheck ) </dev/null >"$R/azurite.log" 2>&1 &
  echo $! >"$R/azurite.pid"
  AZURITE_STARTED=1
}
wait_azurite() {
  [ -n "${AZURITE_STARTED:-}" ] || return 0
  wait_for azurite azurite_ready 30 || return 1
  # 201: made, 409: there already (a running server).
  case $(azurite_request PUT "/$AZURITE_CONTAINER?restype=container") in
    201|409) ;;
    *) echo "azurite: creating the container $AZURITE_CONTAINER failed" >&2; return 1 ;;
  esac
  echo "azurite: ready (pid $(cat "$R/azurite.pid")) http://127.0.0.1:$AZURITE_PORT/$AZURITE_ACCOUNT container $AZURITE_CONTAINER${AZURITE_T0:+, $(( $(date +%s) - AZURITE_T0 ))s after its start}"
}
# A small JVM (C1 only, serial GC: a test server, light on CPU); never the instance metadata service.
REST_JVM=(-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true -Daws.disableEc2Metadata=true)
start_iceberg_rest() {  # launches the fixture; wait_iceberg_rest waits for it and makes its bucket
  ICEBERG_REST_STARTED=""
  if [ "${CRYO_SERVICES_ICEBERG_REST:-1}" = 0 ]; then echo "iceberg rest fixture: left out (CRYO_SERVICES_ICEBERG_REST=0)"; return 0; fi
  if [ -z "$ICEBERG_REST_FIXTURE_JAR" ] || [ ! -f "$ICEBERG_REST_FIXTURE_JAR" ] || [ ! -f "$ICEBERG_REST_WRAPPER_JAR" ]; then
    echo "iceberg rest fixture: not installed (run scripts/peers.sh): not starting"; return 0
  fi
  if alive iceberg-rest; then echo "iceberg rest fixture: already running (pid $(cat "$R/iceberg-rest.pid"))"; ICEBERG_REST_STARTED=1; return 0; fi
  port_busy "$ICEBERG_REST_PORT" && { echo "port 127.0.0.1:$ICEBERG_REST_PORT is busy: not starting the Iceberg REST fixture" >&2; return 1; }
  # The client's secret and the credentials vended: new at every start. The catalog's own S3 keys and
  # the vended ones differ (moto takes any); clients get only the vended ones, and only on request.
  ( umask 077; openssl rand -hex 16 >"$R/iceberg-rest.secret" ) || return 1
  local own vended_key vended_secret vended_token
  own=$(openssl rand -hex 20) vended_key="ASIACRYO$(openssl rand -hex 6 | tr a-f A-F)" \
    vended_secret=$(openssl rand -hex 20) vended_token=$(openssl rand -hex 32) || return 1
  ICEBERG_REST_T0=$(date +%s)
  ( cd "$R" && CATALOG_WAREHOUSE="s3://$ICEBERG_REST_BUCKET/wh" CATALOG_IO__IMPL=org.apache.iceberg.aws.s3.S3FileIO \
      CATALOG_S3_ENDPOINT="http://127.0.0.1:$MOTO_PORT" CATALOG_S3_PATH__STYLE__ACCESS=true CATALOG_CLIENT_REGION=us-east-1 \
      CATALOG_S3_ACCESS__KEY__ID=cryo-rest-fixture CATALOG_S3_SECRET__ACCESS__KEY="$own" \
      CATALOG_REST_HOST=127.0.0.1 CATALOG_REST_PORT="$ICEBERG_REST_PORT" CATALOG_REST_PREFIX="$ICEBERG_REST_PREFIX" \
      CATALOG_REST_OAUTH_CLIENT__ID="$ICEBERG_REST_CLIENT" CATALOG_REST_OAUTH_CLIENT__SECRET="$(cat "$R/iceberg-rest.secret")" \
      CATALOG_VENDED_S3_ACCESS__KEY__ID="$vended_key" CATALOG_VENDED_S3_SECRET__ACCESS__KEY="$vended_secret" \
      CATALOG_VENDED_S3_SESSION__TOKEN="$vended_token" CATALOG_VENDED_S3_ENDPOINT="http://127.0.0.1:$MOTO_PORT" \
      CATALOG_VENDED_S3_PATH__STYLE__ACCESS=true CATALOG_VENDED_S3_REGION=us-east-1 CATALOG_VENDED_CLIENT_REGION=us-east-1 \
      AWS_EC2_METADATA_DISABLED=true exec setsid nohup "$ICEBERG_REST_JAVA_HOME/bin/java" -Xmx256m "${REST_JVM[@]}" \
      -cp "$ICEBERG_REST_WRAPPER_JAR:$ICEBERG_REST_FIXTURE_JAR" org.apache.iceberg.rest.LoopbackRestServer
  ) </dev/null >"$R/iceberg-rest.log" 2>&1 &
  echo $! >"$R/iceberg-rest.pid"
  ICEBERG_REST_STARTED=1
}
wait_iceberg_rest() {
  [ -n "${ICEBERG_REST_STARTED:-}" ] || return 0
  wait_for iceberg-rest iceberg_rest_ready 90 && moto_bucket "$ICEBERG_REST_BUCKET" \
    && echo "iceberg rest fixture: ready (pid $(cat "$R/iceberg-rest.pid")) http://127.0.0.1:$ICEBERG_REST_PORT prefix $ICEBERG_REST_PREFIX${ICEBERG_REST_T0:+, $(( $(date +%s) - ICEBERG_REST_T0 ))s after its start}"
}
# Nessie's configuration, rewritten at every start (Quarkus reads config/application.properties in its
# working directory, run/nessie). Its own S3 keys are a Quarkus secret (moto takes any); the credentials
# it vends come from moto's STS (AssumeRole with a session policy naming the table's locations).
nessie_conf() {
  ( umask 077; mkdir -p "$NR/config" && cat >"$NR/config/application.properties" <<EOF
quarkus.http.host=127.0.0.1
quarkus.http.port=$NESSIE_PORT
# Health and metrics (not used by Cryo); the management interface is built in, on every interface by default.
quarkus.management.host=127.0.0.1
quarkus.management.port=$NESSIE_MANAGEMENT_PORT
quarkus.otel.sdk.disabled=true
quarkus.log.console.level=INFO
nessie.version.store.type=IN_MEMORY
nessie.catalog.default-warehouse=$NESSIE_WAREHOUSE
nessie.catalog.warehouses.$NESSIE_WAREHOUSE.location=s3://$NESSIE_BUCKET/wh
nessie.catalog.service.s3.default-options.endpoint=http://127.0.0.1:$MOTO_PORT
nessie.catalog.service.s3.default-options.path-style-access=true
nessie.catalog.service.s3.default-options.region=us-east-1
nessie.catalog.service.s3.default-options.access-key=urn:nessie-secret:quarkus:cryo.s3-default
cryo.s3-default.name=cryo-nessie
cryo.s3-default.secret=$(openssl rand -hex 20)
nessie.catalog.service.s3.default-options.request-signing-enabled=false
nessie.catalog.service.s3.default-options.sts-endpoint=http://127.0.0.1:$MOTO_PORT
nessie.catalog.service.s3.default-options.client-iam.enabled=true
nessie.catalog.service.s3.default-options.client-iam.assume-role=arn:aws:iam::123456789012:role/cryo-vended
nessie.catalog.service.s3.default-options.client-iam.role-session-name=cryo
nessie.server.authentication.enabled=true
quarkus.oidc.auth-server-url=http://127.0.0.1:$NESSIE_OAUTH2_PORT
quarkus.oidc.client-id=nessie
quarkus.oidc.connection-delay=30S
EOF
  )
}
start_nessie() {  # launches the OAuth2 provider and Nessie; wait_nessie waits for both and makes the bucket
  NESSIE_STARTED=""
  if [ "${CRYO_SERVICES_NESSIE:-1}" = 0 ]; then echo "nessie: left out (CRYO_SERVICES_NESSIE=0)"; return 0; fi
  if [ -z "$NESSIE_JAR" ] || [ ! -f "$NESSIE_JAR" ] || [ -z "$OAUTH2_MOCK_DIR" ] || [ ! -d "$OAUTH2_MOCK_DIR" ]; then
    echo "nessie: not installed (run scripts/peers.sh; it needs Java 21+ and npm): not starting"; return 0
  fi
  if alive nessie && alive nessie-oauth2; then echo "nessie: already running (pid $(cat "$R/nessie.pid"))"; NESSIE_STARTED=1; return 0; fi
  local p; for p in "$NESSIE_PORT" "$NESSIE_MANAGEMENT_PORT" "$NESSIE_OAUTH2_PORT"; do
    port_busy "$p" && { echo "port 127.0.0.1:$p is busy: not starting Nessie" >&2; return 1; }
  done
  ( umask 077; openssl rand -hex 16 >"$R/nessie.secret" ) || return 1
  nessie_conf || return 1
  NESSIE_T0=$(date +%s)
  ( cd "$R" && OAUTH2_HOST=127.0.0.1 OAUTH2_PORT=$NESSIE_OAUTH2_PORT OAUTH2_CLIENT_ID=$NESSIE_CLIENT \
      OAUTH2_CLIENT_SECRET=$(cat "$R/nessie.secret") exec setsid nohup node "$SCRIPTS/rest/oauth2-server.mjs" "$OAUTH2_MOCK_DIR"
  ) </dev/null >"$R/nessie-oauth2.log" 2>&1 &
  echo $! >"$R/nessie-oauth2.pid"
  # The class data archive (written when the JVM exits) makes later starts faster, as for Trino.
  ( cd "$NR" && AWS_EC2_METADATA_DISABLED=true exec setsid nohup "$NESSIE_JAVA_HOME/bin/java" -Xmx384m "${REST_JVM[@]}" \
      -XX:SharedArchiveFile="$NESSIE_JAR.jsa" -XX:+AutoCreateSharedArchive -jar "$NESSIE_JAR"
  ) </dev/null >"$R/nessie.log" 2>&1 &
  echo $! >"$R/nessie.pid"
  NESSIE_STARTED=1
}
wait_nessie() {
  [ -n "${NESSIE_STARTED:-}" ] || return 0
  wait_for nessie-oauth2 nessie_oauth2_ready 30 && wait_for nessie nessie_ready 120 && moto_bucket "$NESSIE_BUCKET" \
    && echo "nessie: ready (pid $(cat "$R/nessie.pid")) http://127.0.0.1:$NESSIE_PORT/iceberg, OAuth2 http://127.0.0.1:$NESSIE_OAUTH2_PORT${NESSIE_T0:+, $(( $(date +%s) - NESSIE_T0 ))s after its start}"
}
write_env() {
  # 0600: it holds the test password of Trino's HTTPS port (and the S3 test keys).
  ( umask 077; : >"$R/services.env" ) && chmod 600 "$R/services.env"
  cat >>"$R/services.env" <<ENVEOF
# Written by scripts/services.sh — endpoints of the loopback services
export CRYO_REST_URI=http://127.0.0.1:$REST_PORT
export CRYO_REST_WAREHOUSE=$TABLE_BUCKET
export CRYO_REST_CREDENTIAL=$S3_KEY:$S3_SECRET
export CRYO_SEAWEED_S3_ENDPOINT=http://127.0.0.1:$SW_S3_PORT
export CRYO_SEAWEED_ACCESS_KEY=$S3_KEY
export CRYO_SEAWEED_SECRET_KEY=$S3_SECRET
export CRYO_SEAWEED_BUCKET=$PLAIN_BUCKET
export CRYO_MOTO_ENDPOINT=http://127.0.0.1:$MOTO_PORT
ENVEOF
  if [ -n "${TRINO_STARTED:-}" ]; then cat >>"$R/services.env" <<ENVEOF
# Trino $TRINO_VERSION: its Iceberg catalog $TRINO_CATALOG is the sqlite SQL catalog below (catalog name $TRINO_CATALOG)
export TRINO_URL=http://127.0.0.1:$TRINO_PORT
export TRINO_USER=cryo
# The HTTPS port: PASSWORD authentication (basic auth), certificate signed by the private CA below
export TRINO_HTTPS_URL=https://127.0.0.1:$TRINO_HTTPS_PORT
export TRINO_AUTH_USER=$TRINO_AUTH_USER
export TRINO_AUTH_PASSWORD=$(cat "$TRINO_TLS/password")
export TRINO_CA_CERT=$TRINO_TLS/ca.pem
export TRINO_VERSION=$TRINO_VERSION
export TRINO_CATALOG=$TRINO_CATALOG
export TRINO_LAKE_URI=sqlite:///$TRINO_LAKE/catalog.db
export TRINO_LAKE_JDBC_URI=jdbc:sqlite:$TRINO_LAKE/catalog.db
export TRINO_LAKE_WAREHOUSE=file://$TRINO_LAKE/warehouse
export TRINO_EXPIRE_MIN_RETENTION=$TRINO_EXPIRE_MIN_RETENTION
export TRINO_ORPHANS_MIN_RETENTION=$TRINO_ORPHANS_MIN_RETENTION
ENVEOF
  fi
  if [ -n "${PG_STARTED:-}" ]; then
    local pw; pw=$(cat "$PG_PASSWORD_FILE")
    cat >>"$R/services.env" <<ENVEOF
# PostgreSQL $PG_PORT: the SQL catalog on a server (PyIceberg SqlCatalog = Java JdbcCatalog tables); user $PG_USER is a superuser
export CRYO_POSTGRES_HOST=127.0.0.1
export CRYO_POSTGRES_PORT=$PG_PORT
export CRYO_POSTGRES_USER=$PG_USER
export CRYO_POSTGRES_PASSWORD=$pw
export CRYO_POSTGRES_DB=$PG_DB
export CRYO_POSTGRES_URI=postgresql+psycopg2://$PG_USER:$pw@127.0.0.1:$PG_PORT/$PG_DB
export CRYO_POSTGRES_JDBC_URL=jdbc:postgresql://127.0.0.1:$PG_PORT/$PG_DB
ENVEOF
  fi
  if [ -n "${HMS_STARTED:-}" ]; then cat >>"$R/services.env" <<ENVEOF
# Hive Metastore $HMS_VERSION (standalone, Derby): plain Thrift (no SASL); the warehouse its databases default to
export CRYO_HMS_URI=thrift://127.0.0.1:$HMS_PORT
export CRYO_HMS_WAREHOUSE=file://$HR/warehouse
export CRYO_HMS_VERSION=$HMS_VERSION
ENVEOF
  fi
  if [ -n "${GCS_STARTED:-}" ]; then cat >>"$R/services.env" <<ENVEOF
# fake-gcs-server (plain HTTP, in memory) behind the XML upload adapter: takes any credentials or none;
# bucket $GCS_BUCKET made at start. The server alone (no XML uploads) at CRYO_GCS_SERVER_ENDPOINT.
export CRYO_GCS_ENDPOINT=http://127.0.0.1:$GCS_PORT
export CRYO_GCS_SERVER_ENDPOINT=http://127.0.0.1:$GCS_SERVER_PORT
export CRYO_GCS_PROJECT=$GCS_PROJECT
export CRYO_GCS_BUCKET=$GCS_BUCKET
ENVEOF
  fi
  if [ -n "${AZURITE_STARTED:-}" ]; then cat >>"$R/services.env" <<ENVEOF
# Azurite Blob (plain HTTP, in memory): the emulator's well-known account and key; container $AZURITE_CONTAINER made at start.
# CRYO_AZURITE_AUTHORITY is what PyArrow's blob/dfs storage authority takes (with scheme http).
export CRYO_AZURITE_ENDPOINT=http://127.0.0.1:$AZURITE_PORT/$AZURITE_ACCOUNT
export CRYO_AZURITE_AUTHORITY=127.0.0.1:$AZURITE_PORT
export CRYO_AZURITE_ACCOUNT=$AZURITE_ACCOUNT
export CRYO_AZURITE_KEY=$AZURITE_KEY
export CRYO_AZURITE_CONTAINER=$AZURITE_CONTAINER
export CRYO_AZURITE_CONNECTION_STRING='DefaultEndpointsProtocol=http;AccountName=$AZURITE_ACCOUNT;AccountKey=$AZURITE_KEY;BlobEndpoint=http://127.0.0.1:$AZURITE_PORT/$AZURITE_ACCOUNT;'
ENVEOF
  fi
  write_rest_env >>"$R/services.env"
}
write_rest_env() {  # the REST servers' part of services.env
  if [ -n "${ICEBERG_REST_STARTED:-}" ]; then cat <<ENVEOF
# Iceberg's REST fixture $ICEBERG_REST_FIXTURE_VERSION (scripts/rest/LoopbackRestServer.java): OAuth2 client credentials at {uri}/v1/oauth/tokens,
# the prefix in /v1/config overrides, S3 credentials vended only to X-Iceberg-Access-Delegation: vended-credentials (warehouse on moto)
export CRYO_ICEBERG_REST_URI=http://127.0.0.1:$ICEBERG_REST_PORT
export CRYO_ICEBERG_REST_CREDENTIAL=$ICEBERG_REST_CLIENT:$(cat "$R/iceberg-rest.secret")
export CRYO_ICEBERG_REST_PREFIX=$ICEBERG_REST_PREFIX
export CRYO_ICEBERG_REST_WAREHOUSE=s3://$ICEBERG_REST_BUCKET/wh
export CRYO_ICEBERG_REST_S3_ENDPOINT=http://127.0.0.1:$MOTO_PORT
export CRYO_ICEBERG_REST_VERSION=$ICEBERG_REST_FIXTURE_VERSION
ENVEOF
  fi
  if [ -n "${NESSIE_STARTED:-}" ]; then cat <<ENVEOF
# Nessie $NESSIE_VERSION (Iceberg REST, in memory): OIDC bearer tokens from the OAuth2 server below (client credentials),
# the prefix (branch|warehouse) in /v1/config defaults, S3 credentials vended from moto's STS (warehouse on moto)
export CRYO_NESSIE_URI=http://127.0.0.1:$NESSIE_PORT/iceberg
export CRYO_NESSIE_OAUTH2_URI=http://127.0.0.1:$NESSIE_OAUTH2_PORT/token
export CRYO_NESSIE_CREDENTIAL=$NESSIE_CLIENT:$(cat "$R/nessie.secret")
export CRYO_NESSIE_WAREHOUSE=$NESSIE_WAREHOUSE
export CRYO_NESSIE_S3_ENDPOINT=http://127.0.0.1:$MOTO_PORT
export CRYO_NESSIE_VERSION=$NESSIE_VERSION
ENVEOF
  fi
}
stop_one() {  # name cmdline-pattern [signal]: only the process we started, and only if it still is that program
  local n=$1 pid
  [ -f "$R/$n.pid" ] || return 0
  pid=$(cat "$R/$n.pid")
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qE "$2"; then
    kill -"${3:-TERM}" "$pid"
    local i; for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && { echo "$n: still running after 20 s, sending KILL" >&2; kill -9 "$pid"; }
  fi
  rm -f "$R/$n.pid"; echo "$n: stopped"
}
status() {
  local rc=0
  if alive weed && weed_ready; then echo "seaweedfs: up (pid $(cat "$R/weed.pid")) REST :$REST_PORT S3 :$SW_S3_PORT"; else echo "seaweedfs: down"; rc=3; fi
  if alive moto && moto_ready; then echo "moto: up (pid $(cat "$R/moto.pid")) S3 :$MOTO_PORT"; else echo "moto: down"; rc=3; fi
  if [ -z "$TRINO_HOME" ]; then echo "trino: not installed"
  elif alive trino && trino_ready; then echo "trino: up (pid $(cat "$R/trino.pid")) http://127.0.0.1:$TRINO_PORT https://127.0.0.1:$TRINO_HTTPS_PORT catalog $TRINO_CATALOG"
  else echo "trino: down"; [ "${CRYO_SERVICES_TRINO:-1}" = 0 ] || rc=3; fi
  if [ -z "$PG_BIN" ]; then echo "postgres: not installed (PG_BIN unset in peers.env)"; [ "${CRYO_SERVICES_POSTGRES:-1}" = 0 ] || rc=3
  elif alive postgres && postgres_ready; then echo "postgres: up (pid $(cat "$R/postgres.pid")) 127.0.0.1:$PG_PORT database $PG_DB data $PG_DATA"
  else echo "postgres: down"; [ "${CRYO_SERVICES_POSTGRES:-1}" = 0 ] || rc=3; fi
  if [ -z "$HMS_HOME" ]; then echo "hive metastore: not installed"
  elif alive hms && hms_ready; then echo "hive metastore: up (pid $(cat "$R/hms.pid")) thrift://127.0.0.1:$HMS_PORT warehouse file://$HR/warehouse"
  else echo "hive metastore: down"; [ "${CRYO_SERVICES_HMS:-1}" = 0 ] || rc=3; fi
  if [ -z "$FAKE_GCS_BIN" ]; then echo "fake-gcs-server: not installed"
  elif alive gcs && alive gcs-adapter && gcs_ready; then echo "fake-gcs-server: up (pid $(cat "$R/gcs.pid")) http://127.0.0.1:$GCS_PORT"
  else echo "fake-gcs-server: down"; [ "${CRYO_SERVICES_GCS:-1}" = 0 ] || rc=3; fi
  if [ -z "$AZURITE_BLOB_BIN" ]; then echo "azurite: not installed"
  elif alive azurite && azurite_ready; then echo "azurite: up (pid $(cat "$R/azurite.pid")) http://127.0.0.1:$AZURITE_PORT/$AZURITE_ACCOUNT"
  else echo "azurite: down"; [ "${CRYO_SERVICES_AZURITE:-1}" = 0 ] || rc=3; fi
  if [ -z "$ICEBERG_REST_FIXTURE_JAR" ]; then echo "iceberg rest fixture: not installed"
  elif alive iceberg-rest && iceberg_rest_ready; then echo "iceberg rest fixture: up (pid $(cat "$R/iceberg-rest.pid")) http://127.0.0.1:$ICEBERG_REST_PORT prefix $ICEBERG_REST_PREFIX"
  else echo "iceberg rest fixture: down"; [ "${CRYO_SERVICES_ICEBERG_REST:-1}" = 0 ] || rc=3; fi
  if [ -z "$NESSIE_JAR" ]; then echo "nessie: not installed"
  elif alive nessie && alive nessie-oauth2 && nessie_ready; then echo "nessie: up (pid $(cat "$R/nessie.pid")) http://127.0.0.1:$NESSIE_PORT/iceberg, OAuth2 http://127.0.0.1:$NESSIE_OAUTH2_PORT"
  else echo "nessie: down"; [ "${CRYO_SERVICES_NESSIE:-1}" = 0 ] || rc=3; fi
  return $rc
}

[ -x "$WEED" ] && [ -x "$MOTO" ] || { echo "peers not installed in $D: run scripts/peers.sh first" >&2; exit 1; }
mkdir -p "$R"
case "${1:-status}" in
  # Postgres (initdb on the first start), Trino, the Hive Metastore (its schema on the first start) and
  # the GCS and Azure emulators start first and come up while weed and moto do.
  # So do the REST servers' JVMs; their buckets are made in moto once it is up.
  start)   start_postgres && start_trino && start_hms && start_gcs && start_azurite && start_iceberg_rest && start_nessie \
             && start_weed && start_moto \
             && wait_postgres && wait_trino && wait_hms && wait_gcs && wait_azurite && wait_iceberg_rest && wait_nessie \
             && write_env && echo "endpoints: source $R/services.env" ;;
  # Postgres: SIGINT is its fast shutdown (pg_ctl stop -m fast): open sessions are ended, not waited for.
  stop)    stop_one postgres "bin/postgres -D $PG_DATA " INT; stop_one trino 'io.trino.server.TrinoServer'
           stop_one hms 'org.apache.hadoop.hive.metastore.CryoMetastore'
           stop_one gcs 'fake-gcs-server'; stop_one gcs-adapter 'gcs/xml_adapter\.py'; stop_one azurite 'azurite-blob'
           stop_one iceberg-rest 'org\.apache\.iceberg\.rest\.LoopbackRestServer'
           stop_one nessie 'nessie-quarkus-.*-runner\.jar'; stop_one nessie-oauth2 'rest/oauth2-server\.mjs'
           stop_one moto moto_server; stop_one weed 'weed mini' ;;
  restart) "$0" stop; "$0" start ;;
  status)  status ;;
  *) echo "usage: $0 start|stop|status|restart" >&2; exit 2 ;;
esac
