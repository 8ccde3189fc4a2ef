#!/bin/bash
# The Fargate task's size from a fleet on this machine (issue 29): the container image's
# `wisp serve`, run as the Terraform module's task definition runs it (compute = "fargate":
# the image's entrypoint, the task's command and environment read from `terraform plan`
# by scripts/iam-policies, its user, its read-only root filesystem), on the AWS stores'
# stand-ins (DynamoDB Local for the table, moto for S3 and Secrets Manager), and `wisp
# simulate` against it at each fleet size.
#   benches/fleet/task.sh [PIPEDS ...]          (default 100 1000 3000)
# For each size it prints the server's CPU seconds per call served over the measured
# window (utime+stime from /proc/<pid>/stat when the window opens and when it closes ÷ the
# calls that succeeded in the window's 10 s buckets of the simulator's timeline) and its resident memory per connected
# piped ((VmRSS at the window's end − VmRSS before the fleet) ÷ pipeds); the load average;
# and leaves everything in $OUT (default /tmp/wisp-task-bench): the plan's task, the
# simulator's report per size, the server's log.
#
# Environment: WISP (the host's `wisp` for `aws init` and `simulate`, default
# target/release/wisp), WISP_IMAGE_BINARY (the binary in the image, default $WISP: give
# the static release build), DURATION (default 4m), RAMP (default 60s), WINDOW_AFTER
# (seconds from the fleet's start when the window opens, default 100), DDB_PORT and
# MOTO_PORT (the stand-ins it starts and stops, default 18150 and 15150), ADDR and ADMIN
# (where the task listens: WISP_ADDR and --admin-addr, default 127.0.0.1:18779 and
# 127.0.0.1:18780), REDIS_PORT (when set, a `redis-server` there is the task's cache, as
# ElastiCache is with `enable_redis = true`: stats in Redis, polls answered from memory).
# Needs: umoci, runc, terraform and its hashicorp/aws provider
# (scripts/iam-policies), run as root (runc).
#
# What differs from the task in AWS: WISP_ADDR (the plan's 0.0.0.0:8080, here $ADDR, a
# port of its own), --admin-addr (the plan leaves the default, 127.0.0.1:9085), the
# Secrets Manager endpoint and static keys (ECS gives the task role's), the secret ARNs
# (moto names them), no CPU or memory limit (the figures are what the task would need).
# Fargate's default open-file limit (65535, or this shell's hard limit if lower) replaces
# runc's (1024).
set -eu
cd "$(dirname "$0")/../.."
ROOT=$PWD
W=$(realpath "${WISP:-target/release/wisp}")
IMAGE_BINARY=$(realpath "${WISP_IMAGE_BINARY:-$W}")
SIZES=${*:-100 1000 3000}
DURATION=${DURATION:-4m}
RAMP=${RAMP:-60s}
WINDOW_AFTER=${WINDOW_AFTER:-100}
DDB_PORT=${DDB_PORT:-18150}
MOTO_PORT=${MOTO_PORT:-15150}
ADDR=${ADDR:-127.0.0.1:18779}
ADMIN=${ADMIN:-127.0.0.1:18780}
OUT=${OUT:-/tmp/wisp-task-bench}
TICK=$(getconf CLK_TCK)
rm -rf "$OUT"
mkdir -p "$OUT"

ID=wisp-task-bench-$$
stop_all() {
  runc --root "$OUT/runc" kill "$ID" KILL >/dev/null 2>&1 || true
  runc --root "$OUT/runc" delete --force "$ID" >/dev/null 2>&1 || true
  scripts/dynamodb-local.sh stop "$DDB_PORT" >/dev/null 2>&1 || true
  scripts/moto.sh stop "$MOTO_PORT" >/dev/null 2>&1 || true
  if [ -n "${REDIS_PORT:-}" ]; then scripts/redis.sh stop "$REDIS_PORT" >/dev/null 2>&1 || true; fi
  rm -rf "$OUT/bundle" "$OUT/oci"
}
trap stop_all EXIT

eval "$(scripts/dynamodb-local.sh start "$DDB_PORT")"
scripts/moto.sh start "$MOTO_PORT" >/dev/null
if [ -n "${REDIS_PORT:-}" ]; then scripts/redis.sh start "$REDIS_PORT" >/dev/null; fi
PY=$(scripts/moto.sh python)
export AWS_ACCESS_KEY_ID=wispTest AWS_SECRET_ACCESS_KEY=wispTest AWS_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true
export AWS_ENDPOINT_URL_SECRETS_MANAGER=http://127.0.0.1:$MOTO_PORT

