//! Running the benchmark binaries from tests, each within a deadline.

use std::io::Read;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Runs `command` to completion and returns what it printed; kills it and fails the test
/// when it takes longer than `limit`.
pub fn run_within(command: &mut Command, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    // The pipes reach end-of-file when the program exits (its rank processes have pipes of
    // their own), so their readers finishing is the signal to wait for, with a deadline.
    let (done, finished) = mpsc::channel();
    let readers = [
        Box::new(child.stdout.take().expect("piped")) as Box<dyn Read + Send>,
        Box::new(child.stderr.take().expect("piped")),
    ]
    .map(|mut pipe| {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            let _ = done.send(());
            bytes
        })
    });
    for _ in 0..readers.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if finished.recv_timeout(left).is_err() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} did not finish within {limit:?}");
        }
    }
    let status = child.wait().expect("waiting for the benchmark");
    let [stdout, stderr] = readers.map(|r| r.join().expect("pipe reader"));
    Output {
        status,
        stdout,
        stderr,
    }
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
