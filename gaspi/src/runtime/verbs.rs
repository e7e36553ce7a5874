//! Opening the verbs device at start-up, or deciding not to: verbs are used when the job
//! spans hosts (or `GASPI_TRANSPORT=verbs`) and a device with an active port is there; any
//! other outcome is TCP, with the reason logged.

use crate::config::Config;
use crate::env::{JobEnv, TransportChoice};
use crate::error::Result;
use crate::transport::verbs::device::DeviceChoice;
use crate::transport::verbs::open::open;
use crate::transport::verbs::{PassiveSizes, VerbsSetup};

/// Opens the verbs device when this job may use one: `None` (with the reason logged)
/// means TCP. Auto mode skips it when every rank is on this host.
pub(crate) fn open_verbs(
    config: &Config,
    env: &JobEnv,
    choice: &DeviceChoice,
) -> Result<Option<VerbsSetup>> {
    let wanted = match env.transport {
        TransportChoice::Verbs => true,
        TransportChoice::Auto => env.local_nranks < env.nranks,
        TransportChoice::Tcp | TransportChoice::Shm => false,
    };
    if !wanted || env.nranks < 2 {
        return Ok(None);
    }
    let device = match open(choice, env.rank.0, &env.job_id)? {
        Ok(d) => d,
        Err(why) if env.transport == TransportChoice::Verbs => {
            tracing::warn!(
                "gaspi: GASPI_TRANSPORT=verbs but no InfiniBand verbs ({why}); using TCP"
            );
            return Ok(None);
        }
        Err(why) => {
            tracing::info!("gaspi: no InfiniBand verbs ({why}); using TCP between hosts");
            return Ok(None);
        }
    };
    match VerbsSetup::new(
        device,
        env.rank,
        env.nranks,
        config.queue_size_max,
        PassiveSizes {
            size: config.passive_transfer_size_max,
            depth: choice.passive_depth(),
        },
        &env.job_id,
        choice.is_fake(),
    ) {
        Ok(s) => Ok(Some(s)),
        Err(e) if !choice.is_fake() => {
            tracing::warn!("gaspi: cannot set up InfiniBand verbs ({e}); using TCP between hosts");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
