//! Property tests: the bucket layout's invariants and the ready tracker's once-per-step promise.

use std::collections::BTreeSet;

use fusion::{
    BucketId, BucketPlan, DType, Error, FusionThreshold, ParamId, ParamSpec, ReadyTracker,
};
use proptest::prelude::*;

fn any_dtype() -> impl Strategy<Value = DType> {
    proptest::sample::select(DType::ALL.to_vec())
}

/// Models with mixed dtypes, mostly runs of one dtype as real models have.
fn mixed_params() -> impl Strategy<Value = Vec<ParamSpec>> {
    prop::collection::vec(
        (0usize..3000, any_dtype(), prop::bool::weighted(0.8)),
        0..40,
    )
    .prop_map(|raw| {
        let mut previous = DType::F32;
        raw.into_iter()
            .map(|(numel, dtype, keep_previous)| {
                let dtype = if keep_previous { previous } else { dtype };
                previous = dtype;
                ParamSpec::new(numel, dtype)
            })
            .collect()
    })
}

fn single_dtype_params() -> impl Strategy<Value = Vec<ParamSpec>> {
    (any_dtype(), prop::collection::vec(0usize..3000, 0..40)).prop_map(|(dtype, numels)| {
        numels
            .into_iter()
            .map(|n| ParamSpec::new(n, dtype))
            .collect()
    })
}

fn fusion_thresholds() -> impl Strategy<Value = FusionThreshold> {
    prop_oneof![Just(0usize), 1usize..64, 0usize..40_000, Just(usize::MAX),]
        .prop_map(FusionThreshold::from_bytes)
}

/// A model, a threshold and a permutation of its parameters (a plausible ready order).
fn model_with_order() -> impl Strategy<Value = (Vec<ParamSpec>, FusionThreshold, Vec<ParamId>)> {
    (mixed_params(), fusion_thresholds()).prop_flat_map(|(params, fusion_threshold)| {
        let ids: Vec<ParamId> = (0..params.len()).map(ParamId).collect();
        (
            Just(params),
            Just(fusion_threshold),
            Just(ids).prop_shuffle(),
        )
    })
}

fn size_of(spec: &ParamSpec) -> usize {
    spec.numel * spec.dtype.size_bytes()
}

/// Checks every layout invariant of `plan`, built from `params` in `order`.
fn check_plan(plan: &BucketPlan, params: &[ParamSpec], order: &[ParamId]) {
    let threshold_bytes = plan.fusion_threshold().bytes();
    let buckets = plan.buckets();

    // Order respected: reading the buckets front to back gives the bucketing order.
    let flattened: Vec<ParamId> = buckets
        .iter()
        .flat_map(|b| b.members().iter().map(|m| m.param))
        .collect();
    assert_eq!(flattened, order);
    assert_eq!(plan.order(), order);

    // Every parameter in exactly one bucket, and `locate` agrees.
    let distinct: BTreeSet<ParamId> = flattened.iter().copied().collect();
    assert_eq!(distinct.len(), params.len());
    assert_eq!(flattened.len(), params.len());

    for (index, bucket) in buckets.iter().enumerate() {
        assert_eq!(bucket.id(), BucketId(index));
        assert!(!bucket.members().is_empty());

        // Sizes add up, members packed without gaps, one dtype per bucket.
        let mut offset = 0;
        for (at, member) in bucket.members().iter().enumerate() {
            let spec = params[member.param.0];
            assert_eq!(member.dtype, bucket.dtype());
            assert_eq!((member.numel, member.dtype), (spec.numel, spec.dtype));
            assert_eq!(member.size_bytes, size_of(&spec));
            assert_eq!(member.offset_bytes, offset);
            assert_eq!(member.offset_elements * spec.dtype.size_bytes(), offset);
            let (located_bucket, located) = plan.locate(member.param).unwrap();
            assert_eq!((located_bucket, located), (bucket.id(), member));
            assert_eq!(plan.member_index(member.param).unwrap(), (bucket.id(), at));
            offset += member.size_bytes;
        }
        assert_eq!(bucket.total_bytes(), offset);
        assert_eq!(
            bucket.total_elements() * bucket.dtype().size_bytes(),
            offset
        );

        // At least the threshold, unless it is the last bucket or a dtype change closed it.
        let closed_by_dtype_change = buckets
            .get(index + 1)
            .is_some_and(|next| next.dtype() != bucket.dtype());
        if index + 1 < buckets.len() && !closed_by_dtype_change {
            assert!(bucket.total_bytes() >= threshold_bytes);
        }

        // Minimal: without its last member the bucket would be below the threshold.
        let last = bucket.members().last().unwrap();
        if bucket.members().len() > 1 {
            assert!(bucket.total_bytes() - last.size_bytes < threshold_bytes);
        }
    }
    assert_eq!(
        plan.total_bytes(),
        params.iter().map(size_of).sum::<usize>()
    );
}

