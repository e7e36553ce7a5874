//! Little-endian fields and length-prefixed messages: the one framing of the rendezvous
//! (`runtime::rendezvous`) and of the verbs endpoint records exchanged through it.
//!
//! A message on a stream is a `u32` length, then that many bytes. Inside, fields are written
//! with [`Encoder`] and read back with [`Decoder`], which fails with
//! [`ProtocolError::Truncated`] instead of reading past the end.

use std::io::{Read, Write};
use std::time::Duration;

use crate::error::ProtocolError;
use crate::types::Deadline;

/// Builds a message body field by field.
#[derive(Default)]
pub(crate) struct Encoder(Vec<u8>);

impl Encoder {
    pub fn new() -> Self {
        Encoder::default()
    }

    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }

    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Raw bytes of a length both sides know.
    pub fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }

    /// Bytes with a `u16` length in front (at most 65535: longer input is a caller bug).
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        let len = u16::try_from(b.len()).expect("field of at most 65535 bytes");
        self.u16(len).raw(b)
    }

    pub fn str(&mut self, s: &str) -> &mut Self {
        self.bytes(s.as_bytes())
    }

    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.0)
    }
}

/// Reads a message body field by field.
pub(crate) struct Decoder<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Decoder<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Decoder { b, at: 0 }
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], ProtocolError> {
        let s = self
            .at
            .checked_add(n)
            .and_then(|end| self.b.get(self.at..end))
            .ok_or(ProtocolError::Truncated)?;
        self.at += n;
        Ok(s)
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], ProtocolError> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    pub fn u8(&mut self) -> Result<u8, ProtocolError> {
        Ok(self.array::<1>()?[0])
    }

    pub fn u16(&mut self) -> Result<u16, ProtocolError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Result<u32, ProtocolError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, ProtocolError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Bytes written by [`Encoder::bytes`].
    pub fn bytes(&mut self) -> Result<Vec<u8>, ProtocolError> {
        let n = usize::from(self.u16()?);
        Ok(self.take(n)?.to_vec())
    }

    /// A string written by [`Encoder::str`]; not UTF-8 is [`ProtocolError::Truncated`]'s
    /// sibling, [`ProtocolError::BadString`].
    pub fn str(&mut self) -> Result<String, ProtocolError> {
        String::from_utf8(self.bytes()?).map_err(|_| ProtocolError::BadString)
    }

    /// Bytes not read yet.
    #[cfg(test)]
    pub fn remaining(&self) -> usize {
        self.b.len() - self.at
    }
}

/// Writes one length-prefixed message.
pub(crate) fn write_message(mut stream: impl Write, body: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(body.len()).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    stream.write_all(&len.to_le_bytes())?;
    stream.write_all(body)
}

/// Why [`read_message`] returned no message.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadMessageError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Protocol(#[from] ProtocolError),
}

/// Reads one length-prefixed message of at most `max` bytes; the stream's read timeout is
/// set from `deadline` first (an hour when unbounded), so a silent peer cannot hold the
/// caller past it.
pub(crate) fn read_message(
    stream: &std::net::TcpStream,
    deadline: Deadline,
    max: usize,
) -> Result<Vec<u8>, ReadMessageError> {
    let limit = deadline
        .remaining()
        .unwrap_or(Duration::from_secs(3600))
        .max(Duration::from_millis(1));
    stream.set_read_timeout(Some(limit))?;
    read_message_from(stream, max)
}

/// [`read_message`] from any reader (no timeout handling).
pub(crate) fn read_message_from(mut r: impl Read, max: usize) -> Result<Vec<u8>, ReadMessageError> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > max {
        return Err(ProtocolError::TooLong {
            len: len as u64,
            max: max as u64,
        }
        .into());
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body)?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_roundtrip() {
        let body = Encoder::new()
            .u8(1)
            .u16(2)
            .u32(3)
            .u64(4)
            .str("host")
            .bytes(&[9, 9])
            .finish();
        let mut d = Decoder::new(&body);
        assert_eq!(d.u8().unwrap(), 1);
        assert_eq!(d.u16().unwrap(), 2);
        assert_eq!(d.u32().unwrap(), 3);
        assert_eq!(d.u64().unwrap(), 4);
        assert_eq!(d.str().unwrap(), "host");
        assert_eq!(d.bytes().unwrap(), vec![9, 9]);
        assert_eq!(d.remaining(), 0);
        assert_eq!(d.u8(), Err(ProtocolError::Truncated));
    }

    #[test]
    fn a_length_past_the_end_is_truncated_not_a_panic() {
        let body = Encoder::new().u16(500).raw(b"short").finish();
        assert_eq!(Decoder::new(&body).bytes(), Err(ProtocolError::Truncated));
        assert_eq!(
            Decoder::new(&Encoder::new().bytes(&[0xff, 0xfe]).finish()).str(),
            Err(ProtocolError::BadString)
        );
    }

    #[test]
    fn messages_roundtrip_and_oversized_ones_are_refused() {
        let mut stream = Vec::new();
        write_message(&mut stream, b"hello").unwrap();
        write_message(&mut stream, &[7; 100]).unwrap();
        let mut r = &stream[..];
        assert_eq!(read_message_from(&mut r, 64).unwrap(), b"hello");
        assert!(matches!(
            read_message_from(&mut r, 64),
            Err(ReadMessageError::Protocol(ProtocolError::TooLong {
                len: 100,
                max: 64
            }))
        ));
        let mut cut = &stream[..6];
        assert!(matches!(
            read_message_from(&mut cut, 64),
            Err(ReadMessageError::Io(_))
        ));
    }
}
