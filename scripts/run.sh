#!/usr/bin/env bash
# The main job: data-parallel training of LeNet-5 on the real Fashion-MNIST (Debian's
# dataset-fashion-mnist) on N local ranks (default 2) started by the `tarantella` launcher:
# global batch 256, 8 epochs, cosine learning-rate decay, the test split evaluated after
# every epoch. Does its own setup (system tools and the dataset, the Python venv with torch
# for libtorch), then builds.
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
  --dataset fashion-mnist --model lenet5 --batch-size 256 --epochs 8 \
  --lr 0.05 --lr-schedule cosine "$@"
