#!/usr/bin/env bash
# Builds libgaspi and installs it with its headers and pkg-config files, the way
# `make install` of a C library does (and under the names GPI-2's users link with):
#
#   gaspi/capi/install.sh [PREFIX]        PREFIX: argument, else $PREFIX, else /usr/local
#
#   $DESTDIR$PREFIX/lib/libgaspi.so.1.0.0          the shared library (SONAME libgaspi.so.1),
#                                                  stripped when `strip` is there
#                       libgaspi.so.1 -> libgaspi.so.1.0.0
#                       libgaspi.so   -> libgaspi.so.1
#                       libGPI2.so    -> libgaspi.so.1   (-lGPI2 links the same library)
#                       libgaspi.a, libGPI2.a -> libgaspi.a
#                       pkgconfig/gaspi.pc (-lgaspi), pkgconfig/GPI2.pc (-lGPI2)
#                   include/GASPI.h, GASPI_Ext.h, GASPI_Threads.h, PGASPI.h
#
# DESTDIR stages the install (packaging): files go under $DESTDIR$PREFIX while the .pc files
# name $PREFIX. Running it again replaces the files (each is written aside and renamed).
# Other variables: PROFILE (cargo profile to build, default release), CARGO (the cargo to
# run), CARGO_TARGET_DIR, STRIP (default strip), NO_BUILD=1 (install what an earlier
# `cargo build -p tarantella-gaspi-capi` of that profile left, without running cargo: packaging steps
# that build and install separately).
# Then: cc prog.c $(PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig pkg-config --cflags --libs GPI2)
set -euo pipefail

# Version of the C ABI: the SONAME is libgaspi.so.<major>; build.rs sets the same major.
ABI_VERSION=1.0.0
major="${ABI_VERSION%%.*}"

prefix="${1:-${PREFIX:-/usr/local}}"
case "$prefix" in
  *$'\n'*) echo "install.sh: PREFIX must not contain a newline" >&2; exit 2 ;;
  /*) ;;
  *) echo "install.sh: PREFIX must be an absolute path, not '$prefix'" >&2; exit 2 ;;
esac
[ "$prefix" = / ] || prefix="${prefix%/}"
destdir="${DESTDIR:-}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

profile="${PROFILE:-release}"
case "$profile" in
  dev | test | debug) profile=dev profile_dir=debug ;;
  bench) profile_dir=release ;;
  *) profile_dir="$profile" ;;
esac
built="${CARGO_TARGET_DIR:-$root/target}/$profile_dir"
if [ -n "${NO_BUILD:-}" ]; then
  for f in libgaspi.so libgaspi.a; do
    [ -f "$built/$f" ] || {
      echo "install.sh: NO_BUILD is set but $built/$f is missing; run: cargo build --profile $profile -p tarantella-gaspi-capi" >&2
      exit 1
    }
  done
else
  "${CARGO:-cargo}" build --profile "$profile" -p tarantella-gaspi-capi --manifest-path "$root/Cargo.toml"
fi

# The build must carry the SONAME this layout is made for.
soname=""
if command -v readelf >/dev/null 2>&1; then
  soname="$(readelf -d "$built/libgaspi.so" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')"
elif command -v objdump >/dev/null 2>&1; then
  soname="$(objdump -p "$built/libgaspi.so" | awk '$1 == "SONAME" { print $2 }')"
fi
if [ -n "$soname" ] && [ "$soname" != "libgaspi.so.$major" ]; then
  echo "install.sh: $built/libgaspi.so has SONAME '$soname', expected libgaspi.so.$major" >&2
  exit 1
fi

libdir="$prefix/lib"
includedir="$prefix/include"
lib="$destdir$libdir"
inc="$destdir$includedir"
mkdir -p "$lib/pkgconfig" "$inc"

# put SRC DEST MODE [STRIP-ARGS...]: copies aside, strips if asked and possible, renames.
strip_cmd="${STRIP:-strip}"
have_strip=false
command -v "$strip_cmd" >/dev/null 2>&1 && have_strip=true
put() {
  local src="$1" dest="$2" mode="$3" tmp
  shift 3
  tmp="$(dirname "$dest")/.$(basename "$dest").tmp.$$"
  cp "$src" "$tmp"
  if [ $# -gt 0 ] && $have_strip && ! "$strip_cmd" "$@" "$tmp" 2>/dev/null; then
    echo "install.sh: '$strip_cmd $*' failed on $(basename "$dest"); installing it unstripped" >&2
    cp "$src" "$tmp"
  fi
  chmod "$mode" "$tmp"
  mv -f "$tmp" "$dest"
}
$have_strip || echo "install.sh: no '$strip_cmd'; installing the libraries unstripped" >&2

put "$built/libgaspi.so" "$lib/libgaspi.so.$ABI_VERSION" 0755 --strip-unneeded
ln -sfn "libgaspi.so.$ABI_VERSION" "$lib/libgaspi.so.$major"
ln -sfn "libgaspi.so.$major" "$lib/libgaspi.so"
ln -sfn "libgaspi.so.$major" "$lib/libGPI2.so"
put "$built/libgaspi.a" "$lib/libgaspi.a" 0644 --strip-debug
ln -sfn libgaspi.a "$lib/libGPI2.a"
for h in GASPI.h GASPI_Ext.h GASPI_Threads.h PGASPI.h; do
  put "$here/include/$h" "$inc/$h" 0644
done

# The .pc files name the final paths (without DESTDIR), relative to ${prefix} where they lie
# under it, so `pkg-config --define-prefix` can relocate them.
pc_libdir='${prefix}/lib'
pc_includedir='${prefix}/include'
version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)"
# A value as the replacement of a sed `s|...|...|`: `\`, `&` and the delimiter escaped, so
# any PREFIX (say /opt/a&b|c) is written as it is.
sed_value() { printf '%s' "$1" | sed -e 's/[\\&|]/\\&/g'; }
for pc in gaspi:gaspi GPI2:GPI2; do
  name="${pc%%:*}" libname="${pc#*:}"
  tmp="$lib/pkgconfig/.$name.pc.tmp.$$"
  sed -e "s|@PREFIX@|$(sed_value "$prefix")|" -e "s|@LIBDIR@|$(sed_value "$pc_libdir")|" \
    -e "s|@INCLUDEDIR@|$(sed_value "$pc_includedir")|" -e "s|@VERSION@|$(sed_value "$version")|" \
    -e "s|@NAME@|$name|" -e "s|@LIB@|$libname|" \
    "$here/gaspi.pc.in" >"$tmp"
  chmod 0644 "$tmp"
  mv -f "$tmp" "$lib/pkgconfig/$name.pc"
done
echo "installed libgaspi (libgaspi.so.$ABI_VERSION, GPI2 names) into $destdir$prefix"
