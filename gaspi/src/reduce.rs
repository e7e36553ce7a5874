//! The small group allreduce (`gaspi_allreduce`, `gaspi_allreduce_user`): at most
//! `allreduce_elem_max` elements (any positive number; more than one round buffer's worth
//! runs in rounds), for reductions of scalars such as norms, counts and flags. Large
//! reductions at bandwidth belong to the `allreduce` crate.

use crate::context::Context;
use crate::error::{Error, Result};
use crate::types::{ElementType, Group, ReduceOp, Timeout};

/// A user reduction for [`Context::allreduce_user`]: `reduce(a, b, out)` with `a` the value
/// of the lower group member.
pub type UserReduce<'a> = dyn FnMut(&[u8], &[u8], &mut [u8]) -> Result<()> + 'a;

/// Element types of the built-in small allreduce.
pub trait Reducible: bytemuck::Pod + PartialOrd + private::Sealed {
    /// The `gaspi_datatype_t` of this type, as it is sent to the group.
    const TYPE: ElementType;
    /// The sum of [`ReduceOp::Sum`](crate::ReduceOp::Sum): wrapping for integers,
    /// IEEE addition for floats.
    fn add(self, other: Self) -> Self;
}

mod private {
    pub trait Sealed {}
}

macro_rules! reducible {
    ($($t:ty => $e:ident, $add:expr);* $(;)?) => {$(
        impl private::Sealed for $t {}
        impl Reducible for $t {
            const TYPE: ElementType = ElementType::$e;
            fn add(self, other: Self) -> Self {
                let f: fn($t, $t) -> $t = $add;
                f(self, other)
            }
        }
    )*};
}

reducible! {
    i32 => I32, |a, b| a.wrapping_add(b);
    u32 => U32, |a, b| a.wrapping_add(b);
    f32 => F32, |a, b| a + b;
    f64 => F64, |a, b| a + b;
    i64 => I64, |a, b| a.wrapping_add(b);
    u64 => U64, |a, b| a.wrapping_add(b);
}

fn combine_typed<T: Reducible>(op: ReduceOp, a: &[u8], b: &[u8], out: &mut [u8]) {
    let a: Vec<T> = bytemuck::pod_collect_to_vec(a);
    let b: Vec<T> = bytemuck::pod_collect_to_vec(b);
    let r: Vec<T> = a
        .iter()
        .zip(&b)
        .map(|(&x, &y)| match op {
            ReduceOp::Sum => x.add(y),
            ReduceOp::Min => {
                if y < x {
                    y
                } else {
                    x
                }
            }
            ReduceOp::Max => {
                if y > x {
                    y
                } else {
                    x
                }
            }
        })
        .collect();
    out.copy_from_slice(bytemuck::cast_slice(&r));
}

impl Context {
    /// At most `allreduce_elem_max` elements; none is a synchronisation of the group, as in
    /// GPI-2.
    fn check_elems(&self, num: usize) -> Result<()> {
        let max = self.sh.config.allreduce_elem_max as usize;
        if num > max {
            return Err(Error::InvalidNumber(format!(
                "allreduce of {num} elements (at most {max})"
            )));
        }
        Ok(())
    }

    /// Reduces `input` element-wise over `group` into `output` on every member.
    pub fn allreduce<T: Reducible>(
        &self,
        input: &[T],
        output: &mut [T],
        op: ReduceOp,
        group: Group,
        timeout: Timeout,
    ) -> Result<()> {
        self.check_elems(input.len())?;
        self.allreduce_bytes(
            group,
            bytemuck::cast_slice(input),
            bytemuck::cast_slice_mut(output),
            std::mem::size_of::<T>(),
            &mut |a, b, out| {
                combine_typed::<T>(op, a, b, out);
                Ok(())
            },
            timeout.deadline(),
        )
    }

    /// The untyped form used by the C ABI: `num` elements of `ty` in `input`/`output`.
    pub fn allreduce_raw(
        &self,
        input: &[u8],
        output: &mut [u8],
        ty: ElementType,
        op: ReduceOp,
        group: Group,
        timeout: Timeout,
    ) -> Result<()> {
        if !input.len().is_multiple_of(ty.size()) {
            return Err(Error::InvalidSize(format!(
                "{} bytes is not a whole number of {ty:?}",
                input.len()
            )));
        }
        self.check_elems(input.len() / ty.size())?;
        let combine: fn(ReduceOp, &[u8], &[u8], &mut [u8]) = match ty {
            ElementType::I32 => combine_typed::<i32>,
            ElementType::U32 => combine_typed::<u32>,
            ElementType::F32 => combine_typed::<f32>,
            ElementType::F64 => combine_typed::<f64>,
            ElementType::I64 => combine_typed::<i64>,
            ElementType::U64 => combine_typed::<u64>,
        };
        self.allreduce_bytes(
            group,
            input,
            output,
            ty.size(),
            &mut |a, b, out| {
                combine(op, a, b, out);
                Ok(())
            },
            timeout.deadline(),
        )
    }

    /// Reduces `num = input.len() / elem_size` elements with a user reduction
    /// (`gaspi_allreduce_user`). `reduce(a, b, out)` gets the lower member's value first.
    pub fn allreduce_user(
        &self,
        input: &[u8],
        output: &mut [u8],
        elem_size: usize,
        reduce: &mut UserReduce<'_>,
        group: Group,
        timeout: Timeout,
    ) -> Result<()> {
        if elem_size == 0 || !input.len().is_multiple_of(elem_size) {
            return Err(Error::InvalidSize(format!(
                "element size {elem_size} for {} bytes",
                input.len()
            )));
        }
        self.check_elems(input.len() / elem_size)?;
        let max = self.allreduce_buf_size();
        if input.len() as u64 > max {
            return Err(Error::InvalidSize(format!(
                "allreduce_user of {} bytes (at most allreduce_buf_size, {max})",
                input.len()
            )));
        }
        self.allreduce_bytes(group, input, output, elem_size, reduce, timeout.deadline())
    }

    /// The most bytes of one `allreduce_user` (`gaspi_allreduce_buf_size`):
    /// `allreduce_elem_max` elements of 8 bytes, as in GPI-2. (The configuration's
    /// `allreduce_buf_size` sizes the rounds of the small allreduce instead.)
    pub fn allreduce_buf_size(&self) -> u64 {
        u64::from(self.sh.config.allreduce_elem_max) * 8
    }

    /// `gaspi_allreduce_elem_max`.
    pub fn allreduce_elem_max(&self) -> u32 {
        self.sh.config.allreduce_elem_max
    }
}
