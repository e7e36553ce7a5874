#!/usr/bin/env bash
# C vs Rust point-to-point benchmark in one session: builds libgaspi and the Rust benchmark
# (release), compiles p2p.c, then alternates ROUNDS times between the C program (2 ranks over
# TCP and over shared memory, started with the same job variables the Rust benchmark's job
# runner sets) and `gaspi-p2p` (the Rust API). Pass --quick for short runs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$root"
cargo build --release -p tarantella-gaspi-capi -p tarantella-benches
rel="${CARGO_TARGET_DIR:-$root/target}/release"
ln -sfn libgaspi.so "$rel/libgaspi.so.1" # the SONAME the program will need (build.rs)
cc -std=c99 -O2 -Wall -Wextra -Werror -I "$here/../include" -o "$rel/capi-p2p" "$here/p2p.c" \
  -L "$rel" -lgaspi -Wl,-rpath,"$rel"
run_c() { # transport
  local port=$((20000 + RANDOM % 20000)) pids=()
  for r in 0 1; do
    GASPI_RANK=$r GASPI_NRANKS=2 GASPI_RENDEZVOUS="127.0.0.1:$port" GASPI_TRANSPORT="$1" \
      GASPI_JOB_ID="capi-p2p-$$-$port" "$rel/capi-p2p" "${@:2}" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
}
for round in $(seq 1 "${ROUNDS:-3}"); do
  for t in tcp shm; do
    run_c "$t" "$@" | sed "s/^/C $t /"
  done
  "$rel/gaspi-p2p" "$@" | sed -n 's/^\(tcp\|shm\) *write_notify \(half-RTT\|bandwidth\) *\([0-9]* [KMi]*B\) *\([0-9.]*\).*/Rust \1 \2 \3 \4/p'
done
