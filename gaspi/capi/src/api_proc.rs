//! Process management, configuration and the process-level parts of `GASPI_Ext.h`.

use rt::env::JobEnv;
use rt::{Context, Error, Rank, Timeout};

use crate::config;
use crate::ffi::{install, is_initialized, need, out, uninstall, with_ctx};
use crate::gaspi_api;
use crate::types::*;

gaspi_api! { PROC_API;
    /// `gaspi_proc_init`: joins the job described by the environment (see `rt::env`) with
    /// the configuration of the last `gaspi_config_set`. `timeout_ms` bounds the rendezvous
    /// (as does `GASPI_INIT_TIMEOUT_MS`; the smaller wins).
    fn gaspi_proc_init(timeout_ms: gaspi_timeout_t) {
        install(|| {
            // A C program has no subscriber of its own: the runtime's log goes to stderr.
            rt::log::init_from_env();
            let (_, cfg) = config::pending()?;
            let mut env = JobEnv::from_env()?;
            if timeout_ms != GASPI_BLOCK {
                env.init_timeout_ms = env.init_timeout_ms.min(timeout_ms);
            }
            Context::init_job(cfg, env)
        })
    }

    fn gaspi_proc_term(timeout_ms: gaspi_timeout_t) {
        uninstall(timeout_ms)
    }

    fn gaspi_proc_rank(rank: *mut gaspi_rank_t) {
        need(rank, "rank")?;
        with_ctx(|c| out(rank, "rank", c.rank().0))
    }

    fn gaspi_proc_num(proc_num: *mut gaspi_rank_t) {
        need(proc_num, "proc_num")?;
        with_ctx(|c| out(proc_num, "proc_num", c.num_ranks()))
    }

    fn gaspi_proc_local_rank(local_rank: *mut gaspi_rank_t) {
        need(local_rank, "local_rank")?;
        with_ctx(|c| out(local_rank, "local_rank", c.local_rank()))
    }

    fn gaspi_proc_local_num(local_num: *mut gaspi_rank_t) {
        need(local_num, "local_num")?;
        with_ctx(|c| out(local_num, "local_num", c.local_num()))
    }

    fn gaspi_proc_kill(rank: gaspi_rank_t, timeout_ms: gaspi_timeout_t) {
        with_ctx(|c| c.proc_kill(Rank(rank), Timeout(timeout_ms)))
    }

    fn gaspi_proc_ping(rank: gaspi_rank_t, timeout_ms: gaspi_timeout_t) {
        with_ctx(|c| c.proc_ping(Rank(rank), Timeout(timeout_ms)))
    }

    fn gaspi_connect(rank: gaspi_rank_t, timeout_ms: gaspi_timeout_t) {
        with_ctx(|c| c.connect(Rank(rank), Timeout(timeout_ms)))
    }

    fn gaspi_disconnect(rank: gaspi_rank_t, timeout_ms: gaspi_timeout_t) {
        with_ctx(|c| c.disconnect(Rank(rank), Timeout(timeout_ms)))
    }

    /// `gaspi_initialized`: 1 between init and term, else 0. Valid before init.
    fn gaspi_initialized(initialized: *mut gaspi_number_t) {
        out(initialized, "initialized", u32::from(is_initialized()))
    }

    /// `gaspi_config_get`: the configuration in force (or that the next init will use).
    fn gaspi_config_get(config: *mut gaspi_config_t) {
        need(config, "config")?;
        let (c, _) = config::pending()?;
        out(config, "config", c)
    }

    /// `gaspi_config_set`: validates and records the configuration for the next init.
    fn gaspi_config_set(new_config: gaspi_config_t) {
        if is_initialized() {
            return Err(Error::AlreadyInitialized);
        }
        config::set_pending(new_config)
    }

    /// `gaspi_version`: valid before init.
    fn gaspi_version(version: *mut gaspi_float) {
        out(version, "version", rt::version())
    }

    /// `gaspi_numa_socket`: the socket given by `GASPI_SOCKET` (the launcher's NUMA
    /// placement); without one, the local rank with a warning, as GPI-2 answers.
    fn gaspi_numa_socket(socket: *mut gaspi_uchar) {
        need(socket, "socket")?;
        with_ctx(|c| match rt::env::numa_socket()? {
            Some(s) => out(socket, "socket", s),
            None => {
                tracing::warn!(
                    "gaspi_numa_socket: {} is not set (NUMA placement was not asked for, e.g. \
                     tarantella -N): answering the local rank",
                    rt::env::SOCKET
                );
                out(socket, "socket", c.local_rank() as gaspi_uchar)
            }
        })
    }

    /// `gaspi_cpu_frequency`: the rate of `gaspi_time_ticks` in MHz, the time-stamp
    /// counter's where that is the tick (`rt::clock`). Valid before init.
    fn gaspi_cpu_frequency(cpu_mhz: *mut gaspi_float) {
        out(cpu_mhz, "cpu_mhz", rt::clock::ticks_per_us())
    }
}
