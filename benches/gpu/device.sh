#!/usr/bin/env bash
# Everything a lent GPU machine checks, in one call: the binaries see the GPU, a short run on
# 1 and 2 ranks, the CUDA-gated tests, then the benchmark table (benches/gpu/run.sh).
#
#   benches/gpu/device.sh BIN_DIR LOG_DIR [tests|bench|all]
#
# PASSES says which benchmark passes run, in order (default "table"), each over ROWS (see
# benches/gpu/run.sh; default all):
#   table       as given (CUDNN_BENCHMARK and CHANNELS_LAST of run.sh apply where set)
#   tuned       with cuDNN's autotuning and channels-last, ours and the peers alike
#   mps         under CUDA's Multi-Process Service (two ranks share the GPU instead of
#               taking turns on it)
#   mps-tuned   both
# ROWS_<pass> (ROWS_mps_tuned for mps-tuned) gives one pass other rows, e.g.
#   PASSES="mps-tuned tuned" ROWS="plain ours2 gloo" ROWS_tuned="plain ours1 ours2 gloo"

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
# The tree sent to a GPU machine may land at the same path, without its (ignored) builds or
# with an earlier call's: the tests must run BIN_DIR's `train`.
if [ "$checkout" != "$PWD" ] || ! cmp -s "$BIN/train" "$checkout/target/release/train"; then
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
  # Under MPS the daemon lives in this pass's own directories and is stopped after the
  # pass; only that pass's processes are pointed at it. Fresh directories per pass, and the
  # wait for the daemon to be gone after it: on a machine kept warm between calls, a second
  # call's MPS pass once printed nothing in 300 s, right after the first call's had quit,
  # from the same fixed directories (cause not found; these remove the two likeliest).
  mps_gone() {
    local _
    for _ in $(seq 60); do
      pgrep -f '(^|/)nvidia-cuda-mps-(control|server)( |$)' >/dev/null || return 0
      sleep 0.5
    done
    echo "an MPS daemon or server is still running after 30 s"
  }
  for pass in ${PASSES:-table}; do
    stamp "benchmark pass: $pass"
    env=()
    case $pass in
      table) ;;
      tuned) env=(CUDNN_BENCHMARK=1 CHANNELS_LAST=1) ;;
      mps) ;;
      mps-tuned) env=(CUDNN_BENCHMARK=1 CHANNELS_LAST=1) ;;
      *) echo "unknown pass $pass"; continue ;;
    esac
    if [[ $pass == mps* ]]; then
      if ! command -v nvidia-cuda-mps-control >/dev/null; then
        echo "no nvidia-cuda-mps-control: pass $pass skipped"
        continue
      fi
      mps_gone
      mps_dir=$(mktemp -d /tmp/tnt-mps.XXXXXX)
      mkdir -p "$mps_dir/pipe" "$mps_dir/log"
      mps=(CUDA_MPS_PIPE_DIRECTORY="$mps_dir/pipe" CUDA_MPS_LOG_DIRECTORY="$mps_dir/log")
      if ! env "${mps[@]}" nvidia-cuda-mps-control -d; then
        echo "the MPS daemon did not start: pass $pass skipped"
        continue
      fi
      env+=("${mps[@]}")
    fi
    rows_of_pass=ROWS_${pass//-/_}
    rows=${!rows_of_pass:-${ROWS:-}}
    [ -n "$rows" ] && env+=(ROWS="$rows")
    # sed -u passes each row on as it comes: a call cut off at its time limit keeps the rows
    # that finished (a buffered sed lost a whole pass once).
    env "${env[@]}" RUN_LIMIT=${RUN_LIMIT:-120} benches/gpu/run.sh "$BIN" 2>&1 | sed -u "s/^/$pass /" |
      tee "$LOG/bench-$pass.log"
    if [[ $pass == mps* ]]; then
      echo quit | env "${mps[@]}" nvidia-cuda-mps-control
      mps_gone
      rm -rf "$mps_dir"
    fi
  done
fi
stamp "done"
