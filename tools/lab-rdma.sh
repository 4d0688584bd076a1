#!/usr/bin/env bash
# The latency lab's RDMA run: in one Soft-RoCE guest boot, perftest (ib_write_lat, ib_send_lat)
# first, then tickbus rdma-rc ping-pong (WRITE and WRITE_WITH_IMM, rxe0 <-> rxe1) for each size,
# each printed beside ib_write_lat's RTT for that size. Reports land in lab-report/rdma/.
# TCG emulation makes absolute figures ~20x slower than hardware: read the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup-host.sh
tools/rig/rig build >/dev/null
cargo build --release -p tickbus-lab --features rdma
out=$(pwd)/lab-report/rdma
mkdir -p "$out"
iters=${TICKBUS_LAB_RDMA_ITERATIONS:-2000}
script="set -e
for s in 32 64 288 1344; do
  target/release/latency-lab --rdma rxe0,rxe1 --size \$s --iterations $iters --warmup 200 \\
    --perftest $out/perftest.json --out $out/size-\$s
done"
exec tools/rig/rig run --hugepages 64 --timeout 1500 --share "$out" -- \
  tools/rig/guest-perftest.sh "$out" "$iters" -- bash -c "$script"
