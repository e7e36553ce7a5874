//! Runtime configuration (`gaspi_config_t`): limits with the reference implementation's
//! defaults, validated before init.

use crate::error::{Error, Result};
use crate::types::NetworkType;

/// Bounds of the implementation. Each accepts at least what GPI-2 accepts (see
/// `docs/capi.md` for the table and the few deliberate differences).
pub mod limits {
    /// Queues (GPI-2: `GASPI_MAX_QP`).
    pub const QUEUE_NUM_MAX: u32 = 16;
    /// Entries per queue (GPI-2: `GASPI_MAX_QSIZE`).
    pub const QUEUE_SIZE_MAX: u32 = 4096;
    /// User segments per rank (GPI-2: `GASPI_MAX_MSEGS`).
    pub const SEGMENT_MAX: u32 = 255;
    /// Group ids are `u8` (`gaspi_group_t`): GROUP_ALL and 255 more.
    pub const GROUP_MAX: u32 = 256;
    /// The default number of groups (GPI-2: `GASPI_MAX_GROUPS`).
    pub const GROUP_MAX_DEFAULT: u32 = 32;
    /// Bytes of one transfer (GPI-2: `GASPI_MAX_TSIZE_C`).
    pub const TRANSFER_SIZE_MAX: u64 = 1 << 30;
    /// Bytes of one passive message (GPI-2: `GASPI_MAX_TSIZE_P`).
    pub const PASSIVE_TRANSFER_SIZE_MAX: u32 = 65535;
    /// The default `allreduce_elem_max` (GPI-2's); any positive value is honoured.
    pub const ALLREDUCE_ELEM_MAX: u32 = 255;
    /// Elements of one list call (GPI-2: `GASPI_RW_LIST_ELEM_MAX`).
    pub const RW_LIST_ELEM_MAX: u32 = 255;
    /// The default notifications per segment (GPI-2: `GASPI_MAX_NOTIFICATION`).
    pub const NOTIFICATION_NUM_DEFAULT: u32 = 65536;
    /// The per-round buffer of the small allreduce is `allreduce_buf_size` clamped to
    /// `ALLREDUCE_ROUND_MIN..=ALLREDUCE_ROUND_MAX`; larger reductions run in rounds of that
    /// size. This is the lower bound, 64 bytes (8 elements of 8 bytes).
    pub const ALLREDUCE_ROUND_MIN: u64 = 64;
    /// The upper bound of the small allreduce's per-round buffer, 1 MiB (see
    /// [`ALLREDUCE_ROUND_MIN`]): the buffer lives in each group's internal segment.
    pub const ALLREDUCE_ROUND_MAX: u64 = 1 << 20;
}

/// How the runtime is set up. Change it with [`crate::Context::init_with`].
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The network asked for (`gaspi_config_t.network`; default
    /// [`NetworkType::Ethernet`]). Only `Ethernet`, `Ib` and `Roce` are accepted, and the
    /// value is informational: the transport to each peer is chosen at init from
    /// `GASPI_TRANSPORT` and the devices present (see
    /// [`Context::network_type`](crate::Context::network_type) for what was chosen).
    pub network: NetworkType,
    /// Number of communication queues created at init (1..=16).
    pub queue_num: u32,
    /// Entries a queue holds before posting returns `QueueFull` (1..=4096).
    pub queue_size_max: u32,
    /// User segments per rank (1..=255).
    pub segment_max: u32,
    /// Groups, GROUP_ALL included (1..=256; 0 means the default, 32).
    pub group_max: u32,
    /// Bytes of one transfer (1..=1 GiB; 0 means the maximum).
    pub transfer_size_max: u64,
    /// Notification slots per segment (0 means the default, 65536). Every segment's control
    /// area holds 4 bytes per slot, so a segment is refused when that exceeds 1 GiB.
    pub notification_num: u32,
    /// Messages the passive inbox holds (0 means the default, 4096).
    pub passive_queue_size_max: u32,
    /// Bytes of one passive message (1..=65535; 0 means the maximum).
    pub passive_transfer_size_max: u32,
    /// Bytes of one round of the small group allreduce (clamped to 64 B..=1 MiB at use;
    /// larger reductions run in several rounds).
    pub allreduce_buf_size: u64,
    /// Elements of one small allreduce (0 means the default, 255).
    pub allreduce_elem_max: u32,
    /// Elements of one list call (1..=255).
    pub rw_list_elem_max: u32,
    /// Service-network timeout in ms (connection set-up at init).
    pub sn_timeout_ms: u64,
    /// Whether init builds the connections to all peers (always true here: the mesh is built
    /// at init; `connect`/`disconnect` are accepted for compatibility).
    pub build_infrastructure: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            network: NetworkType::Ethernet,
            queue_num: 8,
            queue_size_max: 1024,
            segment_max: limits::SEGMENT_MAX,
            group_max: limits::GROUP_MAX_DEFAULT,
            transfer_size_max: limits::TRANSFER_SIZE_MAX,
            notification_num: limits::NOTIFICATION_NUM_DEFAULT,
            passive_queue_size_max: 4096,
            passive_transfer_size_max: limits::PASSIVE_TRANSFER_SIZE_MAX,
            allreduce_buf_size: 12288,
            allreduce_elem_max: limits::ALLREDUCE_ELEM_MAX,
            rw_list_elem_max: limits::RW_LIST_ELEM_MAX,
            sn_timeout_ms: 30_000,
            build_infrastructure: true,
        }
    }
}

