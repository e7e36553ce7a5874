//! Bucket layout: which parameters share a bucket, and where each lives in the bucket's buffer.
//!
//! Buckets are filled in the order gradients are expected to become ready: reverse registration
//! order at first (backward visits layers last to first), the observed order after a rebuild.
//! A bucket is closed as soon as it holds at least the threshold, so it overshoots by at most
//! its last tensor and is minimal: without its last member it would be below the threshold.
//! A dtype change also closes the current bucket, because a bucket is one typed buffer.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::fusion_threshold::FusionThreshold;
use crate::ids::{BucketId, ParamId};

/// What the bucketer needs to know about a parameter: its element count and type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParamSpec {
    /// Number of elements.
    pub numel: usize,
    /// Element type.
    pub dtype: DType,
}

impl ParamSpec {
    /// A parameter of `numel` elements of `dtype`.
    pub const fn new(numel: usize, dtype: DType) -> Self {
        ParamSpec { numel, dtype }
    }
}

/// One parameter's place inside its bucket's contiguous buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BucketMember {
    /// The parameter placed here.
    pub param: ParamId,
    /// Byte offset from the start of the bucket buffer.
    pub offset_bytes: usize,
    /// Element offset from the start of the bucket buffer (`offset_bytes / dtype.size_bytes()`),
    /// for indexing a typed view of the buffer.
    pub offset_elements: usize,
    /// The parameter's element count.
    pub numel: usize,
    /// The parameter's element type (the bucket's).
    pub dtype: DType,
    /// The parameter's size in the buffer: `numel * dtype.size_bytes()`.
    pub size_bytes: usize,
}

/// A group of parameters whose gradients are allreduced together as one typed buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    id: BucketId,
    dtype: DType,
    members: Vec<BucketMember>,
    total_bytes: usize,
}

impl Bucket {
    /// This bucket's index in its plan.
    pub fn id(&self) -> BucketId {
        self.id
    }

    /// The single element type of every member.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Members in buffer order (the order they are expected to become ready).
    pub fn members(&self) -> &[BucketMember] {
        &self.members
    }

    /// Size of the bucket's buffer in bytes: the members' sizes, packed without gaps.
    pub fn total_bytes(&self) -> usize {
        self.total_bytes
    }

    /// Size of the bucket's buffer in elements of [`Bucket::dtype`].
    pub fn total_elements(&self) -> usize {
        self.total_bytes / self.dtype.size_bytes()
    }
}

/// Where a parameter ended up: its bucket and its index among that bucket's members.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Placement {
    bucket: BucketId,
    member_index: usize,
}

/// The full bucket layout of a model for one fusion threshold and one ready order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketPlan {
    params: Vec<ParamSpec>,
    fusion_threshold: FusionThreshold,
    order: Vec<ParamId>,
    buckets: Vec<Bucket>,
    placements: Vec<Placement>,
}

impl BucketPlan {
    /// Buckets in reverse registration order: `params[n-1]` goes first, as backward produces it.
    pub fn new(params: &[ParamSpec], fusion_threshold: FusionThreshold) -> Result<Self> {
        let reverse_registration: Vec<ParamId> = (0..params.len()).rev().map(ParamId).collect();
        Self::with_order(params, &reverse_registration, fusion_threshold)
    }

    /// Buckets in the given order, which must list every parameter exactly once
    /// (typically the ready order observed during a step).
    pub fn with_order(
        params: &[ParamSpec],
        order: &[ParamId],
        fusion_threshold: FusionThreshold,
    ) -> Result<Self> {
        validate_order(params.len(), order)?;
        let mut builder = PlanBuilder::new(params.len(), fusion_threshold);
        for &param in order {
            let spec = params[param.0];
            let size_bytes =
                spec.numel
                    .checked_mul(spec.dtype.size_bytes())
                    .ok_or(Error::ParamTooLarge {
                        param,
                        numel: spec.numel,
                        dtype: spec.dtype,
                    })?;
            builder.push(param, spec, size_bytes)?;
        }
        let (buckets, placements) = builder.finish()?;
        Ok(BucketPlan {
            params: params.to_vec(),
            fusion_threshold,
            order: order.to_vec(),
            buckets,
            placements,
        })
    }

    /// The parameters, in registration order.
    pub fn params(&self) -> &[ParamSpec] {
        &self.params
    }

    /// How many parameters the plan places.
    pub fn num_params(&self) -> usize {
        self.params.len()
    }

    /// The fusion threshold the buckets were closed at.
    pub fn fusion_threshold(&self) -> FusionThreshold {
        self.fusion_threshold
    }

    /// The order parameters were assigned to buckets in (bucket 0's members first).
    pub fn order(&self) -> &[ParamId] {
        &self.order
    }

