//! `gaspi_config_t` ↔ [`rt::Config`]: the configuration `gaspi_config_set` records for the
//! next `gaspi_proc_init`. Fields the runtime has no use for (logger, ports, device
//! parameters, `user_defined`) are validated where the standard says so, kept and reported
//! back by `gaspi_config_get` unchanged.

use std::ptr;

use parking_lot::Mutex;
use rt::config::limits;
use rt::{Config, Error, NetworkType, Result};

use crate::types::*;

/// What `gaspi_config_set` stored (`None`: the defaults).
static PENDING: Mutex<Option<gaspi_config_t>> = Mutex::new(None);

/// 0 lets the device choose (GPI-2 accepts it too).
const IB_MTUS: [u32; 4] = [0, 1024, 2048, 4096];

fn network_to_c(n: NetworkType) -> gaspi_network_t {
    n as gaspi_network_t
}

pub(crate) fn network_from_c(n: gaspi_network_t) -> Result<NetworkType> {
    Ok(match n {
        0 => NetworkType::Ib,
        1 => NetworkType::Roce,
        2 => NetworkType::Ethernet,
        3 => NetworkType::Gemini,
        4 => NetworkType::Aries,
        5 => NetworkType::Ofi,
        other => {
            return Err(Error::Config(format!(
                "network {other} is not a gaspi_network_t"
            )))
        }
    })
}

/// The C view of a Rust configuration, with the reference defaults for the rest.
pub(crate) fn to_c(c: &Config) -> gaspi_config_t {
    gaspi_config_t {
        logger: 1,
        sn_port: u32::from(rt::env::DEFAULT_SN_PORT),
        net_info: 0,
        user_net: 0,
        sn_persistent: 0,
        sn_timeout: c.sn_timeout_ms,
        dev_config: gaspi_dev_config_t {
            network_type: network_to_c(c.network),
            params: gaspi_dev_params_t {
                ib: gaspi_dev_ib_t {
                    netdev_id: -1,
                    mtu: 1024,
                    port_check: 1,
                },
                tcp: gaspi_dev_tcp_t { port: 19000 },
                ofi: gaspi_dev_ofi_t {
                    use_shm: 1,
                    provider_info: 0,
                    progress_auto: 0,
                },
            },
        },
        network: network_to_c(c.network),
        queue_size_max: c.queue_size_max,
        queue_num: c.queue_num,
        group_max: c.group_max,
        segment_max: c.segment_max,
        transfer_size_max: c.transfer_size_max,
        notification_num: c.notification_num,
        passive_queue_size_max: c.passive_queue_size_max,
        passive_transfer_size_max: c.passive_transfer_size_max,
        allreduce_buf_size: c.allreduce_buf_size,
        allreduce_elem_max: c.allreduce_elem_max,
        rw_list_elem_max: c.rw_list_elem_max,
        build_infrastructure: if c.build_infrastructure {
            GASPI_TOPOLOGY_STATIC
        } else {
            GASPI_TOPOLOGY_NONE
        },
        user_defined: ptr::null_mut(),
    }
}

/// The Rust configuration a C one asks for, validated (`GASPI_ERR_CONFIG` naming the field).
/// Fields given as 0 where GPI-2 takes 0 stay 0 here and are resolved to their defaults at
/// init ([`Config::resolve`]), so `gaspi_config_get` reports what was set.
pub(crate) fn from_c(c: &gaspi_config_t) -> Result<Config> {
    let mtu = c.dev_config.params.ib.mtu;
    if !IB_MTUS.contains(&mtu) {
        return Err(Error::Config(format!(
            "dev_config.params.ib.mtu {mtu} must be 0 (automatic), 1024, 2048 or 4096"
        )));
    }
    if c.queue_num > limits::QUEUE_NUM_MAX {
        return Err(Error::Config(format!(
            "queue_num {} is over the maximum {}",
            c.queue_num,
            limits::QUEUE_NUM_MAX
        )));
    }
    let build_infrastructure = match c.build_infrastructure {
        GASPI_TOPOLOGY_NONE => false,
        GASPI_TOPOLOGY_STATIC | GASPI_TOPOLOGY_DYNAMIC => true,
        other => {
            return Err(Error::Config(format!(
                "build_infrastructure {other} is not a gaspi_topology_t"
            )))
        }
    };
    let cfg = Config {
        network: network_from_c(c.network)?,
        queue_num: c.queue_num,
        queue_size_max: c.queue_size_max,
        segment_max: c.segment_max,
        group_max: c.group_max,
        transfer_size_max: c.transfer_size_max,
        notification_num: c.notification_num,
        passive_queue_size_max: c.passive_queue_size_max,
        passive_transfer_size_max: c.passive_transfer_size_max,
        allreduce_buf_size: c.allreduce_buf_size,
        allreduce_elem_max: c.allreduce_elem_max,
        rw_list_elem_max: c.rw_list_elem_max,
        sn_timeout_ms: c.sn_timeout,
        build_infrastructure,
    };
    cfg.resolve()?;
    Ok(cfg)
}

/// Records `c` for the next init after validating it.
pub(crate) fn set_pending(c: gaspi_config_t) -> Result<()> {
    from_c(&c)?;
    *PENDING.lock() = Some(c);
    Ok(())
}

/// The configuration the next init uses, C and Rust views.
pub(crate) fn pending() -> Result<(gaspi_config_t, Config)> {
    match *PENDING.lock() {
        Some(c) => Ok((c, from_c(&c)?)),
        None => {
            let d = Config::default();
            Ok((to_c(&d), d))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_round_trip_and_validate() {
        let c = to_c(&Config::default());
        assert_eq!(from_c(&c).unwrap(), Config::default());
        assert_eq!(c.queue_num, 8);
        assert_eq!(c.queue_size_max, 1024);
        assert_eq!(c.notification_num, 65536);
    }

    #[test]
    fn rejects_bad_fields() {
        let d = to_c(&Config::default());
        let mut c = d;
        c.dev_config.params.ib.mtu = 1500;
        assert!(matches!(from_c(&c), Err(Error::Config(m)) if m.contains("mtu")));
        let mut c = d;
        c.queue_num = 17;
        assert!(matches!(from_c(&c), Err(Error::Config(m)) if m.contains("queue_num")));
        let mut c = d;
        c.build_infrastructure = 9;
        assert!(from_c(&c).is_err());
        let mut c = d;
        c.network = 42;
        assert!(from_c(&c).is_err());
    }
}