# The image, unpacked as a runtime bundle (umoci), and the task definition as planned.
scripts/image build --binary "$IMAGE_BINARY" --out "$OUT/oci" --tag bench >"$OUT/image.log" 2>&1
umoci unpack --image "$OUT/oci:bench" "$OUT/bundle" >/dev/null
NAME=wispbench$$
scripts/iam-policies terraform-fargate "$NAME" wisp/ "$OUT/plan.json"

# The stores as the module names them; the config and key secrets under the plan's names.
"$PY" - "$OUT/plan.json" "$OUT" "$DDB_PORT" "$MOTO_PORT" "${REDIS_PORT:-}" <<'PY'
import json, sys
plan, out, ddb, moto, redis = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
cache = f"  cache:\n    type: REDIS\n    config:\n      address: redis://127.0.0.1:{redis}\n" if redis else "  cache:\n    ttl: 5m\n"
open(f"{out}/wisp.yaml", "w").write(f"""apiVersion: pipecd.dev/v1beta1
kind: ControlPlane
spec:
  datastore:
    type: DYNAMODB
    config:
      table: {plan['table']}
      region: us-east-1
      endpoint: http://127.0.0.1:{ddb}
  filestore:
    type: S3
    config:
      bucket: {plan['bucket']}
      prefix: {plan['prefix'].rstrip('/')}
      region: us-east-1
      endpoint: http://127.0.0.1:{moto}
{cache}""")
PY
"$W" aws init --config "$OUT/wisp.yaml" >/dev/null 2>&1
# The simulator's pipeds register in a project, as `wisp piped add` does.
"$W" project add quickstart --config "$OUT/wisp.yaml" >/dev/null 2>&1
"$PY" - "$OUT/plan.json" "$OUT/wisp.yaml" "$MOTO_PORT" <<'PY'
import json, secrets, sys, boto3
plan = json.load(open(sys.argv[1]))
sm = boto3.client("secretsmanager", endpoint_url=f"http://127.0.0.1:{sys.argv[3]}", region_name="us-east-1")
name = lambda arn: arn.split(":secret:")[1].rsplit("-", 1)[0]
sm.create_secret(Name=name(plan["secrets"]["config"]), SecretString=open(sys.argv[2]).read())
sm.create_secret(Name=name(plan["secrets"]["key"]), SecretString="key-" + secrets.token_hex(16))
PY

