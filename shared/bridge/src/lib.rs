//! `wisp bridge`: a sidecar beside an unmodified PipeCD piped or pipectl. It accepts
//! native gRPC over HTTP/2 cleartext on loopback and forwards every unary call as
//! gRPC-web (HTTP/1.1 or HTTP/2, over TLS or not) to the control plane, which behind an
//! AWS Application Load Balancer can only be reached that way.
//!
//! The bridge knows no protos: it forwards any method path (`PipedService`,
//! `APIService`, `WebService`, upstream's legacy `/pipe.api.service.*` names) by moving
//! length-prefixed frames and headers:
//!
//! - request: the client's headers minus hop-by-hop ones (credentials and custom metadata
//!   unchanged, `grpc-timeout` kept and applied as the call's deadline), its frames with
//!   any message over [`Config::compress_threshold`] gzip-compressed;
//! - response: message frames become the HTTP/2 body, the gRPC-web trailer frame becomes
//!   HTTP/2 trailers, `grpc-status` in the response headers (a trailers-only response)
//!   stays a trailers-only response, and a plain HTTP failure of the load balancer (HTML
//!   502, 413, ...) becomes a gRPC status whose message says what happened and what to do.
//!
//! Each failed call is logged once, at `warn`, without any header value.

mod body;
pub mod compress;
pub mod frame;
mod headers;
pub mod idle;
pub mod inbound;
pub mod metrics;
pub mod ready;
pub mod status;

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Uri, Version, header};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::net::TcpListener;

pub use body::GrpcBody;
pub use status::Code;

use crate::frame::{FLAG_COMPRESSED, Frame};

/// Messages larger than this are gzip-compressed on the way to the control plane.
pub const DEFAULT_COMPRESS_THRESHOLD: usize = 64 * 1024;
/// The default deadline of a call that carries no (shorter) `grpc-timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest request or response body the bridge holds in memory (Wisp's own message
/// limit is 16 MiB; a load balancer in front allows far less).
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 * 1024 * 1024;
/// Client connections open at once (a bridge serves the piped or pipectl beside it).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1_000;
/// Calls one client connection may have in flight.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 100;
/// How long a client may take to send a request's headers (and an idle HTTP/1.1
/// connection may wait for its next request).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// The path the bridge answers itself (over HTTP/1.1 or HTTP/2), for liveness probes.
pub const HEALTH_PATH: &str = "/healthz";

type BoxError = Box<dyn std::error::Error + Send + Sync>;

// ---------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------

/// Where the control plane is: `http(s)://host[:port][/prefix]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    scheme: http::uri::Scheme,
    authority: http::uri::Authority,
    /// Empty, or a path prefix starting with `/` and not ending with one.
    prefix: String,
}

impl Upstream {
    pub fn is_https(&self) -> bool {
        self.scheme == http::uri::Scheme::HTTPS
    }

    /// Whether the host is this machine (`localhost`, or a loopback address).
    pub fn is_loopback(&self) -> bool {
        let host = self.authority.host();
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        host.eq_ignore_ascii_case("localhost")
            || bare
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    /// The control plane's URI for a gRPC method path (and query, if any).
    fn uri_for(&self, path_and_query: &str) -> Result<Uri, http::Error> {
        Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(format!("{}{path_and_query}", self.prefix))
            .build()
    }
}

impl fmt::Display for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}{}", self.scheme, self.authority, self.prefix)
    }
}

impl FromStr for Upstream {
    type Err = ConfigError;

    fn from_str(s: &str) -> Result<Self, ConfigError> {
        let bad = |why: &'static str| ConfigError::Upstream(s.to_string(), why);
        let uri: Uri = s
            .parse()
            .map_err(|_| bad("not a URL (expected https://HOST[:PORT])"))?;
        let scheme = uri
            .scheme()
            .cloned()
            .ok_or_else(|| bad("no scheme (expected https:// or http://)"))?;
        if scheme != http::uri::Scheme::HTTPS && scheme != http::uri::Scheme::HTTP {
            return Err(bad("the scheme must be https:// or http://"));
        }
        let authority = uri.authority().cloned().ok_or_else(|| bad("no host"))?;
        if authority.as_str().contains('@') {
            return Err(bad(
                "credentials do not belong in the URL: the piped's own credentials pass through",
            ));
        }
        if authority.host().is_empty() {
            return Err(bad("no host"));
        }
        if uri.query().is_some() {
            return Err(bad("a query string is not allowed"));
        }
        let prefix = uri.path().trim_end_matches('/').to_string();
        Ok(Upstream {
            scheme,
            authority,
            prefix,
        })
    }
}

