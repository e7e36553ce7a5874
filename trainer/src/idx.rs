//! IDX files (MNIST's and Fashion-MNIST's format), plain or gzip-compressed: `0 0 type ndims`,
//! big-endian u32 dimensions, then the data. Only unsigned bytes (type 0x08) are supported,
//! which is what both datasets use. Compression is recognized from the content (the gzip
//! magic `1f 8b`), not from the file name.

use std::io::{BufRead, Read};
use std::path::Path;

use crate::error::{Error, Result};

/// The first two bytes of every gzip stream.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// IDX element type of unsigned bytes.
const IDX_U8: u8 = 0x08;

/// An unsigned-byte IDX array: its dimensions and data (row-major).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdxArray {
    /// The size of each dimension, outermost first.
    pub dims: Vec<usize>,
    /// The elements, row-major.
    pub data: Vec<u8>,
}

/// Reads an IDX file of unsigned bytes, plain or gzip-compressed. Memory grows only to what
/// the header announces: a corrupt or hostile gzip stream that expands further is read to
/// its end (checking its checksum) without being kept.
pub fn read_idx(path: &Path) -> Result<IdxArray> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut file = std::io::BufReader::new(file);
    let gzip = file
        .fill_buf()
        .map_err(|e| Error::io(path, e))?
        .starts_with(&GZIP_MAGIC);
    let parsed = if gzip {
        parse_idx_from(flate2::bufread::MultiGzDecoder::new(file), |e| {
            format!("gzip stream is corrupt or truncated ({e}); download the file again")
        })
    } else {
        parse_idx_from(file, |e| format!("cannot read the file: {e}"))
    };
    parsed.map_err(|message| Error::data(path, message))
}

/// Parses IDX bytes.
pub fn parse_idx(bytes: Vec<u8>) -> std::result::Result<IdxArray, String> {
    parse_idx_from(bytes.as_slice(), |e| e.to_string())
}

/// Parses an IDX stream, keeping no more of it than its header announces; `io_error` words
/// a read error other than the stream's end.
fn parse_idx_from(
    mut stream: impl Read,
    io_error: impl Fn(std::io::Error) -> String,
) -> std::result::Result<IdxArray, String> {
    let mut header = [0u8; 4];
    read_part(&mut stream, &mut header, &io_error)?
        .then_some(())
        .ok_or("truncated: shorter than the 4-byte IDX header")?;
    if header[0] != 0 || header[1] != 0 {
        return Err(format!(
            "bad magic {:02x}{:02x} (IDX files start with 0000): not an IDX file",
            header[0], header[1]
        ));
    }
    if header[2] != IDX_U8 {
        return Err(format!(
            "element type 0x{:02x} is not supported (only unsigned bytes, 0x08)",
            header[2]
        ));
    }
    let ndims = usize::from(header[3]);
    let mut dim_bytes = vec![0u8; 4 * ndims];
    if !read_part(&mut stream, &mut dim_bytes, &io_error)? {
        return Err(format!(
            "truncated: the header announces {ndims} dimensions, the file ends before them"
        ));
    }
    let dims: Vec<usize> = dim_bytes
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize)
        .collect();
    let count = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or("dimensions overflow")?;
    // Grows with what arrives, never past what the header announces.
    let mut data = Vec::new();
    (&mut stream)
        .take(count as u64)
        .read_to_end(&mut data)
        .map_err(&io_error)?;
    let have = data.len();
    if have < count {
        return Err(format!(
            "truncated: dimensions {dims:?} need {count} bytes of data, the file has {have}"
        ));
    }
    // The rest is read to its end and dropped: a gzip stream's checksum is checked there.
    let more = std::io::copy(&mut stream, &mut std::io::sink()).map_err(&io_error)?;
    if more > 0 {
        return Err(format!(
            "dimensions {dims:?} need {count} bytes of data, the file has {more} more              (trailing bytes)"
        ));
    }
    Ok(IdxArray { dims, data })
}

/// Fills `buf` from `stream`: false when the stream ends first.
fn read_part(
    stream: &mut impl Read,
    buf: &mut [u8],
    io_error: &impl Fn(std::io::Error) -> String,
) -> std::result::Result<bool, String> {
    match stream.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(io_error(e)),
    }
}

fn encode(path: &Path, dims: &[usize], data: &[u8]) -> Result<Vec<u8>> {
    let ndims = u8::try_from(dims.len())
        .map_err(|_| Error::data(path, format!("{} dimensions are too many", dims.len())))?;
    let mut bytes = vec![0, 0, IDX_U8, ndims];
    for &d in dims {
        let d = u32::try_from(d)
            .map_err(|_| Error::data(path, format!("dimension {d} does not fit in u32")))?;
        bytes.extend(d.to_be_bytes());
    }
    bytes.extend_from_slice(data);
    Ok(bytes)
}

/// Writes an unsigned-byte IDX file (tests use it to make small MNIST-like files).
pub fn write_idx(path: &Path, dims: &[usize], data: &[u8]) -> Result<()> {
    let bytes = encode(path, dims, data)?;
    std::fs::write(path, bytes).map_err(|e| Error::io(path, e))
}

/// Writes a gzip-compressed unsigned-byte IDX file, as the datasets are published.
pub fn write_idx_gz(path: &Path, dims: &[usize], data: &[u8]) -> Result<()> {
    use std::io::Write;
    let bytes = encode(path, dims, data)?;
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    gz.write_all(&bytes)
        .and_then(|()| gz.finish().map(drop))
        .map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("tnt-idx-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn plain_and_gzip_files_read_the_same() {
        let dir = scratch("rt");
        let data: Vec<u8> = (0..2 * 3 * 4).map(|i| i as u8).collect();
        write_idx(&dir.join("a"), &[2, 3, 4], &data).unwrap();
        write_idx_gz(&dir.join("a.gz"), &[2, 3, 4], &data).unwrap();
        let plain = read_idx(&dir.join("a")).unwrap();
        let gz = read_idx(&dir.join("a.gz")).unwrap();
        assert_eq!(plain, gz);
        assert_eq!(plain.dims, [2, 3, 4]);
        assert_eq!(plain.data, data);
        // A gzip file cut in the middle: an error naming the file.
        let bytes = std::fs::read(dir.join("a.gz")).unwrap();
        std::fs::write(dir.join("cut.gz"), &bytes[..bytes.len() / 2]).unwrap();
        let err = read_idx(&dir.join("cut.gz")).unwrap_err().to_string();
        assert!(err.contains("cut.gz") && err.contains("gzip"), "{err}");
        let err = read_idx(&dir.join("missing")).unwrap_err().to_string();
        assert!(err.contains("missing"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn parse_rejects_malformed_bytes() {
        let err = |b: &[u8]| parse_idx(b.to_vec()).unwrap_err();
        assert!(err(&[0, 0]).contains("header"));
        assert!(err(&[1, 0, 8, 1, 0, 0, 0, 1, 5]).contains("magic"));
        assert!(err(&[0, 0, 0x0d, 1, 0, 0, 0, 1, 5]).contains("element type"));
        assert!(err(&[0, 0, 8, 2, 0, 0, 0, 1]).contains("truncated"));
        assert!(err(&[0, 0, 8, 1, 0, 0, 0, 2, 5]).contains("truncated"));
        assert!(err(&[0, 0, 8, 1, 0, 0, 0, 1, 5, 6]).contains("trailing"));
        assert_eq!(
            parse_idx(vec![0, 0, 8, 1, 0, 0, 0, 1, 5]).unwrap(),
            IdxArray {
                dims: vec![1],
                data: vec![5]
            }
        );
    }
}
