//! The communication thread: owns one allreduce per bucket (through [`Staging`]), starts a
//! bucket's allreduce as soon as its gradients are packed into the segment (backward keeps
//! running meanwhile), and at the end of the step waits for every bucket and hands the sums
//! back to the gradients (on the host, or queued to the GPU).

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use fusion::{BucketId, BucketPlan};
use gaspi::Timeout;
use tch::Tensor;

use crate::clock::now_ns;
use crate::comm::{Comm, Waited};
use crate::error::{Error, Result};
use crate::grad_dtype::GradDtype;
use crate::staging::{Staging, StagingMode};

/// How long the thread drives one in-flight allreduce before it looks for newly complete
/// buckets again.
const PROGRESS_SLICE: Timeout = Timeout::ms(1);

/// How often the thread looks at a GPU copy it waits for when nothing else is in flight
/// (it sleeps on its channel in between, so a new bucket wakes it at once).
const COPY_POLL: Duration = Duration::from_micros(50);

/// When each bucket started and finished, in [`now_ns`] time.
#[derive(Clone, Debug, Default)]
pub(crate) struct CommTimes {
    pub start_ns: Vec<u64>,
    pub done_ns: Vec<u64>,
}

pub(crate) enum Msg {
    /// Bucket complete: pack its gradients (host path; the hook did it on the device path)
    /// and start its allreduce once they are in the segment.
    Start(BucketId),
    /// Start every bucket not started yet (the no-overlap mode, after backward).
    StartAll,
    /// Wait for every bucket, hand the sums back to the gradients, reply.
    Finish(Sender<Result<CommTimes>>),
}

/// Handle to the communication thread; stops it on drop.
pub(crate) struct Reducer {
    tx: Sender<Msg>,
    handle: Option<JoinHandle<()>>,
    /// `None` on a single rank: nothing to reduce.
    staging: Option<Arc<Staging>>,
}

/// Where one bucket is in the current step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    /// Handed to the thread; its gradients are on their way into the segment.
    Packing {
        seq: u64,
    },
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
    /// The parameters' device: this thread makes it current before touching the GPU.
    device: tch::Device,
    /// `None` on a single rank: nothing to reduce.
    staging: Option<Arc<Staging>>,
    phase: Vec<Phase>,
    comm_timeout: Timeout,
    /// Buckets handed over in this step.
    queued: u64,
    error: Option<Error>,
}

impl Reducer {
    /// Creates the bucket allreduces (collective, in bucket order, on this thread) and starts
    /// the thread. `params` are the trainable parameters in registration order.
    pub(crate) fn spawn(
        comm: &Comm,
        plan: Arc<BucketPlan>,
        params: Vec<Tensor>,
        dtype: GradDtype,
        mode: StagingMode,
    ) -> Result<Self> {
        let staging = if comm.size() > 1 {
            let mut allreduces = Vec::with_capacity(plan.num_buckets());
            for bucket in plan.buckets() {
                allreduces.push(comm.bucket_allreduce(bucket.total_elements(), dtype)?);
            }
            Some(Arc::new(Staging::new(&params, &plan, allreduces, mode)?))
        } else {
            None
        };
        let (tx, rx) = crossbeam_channel::unbounded();
        let worker = Worker {
            device: match mode {
                StagingMode::Device(d) => d,
                StagingMode::Host => tch::Device::Cpu,
            },
            phase: vec![Phase::Idle; plan.num_buckets()],
            comm_timeout: comm.timeout(),
            queued: 0,
            staging: staging.clone(),
            error: None,
        };
        let handle = std::thread::Builder::new()
            .name("tnt-comm".to_owned())
            .spawn(move || worker.run(rx))
            .map_err(Error::CommThreadSpawn)?;
        Ok(Reducer {
            tx,
            handle: Some(handle),
            staging,
        })
    }

    pub(crate) fn sender(&self) -> Sender<Msg> {
        self.tx.clone()
    }

    /// The buckets' staging, `None` on a single rank.
    pub(crate) fn staging(&self) -> Option<&Arc<Staging>> {
        self.staging.as_ref()
    }

    fn send(&self, msg: Msg) -> Result<()> {
        self.tx
            .send(msg)
            .map_err(|_| Error::CommThread("it has exited"))
    }

    /// Starts every bucket after backward (the no-overlap mode); on the device path the
    /// buckets are packed here, on the step's thread.
    pub(crate) fn start_all(&self) -> Result<()> {
        if let Some(staging) = self.staging.as_ref().filter(|s| s.sends_from_hook()) {
            for b in 0..staging.num_buckets() {
                staging.send(b)?;
            }
        }
        self.send(Msg::StartAll)
    }

