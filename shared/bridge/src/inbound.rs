//! The client side of `wisp bridge`: each accepted connection served over HTTP/2 or
//! HTTP/1.1, in plaintext (a sidecar on loopback) or behind TLS from a certificate file
//! (an in-cluster service that pipeds on other pods reach over the network).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::Watcher;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::TlsAcceptor;

use crate::{Bridge, ConfigError, idle};

/// How long a client may take to complete its TLS handshake.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The certificate chain and private key (PEM files) the bridge serves TLS with. They are
/// read once, at start: a rotated certificate (a renewed Kubernetes Secret) takes effect
/// on the next start (a rolling restart).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboundTls {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The TLS acceptor for `tls`: HTTP/2 and HTTP/1.1 offered by ALPN (gRPC clients such as
/// pipeds and pipectl require `h2` to be negotiated).
pub(crate) fn acceptor(tls: &InboundTls) -> Result<TlsAcceptor, ConfigError> {
    // A refusal of our own, with no error behind it.
    let bad = |path: &PathBuf, reason: String| ConfigError::InboundTls {
        path: path.clone(),
        reason,
        source: None,
    };
    let cert_pem =
        std::fs::read(&tls.cert).map_err(|e| ConfigError::inbound_tls(&tls.cert, "", e))?;
    let certs = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ConfigError::inbound_tls(&tls.cert, "", e))?;
    if certs.is_empty() {
        return Err(bad(&tls.cert, "no PEM certificate in it".into()));
    }
    let key_pem = std::fs::read(&tls.key).map_err(|e| ConfigError::inbound_tls(&tls.key, "", e))?;
    // The key's own bytes never reach an error message.
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|_| bad(&tls.key, "no PEM private key in it".into()))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| ConfigError::inbound_tls(&tls.key, "does not fit the certificate", e))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Serves one accepted connection on a task of its own, through TLS when the bridge
/// serves TLS; `place` (its slot under the connection cap) is held until it closes,
/// `activity` tells the cap and the idle timeout what the connection does, and
/// `watcher` lets a shutdown close it gracefully (HTTP/2 GOAWAY) once calls finish.
pub(crate) fn spawn_connection<S>(
    bridge: Bridge,
    builder: &Builder<TokioExecutor>,
    watcher: Watcher,
    stream: S,
    peer: SocketAddr,
    activity: Arc<idle::Activity>,
    place: idle::Place,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let builder = builder.clone();
    let tls = bridge.inner.tls.clone();
    tokio::spawn(async move {
        let _place = place;
        let handler = bridge.clone();
        let service = hyper::service::service_fn(move |req| {
            let (bridge, activity) = (handler.clone(), activity.clone());
            async move { Ok::<_, Infallible>(bridge.handle_on(&activity, req).await) }
        });
        let served =
            match tls {
                None => {
                    let conn = builder
                        .serve_connection(TokioIo::new(stream), service)
                        .into_owned();
                    watcher.watch(conn).await
                }
                Some(acceptor) => {
                    let stream =
                        match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream))
                            .await
                        {
                            Ok(Ok(stream)) => stream,
                            Ok(Err(err)) => {
                                tracing::debug!(%peer, error = %err, "TLS handshake failed");
                                return;
                            }
                            Err(_) => {
                                tracing::debug!(%peer, "TLS handshake timed out");
                                return;
                            }
                        };
                    let conn = builder
                        .serve_connection(TokioIo::new(stream), service)
                        .into_owned();
                    watcher.watch(conn).await
                }
            };
        if let Err(err) = served {
            tracing::debug!(%peer, error = %err, "client connection ended with an error");
        }
    });
}
