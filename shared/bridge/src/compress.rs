//! gzip for message payloads (`grpc-encoding: gzip`).

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;

/// Why a payload could not be decompressed.
#[derive(Debug, thiserror::Error)]
pub enum GunzipError {
    #[error("not valid gzip: {0}")]
    Invalid(#[from] std::io::Error),
    #[error("more than {0} bytes once decompressed")]
    TooLarge(usize),
}

/// gzip at the default level: a good ratio on protobuf and JSON at a few tens of MB/s,
/// far cheaper than a second round trip.
pub fn gzip(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(data.len() / 4), Compression::default());
    encoder.write_all(data)?;
    encoder.finish()
}

/// Decompresses `data`, refusing to produce more than `limit` bytes (a small compressed
/// payload can expand enormously).
pub fn gunzip(data: &[u8], limit: usize) -> Result<Vec<u8>, GunzipError> {
    let mut out = Vec::with_capacity(data.len().saturating_mul(4).min(limit));
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    GzDecoder::new(data).take(cap).read_to_end(&mut out)?;
    if out.len() > limit {
        return Err(GunzipError::TooLarge(limit));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let packed = gzip(&data).expect("compress");
        assert!(packed.len() < data.len() / 10, "{} bytes", packed.len());
        assert_eq!(gunzip(&packed, data.len()).expect("decompress"), data);
    }

    #[test]
    fn limit_and_garbage() {
        let packed = gzip(&[0u8; 10_000]).expect("compress");
        assert!(matches!(
            gunzip(&packed, 9_999),
            Err(GunzipError::TooLarge(9_999))
        ));
        assert!(matches!(
            gunzip(b"definitely not gzip", 100),
            Err(GunzipError::Invalid(_))
        ));
        assert!(matches!(
            gunzip(&packed[..packed.len() / 2], 100_000),
            Err(GunzipError::Invalid(_))
        ));
    }
}
