//! The communication thread: owns one allreduce per bucket, starts a bucket's allreduce as
//! soon as the hooks report it complete (backward keeps running meanwhile), and at the end of
//! the step waits for every bucket and writes the summed gradients back into `.grad`.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use fusion::{BucketId, BucketPlan};
use tch::Tensor;

use crate::comm::{BucketAllreduce, Comm};
use crate::error::{Error, Result};
use crate::ffi;
use crate::hooks::now_ns;

/// How long the idle thread sleeps between progress calls while allreduces are in flight.
const POLL_INTERVAL: Duration = Duration::from_micros(50);

/// When each bucket started and finished, in [`now_ns`] time.
#[derive(Clone, Debug, Default)]
pub(crate) struct CommTimes {
    pub start_ns: Vec<u64>,
    pub done_ns: Vec<u64>,
}

pub(crate) enum Msg {
    /// Bucket complete: copy its gradients in and start its allreduce.
    Start(BucketId),
    /// Start every bucket not started yet (the no-overlap mode, after backward).
    StartAll,
    /// Wait for every bucket, write the sums into `.grad`, reply.
    Finish(Sender<Result<CommTimes>>),
}

/// Handle to the communication thread; stops it on drop.
pub(crate) struct Reducer {
    tx: Option<Sender<Msg>>,
    handle: Option<JoinHandle<()>>,
}

struct Worker {
    plan: Arc<BucketPlan>,
    params: Vec<Tensor>,
    /// `None` on a single rank: nothing to reduce.
    buckets: Option<Vec<BucketAllreduce>>,
    start_ns: Vec<Option<u64>>,
    error: Option<Error>,
}

impl Reducer {
    /// Creates the bucket allreduces (collective, in bucket order, on this thread) and starts
    /// the thread. `params` are the trainable parameters in registration order.
    pub(crate) fn spawn(comm: &Comm, plan: Arc<BucketPlan>, params: Vec<Tensor>) -> Result<Self> {
        let buckets = if comm.size() > 1 {
            let mut v = Vec::with_capacity(plan.num_buckets());
            for bucket in plan.buckets() {
                v.push(comm.bucket_allreduce(bucket.total_elements())?);
            }
            Some(v)
        } else {
            None
        };
        let (tx, rx) = crossbeam_channel::unbounded();
        let worker = Worker {
            start_ns: vec![None; plan.num_buckets()],
            plan,
            params,
            buckets,
            error: None,
        };
        let handle = std::thread::Builder::new()
            .name("tnt-comm".to_owned())
            .spawn(move || worker.run(rx))
            .map_err(|e| Error::CommThread(format!("cannot start it: {e}")))?;
        Ok(Reducer {
            tx: Some(tx),
            handle: Some(handle),
        })
    }

    pub(crate) fn sender(&self) -> Sender<Msg> {
        self.tx.clone().expect("present until drop")
    }

    fn send(&self, msg: Msg) -> Result<()> {
        self.tx
            .as_ref()
            .and_then(|tx| tx.send(msg).ok())
            .ok_or_else(|| Error::CommThread("it has exited".to_owned()))
    }

    pub(crate) fn start_all(&self) -> Result<()> {
        self.send(Msg::StartAll)
    }

    /// Blocks until every bucket is reduced and written back.
    pub(crate) fn finish(&self) -> Result<CommTimes> {
        let (reply_tx, reply_rx) = crossbeam_channel::bounded(1);
        self.send(Msg::Finish(reply_tx))?;
        reply_rx
            .recv()
            .map_err(|_| Error::CommThread("it exited during a step".to_owned()))?
    }
}

impl Drop for Reducer {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

impl Worker {
    fn run(mut self, rx: Receiver<Msg>) {
        loop {
            let msg = if self.in_flight() {
                match rx.recv_timeout(POLL_INTERVAL) {
                    Ok(msg) => msg,
                    Err(RecvTimeoutError::Timeout) => {
                        self.progress();
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            } else {
                match rx.recv() {
                    Ok(msg) => msg,
                    Err(_) => return,
                }
            };
            match msg {
                Msg::Start(bucket) => {
                    if let Err(e) = self.start(bucket) {
                        self.error.get_or_insert(e);
                    }
                }
                Msg::StartAll => {
                    for b in 0..self.plan.num_buckets() {
                        if self.start_ns[b].is_none() {
                            if let Err(e) = self.start(BucketId(b)) {
                                self.error.get_or_insert(e);
                            }
                        }
                    }
                }
                Msg::Finish(reply) => {
                    let result = self.finish();
                    let _ = reply.send(result);
                }
            }
        }
    }

    fn in_flight(&self) -> bool {
        self.buckets.is_some() && self.start_ns.iter().any(Option::is_some)
    }

    /// Lets started allreduces advance while the hooks have nothing for us.
    fn progress(&mut self) {
        if let Some(buckets) = self.buckets.as_mut() {
            for (b, started) in buckets.iter_mut().zip(&self.start_ns) {
                if started.is_some() {
                    if let Err(e) = b.test() {
                        self.error.get_or_insert(e);
                    }
                }
            }
        }
    }

    fn start(&mut self, bucket: BucketId) -> Result<()> {
        let b = self.plan.bucket(bucket)?;
        let slot = &mut self.start_ns[bucket.0];
        if slot.is_some() {
            return Err(Error::Comm(format!("bucket {} started twice", bucket.0)));
        }
        if let Some(buckets) = self.buckets.as_mut() {
            let input = buckets[bucket.0].input_mut()?;
            for m in b.members() {
                let grad = self.params[m.param.0].grad();
                if !grad.defined() {
                    return Err(Error::Comm(format!(
                        "parameter {} has no gradient",
                        m.param.0
                    )));
                }
                let dst = &mut input[m.offset_elements..m.offset_elements + m.numel];
                grad.f_copy_data(dst, m.numel)?;
            }
            buckets[bucket.0].start()?;
        }
        *slot = Some(now_ns());
        Ok(())
    }

    fn finish(&mut self) -> Result<CommTimes> {
        let result = self.finish_inner();
        // Whatever happened, the next step starts clean.
        self.start_ns.fill(None);
        match self.error.take() {
            Some(e) => Err(e),
            None => result,
        }
    }

    fn finish_inner(&mut self) -> Result<CommTimes> {
        let mut times = CommTimes {
            start_ns: Vec::with_capacity(self.plan.num_buckets()),
            done_ns: Vec::with_capacity(self.plan.num_buckets()),
        };
        for (index, bucket) in self.plan.buckets().iter().enumerate() {
            let started = self.start_ns[index].ok_or_else(|| {
                Error::Comm(format!("bucket {index} never became ready in this step"))
            })?;
            times.start_ns.push(started);
            if let Some(buckets) = self.buckets.as_mut() {
                let sum = buckets[index].wait()?;
                for m in bucket.members() {
                    let grad = self.params[m.param.0].grad();
                    ffi::write_f32(&grad, &sum[m.offset_elements..m.offset_elements + m.numel])?;
                }
            }
            times.done_ns.push(now_ns());
        }
        Ok(times)
    }
}