/// How the bridge behaves.
#[derive(Debug, Clone)]
pub struct Config {
    pub upstream: Upstream,
    /// The deadline of a call whose client sent no shorter `grpc-timeout`.
    pub timeout: Duration,
    /// Messages larger than this many bytes are gzip-compressed.
    pub compress_threshold: usize,
    /// Larger request bodies are refused (RESOURCE_EXHAUSTED).
    pub max_request_bytes: usize,
    /// Larger response bodies (once decompressed) are refused (RESOURCE_EXHAUSTED).
    pub max_response_bytes: usize,
    /// Trust these CA certificates (PEM) instead of the system's.
    pub ca_file: Option<PathBuf>,
    /// Client connections open at once; at the cap new ones wait until one closes.
    pub max_connections: usize,
    /// Serve clients over TLS with this certificate and key (an in-cluster service)
    /// instead of plaintext.
    pub inbound_tls: Option<inbound::InboundTls>,
    /// The control plane's method names, for the metrics' `method` label.
    pub method_names: metrics::MethodNames,
}

impl Config {
    pub fn new(upstream: Upstream) -> Config {
        Config {
            upstream,
            timeout: DEFAULT_TIMEOUT,
            compress_threshold: DEFAULT_COMPRESS_THRESHOLD,
            max_request_bytes: DEFAULT_MAX_BODY_BYTES,
            max_response_bytes: DEFAULT_MAX_BODY_BYTES,
            ca_file: None,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            inbound_tls: None,
            method_names: metrics::no_method_names,
        }
    }
}

/// A bridge that cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--upstream {0:?}: {1}")]
    Upstream(String, &'static str),
    /// `reason` repeats the cause's text (the message is what it was); the cause (the
    /// I/O or PEM error) is kept as the source.
    #[error("CA file {path}: {reason}")]
    CaFile {
        path: PathBuf,
        reason: String,
        #[source]
        source: Option<Cause>,
    },
    #[error(
        "no CA certificates found in the system store ({reason}); install the \
         ca-certificates package or pass --ca-file"
    )]
    NoRoots {
        reason: String,
        #[source]
        source: Option<rustls_native_certs::Error>,
    },
    #[error("TLS set-up: {0}")]
    Tls(#[from] rustls::Error),
    /// As [`ConfigError::CaFile`], for the bridge's own certificate and key.
    #[error("--tls-cert/--tls-key {path}: {reason}")]
    InboundTls {
        path: PathBuf,
        reason: String,
        #[source]
        source: Option<Cause>,
    },
}

/// The error behind a [`ConfigError`].
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

impl ConfigError {
    /// `CaFile` at `path`: `cause`'s text, and `cause` as the source.
    fn ca_file(
        path: &std::path::Path,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        ConfigError::CaFile {
            path: path.to_path_buf(),
            reason: cause.to_string(),
            source: Some(Box::new(cause)),
        }
    }

