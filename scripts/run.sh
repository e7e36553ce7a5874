#!/usr/bin/env bash
# The main job: a local data-parallel training run on N ranks (default 2) started by the
# `tarantella` launcher: LeNet-5 on synthetic MNIST-shaped data, global batch 64, 2 epochs.
# Does its own setup (system tools, the Python venv with torch for libtorch), then builds.
# Usage: scripts/run.sh [N] [extra train arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup-torch.sh
source scripts/torch-env.sh
N=${1:-2}
shift || true
cargo build --release -p launcher -p trainer --bins
exec ./target/release/tarantella -n "$N" -- ./target/release/train \
  --model lenet5 --batch-size 64 --epochs 2 --samples 4096 --profile "$@"
