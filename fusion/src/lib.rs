//! Tensor-fusion bucketer: packs gradients into buckets and reports when a bucket is complete. Pure logic, no I/O.