impl Config {
    /// The configuration the runtime runs with: fields given as 0 where GPI-2 accepts 0
    /// take their default, then everything is validated.
    pub fn resolve(&self) -> Result<Config> {
        let d = Config::default();
        let or = |v: u32, default: u32| if v == 0 { default } else { v };
        let c = Config {
            group_max: or(self.group_max, d.group_max),
            transfer_size_max: if self.transfer_size_max == 0 {
                d.transfer_size_max
            } else {
                self.transfer_size_max
            },
            notification_num: or(self.notification_num, d.notification_num),
            passive_queue_size_max: or(self.passive_queue_size_max, d.passive_queue_size_max),
            passive_transfer_size_max: or(
                self.passive_transfer_size_max,
                d.passive_transfer_size_max,
            ),
            allreduce_elem_max: or(self.allreduce_elem_max, d.allreduce_elem_max),
            ..self.clone()
        };
        c.validate()?;
        Ok(c)
    }

    /// Rejects values the runtime cannot honour, naming the field. Zero-means-default
    /// fields are accepted as 0 only through [`resolve`](Self::resolve).
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::Config(what));
        let range = |name: &str, v: u64, min: u64, max: u64| {
            if v < min || v > max {
                bad(format!("{name} {v} must be {min}..={max}"))
            } else {
                Ok(())
            }
        };
        range(
            "queue_num",
            self.queue_num.into(),
            1,
            limits::QUEUE_NUM_MAX.into(),
        )?;
        range(
            "queue_size_max",
            self.queue_size_max.into(),
            1,
            limits::QUEUE_SIZE_MAX.into(),
        )?;
        range(
            "segment_max",
            self.segment_max.into(),
            1,
            limits::SEGMENT_MAX.into(),
        )?;
        range(
            "group_max",
            self.group_max.into(),
            1,
            limits::GROUP_MAX.into(),
        )?;
        range(
            "transfer_size_max",
            self.transfer_size_max,
            1,
            limits::TRANSFER_SIZE_MAX,
        )?;
        range(
            "notification_num",
            self.notification_num.into(),
            1,
            u32::MAX.into(),
        )?;
        range(
            "passive_transfer_size_max",
            self.passive_transfer_size_max.into(),
            1,
            limits::PASSIVE_TRANSFER_SIZE_MAX.into(),
        )?;
        range(
            "passive_queue_size_max",
            self.passive_queue_size_max.into(),
            1,
            u32::MAX.into(),
        )?;
        range(
            "allreduce_elem_max",
            self.allreduce_elem_max.into(),
            1,
            u32::MAX.into(),
        )?;
        range(
            "rw_list_elem_max",
            self.rw_list_elem_max.into(),
            1,
            limits::RW_LIST_ELEM_MAX.into(),
        )?;
        if !matches!(
            self.network,
            NetworkType::Ethernet | NetworkType::Ib | NetworkType::Roce
        ) {
            return bad(format!(
                "network {:?} is not supported (Ethernet, Ib, Roce)",
                self.network
            ));
        }
        Ok(())
    }

    /// Bytes of one round of the small allreduce: `allreduce_buf_size` within
    /// [`limits::ALLREDUCE_ROUND_MIN`]..=[`limits::ALLREDUCE_ROUND_MAX`].
    pub fn allreduce_round_bytes(&self) -> usize {
        self.allreduce_buf_size
            .clamp(limits::ALLREDUCE_ROUND_MIN, limits::ALLREDUCE_ROUND_MAX) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_limits_enforced() {
        Config::default().validate().unwrap();
        let c = Config {
            queue_num: 17,
            ..Config::default()
        };
        assert!(matches!(c.validate(), Err(Error::Config(m)) if m.contains("queue_num")));
        let c = Config {
            queue_size_max: 0,
            ..Config::default()
        };
        assert!(c.validate().is_err());
        let c = Config {
            network: NetworkType::Gemini,
            ..Config::default()
        };
        assert!(c.validate().is_err());
    }

    #[test]
    fn zero_means_default_where_gpi2_accepts_zero() {
        let zeros = Config {
            group_max: 0,
            transfer_size_max: 0,
            notification_num: 0,
            passive_queue_size_max: 0,
            passive_transfer_size_max: 0,
            allreduce_elem_max: 0,
            ..Config::default()
        };
        assert!(zeros.validate().is_err());
        assert_eq!(zeros.resolve().unwrap(), Config::default());
    }

    #[test]
    fn gpi2_ranges_are_accepted() {
        let d = Config::default;
        for c in [
            Config {
                allreduce_elem_max: 1_000_000,
                ..d()
            },
            Config {
                allreduce_elem_max: u32::MAX,
                ..d()
            },
            Config {
                group_max: 255,
                ..d()
            },
            Config {
                group_max: 256,
                ..d()
            },
            Config {
                notification_num: 2 * 65536,
                ..d()
            },
            Config {
                notification_num: 1,
                ..d()
            },
            Config {
                allreduce_buf_size: 0,
                ..d()
            },
            Config {
                allreduce_buf_size: u64::MAX,
                ..d()
            },
            Config {
                passive_queue_size_max: 1,
                ..d()
            },
        ] {
            assert_eq!(c.resolve().unwrap(), c);
        }
        assert_eq!(
            Config {
                allreduce_buf_size: 0,
                ..d()
            }
            .allreduce_round_bytes(),
            64
        );
        assert_eq!(
            Config {
                allreduce_buf_size: u64::MAX,
                ..d()
            }
            .allreduce_round_bytes(),
            1 << 20
        );
    }
}
