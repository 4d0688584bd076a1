#!/usr/bin/env bash
# The latency lab's set-up and build, shared by tools/lab.sh and tools/lab-rdma.sh: hugepages,
# the peers' build tools (cmake >= 3.30 from PyPI, libbsd-dev, uuid-dev), the Soft-RoCE rig's host
# packages and guest image (and clang, which builds the XDP program), then a release build of latency-lab
# with the peers, RDMA and AF_XDP (the wire part), and of
# the `tickbus` apps the lab's trading pipeline runs.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup-host.sh
tools/setup-peers.sh
export PATH="$PWD/target/tools/venv/bin:$PATH"
tools/rig/rig build >/dev/null
cargo build --release -p tickbus-lab --features peers,rdma,xdp
# The trading pipeline's apps (tickbus exchange, trader, gateway), which the lab runs as processes
# (on shm, and over RDMA in the guest).
cargo build --release -p tickbus-apps --features rdma,xdp
# The Python package into the venv, for the lab's Python-into-numpy row (builds in release).
CARGO_TARGET_DIR="$PWD/target/python" target/tools/venv/bin/pip install -q ./python
