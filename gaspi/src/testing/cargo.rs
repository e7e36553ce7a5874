//! Building, from a test, what `cargo test` did not build for it.

use std::path::Path;
use std::process::Command;

/// Tells tests which targets to build so that cargo resolves the features of the surrounding
/// `cargo test`; the project's test command (`scripts/test.sh`) sets it to `--workspace --bins
/// --tests`, for its own `cargo test --workspace`. See [`cargo_build`].
pub const CARGO_SELECTION: &str = "TNT_TEST_CARGO_SELECTION";

/// Builds with `cargo` what a test needs and `cargo test` did not build for it (another
/// package's binary), in the profile and target directory of `profile_dir` (`<target>/debug`
/// or `<target>/release`, the test executable's grandparent). Panics when the build fails:
/// it is a test's set-up.
///
/// What is built is `own` (e.g. `-p tarantella-launcher --bin tarantella`), or with
/// [`CARGO_SELECTION`] set, that selection instead. Cargo resolves features per selection:
/// `own` alone gets its package tree's features, which differ from the whole workspace's
/// with dev-dependencies, so it compiles that tree's dependencies a second time (35 s of a
/// CI run for the launcher). The surrounding run's own selection reuses every unit it built.
/// Not for what is tested as shipped: the workspace's selection unifies test-only features
/// (gaspi's `fake-verbs`) into everything, so `libgaspi.so` is built with its own selection.
pub fn cargo_build(cargo: &str, profile_dir: &Path, own: &[&str]) {
    let target_dir = profile_dir.parent().expect("<target>/<profile>");
    let mut cmd = Command::new(cargo);
    cmd.arg("build").env("CARGO_TARGET_DIR", target_dir);
    match std::env::var(CARGO_SELECTION) {
        Ok(selection) if !selection.trim().is_empty() => cmd.args(selection.split_whitespace()),
        _ => cmd.args(own),
    };
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let status = cmd.status().expect("cargo runs");
    assert!(status.success(), "{cmd:?} failed: {status}");
}
