#!/usr/bin/env bash
# Everything a lent GPU machine checks, in one call: the binaries see the GPU, a short run on
# 1 and 2 ranks, the CUDA-gated tests, then the benchmark table (benches/gpu/run.sh).
#
#   benches/gpu/device.sh BIN_DIR LOG_DIR [tests|bench|all]
#
# MPS_ROWS (e.g. "plain ours2 gloo"), where set, runs those benchmark rows again under CUDA's
# Multi-Process Service; CUDNN_ROWS runs its rows again with cuDNN's autotuning
# (CUDNN_BENCHMARK=1 of benches/gpu/run.sh), ours and the peers alike.
#
# BIN_DIR is what benches/gpu/prepare.sh made: `tarantella`, `train` and the `gpu_path` test
# binary, built in release and stripped, and `checkout`, the path they were built in. The test
# binary runs `train` from that path (`<checkout>/target/release/train`): on another machine
# this script links that path to this checkout (where nothing is there) and puts BIN_DIR's
# `train` there. TORCH_LIB (default: the GPU machine's torch 2.11) is the libtorch the
# binaries load. Logs go to LOG_DIR; the table is printed last.
set -uo pipefail
BIN=$(realpath "$1")
LOG=$(realpath "$2")
WHAT=${3:-all}
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=${TORCH_LIB:-/opt/torch/.venv/lib/python3.12/site-packages/torch/lib}
stamp() { echo "== $(date +%T) $*"; }

stamp "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
python3 -c 'import torch, torchvision; print("python torch", torch.__version__, torchvision.__version__)'
if ldd "$BIN/train" | grep -q "not found"; then
  ldd "$BIN/train" | grep "not found"
  exit 1
fi

checkout=$(cat "$BIN/checkout")
if [ "$checkout" != "$PWD" ]; then
  [ -e "$checkout" ] || { mkdir -p "$(dirname "$checkout")" && ln -s "$PWD" "$checkout"; }
  mkdir -p "$checkout/target/release"
  cp "$BIN/train" "$BIN/tarantella" "$checkout/target/release/"
fi

stamp "smoke: 1 and 2 ranks, MLP on cuda"
for n in 1 2; do
  if ! timeout 120 "$BIN/tarantella" -n $n -- "$BIN/train" --device cuda --model mlp \
    --max-steps 5 --samples 640 --no-progress --profile >"$LOG/smoke-$n.log" 2>&1; then
    echo "smoke with $n ranks FAILED"
    tail -n 30 "$LOG/smoke-$n.log"
    exit 1
  fi
  grep -E '^profile|epoch' "$LOG/smoke-$n.log" | tail -2
done

if [ "$WHAT" != bench ]; then
  stamp "CUDA tests"
  timeout 300 "$BIN/gpu_path" --test-threads 1 --nocapture cuda_ >"$LOG/tests.log" 2>&1
  echo "tests exit $?"
  grep -E '^test |test result|panicked|skipped' "$LOG/tests.log"
fi

if [ "$WHAT" != tests ]; then
  stamp "benchmark"
  benches/gpu/run.sh "$BIN" 2>&1 | tee "$LOG/bench.log"
  if [ -n "${CUDNN_ROWS:-}" ]; then
    stamp "benchmark with cuDNN autotuning: $CUDNN_ROWS"
    CUDNN_BENCHMARK=1 ROWS=$CUDNN_ROWS benches/gpu/run.sh "$BIN" 2>&1 | sed 's/^/cudnn /' |
      tee "$LOG/bench-cudnn.log"
  fi
  # Two ranks on one GPU time-slice it; under MPS their kernels share it instead. The daemon
  # lives in this script's own directories and is stopped before the script ends.
  if [ -n "${MPS_ROWS:-}" ] && command -v nvidia-cuda-mps-control >/dev/null; then
    stamp "benchmark under MPS: $MPS_ROWS"
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/tnt-mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/tnt-mps/log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d; then
      ROWS=$MPS_ROWS RUN_LIMIT=90 benches/gpu/run.sh "$BIN" 2>&1 | sed 's/^/mps /' |
        tee "$LOG/bench-mps.log"
      echo quit | nvidia-cuda-mps-control
    fi
  fi
fi
stamp "done"
