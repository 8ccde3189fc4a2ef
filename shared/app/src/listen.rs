//! The connections a Wisp server ([`crate::server`]) accepts: at most `max` open at once, each closed when
//! its client makes no request for too long, however many pings it answers
//! ([`wisp_bridge::idle`]). At the cap, a connection that never sent an authenticated
//! request is closed to make room, else one of a caller holding more than its share
//! (a quarter of the cap); when neither is found, the server stops accepting (new clients
//! wait in the kernel's backlog) until one closes. So a flood of idle, unauthenticated or
//! one credential's connections can neither exhaust file descriptors nor keep pipeds and
//! browsers out.
//!
//! With TLS ([`crate::tls`]), each connection's handshake runs on a task of its own, for
//! at most [`TLS_HANDSHAKE_TIMEOUT`], holding its place meanwhile: a client that stalls
//! mid-handshake delays no one else's.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use http::{Request, Response};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tonic::transport::server::{Connected, TcpConnectInfo};
use tower::{Layer, Service};
use wisp_bridge::idle::{Activity, FIRST_BYTES_TIMEOUT, IdleTimeout, Place, Places};
use wisp_transport::gate::{ClientAddr, OnAdmitted};

use crate::tls::TLS_HANDSHAKE_TIMEOUT;

/// A connection's bytes: as they come, or through TLS.
#[derive(Debug)]
enum Io {
    Plain(IdleTimeout<TcpStream>),
    Tls(Box<TlsStream<IdleTimeout<TcpStream>>>),
}

impl Io {
    fn tcp(&self) -> &TcpStream {
        match self {
            Io::Plain(s) => s.get_ref(),
            Io::Tls(s) => s.get_ref().0.get_ref(),
        }
    }
}

/// An accepted connection holding one of the `max` places until it is dropped.
#[derive(Debug)]
pub struct LimitedConn {
    stream: Io,
    activity: Arc<Activity>,
    _place: Place,
}

/// What each request of a connection carries in its extensions (tonic puts it there).
#[derive(Debug, Clone)]
pub struct ConnInfo {
    tcp: TcpConnectInfo,
    activity: Arc<Activity>,
}

/// Accepts from `listener`, at most `max` connections open at once, each closed after
/// `idle` without a request from its client, through TLS when `tls` is given.
pub fn limited(
    listener: TcpListener,
    max: usize,
    idle: Duration,
    tls: Option<TlsAcceptor>,
) -> std::pin::Pin<Box<dyn Stream<Item = io::Result<LimitedConn>> + Send>> {
    let accepted = accepted(listener, max, idle);
    let Some(acceptor) = tls else {
        return Box::pin(accepted);
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<LimitedConn>(64);
    tokio::spawn(async move {
        let mut accepted = Box::pin(accepted);
        loop {
            // Stops accepting (and closes the listener) once the server is gone.
            let next = tokio::select! {
                next = accepted.next() => next,
                () = tx.closed() => return,
            };
            let Some(Ok(conn)) = next else {
                continue;
            };
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                let peer = conn.stream.tcp().peer_addr().ok();
                let LimitedConn {
                    stream,
                    activity,
                    _place,
                } = conn;
                let Io::Plain(plain) = stream else {
                    return;
                };
                match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(plain)).await {
                    Ok(Ok(tls)) => {
                        let _ = tx
                            .send(LimitedConn {
                                stream: Io::Tls(Box::new(tls)),
                                activity,
                                _place,
                            })
                            .await;
                    }
                    Ok(Err(err)) => tracing::debug!(?peer, error = %err, "TLS handshake failed"),
                    Err(_) => tracing::debug!(?peer, "TLS handshake timed out"),
                }
            });
        }
    });
    Box::pin(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|conn| (Ok(conn), rx))
    }))
}

