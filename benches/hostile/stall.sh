#!/bin/bash
# A fleet's latency and failures with and without the stall attack of issue 33 beside it
# (benches/hostile/stall.py: a READ_ONLY API key of another project keeping CONNS x
# STREAMS calls open mid-upload): two runs of `wisp simulate` against a fresh `wisp
# serve` each. Prints calls, failures and p99 per RPC for both; the JSON reports, the
# attacker's counts and the server's peak RSS are left in $OUT (default
# /tmp/wisp-stall-bench).
#   benches/hostile/stall.sh [PIPEDS] [DURATION] [CONNS] [STREAMS] [stall|reopen|hammer]
# (`reopen`: refused calls are reopened at once, a tight loop; `hammer`: complete calls,
# each replaced as soon as it is answered; see stall.py.)
# Extra `wisp serve` flags in $SERVE_ARGS (e.g. "--max-in-flight 64"); RUNS="stall" skips
# the quiet run (default "quiet stall"); ADDR the address to serve on.
set -eu
W=${WISP:-target/release/wisp}
PIPEDS=${1:-200}
DURATION=${2:-3m}
CONNS=${3:-11}
STREAMS=${4:-100}
MODE=${5:-stall}
OUT=${OUT:-/tmp/wisp-stall-bench}
ADDR=${ADDR:-127.0.0.1:18779}
mkdir -p "$OUT"
secs() { case $1 in *m) echo $((${1%m} * 60)) ;; *s) echo "${1%s}" ;; *) echo "$1" ;; esac; }
run() {
  local name=$1 attack=$2
  D=$(mktemp -d)
  # shellcheck disable=SC2086
  "$W" serve --data-dir "$D" --addr "$ADDR" --no-jobs ${SERVE_ARGS:-} > "$OUT/$name-serve.log" 2>&1 &
  S=$!
  sleep 2
  A=
  if [ "$attack" = yes ]; then
    "$W" project add other --data-dir "$D" > /dev/null
    KEY=$("$W" api-key add --project other --name stall --role READ_ONLY --data-dir "$D" --json |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
    # Longer than the run (the simulator registers its fleet first); stopped after it.
    python3 benches/hostile/stall.py "$ADDR" "API-KEY $KEY" "$CONNS" "$STREAMS" \
      $(($(secs "$DURATION") + 600)) "$MODE" > "$OUT/$name-attack.txt" 2>&1 &
    A=$!
  fi
  "$W" simulate --target "http://$ADDR" --pipeds "$PIPEDS" --apps-per-piped 5 \
    --duration "$DURATION" --data-dir "$D" --seed 7 --json > "$OUT/$name.json" 2> "$OUT/$name.err"
  if [ -n "$A" ]; then kill -TERM "$A" 2>/dev/null || true; wait "$A" 2>/dev/null || true; fi
  awk '/VmHWM/ {print $2}' /proc/$S/status > "$OUT/$name-rss.txt"
  kill $S; wait $S 2>/dev/null || true
  rm -rf "$D"
  python3 - "$name" "$OUT/$name.json" "$(cat "$OUT/$name-rss.txt")" <<'PY'
import json, sys
name, path, peak = sys.argv[1], sys.argv[2], int(sys.argv[3])
r = json.load(open(path))
print(f"{name}: {r['pipeds']} pipeds, {r['duration_secs']:.0f} s: {r['requests']} calls, "
      f"{r['errors']} failed {r['errors_by_status']}; server peak RSS {peak/1024:.0f} MiB")
for rpc, l in sorted(r["latency_ms"].items()):
    print(f"  {rpc:<45} p50 {l['p50']:>8} ms  p99 {l['p99']:>8} ms  max {l['max']:>8} ms")
PY
}
for r in ${RUNS:-quiet stall}; do
  case $r in quiet) run quiet no ;; stall) run stall yes ;; esac
done
echo "attacker: $(tail -1 "$OUT/stall-attack.txt")"
