#!/bin/bash
# A fleet arriving at a cold `wisp serve` within a minute (issue 20): the server and the
# simulator as two processes on this machine, as an operator would run them.
#   benches/fleet/cold-start.sh [PIPEDS] [DURATION]      (default 3000 pipeds, 6m)
# Prints the success rate after the first 2 minutes, the failures after the 5th, when
# the last failure happened, p50/p99 per RPC (over the run and after the first 2 minutes)
# as the simulator saw them and as the server measured them (its /metrics histogram, so
# that a simulator starved of CPU is told from a slow server), the CPU each process used
# and the server's peak RSS; the whole report is
# left in $OUT/report.json (default /tmp/wisp-cold-start).
set -eu
W=${WISP:-target/release/wisp}
PIPEDS=${1:-3000}
DURATION=${2:-6m}
OUT=${OUT:-/tmp/wisp-cold-start}
ADDR=${ADDR:-127.0.0.1:18778}
# The server's /metrics (its own latency histogram per method).
ADMIN=${ADMIN:-127.0.0.1:$(( ${ADDR##*:} + 1 ))}
mkdir -p "$OUT"
D=$(mktemp -d)
# The stores both processes open: the embedded ones in a fresh directory by default, or
# e.g. STORES="--config wisp.yaml" (DynamoDB, Redis); SERVE_ARGS adds flags to the server.
STORES=${STORES:---data-dir $D}
SERVE_ARGS=${SERVE_ARGS:-}
trap 'kill $S $M $C 2>/dev/null; rm -rf "$D"' EXIT
# Register the fleet first (on the stores, as `wisp piped add` does), then start the
# server cold: the simulator registers before its first call, so a server started
# earlier would have warmed nothing anyway.
"$W" serve $STORES --addr "$ADDR" --admin-addr "$ADMIN" --no-jobs $SERVE_ARGS > "$OUT/serve.log" 2>&1 &
S=$!
sleep 2
# The server's RSS, CPU time and threads every 5 s (seconds since start, VmRSS KiB,
# utime+stime clock ticks, threads, open file descriptors ≈ connections, then the
# simulator's CPU ticks and the 1-minute load average), to tell memory held per
# connection from memory of calls queued in the ramp, and a server short of CPU from a
# simulator short of it (the machine may be shared).
(T0=$(date +%s); echo $T0 > "$OUT/t0"; while [ -r /proc/$S/status ]; do
  P=$(pgrep -f "simulate --target http://$ADDR " | head -1)
  echo "$(( $(date +%s) - T0 )) $(awk '/VmRSS/ {print $2}' /proc/$S/status) $(awk '{print $14 + $15}' /proc/$S/stat) $(awk '/Threads/ {print $2}' /proc/$S/status) $(ls /proc/$S/fd | wc -l) $( [ -n "$P" ] && awk '{print $14 + $15}' /proc/$P/stat 2>/dev/null || echo 0) $(cut -d' ' -f1 /proc/loadavg)"
  sleep 5; done) > "$OUT/rss.txt" 2>/dev/null &
M=$!
# The server's latency histograms 2 minutes after the simulated pipeds start (once they
# are registered), to subtract from the final ones.
rm -f "$OUT/simulate.err" "$OUT/metrics-2m.txt" "$OUT/run-start"
(until grep -qs "at most" "$OUT/simulate.err"; do sleep 1; done; date +%s > "$OUT/run-start"
 sleep 120; curl -s "http://$ADMIN/metrics" > "$OUT/metrics-2m.txt") &
C=$!
"$W" simulate --target "http://$ADDR" --pipeds "$PIPEDS" --apps-per-piped 10 \
  --duration "$DURATION" --ramp-up 60s $STORES --seed 7 --json \
  > "$OUT/report.json" 2> "$OUT/simulate.err"
curl -s "http://$ADMIN/metrics" > "$OUT/metrics-end.txt"
PEAK=$(awk '/VmHWM/ {print $2}' /proc/$S/status)
FINAL=$(awk '/VmRSS/ {print $2}' /proc/$S/status)
python3 - "$OUT/report.json" "$PEAK" "$FINAL" "$OUT" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
s = r["settling"]
out = sys.argv[4]
def histograms(path):
    """{method: {le: count}} of the server's gRPC duration histogram."""
    h = {}
    try:
        text = open(path).read()
    except OSError:
        return h
    for m in re.finditer(r'^wisp_grpc_request_duration_seconds_bucket\{([^}]*)\} (\S+)$', text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if labels.get("service") != "PipedService":
            continue
        le = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
        per = h.setdefault(labels["method"], {})
        per[le] = per.get(le, 0) + float(m.group(2))
    return h
def quantile(buckets, q):
    """The upper bound (ms) of the bucket holding quantile q."""
    total = buckets.get(float("inf"), 0)
    if total <= 0:
        return None
    for le in sorted(buckets):
        if buckets[le] >= q * total:
            return le * 1000
    return None
end, at2 = histograms(f"{out}/metrics-end.txt"), histograms(f"{out}/metrics-2m.txt")
server = {}
for method, b in end.items():
    a = at2.get(method, {})
    d = {le: n - a.get(le, 0) for le, n in b.items()}
    server[method] = (quantile(d, 0.5), quantile(d, 0.99))
cpu = [l.split() for l in open(f"{out}/rss.txt") if len(l.split()) >= 7]
if len(cpu) >= 2:
    secs = int(cpu[-1][0]) - int(cpu[0][0])
    try:
        settled = int(open(f"{out}/run-start").read()) + 120 - int(open(f"{out}/t0").read())
    except (OSError, ValueError):
        settled = 120
    late = [c for c in cpu if int(c[0]) >= settled] or cpu
    lsecs = max(1, int(cpu[-1][0]) - int(late[0][0]))
    # The simulator's ticks: the last sample before it ended (0 once it is gone).
    sim_end = max(int(c[5]) for c in cpu)
    print(f"CPU (cores, 100 ticks/s): server {(int(cpu[-1][2]) - int(cpu[0][2])) / 100 / max(1, secs):.2f}, simulator "
          f"{(sim_end - int(cpu[0][5])) / 100 / max(1, secs):.2f} over the run; after 2 min server "
          f"{(int(cpu[-1][2]) - int(late[0][2])) / 100 / lsecs:.2f}, simulator {(sim_end - int(late[0][5])) / 100 / lsecs:.2f}; "
          f"load average {cpu[0][6]} at the start, max {max(float(c[6]) for c in cpu)}, {cpu[-1][6]} at the end")
lag = r.get("simulator_lag_ms")
if lag:
    print(f"simulator's own lag (its runtime waking late): p50 {lag['p50']} ms, p99 {lag['p99']} ms, max {lag['max']} ms; "
          f"after 2 min p99 {lag['after_2m']['p99']} ms (latencies of that order are the simulator's, not the server's)")
print(f"{r['pipeds']} pipeds, {r['duration_secs']:.0f} s: {r['requests']} calls, {r['errors']} failed {r['errors_by_status']}; "
      f"{r.get('retried_unavailable', 0)} attempts shed with UNAVAILABLE and retried within the minute")
print(f"after 2 min: {s['success_after_2m']*100:.3f}% succeeded; after 5 min: {s['failed_after_5m']} failed; "
      f"last failure in the 10 s ending at {s['settled_after_secs']} s; server peak RSS {int(sys.argv[2])/1024:.0f} MiB, "
      f"{int(sys.argv[3])/1024:.0f} MiB at the end")
settled = r.get("latency_after_2m_ms", {})
for rpc, l in sorted(r["latency_ms"].items()):
    a = settled.get(rpc)
    after = f"  | after 2 min: p50 {a['p50']:>8} ms  p99 {a['p99']:>8} ms" if a else ""
    sv = server.get(rpc)
    srv = f"  | server after 2 min: p50 ≤ {sv[0]:g} ms  p99 ≤ {sv[1]:g} ms" if sv and sv[1] is not None else ""
    print(f"  {rpc:<45} p50 {l['p50']:>8} ms  p99 {l['p99']:>8} ms  max {l['max']:>8} ms{after}{srv}")
PY
