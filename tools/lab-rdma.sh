#!/usr/bin/env bash
# The latency lab's RDMA run: one Soft-RoCE guest boot (rxe0 <-> rxe1) for
# - RTT at 32, 64, 288 and 1344 B: in each of --rounds rounds, perftest's ib_write_lat and
#   ib_send_lat (UD) first, then tickbus rdma-rc ping-pong (WRITE and WRITE_WITH_IMM) and ud-mcast
#   ping-pong; each round gives its own ratio and the report the median with its spread (TCG's
#   speed drifts 3-5x within a boot, so perftest measured once beside all of tickbus's runs is no
#   yardstick);
# - message rate at 64 and 1344 B, the same way: ib_write_bw and tickbus rdma-rc (reliable,
#   publish_batch), ib_send_bw (UD) and tickbus ud-mcast (publish_batch) (perftest first in odd
#   rounds, tickbus first in even ones, for the RTTs too); perftest runs twice each round, as it
#   runs by default (one WR per doorbell) and with --post_list 32 (chained as tickbus chains);
# - fan-out: a paced publisher to 1, 2 and 4 subscribers, rdma-rc (a QP each) and ud-mcast (one
#   group): the publisher's cost per message and each subscriber's latency;
# - the trading pipeline over RDMA (tickbus exchange on rxe0, tickbus trader on rxe1) in rounds,
#   each after perftest's one-way UD and RC figures measured again;
# - then, in a second boot of the rig's two guests, ud-mcast fan-out with the publisher in one
#   guest and 1, 2 and 4 subscribers in the other (fanout-hosts.json): in one guest the
#   subscribers' receive work runs in the publisher's kernel, here in another kernel, as behind a
#   switch.
# The report lands in lab-report/rdma/, where the main job (tools/lab.sh) picks it up. TCG
# emulation makes absolute figures ~20x slower than hardware: read the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${TICKBUS_LAB_BUILT:-0}" = 1 ] || tools/lab-build.sh
out=$(pwd)/lab-report/rdma
mkdir -p "$out"
iters=${TICKBUS_LAB_RDMA_ITERATIONS:-2000}
rounds=${TICKBUS_LAB_RDMA_ROUNDS:-3}
rm -f "$out/fanout-hosts.json"
tools/rig/rig run --hugepages 64 --timeout 2400 --share "$out" -- \
  target/release/latency-lab rdma --devices rxe0,rxe1 --sizes 32,64,288,1344 --iterations "$iters" \
    --rounds "$rounds" --out "$out"
# An extra figure: if this boot fails, say so and go on (the report then notes it missing).
tools/rig/rig run --guests 2 --hugepages 32 --timeout 900 --share "$out" -- \
  target/release/latency-lab rdma-fanout-hosts --rate 1000 --messages 2000 --rounds 3 --out "$out" \
  || echo "lab-rdma: the two-guest fan-out failed (exit $?); the report will say it is missing" >&2