    /// `InboundTls` at `path`: `context: cause` (or the cause alone), `cause` as the
    /// source.
    fn inbound_tls(
        path: &std::path::Path,
        context: &str,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        let reason = if context.is_empty() {
            cause.to_string()
        } else {
            format!("{context}: {cause}")
        };
        ConfigError::InboundTls {
            path: path.to_path_buf(),
            reason,
            source: Some(Box::new(cause)),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The bridge
// ---------------------------------------------------------------------------------------

type UpstreamClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The bridge: cheap to clone, one connection pool to the control plane.
#[derive(Clone)]
pub struct Bridge {
    inner: Arc<Inner>,
}

struct Inner {
    config: Config,
    upstream_display: String,
    client: UpstreamClient,
    /// Accepts TLS from clients, when the bridge serves TLS.
    tls: Option<tokio_rustls::TlsAcceptor>,
    /// Set on shutdown: `/readyz` fails from then on.
    draining: std::sync::atomic::AtomicBool,
}

impl fmt::Debug for Bridge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bridge")
            .field("upstream", &self.inner.upstream_display)
            .finish_non_exhaustive()
    }
}

impl Bridge {
    /// Builds the HTTP(S) client (reading the CA certificates now, so that a bad
    /// `--ca-file` fails at start).
    pub fn new(config: Config) -> Result<Bridge, ConfigError> {
        let client = upstream_client(&config)?;
        let tls = config
            .inbound_tls
            .as_ref()
            .map(inbound::acceptor)
            .transpose()?;
        Ok(Bridge {
            inner: Arc::new(Inner {
                upstream_display: config.upstream.to_string(),
                config,
                client,
                tls,
                draining: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Serves connections from `listener` until `shutdown` completes, then lets the calls
    /// in flight finish for up to `grace`.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
        grace: Duration,
    ) {
        let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        builder
            .http2()
            .timer(TokioTimer::new())
            // Notice a client that went away without closing its connection.
            .keep_alive_interval(Some(Duration::from_secs(30)))
            .keep_alive_timeout(Duration::from_secs(10))
            .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION);
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT);
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let places = idle::Places::new(self.inner.config.max_connections);
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = &mut shutdown => break,
            };
            let (stream, peer) = match accepted {
                Ok(conn) => conn,
                Err(err) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!(error = %err, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            // At the cap, a connection that never made an authenticated call is closed to
            // make room; when all have, wait for one to close.
            let activity = idle::Activity::new();
            let place = tokio::select! {
                place = places.take(&activity) => place,
                () = &mut shutdown => break,
            };
            let stream = idle::IdleTimeout::with_activity(
                stream,
                idle::FIRST_BYTES_TIMEOUT,
                idle::DEFAULT_IDLE_TIMEOUT,
                activity.clone(),
            );
            inbound::spawn_connection(
                self.clone(),
                &builder,
                graceful.watcher(),
                stream,
                peer,
                activity,
                place,
            );
        }
        drop(listener);
        if tokio::time::timeout(grace, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::warn!(
                "calls still in flight after {} s; stopping anyway",
                grace.as_secs()
            );
        }
    }

    /// [`Bridge::handle`] for a request of the connection `activity` follows: in flight
    /// until answered (an idle connection is one without), and the connection counts as
    /// authenticated once a call with credentials was not refused as `UNAUTHENTICATED`.
    pub(crate) async fn handle_on<B>(
        &self,
        activity: &Arc<idle::Activity>,
        req: Request<B>,
    ) -> Response<GrpcBody>
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let _in_request = activity.request();
        let credentials = req.headers().contains_key(http::header::AUTHORIZATION);
        let response = self.handle(req).await;
        let status = response
            .headers()
            .get("grpc-status")
            .or_else(|| response.body().trailer("grpc-status"))
            .map(|v| v.as_bytes().to_vec());
        if credentials && response.status().is_success() && status.as_deref() != Some(b"16") {
            activity.trust();
        }
        response
    }

    /// Answers one request from a gRPC client: forwards it, or answers it itself
    /// (`/healthz`, non-gRPC requests). Never fails: every problem becomes a gRPC status.
    pub async fn handle<B>(&self, req: Request<B>) -> Response<GrpcBody>
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        if req.uri().path() == HEALTH_PATH
            && (req.method() == Method::GET || req.method() == Method::HEAD)
        {
            return plain_response(StatusCode::OK, "ok");
        }
        if req.uri().path() == ready::READY_PATH
            && (req.method() == Method::GET || req.method() == Method::HEAD)
        {
            return ready::answer(self).await;
        }
        let Some(content_type) = grpc_content_type(&req) else {
            return plain_response(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "wisp bridge accepts native gRPC (POST, content-type application/grpc) over \
                 HTTP/2 only",
            );
        };
        let path = req.uri().path().to_string();
        let (service, method) = metrics::call_labels(&path, self.inner.config.method_names);
        let _in_flight = wisp_telemetry::BridgeInFlight::start();
        let started = Instant::now();
        match self.forward(req, &content_type).await {
            Ok(forwarded) => {
                // A status that is not a number is one no client can read: UNKNOWN.
                let code = forwarded.status.trim().parse::<i32>().unwrap_or(2);
                wisp_telemetry::record_bridge_call(service, method, code, started.elapsed());
                tracing::debug!(
                    method = %path,
                    grpc_status = %forwarded.status,
                    request_bytes = forwarded.request_bytes,
                    gzip = forwarded.gzipped,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "forwarded"
                );
                forwarded.response
            }
            Err(failure) => {
                wisp_telemetry::record_bridge_call(
                    service,
                    method,
                    failure.code.as_i32(),
                    started.elapsed(),
                );
                tracing::warn!(
                    method = %path,
                    code = %failure.code,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "{}",
                    failure.message
                );
                failure.into_response(&content_type)
            }
        }
    }

