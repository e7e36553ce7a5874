//! The example models of the `train` binary. The small ones take `[N, 1, 28, 28]` images and
//! return `[N, 10]` logits (MNIST-shaped data); the two full-size ones are ResNet-50
//! (torchvision's architecture: `[N, 3, 224, 224]` images, 1000 classes, 25.6M parameters) and
//! a BERT-base-sized Transformer encoder (12 layers, 768 wide, 12 heads, 30,522-token
//! vocabulary, sequences of 128 tokens, 2 classes), trained on synthetic data on the device.
//! Parameters are registered input layer first, so backward produces their gradients in
//! reverse registration order (what the bucketer assumes).

use tch::nn::{self, ModuleT};
use tch::{Kind, Tensor};

use crate::data::{IMAGE_SIDE, NUM_CLASSES};
use crate::error::{Error, Result};

/// The models `train --model` offers.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum ModelKind {
    /// LeNet-5: two 5x5 convolutions, three dense layers (61.7k parameters).
    Lenet5,
    /// Dense layers with ReLU; sizes from `--hidden`.
    Mlp,
    /// A small ResNet: 3 residual blocks with BatchNorm.
    Resnet,
    /// A small Transformer encoder over the image rows as tokens.
    Transformer,
    /// ResNet-50 as in torchvision (224x224x3 images, 1000 classes), on synthetic data.
    Resnet50,
    /// A BERT-base-sized Transformer encoder classifying token sequences, on synthetic data.
    TransformerBase,
}

/// The inputs a model takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelInput {
    /// `[N, 1, 28, 28]` f32 images, 10 classes (the MNIST-shaped datasets).
    Mnist,
    /// `[N, channels, side, side]` f32 images.
    Images {
        /// Colour channels.
        channels: i64,
        /// Image side in pixels.
        side: i64,
        /// Classes the model tells apart.
        classes: i64,
    },
    /// `[N, seq_len]` i64 token ids below `vocab`.
    Tokens {
        /// Tokens per sequence.
        seq_len: i64,
        /// Vocabulary size.
        vocab: i64,
        /// Classes the model tells apart.
        classes: i64,
    },
}

/// BERT-base's sizes.
const BERT_BASE: TextConfig = TextConfig {
    vocab: 30_522,
    seq_len: 128,
    dim: 768,
    heads: 12,
    ff: 3072,
    layers: 12,
    classes: 2,
};

impl ModelKind {
    /// True for models whose BatchNorm statistics are computed per micro-batch.
    pub fn has_batch_norm(self) -> bool {
        matches!(self, ModelKind::Resnet | ModelKind::Resnet50)
    }

    /// What the model takes as input.
    pub fn input(self) -> ModelInput {
        match self {
            ModelKind::Resnet50 => ModelInput::Images {
                channels: 3,
                side: 224,
                classes: 1000,
            },
            ModelKind::TransformerBase => ModelInput::Tokens {
                seq_len: BERT_BASE.seq_len,
                vocab: BERT_BASE.vocab,
                classes: BERT_BASE.classes,
            },
            _ => ModelInput::Mnist,
        }
    }

    /// Builds the model's variables under `p` (`mlp_hidden` only matters for the MLP).
    pub fn build(self, p: &nn::Path, mlp_hidden: &[i64]) -> Result<Box<dyn ModuleT>> {
        Ok(match self {
            ModelKind::Lenet5 => Box::new(lenet5(p)),
            ModelKind::Mlp => Box::new(mlp(p, mlp_hidden)?),
            ModelKind::Resnet => Box::new(resnet(p)),
            ModelKind::Transformer => Box::new(Transformer::new(p, 32, 4, 2)),
            ModelKind::Resnet50 => Box::new(tch::vision::resnet::resnet50(p, 1000)),
            ModelKind::TransformerBase => Box::new(TextEncoder::new(p, &BERT_BASE)),
        })
    }
}

/// The model's forward pass (`train` selects training behaviour: BatchNorm batch statistics).
/// tch's `ModuleT` panics on libtorch errors (a shape mismatch, say), which becomes an error
/// here instead of aborting the rank.
pub fn forward(model: &dyn ModuleT, x: &Tensor, train: bool) -> Result<Tensor> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| model.forward_t(x, train))).map_err(
        |panic| {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown error");
            Error::Model(format!("forward pass failed: {message}"))
        },
    )
}

fn lenet5(p: &nn::Path) -> nn::SequentialT {
    let pad2 = nn::ConvConfig {
        padding: 2,
        ..Default::default()
    };
    nn::seq_t()
        .add(nn::conv2d(p / "conv1", 1, 6, 5, pad2))
        .add_fn(|x| x.relu().max_pool2d_default(2))
        .add(nn::conv2d(p / "conv2", 6, 16, 5, Default::default()))
        .add_fn(|x| x.relu().max_pool2d_default(2).flatten(1, -1))
        .add(nn::linear(p / "fc1", 400, 120, Default::default()))
        .add_fn(Tensor::relu)
        .add(nn::linear(p / "fc2", 120, 84, Default::default()))
        .add_fn(Tensor::relu)
        .add(nn::linear(
            p / "fc3",
            84,
            NUM_CLASSES as i64,
            Default::default(),
        ))
}

