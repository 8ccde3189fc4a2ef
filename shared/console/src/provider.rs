//! The HTTP client the SSO logins use to reach identity providers (OIDC providers,
//! GitHub and GitHub Enterprise): HTTPS with the system's roots (plain HTTP for a
//! provider on loopback, where the operator allows it), a bound on time and size, and an
//! optional HTTP proxy (`proxy_url` in the project's SSO settings), reached with
//! `CONNECT`.
//!
//! Where it connects follows the operator's [`ProviderPolicy`] (issue 33): every URL is
//! checked as the client parses it, a host name is resolved by [`CheckedResolver`], which
//! refuses it when any of its addresses is not allowed, and the connection goes to the
//! addresses it checked (no second lookup that DNS could answer otherwise). Through a
//! proxy, the proxy's address is the one checked (the proxy resolves the provider's).
//! At most [`MAX_CALLS_IN_FLIGHT`] provider calls run at once in the process: logins
//! start them without credentials.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;
use tokio::sync::Semaphore;
use wisp_services::web::sso_policy::{PRIVATE_REFUSED, ProviderPolicy};

use crate::oidc::SsoError;

/// How long a call to a provider may take.
pub(crate) const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest provider answer read.
const MAX_PROVIDER_BODY: usize = 1024 * 1024;
/// Provider calls in flight at once in the process; past it a login is told to try again.
pub(crate) const MAX_CALLS_IN_FLIGHT: usize = 16;

type Connector = HttpConnector<CheckedResolver>;
type Direct = Client<hyper_rustls::HttpsConnector<Connector>, Full<Bytes>>;
type Proxied = Client<hyper_rustls::HttpsConnector<Tunnel<Connector>>, Full<Bytes>>;

fn calls_in_flight() -> &'static Arc<Semaphore> {
    static CALLS: std::sync::OnceLock<Arc<Semaphore>> = std::sync::OnceLock::new();
    CALLS.get_or_init(|| Arc::new(Semaphore::new(MAX_CALLS_IN_FLIGHT)))
}

/// Resolves a provider's (or proxy's) host name and refuses it when any address it
/// resolves to is not allowed; the connector connects only to the addresses returned.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CheckedResolver {
    policy: ProviderPolicy,
}

impl tower::Service<Name> for CheckedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future =
        Pin<Box<dyn Future<Output = Result<Self::Response, std::io::Error>> + Send + 'static>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let policy = self.policy;
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            if addrs.is_empty() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "the name has no address",
                ));
            }
            if addrs.iter().any(|a| !policy.allows_ip(a.ip())) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    PRIVATE_REFUSED,
                ));
            }
            Ok(addrs.into_iter())
        })
    }
}

#[derive(Clone)]
enum Inner {
    Direct(Arc<Direct>),
    Proxied(Arc<Proxied>),
}

/// An HTTP client for identity providers.
#[derive(Clone)]
pub struct ProviderClient {
    inner: Inner,
    policy: ProviderPolicy,
}

impl ProviderClient {
    /// A client going straight to the providers, or through the HTTP proxy at
    /// `proxy_url` when it is not empty, to the addresses `policy` allows.
    pub fn new(proxy_url: &str, policy: ProviderPolicy) -> Result<Self, SsoError> {
        let tls = tls_config()?;
        let mut http = HttpConnector::new_with_resolver(CheckedResolver { policy });
        http.enforce_http(false);
        http.set_connect_timeout(Some(PROVIDER_TIMEOUT));
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config((*tls).clone())
            .https_or_http()
            .enable_http1();
        let inner = if proxy_url.trim().is_empty() {
            let https = builder.wrap_connector(http);
            Inner::Direct(Arc::new(Client::builder(TokioExecutor::new()).build(https)))
        } else {
            let (proxy, auth) = parse_proxy(proxy_url)?;
            // An address written as such is not resolved: checked here.
            if let Some(ip) = proxy
                .host()
                .map(|h| h.trim_start_matches('[').trim_end_matches(']'))
                .and_then(|h| h.parse::<std::net::IpAddr>().ok())
                && !policy.allows_ip(ip)
            {
                return Err(SsoError::config(format!(
                    "the project's SSO proxy: {PRIVATE_REFUSED}"
                )));
            }
            let mut tunnel = Tunnel::new(proxy, http);
            if let Some(auth) = auth {
                tunnel = tunnel.with_auth(auth);
            }
            let https = builder.wrap_connector(tunnel);
            Inner::Proxied(Arc::new(Client::builder(TokioExecutor::new()).build(https)))
        };
        Ok(ProviderClient { inner, policy })
    }