    /// Buckets, indexed by [`BucketId`], in the order they are expected to complete.
    pub fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }

    /// How many buckets the parameters fill.
    pub fn num_buckets(&self) -> usize {
        self.buckets.len()
    }

    /// Bucket `bucket`, or [`Error::UnknownBucket`].
    pub fn bucket(&self, bucket: BucketId) -> Result<&Bucket> {
        self.buckets.get(bucket.0).ok_or(Error::UnknownBucket {
            bucket,
            num_buckets: self.buckets.len(),
        })
    }

    /// The bucket holding `param` and the parameter's place in it.
    pub fn locate(&self, param: ParamId) -> Result<(BucketId, &BucketMember)> {
        let placement = self.placement(param)?;
        let member = &self.buckets[placement.bucket.0].members[placement.member_index];
        Ok((placement.bucket, member))
    }

    /// The bucket holding `param` and the parameter's index among that bucket's
    /// [`members`](Bucket::members).
    pub fn member_index(&self, param: ParamId) -> Result<(BucketId, usize)> {
        let placement = self.placement(param)?;
        Ok((placement.bucket, placement.member_index))
    }

    /// The bucket holding `param`.
    pub fn bucket_of(&self, param: ParamId) -> Result<BucketId> {
        Ok(self.placement(param)?.bucket)
    }

    /// Sum of all buckets' sizes, i.e. the bytes of pre-allocated bucket memory.
    pub fn total_bytes(&self) -> usize {
        // Cannot overflow: each bucket's size was computed with checked arithmetic and buckets
        // partition the parameters, whose total was checked in `PlanBuilder::finish`.
        self.buckets.iter().map(Bucket::total_bytes).sum()
    }

    fn placement(&self, param: ParamId) -> Result<Placement> {
        self.placements
            .get(param.0)
            .copied()
            .ok_or(Error::UnknownParam {
                param,
                num_params: self.params.len(),
            })
    }
}

/// Checks that `order` is a permutation of `0..num_params`.
fn validate_order(num_params: usize, order: &[ParamId]) -> Result<()> {
    if order.len() != num_params {
        return Err(Error::OrderLengthMismatch {
            expected: num_params,
            found: order.len(),
        });
    }
    let mut seen = vec![false; num_params];
    for &param in order {
        let slot = seen
            .get_mut(param.0)
            .ok_or(Error::UnknownParam { param, num_params })?;
        if std::mem::replace(slot, true) {
            return Err(Error::DuplicateInOrder { param });
        }
    }
    Ok(())
}

/// Accumulates parameters into the open bucket and closes it at the fusion threshold or a
/// dtype change.
struct PlanBuilder {
    /// The fusion threshold in bytes.
    fusion_threshold: usize,
    buckets: Vec<Bucket>,
    open: Option<Bucket>,
    placements: Vec<Option<Placement>>,
    grand_total: usize,
}

impl PlanBuilder {
    fn new(num_params: usize, fusion_threshold: FusionThreshold) -> Self {
        PlanBuilder {
            fusion_threshold: fusion_threshold.bytes(),
            buckets: Vec::new(),
            open: None,
            placements: vec![None; num_params],
            grand_total: 0,
        }
    }

    fn push(&mut self, param: ParamId, spec: ParamSpec, size_bytes: usize) -> Result<()> {
        if self.open.as_ref().is_some_and(|b| b.dtype != spec.dtype) {
            self.close_open_bucket();
        }
        let next_id = BucketId(self.buckets.len());
        let bucket = self.open.get_or_insert_with(|| Bucket {
            id: next_id,
            dtype: spec.dtype,
            members: Vec::new(),
            total_bytes: 0,
        });
        let offset_bytes = bucket.total_bytes;
        bucket.total_bytes = offset_bytes
            .checked_add(size_bytes)
            .ok_or(Error::BucketTooLarge { bucket: bucket.id })?;
        self.grand_total = self
            .grand_total
            .checked_add(size_bytes)
            .ok_or(Error::BucketTooLarge { bucket: bucket.id })?;
        self.placements[param.0] = Some(Placement {
            bucket: bucket.id,
            member_index: bucket.members.len(),
        });
        bucket.members.push(BucketMember {
            param,
            offset_bytes,
            offset_elements: offset_bytes / spec.dtype.size_bytes(),
            numel: spec.numel,
            dtype: spec.dtype,
            size_bytes,
        });
        if bucket.total_bytes >= self.fusion_threshold {
            self.close_open_bucket();
        }
        Ok(())
    }

    fn close_open_bucket(&mut self) {
        if let Some(bucket) = self.open.take() {
            self.buckets.push(bucket);
        }
    }

