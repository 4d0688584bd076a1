#!/usr/bin/env bash
# The whole test suite, with its own set-up: host packages, hugepages, the workspace tests, the
# Python package's tests, the loom models, bounded fuzzing (codecs and bus), the rig's self-test,
# and the RDMA tests inside the Soft-RoCE guest.
# Usage: tools/test.sh            (what CI runs through .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."
# Each section says when it starts and how long the run has taken so far (CI keeps within 45 min;
# .ci/run passes its own start, so its lints and docs count too).
export TICKBUS_RUN_START=${TICKBUS_RUN_START:-$(date +%s)}
section() { echo "== [$(date -u +%T), $(($(date +%s) - TICKBUS_RUN_START)) s in] $*"; }
tools/setup-host.sh
# A fresh machine builds every configuration once (debug with fault points, the Python package,
# loom, the fuzz targets, the lab's release build): incremental state would only take disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
tools/check-disk.sh "${TICKBUS_DISK_NEEDED_GB:-8}"
section "latency-lab peers and test tools: cmake >= 3.30, libbsd-dev, uuid-dev, gcc, g++, pkg-config, chromium; Python hdrhistogram, pytest, pyarrow, pandas, duckdb"
tools/setup-peers.sh
export PATH="$PWD/target/tools/venv/bin:$PATH"
section "Soft-RoCE rig: host packages and guest image"
tools/rig/rig build >/dev/null
if grep -qs ' /dev/hugepages hugetlbfs ' /proc/mounts; then
  # A host that has hugepages must exercise them: the shm tests fail instead of quietly
  # testing only the /dev/shm fallback.
  export TICKBUS_REQUIRE_HUGEPAGES=1
fi
# Fault and crash points (tickbus::fault, the apps' crash.rs) compiled in for the tests that arm
# them: a --cfg, not a Cargo feature, so no dependent can switch kill points on in a product. The
# tests that need them fail if TICKBUS_REQUIRE_FAULTS is set and they are not compiled in.
export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }--cfg tickbus_testing" TICKBUS_REQUIRE_FAULTS=1
section "workspace tests (unit, multi-process, hot-path proofs, doctests; the C ABI's C and C++ tests under ASan/UBSan, the C++ example built with CMake)"
cargo test --workspace --all-features
section "Python package: pip install ./python (maturin, release build), then pytest against the apps"
CARGO_TARGET_DIR="$PWD/target/python" target/tools/venv/bin/pip install -q ./python
# The tests run `tickbus` (record, exchange, trader, journal inspect/export): the debug build the
# workspace tests just made. From the checkout's root, so the package imported is the installed one.
TICKBUS_BIN="$PWD/target/debug/tickbus" target/tools/venv/bin/python3 -m pytest -q python/tests
section "loom model checks of the ring's synchronisation"
RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p tickbus --lib --release loom
section "fuzz: every target (codecs: ITCH file, MoldUDP64, pcap, book; bus: control lines, ring memory, ud-mcast frames, journal records, journal folders, feed arbitration and forgery, channel URIs, AF_XDP frames, venue glimpses) for a bounded time"
# The product build is fuzzed: no fault or crash points compiled in.
env -u RUSTFLAGS tools/fuzz.sh "${TICKBUS_FUZZ_SECONDS:-15}"

section "Soft-RoCE guest: rig self-test"
tools/rig/selftest.sh
# Test binaries that need RDMA devices. On a host without them they report "ignored" with the
# reason; here they run in the guest, where TICKBUS_REQUIRE_RDMA=1 turns a missing device into a
# failure. Point TICKBUS_RDMA_DEVICE at a real NIC to run them on the host instead.
# two_hosts boots the rig's two guests (two kernels joined by a link) and cuts the link or powers
# the peer off from inside the test; fanout_two_hosts runs the lab's ud-mcast fan-out with the
# subscribers in the other guest.
# The trading apps' suites (package tickbus-apps) run `tickbus exchange` and `tickbus trader`
# over RDMA: on rxe0/rxe1 in one guest, and across the two guests. tickbus-lab:rdma runs
# `latency-lab rdma` at a tiny scale: perftest and tickbus in alternating rounds, message rates,
# fan-out. tickbus-ffi:c_abi_rdma drives rdma-rc and ud-mcast through the C ABI's functions;
# tickbus-apps:replay_rdma replays a journal onto rdma-rc and ud-mcast, recorded by `record --rdma`
# and `--mcast` on the other device; tickbus-apps:late_join_rdma has a trader join a ud-mcast feed
# late from the journal `record` keeps of it, and one `kill -9`ed come back from it;
# tickbus-apps:late_join_two_hosts has a trader on the second guest join late through the journal
# served over rdma-rc from the recorder's guest.
RDMA_TESTS=(verbs_smoke rdma_transport rdma_hostile mcast_transport mcast_hostile examples_rdma two_hosts
  tickbus-apps:trading_rdma tickbus-apps:trading_two_hosts tickbus-apps:late_join_two_hosts tickbus-apps:doctor_rdma
  tickbus-apps:stat_rdma tickbus-apps:replay_rdma tickbus-apps:late_join_rdma tickbus-lab:rdma tickbus-lab:fanout_two_hosts tickbus-ffi:c_abi_rdma)
test_bin() { # package, --test or --bin, target: the path of its test binary (built if needed)
  cargo test -p "$1" --all-features "$2" "$3" --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1] and m["profile"]["test"]:
        print(m["executable"])' "$3"
}
# One-guest suites run one after another in a single boot (tools/rig/each.sh: processes left
# from the target folder killed and the guest's rings removed between them, /tmp kept; every one
# run, each named with its exit code and time); two-guest suites get a boot each (they cut the
# link or power the peer off).
one_guest=()
two_guests=()
for entry in "${RDMA_TESTS[@]}"; do
  pkg=tickbus t=$entry
  if [[ $entry == *:* ]]; then pkg=${entry%%:*} t=${entry#*:}; fi
  bin=$(test_bin "$pkg" --test "$t")
  [ -n "$bin" ] || { echo "test.sh: no test binary for $t" >&2; exit 1; }
  if [[ $t == *two_hosts ]]; then two_guests+=("$t=$bin"); else one_guest+=("$t" "$bin" ';;'); fi
done
# The apps' unit tests marked ignored on a host need RDMA devices: the trading loops over RDMA
# (doorbell writes only, no allocation). Here they run, with --ignored.
bin=$(test_bin tickbus-apps --bin tickbus)
[ -n "$bin" ] || { echo "test.sh: no unit-test binary for tickbus-apps" >&2; exit 1; }
one_guest+=("tickbus-apps unit tests (--ignored)" "$bin" --ignored)
section "Soft-RoCE guest (1): the one-guest suites and the apps' RDMA unit tests, in one boot"
TICKBUS_REQUIRE_RDMA=1 tools/rig/rig run --guests 1 --hugepages 32 --timeout 4000 -- tools/rig/each.sh "${one_guest[@]}"
[ ${#two_guests[@]} -gt 0 ] || { echo "test.sh: no two-guest suite found in RDMA_TESTS" >&2; exit 1; }
for entry in "${two_guests[@]}"; do
  section "Soft-RoCE guests (2): ${entry%%=*}"
  TICKBUS_REQUIRE_RDMA=1 tools/rig/rig run --guests 2 --hugepages 32 --timeout 900 -- "${entry#*=}"
done
section "all suites passed"