    async fn forward<B>(&self, req: Request<B>, content_type: &str) -> Result<Forwarded, Failure>
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let config = &self.inner.config;
        let upstream = &self.inner.upstream_display;
        let (parts, body) = req.into_parts();
        let path_and_query = parts.uri.path_and_query().map_or_else(
            || parts.uri.path().to_string(),
            |pq| pq.as_str().to_string(),
        );
        let path = parts.uri.path();
        let timeout =
            headers::grpc_timeout(&parts.headers).map_or(config.timeout, |t| t.min(config.timeout));
        let deadline = tokio::time::Instant::now() + timeout;
        let timed_out = || {
            Failure::new(
                Code::DeadlineExceeded,
                format!(
                    "no answer from the control plane at {upstream} within {} for {path}",
                    human(timeout)
                ),
            )
        };

        // The client's request, whole (a unary call is one message).
        let body = match tokio::time::timeout_at(
            deadline,
            Limited::new(body, config.max_request_bytes).collect(),
        )
        .await
        {
            Err(_) => return Err(timed_out()),
            Ok(Ok(collected)) => collected.to_bytes(),
            Ok(Err(err)) => {
                let err: BoxError = err;
                if err.downcast_ref::<LengthLimitError>().is_some() {
                    return Err(Failure::new(
                        Code::ResourceExhausted,
                        format!(
                            "request for {path} is larger than the bridge's limit of {} bytes",
                            config.max_request_bytes
                        ),
                    ));
                }
                return Err(Failure::new(
                    Code::Cancelled,
                    format!(
                        "the client's request for {path} broke off: {}",
                        chain(&*err)
                    ),
                ));
            }
        };
        let client_encoding = headers::grpc_encoding(&parts.headers);
        let (body, request_encoding) =
            compress_request(&body, client_encoding, config.compress_threshold).map_err(|why| {
                Failure::new(
                    Code::Internal,
                    format!("malformed gRPC request for {path} from the client: {why}"),
                )
            })?;
        let request_bytes = body.len();
        let gzipped = request_encoding.as_deref() == Some("gzip");

