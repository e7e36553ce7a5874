//! The verbs part of the rendezvous: this rank's port address, the keys of its segment
//! directory, and the queue pair numbers it created for each peer, encoded as opaque bytes
//! for [`crate::bootstrap`].

use super::device::{MrKeys, PortAddr};
use crate::error::{Error, Result};

/// What every rank learns about a peer's device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub port: PortAddr,
    /// The first packet sequence number of the peer's queue pairs.
    pub psn: u32,
    /// Where the peer publishes the keys of its segments (see `directory`).
    pub directory: MrKeys,
}

const ENDPOINT_LEN: usize = 2 + 16 + 1 + 1 + 1 + 4 + 4 + 4 + 4 + 8;

impl Endpoint {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(ENDPOINT_LEN);
        v.extend_from_slice(&self.port.lid.to_le_bytes());
        v.extend_from_slice(&self.port.gid);
        v.push(self.port.gid_index);
        v.push(self.port.port);
        v.push(u8::from(self.port.roce));
        v.extend_from_slice(&self.port.mtu.to_le_bytes());
        v.extend_from_slice(&self.psn.to_le_bytes());
        v.extend_from_slice(&self.directory.lkey.to_le_bytes());
        v.extend_from_slice(&self.directory.rkey.to_le_bytes());
        v.extend_from_slice(&self.directory.base.to_le_bytes());
        v
    }

    /// `None` for an empty record (the peer has no verbs device).
    pub fn decode(b: &[u8]) -> Result<Option<Endpoint>> {
        if b.is_empty() {
            return Ok(None);
        }
        if b.len() != ENDPOINT_LEN {
            return Err(Error::Bootstrap(format!(
                "verbs endpoint record of {} bytes, expected {ENDPOINT_LEN}",
                b.len()
            )));
        }
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[2..18]);
        Ok(Some(Endpoint {
            port: PortAddr {
                lid: u16::from_le_bytes([b[0], b[1]]),
                gid,
                gid_index: b[18],
                port: b[19],
                roce: b[20] != 0,
                mtu: u32_at(21),
            },
            psn: u32_at(25),
            directory: MrKeys {
                lkey: u32_at(29),
                rkey: u32_at(33),
                base: u64::from_le_bytes(b[37..45].try_into().expect("8 bytes")),
            },
        }))
    }
}

pub(crate) fn encode_qpns(qpns: &[u32]) -> Vec<u8> {
    qpns.iter().flat_map(|q| q.to_le_bytes()).collect()
}

pub(crate) fn decode_qpns(b: &[u8], expect: usize) -> Result<Vec<u32>> {
    if b.len() != expect * 4 {
        return Err(Error::Bootstrap(format!(
            "{} bytes of queue pair numbers, expected {}",
            b.len(),
            expect * 4
        )));
    }
    Ok(b.chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_roundtrip() {
        let e = Endpoint {
            port: PortAddr {
                lid: 7,
                gid: [3; 16],
                gid_index: 2,
                port: 1,
                roce: true,
                mtu: 4096,
            },
            psn: 0x123456,
            directory: MrKeys {
                lkey: 1,
                rkey: 2,
                base: 0xdead_beef,
            },
        };
        assert_eq!(Endpoint::decode(&e.encode()).unwrap(), Some(e));
        assert_eq!(Endpoint::decode(&[]).unwrap(), None);
        assert!(Endpoint::decode(&[1, 2, 3]).is_err());
        assert_eq!(decode_qpns(&encode_qpns(&[1, 2, 3]), 3).unwrap(), [1, 2, 3]);
        assert!(decode_qpns(&[0; 8], 3).is_err());
    }
}
