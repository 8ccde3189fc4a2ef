//! The one server builder: bind, the layers in their one order, serve until shutdown.
//! `wisp serve`, both benches (`benches/poll`, `benches/web`) and the in-process test
//! server (`tests/e2e/support/in_process.rs`) serve through [`Server`], so what the
//! benches measure and the tests check is the server users run.
//!
//! Outermost first:
//!
//! 1. the connections ([`crate::listen`]): at most `max_connections` open, each closed
//!    after `idle_timeout` without a request (unauthenticated ones first at the cap),
//!    TCP_NODELAY, through TLS when `tls` is set ([`crate::tls`]);
//! 2. tonic's per-connection bounds: HTTP/1 accepted (gRPC-web, the console), HTTP/2
//!    keepalive (dead pipeds detected), `request_timeout` per call, at most
//!    [`MAX_STREAMS_PER_CONNECTION`] calls in flight per connection, and a connection
//!    whose client keeps opening calls past that (each refused before authentication)
//!    closed after [`MAX_REFUSED_STREAMS_PER_CONNECTION`] refusals;
//! 3. [`ConnectionLayer`]: each request marked in flight on its connection, the peer
//!    address for the gate;
//! 4. [`HttpLayers`] (`wisp_transport::stack`, the list the Lambda functions use too):
//!    the edge, the console, gRPC-web;
//! 5. the routes, each service's gate inside, which checks the caller's call rate
//!    ([`CallRate`]) and takes its turn from the process's in-flight bound
//!    ([`InFlightLimit`]), both installed here once per process.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic::transport::Server as TonicServer;
use wisp_transport::HttpLayers;
use wisp_transport::load::{DEFAULT_MAX_IN_FLIGHT, InFlightLimit};
use wisp_transport::rate::{CallRate, DEFAULT_CALL_RATE, DEFAULT_PROJECT_CALL_RATE};

use crate::listen::{ConnectionLayer, limited};

/// Calls one connection may have in flight (an upstream piped makes a few at a time).
pub const MAX_STREAMS_PER_CONNECTION: u32 = 100;
/// Calls refused on one connection for [`MAX_STREAMS_PER_CONNECTION`] (or reset for
/// another error of its client's) before the connection is closed (GOAWAY
/// `ENHANCE_YOUR_CALM`). tonic turns hyper's bound (1024) off unless set: a client could
/// make the server refuse or reset streams on one connection forever (issue 33; the
/// resets hyper's bound is for, RUSTSEC-2024-0003, queue up when the client does not
/// read). Not hyper's 1024: a refusal costs the server little, and a client closed
/// after 1024 of them connects again and opens new calls, each one authenticated: with
/// 1024, the reopening attack of benches/hostile (`stall.sh ... reopen`) slowed the
/// fleet more than without a bound. A client that honours the server's SETTINGS (every
/// gRPC library) is never refused.
pub const MAX_REFUSED_STREAMS_PER_CONNECTION: usize = 65_536;
/// Streams a client opens and resets before the server accepted them, waiting in one
/// connection's queue, before the connection is closed (h2's default, set here so that
/// it does not change under us: the "rapid reset" attack).
pub const MAX_PENDING_RESET_STREAMS_PER_CONNECTION: usize = 20;
/// Default of `wisp serve --max-connections`: a piped holds one connection, so room for a
/// fleet of several thousand and the consoles beside it, within a default open-files
/// limit raised as systemd and container runtimes do.
pub const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Default of `wisp serve --request-timeout`.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Default of `wisp serve --idle-timeout`.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// How long in-flight calls may take to finish once shutdown is asked for.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// HTTP/2 keepalive: a ping this often, the connection dropped when one is not answered
/// within [`KEEPALIVE_TIMEOUT`].
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// The bounds a server applies; [`Default`] is `wisp serve`'s defaults.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Longest time a call may take, reading its request included.
    pub request_timeout: Duration,
    /// Most client connections open at once.
    pub max_connections: usize,
    /// A connection is closed after this long without a request.
    pub idle_timeout: Duration,
    /// Most calls worked on at once in the process (the first server of a process sets
    /// it; see [`InFlightLimit::install`]).
    pub max_in_flight: usize,
    /// Calls per second one principal, and one project, may make (the first server of a
    /// process sets them; see [`CallRate::install`]).
    pub max_call_rate: u32,
    pub max_project_call_rate: u32,
    /// How long in-flight calls may take to finish after shutdown is asked for.
    pub shutdown_grace: Duration,
    /// How long the server goes on serving, its health checks failing, once shutdown is
    /// asked for and before it stops listening: time for a load balancer that may still
    /// route to it (a Fargate Spot task reclaimed) to see it unhealthy.
    pub shutdown_delay: Duration,
    /// Serve TLS with this certificate (read again when its files change); plaintext
    /// when `None`.
    pub tls: Option<Arc<crate::tls::ReloadingCert>>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            max_call_rate: DEFAULT_CALL_RATE,
            max_project_call_rate: DEFAULT_PROJECT_CALL_RATE,
            shutdown_grace: SHUTDOWN_GRACE,
            shutdown_delay: Duration::ZERO,
            tls: None,
        }
    }
}

