//! A client connection that is closed when the client does nothing for too long: the
//! first bytes within `first`, then, with an [`Activity`], a request at least every
//! `idle` (idle means no request in flight and none started: answering the server's
//! HTTP/2 pings does not count, or a client could hold a place forever); without one,
//! some bytes at least every `idle`.
//!
//! [`Places`] bounds the connections open at once. At the cap, the oldest connection
//! that has not yet sent an authenticated request is closed to make room, so that
//! connections opened and left unauthenticated cannot fill the cap and keep pipeds and
//! browsers out; when every connection has authenticated, one of the caller holding the
//! most is closed if it holds more than its share ([`PRINCIPAL_CONNECTION_SHARE`]), so
//! that one credential cannot fill the cap either. Used by `wisp bridge` and `wisp serve`.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// How long a new connection may stay silent.
pub const FIRST_BYTES_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an open connection may stay silent (`wisp serve --idle-timeout`).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Of the connection cap, what one caller (a piped, an API key, a console user: the
/// gate's principal) may keep once the cap is reached: a quarter (at least one), as of
/// the calls in flight. Under the cap it may open more; at the cap, its connections past
/// the share are closed, oldest first, to make room for others.
pub const PRINCIPAL_CONNECTION_SHARE: (usize, usize) = (1, 4);

/// What one connection's requests are doing: shared by its IO ([`IdleTimeout`]), which
/// closes it when idle, and the service that answers its requests, which marks their
/// start and end ([`Activity::request`]) and whether one was authenticated.
#[derive(Debug)]
pub struct Activity {
    epoch: Instant,
    in_flight: AtomicUsize,
    /// When the last request started or ended, in ms since `epoch`.
    last_ms: AtomicU64,
    trusted: AtomicBool,
    /// Whom its authenticated requests came from (the last one), when the server knows.
    principal: Mutex<Option<Arc<str>>>,
    closed: AtomicBool,
    /// The connection's task, woken to close it.
    waker: Mutex<Option<Waker>>,
}

impl Activity {
    pub fn new() -> Arc<Self> {
        Arc::new(Activity {
            epoch: Instant::now(),
            in_flight: AtomicUsize::new(0),
            last_ms: AtomicU64::new(0),
            trusted: AtomicBool::new(false),
            principal: Mutex::new(None),
            closed: AtomicBool::new(false),
            waker: Mutex::new(None),
        })
    }

    fn touch(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.fetch_max(ms, Ordering::AcqRel);
    }

    /// A request of this connection, in flight until the guard is dropped.
    pub fn request(self: &Arc<Self>) -> InRequest {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.touch();
        InRequest(self.clone())
    }

    /// The connection has sent an authenticated request: it keeps its place at the cap.
    pub fn trust(&self) {
        self.trusted.store(true, Ordering::Release);
    }

    /// [`Activity::trust`], by `principal` (the gate's `project` and `id`, as one key):
    /// the connection counts toward that caller's share of the cap.
    pub fn trust_as(&self, principal: &str) {
        {
            let mut slot = self.principal.lock().unwrap_or_else(|e| e.into_inner());
            if slot.as_deref() != Some(principal) {
                *slot = Some(principal.into());
            }
        }
        self.trust();
    }

    fn principal(&self) -> Option<Arc<str>> {
        self.principal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn is_trusted(&self) -> bool {
        self.trusted.load(Ordering::Acquire)
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Closes the connection (its next read fails).
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let waker = self.waker.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    fn register(&self, waker: &Waker) {
        let mut slot = self.waker.lock().unwrap_or_else(|e| e.into_inner());
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
    }

    /// When the connection has been idle for `idle`; `None` while a request is in flight.
    fn idle_deadline(&self, idle: Duration) -> Option<Instant> {
        if self.in_flight() > 0 {
            return None;
        }
        let last = Duration::from_millis(self.last_ms.load(Ordering::Acquire));
        Some(self.epoch + last + idle)
    }
}

/// One request in flight on its connection; ends when dropped.
#[derive(Debug)]
pub struct InRequest(Arc<Activity>);

impl Drop for InRequest {
    fn drop(&mut self) {
        self.0.touch();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// At most `max` connections open at once, those that never authenticated closed first
/// to make room, then those of a caller past its share.
#[derive(Debug)]
pub struct Places {
    max: usize,
    /// Connections one principal keeps at the cap ([`PRINCIPAL_CONNECTION_SHARE`]).
    share: usize,
    inner: Mutex<PlacesInner>,
    freed: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct PlacesInner {
    open: usize,
    next: u64,
    /// Open connections in the order they were accepted (closed and gone ones are
    /// dropped from here when found).
    candidates: BTreeMap<u64, Weak<Activity>>,
}

impl Places {
    pub fn new(max: usize) -> Arc<Self> {
        let (num, den) = PRINCIPAL_CONNECTION_SHARE;
        Arc::new(Places {
            max: max.max(1),
            share: (max / den * num).max(1),
            inner: Mutex::default(),
            freed: tokio::sync::Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PlacesInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.lock().open
    }

    /// A place for a new connection, whose requests `activity` follows. Under the cap at
    /// once; at the cap, the oldest connection that has not authenticated (one without a
    /// request in flight first) is closed and its place taken when it is gone; when every
    /// connection has authenticated, the oldest of the principal holding the most, if it
    /// holds more than its share; otherwise waits for one to close.
    pub async fn take(self: &Arc<Self>, activity: &Arc<Activity>) -> Place {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut inner = self.lock();
                if inner.open < self.max {
                    inner.open += 1;
                    let id = inner.next;
                    inner.next += 1;
                    inner.candidates.insert(id, Arc::downgrade(activity));
                    return Place {
                        places: self.clone(),
                        id,
                    };
                }
                evict_one(&mut inner, self.share);
            }
            freed.await;
        }
    }
}

/// Closes the connection that has waited longest without authenticating, preferring one
/// with no request in flight; when all have authenticated, the oldest connection of the
/// principal holding the most, if that is more than `share`. Closed and gone connections
/// leave the list.
fn evict_one(inner: &mut PlacesInner, share: usize) {
    inner
        .candidates
        .retain(|_, weak| weak.upgrade().is_some_and(|a| !a.is_closed()));
    let open: Vec<(u64, Arc<Activity>)> = inner
        .candidates
        .iter()
        .filter_map(|(id, weak)| weak.upgrade().map(|a| (*id, a)))
        .collect();
    let oldest = |wanted: &dyn Fn(&Activity) -> bool| {
        let mut matching = open.iter().filter(|(_, a)| wanted(a));
        let first = matching.clone().next();
        matching
            .find(|(_, a)| a.in_flight() == 0)
            .or(first)
            .cloned()
    };
    let victim = oldest(&|a| !a.is_trusted()).or_else(|| {
        let mut held: HashMap<Arc<str>, usize> = HashMap::new();
        for principal in open.iter().filter_map(|(_, a)| a.principal()) {
            *held.entry(principal).or_default() += 1;
        }
        let (most, count) = held.into_iter().max_by_key(|(_, count)| *count)?;
        if count <= share {
            return None;
        }
        tracing::debug!("connection cap reached: closing a connection of a caller past its share");
        oldest(&|a| a.principal().as_deref() == Some(&*most))
    });
    if let Some((id, activity)) = victim {
        tracing::debug!("connection cap reached: closing a connection to make room");
        activity.close();
        inner.candidates.remove(&id);
    }
}

/// A connection's place under the cap, given back when dropped.
#[derive(Debug)]
pub struct Place {
    places: Arc<Places>,
    id: u64,
}

impl Drop for Place {
    fn drop(&mut self) {
        {
            let mut inner = self.places.lock();
            inner.open -= 1;
            inner.candidates.remove(&self.id);
        }
        self.places.freed.notify_one();
    }
}

/// `io` with a read deadline: with an [`Activity`], the first bytes within `first` and
/// then a request at least every `idle`; without one, each received byte pushes it back.
#[derive(Debug)]
pub struct IdleTimeout<T> {
    io: T,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    activity: Option<Arc<Activity>>,
    started: bool,
}

impl<T> IdleTimeout<T> {
    pub fn new(io: T, first: Duration, idle: Duration) -> Self {
        IdleTimeout {
            io,
            idle,
            deadline: Box::pin(tokio::time::sleep(first)),
            activity: None,
            started: false,
        }
    }

    /// Closed when `activity` shows no request for `idle` (or when it is closed).
    pub fn with_activity(io: T, first: Duration, idle: Duration, activity: Arc<Activity>) -> Self {
        IdleTimeout {
            activity: Some(activity),
            ..Self::new(io, first, idle)
        }
    }

    pub fn get_ref(&self) -> &T {
        &self.io
    }

    /// Whether the connection is to be closed now; otherwise the deadline is set to the
    /// next time to look.
    fn expired(&mut self) -> bool {
        let Some(activity) = &self.activity else {
            return true;
        };
        if !self.started {
            return true;
        }
        match activity.idle_deadline(self.idle) {
            Some(at) if at <= Instant::now() => true,
            Some(at) => {
                self.deadline.as_mut().reset(at);
                false
            }
            None => {
                let next = Instant::now() + self.idle;
                self.deadline.as_mut().reset(next);
                false
            }
        }
    }
}

fn timed_out() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "the client sent nothing for too long",
    )
}

impl<T: AsyncRead + Unpin> AsyncRead for IdleTimeout<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(activity) = &self.activity {
            if activity.is_closed() {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "closed to make room for other connections",
                )));
            }
            activity.register(cx.waker());
        }
        let before = buf.filled().len();
        match Pin::new(&mut self.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    if self.activity.is_none() {
                        let next = Instant::now() + self.idle;
                        self.deadline.as_mut().reset(next);
                    } else if !self.started {
                        // From now on, requests count, not bytes.
                        self.started = true;
                        let _ = self.expired();
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => loop {
                match self.deadline.as_mut().poll(cx) {
                    Poll::Ready(()) if self.expired() => {
                        return Poll::Ready(Err(timed_out()));
                    }
                    // Moved on: poll the new deadline so that it wakes this task.
                    Poll::Ready(()) => continue,
                    Poll::Pending => return Poll::Pending,
                }
            },
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for IdleTimeout<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn silence_ends_the_connection_and_bytes_keep_it() {
        let (client, server) = tokio::io::duplex(64);
        let mut server = IdleTimeout::new(server, Duration::from_secs(1), Duration::from_secs(5));
        let mut client = client;
        let mut buf = [0u8; 8];
        // Bytes within the first second, then within each five.
        client.write_all(b"a").await.unwrap();
        assert_eq!(server.read(&mut buf).await.unwrap(), 1);
        tokio::time::sleep(Duration::from_secs(4)).await;
        client.write_all(b"b").await.unwrap();
        assert_eq!(server.read(&mut buf).await.unwrap(), 1);
        // Then silence.
        let err = server.read(&mut buf).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test(start_paused = true)]
    async fn with_activity_bytes_without_requests_do_not_keep_the_connection() {
        let (mut client, server) = tokio::io::duplex(64);
        let activity = Activity::new();
        let mut server = IdleTimeout::with_activity(
            server,
            Duration::from_secs(1),
            Duration::from_secs(5),
            activity.clone(),
        );
        let mut buf = [0u8; 8];
        client.write_all(b"a").await.unwrap();
        assert_eq!(server.read(&mut buf).await.unwrap(), 1);
        // A request in flight keeps the connection however long it takes.
        let request = activity.request();
        let reading = tokio::spawn(async move {
            let mut buf = [0u8; 8];
            let n = server.read(&mut buf).await;
            (server, n.map_err(|e| e.kind()))
        });
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!reading.is_finished());
        client.write_all(b"b").await.unwrap();
        let (mut server, n) = reading.await.unwrap();
        assert_eq!(n, Ok(1));
        drop(request);
        // Then pings (bytes) every 2 s, but no request: closed 5 s after the last one.
        let pinging = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                if client.write_all(b"p").await.is_err() {
                    return;
                }
            }
        });
        let started = Instant::now();
        let err = loop {
            match server.read(&mut buf).await {
                Ok(_) => continue,
                Err(e) => break e,
            }
        };
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() <= Duration::from_secs(6));
        pinging.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_cap_a_caller_past_its_share_makes_room() {
        // A cap of 4: one principal keeps 1 once the cap is reached.
        let places = Places::new(4);
        let piped = Activity::new();
        let _p = places.take(&piped).await;
        piped.trust_as("quickstart\npiped-1");
        let mut flood = Vec::new();
        for _ in 0..3 {
            let activity = Activity::new();
            let place = places.take(&activity).await;
            activity.trust_as("other\napi-key-1");
            flood.push((activity, place));
        }
        // The fifth closes the key's oldest connection, not the piped's.
        let newcomer = Activity::new();
        let taking = {
            let (places, newcomer) = (places.clone(), newcomer.clone());
            tokio::spawn(async move { places.take(&newcomer).await })
        };
        tokio::task::yield_now().await;
        assert!(!piped.is_closed());
        assert!(flood[0].0.is_closed() && !flood[1].0.is_closed());
        let (_, oldest) = flood.remove(0);
        drop(oldest);
        let _n = taking.await.unwrap();
        // Down to its share plus one, and the newcomer by another principal: the key
        // still holds more than one, so the next newcomer closes another of its own.
        newcomer.trust_as("quickstart\npiped-2");
        let third = Activity::new();
        let taking = {
            let (places, third) = (places.clone(), third.clone());
            tokio::spawn(async move { places.take(&third).await })
        };
        tokio::task::yield_now().await;
        assert!(flood[0].0.is_closed() && !flood[1].0.is_closed());
        let (_, next) = flood.remove(0);
        drop(next);
        let _m = taking.await.unwrap();
        third.trust_as("quickstart\npiped-3");
        // Each principal now within its share: the next one waits.
        let waiting = {
            let places = places.clone();
            tokio::spawn(async move { places.take(&Activity::new()).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        assert!(!piped.is_closed() && !newcomer.is_closed() && !third.is_closed());
        assert!(!flood[0].0.is_closed());
        waiting.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_cap_an_unauthenticated_connection_makes_room() {
        let places = Places::new(2);
        let (trusted, stranger) = (Activity::new(), Activity::new());
        let a = places.take(&trusted).await;
        trusted.trust();
        let b = places.take(&stranger).await;
        // The third connection closes the one that never authenticated...
        let newcomer = Activity::new();
        let taking = {
            let (places, newcomer) = (places.clone(), newcomer.clone());
            tokio::spawn(async move { places.take(&newcomer).await })
        };
        tokio::task::yield_now().await;
        assert!(stranger.is_closed() && !trusted.is_closed());
        // ...and takes its place once it is gone.
        drop(b);
        let c = taking.await.unwrap();
        assert_eq!(places.open(), 2);
        // Every connection authenticated: the next one waits for a place.
        newcomer.trust();
        let waiting = {
            let places = places.clone();
            tokio::spawn(async move { places.take(&Activity::new()).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(a);
        let _d = waiting.await.unwrap();
        drop(c);
        assert_eq!(places.open(), 1);
    }
}
