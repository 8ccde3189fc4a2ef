//! Values that must never reach logs: configuration secrets and the encryption key.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::ConfigError;

/// A string from the configuration that is a secret (OAuth client secret, state key,
/// password hash). `Debug` prints `"***"` (or `""` when empty, so that "not set" stays
/// visible); read the value with [`SecretString::expose`].
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SecretString(String);

impl SecretString {
    pub fn new(value: impl Into<String>) -> Self {
        SecretString(value.into())
    }

    /// The secret itself. Do not log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<&str> for SecretString {
    fn from(value: &str) -> Self {
        SecretString(value.to_owned())
    }
}

impl From<String> for SecretString {
    fn from(value: String) -> Self {
        SecretString(value)
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("\"\"")
        } else {
            f.write_str("\"***\"")
        }
    }
}

/// The control plane's encryption key (`--encryption-key-file`).
///
/// Upstream uses the file two ways, and so does Wisp: the *whole file*, byte for byte
/// (a trailing newline included), is the HS256 JWT signing key ([`EncryptionKey::bytes`]);
/// its *first 32 bytes* are the AES-256-GCM key ([`EncryptionKey::aes_key`]). A key
/// shorter than 32 bytes is rejected. `Debug` shows only the length.
#[derive(Clone)]
pub struct EncryptionKey {
    bytes: Vec<u8>,
    aes: [u8; EncryptionKey::AES_KEY_LEN],
}

impl EncryptionKey {
    /// Bytes needed for the AES-256 key.
    pub const AES_KEY_LEN: usize = 32;

    /// Reads the key file. The content is kept exactly as stored (no trimming).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::build(bytes, Some(path))
    }

    /// Wraps key material obtained elsewhere (a secret manager, a test).
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Result<Self, ConfigError> {
        Self::build(bytes.into(), None)
    }

    fn build(bytes: Vec<u8>, path: Option<&Path>) -> Result<Self, ConfigError> {
        let Some(aes) = bytes.first_chunk::<{ Self::AES_KEY_LEN }>().copied() else {
            return Err(ConfigError::EncryptionKeyTooShort {
                path: path.map(Path::to_path_buf),
                len: bytes.len(),
            });
        };
        Ok(EncryptionKey { bytes, aes })
    }

    /// The whole key, as the JWT HS256 signing and verification key.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The first 32 bytes, as the AES-256-GCM key.
    pub fn aes_key(&self) -> &[u8; Self::AES_KEY_LEN] {
        &self.aes
    }

    /// Length of the whole key in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Always false: construction rejects short keys. Present for API symmetry.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

impl fmt::Debug for EncryptionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EncryptionKey")
            .field("len", &self.bytes.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    const QUICKSTART_KEY: &str = "encryption-key-just-used-for-quickstart";

    #[test]
    fn reads_whole_file_and_exposes_aes_prefix() {
        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        writeln!(file, "{QUICKSTART_KEY}").expect("write");
        let key = EncryptionKey::from_file(file.path()).expect("key loads");
        assert_eq!(key.bytes(), format!("{QUICKSTART_KEY}\n").as_bytes());
        assert_eq!(key.len(), QUICKSTART_KEY.len() + 1);
        assert_eq!(&key.aes_key()[..], &QUICKSTART_KEY.as_bytes()[..32]);
    }

    #[test]
    fn short_key_is_rejected() {
        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        file.write_all(&[7u8; 31]).expect("write");
        let err = EncryptionKey::from_file(file.path()).unwrap_err();
        assert!(
            matches!(err, ConfigError::EncryptionKeyTooShort { len: 31, .. }),
            "{err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("31 bytes") && msg.contains("at least 32"),
            "{msg}"
        );

        assert!(EncryptionKey::from_bytes(vec![1u8; 32]).is_ok());
        assert!(matches!(
            EncryptionKey::from_bytes(Vec::new()),
            Err(ConfigError::EncryptionKeyTooShort { path: None, len: 0 })
        ));
    }

    #[test]
    fn missing_file_names_the_path() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("no-such-key");
        let err = EncryptionKey::from_file(&path).unwrap_err();
        assert!(matches!(err, ConfigError::Io { .. }));
        assert!(err.to_string().contains("no-such-key"), "{err}");
    }

    #[test]
    fn debug_never_prints_the_key() {
        let key = EncryptionKey::from_bytes(QUICKSTART_KEY).expect("key");
        let shown = format!("{key:?} {key:#?}");
        assert!(!shown.contains("quickstart"), "{shown}");
        assert!(!shown.contains("101, 110"), "bytes leaked: {shown}"); // "en" as numbers
        assert!(shown.contains("len: 39"), "{shown}");

        let secret = SecretString::from("hunter2");
        assert_eq!(format!("{secret:?}"), "\"***\"");
        assert_eq!(secret.expose(), "hunter2");
        assert_eq!(format!("{:?}", SecretString::default()), "\"\"");
    }
}
