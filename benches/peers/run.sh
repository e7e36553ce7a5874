#!/usr/bin/env bash
# Runs allreduce-sweep and its peers in one session, alternating, for 2 and 4 ranks.
# Usage: benches/peers/run.sh [PYTHON]   (PYTHON: a python with torch; default .venv/bin/python)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${1:-.venv/bin/python}
cargo build --release -p tarantella-benches --bin allreduce-sweep
mpicc -O2 -o /tmp/mpi_allreduce benches/peers/mpi_allreduce.c
SWEEP=target/release/allreduce-sweep
for n in 2 4; do
  echo "=== $n ranks, shared memory"
  $SWEEP --ranks $n --transport shm
  mpirun --allow-run-as-root --oversubscribe -np $n --mca btl self,vader /tmp/mpi_allreduce
  echo "=== $n ranks, TCP loopback"
  $SWEEP --ranks $n --transport tcp
  mpirun --allow-run-as-root --oversubscribe -np $n --mca btl self,tcp --mca btl_tcp_if_include lo /tmp/mpi_allreduce
  "$PY" benches/peers/gloo_allreduce.py -n $n
done
