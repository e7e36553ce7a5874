//! A data-parallel wrapper whose step failed takes no further steps: that step's allreduces
//! may still be in flight on other ranks, and nothing may refill their buffers.

use tch::nn::{self, Module};
use trainer::{global_batch_loss, Comm, DataParallel, DdpConfig, Error};

#[test]
fn after_a_failed_step_every_later_step_fails_with_the_failed_ones_number() {
    let comm = Comm::init().unwrap(); // one rank: no launcher
    let vs = nn::VarStore::new(tch::Device::Cpu);
    let used = nn::linear(vs.root() / "used", 4, 2, Default::default());
    // A parameter the loss never reaches: its gradient never arrives, so the step fails.
    let _unused = nn::linear(vs.root() / "unused", 4, 2, Default::default());
    let mut ddp = DataParallel::new(&comm, &vs, DdpConfig::default()).unwrap();
    let x = tch::Tensor::randn([8, 4], (tch::Kind::Float, tch::Device::Cpu));
    let y = tch::Tensor::zeros([8], (tch::Kind::Int64, tch::Device::Cpu));
    let step = |ddp: &mut DataParallel| {
        ddp.zero_grad();
        let (loss, _) = global_batch_loss(&used.forward(&x), &y, 8).unwrap();
        ddp.backward(&loss)
    };
    match step(&mut ddp) {
        Err(Error::UnusedParameters { step: 1, params }) => assert!(!params.is_empty()),
        other => panic!("step 1: {other:?}"),
    }
    for _ in 0..2 {
        match step(&mut ddp) {
            Err(e @ Error::AfterFailedStep { failed: 1 }) => {
                assert!(e.to_string().contains("step 1 failed"), "{e}")
            }
            other => panic!("after the failed step: {other:?}"),
        }
    }
}
