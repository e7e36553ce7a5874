#!/usr/bin/env bash
# The project's test command: setup, format and lint checks, then every test of the
# workspace (unit, property and multi-process integration tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The trainer links libtorch from the torch wheel in .venv/ (created once, then reused).
bash scripts/setup-torch.sh
source scripts/torch-env.sh
# The C ABI's small C shim compiles with warnings as errors here (not in users' builds).
export TNT_STRICT_C=1
cargo fmt --all --check
# Clippy also holds the code to the MSRV (`rust-version` in Cargo.toml): its
# `incompatible_msrv` lint fails on any std API newer than that.
cargo clippy --workspace --all-targets -- -D warnings
# The API docs build, with every intra-doc link resolving.
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
# Every library crate packages for crates.io (metadata, files, dependency versions).
cargo publish --workspace --dry-run --no-verify --allow-dirty --quiet
# Multi-process tests start up to 5 rank processes each; two test threads keep a 2-core
# machine busy without starving the ranks.
# Tests that need a binary `cargo test` builds only for its own package's tests (`tarantella`
# for the C and fault-matrix tests) build it with this run's own selection, so that cargo
# reuses this run's units instead of resolving one package's features and compiling its tree
# again (`gaspi::testing::cargo_build`).
export TNT_TEST_CARGO_SELECTION="--workspace --bins --tests"
cargo test --workspace -- --test-threads=2
