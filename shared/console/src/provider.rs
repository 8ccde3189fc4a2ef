//! The HTTP client the SSO logins use to reach identity providers (OIDC providers,
//! GitHub and GitHub Enterprise): HTTPS with the system's roots (plain HTTP for a
//! provider on loopback), a bound on time and size, and an optional HTTP proxy
//! (`proxy_url` in the project's SSO settings), reached with `CONNECT`.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;

use crate::oidc::SsoError;

/// How long a call to a provider may take.
pub(crate) const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest provider answer read.
const MAX_PROVIDER_BODY: usize = 1024 * 1024;

type Direct = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;
type Proxied = Client<hyper_rustls::HttpsConnector<Tunnel<HttpConnector>>, Full<Bytes>>;

#[derive(Clone)]
enum Inner {
    Direct(Arc<Direct>),
    Proxied(Arc<Proxied>),
}

/// An HTTP client for identity providers.
#[derive(Clone)]
pub struct ProviderClient {
    inner: Inner,
}

impl ProviderClient {
    /// A client going straight to the providers, or through the HTTP proxy at
    /// `proxy_url` when it is not empty.
    pub fn new(proxy_url: &str) -> Result<Self, SsoError> {
        let tls = tls_config()?;
        let mut http = HttpConnector::new();
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
            let mut tunnel = Tunnel::new(proxy, http);
            if let Some(auth) = auth {
                tunnel = tunnel.with_auth(auth);
            }
            let https = builder.wrap_connector(tunnel);
            Inner::Proxied(Arc::new(Client::builder(TokioExecutor::new()).build(https)))
        };
        Ok(ProviderClient { inner })
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
        let sent = async {
            match &self.inner {
                Inner::Direct(c) => c.request(req).await,
                Inner::Proxied(c) => c.request(req).await,
            }
        };
        let resp = tokio::time::timeout(PROVIDER_TIMEOUT, sent)
            .await
            .map_err(|_| SsoError::Provider(format!("{shown}: no answer")))?
            .map_err(|e| SsoError::Provider(format!("{shown}: {e}")))?;
        let (parts, body) = resp.into_parts();
        let body = http_body_util::Limited::new(body, MAX_PROVIDER_BODY)
            .collect()
            .await
            .map_err(|e| SsoError::Provider(format!("{shown}: {e}")))?
            .to_bytes();
        if !parts.status.is_success() {
            return Err(SsoError::Provider(format!(
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
            .map_err(|e| SsoError::Config(format!("{url}: {e}")))?;
        let (headers, body) = self.call(req).await?;
        let value =
            serde_json::from_slice(&body).map_err(|e| SsoError::Provider(format!("{url}: {e}")))?;
        Ok((headers, value))
    }
}

/// TLS with the system's CA certificates, read once per process: a login should not
/// read the certificate store again.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, SsoError> {
    static TLS: std::sync::OnceLock<Result<Arc<rustls::ClientConfig>, String>> =
        std::sync::OnceLock::new();
    TLS.get_or_init(|| {
        let mut roots = rustls::RootCertStore::empty();
        let found = rustls_native_certs::load_native_certs();
        let _ = roots.add_parsable_certificates(found.certs);
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
            .map_err(|e| format!("TLS: {e}"))
    })
    .clone()
    .map_err(SsoError::Config)
}

/// The proxy's address, and a `Proxy-Authorization` value when the URL carries
/// `user:password@`.
fn parse_proxy(proxy_url: &str) -> Result<(Uri, Option<HeaderValue>), SsoError> {
    let invalid = |why: &str| {
        // The URL is not repeated: it may hold a password.
        SsoError::Config(format!("the project's SSO proxy URL is invalid: {why}"))
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
