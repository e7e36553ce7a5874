//! IDX files (the format of MNIST and Fashion-MNIST): unsigned-byte arrays, plain or gzipped
//! as they are published. Every malformed file is an error naming the file and what is wrong.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// An unsigned-byte IDX array: its dimensions and data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdxArray {
    pub dims: Vec<usize>,
    pub data: Vec<u8>,
}

/// The gzip magic number.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Where the file `name` is in `dir`: `name` itself, else `name.gz`.
pub fn locate(dir: &Path, name: &str) -> Option<PathBuf> {
    [dir.join(name), dir.join(format!("{name}.gz"))]
        .into_iter()
        .find(|p| p.is_file())
}

/// Reads an IDX file of unsigned bytes (type code 0x08), plain or gzipped (recognized by its
/// content, whatever its name).
pub fn read_idx(path: &Path) -> Result<IdxArray> {
    let raw = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let bytes = if raw.starts_with(&GZIP_MAGIC) {
        let mut out = Vec::with_capacity(raw.len() * 4);
        flate2::read::GzDecoder::new(raw.as_slice())
            .read_to_end(&mut out)
            .map_err(|e| data_err(path, format!("not a valid gzip file: {e}")))?;
        out
    } else {
        raw
    };
    parse_idx(&bytes).map_err(|message| data_err(path, message))
}

/// Parses IDX bytes: `0 0 type ndims`, big-endian u32 dimensions, then the data.
pub fn parse_idx(bytes: &[u8]) -> std::result::Result<IdxArray, String> {
    let header = bytes.get(..4).ok_or("shorter than the 4-byte IDX header")?;
    if header[0] != 0 || header[1] != 0 {
        return Err(format!(
            "bad magic {:02x}{:02x}: not an IDX file",
            header[0], header[1]
        ));
    }
    if header[2] != 0x08 {
        return Err(format!(
            "element type 0x{:02x} is not supported (only unsigned bytes, 0x08)",
            header[2]
        ));
    }
    let ndims = usize::from(header[3]);
    let dims_end = 4 + 4 * ndims;
    let dim_bytes = bytes
        .get(4..dims_end)
        .ok_or_else(|| format!("truncated: the header announces {ndims} dimensions"))?;
    let dims: Vec<usize> = dim_bytes
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize)
        .collect();
    let count = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or("dimensions overflow")?;
    let data = &bytes[dims_end..];
    if data.len() < count {
        return Err(format!(
            "truncated: dimensions {dims:?} need {count} bytes of data, the file has {}",
            data.len()
        ));
    }
    if data.len() > count {
        return Err(format!(
            "dimensions {dims:?} need {count} bytes of data, the file has {} (trailing bytes)",
            data.len()
        ));
    }
    Ok(IdxArray {
        dims,
        data: data.to_vec(),
    })
}

/// Writes an unsigned-byte IDX file, gzipped when `path` ends in `.gz` (tests make small
/// MNIST-like files with it).
pub fn write_idx(path: &Path, dims: &[usize], data: &[u8]) -> Result<()> {
    let mut bytes = vec![0, 0, 0x08, dims.len() as u8];
    for &d in dims {
        let d = u32::try_from(d)
            .map_err(|_| data_err(path, format!("dimension {d} does not fit in u32")))?;
        bytes.extend(d.to_be_bytes());
    }
    bytes.extend_from_slice(data);
    if path.extension().is_some_and(|e| e == "gz") {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&bytes).map_err(|e| Error::io(path, e))?;
        bytes = gz.finish().map_err(|e| Error::io(path, e))?;
    }
    std::fs::write(path, bytes).map_err(|e| Error::io(path, e))
}

pub(crate) fn data_err(path: &Path, message: String) -> Error {
    Error::Data {
        path: path.to_path_buf(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_rejects_malformed_bytes() {
        let err = |b: &[u8]| parse_idx(b).unwrap_err();
        assert!(err(&[0, 0]).contains("header"));
        assert!(err(&[1, 0, 8, 1, 0, 0, 0, 1, 5]).contains("bad magic"));
        assert!(err(&[0, 0, 0x0d, 1, 0, 0, 0, 1, 5]).contains("element type"));
        assert!(err(&[0, 0, 8, 2, 0, 0, 0, 1]).contains("truncated"));
        assert!(err(&[0, 0, 8, 1, 0, 0, 0, 2, 5]).contains("truncated"));
        assert!(err(&[0, 0, 8, 1, 0, 0, 0, 1, 5, 6]).contains("trailing"));
        assert_eq!(
            parse_idx(&[0, 0, 8, 1, 0, 0, 0, 1, 5]).unwrap(),
            IdxArray {
                dims: vec![1],
                data: vec![5]
            }
        );
    }

    #[test]
    fn gzipped_and_plain_files_read_the_same() {
        let dir = std::env::temp_dir().join(format!("tnt-idx-gz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data: Vec<u8> = (0..2 * 3 * 4).map(|i| i as u8).collect();
        write_idx(&dir.join("a"), &[2, 3, 4], &data).unwrap();
        write_idx(&dir.join("b.gz"), &[2, 3, 4], &data).unwrap();
        let plain = read_idx(&dir.join("a")).unwrap();
        let gz = read_idx(&dir.join("b.gz")).unwrap();
        assert_eq!(plain, gz);
        assert_eq!(plain.dims, [2, 3, 4]);
        assert_eq!(locate(&dir, "b"), Some(dir.join("b.gz")));
        assert_eq!(locate(&dir, "a"), Some(dir.join("a")));
        assert_eq!(locate(&dir, "c"), None);
        // A gzip stream cut short names the file.
        let cut = std::fs::read(dir.join("b.gz")).unwrap();
        std::fs::write(dir.join("cut.gz"), &cut[..cut.len() / 2]).unwrap();
        let e = read_idx(&dir.join("cut.gz")).unwrap_err().to_string();
        assert!(e.contains("cut.gz") && e.contains("gzip"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