/// Why a server could not start or stopped with a failure.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("server failed")]
    Serve(#[source] tonic::transport::Error),
    #[error("cannot serve TLS")]
    Tls(#[source] crate::tls::TlsError),
}

/// A bound listener, ready to serve (its address is known before the first call, for
/// `wisp serve`'s ready line and for tests binding port 0).
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    local_addr: SocketAddr,
    options: ServerOptions,
}

impl Server {
    /// Binds `addr` (port 0 for any free port).
    pub async fn bind(addr: SocketAddr, options: ServerOptions) -> Result<Server, ServerError> {
        let bind_error = |source| ServerError::Bind { addr, source };
        let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
        let local_addr = listener.local_addr().map_err(bind_error)?;
        Ok(Server {
            listener,
            local_addr,
            options,
        })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Serves `routes` and the console until `shutdown` completes, then lets in-flight
    /// calls finish for at most [`ServerOptions::shutdown_grace`].
    pub async fn run_until(
        self,
        routes: Routes,
        console: Arc<wisp_console::Console>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), ServerError> {
        let Server {
            listener, options, ..
        } = self;
        // The gates take their turns from the process's bound; a second server in the
        // same process (the benches, the tests) shares the first one's.
        InFlightLimit::new(options.max_in_flight).install();
        CallRate::new(options.max_call_rate, options.max_project_call_rate).install();
        let tls = match &options.tls {
            Some(cert) => Some(crate::tls::acceptor(cert.clone()).map_err(ServerError::Tls)?),
            None => None,
        };
        let incoming = limited(listener, options.max_connections, options.idle_timeout, tls);
        let health = wisp_transport::Health::default();
        let layers = HttpLayers::grpc()
            .with_console(wisp_console::ConsoleLayer::new(console))
            .with_health(health.clone());
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = TonicServer::builder()
            .accept_http1(true)
            .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
            .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
            // Bounds a client controls: the time of a call, and how many calls one
            // connection may have in flight.
            .timeout(options.request_timeout)
            .max_concurrent_streams(Some(MAX_STREAMS_PER_CONNECTION))
            .concurrency_limit_per_connection(MAX_STREAMS_PER_CONNECTION as usize)
            .http2_max_local_error_reset_streams(Some(MAX_REFUSED_STREAMS_PER_CONNECTION))
            .http2_max_pending_accept_reset_streams(Some(MAX_PENDING_RESET_STREAMS_PER_CONNECTION))
            .layer(ConnectionLayer)
            .layer(layers)
            .add_routes(routes)
            .serve_with_incoming_shutdown(incoming, async {
                let _ = stop_rx.await;
            });
        tokio::pin!(server);
        tokio::select! {
            result = &mut server => result.map_err(ServerError::Serve),
            () = shutdown => {
                health.set_draining();
                if !options.shutdown_delay.is_zero() {
                    tracing::info!(
                        delay_secs = options.shutdown_delay.as_secs(),
                        "shutting down: health checks fail now; serving on until the delay ends"
                    );
                    tokio::select! {
                        result = &mut server => return result.map_err(ServerError::Serve),
                        () = tokio::time::sleep(options.shutdown_delay) => {}
                    }
                }
                tracing::info!("shutting down: finishing in-flight calls");
                let _ = stop_tx.send(());
                // A stuck client cannot keep the process alive.
                match tokio::time::timeout(options.shutdown_grace, &mut server).await {
                    Ok(result) => result.map_err(ServerError::Serve),
                    Err(_) => {
                        tracing::warn!(
                            "connections still open after {} s; stopping anyway",
                            options.shutdown_grace.as_secs()
                        );
                        Ok(())
                    }
                }
            }
        }
    }
}
