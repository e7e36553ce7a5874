#!/usr/bin/env bash
# Step time and exposed communication: ours (`train --profile`) vs PyTorch DDP (gloo), 2 ranks,
# 1 thread each, same models and global batches. Run after building (see README.md here).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
T=./target/release/tarantella
TRAIN=./target/release/train
STEPS=${STEPS:-30}
run_ours() { # model batch threshold extra...
  local model=$1 b=$2 kib=$3; shift 3
  $T -n 2 -- $TRAIN --model "$model" --batch-size "$b" --samples $((b * (STEPS + 2))) \
    --max-steps $((STEPS + 2)) --fusion-threshold "$kib" --profile --no-progress "$@" 2>/dev/null |
    grep '^profile' | sed "s/^/ours model=$model B=$b threshold=${kib}KiB $* /"
}
for spec in "lenet5 256" "mlp 64"; do
  set -- $spec
  extra=()
  [ "$1" = mlp ] && extra=(--hidden 4096,4096,1024)
  $PY benches/peers/ddp_train.py --model "$1" --batch-size "$2" --steps "$STEPS" --hidden 4096,4096,1024
  for kib in 0 32 64 1024; do
    run_ours "$1" "$2" "$kib" "${extra[@]}"
  done
done
