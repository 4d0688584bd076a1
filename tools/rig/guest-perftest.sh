#!/bin/bash
# Runs inside the rig guest: perftest's ib_write_lat (RC, rxe0 -> rxe1) and ib_send_lat (UD) for
# the lab's message sizes, writes OUT/perftest.json and OUT/perftest.txt, then runs the
# optional benchmark command given after "--" in the same boot, so the project's RDMA figures
# and perftest's share one set of devices and one boot.
#   usage: guest-perftest.sh OUT [ITERATIONS] [-- BENCH_CMD...]
set -euo pipefail
out=$1; shift
iters=${1:-2000}; [ $# -gt 0 ] && [ "$1" != "--" ] && shift
[ "${1:-}" = "--" ] && shift
mkdir -p "$out"
: > "$out/perftest.txt"
entries=()
run_pair() { # name server-args... -- client-args...
  local name=$1 size=$2; shift 2
  "$@" -d rxe0 -s "$size" -n "$iters" -F > /dev/null 2>&1 &
  local srv=$!
  sleep 1
  local line
  line=$("$@" -d rxe1 -s "$size" -n "$iters" -F 169.254.77.1 2>&1 | tee -a "$out/perftest.txt" \
    | awk '$1 ~ /^[0-9]+$/ && NF >= 9 {print; exit}')
  wait "$srv" || true
  [ -n "$line" ] || { echo "guest-perftest: $name $size gave no result" >&2; return 1; }
  # columns: bytes iters t_min t_max t_typical t_avg t_stdev p99 p99.9 (one-way latency, usec)
  read -r b _ tmin tmax typical avg _ p99 p999 <<< "$line"
  entries+=("{\"tool\": \"$name\", \"bytes\": $b, \"iterations\": $iters, \"min_us\": $tmin, \"typical_us\": $typical, \"avg_us\": $avg, \"p99_us\": $p99, \"p99_9_us\": $p999, \"max_us\": $tmax}")
  echo "guest-perftest: $name ${b} B: typical ${typical} us, p99 ${p99} us (one way)"
}
for s in 32 64 288 1344; do
  run_pair ib_write_lat "$s" ib_write_lat
  run_pair ib_send_lat_ud "$s" ib_send_lat -c UD
done
{ echo "{\"devices\": [\"rxe0\", \"rxe1\"], \"unit\": \"us, one-way (perftest halves the RTT)\", \"results\": ["
  (IFS=,; echo "${entries[*]}" | sed 's/},{/},\n{/g')
  echo "]}"; } > "$out/perftest.json"
if [ $# -gt 0 ]; then exec "$@"; fi
