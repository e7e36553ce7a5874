//! The trainer's error type: every fallible call returns [`Result`].

use std::path::PathBuf;

/// Everything that can go wrong while setting up or running data-parallel training.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A libtorch call failed (shape mismatch, bad file, ...).
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
    /// The bucketer rejected a plan or an event.
    #[error("fusion: {0}")]
    Fusion(#[from] fusion::Error),
    /// The GASPI runtime failed (peer died, timeout, ...).
    #[error("gaspi: {0}")]
    Gaspi(#[from] gaspi::Error),
    /// A gradient allreduce or broadcast failed.
    #[error("communication: {0}")]
    Comm(String),
    /// The C++ hook shim reported an exception.
    #[error("autograd hook: {0}")]
    Hook(String),
    /// A device (CUDA) call failed, or the requested device is not there.
    #[error("device: {0}")]
    Device(String),
    /// A user-facing setting is out of range or inconsistent.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The model does not fit what the data-parallel wrapper supports.
    #[error("unsupported model: {0}")]
    Model(String),
    /// The backward pass did not produce what the step expects.
    #[error("step {step}: {message}")]
    Step { step: u64, message: String },
    /// A data file is malformed.
    #[error("data file {path}: {message}")]
    Data { path: PathBuf, message: String },
    /// A checkpoint is missing or malformed.
    #[error("checkpoint {path}: {message}")]
    Checkpoint { path: PathBuf, message: String },
    /// File-system error with the path it concerns.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The communication thread is gone (it panicked or was shut down).
    #[error("the communication thread stopped: {0}")]
    CommThread(String),
}

/// `std::result::Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
