//! A library never installs a global `tracing` subscriber: an application that sets up its own
//! after `Context::init` (which panics when one is already set) runs, even with `GASPI_LOG`
//! set as the launcher sets it. Its own file: the subscriber and the variable are per process.

use gaspi::Context;

#[test]
fn an_application_installs_its_own_subscriber_after_init() {
    // Set before the runtime starts any thread; this binary holds this one test.
    std::env::set_var(gaspi::env::LOG, "info");
    let ctx = Context::init().expect("a job of one rank");
    // Panics ("a global default trace dispatcher has already been set") if init installed one.
    tracing_subscriber::fmt().with_test_writer().init();
    tracing::info!("the application's own subscriber is in charge");
    ctx.term(gaspi::Timeout::ms(10_000)).unwrap();
}
