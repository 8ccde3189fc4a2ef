//! The simulated pipeds' connection to the control plane: native gRPC over HTTP/2
//! cleartext (as a piped with `--insecure`), or gRPC-web over HTTP/1.1 (as `wisp bridge`
//! talks to the load balancer), plain or TLS. Every client reaches `--target` and nothing
//! else.

use tonic::body::Body;
use tonic::metadata::AsciiMetadataValue;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Endpoint;
use tonic::{Request, Status};
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;
use wisp_proto::pipedservice::piped_service_client::PipedServiceClient;

/// Where the fleet sends its calls.
#[derive(Debug, Clone)]
pub struct Target {
    /// `scheme://authority`, nothing else.
    pub origin: http::Uri,
    pub grpc_web: bool,
}

impl Target {
    /// Checks `raw` (`http://HOST:PORT` or, with gRPC-web, `https://HOST[:PORT]`); the
    /// message says what is wrong.
    pub fn parse(raw: &str, grpc_web: bool) -> Result<Target, String> {
        let uri: http::Uri = raw
            .parse()
            .map_err(|e| format!("--target {raw:?}: not a URL ({e})"))?;
        let scheme = uri.scheme_str().unwrap_or_default();
        match scheme {
            "http" => {}
            "https" if grpc_web => {}
            "https" => {
                return Err(format!(
                    "--target {raw}: native gRPC is cleartext only here; a load balancer \
                     (https) takes gRPC-web: add --grpc-web"
                ));
            }
            _ => {
                return Err(format!(
                    "--target {raw:?}: expected http://HOST:PORT (or https:// with --grpc-web)"
                ));
            }
        }
        let Some(authority) = uri.authority().cloned() else {
            return Err(format!("--target {raw:?}: no host"));
        };
        if authority.host().is_empty() {
            return Err(format!("--target {raw:?}: no host"));
        }
        if uri.path() != "/" && !uri.path().is_empty() {
            return Err(format!(
                "--target {raw}: give the origin only (no path): the gRPC paths are fixed"
            ));
        }
        let origin = http::Uri::builder()
            .scheme(scheme)
            .authority(authority)
            .path_and_query("/")
            .build()
            .map_err(|e| format!("--target {raw:?}: {e}"))?;
        Ok(Target { origin, grpc_web })
    }

    pub fn is_https(&self) -> bool {
        self.origin.scheme_str() == Some("https")
    }

    /// `host:port` to check that something listens there before the run.
    pub fn socket_address(&self) -> String {
        let host = self.origin.host().unwrap_or_default();
        let port = self
            .origin
            .port_u16()
            .unwrap_or(if self.is_https() { 443 } else { 80 });
        // An IPv6 literal keeps its brackets in `host()`.
        format!("{host}:{port}")
    }

    pub fn transport_name(&self) -> &'static str {
        if self.grpc_web { "gRPC-web" } else { "gRPC" }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = self.origin.to_string();
        f.write_str(text.trim_end_matches('/'))
    }
}

/// A transport failure as one concrete error type (a bare boxed error would keep client
/// futures from being `Send`).
#[derive(Debug)]
pub struct TransportError(Box<dyn std::error::Error + Send + Sync>);

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.0.as_ref())
    }
}

type Transport = BoxCloneSyncService<http::Request<Body>, http::Response<Body>, TransportError>;

/// Adds the piped's `authorization` to every call.
#[derive(Clone)]
pub struct Credentials(AsciiMetadataValue);

/// The credentials are a piped's key: never printed.
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credentials(<redacted>)")
    }
}

impl Interceptor for Credentials {
    fn call(&mut self, mut req: Request<()>) -> Result<Request<()>, Status> {
        // A call that brings its own (the flood's made-up keys) keeps them.
        if !req.metadata().contains_key("authorization") {
            req.metadata_mut().insert("authorization", self.0.clone());
        }
        Ok(req)
    }
}

pub type Client = PipedServiceClient<InterceptedService<Transport, Credentials>>;

/// The largest response accepted (the server's own limit).
const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// A client of its own for one piped: its own connection(s), as separate piped processes
/// have. Connects lazily: a refused connection shows up as the failed calls it causes.
pub fn connect(target: &Target, authorization: &str) -> Result<Client, String> {
    let credentials = Credentials(
        AsciiMetadataValue::try_from(authorization)
            .map_err(|e| format!("authorization is not a valid header value: {e}"))?,
    );
    let transport: Transport = if target.grpc_web {
        web_transport(target)?
    } else {
        let channel = Endpoint::from(target.origin.clone()).connect_lazy();
        BoxCloneSyncService::new(channel.map_err(|e| TransportError(e.into())))
    };
    // The generated client puts the origin on each request's path, as hyper's client
    // needs (a channel does it by itself).
    Ok(PipedServiceClient::with_origin(
        InterceptedService::new(transport, credentials),
        target.origin.clone(),
    )
    .max_decoding_message_size(MAX_MESSAGE_BYTES))
}

fn web_transport(target: &Target) -> Result<Transport, String> {
    use hyper_util::client::legacy::connect::HttpConnector;

    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    if !target.is_https() {
        return Ok(web_over(http));
    }
    // The system's CA certificates, with the TLS provider the rest of the workspace links.
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(provider)
        .map_err(|e| format!("cannot set up TLS with the system's CA certificates: {e}"))?
        .https_only()
        .enable_http1()
        .wrap_connector(http);
    Ok(web_over(https))
}

/// tonic-web's client layer over hyper's HTTP/1.1-only client: what goes over the socket
/// is `application/grpc-web` on HTTP/1.1, as through an ALB to Lambda.
fn web_over<C>(connector: C) -> Transport
where
    C: tower::Service<http::Uri> + Clone + Send + Sync + 'static,
    C::Response: hyper::rt::Read
        + hyper::rt::Write
        + hyper_util::client::legacy::connect::Connection
        + Unpin
        + Send
        + 'static,
    C::Future: Send + Unpin + 'static,
    C::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    use hyper_util::client::legacy::Client as HyperClient;
    use hyper_util::rt::TokioExecutor;

    let http1 = HyperClient::builder(TokioExecutor::new()).build(connector);
    let web = tower::ServiceBuilder::new()
        .layer(tonic_web::GrpcWebClientLayer::new())
        .service(http1);
    BoxCloneSyncService::new(
        web.map_response(|resp: http::Response<_>| resp.map(Body::new))
            .map_err(|e| TransportError(e.into())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        let t = Target::parse("http://127.0.0.1:8080", false).expect("valid");
        assert_eq!(t.to_string(), "http://127.0.0.1:8080");
        assert_eq!(t.socket_address(), "127.0.0.1:8080");
        let t = Target::parse("https://pipecd.example.com/", true).expect("valid");
        assert_eq!(t.socket_address(), "pipecd.example.com:443");
        assert!(t.is_https());
        for (bad, web) in [
            ("127.0.0.1:8080", false),
            ("ftp://host", false),
            ("https://host", false),
            ("http://host/some/path", true),
            ("http://", false),
            ("not a url", true),
        ] {
            assert!(Target::parse(bad, web).is_err(), "{bad}");
        }
    }
}
