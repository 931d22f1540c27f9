#!/usr/bin/env bash
# Start/stop the loopback Iceberg services Cryo's catalog tests talk to.
#
#   bash scripts/services.sh start|stop|status|restart
#
#   SeaweedFS `weed mini`: Iceberg REST catalog http://127.0.0.1:8181 (table bucket `icetables`),
#                          S3 http://127.0.0.1:8333 (plain bucket `warehouse`)
#   moto S3:               http://127.0.0.1:5055 (any credentials; in memory, empty after a restart)
#
# Everything binds to 127.0.0.1. Pids, logs and SeaweedFS data live under $CRYO_PEERS_DIR/run;
# endpoints and credentials are written to $CRYO_PEERS_DIR/run/services.env (shell-sourceable).
# CRYO_SERVICES_FRESH=1 wipes SeaweedFS data before starting. Needs scripts/peers.sh first.
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
moto_ready() { [ "$(code "http://127.0.0.1:$MOTO_PORT/moto-api/")" = 200 ]; }
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
write_env() {
  cat >"$R/services.env" <<ENVEOF
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
}
stop_one() {  # only the process we started, and only if it still is that program
  local n=$1 pid
  [ -f "$R/$n.pid" ] || return 0
  pid=$(cat "$R/$n.pid")
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qE "$2"; then
    kill "$pid"
    local i; for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && { echo "$n: still running after 20 s, sending KILL" >&2; kill -9 "$pid"; }
  fi
  rm -f "$R/$n.pid"; echo "$n: stopped"
}
status() {
  local rc=0
  if alive weed && weed_ready; then echo "seaweedfs: up (pid $(cat "$R/weed.pid")) REST :$REST_PORT S3 :$SW_S3_PORT"; else echo "seaweedfs: down"; rc=3; fi
  if alive moto && moto_ready; then echo "moto: up (pid $(cat "$R/moto.pid")) S3 :$MOTO_PORT"; else echo "moto: down"; rc=3; fi
  return $rc
}

[ -x "$WEED" ] && [ -x "$MOTO" ] || { echo "peers not installed in $D: run scripts/peers.sh first" >&2; exit 1; }
mkdir -p "$R"
case "${1:-status}" in
  start)   start_weed && start_moto && write_env && echo "endpoints: source $R/services.env" ;;
  stop)    stop_one moto moto_server; stop_one weed 'weed mini' ;;
  restart) "$0" stop; "$0" start ;;
  status)  status ;;
  *) echo "usage: $0 start|stop|status|restart" >&2; exit 2 ;;
esac