fn mlp(p: &nn::Path, hidden: &[i64]) -> Result<nn::SequentialT> {
    if let Some(bad) = hidden.iter().find(|&&h| h <= 0) {
        return Err(Error::Config(format!(
            "hidden layer size {bad} must be positive"
        )));
    }
    let mut seq = nn::seq_t().add_fn(|x| x.flatten(1, -1));
    let mut width = (IMAGE_SIDE * IMAGE_SIDE) as i64;
    for (i, &h) in hidden.iter().enumerate() {
        seq = seq
            .add(nn::linear(
                p / format!("fc{i}"),
                width,
                h,
                Default::default(),
            ))
            .add_fn(Tensor::relu);
        width = h;
    }
    Ok(seq.add(nn::linear(
        p / "out",
        width,
        NUM_CLASSES as i64,
        Default::default(),
    )))
}

fn conv_bn(p: &nn::Path, c_in: i64, c_out: i64, k: i64, stride: i64) -> nn::SequentialT {
    let conv = nn::ConvConfig {
        stride,
        padding: k / 2,
        bias: false,
        ..Default::default()
    };
    nn::seq_t()
        .add(nn::conv2d(p / "conv", c_in, c_out, k, conv))
        .add(nn::batch_norm2d(p / "bn", c_out, Default::default()))
}

fn basic_block(p: &nn::Path, c_in: i64, c_out: i64, stride: i64) -> nn::FuncT<'static> {
    let a = conv_bn(&(p / "a"), c_in, c_out, 3, stride);
    let b = conv_bn(&(p / "b"), c_out, c_out, 3, 1);
    let shortcut =
        (stride != 1 || c_in != c_out).then(|| conv_bn(&(p / "short"), c_in, c_out, 1, stride));
    nn::func_t(move |x, train| {
        let y = x.apply_t(&a, train).relu().apply_t(&b, train);
        let s = match &shortcut {
            Some(sc) => x.apply_t(sc, train),
            None => x.shallow_clone(),
        };
        (y + s).relu()
    })
}

fn resnet(p: &nn::Path) -> nn::SequentialT {
    nn::seq_t()
        .add(conv_bn(&(p / "stem"), 1, 16, 3, 1))
        .add_fn(Tensor::relu)
        .add(basic_block(&(p / "block1"), 16, 16, 1))
        .add(basic_block(&(p / "block2"), 16, 32, 2))
        .add(basic_block(&(p / "block3"), 32, 64, 2))
        .add_fn(|x| x.adaptive_avg_pool2d([1, 1]).flatten(1, -1))
        .add(nn::linear(
            p / "fc",
            64,
            NUM_CLASSES as i64,
            Default::default(),
        ))
}

/// One encoder layer: multi-head self-attention and a feed-forward block, post-norm.
#[derive(Debug)]
struct EncoderLayer {
    qkv: nn::Linear,
    proj: nn::Linear,
    norm1: nn::LayerNorm,
    ff1: nn::Linear,
    ff2: nn::Linear,
    norm2: nn::LayerNorm,
    heads: i64,
}

impl EncoderLayer {
    fn new(p: &nn::Path, dim: i64, heads: i64, ff: i64) -> Self {
        EncoderLayer {
            qkv: nn::linear(p / "qkv", dim, 3 * dim, Default::default()),
            proj: nn::linear(p / "proj", dim, dim, Default::default()),
            norm1: nn::layer_norm(p / "norm1", vec![dim], Default::default()),
            ff1: nn::linear(p / "ff1", dim, ff, Default::default()),
            ff2: nn::linear(p / "ff2", ff, dim, Default::default()),
            norm2: nn::layer_norm(p / "norm2", vec![dim], Default::default()),
            heads,
        }
    }

    fn forward(&self, x: &Tensor) -> Tensor {
        let (n, t, d) = x.size3().expect("[N, T, D] input");
        let hd = d / self.heads;
        let qkv = x
            .apply(&self.qkv)
            .view([n, t, 3, self.heads, hd])
            .permute([2, 0, 3, 1, 4]);
        let (q, k, v) = (qkv.get(0), qkv.get(1), qkv.get(2));
        let att = (q.matmul(&k.transpose(-2, -1)) / (hd as f64).sqrt()).softmax(-1, Kind::Float);
        let y = att
            .matmul(&v)
            .transpose(1, 2)
            .contiguous()
            .view([n, t, d])
            .apply(&self.proj);
        let x = (x + y).apply(&self.norm1);
        let ff = x.apply(&self.ff1).gelu("none").apply(&self.ff2);
        (x + ff).apply(&self.norm2)
    }
}