/// [`limited`]'s TCP side: connections as accepted, under the cap.
fn accepted(
    listener: TcpListener,
    max: usize,
    idle: Duration,
) -> impl Stream<Item = io::Result<LimitedConn>> + Send {
    let places = Places::new(max);
    futures::stream::unfold((listener, places), move |(listener, places)| async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    // At the cap, this closes a connection that never authenticated (or
                    // waits for one to close) before the new one is served.
                    let activity = Activity::new();
                    let place = places.take(&activity).await;
                    let first = FIRST_BYTES_TIMEOUT.min(idle);
                    let conn = LimitedConn {
                        stream: Io::Plain(IdleTimeout::with_activity(
                            stream,
                            first,
                            idle,
                            activity.clone(),
                        )),
                        activity,
                        _place: place,
                    };
                    return Some((Ok(conn), (listener, places)));
                }
                Err(err) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!(error = %err, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    })
}

impl Connected for LimitedConn {
    type ConnectInfo = ConnInfo;

    fn connect_info(&self) -> ConnInfo {
        ConnInfo {
            tcp: self.stream.tcp().connect_info(),
            activity: self.activity.clone(),
        }
    }
}

/// Outermost layer of a Wisp server ([`crate::server`]): marks each request in flight on its connection
/// until its response is sent, lets the gate mark the connection authenticated, puts
/// the TCP peer where tonic's `remote_addr` looks for it, and dates the response with a
/// value HPACK never indexes (see `response_date`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ConnectionLayer;

impl<S> Layer<S> for ConnectionLayer {
    type Service = ConnectionService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        ConnectionService { inner }
    }
}

#[derive(Debug, Clone)]
pub struct ConnectionService<S> {
    inner: S,
}

impl<S, B> Service<Request<B>> for ConnectionService<S>
where
    S: Service<Request<B>, Response = Response<tonic::body::Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = Response<tonic::body::Body>;
    type Error = S::Error;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let info = req.extensions().get::<ConnInfo>().cloned();
        let in_request = info.map(|info| {
            let activity = info.activity.clone();
            if let Some(peer) = info.tcp.remote_addr() {
                req.extensions_mut().insert(ClientAddr(peer.ip()));
            }
            req.extensions_mut().insert(info.tcp);
            req.extensions_mut()
                .insert(OnAdmitted(Arc::new(move |principal| {
                    // One key per caller: the project's length makes it unambiguous.
                    let (project, id) = (&principal.project, &principal.id);
                    activity.trust_as(&format!("{}:{project}{id}", project.len()));
                })));
            info.activity.request()
        });
        let response = self.inner.call(req);
        Box::pin(async move {
            let mut response = response.await?;
            if let Some(date) = response_date() {
                response.headers_mut().insert(http::header::DATE, date);
            }
            // In flight until the response body is sent (or dropped).
            Ok(match in_request {
                Some(in_request) => response.map(|body| {
                    tonic::body::Body::new(http_body_util::BodyExt::map_frame(body, move |f| {
                        let _held = &in_request;
                        f
                    }))
                }),
                None => response,
            })
        })
    }
}

impl AsyncRead for LimitedConn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.stream {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for LimitedConn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.stream {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.stream {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.stream {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.stream {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.stream {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// The `date` of a response, marked sensitive so that HPACK never indexes it.
///
/// hyper dates every response that has no `date` (and leaves one that has). The value
/// changes each second, so each HTTP/2 connection's HPACK encoder would store a new
/// entry each second it answers, until its table holds the 4 KiB its client allows:
/// about 6 KiB of memory per connection, 55 MiB for 10,000 pipeds (benches/README.md).
/// h2 sends a sensitive value as a literal that is never indexed: one byte more than a
/// new value indexed, about 25 more than a repeat within the second (rare: a piped calls
/// a few times a minute). `None` if the clock cannot be formatted.
fn response_date() -> Option<http::HeaderValue> {
    use std::cell::RefCell;
    use std::time::{SystemTime, UNIX_EPOCH};
    thread_local! {
        /// The second last formatted on this thread, and its value.
        static LAST: RefCell<Option<(u64, http::HeaderValue)>> = const { RefCell::new(None) };
    }
    let now = SystemTime::now();
    let second = now.duration_since(UNIX_EPOCH).ok()?.as_secs();
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        match &*last {
            Some((at, value)) if *at == second => Some(value.clone()),
            _ => {
                let mut value = http::HeaderValue::try_from(httpdate::fmt_http_date(now)).ok()?;
                value.set_sensitive(true);
                *last = Some((second, value.clone()));
                Some(value)
            }
        }
    })
}
