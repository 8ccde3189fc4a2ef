#!/bin/bash
# A fleet arriving at a cold `wisp serve` within a minute (issue 20): the server and the
# simulator as two processes on this machine, as an operator would run them.
#   benches/fleet/cold-start.sh [PIPEDS] [DURATION]      (default 3000 pipeds, 6m)
# Prints the success rate after the first 2 minutes, the failures after the 5th, when
# the last failure happened, p50/p99 per RPC (over the run and after the first 2 minutes)
# and the server's peak RSS; the whole report is
# left in $OUT/report.json (default /tmp/wisp-cold-start).
set -eu
W=${WISP:-target/release/wisp}
PIPEDS=${1:-3000}
DURATION=${2:-6m}
OUT=${OUT:-/tmp/wisp-cold-start}
ADDR=${ADDR:-127.0.0.1:18778}
mkdir -p "$OUT"
D=$(mktemp -d)
# The stores both processes open: the embedded ones in a fresh directory by default, or
# e.g. STORES="--config wisp.yaml" (DynamoDB, Redis); SERVE_ARGS adds flags to the server.
STORES=${STORES:---data-dir $D}
SERVE_ARGS=${SERVE_ARGS:-}
trap 'kill $S $M 2>/dev/null; rm -rf "$D"' EXIT
# Register the fleet first (on the stores, as `wisp piped add` does), then start the
# server cold: the simulator registers before its first call, so a server started
# earlier would have warmed nothing anyway.
"$W" serve $STORES --addr "$ADDR" --no-jobs $SERVE_ARGS > "$OUT/serve.log" 2>&1 &
S=$!
sleep 2
# The server's RSS, CPU time and threads every 5 s (seconds since start, VmRSS KiB,
# utime+stime clock ticks, threads, open file descriptors ≈ connections), to tell memory
# held per connection from memory of calls queued in the ramp.
(T0=$(date +%s); while [ -r /proc/$S/status ]; do
  echo "$(( $(date +%s) - T0 )) $(awk '/VmRSS/ {print $2}' /proc/$S/status) $(awk '{print $14 + $15}' /proc/$S/stat) $(awk '/Threads/ {print $2}' /proc/$S/status) $(ls /proc/$S/fd | wc -l)"
  sleep 5; done) > "$OUT/rss.txt" 2>/dev/null &
M=$!
"$W" simulate --target "http://$ADDR" --pipeds "$PIPEDS" --apps-per-piped 10 \
  --duration "$DURATION" --ramp-up 60s $STORES --seed 7 --json \
  > "$OUT/report.json" 2> "$OUT/simulate.err"
PEAK=$(awk '/VmHWM/ {print $2}' /proc/$S/status)
FINAL=$(awk '/VmRSS/ {print $2}' /proc/$S/status)
python3 - "$OUT/report.json" "$PEAK" "$FINAL" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["settling"]
print(f"{r['pipeds']} pipeds, {r['duration_secs']:.0f} s: {r['requests']} calls, {r['errors']} failed {r['errors_by_status']}")
print(f"after 2 min: {s['success_after_2m']*100:.3f}% succeeded; after 5 min: {s['failed_after_5m']} failed; "
      f"last failure in the 10 s ending at {s['settled_after_secs']} s; server peak RSS {int(sys.argv[2])/1024:.0f} MiB, "
      f"{int(sys.argv[3])/1024:.0f} MiB at the end")
settled = r.get("latency_after_2m_ms", {})
for rpc, l in sorted(r["latency_ms"].items()):
    a = settled.get(rpc)
    after = f"  | after 2 min: p50 {a['p50']:>8} ms  p99 {a['p99']:>8} ms" if a else ""
    print(f"  {rpc:<45} p50 {l['p50']:>8} ms  p99 {l['p99']:>8} ms  max {l['max']:>8} ms{after}")
PY
