#!/usr/bin/env bash
# The whole test suite, with its own set-up: hugepages, the workspace tests, the loom models.
# Usage: tools/test.sh            (what CI runs through .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup-host.sh
if grep -qs ' /dev/hugepages hugetlbfs ' /proc/mounts; then
  # A host that has hugepages must exercise them: the shm tests fail instead of quietly
  # testing only the /dev/shm fallback.
  export TICKBUS_REQUIRE_HUGEPAGES=1
fi
echo "== workspace tests (unit, multi-process, hot-path proofs, doctests)"
cargo test --workspace
echo "== loom model checks of the ring's synchronisation"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p tickbus --lib --release loom