    /// Sends `req`; a non-2xx answer is an error naming the URL and status.
    pub async fn call(&self, req: Request<Full<Bytes>>) -> Result<(HeaderMap, Bytes), SsoError> {
        let uri = req.uri().clone();
        // The URL without its query: a query may carry a code or a secret.
        let shown = format!(
            "{}://{}{}",
            uri.scheme_str().unwrap_or("https"),
            uri.authority().map(|a| a.as_str()).unwrap_or_default(),
            uri.path()
        );
        // Checked as this client parsed it; a host name is checked again, address by
        // address, when it is resolved.
        self.policy
            .check(
                uri.scheme_str().unwrap_or_default(),
                uri.host().unwrap_or_default(),
            )
            .map_err(|why| SsoError::config(format!("{shown}: {why}")))?;
        let Ok(_turn) = calls_in_flight().clone().try_acquire_owned() else {
            return Err(SsoError::provider(format!(
                "{shown}: too many identity provider calls at once"
            )));
        };
        let sent = async {
            match &self.inner {
                Inner::Direct(c) => c.request(req).await,
                Inner::Proxied(c) => c.request(req).await,
            }
        };
        let resp = tokio::time::timeout(PROVIDER_TIMEOUT, sent)
            .await
            .map_err(|_| SsoError::provider(format!("{shown}: no answer")))?
            .map_err(|e| SsoError::provider_from(&shown, e))?;
        let (parts, body) = resp.into_parts();
        let body = http_body_util::Limited::new(body, MAX_PROVIDER_BODY)
            .collect()
            .await
            .map_err(|e| SsoError::provider_from(&shown, e))?
            .to_bytes();
        if !parts.status.is_success() {
            return Err(SsoError::provider(format!(
                "{shown}: HTTP {}",
                parts.status
            )));
        }
        Ok((parts.headers, body))
    }

    /// GETs `url` with `headers` and decodes the JSON answer.
    pub async fn get_json<T: for<'de> Deserialize<'de>>(
        &self,
        url: &str,
        headers: &[(header::HeaderName, String)],
    ) -> Result<(HeaderMap, T), SsoError> {
        let mut req = Request::get(url).header(header::ACCEPT, "application/json");
        for (name, value) in headers {
            req = req.header(name, value);
        }
        let req = req
            .body(Full::new(Bytes::new()))
            .map_err(|e| SsoError::config_from(url, e))?;
        let (headers, body) = self.call(req).await?;
        let value = serde_json::from_slice(&body).map_err(|e| SsoError::provider_from(url, e))?;
        Ok((headers, value))
    }
}

/// TLS with the system's CA certificates, read once per process: a login should not
/// read the certificate store again.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, SsoError> {
    static TLS: std::sync::OnceLock<Result<Arc<rustls::ClientConfig>, rustls::Error>> =
        std::sync::OnceLock::new();
    TLS.get_or_init(|| {
        let mut roots = rustls::RootCertStore::empty();
        let found = rustls_native_certs::load_native_certs();
        let _ = roots.add_parsable_certificates(found.certs);
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
    })
    .clone()
    .map_err(|e| SsoError::config_from("TLS", e))
}

