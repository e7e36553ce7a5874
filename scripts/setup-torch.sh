#!/usr/bin/env bash
# Creates (once) the project's Python venv in .venv/ with torch==2.11.0, whose libtorch the
# trainer links against (tch 0.24, LIBTORCH_USE_PYTORCH=1). Idempotent: a venv that already
# has the right torch is kept, so CI caches it by keeping .venv/ between runs.
#
# PyPI's Linux torch wheel is the CUDA build: it pulls the NVIDIA runtime wheels (about 3 GB in
# all, 1-2 minutes at 40 MB/s). libtorch_cpu.so itself needs libcudart/libcupti, so they are
# installed too; no GPU is needed at run time.
#
# Source scripts/torch-env.sh afterwards to build with cargo.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_VERSION=2.11.0
VENV=.venv
PY=${PYTHON:-python3}

have_torch() {
  [ -x "$VENV/bin/python" ] &&
    "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('torch') != '$TORCH_VERSION')" 2>/dev/null
}

if have_torch; then
  exit 0
fi
if ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup-torch: installing python3-venv"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv python3-pip >/dev/null
  PY=python3
fi
echo "setup-torch: creating $VENV with torch==$TORCH_VERSION (about 3 GB download)"
start=$(date +%s)
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "torch==$TORCH_VERSION" numpy
have_torch || { echo "setup-torch: torch $TORCH_VERSION not importable after install" >&2; exit 1; }
echo "setup-torch: done in $(( $(date +%s) - start )) s"
