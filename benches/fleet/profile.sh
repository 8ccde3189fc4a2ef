#!/bin/bash
# Flame graphs of the server (issue 34.1): `perf record` on it while it works, rendered
# as an SVG with the `inferno` crate's tools (`cargo install inferno`).
#   benches/fleet/profile.sh ramp [PIPEDS] [SECONDS]   # `wisp serve` during cold-start.sh's
#                                                      # ramp (default 10000 pipeds, the
#                                                      # first 90 s after they start)
#   benches/fleet/profile.sh poll [SECONDS]            # the poll bench's server threads
#                                                      # during its Wisp saturation phase
#                                                      # (`--mix list`, default 8 s)
# Leaves in $OUT (default /tmp/wisp-profile): MODE.svg (open it in a browser: each box is a
# function, its width the share of the server's CPU samples under it), MODE.folded (one
# line per stack with its samples, for grep), MODE.perf.data, and for `ramp` the fleet's
# own report (cold-start.sh's, in $OUT/fleet). Delete them when done: the perf data is
# tens of MB.
#
# The binaries need symbols: a release build with
#   CARGO_PROFILE_RELEASE_STRIP=false CARGO_PROFILE_RELEASE_DEBUG=line-tables-only
# (and, to build faster, CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16)
# `cargo build --release --bin wisp --bin poll-bench`; the image's build is stripped.
# Stacks are unwound from DWARF (Rust's release builds keep no frame pointers), so each
# sample copies STACK bytes of the stack: keep FREQ low for long recordings.
#
# Environment: WISP (default target/release/wisp), POLL_BENCH (default
# target/release/poll-bench), OUT, FREQ (samples per second per thread, default 99),
# STACK (bytes of stack per sample, default 16384), ADDR (the fleet's server address, as
# cold-start.sh takes it, default 127.0.0.1:18778), DURATION (the fleet's, default 3m).
# Needs: perf (Debian's linux-perf), inferno-collapse-perf and inferno-flamegraph on PATH.
set -eu
MODE=${1:-}
OUT=${OUT:-/tmp/wisp-profile}
FREQ=${FREQ:-99}
STACK=${STACK:-16384}
W=${WISP:-target/release/wisp}
B=${POLL_BENCH:-target/release/poll-bench}
for tool in perf inferno-collapse-perf inferno-flamegraph; do
  command -v "$tool" >/dev/null || { echo "profile.sh: $tool not found (perf: apt-get install linux-perf; inferno: cargo install inferno)" >&2; exit 1; }
done
mkdir -p "$OUT"
DATA="$OUT/$MODE.perf.data"

# Records $1 (a pid) for $2 seconds.
record() {
  perf record -F "$FREQ" --call-graph "dwarf,$STACK" -p "$1" -o "$DATA" -- sleep "$2" 2> "$OUT/$MODE.perf.log"
}

# Renders the recording (only the threads named $2 when given) as $OUT/$MODE.svg.
render() {
  local comms=() title=$1
  [ -n "${2:-}" ] && comms=(--comms "$2")
  perf script -i "$DATA" --no-inline "${comms[@]}" 2>/dev/null |
    inferno-collapse-perf > "$OUT/$MODE.folded"
  inferno-flamegraph --title "$title" --width 1600 < "$OUT/$MODE.folded" > "$OUT/$MODE.svg"
  echo "profile.sh: $(grep -o '([0-9]* samples)' "$OUT/$MODE.perf.log") recorded, $(wc -l < "$OUT/$MODE.folded") distinct stacks; $OUT/$MODE.svg"
}

case "$MODE" in
  ramp)
    PIPEDS=${2:-10000}
    SECS=${3:-90}
    ADDR=${ADDR:-127.0.0.1:18778}
    FLEET="$OUT/fleet"
    rm -f "$FLEET/simulate.err"
    WISP="$W" ADDR="$ADDR" OUT="$FLEET" benches/fleet/cold-start.sh "$PIPEDS" "${DURATION:-3m}" \
      > "$OUT/fleet.txt" 2>&1 &
    F=$!
    trap 'kill $F 2>/dev/null' EXIT
    # The server is up before the simulator; record from the pipeds' first calls on.
    until grep -qs "at most" "$FLEET/simulate.err"; do sleep 0.5; done
    S=$(pgrep -f -- "serve .*--addr $ADDR " | head -1)
    [ -n "$S" ] || { echo "profile.sh: no server on $ADDR" >&2; exit 1; }
    record "$S" "$SECS"
    wait $F || true
    trap - EXIT
    cat "$OUT/fleet.txt"
    render "wisp serve, $PIPEDS pipeds arriving within a minute: the first $SECS s"
    ;;
  poll)
    SECS=${2:-8}
    "$B" --mix list --cadence-secs 0 --saturation-secs $((SECS + 4)) --metrics --json \
      > "$OUT/poll-report.json" 2> "$OUT/poll-progress" &
    P=$!
    trap 'kill $P 2>/dev/null' EXIT
    until grep -qs "saturation: wisp" "$OUT/poll-progress"; do sleep 0.2; done
    sleep 1
    record "$P" "$SECS"
    wait $P || true
    trap - EXIT
    render "poll-bench --mix list --metrics: Wisp's server threads (ListUnhandledCommands)" server
    ;;
  *)
    sed -n '3,9p' "$0" | sed 's/^# *//' >&2
    exit 2
    ;;
esac
