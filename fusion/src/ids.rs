//! Newtypes for indices, so a parameter index is never confused with a bucket index.

use std::fmt;

/// A parameter's index in registration order (the order the model created its parameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ParamId(pub usize);

/// A bucket's index in its plan. Bucket 0 is the one expected to complete first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BucketId(pub usize);

impl ParamId {
    /// The index as a `usize`, for indexing the caller's own per-parameter tables.
    pub fn index(self) -> usize {
        self.0
    }
}

impl BucketId {
    /// The index as a `usize`, for indexing the caller's own per-bucket tables.
    pub fn index(self) -> usize {
        self.0
    }
}

impl fmt::Display for ParamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

impl fmt::Display for BucketId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}
