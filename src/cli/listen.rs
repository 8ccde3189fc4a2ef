//! The connections `wisp serve` accepts: at most `max` open at once, each closed when
//! its client stays silent too long ([`wisp_bridge::idle`]). At the cap the server stops
//! accepting (new clients wait in the kernel's backlog) until one closes, so a flood of
//! idle connections cannot exhaust file descriptors or memory.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::transport::server::{Connected, TcpConnectInfo};
use wisp_bridge::idle::{FIRST_BYTES_TIMEOUT, IdleTimeout};

/// An accepted connection holding one of the `max` places until it is dropped.
#[derive(Debug)]
pub struct LimitedConn {
    stream: IdleTimeout<TcpStream>,
    _place: OwnedSemaphorePermit,
}

/// Accepts from `listener`, at most `max` connections open at once, each closed after
/// `idle` without a byte from its client.
pub fn limited(
    listener: TcpListener,
    max: usize,
    idle: Duration,
) -> impl Stream<Item = io::Result<LimitedConn>> {
    let places = Arc::new(Semaphore::new(max.max(1)));
    futures::stream::unfold((listener, places), move |(listener, places)| async move {
        let place = places.clone().acquire_owned().await.ok()?;
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let conn = LimitedConn {
                        stream: IdleTimeout::new(stream, FIRST_BYTES_TIMEOUT.min(idle), idle),
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
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.stream.get_ref().connect_info()
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