        // The gRPC-web request.
        let uri = config.upstream.uri_for(&path_and_query).map_err(|e| {
            Failure::new(
                Code::Internal,
                format!("cannot build the control plane's URL for {path}: {e}"),
            )
        })?;
        let web_content_type = web_content_type(content_type);
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = uri;
        let out = request.headers_mut();
        *out = headers::forwarded_request_headers(&parts.headers);
        insert(out, header::CONTENT_TYPE, &web_content_type);
        insert(out, header::ACCEPT, &web_content_type);
        out.insert("x-grpc-web", HeaderValue::from_static("1"));
        out.insert("grpc-accept-encoding", HeaderValue::from_static("gzip"));
        // Behind the ALB, large answers come gzip-compressed as a whole.
        out.insert(header::ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
        if let Some(encoding) = &request_encoding {
            insert(
                out,
                http::HeaderName::from_static("grpc-encoding"),
                encoding,
            );
        }

        // The round trip, within the call's deadline.
        let client = self.inner.client.clone();
        let max_response = config.max_response_bytes;
        let exchange = async move {
            let response = client.request(request).await.map_err(UpstreamError::Send)?;
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, max_response)
                .collect()
                .await
                .map_err(UpstreamError::Read)?
                .to_bytes();
            Ok::<_, UpstreamError>((parts, body))
        };
        let (resp, resp_body) = match tokio::time::timeout_at(deadline, exchange).await {
            Err(_) => {
                wisp_telemetry::record_bridge_upstream_error("timeout");
                return Err(timed_out());
            }
            Ok(Ok(exchanged)) => exchanged,
            Ok(Err(UpstreamError::Send(err))) => {
                wisp_telemetry::record_bridge_upstream_error(if err.is_connect() {
                    "connect"
                } else {
                    "send"
                });
                let what = if err.is_connect() {
                    format!("cannot connect to the control plane at {upstream}")
                } else {
                    format!("the call to the control plane at {upstream} failed")
                };
                return Err(Failure::new(
                    Code::Unavailable,
                    format!("{what} for {path}: {}", chain(&err)),
                ));
            }
            Ok(Err(UpstreamError::Read(err))) => {
                if err.downcast_ref::<LengthLimitError>().is_some() {
                    wisp_telemetry::record_bridge_upstream_error("too_large");
                    return Err(Failure::new(
                        Code::ResourceExhausted,
                        format!(
                            "the response from {upstream} for {path} is larger than the \
                             bridge's limit of {max_response} bytes"
                        ),
                    ));
                }
                wisp_telemetry::record_bridge_upstream_error("read");
                return Err(Failure::new(
                    Code::Unavailable,
                    format!(
                        "the response from {upstream} for {path} was cut short: {}",
                        chain(&*err)
                    ),
                ));
            }
        };

        let (resp, resp_body) = inflate_response(resp, resp_body, max_response).map_err(|why| {
            wisp_telemetry::record_bridge_upstream_error("malformed");
            Failure::new(
                Code::Internal,
                format!("malformed response from {upstream} for {path}: {why}"),
            )
        })?;
        let accepts_gzip = headers::lists_encoding(&parts.headers, "grpc-accept-encoding", "gzip");
        let (response, status) = self.translate(
            resp,
            resp_body,
            content_type,
            path,
            request_bytes,
            accepts_gzip,
        )?;
        Ok(Forwarded {
            response,
            status,
            request_bytes,
            gzipped,
        })
    }

    /// The control plane's answer as the gRPC client must see it.
    fn translate(
        &self,
        resp: http::response::Parts,
        body: Bytes,
        content_type: &str,
        path: &str,
        request_bytes: usize,
        client_accepts_gzip: bool,
    ) -> Result<(Response<GrpcBody>, String), Failure> {
        let upstream = &self.inner.upstream_display;
        let metadata = headers::forwarded_response_headers(&resp.headers);

        // Trailers-only: the status is in the headers (whatever the HTTP status).
        if let Some(status) = resp.headers.get("grpc-status") {
            let status = status.to_str().unwrap_or("?").to_string();
            let mut response = Response::new(GrpcBody::empty());
            *response.headers_mut() = metadata;
            insert(response.headers_mut(), header::CONTENT_TYPE, content_type);
            return Ok((response, status));
        }

        let resp_type = resp
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let is_web = resp_type.starts_with("application/grpc-web")
            && !resp_type.starts_with("application/grpc-web-text");
        if resp.status != StatusCode::OK || !is_web {
            wisp_telemetry::record_bridge_upstream_error("http_status");
            let detail = status::body_excerpt(&body, 160);
            let (code, mut message) = status::from_http_status(
                resp.status,
                upstream,
                path,
                request_bytes,
                detail.as_deref(),
            );
            if resp.status == StatusCode::OK {
                message = format!("{message} (content-type {resp_type:?})");
            }
            return Err(Failure::new(code, message));
        }

        let malformed = |why: String| {
            wisp_telemetry::record_bridge_upstream_error("malformed");
            Failure::new(
                Code::Internal,
                format!("malformed gRPC-web response from {upstream} for {path}: {why}"),
            )
        };
        let web = frame::parse_web_body(&body).map_err(|e| malformed(e.to_string()))?;
        let Some(trailers) = web.trailers else {
            wisp_telemetry::record_bridge_upstream_error("malformed");
            return Err(Failure::new(
                Code::Unavailable,
                format!(
                    "the response from {upstream} for {path} ended without a gRPC status (cut \
                     short on the way?)"
                ),
            ));
        };
        let status = match trailers.get("grpc-status").and_then(|v| v.to_str().ok()) {
            Some(status) => status.to_string(),
            None => return Err(malformed("the trailers carry no grpc-status".into())),
        };

        // Messages: passed through compressed when the client takes gzip, else inflated.
        let response_encoding = headers::grpc_encoding(&resp.headers);
        let mut data = BytesMut::with_capacity(body.len());
        let mut sent_compressed = false;
        for message in &web.messages {
            let (flags, payload) = if !message.is_compressed() {
                (0, message.payload.clone())
            } else {
                match response_encoding.as_deref() {
                    Some("gzip") if client_accepts_gzip => {
                        sent_compressed = true;
                        (FLAG_COMPRESSED, message.payload.clone())
                    }
                    Some("gzip") => {
                        let inflated = compress::gunzip(
                            &message.payload,
                            self.inner.config.max_response_bytes,
                        )
                        .map_err(|e| malformed(format!("a gzip message is {e}")))?;
                        (0, Bytes::from(inflated))
                    }
                    other => {
                        return Err(malformed(format!(
                            "a compressed message with grpc-encoding {:?}, which the bridge \
                             does not decode",
                            other.unwrap_or("(none)")
                        )));
                    }
                }
            };
            frame::encode_frame(flags, &payload, &mut data)
                .map_err(|e| malformed(e.to_string()))?;
        }

        let mut response = Response::new(GrpcBody::new(data.freeze(), Some(trailers)));
        *response.headers_mut() = metadata;
        insert(response.headers_mut(), header::CONTENT_TYPE, content_type);
        if sent_compressed {
            response
                .headers_mut()
                .insert("grpc-encoding", HeaderValue::from_static("gzip"));
        }
        Ok((response, status))
    }
}

