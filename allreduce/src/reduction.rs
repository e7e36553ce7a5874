//! The reductions an allreduce applies ([`Reduction`]) and the element-wise helpers every
//! kernel (native, portable 16-bit, AVX2) builds on, so that they all break ties the same
//! way.

/// The reduction an allreduce applies to the members' vectors, element by element.
///
/// Not [`gaspi::ReduceOp`]: that is the GASPI standard's `gaspi_operation_t` of the
/// runtime's small built-in allreduce, which has only MIN, MAX and SUM; it converts into
/// this type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reduction {
    /// The sum (wrapping on overflow for integer types).
    Sum,
    /// The smallest value; of equal values (and against NaN) the first operand is kept.
    Min,
    /// The largest value; of equal values (and against NaN) the first operand is kept.
    Max,
    /// The product (wrapping on overflow for integer types).
    Prod,
    /// The sum divided by the number of ranks. With `f16` members divide their own vector
    /// first, as NCCL's average does, so that the sum cannot overflow where the average
    /// would not (`f16` tops out at 65504); the other types divide the sum once (integer
    /// division for integers, the sum wrapping on overflow as SUM's does).
    Avg,
}

impl From<gaspi::ReduceOp> for Reduction {
    fn from(op: gaspi::ReduceOp) -> Self {
        match op {
            gaspi::ReduceOp::Min => Reduction::Min,
            gaspi::ReduceOp::Max => Reduction::Max,
            gaspi::ReduceOp::Sum => Reduction::Sum,
        }
    }
}

/// `dst[i] = f(src[i], dst[i])` when `src_first`, else `f(dst[i], src[i])`: the operand
/// order is fixed by the caller so that two ranks combining the same pair get the same bits.
#[inline(always)]
pub(crate) fn zip_apply<T: Copy>(dst: &mut [T], src: &[T], src_first: bool, f: impl Fn(T, T) -> T) {
    if src_first {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = f(*s, *d);
        }
    } else {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = f(*d, *s);
        }
    }
}

// MIN/MAX keep the first operand on ties and when the second is NaN, and are written as
// selects so they vectorize.

/// MIN of two operands: `b` only when it is strictly smaller.
#[inline(always)]
pub(crate) fn min_of<T: PartialOrd>(a: T, b: T) -> T {
    if b < a {
        b
    } else {
        a
    }
}

/// MAX of two operands: `b` only when it is strictly larger.
#[inline(always)]
pub(crate) fn max_of<T: PartialOrd>(a: T, b: T) -> T {
    if b > a {
        b
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaspi_operations_convert() {
        assert_eq!(Reduction::from(gaspi::ReduceOp::Sum), Reduction::Sum);
        assert_eq!(Reduction::from(gaspi::ReduceOp::Min), Reduction::Min);
        assert_eq!(Reduction::from(gaspi::ReduceOp::Max), Reduction::Max);
    }
}
