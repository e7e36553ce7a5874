#!/usr/bin/env bash
# Training throughput on the real Fashion-MNIST: LeNet-5, global batch 256, on 1 and 2 local
# ranks, alternating rounds (ROUNDS, default 3) so that a noisy machine hits both alike.
# Prints the median over rounds of each run's median epoch samples/s (its first epoch left
# out as warm-up), and the ratio. Does its own setup like scripts/run.sh.
# Usage: benches/train-fashion-mnist.sh [EPOCHS per run, default 3]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup-torch.sh
source scripts/torch-env.sh
cargo build --release -q -p launcher -p trainer --bins
EPOCHS=${1:-3}
ROUNDS=${ROUNDS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

for round in $(seq "$ROUNDS"); do
  for n in 1 2; do
    ./target/release/tarantella -n "$n" -- ./target/release/train --dataset fashion-mnist \
      --model lenet5 --batch-size 256 --epochs "$EPOCHS" --validation-freq 0 --no-progress \
      --metrics-csv "$work/r$round-n$n.csv" >/dev/null 2>&1
    # Column 8 is samples/s; skip the header and the first epoch.
    tail -n +3 "$work/r$round-n$n.csv" | cut -d, -f8 | median >"$work/r$round-n$n.med"
  done
done
printf '%-6s %-14s %s\n' ranks "samples/s" "per round"
for n in 1 2; do
  rounds=$(cat "$work"/r*-n$n.med | tr '\n' ' ')
  med=$(cat "$work"/r*-n$n.med | median)
  printf '%-6s %-14.0f %s\n' "$n" "$med" "$rounds"
  echo "$med" >"$work/n$n"
done
awk -v a="$(cat "$work/n1")" -v b="$(cat "$work/n2")" 'BEGIN {printf "2 ranks / 1 rank: %.2f\n", b / a}'
