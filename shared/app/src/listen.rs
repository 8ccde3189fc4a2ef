//! The connections a Wisp server ([`crate::server`]) accepts: at most `max` open at once, each closed when
//! its client makes no request for too long, however many pings it answers
//! ([`wisp_bridge::idle`]). At the cap, a connection that never sent an authenticated
//! request is closed to make room, else one of a caller holding more than its share
//! (a quarter of the cap); when neither is found, the server stops accepting (new clients
//! wait in the kernel's backlog) until one closes. So a flood of idle, unauthenticated or
//! one credential's connections can neither exhaust file descriptors nor keep pipeds and
//! browsers out.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use http::{Request, Response};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tonic::transport::server::{Connected, TcpConnectInfo};
use tower::{Layer, Service};
use wisp_bridge::idle::{Activity, FIRST_BYTES_TIMEOUT, IdleTimeout, Place, Places};
use wisp_transport::gate::{ClientAddr, OnAdmitted};

/// An accepted connection holding one of the `max` places until it is dropped.
#[derive(Debug)]
pub struct LimitedConn {
    stream: IdleTimeout<TcpStream>,
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
/// `idle` without a request from its client.
pub fn limited(
    listener: TcpListener,
    max: usize,
    idle: Duration,
) -> impl Stream<Item = io::Result<LimitedConn>> {
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
                        stream: IdleTimeout::with_activity(stream, first, idle, activity.clone()),
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
            tcp: self.stream.get_ref().connect_info(),
            activity: self.activity.clone(),
        }
    }
}

/// Outermost layer of a Wisp server ([`crate::server`]): marks each request in flight on its connection
/// until its response is sent, lets the gate mark the connection authenticated, and
/// puts the TCP peer where tonic's `remote_addr` looks for it.
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
            let response = response.await?;
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
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for LimitedConn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
