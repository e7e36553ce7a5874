//! The first bytes on a data connection, from the connecting rank: who it is and the job's
//! token, checked before any frame is read.

use crate::env::JobToken;
use crate::error::ProtocolError;

/// First bytes on a data connection, from the connecting rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hello {
    pub token: JobToken,
    pub rank: u16,
    pub nranks: u16,
}

pub(crate) const HELLO_MAGIC: [u8; 4] = *b"TNT1";
pub(crate) const HELLO_LEN: usize = 4 + 16 + 2 + 2;

impl Hello {
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..4].copy_from_slice(&HELLO_MAGIC);
        b[4..20].copy_from_slice(&self.token.0);
        b[20..22].copy_from_slice(&self.rank.to_le_bytes());
        b[22..24].copy_from_slice(&self.nranks.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; HELLO_LEN]) -> Result<Hello, ProtocolError> {
        if b[..4] != HELLO_MAGIC {
            return Err(ProtocolError::BadMagic);
        }
        let mut token = [0u8; 16];
        token.copy_from_slice(&b[4..20]);
        Ok(Hello {
            token: JobToken(token),
            rank: u16::from_le_bytes([b[20], b[21]]),
            nranks: u16::from_le_bytes([b[22], b[23]]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_roundtrip_and_garbage() {
        let h = Hello {
            token: JobToken([7; 16]),
            rank: 3,
            nranks: 5,
        };
        assert_eq!(Hello::decode(&h.encode()), Ok(h));
        assert_eq!(
            Hello::decode(&[0u8; HELLO_LEN]),
            Err(ProtocolError::BadMagic)
        );
    }
}
