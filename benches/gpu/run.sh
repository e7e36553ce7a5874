#!/usr/bin/env bash
# ResNet-50 on one GPU: ours (`train`, 1 and 2 ranks) against plain single-process PyTorch,
# DDP over gloo (2 ranks on the same GPU) and DDP over NCCL (1 rank), fp32 and bf16 autocast,
# global batch 2 x 64, synthetic ImageNet-shaped data on the GPU. One table from one run.
#
#   benches/gpu/run.sh [BIN_DIR]
#
# BIN_DIR holds `tarantella` and `train` built here (default target/release). On a machine
# whose torch differs from the one the binaries were built against, point LD_LIBRARY_PATH at a
# torch 2.11 lib/ directory (see README.md, "GPUs"). PYTHON (default python3) must import
# torch and torchvision. Not part of the test path.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-target/release}
PY=${PYTHON:-python3}
STEPS=${STEPS:-30}
B=${BATCH:-128}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

ours() { # ranks amp...
  local n=$1; shift
  local out
  out=$("$BIN/tarantella" -n "$n" -- "$BIN/train" --model resnet50 --device cuda \
    --batch-size "$B" --samples $((B * (STEPS + 3))) --max-steps $((STEPS + 3)) \
    --fusion-threshold 4096 --profile --no-progress "$@" 2>&1) || { echo "$out" >&2; return 1; }
  local line
  line=$(grep '^profile' <<<"$out" | tail -1)
  # profile: median over K steps: step S ms, compute C ms, exposed comm E ms, ...
  local step exposed
  step=$(sed -E 's/.*step ([0-9.]+) ms.*/\1/' <<<"$line")
  exposed=$(sed -E 's/.*exposed comm ([0-9.]+) ms.*/\1/' <<<"$line")
  awk -v n="$n" -v b="$B" -v s="$step" -v e="$exposed" -v amp="$*" 'BEGIN {
    printf "ours ranks=%d %s B=%d images/s=%.1f step_ms=%.2f exposed_comm_ms=%.2f (%.1f%%)\n",
      n, amp, b, b / s * 1e3, s, e, 100 * e / s }'
}

for amp in "" "--amp bf16"; do
  pyamp=""
  [ -n "$amp" ] && pyamp="--amp"
  $PY benches/gpu/ddp_resnet50.py --mode plain --batch-size "$B" --steps "$STEPS" $pyamp
  # shellcheck disable=SC2086
  ours 1 $amp
  # shellcheck disable=SC2086
  ours 2 $amp
  # shellcheck disable=SC2086
  ours 2 $amp --grad-dtype bf16
  $PY benches/gpu/ddp_resnet50.py --mode ddp-gloo --ranks 2 --batch-size "$B" --steps "$STEPS" $pyamp
  $PY benches/gpu/ddp_resnet50.py --mode ddp-nccl --batch-size "$B" --steps "$STEPS" $pyamp
done
