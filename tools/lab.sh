#!/usr/bin/env bash
# The latency lab's main job, with its own set-up: reserves hugepages, builds in release mode and
# runs the default suite on cores 0 and 1. Extra arguments go to latency-lab (see --help).
# Do not run it while something else (a build, a test suite) is using the cores.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup-host.sh
cargo build --release -p tickbus-lab
exec target/release/latency-lab "$@"
