#!/usr/bin/env bash
# `wisp import pipecd` at scale: an upstream-shaped MariaDB with DEPLOYMENTS deployments
# (plus 10 pipeds and 100 applications) and a filestore directory with one stage log of
# BLOCKS blocks per deployment, imported into fresh embedded stores. Prints the seeding
# time, then the import's time and peak memory (GNU time), then a re-run's (nothing to
# write).
#   cargo build --release && benches/import/run.sh [DEPLOYMENTS] [BLOCKS]   # 100000 10
set -euo pipefail
cd "$(dirname "$0")/../.."
W=${WISP:-target/release/wisp}
DEPLOYMENTS=${1:-100000}
BLOCKS=${2:-10}
PORT=${WISP_BENCH_MARIADB_PORT:-13307}
OUT=$(mktemp -d)
trap 'scripts/mariadb.sh stop "$PORT" >/dev/null; rm -rf "$OUT"' EXIT

scripts/mariadb.sh start "$PORT" >/dev/null
start=$SECONDS
python3 benches/import/seed.py "$DEPLOYMENTS" "$BLOCKS" "$OUT/bucket" > "$OUT/seed.sql"
mariadb --no-defaults -h 127.0.0.1 -P "$PORT" -u pipecd -ppipecd pipecd < "$OUT/seed.sql"
echo "seeded $DEPLOYMENTS deployments and $((DEPLOYMENTS * BLOCKS)) stage-log blocks in $((SECONDS - start)) s"
cat > "$OUT/upstream.yaml" <<YAML
apiVersion: "pipecd.dev/v1beta1"
kind: ControlPlane
spec:
  datastore:
    type: MYSQL
    config:
      url: pipecd:pipecd@tcp(127.0.0.1:$PORT)
      database: pipecd
  filestore:
    type: LOCAL
    config:
      dir: $OUT/bucket
YAML
for run in import re-run; do
  /usr/bin/time -f "$run: %e s wall, %U s user, %S s sys, peak RSS %M KiB" \
    "$W" import pipecd --from "$OUT/upstream.yaml" --data-dir "$OUT/wisp" > "$OUT/$run.txt"
  tail -n 1 "$OUT/$run.txt"
done
