#!/usr/bin/env bash
# The main job: a local data-parallel training run on N ranks (default 2) started by the
# `tarantella` launcher: LeNet-5 on the real Fashion-MNIST (Debian's dataset-fashion-mnist,
# installed by scripts/setup.sh), global batch 256, 8 epochs, Adam with warmup and cosine
# decay, validated on the 10,000-image test split after every epoch.
# Does its own setup (system tools, the dataset, the Python venv with torch for libtorch),
# then builds. Usage: scripts/run.sh [N] [extra train arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup-torch.sh
source scripts/torch-env.sh
N=${1:-2}
shift || true
cargo build --release -p tarantella-launcher -p tarantella-trainer --bins
exec ./target/release/tarantella -n "$N" -- ./target/release/train \
  --dataset fashion-mnist --model lenet5 --batch-size 256 --epochs 8 \
  --optimizer adam --lr 0.003 --warmup-epochs 1 --lr-schedule cosine "$@"
