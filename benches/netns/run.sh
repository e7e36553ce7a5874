#!/usr/bin/env bash
# Multi-host allreduce benchmark on one machine: two network namespaces are two hosts, joined
# by a veth pair whose ends `tc tbf` limits to RATE. `tarantella` starts K ranks per host
# across them (its ssh replaced by `ip netns exec` in the namespace holding the address), and
# `allreduce-sweep` times the flat ring and the hierarchical allreduce in alternating rounds.
# Needs root (ip netns, tc); builds tarantella and allreduce-sweep (release) first.
#   benches/netns/run.sh [K=2] [RATE=2gbit] [ROUNDS=5] [SIZES="-b 16M -e 64M -f 4"]
# ALGS (default "ring hierarchical") lists what each round runs, in order; an entry
# ALG@SWEEP runs another allreduce-sweep binary (a baseline build) with --algorithm ALG.
# Per round, algorithm and size: in-place time (us) and busbw (GB/s). The link bound: two
# hosts must move the whole vector (N bytes) each way across the link, N*8/RATE seconds; the
# flat ring moves 2(n-1)/n*N each way.
set -euo pipefail
cd "$(dirname "$0")/../.."
K=${1:-2}; RATE=${2:-2gbit}; ROUNDS=${3:-5}; SIZES=${4:-"-b 16M -e 64M -f 4"}
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
export TARANTELLA_SSH=$work/ssh TARANTELLA_RUN_DIR=$work/runs
for round in $(seq 1 "$ROUNDS"); do
  for entry in ${ALGS:-ring hierarchical}; do
    alg=${entry%%@*}; sweep=$PWD/target/release/allreduce-sweep
    [ "$entry" = "$alg" ] || sweep=${entry#*@}
    timeout 300 ip netns exec "$A" target/release/tarantella --hostfile "$work/hosts" -- \
      "$sweep" $SIZES --algorithm "$alg" -n 5 -w 2 --batches 3 -c 1 |
      awk -v a="$entry" -v r="$round" '/^ +[0-9]+ /{print "round", r, a, $1, "time_us", $9, "busbw", $11, "wrong", $8 + $12}'
  done
done
