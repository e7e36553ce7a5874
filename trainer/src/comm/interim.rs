//! Interim stand-in for the `allreduce` crate's API (`Allreduce`, `broadcast`), used only until
//! that crate lands on main; it is replaced by `use allreduce::...` in `comm.rs` then.
//! Correct but slow: it runs the GASPI small allreduce in chunks, blocking in `wait`.

use std::sync::Arc;

use gaspi::{Context, Group, Rank, ReduceOp, Timeout};

/// Reduction operation (only `Sum` is used by the trainer).
#[derive(Clone, Copy, Debug)]
pub enum Op {
    Sum,
}

/// Algorithm options (none in the stand-in).
#[derive(Clone, Debug, Default)]
pub struct Options {}

pub type Result<T> = std::result::Result<T, gaspi::Error>;

const RUN_TIMEOUT: Timeout = Timeout::ms(120_000);

pub struct Allreduce<T> {
    ctx: Arc<Context>,
    group: Group,
    input: Vec<T>,
    output: Vec<T>,
    started: bool,
}

impl Allreduce<f32> {
    pub fn new(
        ctx: &Arc<Context>,
        group: Group,
        count: usize,
        _op: Op,
        _options: Options,
    ) -> Result<Self> {
        Ok(Allreduce {
            ctx: Arc::clone(ctx),
            group,
            input: vec![0.0; count],
            output: vec![0.0; count],
            started: false,
        })
    }

    pub fn input_mut(&mut self) -> Result<&mut [f32]> {
        Ok(&mut self.input)
    }

    pub fn start(&mut self) -> Result<()> {
        self.started = true;
        Ok(())
    }

    /// Runs the whole reduction now. The stand-in cannot resume a partial run, so a short
    /// `timeout` is not honoured: it blocks up to `RUN_TIMEOUT` instead.
    pub fn wait(&mut self, _timeout: Timeout) -> Result<&[f32]> {
        if self.started {
            sum_chunked(
                &self.ctx,
                self.group,
                &self.input,
                &mut self.output,
                RUN_TIMEOUT,
            )?;
            self.started = false;
        }
        Ok(&self.output)
    }
}

fn sum_chunked(
    ctx: &Context,
    group: Group,
    input: &[f32],
    output: &mut [f32],
    timeout: Timeout,
) -> Result<()> {
    let max = ctx.config().allreduce_elem_max.max(1) as usize;
    for (i, o) in input.chunks(max).zip(output.chunks_mut(max)) {
        ctx.allreduce(i, o, ReduceOp::Sum, group, timeout)?;
    }
    Ok(())
}

/// Root's values everywhere: a sum where every other rank contributes zeros (exact).
pub fn broadcast(
    ctx: &Arc<Context>,
    group: Group,
    root: Rank,
    data: &mut [f32],
    timeout: Timeout,
) -> Result<()> {
    if ctx.rank() != root {
        data.fill(0.0);
    }
    let input = data.to_vec();
    sum_chunked(ctx, group, &input, data, timeout)
}
