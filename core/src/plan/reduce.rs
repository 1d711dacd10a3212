//! Element types and reduction operators of the reducing collectives.

use std::fmt;

use super::PlanError;

/// Element type of a reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// 32-bit unsigned integer.
    U32,
    /// 64-bit unsigned integer.
    U64,
    /// 32-bit IEEE float.
    F32,
    /// 64-bit IEEE float.
    F64,
}

impl Dtype {
    /// Every element type.
    pub const ALL: [Dtype; 6] = [
        Dtype::I32,
        Dtype::I64,
        Dtype::U32,
        Dtype::U64,
        Dtype::F32,
        Dtype::F64,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 4,
            Dtype::I64 | Dtype::U64 | Dtype::F64 => 8,
        }
    }

    /// Whether it is a floating-point type (bitwise operators do not apply).
    pub fn is_float(self) -> bool {
        matches!(self, Dtype::F32 | Dtype::F64)
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dtype::I32 => "i32",
            Dtype::I64 => "i64",
            Dtype::U32 => "u32",
            Dtype::U64 => "u64",
            Dtype::F32 => "f32",
            Dtype::F64 => "f64",
        })
    }
}

/// Reduction operator (all commutative and associative on integers; on floats sum and product
/// are associative only up to rounding).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum (wrapping on integers).
    Sum,
    /// Product (wrapping on integers).
    Prod,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Bitwise and (integers only).
    Band,
    /// Bitwise or (integers only).
    Bor,
    /// Bitwise exclusive or (integers only).
    Bxor,
}

impl ReduceOp {
    /// Every operator.
    pub const ALL: [ReduceOp; 7] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Min,
        ReduceOp::Max,
        ReduceOp::Band,
        ReduceOp::Bor,
        ReduceOp::Bxor,
    ];

    /// Whether it is a bitwise operator (defined on integers only).
    pub fn is_bitwise(self) -> bool {
        matches!(self, ReduceOp::Band | ReduceOp::Bor | ReduceOp::Bxor)
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::Band => "band",
            ReduceOp::Bor => "bor",
            ReduceOp::Bxor => "bxor",
        })
    }
}

/// An element type with an operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reduction {
    /// The element type.
    pub dtype: Dtype,
    /// The operator.
    pub op: ReduceOp,
}

impl Reduction {
    /// A reduction, or [`PlanError::OpNotDefined`] for bitwise operators on floats.
    pub fn new(dtype: Dtype, op: ReduceOp) -> Result<Self, PlanError> {
        let r = Reduction { dtype, op };
        r.validate()?;
        Ok(r)
    }

    /// [`PlanError::OpNotDefined`] for a bitwise operator on floats.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.dtype.is_float() && self.op.is_bitwise() {
            return Err(PlanError::OpNotDefined {
                op: self.op,
                dtype: self.dtype,
            });
        }
        Ok(())
    }

    /// `out = a ⊕ b` elementwise. All three slices must have the same length, a multiple of the
    /// element size.
    pub fn combine(&self, a: &[u8], b: &[u8], out: &mut [u8]) -> Result<(), PlanError> {
        self.validate()?;
        let size = self.dtype.size();
        if a.len() != b.len() || a.len() != out.len() || a.len() % size != 0 {
            return Err(PlanError::Misaligned {
                bytes: a.len(),
                dtype: self.dtype,
            });
        }
        macro_rules! int {
            ($t:ty) => {{
                for ((x, y), o) in a
                    .chunks_exact(size)
                    .zip(b.chunks_exact(size))
                    .zip(out.chunks_exact_mut(size))
                {
                    let mut xb = [0u8; std::mem::size_of::<$t>()];
                    let mut yb = [0u8; std::mem::size_of::<$t>()];
                    xb.copy_from_slice(x);
                    yb.copy_from_slice(y);
                    let (x, y) = (<$t>::from_le_bytes(xb), <$t>::from_le_bytes(yb));
                    let r = match self.op {
                        ReduceOp::Sum => x.wrapping_add(y),
                        ReduceOp::Prod => x.wrapping_mul(y),
                        ReduceOp::Min => x.min(y),
                        ReduceOp::Max => x.max(y),
                        ReduceOp::Band => x & y,
                        ReduceOp::Bor => x | y,
                        ReduceOp::Bxor => x ^ y,
                    };
                    o.copy_from_slice(&r.to_le_bytes());
                }
            }};
        }
        macro_rules! float {
            ($t:ty) => {{
                for ((x, y), o) in a
                    .chunks_exact(size)
                    .zip(b.chunks_exact(size))
                    .zip(out.chunks_exact_mut(size))
                {
                    let mut xb = [0u8; std::mem::size_of::<$t>()];
                    let mut yb = [0u8; std::mem::size_of::<$t>()];
                    xb.copy_from_slice(x);
                    yb.copy_from_slice(y);
                    let (x, y) = (<$t>::from_le_bytes(xb), <$t>::from_le_bytes(yb));
                    let r = match self.op {
                        ReduceOp::Sum => x + y,
                        ReduceOp::Prod => x * y,
                        ReduceOp::Min => x.min(y),
                        ReduceOp::Max => x.max(y),
                        // Rejected by validate above.
                        ReduceOp::Band | ReduceOp::Bor | ReduceOp::Bxor => x,
                    };
                    o.copy_from_slice(&r.to_le_bytes());
                }
            }};
        }
        match self.dtype {
            Dtype::I32 => int!(i32),
            Dtype::I64 => int!(i64),
            Dtype::U32 => int!(u32),
            Dtype::U64 => int!(u64),
            Dtype::F32 => float!(f32),
            Dtype::F64 => float!(f64),
        }
        Ok(())
    }

    /// Combines `b` into `a` in place.
    pub fn accumulate(&self, a: &mut [u8], b: &[u8]) -> Result<(), PlanError> {
        let copy = a.to_vec();
        self.combine(&copy, b, a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_and_bitwise() {
        let r = Reduction::new(Dtype::I32, ReduceOp::Sum).unwrap();
        let a: Vec<u8> = [1i32, -5].iter().flat_map(|x| x.to_le_bytes()).collect();
        let b: Vec<u8> = [2i32, 3].iter().flat_map(|x| x.to_le_bytes()).collect();
        let mut o = vec![0u8; 8];
        r.combine(&a, &b, &mut o).unwrap();
        assert_eq!(&o[..4], &3i32.to_le_bytes());
        assert_eq!(&o[4..], &(-2i32).to_le_bytes());
        assert!(Reduction::new(Dtype::F64, ReduceOp::Bxor).is_err());
        let f = Reduction::new(Dtype::F64, ReduceOp::Max).unwrap();
        let mut o = vec![0u8; 8];
        f.combine(&1.5f64.to_le_bytes(), &(-2.0f64).to_le_bytes(), &mut o)
            .unwrap();
        assert_eq!(o, 1.5f64.to_le_bytes());
        assert!(r.combine(&a, &b[..4], &mut [0u8; 8]).is_err());
    }
}
