//! The trainer's error type: every fallible call returns [`Result`].
//!
//! Errors of the layers below keep their type: a collective's failure carries the
//! [`allreduce::Error`] it came from (a dead peer, a timeout, a bad buffer), the runtime's a
//! [`gaspi::Error`], the bucketer's a [`fusion::Error`], so a caller can tell a peer failure
//! from a timeout from bad input by matching, not by reading the message.

use std::fmt;
use std::path::{Path, PathBuf};

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
    /// A collective of the gradient path (a bucket allreduce, a weight broadcast) failed:
    /// `source` says whether a peer failed ([`allreduce::Error::Gaspi`]), the communication
    /// timeout passed ([`allreduce::Error::is_timeout`]) or the collective could not take its
    /// buffer.
    #[error("communication: {action}: {source}")]
    Collective {
        /// What the trainer was doing, e.g. "starting a bucket allreduce".
        action: &'static str,
        /// The collective's error.
        #[source]
        source: allreduce::Error,
    },
    /// A bucket's allreduce did not complete within the communication timeout
    /// ([`Comm::with_timeout`](crate::Comm::with_timeout)): a peer is stuck, or far slower.
    #[error("communication: bucket {bucket}: allreduce did not complete within the timeout")]
    BucketTimeout {
        /// The bucket's index in the plan.
        bucket: usize,
        /// The collective's timeout error.
        #[source]
        source: allreduce::Error,
    },
    /// A bucket's gradients, copied from the GPU, did not reach its host buffer within the
    /// communication timeout.
    #[error(
        "communication: bucket {bucket}: its gradients did not reach the host within the \
         timeout"
    )]
    StagingTimeout {
        /// The bucket's index in the plan.
        bucket: usize,
    },
    /// A bucket was not handed to the communication thread in a step (the hook of its last
    /// gradient failed; the step's hook errors say why).
    #[error("communication: bucket {bucket} never became ready in this step")]
    BucketNotReady {
        /// The bucket's index in the plan.
        bucket: usize,
    },
    /// The communication thread was handed a bucket twice in one step (a bug).
    #[error("communication: bucket {bucket} started twice")]
    BucketStartedTwice {
        /// The bucket's index in the plan.
        bucket: usize,
    },
    /// A gradient's hook could not record where its stream had got to (device path), so
    /// its bucket cannot be packed safely.
    #[error("communication: parameter {param}'s gradient was not marked ready on its stream")]
    GradientNotMarked {
        /// The parameter's registration index.
        param: usize,
    },
    /// A trainable parameter has no gradient where its bucket's reduction needs one.
    #[error("communication: parameter {param} has no gradient")]
    MissingGradient {
        /// The parameter's index in registration order.
        param: usize,
    },
    /// The ranks' evaluation shares did not add up to the split (the ranks disagree about
    /// the data).
    #[error("communication: evaluation counted {counted} samples, the split has {split}")]
    EvaluationCount {
        /// Samples counted over all ranks.
        counted: usize,
        /// Samples in the split.
        split: usize,
    },
    /// The C++ hook shim reported an exception.
    #[error("autograd hook: {0}")]
    Hook(String),
    /// The autograd hooks of a step's backward pass failed.
    #[error("step {step}: {failures}")]
    Backward {
        /// The step (1 for the first).
        step: u64,
        /// What failed, in order.
        #[source]
        failures: HookFailures,
    },
    /// Backward produced no gradient for some trainable parameters: they do not take part
    /// in the loss, and the buckets holding them can never be reduced.
    #[error(
        "step {step}: backward produced no gradient for parameter(s) {params:?} (registration \
         order); every trainable parameter must take part in the loss"
    )]
    UnusedParameters {
        /// The step (1 for the first).
        step: u64,
        /// The parameters without a gradient, by index in registration order.
        params: Vec<usize>,
    },
    /// A device (CUDA) call failed, or the requested device is not there.
    #[error("device: {0}")]
    Device(String),
    /// A user-facing setting is out of range or inconsistent.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The model does not fit what the data-parallel wrapper supports.
    #[error("unsupported model: {0}")]
    Model(String),
    /// A step was asked of a [`DataParallel`](crate::DataParallel) whose earlier step failed.
    /// That step's collectives may still be in flight on other ranks and cannot be cancelled,
    /// so the wrapper takes no more steps: the job stops, or starts over on every rank.
    #[error(
        "step {failed} failed, and its allreduces may still be in flight: this data-parallel \
         wrapper takes no further steps"
    )]
    AfterFailedStep {
        /// The step that failed (1 for the first).
        failed: u64,
    },
    /// The training step cannot go on (a loss that is not finite, ...).
    #[error("step {step}: {message}")]
    Step {
        /// The step (1 for the first).
        step: u64,
        /// What happened.
        message: String,
    },
    /// A data file is malformed.
    #[error("data file {path}: {message}")]
    Data {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A checkpoint is missing or malformed.
    #[error("checkpoint {path}: {message}")]
    Checkpoint {
        /// The checkpoint directory or file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// File-system error with the path it concerns.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The communication thread is gone (it panicked or was shut down).
    #[error("the communication thread stopped: {0}")]
    CommThread(&'static str),
    /// The communication thread could not be started.
    #[error("the communication thread could not be started: {0}")]
    CommThreadSpawn(#[source] std::io::Error),
}

/// `std::result::Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// [`Error::Io`] about `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// [`Error::Data`]: the data file `path` is malformed.
    pub(crate) fn data(path: &Path, message: impl Into<String>) -> Self {
        Error::Data {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }

    /// [`Error::Checkpoint`]: the checkpoint at `path` is missing or malformed.
    pub(crate) fn checkpoint(path: &Path, message: impl Into<String>) -> Self {
        Error::Checkpoint {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}

/// One thing that went wrong inside the autograd hooks during a backward pass.
#[derive(Debug, thiserror::Error)]
pub enum HookFailure {
    /// The bucketer rejected a gradient's ready event (e.g. a parameter's hook fired twice).
    #[error(transparent)]
    Ready(fusion::Error),
    /// A complete bucket could not be packed for its allreduce (device path); it was not
    /// started.
    #[error("sending bucket {bucket}: {source}")]
    Send {
        /// The bucket's index in the plan.
        bucket: usize,
        /// Why packing failed.
        #[source]
        source: Box<Error>,
    },
    /// A gradient's event could not be recorded on the stream that produced it (device
    /// path); its bucket is not sent.
    #[error("marking parameter {param}'s gradient ready: {source}")]
    GradReady {
        /// The parameter's registration index.
        param: usize,
        /// Why recording failed.
        #[source]
        source: Box<Error>,
    },
    /// The callback that marks the end of backward could not be queued.
    #[error("queueing the end-of-backward callback: {0}")]
    QueueEndOfBackward(#[source] Box<Error>),
    /// A complete bucket could not be handed over: the communication thread is gone.
    #[error("the communication thread is gone")]
    CommThreadGone,
    /// A hook panicked (a bug); caught, so that the step fails instead of hanging.
    #[error("an autograd hook panicked")]
    Panicked,
}

/// Every [`HookFailure`] of one backward pass, in the order they happened; its source is the
/// first.
#[derive(Debug)]
pub struct HookFailures(pub Vec<HookFailure>);

impl fmt::Display for HookFailures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, failure) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{failure}")?;
        }
        Ok(())
    }
}

impl std::error::Error for HookFailures {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .first()
            .map(|failure| failure as &(dyn std::error::Error + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_failures_read_as_one_message_and_keep_their_types() {
        let e = Error::Backward {
            step: 3,
            failures: HookFailures(vec![
                HookFailure::Ready(fusion::Error::ParamMarkedTwice {
                    param: fusion::ParamId(1),
                    step: 3,
                }),
                HookFailure::CommThreadGone,
            ]),
        };
        assert_eq!(
            e.to_string(),
            "step 3: parameter #1 was marked ready twice in step 3; the communication thread \
             is gone"
        );
        let first = std::error::Error::source(&e)
            .and_then(std::error::Error::source)
            .and_then(|s| s.downcast_ref::<HookFailure>());
        assert!(matches!(
            first,
            Some(HookFailure::Ready(fusion::Error::ParamMarkedTwice { .. }))
        ));
    }

    #[test]
    fn a_bucket_timeout_is_told_apart_by_its_source() {
        let e = Error::BucketTimeout {
            bucket: 2,
            source: allreduce::Error::Timeout,
        };
        assert_eq!(
            e.to_string(),
            "communication: bucket 2: allreduce did not complete within the timeout"
        );
        assert!(matches!(&e, Error::BucketTimeout { source, .. } if source.is_timeout()));
        let e = Error::Collective {
            action: "broadcast",
            source: allreduce::Error::LengthMismatch {
                given: 3,
                expected: 2,
            },
        };
        assert!(
            e.to_string().starts_with("communication: broadcast: "),
            "{e}"
        );
        assert!(matches!(
            &e,
            Error::Collective {
                source: allreduce::Error::LengthMismatch { given: 3, .. },
                ..
            }
        ));
    }
}
