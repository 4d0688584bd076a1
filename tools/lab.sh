#!/usr/bin/env bash
# The latency lab's main job, with its own set-up: reserves hugepages, installs what the peers
# build with (cmake >= 3.30 from PyPI, libbsd-dev, uuid-dev), builds in release mode with the
# peers (Aeron IPC, iceoryx2) and RDMA, runs the RDMA figures in the Soft-RoCE guest (skip with
# TICKBUS_LAB_RDMA=0), then the default suite on cores 0 and 1 (extra arguments go to
# latency-lab, see --help), then a 10-minute soak (TICKBUS_LAB_SOAK_MINUTES). Do not run it while something else (a build, a test suite) is using
# the cores.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/lab-build.sh
if [ "${TICKBUS_LAB_RDMA:-1}" != 0 ]; then
  echo "== RDMA figures in the Soft-RoCE guest (tools/lab-rdma.sh; TICKBUS_LAB_RDMA=0 skips)"
  TICKBUS_LAB_RDMA_ITERATIONS=${TICKBUS_LAB_RDMA_ITERATIONS:-1000} TICKBUS_LAB_BUILT=1 tools/lab-rdma.sh
fi
# Embedded Aeron drivers delete their directory when they stop; a killed run leaves
# /dev/shm/aeron-<user><nanotime> behind. Those names are only ever made by an embedded driver.
find /dev/shm -maxdepth 1 -regextype posix-extended -regex "/dev/shm/aeron-$(id -un)[0-9]+" -exec rm -rf {} + 2>/dev/null || true
echo "== latency-lab default suite"
target/release/latency-lab "$@"
# The soak: a reliable shm stream at 1M msg/s to two consumer processes, every message checked,
# memory sampled, percentiles per minute (lab-report/soak/). TICKBUS_LAB_SOAK_MINUTES=0 skips it.
soak=${TICKBUS_LAB_SOAK_MINUTES:-10}
if [ "$soak" != 0 ]; then
  echo "== latency-lab soak: $soak minutes"
  target/release/latency-lab soak --minutes "$soak"
fi