/// Marks every parameter in `order`; checks each bucket is reported once, when complete.
fn run_step(tracker: &mut ReadyTracker, order: &[ParamId]) {
    let plan = tracker.plan().clone();
    let mut reported = Vec::new();
    for (count, &param) in order.iter().enumerate() {
        assert!(!tracker.is_step_complete() || plan.num_buckets() == 0);
        let completed = tracker.mark_ready(param).unwrap();
        assert_eq!(tracker.num_marked(), count + 1);
        let bucket = plan.bucket_of(param).unwrap();
        let all_members_marked = plan
            .bucket(bucket)
            .unwrap()
            .members()
            .iter()
            .all(|m| tracker.is_marked(m.param).unwrap());
        // Reported exactly when the last member arrives.
        assert_eq!(completed, all_members_marked.then_some(bucket));
        assert_eq!(
            tracker.is_bucket_complete(bucket).unwrap(),
            all_members_marked
        );
        reported.extend(completed);
        let pending: Vec<BucketId> = tracker.pending_buckets().collect();
        assert_eq!(pending.len() + reported.len(), plan.num_buckets());
        assert!(pending.iter().all(|b| !reported.contains(b)));
    }
    let mut sorted = reported.clone();
    sorted.sort();
    let all: Vec<BucketId> = (0..plan.num_buckets()).map(BucketId).collect();
    assert_eq!(sorted, all, "each bucket reported exactly once");
    assert!(tracker.is_step_complete());

    // Any further mark in this step is a double mark.
    if let Some(&param) = order.first() {
        assert!(matches!(
            tracker.mark_ready(param),
            Err(Error::ParamMarkedTwice { .. })
        ));
    }
    if !order.is_empty() {
        assert_eq!(tracker.observed_order().unwrap(), order);
    }
}

proptest! {
    #[test]
    fn reverse_registration_plans_hold_every_invariant(
        params in mixed_params(),
        fusion_threshold in fusion_thresholds(),
    ) {
        let plan = BucketPlan::new(&params, fusion_threshold).unwrap();
        let reverse: Vec<ParamId> = (0..params.len()).rev().map(ParamId).collect();
        check_plan(&plan, &params, &reverse);
    }

    #[test]
    fn single_dtype_buckets_reach_the_threshold_except_the_last(
        params in single_dtype_params(),
        fusion_threshold in fusion_thresholds(),
    ) {
        let plan = BucketPlan::new(&params, fusion_threshold).unwrap();
        let buckets = plan.buckets();
        for bucket in buckets.iter().take(buckets.len().saturating_sub(1)) {
            prop_assert!(bucket.total_bytes() >= fusion_threshold.bytes());
        }
        if fusion_threshold.bytes() == 0 {
            prop_assert_eq!(buckets.len(), params.len());
        }
        if fusion_threshold.bytes() == usize::MAX {
            prop_assert_eq!(buckets.len(), usize::from(!params.is_empty()));
        }
    }

    #[test]
    fn plans_in_any_order_hold_every_invariant(
        (params, fusion_threshold, order) in model_with_order(),
    ) {
        let plan = BucketPlan::with_order(&params, &order, fusion_threshold).unwrap();
        check_plan(&plan, &params, &order);
    }

    #[test]
    fn ready_fires_once_per_bucket_per_step_in_any_order(
        (params, fusion_threshold, first_order) in model_with_order(),
        seed in any::<u64>(),
    ) {
        let mut tracker = ReadyTracker::from_params(&params, fusion_threshold).unwrap();
        run_step(&mut tracker, &first_order);

        // A second step in another order (a rotation of the first, driven by `seed`).
        let mut second_order = first_order.clone();
        if !second_order.is_empty() {
            let shift = (seed % second_order.len() as u64) as usize;
            second_order.rotate_left(shift);
        }
        tracker.begin_step();
        run_step(&mut tracker, &second_order);
    }

    #[test]
    fn rebuild_lays_buckets_out_in_the_observed_order(
        (params, fusion_threshold, order) in model_with_order(),
    ) {
        let mut tracker = ReadyTracker::from_params(&params, fusion_threshold).unwrap();
        run_step(&mut tracker, &order);
        if params.is_empty() {
            prop_assert_eq!(tracker.rebuild_from_observed_order(), Err(Error::NoObservedOrder));
            return Ok(());
        }
        let rebuilt = tracker.rebuild_from_observed_order().unwrap();
        check_plan(&rebuilt, &params, &order);
        prop_assert_eq!(rebuilt.fusion_threshold(), fusion_threshold);
        // The tracker runs over the new plan, and a step in the observed order fires each
        // bucket once, in bucket order.
        let mut fired = Vec::new();
        for &param in &order {
            fired.extend(tracker.mark_ready(param).unwrap());
        }
        let expected: Vec<BucketId> = (0..rebuilt.num_buckets()).map(BucketId).collect();
        prop_assert_eq!(fired, expected);
    }

    #[test]
    fn marking_an_incomplete_step_twice_errors(
        (params, fusion_threshold, order) in model_with_order(),
        cut in any::<prop::sample::Index>(),
    ) {
        prop_assume!(!order.is_empty());
        let mut tracker = ReadyTracker::from_params(&params, fusion_threshold).unwrap();
        let marked = cut.index(order.len()) + 1;
        for &param in &order[..marked] {
            tracker.mark_ready(param).unwrap();
        }
        let again = order[cut.index(marked)];
        prop_assert_eq!(
            tracker.mark_ready(again),
            Err(Error::ParamMarkedTwice { param: again, step: 0 })
        );
        prop_assert_eq!(tracker.num_marked(), marked);
    }
}
