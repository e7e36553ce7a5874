//! The runtime's own log: off unless `GASPI_LOG` is set (a `tracing` filter such as `info`
//! or `gaspi=debug`), so that applications keep control of their subscriber.

pub(crate) fn init_from_env() {
    if let Ok(filter) = std::env::var(crate::env::LOG) {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    }
}
