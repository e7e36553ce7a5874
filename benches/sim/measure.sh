#!/usr/bin/env bash
# Measures the allreduce times the simulator is validated against, in one run: every
# algorithm at 2, 3 and 4 ranks over shared memory and TCP loopback, in alternating rounds,
# and writes the median in-place time of each point in `allreduce-sim --validate`'s format,
# followed by every round's time (comma-separated, in round order) so that the validation
# can say how far a point's own rounds spread.
#   benches/sim/measure.sh [OUT=target/sim-measured.txt] [ROUNDS=15] [RANKS="2 3 4"] [PRESET]
# PRESET prefixes the machine column, so that each point replays on the machine preset
# calibrated for this VM: `xeon-` (`xeon-shm`, `xeon-tcp`) on the Intel Xeon VM (family 6,
# model 207), nothing (`shm`, `tcp`) on the AMD EPYC VM of sessions 12-30. By default it is
# chosen from /proc/cpuinfo; on another CPU no preset is calibrated, and it says so.
# Why 15 rounds (about 30 minutes on the 2-core VM): a point's rounds spread because the VM
# changes speed by the second, so medians of fewer rounds do not reproduce. Two 15-round runs
# in one session differed by more than 25% on 7 of 168 points. Within one run, the odd and
# even rounds' medians differed that much on 20 points with 15 rounds and on 38 with 9
# (docs/allreduce.md, "Simulator", session 20).
# Then: target/release/allreduce-sim --validate OUT
# Before each configuration of each round it records the VM's speed (vm-speed: one core's
# in-cache copy, a cache line's and a 256 KiB buffer's trip between the two cores), as
# comment lines at the end: the VM moves between states by the second (docs/allreduce.md,
# "Simulator", session 30). Before each round it also records one core's copy and reduction
# by buffer size (`vm-speed --by-size`, about 10 s), where the private cache, the L3 and
# memory begin right then: the L3's end moved between 64 and 128 MiB buffers within an hour
# (session 32).
# Builds allreduce-sweep, allreduce-sim and vm-speed (release) first. The
# netns points (two namespaces as hosts) come from benches/netns/run.sh, which needs root.
set -euo pipefail
cd "$(dirname "$0")/../.."
source benches/sim/rounds.sh
OUT=${1:-target/sim-measured.txt}; ROUNDS=${2:-15}; RANKS=${3:-"2 3 4"}
if [ $# -ge 4 ]; then
  PRESET=$4
else
  cpu=$(awk -F': ' '/^vendor_id/ { v = $2 } /^cpu family/ { f = $2 } /^model\t/ { m = $2 }
                    END { print v, f, m; exit }' /proc/cpuinfo)
  case "$cpu" in
    "GenuineIntel 6 207") PRESET=xeon- ;;
    "AuthenticAMD 25 "*) PRESET= ;;
    *) PRESET=; echo "measure.sh: no machine preset is calibrated for this CPU ($cpu);" \
         "the points name the EPYC VM's (shm, tcp)" >&2 ;;
  esac
fi
SIZES=(-b 4K -e 64M -f 4)
# Always brought up to date (a no-op when it is): a stale build measures old code silently.
cargo build --release -p tarantella-benches --bin allreduce-sweep --bin allreduce-sim \
  --bin vm-speed
raw=$(mktemp); speed=$(mktemp); sizes=$(mktemp); trap 'rm -f "$raw" "$speed" "$sizes"' EXIT
configs=()
for n in $RANKS; do
  for a in rd rabenseifner ring single-copy; do configs+=("shm $n $a"); done
  for a in rd rabenseifner ring; do configs+=("tcp $n $a"); done
done
for round in $(seq "$ROUNDS"); do
  echo "# by-size $round $(target/release/vm-speed --by-size |
    awk '!/^#/ { printf "%s%s=%s,%s", sep, $1, $2, $3; sep = " " }')" >> "$sizes"
  for c in "${configs[@]}"; do
    set -- $c
    echo "# speed $round $1 $2 $3 $(target/release/vm-speed)" >> "$speed"
    # One line per size: transport ranks algorithm bytes in-place-us.
    target/release/allreduce-sweep --ranks "$2" --transport "$1" --algorithm "$3" \
        "${SIZES[@]}" --budget 64M --batches 3 -c 0 2>/dev/null |
      awk -v t="$1" -v n="$2" -v a="$3" '$1 ~ /^[0-9]+$/ { print t, n, a, $1, $9 }' >> "$raw"
  done
  echo "round $round of $ROUNDS done" >&2
done
{
  load=$(cut -d' ' -f1 /proc/loadavg)
  model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
  echo "# Measured by benches/sim/measure.sh on $(date -u +%F) ($(nproc) cores, load $load, $model):"
  echo "# median in-place time (us) of $ROUNDS alternating rounds, f32 sum."
  echo "# machine ranks per_host transport algorithm bytes measured_us rounds_us"
  # Stable sort: a point's rounds stay in the order they ran.
  sort -s -k1,1 -k2,2n -k3,3 -k4,4n "$raw" |
    awk '{ key = $1" "$2" "$3" "$4; v[key] = v[key] " " $5 }
         END { for (k in v) print k, v[k] }' |
    while read -r t n a bytes rest; do
      echo "$PRESET$t $n $n $t $a $bytes $(median_of "$rest") $(rounds_of "$rest")"
    done | sort -k1,1 -k2,2n -k5,5 -k6,6n
  echo "# vm-speed before each configuration: round transport ranks algorithm copy_gbs line_us handoff_us"
  cat "$speed"
  echo "# vm-speed --by-size before each round: round, then bytes=copy_gbs,reduce_gbs per buffer size"
  cat "$sizes"
} > "$OUT"
echo "wrote $OUT" >&2
