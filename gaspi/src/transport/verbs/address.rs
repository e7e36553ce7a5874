//! The verbs part of the rendezvous: this rank's port address, the keys of its segment
//! directory, and the queue pair numbers it created for each peer, encoded as opaque bytes
//! for [`crate::bootstrap`].

use super::device::{MrKeys, PortAddr};
use crate::error::{Error, ProtocolError, Result};
use crate::wire::codec::{Decoder, Encoder};

/// What every rank learns about a peer's device.
/// What this rank contributes to the verbs part of the rendezvous: one record for everyone
/// and one blob per peer (its queue pair numbers towards that peer). Empty without verbs.
#[derive(Clone, Debug, Default)]
pub(crate) struct VerbsHello {
    pub common: Vec<u8>,
    pub to_peer: Vec<Vec<u8>>,
}

impl VerbsHello {
    pub fn for_peer(&self, r: usize) -> &[u8] {
        self.to_peer.get(r).map_or(&[], |v| v.as_slice())
    }
}

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
        Encoder::new()
            .u16(self.port.lid)
            .raw(&self.port.gid)
            .u8(self.port.gid_index)
            .u8(self.port.port)
            .u8(u8::from(self.port.roce))
            .u32(self.port.mtu)
            .u32(self.psn)
            .u32(self.directory.lkey)
            .u32(self.directory.rkey)
            .u64(self.directory.base)
            .finish()
    }

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
        let record = |e| Error::Bootstrap(format!("verbs endpoint record: {e}"));
        let mut d = Decoder::new(b);
        let mut read = || -> std::result::Result<Endpoint, ProtocolError> {
            Ok(Endpoint {
                port: PortAddr {
                    lid: d.u16()?,
                    gid: d.array()?,
                    gid_index: d.u8()?,
                    port: d.u8()?,
                    roce: d.u8()? != 0,
                    mtu: d.u32()?,
                },
                psn: d.u32()?,
                directory: MrKeys {
                    lkey: d.u32()?,
                    rkey: d.u32()?,
                    base: d.u64()?,
                },
            })
        };
        read().map(Some).map_err(record)
    }
}

pub(crate) fn encode_qpns(qpns: &[u32]) -> Vec<u8> {
    let mut e = Encoder::new();
    for q in qpns {
        e.u32(*q);
    }
    e.finish()
}

pub(crate) fn decode_qpns(b: &[u8], expect: usize) -> Result<Vec<u32>> {
    if b.len() != expect * 4 {
        return Err(Error::Bootstrap(format!(
            "{} bytes of queue pair numbers, expected {}",
            b.len(),
            expect * 4
        )));
    }
    let mut d = Decoder::new(b);
    (0..expect)
        .map(|_| d.u32())
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::Bootstrap(format!("queue pair numbers: {e}")))
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
