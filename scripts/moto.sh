#!/usr/bin/env bash
# Starts or stops moto_server (PyPI `moto[server]`) on loopback: the stand-in for S3 and
# Secrets Manager in the AWS backend tests.
#
#   scripts/moto.sh start [PORT]   # default 5000; installs moto[server] if missing
#   scripts/moto.sh stop  [PORT]
#
# Then: export WISP_TEST_MOTO_ENDPOINT=http://127.0.0.1:PORT
# When no working `moto_server` is on PATH, moto is installed into a venv under
# .cache/moto-venv (gitignored). Its state is in memory; stopping it forgets everything.
set -euo pipefail

cmd=${1:-}
port=${2:-5000}
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="$root/.cache"
venv="$cache/moto-venv"
pidfile="$cache/moto-$port.pid"
logfile="$cache/moto-$port.log"

usage() {
  echo "usage: $0 start|stop [PORT]" >&2
  exit 2
}

[[ "$port" =~ ^[0-9]+$ ]] || usage

# Prints the moto_server command to use, installing moto if needed.
moto_bin() {
  if [[ -x "$venv/bin/moto_server" ]] && "$venv/bin/moto_server" --help >/dev/null 2>&1; then
    echo "$venv/bin/moto_server"
    return 0
  fi
  # A pyenv shim can exist without moto behind it: check that it really runs.
  if command -v moto_server >/dev/null 2>&1 && moto_server --help >/dev/null 2>&1; then
    command -v moto_server
    return 0
  fi
  echo "moto.sh: installing moto[server] into $venv" >&2
  mkdir -p "$cache"
  # A half-made venv (an interrupted install) is rebuilt from scratch.
  rm -rf "$venv"
  python3 -m venv "$venv" >&2 || return 1
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'moto[server]' >&2 || return 1
  "$venv/bin/moto_server" --help >/dev/null 2>&1 || return 1
  echo "$venv/bin/moto_server"
}

# running, stop_pidfile
source "$root/scripts/lib/pidfile.sh"

answers() {
  curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/moto-api/" 2>/dev/null
}

start() {
  mkdir -p "$cache"
  if running; then
    echo "moto.sh: already running on 127.0.0.1:$port (pid $(cat "$pidfile"))"
    return
  fi
  local bin
  bin=$(moto_bin) || { echo "moto.sh: cannot install or run moto_server" >&2; exit 1; }
  nohup "$bin" -H 127.0.0.1 -p "$port" >"$logfile" 2>&1 </dev/null &
  echo $! >"$pidfile"
  for _ in $(seq 1 150); do
    if answers; then
      echo "moto.sh: moto_server on http://127.0.0.1:$port (pid $(cat "$pidfile"))"
      return
    fi
    if ! running; then
      break
    fi
    sleep 0.1
  done
  echo "moto.sh: moto_server did not answer on 127.0.0.1:$port; log:" >&2
  tail -n 20 "$logfile" >&2 || true
  stop >/dev/null 2>&1 || true
  exit 1
}

stop() {
  stop_pidfile moto.sh moto_server 5
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
