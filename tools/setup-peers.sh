#!/usr/bin/env bash
# Installs what latency-lab's `peers` feature builds with: Aeron's C client and media driver
# (rusteron, feature `static`) need cmake >= 3.30 (from PyPI, into target/tools/venv; Debian 12's
# is 3.25), libbsd-dev, uuid-dev and libclang-dev (bindgen); and the Python `hdrhistogram`
# package (into the same venv) with which the test suite reads the lab's interval log back.
# Idempotent.
# Callers then: export PATH="$PWD/target/tools/venv/bin:$PATH"
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
# chromium: the test suite renders the lab's HTML report headless and checks the screenshot.
# pkg-config: the C++ example finds the installed tickbus C library with it (CMake pkg_check_modules);
# gcc and g++: the C ABI's tests compile C and C++ programs (with ASan and UBSan).
for p in libbsd-dev uuid-dev libclang-dev python3-venv chromium pkg-config gcc g++; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup-peers: installing ${need[*]}"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
fi
venv=target/tools/venv
[ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
if ! "$venv/bin/cmake" --version 2>/dev/null | grep -qE 'version 3\.(3[0-9]|[4-9][0-9])\.'; then
  echo "setup-peers: installing cmake >= 3.30 from PyPI into $venv"
  "$venv/bin/pip" install -q 'cmake>=3.30,<4'
fi
# The Python package's build backend is fetched by pip itself (maturin, into pip's isolated build
# environment); its tests read with pyarrow, pandas and DuckDB, pinned so a new release cannot
# change what the tests mean.
if ! "$venv/bin/python3" -c 'import pytest, pyarrow, pandas, duckdb' 2>/dev/null; then
  echo "setup-peers: installing pytest, pyarrow, pandas, duckdb (Python) into $venv"
  "$venv/bin/pip" install -q 'pytest==9.2.0' 'pyarrow==26.0.1' 'pandas==3.1.1' 'duckdb==2.0.1' 'numpy==2.4.6'
fi
# HdrHistogram's Python implementation: the test suite reads latency.hlog back with it, a reader
# independent of the Rust crate that writes it.
if ! "$venv/bin/python3" -c 'import hdrh.log' 2>/dev/null; then
  echo "setup-peers: installing hdrhistogram (Python) into $venv"
  "$venv/bin/pip" install -q 'hdrhistogram==0.10.8'
fi