# runc's spec: the image's config (umoci) with the task definition's command, environment,
# user and read-only root filesystem; the host's network.
"$PY" - "$OUT" "$ADDR" "$ADMIN" "$MOTO_PORT" <<'PY'
import json, sys
out, addr, admin, moto = sys.argv[1:5]
plan = json.load(open(f"{out}/plan.json"))
task = plan["functions"]["task"]
spec = json.load(open(f"{out}/bundle/config.json"))
name = lambda arn: arn.split(":secret:")[1].rsplit("-", 1)[0]
env = dict(e.split("=", 1) for e in spec["process"]["env"])
env.update(task["env"])
env.update({
    "WISP_ADDR": addr,
    "WISP_CONFIG_SECRET": name(task["env"]["WISP_CONFIG_SECRET"]),
    "WISP_ENCRYPTION_KEY_SECRET": name(task["env"]["WISP_ENCRYPTION_KEY_SECRET"]),
    "AWS_ENDPOINT_URL_SECRETS_MANAGER": f"http://127.0.0.1:{moto}",
    "AWS_ACCESS_KEY_ID": "wispTest", "AWS_SECRET_ACCESS_KEY": "wispTest",
    "AWS_EC2_METADATA_DISABLED": "true",
})
container = task.get("container", {})
user = container.get("user", "65532:65532").split(":")
spec["process"]["env"] = [f"{k}={v}" for k, v in sorted(env.items())]
spec["process"]["args"] = spec["process"]["args"][:1] + task["command"] + ["--admin-addr", admin]
spec["process"]["user"] = {"uid": int(user[0]), "gid": int(user[1])}
spec["process"]["terminal"] = False
# The task definition sets no ulimits: Fargate's default open-file limit is 65535 (umoci's
# bundle has runc's 1024, which 1,000 connected pipeds exceed), or this shell's hard limit
# when lower.
import resource
nofile = min(65535, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
spec["process"]["rlimits"] = [{"type": "RLIMIT_NOFILE", "soft": nofile, "hard": nofile}]
spec["root"]["readonly"] = container.get("readonlyRootFilesystem", True)
spec["linux"]["namespaces"] = [n for n in spec["linux"]["namespaces"] if n["type"] != "network"]
json.dump(spec, open(f"{out}/bundle/config.json", "w"))
print("task:", " ".join(spec["process"]["args"]), file=sys.stderr)
PY

# How long the load balancer's health check waits on the task now (seconds).
healthz() { curl -s -o /dev/null --max-time 30 -w '%{time_total}' "http://$ADDR/healthz" || echo timeout; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

printf '%-7s %-10s %-12s %-14s %-14s %-8s %s\n' pipeds served/s "CPU/call" "RSS/piped" "RSS(idle→)" "not served" "load avg" | tee "$OUT/summary.txt"
for N in $SIZES; do
  runc --root "$OUT/runc" run --bundle "$OUT/bundle" "$ID" >"$OUT/serve-$N.out" 2>"$OUT/serve-$N.log" &
  until grep -q "wisp listening on" "$OUT/serve-$N.out" 2>/dev/null; do
    kill -0 $! 2>/dev/null || { cat "$OUT/serve-$N.log"; exit 1; }
    sleep 0.2
  done
  S=$(runc --root "$OUT/runc" state "$ID" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
  IDLE=$(rss "$S")
  "$W" simulate --target "http://$ADDR" --pipeds "$N" --apps-per-piped 10 --duration "$DURATION" \
    --ramp-up "$RAMP" --config "$OUT/wisp.yaml" --seed "$N" --json >"$OUT/report-$N.json" 2>"$OUT/simulate-$N.err" &
  SIM=$!
  # The fleet starts after the simulator has registered it (its first progress line is
  # 10 s in). The window opens after the ramp (every piped connected and polling) and
  # closes 20 s before the simulator's deadline, while the fleet is still connected.
  until grep -q "^wisp simulate: 10/" "$OUT/simulate-$N.err" 2>/dev/null; do
    kill -0 $SIM 2>/dev/null || { cat "$OUT/simulate-$N.err"; exit 1; }
    sleep 1
  done
  T0=$(($(date +%s) - 10))
  until_t() { local left=$(($1 - $(date +%s))); if ((left > 0)); then sleep "$left"; fi; }
  until_t $((T0 + WINDOW_AFTER))
  C1=$(ticks "$S") W1=$(date +%s.%N) H1=$(healthz)
  END=$(($(echo "$DURATION" | sed 's/m$/*60/; s/s$//') - 20))
  until_t $((T0 + END))
  C2=$(ticks "$S") W2=$(date +%s.%N) RSS=$(rss "$S") H2=$(healthz)
  LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "$N pipeds: fleet from $T0, window $W1 .. $W2, ticks $C1 → $C2, RSS $IDLE → $RSS KiB, /healthz $H1 s, $H2 s" >>"$OUT/windows.txt"
  wait $SIM || true
  "$PY" - "$OUT/report-$N.json" "$N" "$T0" "$C1" "$C2" "$W1" "$W2" "$TICK" "$IDLE" "$RSS" "$LOAD" "$H1 $H2" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
report = json.load(open(sys.argv[1]))
n, t0, c1, c2 = (int(x) for x in sys.argv[2:6])
w1, w2 = float(sys.argv[6]), float(sys.argv[7])
tick, idle, rss = (int(x) for x in sys.argv[8:11])
# The fleet's calls and failures per 10 s from its start (the simulator's timeline), over
# the window's whole buckets. Per call served: a call turned away (UNAVAILABLE past
# --max-in-flight) or timed out costs the server next to nothing and would flatter it.
first, last = round((w1 - t0) / 10), round((w2 - t0) / 10)
window = report["timeline_10s"][first:last]
calls = sum(c for c, _ in window)
served = calls - sum(f for _, f in window)
secs = (last - first) * 10
cpu = (c2 - c1) / tick
print(f"{n:<7} {served / secs:<10.0f} {cpu / served * 1e6:>6.0f} µs    {(rss - idle) / n:>6.1f} KiB    "
      f"{idle / 1024:.0f}→{rss / 1024:.0f} MiB   {calls - served:<8} {sys.argv[11]}   "
      f"({cpu:.1f} CPU-s for {served} calls served of {calls} in {secs} s: {cpu / (w2 - w1):.2f} cores; "
      f"/healthz {sys.argv[12]} s)")
PY
  runc --root "$OUT/runc" kill "$ID" TERM >/dev/null 2>&1 || true
  wait || true
  runc --root "$OUT/runc" delete --force "$ID" >/dev/null 2>&1 || true
done
