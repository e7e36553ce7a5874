//! Multi-process integration tests across the workspace crates.