    /// Blocks until every bucket is reduced and handed back (on the device path the copies
    /// back are queued; [`Staging::finish`] makes the compute stream wait for them).
    pub(crate) fn finish(&self) -> Result<CommTimes> {
        let (reply_tx, reply_rx) = crossbeam_channel::bounded(1);
        self.send(Msg::Finish(reply_tx))?;
        reply_rx
            .recv()
            .map_err(|_| Error::CommThread("it exited during a step"))?
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
        if let Err(e) = crate::stream::set_current_device(self.device) {
            self.error = Some(e);
        }
        loop {
            // Everything the hooks queued first: starting a bucket early matters most.
            loop {
                match rx.try_recv() {
                    Ok(msg) => self.handle(msg),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return,
                }
            }
            self.start_packed();
            let next = match (self.oldest_in_flight(), self.oldest_packing()) {
                // Drive it for a short slice, then look for new buckets again.
                (Some(b), _) => {
                    self.drive(b, PROGRESS_SLICE);
                    continue;
                }
                // A GPU copy is still under way: look again shortly, or when a message comes.
                (None, Some(_)) => rx.recv_timeout(COPY_POLL),
                (None, None) => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            match next {
                Ok(msg) => self.handle(msg),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Start(bucket) => self.queue_or_record(bucket),
            Msg::StartAll => {
                for b in 0..self.phase.len() {
                    if self.phase[b] == Phase::Idle {
                        self.queue_or_record(BucketId(b));
                    }
                }
            }
            Msg::Finish(reply) => {
                let result = self.finish();
                let _ = reply.send(result);
            }
        }
    }

    fn queue_or_record(&mut self, bucket: BucketId) {
        if let Err(e) = self.queue(bucket) {
            self.error.get_or_insert(e);
        }
    }

    /// Takes bucket `b` into this step: packs it on the host path, and marks it for starting.
    fn queue(&mut self, bucket: BucketId) -> Result<()> {
        let b = bucket.0;
        match self.phase.get(b) {
            Some(Phase::Idle) => {}
            Some(_) => return Err(Error::BucketStartedTwice { bucket: b }),
            None => {
                return Err(Error::Fusion(fusion::Error::UnknownBucket {
                    bucket,
                    num_buckets: self.phase.len(),
                }))
            }
        }
        let Some(staging) = self.staging.as_ref() else {
            let now = now_ns();
            self.phase[b] = Phase::Done {
                start_ns: now,
                done_ns: now,
            };
            return Ok(());
        };
        if !staging.sends_from_hook() {
            staging.send(b)?;
        }
        self.phase[b] = Phase::Packing { seq: self.queued };
        self.queued += 1;
        Ok(())
    }

    /// The bucket handed over first among those still packing.
    fn oldest_packing(&self) -> Option<usize> {
        self.phase
            .iter()
            .enumerate()
            .filter_map(|(b, p)| match p {
                Phase::Packing { seq } => Some((*seq, b)),
                _ => None,
            })
            .min()
            .map(|(_, b)| b)
    }

    /// Starts the allreduces of packed buckets, in the order they were handed over: every
    /// rank starts its buckets in the same order (the hooks fire in the same order
    /// everywhere), whatever its copies' timing.
    fn start_packed(&mut self) {
        while let Some(b) = self.oldest_packing() {
            match self.start_if_packed(b) {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) => {
                    self.error.get_or_insert(e);
                    let now = now_ns();
                    self.phase[b] = Phase::Done {
                        start_ns: now,
                        done_ns: now,
                    };
                }
            }
        }
    }

    fn start_if_packed(&mut self, b: usize) -> Result<bool> {
        let Phase::Packing { seq } = self.phase[b] else {
            return Ok(true);
        };
        let staging = self.staging.as_ref().expect("packing implies staging");
        if !staging.is_sent(b)? {
            return Ok(false);
        }
        staging.bucket(b).allreduce().start()?;
        self.phase[b] = Phase::InFlight {
            start_ns: now_ns(),
            seq,
        };
        Ok(true)
    }

    /// The in-flight bucket started first. Ranks start buckets in the same order, so they
    /// all drive the same one.
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

    /// Waits up to `slice` for bucket `b`; once complete, hands its sums back (those
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

    /// Waits up to `timeout` for bucket `b` and, once complete, hands its sums back.
    fn try_complete(&mut self, b: usize, timeout: Timeout) -> Result<Waited> {
        let Phase::InFlight { start_ns, .. } = self.phase[b] else {
            return Ok(Waited::Complete);
        };
        if let Some(staging) = self.staging.as_ref() {
            if let Waited::TimedOut(e) = staging.bucket(b).allreduce().wait_for(timeout)? {
                return Ok(Waited::TimedOut(e));
            }
            staging.receive(b)?;
        }
        self.phase[b] = Phase::Done {
            start_ns,
            done_ns: now_ns(),
        };
        Ok(Waited::Complete)
    }

    fn finish(&mut self) -> Result<CommTimes> {
        let result = self.finish_inner();
        // Whatever happened, the next step starts clean.
        self.phase.fill(Phase::Idle);
        self.queued = 0;
        match self.error.take() {
            Some(e) => Err(e),
            None => result,
        }
    }

    fn finish_inner(&mut self) -> Result<CommTimes> {
        let n = self.phase.len();
        let mut times = CommTimes {
            start_ns: Vec::with_capacity(n),
            done_ns: Vec::with_capacity(n),
        };
        if let Some(b) = self.phase.iter().position(|p| *p == Phase::Idle) {
            return Err(Error::BucketNotReady { bucket: b });
        }
        // In start order, as every rank does; bounded by the communication timeout.
        let deadline =
            std::time::Instant::now().checked_add(Duration::from_millis(self.comm_timeout.0));
        loop {
            self.start_packed();
            if let Some(b) = self.oldest_in_flight() {
                if let Waited::TimedOut(source) = self.try_complete(b, self.comm_timeout)? {
                    return Err(Error::BucketTimeout { bucket: b, source });
                }
            } else if let Some(b) = self.oldest_packing() {
                if deadline.is_some_and(|d| std::time::Instant::now() > d) {
                    return Err(Error::StagingTimeout { bucket: b });
                }
                std::thread::sleep(COPY_POLL);
            } else {
                break;
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