/// The proxy's address, and a `Proxy-Authorization` value when the URL carries
/// `user:password@`.
fn parse_proxy(proxy_url: &str) -> Result<(Uri, Option<HeaderValue>), SsoError> {
    let invalid = |why: &str| {
        // The URL is not repeated: it may hold a password.
        SsoError::config(format!("the project's SSO proxy URL is invalid: {why}"))
    };
    let uri: Uri = proxy_url.trim().parse().map_err(|_| invalid("not a URL"))?;
    if uri.scheme_str() != Some("http") || uri.host().is_none() {
        return Err(invalid("it must be an http:// URL with a host"));
    }
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or_default();
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return Ok((uri, None));
    };
    let decode = |s: &str| {
        percent_decode(s).ok_or_else(|| invalid("bad percent-encoding in the credentials"))
    };
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let credentials = format!("{}:{}", decode(user)?, decode(password)?);
    let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
    let mut auth = HeaderValue::from_str(&format!("Basic {encoded}"))
        .map_err(|_| invalid("unusable credentials"))?;
    auth.set_sensitive(true);
    let bare: Uri = format!("http://{host}")
        .parse()
        .map_err(|_| invalid("not a URL"))?;
    Ok((bare, Some(auth)))
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes: Vec<u8> = form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned().into_bytes())?;
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host name is refused when it resolves to an address the policy does not allow
    /// (the connection would go to the addresses returned, so DNS cannot swap them later).
    #[tokio::test]
    async fn names_resolving_inside_the_network_are_refused() {
        use std::str::FromStr;
        use tower::Service;
        let mut strict = CheckedResolver {
            policy: ProviderPolicy::default(),
        };
        let err = strict
            .call(Name::from_str("localhost").unwrap())
            .await
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
        let mut open = CheckedResolver {
            policy: ProviderPolicy {
                allow_private: true,
            },
        };
        let addrs: Vec<SocketAddr> = open
            .call(Name::from_str("localhost").unwrap())
            .await
            .unwrap()
            .collect();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
    }

    /// An identity provider's answer that is not JSON: a Provider error that keeps the
    /// decoder's error as its source (the message repeats it, as before), so the log
    /// names the cause once.
    #[tokio::test]
    async fn a_providers_bad_answer_keeps_the_decoders_error_as_the_source() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut request = vec![0u8; 4096];
            let _ = conn.read(&mut request).await;
            let _ = conn
                .write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\n{ bad ",
                )
                .await;
        });
        let client = ProviderClient::new(
            "",
            ProviderPolicy {
                allow_private: true,
            },
        )
        .unwrap();
        let url = format!("http://{addr}/.well-known/openid-configuration");
        let err = client
            .get_json::<serde_json::Value>(&url, &[])
            .await
            .unwrap_err();
        assert!(matches!(err, SsoError::Provider { .. }), "{err:?}");
        let source = std::error::Error::source(&err).expect("a source");
        assert!(source.is::<serde_json::Error>(), "{source:?}");
        assert_eq!(
            err.to_string(),
            format!("the identity provider could not be reached: {url}: {source}")
        );
        assert_eq!(
            wisp_telemetry::chain(&err).to_string(),
            err.to_string(),
            "the cause is written once"
        );
    }

    /// A URL the policy refuses is not fetched, whatever its host.
    #[tokio::test]
    async fn refused_urls_are_not_fetched() {
        let client = ProviderClient::new("", ProviderPolicy::default()).unwrap();
        for url in [
            "https://169.254.169.254/latest/meta-data",
            "http://127.0.0.1:9/x",
            "https://[::1]/x",
        ] {
            let err = client
                .get_json::<serde_json::Value>(url, &[])
                .await
                .unwrap_err();
            assert!(matches!(err, SsoError::Config { .. }), "{url}: {err}");
        }
        // A proxy on a private address is refused too.
        assert!(ProviderClient::new("http://10.0.0.1:3128", ProviderPolicy::default()).is_err());
    }

    #[test]
    fn proxy_credentials_become_basic_auth_and_leave_the_address() {
        let (uri, auth) = parse_proxy("http://ann:p%40ss@proxy.corp:3128").expect("proxy");
        assert_eq!(uri.host(), Some("proxy.corp"));
        assert_eq!(uri.port_u16(), Some(3128));
        let auth = auth.expect("credentials");
        assert!(auth.is_sensitive());
        let encoded = auth.to_str().expect("ascii").trim_start_matches("Basic ");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("base64");
        assert_eq!(decoded, b"ann:p@ss");
        assert!(
            parse_proxy("http://proxy.corp:3128")
                .expect("proxy")
                .1
                .is_none()
        );
    }

    #[test]
    fn a_bad_proxy_url_is_refused_without_repeating_it() {
        for bad in ["https://u:secret@proxy:1", "socks5://proxy:1", "not a url"] {
            let err = parse_proxy(bad).expect_err(bad).to_string();
            assert!(!err.contains("secret"), "{err}");
            assert!(err.contains("proxy URL"), "{err}");
        }
    }
}
