//! TLS for `wisp serve --tls-cert FILE --tls-key FILE`: gRPC (HTTP/2, offered by ALPN),
//! gRPC-web and the console (HTTP/1.1) on the one port, over rustls.
//!
//! The certificate is served by [`ReloadingCert`], a rustls certificate resolver that
//! looks at both files' modification times at each handshake and reads them again when
//! either changed (a renewed Let's Encrypt or cert-manager certificate): new connections
//! get the new certificate; open ones keep the session they made, nothing is dropped. A
//! pair that does not load (a key not yet written beside its new certificate, a broken
//! file) leaves the last good one served and is logged, once per change.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

/// How long a client may take to complete its TLS handshake (the connection holds a
/// place under the connection cap meanwhile).
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the certificate files cannot be served. Never holds the key's bytes.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {reason}")]
    File {
        path: PathBuf,
        reason: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    #[error("TLS settings")]
    Rustls(#[source] rustls::Error),
}

impl TlsError {
    fn file(
        path: &Path,
        reason: &str,
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    ) -> TlsError {
        let reason = match &source {
            Some(e) if reason.is_empty() => e.to_string(),
            Some(e) => format!("{reason}: {e}"),
            None => reason.to_string(),
        };
        TlsError::File {
            path: path.to_path_buf(),
            reason,
            source,
        }
    }
}

/// The two files' modification times, as last looked at.
type Stamp = (Option<SystemTime>, Option<SystemTime>);

fn stamp(cert: &Path, key: &Path) -> Stamp {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    (modified(cert), modified(key))
}

struct Loaded {
    stamp: Stamp,
    key: Arc<CertifiedKey>,
}

/// The certificate chain and key of two PEM files, read again when they change.
pub struct ReloadingCert {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    current: Mutex<Loaded>,
}

impl std::fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingCert")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl ReloadingCert {
    /// Reads `cert` (a PEM chain, leaf first) and `key` (its PEM private key); an error
    /// when either is missing, empty, or the key is not the certificate's.
    pub fn load(cert: &Path, key: &Path) -> Result<ReloadingCert, TlsError> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let stamp = stamp(cert, key);
        let certified = read_pair(cert, key, &provider)?;
        Ok(ReloadingCert {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            provider,
            current: Mutex::new(Loaded {
                stamp,
                key: certified,
            }),
        })
    }

    /// The pair to serve now: read again first when a file changed since last time.
    fn certified_key(&self) -> Option<Arc<CertifiedKey>> {
        let mut current = self.current.lock().ok()?;
        let now = stamp(&self.cert, &self.key);
        if now != current.stamp {
            // Remembered either way: a broken pair is tried again only once it changes.
            current.stamp = now;
            match read_pair(&self.cert, &self.key, &self.provider) {
                Ok(key) => {
                    current.key = key;
                    tracing::info!(cert = %self.cert.display(), "TLS certificate reloaded");
                }
                Err(err) => tracing::warn!(
                    error = %err,
                    "the TLS certificate files changed but do not load; serving the previous certificate"
                ),
            }
        }
        Some(current.key.clone())
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.certified_key()
    }
}

fn read_pair(
    cert: &Path,
    key: &Path,
    provider: &CryptoProvider,
) -> Result<Arc<CertifiedKey>, TlsError> {
    let cert_pem = std::fs::read(cert).map_err(|e| TlsError::file(cert, "", Some(e.into())))?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::file(cert, "", Some(e.into())))?;
    if chain.is_empty() {
        return Err(TlsError::file(cert, "no PEM certificate in it", None));
    }
    let key_pem = std::fs::read(key).map_err(|e| TlsError::file(key, "", Some(e.into())))?;
    // The key's own bytes never reach an error message.
    let private = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|_| TlsError::file(key, "no PEM private key in it", None))?;
    let certified = CertifiedKey::from_der(chain, private, provider)
        .map_err(|e| TlsError::file(key, "does not fit the certificate", Some(e.into())))?;
    Ok(Arc::new(certified))
}

/// The acceptor serving `cert` (reloaded on change), offering HTTP/2 and HTTP/1.1 by
/// ALPN: gRPC clients (pipeds, pipectl) require `h2`; browsers take either.
pub fn acceptor(cert: Arc<ReloadingCert>) -> Result<TlsAcceptor, TlsError> {
    let provider = cert.provider.clone();
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Rustls)?
        .with_no_client_auth()
        .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/tls")
            .join(name)
    }

    #[test]
    fn a_changed_pair_is_served_and_a_broken_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::copy(fixture("server-a.pem"), &cert).unwrap();
        std::fs::copy(fixture("server-a.key"), &key).unwrap();
        let resolver = ReloadingCert::load(&cert, &key).unwrap();
        let first = resolver.certified_key().unwrap();

        // A key that is not the certificate's: the previous pair stays.
        std::fs::copy(fixture("server-b.key"), &key).unwrap();
        let same = resolver.certified_key().unwrap();
        assert_eq!(same.cert, first.cert);

        // The whole new pair: served.
        std::fs::copy(fixture("server-b.pem"), &cert).unwrap();
        let second = resolver.certified_key().unwrap();
        assert_ne!(second.cert, first.cert);
        let b = std::fs::read(fixture("server-b.pem")).unwrap();
        let b = CertificateDer::pem_slice_iter(&b).next().unwrap().unwrap();
        assert_eq!(second.cert[0], b);
    }

    #[test]
    fn bad_files_are_refused_at_start_without_the_keys_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk");
        std::fs::write(&junk, "secret-looking bytes").unwrap();
        let err = ReloadingCert::load(&fixture("server-a.pem"), &junk).unwrap_err();
        assert!(err.to_string().contains("no PEM private key"), "{err}");
        assert!(!err.to_string().contains("secret-looking"), "{err}");
        let err = ReloadingCert::load(&junk, &fixture("server-a.key")).unwrap_err();
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
        let err =
            ReloadingCert::load(&fixture("server-a.pem"), &fixture("server-b.key")).unwrap_err();
        assert!(err.to_string().contains("does not fit"), "{err}");
    }
}
