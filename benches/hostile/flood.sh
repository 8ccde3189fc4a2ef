#!/bin/bash
# A fleet's latency at upstream cadence with and without a flood of made-up keys for its
# piped ids beside it: two runs of `wisp simulate` (a process of its own) against a fresh
# `wisp serve` each; results in $OUT/{noflood,flood}.json, peak RSS in $OUT/*-rss.txt.
#   benches/hostile/flood.sh [PIPEDS] [DURATION] [FLOOD_PER_SECOND]
set -u
W=${WISP:-target/release/wisp}
PIPEDS=${1:-200}
DURATION=${2:-3m}
FLOOD=${3:-100}
OUT=${OUT:-/tmp/wisp-flood-bench}
mkdir -p "$OUT"
run() {
  local name=$1; shift
  D=$(mktemp -d)
  $W serve --data-dir $D --addr 127.0.0.1:18777 --no-jobs > $OUT/$name-serve.log 2>&1 &
  S=$!
  sleep 2
  $W simulate --target http://127.0.0.1:18777 --pipeds "$PIPEDS" --apps-per-piped 5 --duration "$DURATION" --data-dir $D --seed 7 --json "$@" > $OUT/$name.json 2> $OUT/$name.err
  grep VmHWM /proc/$S/status > $OUT/$name-rss.txt
  kill $S; wait $S 2>/dev/null
  rm -rf $D
}
run noflood
run flood --flood-wrong-keys "$FLOOD"
