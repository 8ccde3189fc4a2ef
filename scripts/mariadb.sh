#!/usr/bin/env bash
# Starts or stops a throwaway MariaDB on loopback for the `wisp import pipecd` tests: a
# stand-in for an upstream control plane's MySQL datastore.
#
#   scripts/mariadb.sh start [PORT]   # default 3306; installs Debian's mariadb-server if missing
#   scripts/mariadb.sh stop  [PORT]
#
# Then: export WISP_TEST_MYSQL_URL=mysql://pipecd:pipecd@127.0.0.1:PORT/pipecd
# (user `pipecd`, password `pipecd`, an empty database `pipecd`; the user may create
# more, one per test). State lives under
# .cache/mariadb-PORT/ and is recreated on each start.
set -euo pipefail

cmd=${1:-}
port=${2:-3306}
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.cache/mariadb-$port"
pidfile="$dir/mariadb.pid"
socket="$dir/mariadb.sock"

usage() {
  echo "usage: $0 start|stop [PORT]" >&2
  exit 2
}

[[ "$port" =~ ^[0-9]+$ ]] || usage

install_mariadb() {
  if command -v mariadbd >/dev/null 2>&1 || [[ -x /usr/sbin/mariadbd ]]; then
    return
  fi
  echo "mariadb.sh: installing mariadb-server (Debian package)" >&2
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-cache show mariadb-server >/dev/null 2>&1; then
    $sudo apt-get update -qq
  fi
  if ! $sudo apt-get install -y -qq --no-install-recommends mariadb-server >/dev/null; then
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends mariadb-server >/dev/null
  fi
  # The package may start a system-wide server on 3306; we run our own.
  if command -v service >/dev/null 2>&1; then
    $sudo service mariadb stop >/dev/null 2>&1 || true
  fi
}

# running, stop_pidfile
source "$root/scripts/lib/pidfile.sh"

start() {
  install_mariadb
  if running; then
    echo "mariadb.sh: already running on 127.0.0.1:$port (pid $(cat "$pidfile"))"
    return
  fi
  rm -rf "$dir"
  mkdir -p "$dir/data"
  local user
  user=$(id -un)
  mariadb-install-db --no-defaults --datadir="$dir/data" --user="$user" \
    --auth-root-authentication-method=socket --skip-test-db >"$dir/install.log" 2>&1 || {
    echo "mariadb.sh: mariadb-install-db failed; log:" >&2
    tail -n 20 "$dir/install.log" >&2
    exit 1
  }
  # No fsync per commit and a small buffer pool: a test database, thrown away.
  /usr/sbin/mariadbd --no-defaults --datadir="$dir/data" --user="$user" \
    --bind-address=127.0.0.1 --port="$port" --socket="$socket" --pid-file="$pidfile" \
    --log-error="$dir/mariadb.log" --innodb-flush-log-at-trx-commit=0 \
    --innodb-buffer-pool-size=128M --skip-name-resolve >/dev/null 2>&1 &
  for _ in $(seq 1 150); do
    if mariadb --no-defaults --socket="$socket" -u root -e "SELECT 1" >/dev/null 2>&1; then
      mariadb --no-defaults --socket="$socket" -u root -e "
        CREATE DATABASE pipecd;
        CREATE USER 'pipecd'@'127.0.0.1' IDENTIFIED BY 'pipecd';
        GRANT ALL ON *.* TO 'pipecd'@'127.0.0.1';"
      echo "mariadb.sh: mariadbd on 127.0.0.1:$port (pid $(cat "$pidfile" 2>/dev/null || echo '?'))"
      return
    fi
    sleep 0.2
  done
  echo "mariadb.sh: mariadbd did not answer on 127.0.0.1:$port; log:" >&2
  tail -n 20 "$dir/mariadb.log" >&2 || true
  exit 1
}

stop() {
  stop_pidfile mariadb.sh mariadbd 10
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
