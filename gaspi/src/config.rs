//! Runtime configuration (`gaspi_config_t`): limits with the reference implementation's
//! defaults, validated before init.

use crate::error::{Error, Result};
use crate::types::NetworkType;

/// Hard upper bounds of the implementation.
pub mod limits {
    pub const QUEUE_NUM_MAX: u32 = 16;
    pub const QUEUE_SIZE_MAX: u32 = 4096;
    pub const SEGMENT_MAX: u32 = 255;
    pub const GROUP_MAX: u32 = 32;
    pub const TRANSFER_SIZE_MAX: u64 = 1 << 30;
    pub const PASSIVE_TRANSFER_SIZE_MAX: u32 = 65535;
    pub const ALLREDUCE_ELEM_MAX: u32 = 255;
    pub const RW_LIST_ELEM_MAX: u32 = 255;
    pub const NOTIFICATION_NUM_MAX: u32 = 1 << 20;
}

/// How the runtime is set up. Change it with [`crate::Context::init_with`].
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub network: NetworkType,
    /// Number of communication queues created at init (1..=16).
    pub queue_num: u32,
    /// Entries a queue holds before posting returns `QueueFull` (1..=4096).
    pub queue_size_max: u32,
    pub segment_max: u32,
    pub group_max: u32,
    pub transfer_size_max: u64,
    /// Notification slots per segment.
    pub notification_num: u32,
    pub passive_queue_size_max: u32,
    pub passive_transfer_size_max: u32,
    /// Bytes per round buffer of the small group allreduce.
    pub allreduce_buf_size: u64,
    pub allreduce_elem_max: u32,
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
            group_max: limits::GROUP_MAX,
            transfer_size_max: limits::TRANSFER_SIZE_MAX,
            notification_num: 65536,
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
    /// Rejects values the runtime cannot honour, naming the field.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::Config(what));
        if self.queue_num == 0 || self.queue_num > limits::QUEUE_NUM_MAX {
            return bad(format!(
                "queue_num {} must be 1..={}",
                self.queue_num,
                limits::QUEUE_NUM_MAX
            ));
        }
        if self.queue_size_max == 0 || self.queue_size_max > limits::QUEUE_SIZE_MAX {
            return bad(format!(
                "queue_size_max {} must be 1..={}",
                self.queue_size_max,
                limits::QUEUE_SIZE_MAX
            ));
        }
        if self.segment_max == 0 || self.segment_max > limits::SEGMENT_MAX {
            return bad(format!(
                "segment_max {} must be 1..={}",
                self.segment_max,
                limits::SEGMENT_MAX
            ));
        }
        if self.group_max == 0 || self.group_max > limits::GROUP_MAX {
            return bad(format!(
                "group_max {} must be 1..={}",
                self.group_max,
                limits::GROUP_MAX
            ));
        }
        if self.transfer_size_max == 0 || self.transfer_size_max > limits::TRANSFER_SIZE_MAX {
            return bad(format!(
                "transfer_size_max {} must be 1..={}",
                self.transfer_size_max,
                limits::TRANSFER_SIZE_MAX
            ));
        }
        if self.notification_num == 0 || self.notification_num > limits::NOTIFICATION_NUM_MAX {
            return bad(format!(
                "notification_num {} must be 1..={}",
                self.notification_num,
                limits::NOTIFICATION_NUM_MAX
            ));
        }
        if self.passive_transfer_size_max == 0
            || self.passive_transfer_size_max > limits::PASSIVE_TRANSFER_SIZE_MAX
        {
            return bad(format!(
                "passive_transfer_size_max {} must be 1..={}",
                self.passive_transfer_size_max,
                limits::PASSIVE_TRANSFER_SIZE_MAX
            ));
        }
        if self.passive_queue_size_max == 0 {
            return bad("passive_queue_size_max must be at least 1".into());
        }
        if self.allreduce_elem_max == 0 || self.allreduce_elem_max > limits::ALLREDUCE_ELEM_MAX {
            return bad(format!(
                "allreduce_elem_max {} must be 1..={}",
                self.allreduce_elem_max,
                limits::ALLREDUCE_ELEM_MAX
            ));
        }
        if self.allreduce_buf_size < u64::from(self.allreduce_elem_max) * 8
            || self.allreduce_buf_size > 1 << 20
        {
            return bad(format!(
                "allreduce_buf_size {} must hold allreduce_elem_max 8-byte elements and be at most 1 MiB",
                self.allreduce_buf_size
            ));
        }
        if self.rw_list_elem_max == 0 || self.rw_list_elem_max > limits::RW_LIST_ELEM_MAX {
            return bad(format!(
                "rw_list_elem_max {} must be 1..={}",
                self.rw_list_elem_max,
                limits::RW_LIST_ELEM_MAX
            ));
        }
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
}
