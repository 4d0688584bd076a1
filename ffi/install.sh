#!/usr/bin/env bash
# Installs the tickbus C library for C and C++ apps: libtickbus_ffi.{so,a} in PREFIX/lib,
# tickbus.h and tickbus.hpp in PREFIX/include, and PREFIX/lib/pkgconfig/tickbus.pc (so CMake's
# pkg_check_modules, or `pkg-config --cflags --libs tickbus`, finds it).
# Usage: ffi/install.sh PREFIX [--rdma]
#   --rdma   with rdma-rc and ud-mcast URIs (needs libibverbs-dev and librdmacm-dev)
# TICKBUS_FFI_LIB_DIR=DIR installs the libraries already built in DIR instead of building
# them (the tests install the build they just made).
set -euo pipefail
prefix=${1:?usage: ffi/install.sh PREFIX [--rdma]}
rdma=${2:-}
# PREFIX and TICKBUS_FFI_LIB_DIR relative to where the script was called from.
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
if [[ -n ${TICKBUS_FFI_LIB_DIR:-} ]]; then
  TICKBUS_FFI_LIB_DIR=$(cd "$TICKBUS_FFI_LIB_DIR" && pwd)
fi
cd "$(dirname "$0")/.."
[[ -z $rdma || $rdma == --rdma ]] || { echo "install.sh: unknown option $rdma (only --rdma)" >&2; exit 2; }
private="-lpthread -ldl -lm"
features=()
if [[ $rdma == --rdma ]]; then
  features=(--features rdma)
  private="$private -libverbs -lrdmacm"
fi
libdir=${TICKBUS_FFI_LIB_DIR:-}
if [[ -z $libdir ]]; then
  cargo build --release -p tickbus-ffi "${features[@]}"
  libdir=${CARGO_TARGET_DIR:-target}/release
fi
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
# The shared library under its SONAME (libtickbus_ffi.so.<ABI version>, from ffi/build.rs), with
# the development link beside it.
soname=$(objdump -p "$libdir/libtickbus_ffi.so" | sed -n 's/^ *SONAME *//p')
[[ -n $soname ]] || { echo "install.sh: $libdir/libtickbus_ffi.so has no SONAME" >&2; exit 1; }
install -m 0755 "$libdir/libtickbus_ffi.so" "$prefix/lib/$soname"
ln -sf "$soname" "$prefix/lib/libtickbus_ffi.so"
install -m 0644 "$libdir/libtickbus_ffi.a" "$prefix/lib/"
install -m 0644 ffi/include/tickbus.h ffi/include/tickbus.hpp "$prefix/include/"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
cat > "$prefix/lib/pkgconfig/tickbus.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: tickbus
Description: tickbus market-data and order bus: the C ABI (tickbus.h) and its C++17 wrapper (tickbus.hpp)
Version: $version
Libs: -L\${libdir} -ltickbus_ffi
Libs.private: $private
Cflags: -I\${includedir}
PC
echo "installed tickbus $version in $prefix (pkg-config: PKG_CONFIG_PATH=$prefix/lib/pkgconfig)"
