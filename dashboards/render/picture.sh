#!/usr/bin/env bash
# Makes docs/images/wisp-serve-dashboard.png: a real `wisp serve` under `wisp simulate`,
# scraped by a real Prometheus, and dashboards/wisp-serve.json's own panels and queries
# drawn from it by render.mjs (uPlot in Debian's Chromium; Grafana is not needed).
#
#   dashboards/render/picture.sh            # about 10 minutes
#
# Needs node/npm, /usr/bin/chromium and /usr/bin/prometheus (Debian: apt-get install -y
# chromium prometheus nodejs npm; pngquant, if present, shrinks the PNG). WISP=path picks
# the wisp binary (default target/release/wisp, built if missing). Everything runs on
# loopback ports in a temporary directory that is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
render=$root/dashboards/render
out=$root/docs/images/wisp-serve-dashboard.png
pipeds=${PIPEDS:-50}
minutes=${MINUTES:-8}

wisp=${WISP:-$root/target/release/wisp}
if [[ -z ${WISP:-} && ! -x $wisp ]]; then cargo build --release --bin wisp; fi
[[ -d $render/node_modules/uplot && -d $render/node_modules/playwright-core ]] ||
  (cd "$render" && npm install --no-audit --no-fund --no-package-lock)

tmp=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# Free loopback ports, chosen by the kernel.
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
addr=127.0.0.1:$(port) admin=127.0.0.1:$(port) prom=127.0.0.1:$(port)

# Jobs on (no --no-jobs), so that the jobs' panels have data.
"$wisp" serve --data-dir "$tmp/data" --addr "$addr" --admin-addr "$admin" \
  --log warn >"$tmp/serve.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do curl -fs "http://$admin/metrics" >/dev/null && break; sleep 0.2; done
curl -fs "http://$admin/metrics" >/dev/null || { cat "$tmp/serve.log"; exit 1; }

cat >"$tmp/prometheus.yml" <<EOF
global: { scrape_interval: 5s, evaluation_interval: 5s }
scrape_configs:
  - job_name: wisp
    static_configs: [{ targets: ["$admin"] }]
EOF
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/prom" \
  --web.listen-address="$prom" >"$tmp/prometheus.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do curl -fs "http://$prom/-/ready" >/dev/null && break; sleep 0.2; done
curl -fs "http://$prom/-/ready" >/dev/null || { cat "$tmp/prometheus.log"; exit 1; }

# Ninety seconds of idle server first, so the picture shows the fleet arriving.
sleep 90
echo "simulating $pipeds pipeds for ${minutes}m against $addr" >&2
"$wisp" simulate --target "http://$addr" --data-dir "$tmp/data" --pipeds "$pipeds" \
  --apps-per-piped 5 --duration "${minutes}m" --log warn >"$tmp/simulate.txt" 2>&1 &
sim=$!
# Halfway through, a minute of ReportStat calls with made-up keys (one piped of its own),
# so the failed-calls and credential-check panels show what such a flood looks like.
sleep $((minutes * 30))
"$wisp" simulate --target "http://$addr" --data-dir "$tmp/data" --pipeds 1 \
  --apps-per-piped 1 --duration 1m --flood-wrong-keys 20 --log warn >"$tmp/flood.txt" 2>&1 ||
  { cat "$tmp/flood.txt"; exit 1; }
wait "$sim" || { cat "$tmp/simulate.txt"; exit 1; }
sleep 10 # the last scrape

mkdir -p "$(dirname "$out")"
node "$render/render.mjs" "http://$prom" "$root/dashboards/wisp-serve.json" "$out" 10
if command -v pngquant >/dev/null; then pngquant --force --skip-if-larger --output "$out" -- "$out" || true; fi
echo "$out: $(stat -c %s "$out") bytes" >&2
