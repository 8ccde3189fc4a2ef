//! Upstream's hybrid encryption (`pkg/crypto/hybrid.go`, after Bitnami's sealed secrets),
//! which pipeds decrypt with their private key:
//!
//! `base64(u16be(len(rsa_ct)) || rsa_ct || aes_ct)`, where `rsa_ct` is a fresh 32-byte
//! AES-256 key under RSA-OAEP(SHA-256, no label) and `aes_ct` the plaintext under
//! AES-256-GCM with that key and an all-zero nonce (safe: each key seals one message),
//! tag appended.

use aes_gcm::Aes256Gcm;
use aes_gcm::aead::{Aead, KeyInit, Nonce};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rsa::pkcs8::{DecodePrivateKey, DecodePublicKey};
use rsa::rand_core::{OsRng, RngCore};
use rsa::sha2::Sha256;
use rsa::{Oaep, RsaPrivateKey, RsaPublicKey};

/// Length of the symmetric key sealed under RSA.
const SYMMETRIC_KEY_BYTES: usize = 32;

/// Why sealing or opening failed. Carries no key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct HybridError(String);

fn err(msg: impl std::fmt::Display) -> HybridError {
    HybridError(msg.to_string())
}

/// A PEM block's DER, whatever its label (as Go's `pem.Decode`); surrounding
/// whitespace is ignored.
fn pem_der(pem: &str) -> Result<Vec<u8>, HybridError> {
    let (_, der) = rsa::pkcs8::der::pem::decode_vec(pem.trim().as_bytes())
        .map_err(|e| err(format!("failed to decode PEM block: {e}")))?;
    Ok(der)
}

/// Upstream's `ParseRSAPublicKeyFromPem`: a PEM-wrapped PKIX (SubjectPublicKeyInfo) RSA
/// public key, which is what pipeds publish.
pub fn parse_public_key_pem(pem: &str) -> Result<RsaPublicKey, HybridError> {
    RsaPublicKey::from_public_key_der(&pem_der(pem)?).map_err(|e| {
        err(format!(
            "invalid key format, it must be a public RSA key: {e}"
        ))
    })
}

/// A PEM-wrapped PKCS#8 RSA private key (what a piped keeps).
pub fn parse_private_key_pem(pem: &str) -> Result<RsaPrivateKey, HybridError> {
    RsaPrivateKey::from_pkcs8_der(&pem_der(pem)?).map_err(|e| {
        err(format!(
            "invalid key format, it must be a private RSA key: {e}"
        ))
    })
}

/// Seals `plaintext` for the holder of `key`'s private half.
pub fn encrypt(key: &RsaPublicKey, plaintext: &[u8]) -> Result<String, HybridError> {
    let mut sym_key = [0u8; SYMMETRIC_KEY_BYTES];
    OsRng.fill_bytes(&mut sym_key);
    let rsa_ct = key
        .encrypt(&mut OsRng, Oaep::new::<Sha256>(), &sym_key)
        .map_err(|e| err(format!("failed to seal the symmetric key: {e}")))?;
    let rsa_len = u16::try_from(rsa_ct.len()).map_err(|_| err("RSA key is too large"))?;
    let cipher = Aes256Gcm::new_from_slice(&sym_key).map_err(err)?;
    let aes_ct = cipher
        .encrypt(&Nonce::<Aes256Gcm>::default(), plaintext)
        .map_err(|_| err("failed to encrypt the data"))?;
    let mut out = Vec::with_capacity(2 + rsa_ct.len() + aes_ct.len());
    out.extend_from_slice(&rsa_len.to_be_bytes());
    out.extend_from_slice(&rsa_ct);
    out.extend_from_slice(&aes_ct);
    Ok(STANDARD.encode(out))
}

/// Opens what [`encrypt`] (or upstream's `HybridEncrypter`) sealed.
pub fn decrypt(key: &RsaPrivateKey, sealed: &str) -> Result<Vec<u8>, HybridError> {
    let data = STANDARD
        .decode(sealed.trim().as_bytes())
        .map_err(|e| err(format!("not base64: {e}")))?;
    let (len, rest) = data
        .split_first_chunk::<2>()
        .ok_or_else(|| err("data is too short"))?;
    let rsa_len = usize::from(u16::from_be_bytes(*len));
    if rest.len() < rsa_len {
        return Err(err("data is too short"));
    }
    let (rsa_ct, aes_ct) = rest.split_at(rsa_len);
    let sym_key = key
        .decrypt(Oaep::new::<Sha256>(), rsa_ct)
        .map_err(|e| err(format!("failed to open the symmetric key: {e}")))?;
    let cipher = Aes256Gcm::new_from_slice(&sym_key).map_err(err)?;
    cipher
        .decrypt(&Nonce::<Aes256Gcm>::default(), aes_ct)
        .map_err(|_| err("failed to decrypt the data"))
}

/// Upstream's `getEncriptionKey`: only a KEY_PAIR piped publishes a public key.
pub(crate) fn public_key_pem(
    se: Option<&wisp_proto::model::piped::SecretEncryption>,
) -> Result<&str, crate::error::ServiceError> {
    let no_key = || {
        crate::error::ServiceError::FailedPrecondition(
            "The piped does not contain a public key".into(),
        )
    };
    let se = se.ok_or_else(no_key)?;
    if se.r#type != "KEY_PAIR" {
        return Err(crate::error::ServiceError::FailedPrecondition(
            "The piped does not contain a valid encryption type".into(),
        ));
    }
    if se.public_key.is_empty() {
        return Err(no_key());
    }
    Ok(&se.public_key)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PUBLIC: &str = include_str!("../tests/testdata/piped-public.pem");
    const PRIVATE: &str = include_str!("../tests/testdata/piped-private.pem");

    #[test]
    fn round_trip_in_upstream_layout() {
        let public = parse_public_key_pem(PUBLIC).expect("public key");
        let private = parse_private_key_pem(PRIVATE).expect("private key");
        let text = "apiVersion: v1\nkind: ConfigMap\ndata:\n  lives: 3\n";
        let sealed = encrypt(&public, text.as_bytes()).expect("encrypt");
        let raw = STANDARD.decode(&sealed).expect("base64");
        // 2048-bit key: a 256-byte RSA block, then the text and a 16-byte tag.
        assert_eq!(&raw[..2], &256u16.to_be_bytes());
        assert_eq!(raw.len(), 2 + 256 + text.len() + 16);
        assert_eq!(
            decrypt(&private, &sealed).expect("decrypt"),
            text.as_bytes()
        );
        // A fresh symmetric key every time.
        assert_ne!(encrypt(&public, text.as_bytes()).expect("encrypt"), sealed);
    }

    #[test]
    fn refuses_bad_input() {
        assert!(parse_public_key_pem("not a pem").is_err());
        assert!(parse_public_key_pem(PRIVATE).is_err());
        let private = parse_private_key_pem(PRIVATE).expect("private key");
        assert!(decrypt(&private, "AA==").is_err());
        assert!(decrypt(&private, "!!").is_err());
    }
}