/// A forwarded call's response, and for the log its grpc-status and what was sent.
struct Forwarded {
    response: Response<GrpcBody>,
    status: String,
    request_bytes: usize,
    gzipped: bool,
}

/// What went wrong with a call, as the gRPC status the client gets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Failure {
    pub code: Code,
    pub message: String,
}

impl Failure {
    fn new(code: Code, message: String) -> Failure {
        Failure { code, message }
    }

    /// A trailers-only gRPC response carrying this status.
    fn into_response(self, content_type: &str) -> Response<GrpcBody> {
        let mut response = Response::new(GrpcBody::empty());
        let headers = response.headers_mut();
        insert(headers, header::CONTENT_TYPE, content_type);
        headers.insert("grpc-status", HeaderValue::from(self.code.as_i32()));
        insert(
            headers,
            http::HeaderName::from_static("grpc-message"),
            &status::encode_message(&self.message),
        );
        response
    }
}

#[derive(Debug)]
enum UpstreamError {
    Send(hyper_util::client::legacy::Error),
    Read(BoxError),
}

/// The request's content type if it is a gRPC call the bridge can forward:
/// `POST` over HTTP/2 with `application/grpc[+codec]`.
fn grpc_content_type<B>(req: &Request<B>) -> Option<String> {
    if req.method() != Method::POST || req.version() != Version::HTTP_2 {
        return None;
    }
    let value = req.headers().get(header::CONTENT_TYPE)?.to_str().ok()?;
    let rest = value.strip_prefix("application/grpc")?;
    (rest.is_empty() || rest.starts_with('+') || rest.starts_with(';')).then(|| value.to_string())
}

/// `application/grpc[+codec]` → `application/grpc-web+codec` (`+proto` when unnamed, as
/// gRPC-web servers expect).
fn web_content_type(grpc: &str) -> String {
    let base = grpc.split(';').next().unwrap_or(grpc).trim();
    match base.strip_prefix("application/grpc") {
        Some(codec) if codec.starts_with('+') => format!("application/grpc-web{codec}"),
        _ => "application/grpc-web+proto".to_string(),
    }
}

