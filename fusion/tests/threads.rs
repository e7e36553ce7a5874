//! The tracker behind a mutex, marked from several threads as autograd hooks would.

use std::sync::{Arc, Mutex};
use std::thread;

use fusion::{BucketId, DType, FusionThreshold, ParamId, ParamSpec, ReadyTracker};

#[test]
fn concurrent_marks_report_each_bucket_once() {
    let params: Vec<ParamSpec> = (1..=64)
        .map(|n| ParamSpec::new(n * 16, DType::F32))
        .collect();
    let tracker =
        ReadyTracker::from_params(&params, FusionThreshold::from_kib(4).unwrap()).unwrap();
    let num_buckets = tracker.plan().num_buckets();
    let tracker = Arc::new(Mutex::new(tracker));

    for _step in 0..3 {
        tracker.lock().unwrap().begin_step();
        let workers: Vec<_> = (0..4)
            .map(|worker| {
                let tracker = Arc::clone(&tracker);
                thread::spawn(move || {
                    let mut completed = Vec::new();
                    for param in (worker..64).step_by(4) {
                        let mut tracker = tracker.lock().unwrap();
                        completed.extend(tracker.mark_ready(ParamId(param)).unwrap());
                    }
                    completed
                })
            })
            .collect();
        let mut completed: Vec<BucketId> = workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        completed.sort();
        assert_eq!(
            completed,
            (0..num_buckets).map(BucketId).collect::<Vec<_>>()
        );
        assert!(tracker.lock().unwrap().is_step_complete());
    }
}
