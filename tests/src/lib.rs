//! Multi-process integration tests for the workspace crates, and the helpers they share.
//!
//! Each test starts real rank processes (by re-running its own test binary through
//! [`gaspi::testing::spmd`]) over TCP and over shared memory, with 2 to 5 ranks, and is bounded
//! in time: a job that does not finish is killed and the test fails with every rank's output.

/// Defines one module of multi-process tests: the same body on several (ranks, transport)
/// cases, each its own `#[test]`.
///
/// ```ignore
/// spmd_cases!(ring, |ctx| { /* body on every rank */ }, tcp_2 = (2, Tcp), shm_5 = (5, Shm));
/// ```
#[macro_export]
macro_rules! spmd_cases {
    ($name:ident, $body:expr, $($case:ident = ($n:expr, $t:ident)),+ $(,)?) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                fn $case() {
                    gaspi::testing::spmd(
                        concat!(stringify!($name), "::", stringify!($case)),
                        $n,
                        gaspi::env::TransportChoice::$t,
                        $body,
                    );
                }
            )+
        }
    };
}

/// The README's examples run as doctests, so the front page cannot rot.
#[doc = include_str!("../../README.md")]
pub mod readme {}
