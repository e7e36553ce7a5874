//! The fusion threshold: how many bytes a bucket gathers before its allreduce may start.
//!
//! Users give it in KiB (`--fusion-threshold`, or [`tnt_env::FUSION_THRESHOLD_KB`] set by the
//! `tarantella` launcher); the bucketer works in bytes. One name from the command line to the
//! bucket plan: `fusion_threshold`, of type [`FusionThreshold`].

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// Bytes per KiB.
const KIB: usize = 1024;

/// The minimum size of a bucket in bytes (a bucket may overshoot by its last tensor).
///
/// `0` means one bucket per tensor; a threshold above the model size means one bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FusionThreshold {
    bytes: usize,
}

impl FusionThreshold {
    /// The default, 32 KiB: small enough that the first bucket's allreduce starts early in
    /// backward, large enough that per-message latency does not dominate.
    pub const DEFAULT: FusionThreshold = FusionThreshold { bytes: 32 * KIB };

    /// A threshold of exactly `bytes` bytes.
    pub const fn from_bytes(bytes: usize) -> Self {
        FusionThreshold { bytes }
    }

    /// A threshold of `kib` KiB; errors when the byte count overflows `usize`.
    pub fn from_kib(kib: usize) -> Result<Self> {
        kib.checked_mul(KIB)
            .map(Self::from_bytes)
            .ok_or(Error::FusionThresholdTooLarge { kib })
    }

    /// The threshold in bytes.
    pub const fn bytes(self) -> usize {
        self.bytes
    }

    /// Reads [`tnt_env::FUSION_THRESHOLD_KB`] (KiB, set by the launcher): the default when
    /// unset, an error when malformed.
    pub fn from_env() -> Result<Self> {
        let name = tnt_env::FUSION_THRESHOLD_KB;
        match std::env::var(name) {
            Ok(value) => Self::parse_kib(name, &value),
            Err(std::env::VarError::NotPresent) => Ok(Self::DEFAULT),
            Err(std::env::VarError::NotUnicode(raw)) => Err(Error::InvalidFusionThreshold {
                source_name: name,
                value: raw.to_string_lossy().into_owned(),
                reason: "not valid UTF-8".to_owned(),
            }),
        }
    }

    /// Parses a whole number of KiB (surrounding whitespace allowed). `source_name` says where
    /// the value came from, for the error message.
    pub fn parse_kib(source_name: &'static str, value: &str) -> Result<Self> {
        let invalid = |reason: String| Error::InvalidFusionThreshold {
            source_name,
            value: value.to_owned(),
            reason,
        };
        let trimmed = value.trim();
        if trimmed.is_empty() {
            return Err(invalid("empty; expected a whole number of KiB".to_owned()));
        }
        // `usize::from_str` would accept a leading '+'; KiB counts are plain digits.
        if !trimmed.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid(
                "expected a whole number of KiB (digits only)".to_owned(),
            ));
        }
        let kib: usize = trimmed
            .parse()
            .map_err(|e: std::num::ParseIntError| invalid(e.to_string()))?;
        Self::from_kib(kib).map_err(|e| invalid(e.to_string()))
    }
}

impl Default for FusionThreshold {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Parses KiB, like the command line's `--fusion-threshold`.
impl FromStr for FusionThreshold {
    type Err = Error;

    fn from_str(value: &str) -> Result<Self> {
        Self::parse_kib("argument", value)
    }
}

impl fmt::Display for FusionThreshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.bytes.is_multiple_of(KIB) {
            write!(f, "{} KiB", self.bytes / KIB)
        } else {
            write!(f, "{} B", self.bytes)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_32_kib() {
        assert_eq!(FusionThreshold::default().bytes(), 32 * 1024);
        assert_eq!(FusionThreshold::DEFAULT.to_string(), "32 KiB");
    }

    #[test]
    fn parses_kib_with_whitespace() {
        assert_eq!("64".parse::<FusionThreshold>().unwrap().bytes(), 64 * 1024);
        assert_eq!(" 0\n".parse::<FusionThreshold>().unwrap().bytes(), 0);
    }

    #[test]
    fn rejects_malformed_values() {
        for bad in ["", "  ", "-1", "+4", "1.5", "32k", "abc", "0x10"] {
            let name = tnt_env::FUSION_THRESHOLD_KB;
            let err = FusionThreshold::parse_kib(name, bad).unwrap_err();
            let from_name = matches!(
                err,
                Error::InvalidFusionThreshold { source_name, .. } if source_name == name
            );
            assert!(from_name, "{bad:?} gave {err:?}");
        }
    }

    #[test]
    fn rejects_overflowing_values() {
        let too_many_kib = (usize::MAX / 1024 + 1).to_string();
        assert!(matches!(
            too_many_kib.parse::<FusionThreshold>(),
            Err(Error::InvalidFusionThreshold { .. })
        ));
        assert!(matches!(
            FusionThreshold::from_kib(usize::MAX),
            Err(Error::FusionThresholdTooLarge { kib: usize::MAX })
        ));
        let huge_digits = "9".repeat(40);
        assert!(huge_digits.parse::<FusionThreshold>().is_err());
    }

    #[test]
    fn displays_odd_byte_counts_in_bytes() {
        assert_eq!(FusionThreshold::from_bytes(1000).to_string(), "1000 B");
    }
}
