//! The job token every rank presents to its peers.

use std::fmt;

use super::vars::JOB_TOKEN;
use crate::error::{Error, Result};

/// A 128-bit job token that every rank presents to its peers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct JobToken(pub [u8; 16]);

impl JobToken {
    /// A fresh random token (what a launcher generates per run).
    pub fn random() -> Result<Self> {
        let mut b = [0u8; 16];
        getrandom::fill(&mut b)
            .map_err(|e| Error::Env(format!("no randomness for a job token: {e}")))?;
        Ok(JobToken(b))
    }

    /// A token derived from a job id: for jobs started without a launcher. Not secret.
    pub fn derived_from(job_id: &str) -> Self {
        // FNV-1a over the id, twice with different seeds: stable and dependency-free.
        let mut out = [0u8; 16];
        for (half, seed) in [0xcbf2_9ce4_8422_2325u64, 0x8422_2325_cbf2_9ce4]
            .iter()
            .enumerate()
        {
            let mut h = *seed;
            for b in job_id.bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x100_0000_01b3);
            }
            out[half * 8..half * 8 + 8].copy_from_slice(&h.to_le_bytes());
        }
        JobToken(out)
    }

    /// The token as 32 lowercase hex digits: the `GASPI_JOB_TOKEN` value a launcher exports.
    /// This is the secret; keep it out of logs and command lines.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses a `GASPI_JOB_TOKEN` value: exactly 32 hex digits (either case, surrounding
    /// whitespace ignored); anything else is [`Error::Env`].
    pub fn from_hex(s: &str) -> Result<Self> {
        let s = s.trim();
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::Env(format!(
                "{JOB_TOKEN} must be 32 hex digits, got {} characters",
                s.len()
            )));
        }
        let mut out = [0u8; 16];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("validated hex");
        }
        Ok(JobToken(out))
    }
}

impl fmt::Debug for JobToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the secret itself.
        f.write_str("JobToken(..)")
    }
}
