//! The element type gradients travel in between ranks (`--grad-dtype`): what the bucket
//! allreduces are created for and what the staging converts the gradients to and from.

use tch::Kind;

/// The element type gradients travel in (`--grad-dtype`).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum GradDtype {
    /// f32: exact sums (up to summation order).
    #[default]
    F32,
    /// bfloat16: half the bytes; each pairwise sum is computed in f32 and rounded once.
    Bf16,
}

impl GradDtype {
    /// The libtorch element type of this wire type, for the tensors over a bucket's buffer.
    pub fn kind(self) -> Kind {
        match self {
            GradDtype::F32 => Kind::Float,
            GradDtype::Bf16 => Kind::BFloat16,
        }
    }
}
