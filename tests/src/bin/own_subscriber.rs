//! An application with logging of its own: it installs its global `tracing` subscriber after
//! `Context::init`, which panics if one is installed already, then completes a barrier. Run
//! under `tarantella --log-level debug`, which sets `GASPI_LOG` on the ranks, it shows that
//! the library leaves the subscriber to the application.

use gaspi::{Context, Group, Timeout};

fn main() -> gaspi::Result<()> {
    let ctx = Context::init()?;
    // Panics ("a global default trace dispatcher has already been set") if init installed one.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::INFO)
        .init();
    tracing::info!("the application's own subscriber is in charge");
    ctx.barrier(Group::ALL, Timeout::ms(30_000))?;
    let level = std::env::var(gaspi::env::LOG).unwrap_or_else(|_| "unset".into());
    println!(
        "rank {}: {}={level}, own subscriber installed after init",
        ctx.rank(),
        gaspi::env::LOG
    );
    ctx.term(Timeout::ms(10_000))
}
