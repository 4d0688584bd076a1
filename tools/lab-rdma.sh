#!/usr/bin/env bash
# The latency lab's RDMA run: in one Soft-RoCE guest boot, perftest (ib_write_lat, ib_send_lat UD)
# first, then tickbus rdma-rc ping-pong (WRITE and WRITE_WITH_IMM) and ud-mcast ping-pong
# (rxe0 <-> rxe1) at 32, 64, 288 and 1344 B, each beside perftest's RTT for the same verb and size,
# then the trading pipeline over RDMA (tickbus exchange on rxe0, tickbus trader on rxe1) in rounds,
# each after perftest's one-way UD and RC figures measured again. The report lands in lab-report/rdma/,
# where the main job (tools/lab.sh) picks it up. TCG emulation makes absolute figures ~20x slower
# than hardware: read the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${TICKBUS_LAB_BUILT:-0}" = 1 ] || tools/lab-build.sh
out=$(pwd)/lab-report/rdma
mkdir -p "$out"
iters=${TICKBUS_LAB_RDMA_ITERATIONS:-2000}
exec tools/rig/rig run --hugepages 64 --timeout 1500 --share "$out" -- \
  tools/rig/guest-perftest.sh "$out" "$iters" -- \
  target/release/latency-lab rdma --devices rxe0,rxe1 --sizes 32,64,288,1344 --iterations "$iters" \
    --perftest "$out/perftest.json" --out "$out"
