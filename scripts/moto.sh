#!/usr/bin/env bash
# Starts or stops moto_server (PyPI `moto[server]`) on loopback: the stand-in for S3 and
# Secrets Manager in the AWS backend tests.
#
#   scripts/moto.sh start [PORT]   # default 5000; installs moto[server] if missing
#   scripts/moto.sh start-iam PORT # the same, enforcing IAM (below)
#   scripts/moto.sh stop  [PORT]
#   scripts/moto.sh python         # a Python with boto3 (moto's own), for scripts/lib
#
# Then: export WISP_TEST_MOTO_ENDPOINT=http://127.0.0.1:PORT
#
# start-iam: a moto_server that checks every request's signature and IAM policy, as AWS
# does (moto's INITIAL_NO_AUTH_ACTION_COUNT, switched on through /moto-api/reset-auth once
# the operator exists): user `wisp-operator`, allowed everything, is created first and its
# access key written to .cache/moto-PORT-operator.json. The IAM-enforced tests
# (tests/e2e/iam_enforced.rs) read it from WISP_TEST_MOTO_IAM_OPERATOR and give each
# function a user of its own.
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
  echo "usage: $0 start|start-iam|stop [PORT] | python" >&2
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

# A Python beside the moto_server in use (it has boto3, a dependency of moto).
moto_python() {
  local bin
  bin=$(moto_bin) || return 1
  if [[ -x "$(dirname "$bin")/python" && "$bin" == "$venv/bin/moto_server" ]]; then
    echo "$(dirname "$bin")/python"
  else
    command -v python3
  fi
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
  # moto_server with S3's conditional writes made atomic (scripts/lib/moto_atomic.py);
  # for start-iam also its IAM check fixed for escaped queries and presigned URLs
  # (scripts/lib/moto_iam_server.py, tests/README.md "moto under IAM").
  local cmd=("$(moto_python)" "$root/scripts/lib/moto_atomic.py")
  if [[ ${1:-} == iam ]]; then
    cmd=("$(moto_python)" "$root/scripts/lib/moto_iam_server.py")
  fi
  nohup "${cmd[@]}" -H 127.0.0.1 -p "$port" >"$logfile" 2>&1 </dev/null &
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
  rm -f "$cache/moto-$port-operator.json"
}

start_iam() {
  if running; then
    echo "moto.sh: already running on 127.0.0.1:$port (pid $(cat "$pidfile"))"
    return
  fi
  start iam
  local python
  python=$(moto_python)
  if ! "$python" "$root/scripts/lib/moto_iam.py" operator "http://127.0.0.1:$port" \
    "$cache/moto-$port-operator.json"; then
    stop >/dev/null 2>&1 || true
    echo "moto.sh: could not switch IAM enforcement on" >&2
    exit 1
  fi
  echo "moto.sh: IAM enforced; operator key in $cache/moto-$port-operator.json"
}

case "$cmd" in
  start) start ;;
  start-iam) start_iam ;;
  stop) stop ;;
  python) moto_python ;;
  *) usage ;;
esac
