#!/usr/bin/env bash
# Builds libgaspi (release) and installs it with its headers and pkg-config file:
#   gaspi/capi/install.sh /opt/tarantella   ->  lib/libgaspi.{so,a}, include/GASPI*.h,
#                                              lib/pkgconfig/gaspi.pc
# Then: cc prog.c $(PKG_CONFIG_PATH=/opt/tarantella/lib/pkgconfig pkg-config --cflags --libs gaspi)
set -euo pipefail
prefix="${1:?usage: install.sh PREFIX}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cargo build --release -p gaspi-capi --manifest-path "$root/Cargo.toml"
target="${CARGO_TARGET_DIR:-$root/target}/release"
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
cp "$target/libgaspi.so" "$target/libgaspi.a" "$prefix/lib/"
cp "$here/include/GASPI.h" "$here/include/GASPI_Ext.h" "$here/include/GASPI_Threads.h" \
  "$here/include/PGASPI.h" "$prefix/include/"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)"
sed -e "s|@LIBDIR@|$prefix/lib|" -e "s|@INCLUDEDIR@|$prefix/include|" -e "s|@VERSION@|$version|" \
  "$here/gaspi.pc.in" >"$prefix/lib/pkgconfig/gaspi.pc"
echo "installed libgaspi into $prefix"