    fn finish(mut self) -> Result<(Vec<Bucket>, Vec<Placement>)> {
        self.close_open_bucket();
        // `validate_order` guarantees every parameter was pushed exactly once; the error is a
        // guard against that invariant breaking, not an expected outcome.
        let expected = self.placements.len();
        let found = self.placements.iter().flatten().count();
        let placements = self
            .placements
            .into_iter()
            .collect::<Option<Vec<_>>>()
            .ok_or(Error::OrderLengthMismatch { expected, found })?;
        Ok((self.buckets, placements))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(numels: &[usize]) -> Vec<ParamSpec> {
        numels
            .iter()
            .map(|&n| ParamSpec::new(n, DType::F32))
            .collect()
    }

    fn member_params(plan: &BucketPlan) -> Vec<Vec<usize>> {
        plan.buckets()
            .iter()
            .map(|b| b.members().iter().map(|m| m.param.0).collect())
            .collect()
    }

    #[test]
    fn fills_buckets_in_reverse_registration_order() {
        // 4-byte elements, threshold 40 bytes = 10 elements.
        let plan =
            BucketPlan::new(&f32s(&[4, 4, 4, 8, 2]), FusionThreshold::from_bytes(40)).unwrap();
        assert_eq!(member_params(&plan), vec![vec![4, 3], vec![2, 1, 0]]);
        let first = &plan.buckets()[0];
        assert_eq!(first.total_bytes(), 40);
        assert_eq!(first.members()[1].offset_bytes, 8);
        assert_eq!(first.members()[1].offset_elements, 2);
        // The last bucket may stay below the threshold.
        assert_eq!(plan.buckets()[1].total_bytes(), 48);
    }

    #[test]
    fn overshoots_by_the_last_tensor_only() {
        let plan = BucketPlan::new(&f32s(&[100, 1]), FusionThreshold::from_bytes(8)).unwrap();
        assert_eq!(member_params(&plan), vec![vec![1, 0]]);
        assert_eq!(plan.buckets()[0].total_bytes(), 404);
    }

    #[test]
    fn threshold_zero_gives_one_bucket_per_tensor() {
        let plan = BucketPlan::new(&f32s(&[3, 0, 5]), FusionThreshold::from_bytes(0)).unwrap();
        assert_eq!(member_params(&plan), vec![vec![2], vec![1], vec![0]]);
    }

    #[test]
    fn huge_threshold_gives_one_bucket() {
        let plan =
            BucketPlan::new(&f32s(&[3, 1, 5]), FusionThreshold::from_bytes(usize::MAX)).unwrap();
        assert_eq!(member_params(&plan), vec![vec![2, 1, 0]]);
        assert_eq!(plan.total_bytes(), 36);
    }

    #[test]
    fn a_dtype_change_starts_a_new_bucket() {
        let params = [
            ParamSpec::new(2, DType::F32),
            ParamSpec::new(2, DType::F64),
            ParamSpec::new(2, DType::F64),
        ];
        let plan = BucketPlan::new(&params, FusionThreshold::from_bytes(1024)).unwrap();
        assert_eq!(member_params(&plan), vec![vec![2, 1], vec![0]]);
        assert_eq!(plan.buckets()[0].dtype(), DType::F64);
        assert_eq!(plan.buckets()[0].total_elements(), 4);
        assert_eq!(plan.buckets()[1].dtype(), DType::F32);
    }

    #[test]
    fn an_empty_model_has_no_buckets() {
        let plan = BucketPlan::new(&[], FusionThreshold::DEFAULT).unwrap();
        assert_eq!(plan.num_buckets(), 0);
        assert_eq!(plan.total_bytes(), 0);
    }

    #[test]
    fn locates_each_param() {
        let plan = BucketPlan::new(&f32s(&[4, 4, 4]), FusionThreshold::from_bytes(32)).unwrap();
        let (bucket, member) = plan.locate(ParamId(1)).unwrap();
        assert_eq!(bucket, BucketId(0));
        assert_eq!(member.offset_bytes, 16);
        assert_eq!(plan.bucket_of(ParamId(0)).unwrap(), BucketId(1));
        assert_eq!(
            plan.locate(ParamId(3)).unwrap_err(),
            Error::UnknownParam {
                param: ParamId(3),
                num_params: 3
            }
        );
        assert!(matches!(
            plan.bucket(BucketId(2)),
            Err(Error::UnknownBucket { .. })
        ));
    }

    #[test]
    fn rejects_orders_that_are_not_permutations() {
        let params = f32s(&[1, 1, 1]);
        let t = FusionThreshold::DEFAULT;
        assert_eq!(
            BucketPlan::with_order(&params, &[ParamId(0)], t).unwrap_err(),
            Error::OrderLengthMismatch {
                expected: 3,
                found: 1
            }
        );
        assert_eq!(
            BucketPlan::with_order(&params, &[ParamId(0), ParamId(1), ParamId(1)], t).unwrap_err(),
            Error::DuplicateInOrder { param: ParamId(1) }
        );
        assert!(matches!(
            BucketPlan::with_order(&params, &[ParamId(0), ParamId(1), ParamId(7)], t),
            Err(Error::UnknownParam { .. })
        ));
    }

    #[test]
    fn rejects_params_whose_size_overflows() {
        let params = [ParamSpec::new(usize::MAX, DType::F64)];
        assert!(matches!(
            BucketPlan::new(&params, FusionThreshold::DEFAULT),
            Err(Error::ParamTooLarge { .. })
        ));
        let params = [
            ParamSpec::new(usize::MAX / 8, DType::F64),
            ParamSpec::new(usize::MAX / 8, DType::F64),
        ];
        for threshold in [0, usize::MAX] {
            assert!(matches!(
                BucketPlan::new(&params, FusionThreshold::from_bytes(threshold)),
                Err(Error::BucketTooLarge { .. })
            ));
        }
    }
}
