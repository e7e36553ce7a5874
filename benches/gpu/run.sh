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
# torch and torchvision. STEPS timed steps per run (default 30, after 3 warm-up steps), BATCH
# the global batch (default 128), ROWS which rows (below). CUDNN_BENCHMARK=1 runs every row,
# ours and the peers alike, with cuDNN's autotuning (`--cudnn-benchmark`, PyTorch's
# `cudnn.benchmark`); CHANNELS_LAST=1 likewise keeps every row's model and batches
# channels-last (`--channels-last`, PyTorch's `memory_format=torch.channels_last`). Each row
# runs on its own: one that fails prints FAILED and its output's end, and the table goes on.
# ALT_BIN names a second build of ours (e.g. main's, against a change in BIN): rows `alt-ours1`,
# `alt-ours2`, `alt-ours2-bf16` run it, printed as `ours-alt`, so two builds are compared in
# one run with the peers. OURS_FLAGS adds train flags to every row of ours (split on blanks), e.g.
# `--record DIR/rec` for the per-bucket hook trace. Not part of the test path.
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-target/release}
ALT_BIN=${ALT_BIN:-}
PY=${PYTHON:-python3}
STEPS=${STEPS:-30}
B=${BATCH:-128}
RUN_LIMIT=${RUN_LIMIT:-240}
tune=()
[ "${CUDNN_BENCHMARK:-0}" = 1 ] && tune=(--cudnn-benchmark)
[ "${CHANNELS_LAST:-0}" = 1 ] && tune+=(--channels-last)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

# One row of ours: the build's directory, its label, ranks, then extra train flags.
ours_of() {
  local bin=$1 label=$2 n=$3; shift 3
  local out line
  if [ -z "$bin" ]; then
    echo "$label ranks=$n $*: no ALT_BIN given"; return 0
  fi
  if ! out=$(timeout "$RUN_LIMIT" "$bin/tarantella" -n "$n" -- "$bin/train" --model resnet50 \
    --device cuda --batch-size "$B" --samples $((B * (STEPS + 3))) --max-steps $((STEPS + 3)) \
    --fusion-threshold "$fusion" --profile --no-progress "${tune[@]}" "$@" ${OURS_FLAGS:-} 2>&1); then
    echo "$label ranks=$n $* FAILED"; tail -n 15 <<<"$out" | sed 's/^/    /'; return 0
  fi
  # profile: median over K steps: step S ms, compute C ms, exposed comm E ms (P% of step),
  # optimizer O ms, GPU memory M2 MiB after step 2, ME MiB at the end
  line=$(grep '^profile' <<<"$out" | tail -1)
  awk -v label="$label" -v n="$n" -v b="$B" -v f="$fusion" -v flags="${tune[*]} $*" -v line="$line" 'BEGIN {
    match(line, /step [0-9.]+ ms/); s = substr(line, RSTART + 5, RLENGTH - 8)
    match(line, /exposed comm [0-9.]+ ms/); e = substr(line, RSTART + 13, RLENGTH - 16)
    match(line, /compute [0-9.]+ ms/); c = substr(line, RSTART + 8, RLENGTH - 11)
    match(line, /optimizer [0-9.]+ ms/); o = substr(line, RSTART + 10, RLENGTH - 13)
    m2 = "?"; me = "?"
    if (match(line, /memory [0-9]+ MiB after/)) m2 = substr(line, RSTART + 7, RLENGTH - 17)
    if (match(line, /[0-9]+ MiB at the end/)) me = substr(line, RSTART, RLENGTH - 15)
    if (s == "" || s == 0) { printf "%s ranks=%d %s: no profile line\n", label, n, flags; exit }
    printf "%s ranks=%d %s B=%d fusion_kib=%d images/s=%.1f step_ms=%.2f exposed_comm_ms=%.2f (%.1f%%) compute_ms=%.2f optimizer_ms=%.2f mem_step2_mib=%s mem_end_mib=%s\n",
      label, n, flags, b, f, b / s * 1e3, s, e, 100 * e / s, c, o, m2, me }'
}
ours() { ours_of "$BIN" ours "$@"; }
alt_ours() { ours_of "$ALT_BIN" ours-alt "$@"; }

peer() {
  local out
  if ! out=$(timeout "$RUN_LIMIT" "$PY" benches/gpu/ddp_resnet50.py --batch-size "$B" \
    --steps "$STEPS" "${tune[@]}" "$@" 2>&1); then
    echo "peer $* FAILED"; tail -n 15 <<<"$out" | sed 's/^/    /'; return 0
  fi
  grep '^peer' <<<"$out"
}

# ROWS picks rows (default all but the alt- ones): plain ours1 ours2 ours2-bf16 gloo nccl
# alt-ours1 alt-ours2 alt-ours2-bf16. A row of ours may end in @N: fusion threshold N KiB
# (`--fusion-threshold`; FUSION_KB, default 4096, for the others), e.g. `ours2@1024`.
ROWS=${ROWS:-plain ours1 ours2 ours2-bf16 gloo nccl}
# PRECISIONS picks the passes over ROWS, in order (default both): fp32, and bf16 (autocast).
for precision in ${PRECISIONS:-fp32 bf16}; do
  case $precision in
    fp32) amp="" pyamp=() ;;
    bf16) amp="--amp bf16" pyamp=(--amp) ;;
    *) echo "unknown precision $precision" >&2; exit 2 ;;
  esac
  for row in $ROWS; do
    fusion=${FUSION_KB:-4096}
    if [[ $row == *@* ]]; then
      fusion=${row#*@}
      row=${row%@*}
    fi
    # shellcheck disable=SC2086
    case $row in
      plain) peer --mode plain "${pyamp[@]}" ;;
      ours1) ours 1 $amp ;;
      ours2) ours 2 $amp ;;
      ours2-bf16) ours 2 $amp --grad-dtype bf16 ;;
      alt-ours1) alt_ours 1 $amp ;;
      alt-ours2) alt_ours 2 $amp ;;
      alt-ours2-bf16) alt_ours 2 $amp --grad-dtype bf16 ;;
      gloo) peer --mode ddp-gloo --ranks 2 "${pyamp[@]}" ;;
      nccl) peer --mode ddp-nccl "${pyamp[@]}" ;;
      *) echo "unknown row $row" >&2; exit 2 ;;
    esac
  done
done