/// Re-frames the client's messages, gzip-compressing every uncompressed one larger than
/// `threshold` (when the call's encoding allows it). Returns the body and the
/// `grpc-encoding` to send.
fn compress_request(
    body: &Bytes,
    client_encoding: Option<String>,
    threshold: usize,
) -> Result<(Bytes, Option<String>), String> {
    let messages = frame::request_messages(body).map_err(|e| e.to_string())?;
    let may_gzip = matches!(client_encoding.as_deref(), None | Some("gzip"));
    let wants_gzip = may_gzip
        && messages
            .iter()
            .any(|m| !m.is_compressed() && m.payload.len() > threshold);
    if !wants_gzip {
        return Ok((body.clone(), client_encoding));
    }
    let mut out = BytesMut::with_capacity(body.len() / 2);
    let mut compressed_any = false;
    for Frame { flags, payload } in &messages {
        if *flags == 0 && payload.len() > threshold {
            let packed = compress::gzip(payload).map_err(|e| format!("cannot gzip: {e}"))?;
            if packed.len() < payload.len() {
                frame::encode_frame(FLAG_COMPRESSED, &packed, &mut out)
                    .map_err(|e| e.to_string())?;
                compressed_any = true;
                continue;
            }
        }
        frame::encode_frame(*flags, payload, &mut out).map_err(|e| e.to_string())?;
    }
    let encoding = if compressed_any {
        Some("gzip".to_string())
    } else {
        client_encoding
    };
    Ok((out.freeze(), encoding))
}

/// The response with its body inflated when it came `Content-Encoding: gzip` (at most
/// `limit` bytes once inflated).
fn inflate_response(
    mut resp: http::response::Parts,
    body: Bytes,
    limit: usize,
) -> Result<(http::response::Parts, Bytes), String> {
    let encoding = resp
        .headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase());
    match encoding.as_deref() {
        None | Some("identity") => Ok((resp, body)),
        Some("gzip") | Some("x-gzip") => {
            let inflated = compress::gunzip(&body, limit)
                .map_err(|e| format!("the gzip-compressed body: {e}"))?;
            resp.headers.remove(header::CONTENT_ENCODING);
            resp.headers.remove(header::CONTENT_LENGTH);
            Ok((resp, Bytes::from(inflated)))
        }
        Some(other) => Err(format!("unsupported content-encoding {other:?}")),
    }
}

fn insert(headers: &mut HeaderMap, name: header::HeaderName, value: &str) {
    if let Ok(value) = HeaderValue::from_str(value) {
        headers.insert(name, value);
    }
}

fn plain_response(status: StatusCode, text: &'static str) -> Response<GrpcBody> {
    let mut response = Response::new(GrpcBody::new(Bytes::from_static(text.as_bytes()), None));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// An error and its sources, one after the other (hyper's top-level messages alone say
/// little: "client error (Connect)").
fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(next) = source {
        let part = next.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = next.source();
    }
    text
}

fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// The pooled HTTP(S) client: rustls (aws-lc-rs), HTTP/2 or HTTP/1.1 by ALPN, connections
/// dropped before a load balancer's 60 s idle timeout would.
fn upstream_client(config: &Config) -> Result<UpstreamClient, ConfigError> {
    let mut roots = rustls::RootCertStore::empty();
    if let Some(path) = &config.ca_file {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let pem = std::fs::read(path).map_err(|e| ConfigError::ca_file(path, e))?;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| ConfigError::ca_file(path, e))?;
            roots.add(cert).map_err(|e| ConfigError::ca_file(path, e))?;
        }
        if roots.is_empty() {
            return Err(ConfigError::CaFile {
                path: path.clone(),
                reason: "no PEM certificate in it".into(),
                source: None,
            });
        }
    } else if config.upstream.is_https() {
        let found = rustls_native_certs::load_native_certs();
        let (_added, _ignored) = roots.add_parsable_certificates(found.certs);
        if roots.is_empty() {
            let source = found.errors.into_iter().next();
            let reason = source
                .as_ref()
                .map_or_else(|| "none there".to_string(), ToString::to_string);
            return Err(ConfigError::NoRoots { reason, source });
        }
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(Duration::from_secs(10)));
    http.set_keepalive(Some(Duration::from_secs(30)));
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_all_versions()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(50))
        .build(https))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_urls() {
        let u: Upstream = "https://cp.example.com".parse().expect("valid");
        assert!(u.is_https());
        assert_eq!(u.to_string(), "https://cp.example.com");
        assert_eq!(
            u.uri_for("/grpc.service.pipedservice.PipedService/Ping")
                .expect("uri")
                .to_string(),
            "https://cp.example.com/grpc.service.pipedservice.PipedService/Ping"
        );
        let u: Upstream = "http://127.0.0.1:8080/prefix/".parse().expect("valid");
        assert!(!u.is_https());
        assert_eq!(u.to_string(), "http://127.0.0.1:8080/prefix");
        assert_eq!(
            u.uri_for("/a.B/C").expect("uri").to_string(),
            "http://127.0.0.1:8080/prefix/a.B/C"
        );
        for (url, loopback) in [
            ("http://127.0.0.1:8080", true),
            ("http://localhost:9090", true),
            ("http://[::1]:8080", true),
            ("http://10.0.0.5:8080", false),
            ("http://cp.example.com", false),
            ("http://127.0.0.1.example.com", false),
        ] {
            let u: Upstream = url.parse().expect("valid");
            assert_eq!(u.is_loopback(), loopback, "{url}");
        }
        for bad in [
            "cp.example.com",
            "ftp://cp.example.com",
            "https://user:pw@cp.example.com",
            "https://cp.example.com/?x=1",
            "",
            "https://",
        ] {
            assert!(bad.parse::<Upstream>().is_err(), "{bad:?}");
        }
    }

    fn frame_of(flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut out = BytesMut::new();
        frame::encode_frame(flags, payload, &mut out).expect("fits");
        out.to_vec()
    }

    #[test]
    fn large_messages_are_compressed_small_ones_are_not() {
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 7) as u8).collect();
        let body = Bytes::from(frame_of(0, &big));
        let (out, encoding) = compress_request(&body, None, 64 * 1024).expect("valid");
        assert_eq!(encoding.as_deref(), Some("gzip"));
        let frames = frame::split_frames(&out).expect("valid");
        assert_eq!(frames.len(), 1);
        assert!(frames[0].is_compressed());
        assert_eq!(
            compress::gunzip(&frames[0].payload, big.len()).expect("gzip"),
            big
        );

        let small = Bytes::from(frame_of(0, b"small"));
        let (out, encoding) = compress_request(&small, None, 64 * 1024).expect("valid");
        assert_eq!((out, encoding), (small, None));

        // Incompressible data goes as it is.
        let mut state: u32 = 1;
        let noise: Vec<u8> = (0..100_000)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 24) as u8
            })
            .collect();
        let body = Bytes::from(frame_of(0, &noise));
        let (out, encoding) = compress_request(&body, None, 1024).expect("valid");
        assert_eq!((out, encoding), (body, None));

        // A client's own encoding other than gzip is left alone.
        let body = Bytes::from(frame_of(0, &big));
        let (out, encoding) = compress_request(&body, Some("zstd".into()), 1024).expect("valid");
        assert_eq!((out, encoding.as_deref()), (body, Some("zstd")));

        // Garbage from the client is an error, not a panic.
        assert!(compress_request(&Bytes::from_static(&[0, 0, 0]), None, 1).is_err());
    }

    #[test]
    fn content_types() {
        assert_eq!(
            web_content_type("application/grpc"),
            "application/grpc-web+proto"
        );
        assert_eq!(
            web_content_type("application/grpc+proto"),
            "application/grpc-web+proto"
        );
        assert_eq!(
            web_content_type("application/grpc+json"),
            "application/grpc-web+json"
        );
        assert_eq!(
            web_content_type("application/grpc; charset=utf-8"),
            "application/grpc-web+proto"
        );
    }

    #[test]
    fn failures_are_trailers_only_responses() {
        let response = Failure::new(Code::Unavailable, "down: 100% 😞".into())
            .into_response("application/grpc");
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["grpc-status"], "14");
        assert_eq!(
            response.headers()["grpc-message"],
            "down: 100%25 %F0%9F%98%9E"
        );
        assert_eq!(response.headers()["content-type"], "application/grpc");
        assert!(http_body::Body::is_end_stream(response.body()));
    }
}
