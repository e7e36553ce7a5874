//! The communication thread: owns one allreduce per bucket, starts a bucket's allreduce as
//! soon as the hooks report it complete (backward keeps running meanwhile), and at the end of
//! the step waits for every bucket and writes the summed gradients back into `.grad`.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use fusion::{BucketId, BucketPlan};
use gaspi::Timeout;
use tch::Tensor;

use crate::comm::{BucketAllreduce, Comm};
use crate::error::{Error, Result};
use crate::ffi;
use crate::hooks::now_ns;

/// How long the thread drives one in-flight allreduce before it looks for newly complete
/// buckets again.
const PROGRESS_SLICE: Timeout = Timeout::ms(1);

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
    tx: Sender<Msg>,
    handle: Option<JoinHandle<()>>,
}

/// Where one bucket is in the current step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    /// `seq` counts starts within the step: the same order on every rank.
    InFlight {
        start_ns: u64,
        seq: u64,
    },
    Done {
        start_ns: u64,
        done_ns: u64,
    },
}

struct Worker {
    plan: Arc<BucketPlan>,
    params: Vec<Tensor>,
    /// `None` on a single rank: nothing to reduce.
    buckets: Option<Vec<BucketAllreduce>>,
    phase: Vec<Phase>,
    comm_timeout: Timeout,
    /// Buckets started in this step.
    started: u64,
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
            phase: vec![Phase::Idle; plan.num_buckets()],
            comm_timeout: comm.timeout(),
            started: 0,
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
            tx,
            handle: Some(handle),
        })
    }

    pub(crate) fn sender(&self) -> Sender<Msg> {
        self.tx.clone()
    }

    fn send(&self, msg: Msg) -> Result<()> {
        self.tx
            .send(msg)
            .map_err(|_| Error::CommThread("it has exited".to_owned()))
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
        // Disconnect our sender (the hooks' clone is gone by now), so the thread's loop ends.
        let (disconnected, _) = crossbeam_channel::bounded(0);
        drop(std::mem::replace(&mut self.tx, disconnected));
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

impl Worker {
    fn run(mut self, rx: Receiver<Msg>) {
        loop {
            // Everything the hooks queued first: starting a bucket early matters most.
            loop {
                match rx.try_recv() {
                    Ok(msg) => self.handle(msg),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return,
                }
            }
            match self.oldest_in_flight() {
                // Drive it for a short slice, then look for new buckets again.
                Some(b) => self.drive(b, PROGRESS_SLICE),
                None => match rx.recv() {
                    Ok(msg) => self.handle(msg),
                    Err(_) => return,
                },
            }
        }
    }

    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Start(bucket) => self.start_or_record(bucket),
            Msg::StartAll => {
                for b in 0..self.plan.num_buckets() {
                    if self.phase[b] == Phase::Idle {
                        self.start_or_record(BucketId(b));
                    }
                }
            }
            Msg::Finish(reply) => {
                let result = self.finish();
                let _ = reply.send(result);
            }
        }
    }

    fn start_or_record(&mut self, bucket: BucketId) {
        if let Err(e) = self.start(bucket) {
            self.error.get_or_insert(e);
        }
    }

    /// The in-flight bucket started first. Ranks start buckets in the same order (the hooks
    /// fire in the same order everywhere), so they all drive the same one.
    fn oldest_in_flight(&self) -> Option<usize> {
        self.phase
            .iter()
            .enumerate()
            .filter_map(|(b, p)| match p {
                Phase::InFlight { seq, .. } => Some((*seq, b)),
                _ => None,
            })
            .min()
            .map(|(_, b)| b)
    }

    /// Waits up to `slice` for bucket `b`; once complete, writes its sums into `.grad` (those
    /// parameters' gradients are final: their hooks have fired).
    fn drive(&mut self, b: usize, slice: Timeout) {
        if let Err(e) = self.try_complete(b, slice) {
            self.error.get_or_insert(e);
            // Do not spin on a failed bucket; `finish` reports the error.
            if let Phase::InFlight { start_ns, .. } = self.phase[b] {
                self.phase[b] = Phase::Done {
                    start_ns,
                    done_ns: now_ns(),
                };
            }
        }
    }

    fn try_complete(&mut self, b: usize, timeout: Timeout) -> Result<bool> {
        let Phase::InFlight { start_ns, .. } = self.phase[b] else {
            return Ok(true);
        };
        if let Some(buckets) = self.buckets.as_mut() {
            let Some(sum) = buckets[b].wait_for(timeout)? else {
                return Ok(false);
            };
            for m in self.plan.buckets()[b].members() {
                let grad = self.params[m.param.0].grad();
                ffi::write_f32(&grad, &sum[m.offset_elements..m.offset_elements + m.numel])?;
            }
        }
        self.phase[b] = Phase::Done {
            start_ns,
            done_ns: now_ns(),
        };
        Ok(true)
    }

    fn start(&mut self, bucket: BucketId) -> Result<()> {
        let b = self.plan.bucket(bucket)?;
        if self.phase[bucket.0] != Phase::Idle {
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
            self.phase[bucket.0] = Phase::InFlight {
                start_ns: now_ns(),
                seq: self.started,
            };
            self.started += 1;
        } else {
            let now = now_ns();
            self.phase[bucket.0] = Phase::Done {
                start_ns: now,
                done_ns: now,
            };
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<CommTimes> {
        let result = self.finish_inner();
        // Whatever happened, the next step starts clean.
        self.phase.fill(Phase::Idle);
        self.started = 0;
        match self.error.take() {
            Some(e) => Err(e),
            None => result,
        }
    }

    fn finish_inner(&mut self) -> Result<CommTimes> {
        let n = self.plan.num_buckets();
        let mut times = CommTimes {
            start_ns: Vec::with_capacity(n),
            done_ns: Vec::with_capacity(n),
        };
        if let Some(b) = self.phase.iter().position(|p| *p == Phase::Idle) {
            return Err(Error::Comm(format!(
                "bucket {b} never became ready in this step"
            )));
        }
        // In start order, as every rank does; bounded by the communication timeout.
        while let Some(b) = self.oldest_in_flight() {
            if !self.try_complete(b, self.comm_timeout)? {
                return Err(Error::Comm(format!(
                    "bucket {b}: allreduce did not complete within the timeout"
                )));
            }
        }
        for phase in &self.phase {
            if let Phase::Done { start_ns, done_ns } = *phase {
                times.start_ns.push(start_ns);
                times.done_ns.push(done_ns);
            }
        }
        Ok(times)
    }
}