/// Image rows as 28 tokens of 28 features, a learned position embedding, encoder layers,
/// mean pooling and a linear classifier.
#[derive(Debug)]
struct Transformer {
    embed: nn::Linear,
    position: Tensor,
    layers: Vec<EncoderLayer>,
    head: nn::Linear,
}

impl Transformer {
    fn new(p: &nn::Path, dim: i64, heads: i64, depth: usize) -> Self {
        let side = IMAGE_SIDE as i64;
        Transformer {
            embed: nn::linear(p / "embed", side, dim, Default::default()),
            position: p.var(
                "position",
                &[side, dim],
                nn::Init::Randn {
                    mean: 0.0,
                    stdev: 0.02,
                },
            ),
            layers: (0..depth)
                .map(|i| EncoderLayer::new(&(p / format!("layer{i}")), dim, heads, 2 * dim))
                .collect(),
            head: nn::linear(p / "head", dim, NUM_CLASSES as i64, Default::default()),
        }
    }
}

impl ModuleT for Transformer {
    fn forward_t(&self, xs: &Tensor, _train: bool) -> Tensor {
        let side = IMAGE_SIDE as i64;
        let n = xs.size()[0];
        let mut x = xs.view([n, side, side]).apply(&self.embed) + &self.position;
        for layer in &self.layers {
            x = layer.forward(&x);
        }
        x.mean_dim(1, false, Kind::Float).apply(&self.head)
    }
}

/// The sizes of a Transformer encoder over token sequences.
#[derive(Clone, Copy, Debug)]
struct TextConfig {
    vocab: i64,
    seq_len: i64,
    dim: i64,
    heads: i64,
    ff: i64,
    layers: usize,
    classes: i64,
}

/// Token and position embeddings, encoder layers, mean pooling and a linear classifier.
#[derive(Debug)]
struct TextEncoder {
    tokens: nn::Embedding,
    position: Tensor,
    layers: Vec<EncoderLayer>,
    head: nn::Linear,
}

impl TextEncoder {
    fn new(p: &nn::Path, c: &TextConfig) -> Self {
        TextEncoder {
            tokens: nn::embedding(p / "tokens", c.vocab, c.dim, Default::default()),
            position: p.var(
                "position",
                &[c.seq_len, c.dim],
                nn::Init::Randn {
                    mean: 0.0,
                    stdev: 0.02,
                },
            ),
            layers: (0..c.layers)
                .map(|i| EncoderLayer::new(&(p / format!("layer{i}")), c.dim, c.heads, c.ff))
                .collect(),
            head: nn::linear(p / "head", c.dim, c.classes, Default::default()),
        }
    }
}

impl ModuleT for TextEncoder {
    fn forward_t(&self, tokens: &Tensor, _train: bool) -> Tensor {
        let mut x = tokens.apply(&self.tokens) + &self.position;
        for layer in &self.layers {
            x = layer.forward(&x);
        }
        x.mean_dim(1, false, Kind::Float).apply(&self.head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param_count(kind: ModelKind) -> i64 {
        let vs = nn::VarStore::new(tch::Device::Cpu);
        kind.build(&vs.root(), &[]).unwrap();
        vs.trainable_variables()
            .iter()
            .map(|t| t.numel() as i64)
            .sum()
    }

    #[test]
    fn full_size_models_have_their_published_parameter_counts() {
        // torchvision's resnet50: 25,557,032 parameters.
        assert_eq!(param_count(ModelKind::Resnet50), 25_557_032);
        // BERT-base's encoder without its pooler and token-type embeddings (which a
        // classifier over mean-pooled tokens does not use): embeddings 30,522 x 768 + 128 x
        // 768, 12 layers of 7,087,872, the 2-class head.
        let layer = 768 * 2304 + 2304 + 768 * 768 + 768 + 2 * (768 * 3072) + 3072 + 768 + 4 * 768;
        let want = 30_522 * 768 + 128 * 768 + 12 * layer + 768 * 2 + 2;
        assert_eq!(param_count(ModelKind::TransformerBase), want);
    }

    #[test]
    fn full_size_models_take_their_inputs() {
        let vs = nn::VarStore::new(tch::Device::Cpu);
        let m = ModelKind::Resnet50.build(&vs.root(), &[]).unwrap();
        let x = Tensor::zeros([1, 3, 224, 224], (Kind::Float, tch::Device::Cpu));
        assert_eq!(forward(m.as_ref(), &x, false).unwrap().size(), [1, 1000]);
        let vs = nn::VarStore::new(tch::Device::Cpu);
        let m = ModelKind::TransformerBase.build(&vs.root(), &[]).unwrap();
        let t = Tensor::zeros([2, 128], (Kind::Int64, tch::Device::Cpu));
        assert_eq!(forward(m.as_ref(), &t, false).unwrap().size(), [2, 2]);
    }
}
