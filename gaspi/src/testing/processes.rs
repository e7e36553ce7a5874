//! Waiting for a group of child processes under one deadline.

use std::process::{Child, Output};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a killed child may take to be reaped before it is given up on.
const REAP_BOUND: Duration = Duration::from_secs(10);

/// Every child's output, in the order given, and whether the deadline passed.
pub struct WaitOutcome {
    /// `None` where waiting for the child failed (or it could not be reaped after the kill).
    pub outputs: Vec<Option<Output>>,
    /// The deadline passed and the children still running then were killed (`SIGKILL`).
    pub timed_out: bool,
}

/// Waits for `children` (started with their stdout and stderr piped) for at most `timeout`;
/// when it passes, kills every one still running and collects them too. Each child is read
/// by a thread of its own with std's `wait_with_output`, which drains both pipes at once, so
/// a child that fills one is never blocked on it.
pub fn wait_all(children: Vec<Child>, timeout: Duration) -> WaitOutcome {
    let deadline = Instant::now() + timeout;
    let pids: Vec<u32> = children.iter().map(Child::id).collect();
    let (tx, rx) = mpsc::channel();
    for (i, child) in children.into_iter().enumerate() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let _ = tx.send((i, child.wait_with_output().ok()));
        });
    }
    drop(tx);
    let mut outputs: Vec<Option<Output>> = pids.iter().map(|_| None).collect();
    let mut timed_out = false;
    let mut left = pids.len();
    while left > 0 {
        let wait = if timed_out {
            REAP_BOUND
        } else {
            deadline.saturating_duration_since(Instant::now())
        };
        match rx.recv_timeout(wait) {
            Ok((i, output)) => {
                outputs[i] = output;
                left -= 1;
            }
            Err(mpsc::RecvTimeoutError::Timeout) if !timed_out => {
                timed_out = true;
                for (pid, output) in pids.iter().zip(&outputs) {
                    if output.is_none() {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(*pid as i32),
                            nix::sys::signal::Signal::SIGKILL,
                        );
                    }
                }
            }
            Err(_) => break,
        }
    }
    WaitOutcome { outputs, timed_out }
}
