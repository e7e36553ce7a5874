#!/usr/bin/env bash
# Builds what benches/gpu/device.sh runs on a GPU machine, against this checkout's torch (the
# GPU machine's must be the same version, 2.11): the release `train` and `tarantella`, and the
# CUDA-gated tests (`gpu_path`), stripped into BIN_DIR (about 7 MiB instead of 150), with the
# checkout's path in BIN_DIR/checkout.
#
#   benches/gpu/prepare.sh BIN_DIR      (e.g. .gpu, which git ignores)
set -euo pipefail
OUTDIR=$(realpath -m "$1")
cd "$(dirname "$0")/../.."
# shellcheck source=../../scripts/torch-env.sh
source scripts/torch-env.sh
cargo build --release -p tarantella-trainer -p tarantella-launcher --bins
test_bin=$(cargo test --release -p tarantella-trainer --test gpu_path --no-run \
  --message-format=json 2>/dev/null |
  python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "gpu_path" and m.get("executable"):
        print(m["executable"])')
mkdir -p "$OUTDIR"
strip -o "$OUTDIR/train" target/release/train
strip -o "$OUTDIR/tarantella" target/release/tarantella
strip -o "$OUTDIR/gpu_path" "$test_bin"
pwd >"$OUTDIR/checkout"
du -sh "$OUTDIR"
