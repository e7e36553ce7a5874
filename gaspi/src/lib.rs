//! A GASPI runtime in Rust (work in progress: see the `env` module for the launcher contract).

pub mod env;
pub mod error;
pub mod types;

pub use error::{Error, Result};
pub use types::*;
