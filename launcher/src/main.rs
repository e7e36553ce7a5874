//! `tarantella [OPTIONS] [--] PROGRAM [ARGS...]`: starts PROGRAM as the ranks of a GASPI job
//! (on this host, through ssh or through srun), supervises them and tears the job down;
//! `tarantella --cleanup` stops what a crashed job left behind. The command line is read as
//! mpirun, srun, torchrun and gaspi_run users type it; the work is the `launcher` library's
//! (see its crate docs). The exit status is the job's: 0 when every rank succeeded, else the
//! first failed rank's (128 + N for a signal), 128 + N when `tarantella` got signal N, 124
//! when the job ran past its time limit (`--timeout`), 2 for a usage or start-up error.

use std::io::Write;

fn main() {
    let cli = match launcher::argv::parse(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => std::process::exit(e.report()),
    };
    let code = match launcher::run(&cli) {
        Ok(code) => code,
        Err(e) => {
            // Not `eprintln!`: a closed stderr must not turn the exit status into a panic's.
            let _ = writeln!(std::io::stderr(), "tarantella: error: {e}");
            2
        }
    };
    std::process::exit(code);
}
