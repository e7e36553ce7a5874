#!/usr/bin/env bash
# The main job: a local multi-rank run started by the `tarantella` launcher.
# Usage: scripts/run.sh [N]   (default 4 ranks)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
N=${1:-4}
cargo build --release -p launcher -p tarantella-tests --bins
exec ./target/release/tarantella -n "$N" --output-on-all-devices -- ./target/release/hello_ring
