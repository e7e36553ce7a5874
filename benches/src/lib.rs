//! Criterion benchmarks and sweep binaries for gaspi and allreduce.
