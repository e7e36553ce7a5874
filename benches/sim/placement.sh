#!/usr/bin/env bash
# Times 3 ranks on this host's first 2 CPUs in each way two of them can share one
# (`allreduce-sweep --map-cpu`, rank i on CPU i of the list) against ranks left to the
# scheduler, in alternating rounds, over shared memory or TCP loopback: what the simulator's
# `ranks_keep_cores` rests on (docs/allreduce.md, "Simulator", session 34).
#   benches/sim/placement.sh [OUT=target/sim-placement.txt] [ROUNDS=7] [TRANSPORT=shm]
# Writes one line per point: placement (the CPU of ranks 0,1,2, or `free`), algorithm,
# bytes, the median in-place time (us) and every round's time in round order.
set -euo pipefail
cd "$(dirname "$0")/../.."
source benches/sim/rounds.sh
OUT=${1:-target/sim-placement.txt}; ROUNDS=${2:-7}; TRANSPORT=${3:-shm}
algorithms=(rd rabenseifner ring); [ "$TRANSPORT" = shm ] && algorithms+=(single-copy)
cargo build --release -p tarantella-benches --bin allreduce-sweep
raw=$(mktemp); trap 'rm -f "$raw"' EXIT
for round in $(seq "$ROUNDS"); do
  for placement in free 0,0,1 0,1,0 1,0,0; do
    bind=(); [ "$placement" = free ] || bind=(--map-cpu "$placement")
    for a in "${algorithms[@]}"; do
      target/release/allreduce-sweep --ranks 3 --transport "$TRANSPORT" --algorithm "$a" "${bind[@]}" \
          -b 4K -e 16M -f 16 --budget 64M --batches 3 -c 0 2>/dev/null |
        awk -v p="$placement" -v a="$a" '$1 ~ /^[0-9]+$/ { print p, a, $1, $9 }' >> "$raw"
    done
  done
  echo "round $round of $ROUNDS done" >&2
done
{
  echo "# Measured by benches/sim/placement.sh on $(date -u +%F) ($(nproc) cores," \
       "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)): 3 ranks, $TRANSPORT, f32 sum,"
  echo "# median in-place time (us) of $ROUNDS alternating rounds; placement: CPU of ranks 0,1,2."
  echo "# placement algorithm bytes median_us rounds_us"
  sort -s -k2,2 -k3,3n -k1,1 "$raw" |
    awk '{ key = $1" "$2" "$3; if (!(key in v)) order[n++] = key; v[key] = v[key] " " $4 }
         END { for (i = 0; i < n; i++) print order[i], v[order[i]] }' |
    while read -r p a bytes rest; do
      echo "$p $a $bytes $(median_of "$rest") $(rounds_of "$rest")"
    done
} > "$OUT"
