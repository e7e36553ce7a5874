//! A program that installs the runtime's log without choosing a level (`GASPI_LOG` unset, as
//! a C program run plainly) logs at the documented default, `warn`, the same level the
//! launcher and `train` default to. Its own file: the subscriber and the variable are per
//! process.

use tracing::Level;

#[test]
fn the_runtimes_log_defaults_to_warnings() {
    // Set before anything else runs in this binary, which holds this one test.
    std::env::remove_var(gaspi::env::LOG);
    gaspi::log::init_from_env();
    assert_eq!(gaspi::log::DEFAULT_LEVEL, "warn");
    assert!(tracing::enabled!(Level::WARN), "warnings are shown");
    assert!(!tracing::enabled!(Level::INFO), "info is not");
}
