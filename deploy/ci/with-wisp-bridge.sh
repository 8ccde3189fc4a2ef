#!/usr/bin/env bash
# Runs a CI job's command (pipectl ...) with `wisp bridge` in the background, for a Wisp
# deployed on AWS Lambda behind an ALB (which pipectl's native gRPC cannot reach alone).
#
#   WISP_UPSTREAM=https://pipecd.example.com deploy/ci/with-wisp-bridge.sh -- \
#     sh -c 'pipectl event register --address "$WISP_BRIDGE_ADDRESS" --insecure \
#       --api-key "$PIPECD_API_KEY" --name image-update --data "$IMAGE_TAG"'
#
# Starts `wisp bridge --listen 127.0.0.1:0 --upstream $WISP_UPSTREAM` (loopback, a free
# port), waits until it listens and its /readyz says the control plane answers, exports
# WISP_BRIDGE_ADDRESS=127.0.0.1:PORT (and WISP_BRIDGE_PID) to the command, runs it and
# exits with its status. The bridge is stopped (SIGTERM: calls in flight finish) when the
# command ends, fails, or the job is cancelled.
#
# Environment: WISP_UPSTREAM (required), WISP_BIN (default `wisp` on PATH; the image's
# /usr/local/bin/wisp, e.g. `umoci raw unpack`ed), WISP_BRIDGE_ARGS (more flags, e.g.
# `--ca-file ca.pem`), WISP_BRIDGE_READY_TIMEOUT (seconds, default 60).
set -euo pipefail

usage() {
  sed -n '5,7p' "$0" | sed 's/^# *//' >&2
  exit 2
}

[[ "${1:-}" == "--" ]] && shift
(($# > 0)) || usage
upstream=${WISP_UPSTREAM:?WISP_UPSTREAM must name the control plane (https://HOST)}
wisp=${WISP_BIN:-wisp}
ready_timeout=${WISP_BRIDGE_READY_TIMEOUT:-60}

work=$(mktemp -d)
bridge_pid=""
stop_bridge() {
  if [[ -n $bridge_pid ]] && kill -0 "$bridge_pid" 2>/dev/null; then
    kill -TERM "$bridge_pid" 2>/dev/null || true
    wait "$bridge_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap stop_bridge EXIT
# A cancelled job (SIGTERM, Ctrl-C) still runs the EXIT trap.
trap 'exit 143' TERM
trap 'exit 130' INT

# shellcheck disable=SC2086 # WISP_BRIDGE_ARGS is a list of flags
"$wisp" bridge --listen 127.0.0.1:0 --upstream "$upstream" ${WISP_BRIDGE_ARGS:-} \
  >"$work/out" 2>"$work/log" &
bridge_pid=$!

address=""
deadline=$((SECONDS + ready_timeout))
while [[ -z $address ]]; do
  address=$(sed -n 's/^wisp bridge listening on //p' "$work/out")
  if ! kill -0 "$bridge_pid" 2>/dev/null; then
    echo "with-wisp-bridge: wisp bridge stopped:" >&2
    cat "$work/log" >&2
    exit 1
  fi
  ((SECONDS < deadline)) || { echo "with-wisp-bridge: wisp bridge did not start" >&2; exit 1; }
  [[ -n $address ]] || sleep 0.1
done

# Ready: the control plane answers through the bridge (curl, where the job has it).
if command -v curl >/dev/null 2>&1; then
  until curl -fsS -o /dev/null --max-time 5 "http://$address/readyz"; do
    if ((SECONDS >= deadline)); then
      echo "with-wisp-bridge: the control plane at $upstream is not reachable:" >&2
      curl -sS --max-time 5 "http://$address/readyz" >&2 || true
      exit 1
    fi
    sleep 1
  done
fi

export WISP_BRIDGE_ADDRESS=$address WISP_BRIDGE_PID=$bridge_pid
status=0
"$@" || status=$?
exit "$status"
