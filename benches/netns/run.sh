#!/usr/bin/env bash
# Multi-host allreduce benchmark on one machine: two network namespaces are two hosts, joined
# by a veth pair whose ends `tc tbf` limits to RATE. `tarantella` starts K ranks per host
# across them (its ssh replaced by `ip netns exec` in the namespace holding the address), and
# `allreduce-sweep` times the flat ring and the hierarchical allreduce in alternating rounds.
# Needs root (ip netns, tc); builds tarantella and allreduce-sweep (release) first.
#   benches/netns/run.sh [K=2] [RATE=2gbit] [ROUNDS=5] [SIZES="-b 16M -e 64M -f 4"]
# ALGS (default "ring hierarchical") lists what each round runs, in order; an entry
# ALG@SWEEP runs another allreduce-sweep binary (a baseline build) with --algorithm ALG, and
# `openmpi-han` / `openmpi-tuned` run Open MPI 5's MPI_Allreduce (benches/peers/openmpi5.sh
# installs it) with its hierarchical `han` collectives forced, or with `han` excluded.
# Per round, algorithm and size: in-place time (us) and busbw (GB/s); then per algorithm and
# size the median over the rounds, against the ring's and against the link bound
# (benches/netns/medians.awk). The link bound: two hosts must move the whole vector (N bytes)
# each way across the link, N*8/RATE seconds; the flat ring moves 2(n-1)/n*N each way.
set -euo pipefail
cd "$(dirname "$0")/../.."
K=${1:-2}; RATE=${2:-2gbit}; ROUNDS=${3:-5}; SIZES=${4:-"-b 16M -e 64M -f 4"}
case ${RATE,,} in  # tc's units, as bits per second for the link bound
  *gbit) bits_per_s=${RATE%????}e9;; *mbit) bits_per_s=${RATE%????}e6;;
  *kbit) bits_per_s=${RATE%????}e3;;
  *) echo "RATE: $RATE is not in kbit, mbit or gbit" >&2; exit 2;;
esac
# Always brought up to date (a no-op when it is): a stale build measures old code silently.
cargo build --release -p tarantella-launcher -p tarantella-benches --bin tarantella \
  --bin allreduce-sweep
id=$$; A=tnt-bench-a$id; B=tnt-bench-b$id; work=$(mktemp -d)
cleanup() { ip netns del "$A" 2>/dev/null || true; ip netns del "$B" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
ip netns add "$A"; ip netns add "$B"
ip link add va$id type veth peer name vb$id
ip link set va$id netns "$A"; ip link set vb$id netns "$B"
ip -n "$A" addr add 10.198.0.1/24 dev va$id; ip -n "$B" addr add 10.198.0.2/24 dev vb$id
for nd in "$A va$id" "$B vb$id"; do
  set -- $nd
  ip -n "$1" link set "$2" up; ip -n "$1" link set lo up
  ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$RATE" burst 256kb latency 50ms
done
# tarantella calls: ssh [-o OPT]... [-T] HOST -- COMMAND
cat > "$work/ssh" <<SSH
#!/bin/bash
host=""
while [ \$# -gt 0 ]; do
  case "\$1" in -o) shift 2;; -T) shift;; --) shift; break;; *) host="\$1"; shift;; esac
done
case "\$host" in 10.198.0.1) ns=$A;; 10.198.0.2) ns=$B;; *) echo "unknown host \$host" >&2; exit 255;; esac
exec ip netns exec "\$ns" bash -c "\$*"
SSH
chmod +x "$work/ssh"
printf '10.198.0.1 slots=%s\n10.198.0.2 slots=%s\n' "$K" "$K" > "$work/hosts"
# Open MPI's daemons tell nodes apart by host name, so its stand-in for ssh also gives each
# namespace's processes a UTS namespace of their own with a name of their own (no dots: Open
# MPI cuts a host name at its first dot).
cat > "$work/mpi-ssh" <<SSH
#!/bin/bash
host=""
while [ \$# -gt 0 ]; do
  case "\$1" in -o) shift 2;; -*) shift;; *) host="\$1"; shift; break;; esac
done
case "\$host" in 10.198.0.1) ns=$A; name=tnt-a;; 10.198.0.2) ns=$B; name=tnt-b;;
  *) echo "unknown host \$host" >&2; exit 255;; esac
exec ip netns exec "\$ns" unshare --uts bash -c "hostname \$name; \$*"
SSH
chmod +x "$work/mpi-ssh"
export TARANTELLA_SSH=$work/ssh TARANTELLA_RUN_DIR=$work/runs
case " ${ALGS:-} " in *" openmpi-"*) ompi=$(benches/peers/openmpi5.sh);; esac
bytes() { numfmt --from=iec "$1"; }
read -r min max < <(set -- $SIZES; while [ $# -gt 0 ]; do
  case "$1" in -b) b=$2;; -e) e=$2;; esac; shift; done; echo "$(bytes "$b") $(bytes "$e")")
# Open MPI's peer: the stand-in ssh starts its daemon in the second namespace; the 4 or 6
# ranks share 2 cores, so they yield when idle, as ours do when oversubscribed. It times the
# sizes SIZES' -b, 4 times that, and so on up to its -e.
openmpi() {
  timeout 300 ip netns exec "$A" unshare --uts bash -c "hostname tnt-a; \
    $ompi/bin/mpirun --allow-run-as-root -H 10.198.0.1:$K,10.198.0.2:$K -np $((2 * K)) \
      --map-by ppr:$K:node --prtemca plm_ssh_agent $work/mpi-ssh \
      --prtemca oob_tcp_if_include 10.198.0.0/24 --mca btl_tcp_if_include 10.198.0.0/24 \
      --mca pml ob1 --mca btl self,sm,tcp --mca mpi_yield_when_idle 1 $1 \
      $ompi/mpi_allreduce $max $min"
}
for round in $(seq 1 "$ROUNDS"); do  # the rounds' lines go to stdout and to $work/rounds
  for entry in ${ALGS:-ring hierarchical}; do
    case "$entry" in
      openmpi-han|openmpi-tuned)
        [ "$entry" = openmpi-han ] && coll="--mca coll_han_priority 100" || coll="--mca coll ^han"
        openmpi "$coll" | awk -v a="$entry" -v r="$round" \
          '/^ +[0-9]+ /{print "round", r, a, $1, "time_us", $4, "busbw", $6, "wrong", "-"}'
        continue;;
    esac
    alg=${entry%%@*}; sweep=$PWD/target/release/allreduce-sweep
    [ "$entry" = "$alg" ] || sweep=${entry#*@}
    timeout 300 ip netns exec "$A" target/release/tarantella --hostfile "$work/hosts" -- \
      "$sweep" $SIZES --algorithm "$alg" -n 5 -w 2 --batches 3 -c 1 |
      awk -v a="$entry" -v r="$round" '/^ +[0-9]+ /{print "round", r, a, $1, "time_us", $9, "busbw", $11, "wrong", $8 + $12}'
  done
done | tee "$work/rounds"
sort -k3,3 -k4,4n -k6,6g "$work/rounds" | awk -v bits_per_s="$bits_per_s" -f benches/netns/medians.awk
