#!/usr/bin/env bash
# Starts or stops Debian's `docker-registry` (the CNCF distribution registry, v2 API) on
# loopback, plain HTTP, no auth, storage under .cache/: the registry the image tests push
# to and pull back from (tests/e2e/image.rs).
#
#   scripts/registry.sh start [PORT]   # default 5500; apt-get installs docker-registry if missing
#   scripts/registry.sh stop  [PORT]
#
# Then: export WISP_TEST_REGISTRY=127.0.0.1:PORT
# Storage is wiped at start and stop: the registry holds only what one test run pushed.
set -euo pipefail

cmd=${1:-}
port=${2:-5500}
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.cache"
pidfile="$cache/registry-$port.pid"
logfile="$cache/registry-$port.log"
config="$cache/registry-$port.yml"
storage="$cache/registry-$port"

usage() {
  echo "usage: $0 start|stop [PORT]" >&2
  exit 2
}

[[ "$port" =~ ^[0-9]+$ ]] || usage

# running, stop_pidfile
source "$root/scripts/lib/pidfile.sh"

registry_bin() {
  if ! command -v docker-registry >/dev/null 2>&1; then
    echo "registry.sh: installing Debian's docker-registry" >&2
    # The package's own service is not started here (no init system), and its config
    # (port 5000, htpasswd auth) is not used: ours is written below.
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry >&2 || return 1
  fi
  command -v docker-registry
}

answers() {
  curl -s -o /dev/null --max-time 1 -w '%{http_code}' "http://127.0.0.1:$port/v2/" 2>/dev/null |
    grep -q 200
}

start() {
  mkdir -p "$cache"
  if running; then
    echo "registry.sh: already running on 127.0.0.1:$port (pid $(cat "$pidfile"))"
    return
  fi
  local bin
  bin=$(registry_bin) || { echo "registry.sh: cannot install docker-registry" >&2; exit 1; }
  rm -rf "$storage"
  mkdir -p "$storage"
  cat >"$config" <<YAML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $storage
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
YAML
  nohup "$bin" serve "$config" >"$logfile" 2>&1 </dev/null &
  echo $! >"$pidfile"
  for _ in $(seq 1 150); do
    if answers; then
      echo "registry.sh: docker-registry on http://127.0.0.1:$port (pid $(cat "$pidfile"))"
      return
    fi
    if ! running; then
      break
    fi
    sleep 0.1
  done
  echo "registry.sh: docker-registry did not answer on 127.0.0.1:$port; log:" >&2
  tail -n 20 "$logfile" >&2 || true
  stop >/dev/null 2>&1 || true
  exit 1
}

stop() {
  stop_pidfile registry.sh docker-registry 5
  rm -rf "$storage" "$config"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
