#!/usr/bin/env bash
# Installs what the project needs on a fresh Debian 12 machine with the Rust toolchain:
# toolchain components, the system tools the multi-process tests use, the build needs of
# the InfiniBand verbs feature, and the Fashion-MNIST dataset.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
need=()
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
command -v setsid >/dev/null 2>&1 || need+=(util-linux)
command -v pgrep >/dev/null 2>&1 || need+=(procps)
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
# The `verbs` feature (default) builds rdma-core's headers-only stub through `sideway`:
# cmake, libclang (bindgen) and the kernel headers. libibverbs itself is loaded at run time.
command -v cmake >/dev/null 2>&1 || need+=(cmake)
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
dpkg -s linux-libc-dev >/dev/null 2>&1 || need+=(linux-libc-dev)
command -v nm >/dev/null 2>&1 || need+=(binutils)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
# The trainer's main job trains on the real Fashion-MNIST (/usr/share/datasets/fashion-mnist).
dpkg -s dataset-fashion-mnist >/dev/null 2>&1 || need+=(dataset-fashion-mnist)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
