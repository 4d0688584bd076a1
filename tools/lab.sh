#!/usr/bin/env bash
# The latency lab's main job, with its own set-up: reserves hugepages, installs what the peers
# build with (cmake >= 3.30 from PyPI, libbsd-dev, uuid-dev) and clang, builds in release mode
# with the peers (Aeron IPC, iceoryx2), RDMA and AF_XDP, then:
#
#   tools/lab.sh [ARGS]         the default suite on cores 0 and 1 (4-8 minutes on a warm
#                               machine): tick-to-trade, the trading pipeline across processes,
#                               ping-pong beside the floors and peers, open loop, throughput,
#                               fan-out, ITCH, the book at TotalView scale, the journal, the wire;
#                               the report opens with its verdict panel. RDMA figures from an
#                               earlier --full run are not merged in (they would be another
#                               run's).
#   tools/lab.sh --full [ARGS]  first the RDMA figures in the Soft-RoCE guest (TICKBUS_LAB_RDMA=0
#                               skips them; tools/lab-rdma.sh), then the default suite with them
#                               merged in, then a 10-minute soak (TICKBUS_LAB_SOAK_MINUTES).
#
# ARGS go to latency-lab (see target/release/latency-lab --help). Do not run it while something
# else (a build, a test suite) is using the cores.
set -euo pipefail
cd "$(dirname "$0")/.."
full=0
if [ "${1:-}" = --full ]; then
  full=1
  shift
fi
tools/lab-build.sh
# Embedded Aeron drivers delete their directory when they stop; a killed run leaves
# /dev/shm/aeron-<user><nanotime> behind. Those names are only ever made by an embedded driver.
find /dev/shm -maxdepth 1 -regextype posix-extended -regex "/dev/shm/aeron-$(id -un)[0-9]+" -exec rm -rf {} + 2>/dev/null || true
# Another run's RDMA figures are never merged in: only this run's (--full) or none, unless
# the caller names a report with --rdma-report.
rdma=(--rdma-report none)
for a in "$@"; do
  case $a in --rdma-report | --rdma-report=*) rdma=() ;; esac
done
if [ $full = 0 ]; then
  echo "== latency-lab default suite (tools/lab.sh --full adds the RDMA guest's figures and a 10-minute soak)"
  target/release/latency-lab "${rdma[@]}" "$@"
  exit 0
fi
if [ "${TICKBUS_LAB_RDMA:-1}" != 0 ]; then
  echo "== RDMA figures in the Soft-RoCE guest (tools/lab-rdma.sh; TICKBUS_LAB_RDMA=0 skips)"
  TICKBUS_LAB_RDMA_ITERATIONS=${TICKBUS_LAB_RDMA_ITERATIONS:-1000} TICKBUS_LAB_BUILT=1 tools/lab-rdma.sh
  rdma=()
fi
echo "== latency-lab default suite"
target/release/latency-lab "${rdma[@]}" "$@"
# The soak: a reliable shm stream at 1M msg/s to two consumer processes, every message checked,
# memory sampled, percentiles per minute (lab-report/soak/). TICKBUS_LAB_SOAK_MINUTES=0 skips it.
soak=${TICKBUS_LAB_SOAK_MINUTES:-10}
if [ "$soak" != 0 ]; then
  echo "== latency-lab soak: $soak minutes"
  target/release/latency-lab soak --minutes "$soak"
fi
