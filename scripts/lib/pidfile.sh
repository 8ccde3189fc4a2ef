# Shared by the stand-in scripts (moto.sh, redis.sh, mariadb.sh), which set `pidfile` and
# `port` before sourcing this.

# Whether the process in $pidfile is alive.
running() {
  [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

# stop_pidfile SCRIPT PROCESS SECONDS: TERM the process in $pidfile, KILL it after
# SECONDS, and remove the pidfile.
stop_pidfile() {
  local script=$1 process=$2 seconds=$3 pid
  if ! running; then
    rm -f "$pidfile"
    echo "$script: not running on port $port"
    return
  fi
  pid=$(cat "$pidfile")
  kill "$pid"
  for _ in $(seq 1 $((seconds * 10))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
  rm -f "$pidfile"
  echo "$script: stopped $process on port $port"
}
