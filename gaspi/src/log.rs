//! The runtime's own log, for programs that have no `tracing` subscriber of their own: C
//! programs through the C ABI (`gaspi_proc_init` calls [`init_from_env`]) and binaries that
//! opt in. The library itself never installs a subscriber, so an application that sets up its
//! own logging, before or after `Context::init`, keeps control of it.

/// The level a program logs at when nobody chose one: the same as the launcher's
/// `--log-level` and `train`'s `TNT_LOG` default, so a program run plainly and one run
/// under `tarantella` report the same warnings.
pub const DEFAULT_LEVEL: &str = "warn";

/// Installs a stderr subscriber with the filter in `GASPI_LOG` (a `tracing` filter such as
/// `info` or `gaspi=debug`; the launcher sets it per rank from `--log-level`), or
/// [`DEFAULT_LEVEL`] when it is unset. Does nothing when a subscriber is already installed.
pub fn init_from_env() {
    let filter = std::env::var(crate::env::LOG).unwrap_or_else(|_| DEFAULT_LEVEL.to_string());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .try_init();
}
