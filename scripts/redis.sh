#!/usr/bin/env bash
# Starts or stops a throwaway redis-server on loopback for the cache tests.
#
#   scripts/redis.sh start [PORT]   # default 6379; installs Debian's redis-server if missing
#   scripts/redis.sh stop  [PORT]
#
# Then: export WISP_TEST_REDIS_URL=redis://127.0.0.1:PORT
# Nothing is persisted (--save '', no AOF); state lives under .cache/redis-PORT/.
set -euo pipefail

cmd=${1:-}
port=${2:-6379}
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.cache/redis-$port"
pidfile="$dir/redis.pid"

usage() {
  echo "usage: $0 start|stop [PORT]" >&2
  exit 2
}

[[ "$port" =~ ^[0-9]+$ ]] || usage

install_redis() {
  if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
    return
  fi
  echo "redis.sh: installing redis-server (Debian package)" >&2
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  # Update the package lists only when the package is not known yet.
  if ! apt-cache show redis-server >/dev/null 2>&1; then
    $sudo apt-get update -qq
  fi
  if ! $sudo apt-get install -y -qq --no-install-recommends redis-server >/dev/null; then
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends redis-server >/dev/null
  fi
  # The package may start a system-wide service on 6379; we run our own.
  if command -v service >/dev/null 2>&1; then
    $sudo service redis-server stop >/dev/null 2>&1 || true
  fi
}

# running, stop_pidfile
source "$root/scripts/lib/pidfile.sh"

start() {
  install_redis
  mkdir -p "$dir"
  if running; then
    echo "redis.sh: already running on 127.0.0.1:$port (pid $(cat "$pidfile"))"
    return
  fi
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$dir" --daemonize yes --pidfile "$pidfile" --logfile "$dir/redis.log"
  for _ in $(seq 1 100); do
    if [[ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" == "PONG" ]]; then
      echo "redis.sh: redis-server on 127.0.0.1:$port (pid $(cat "$pidfile" 2>/dev/null || echo '?'))"
      return
    fi
    sleep 0.1
  done
  echo "redis.sh: redis-server did not answer PING on 127.0.0.1:$port; log:" >&2
  tail -n 20 "$dir/redis.log" >&2 || true
  exit 1
}

stop() {
  stop_pidfile redis.sh redis-server 5
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
