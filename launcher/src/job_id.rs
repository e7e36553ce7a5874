//! The job id: it names the job's run directory, its shared-memory files
//! (`/dev/shm/tnt-<job>-*`) and, in `TARANTELLA_JOB_ID` and `GASPI_JOB_ID`, its processes
//! for `--cleanup`. Given with `--job-id`, or drawn at random.

use gaspi::env::JobToken;

use crate::error::{Error, Result};

/// The number of hex digits of a random job id: short enough to type with `--cleanup`,
/// long enough that two jobs of one user do not meet.
const RANDOM_HEX_DIGITS: usize = 12;

/// Checks a job id against the characters gaspi allows in one (it becomes part of file
/// names): 1 to 64 letters, digits, `-`, `_` or `.`, not starting with `.`.
pub fn validate(id: &str) -> Result<String> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && !id.starts_with('.');
    if ok {
        Ok(id.to_string())
    } else {
        Err(Error::Invalid(format!(
            "job id {id:?}: use 1 to 64 letters, digits, '-', '_' or '.' (not starting with '.')"
        )))
    }
}

/// A fresh random job id (hex digits), for a job started without `--job-id`.
pub fn random() -> Result<String> {
    Ok(JobToken::random()?.to_hex()[..RANDOM_HEX_DIGITS].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids() {
        assert!(validate("abc-1.2_x").is_ok());
        for bad in ["", "../x", "a b", ".hidden"] {
            assert!(validate(bad).is_err(), "{bad:?}");
        }
        let id = random().unwrap();
        assert_eq!(id.len(), RANDOM_HEX_DIGITS);
        assert!(validate(&id).is_ok(), "{id}");
    }
}
