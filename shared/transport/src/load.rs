//! How many calls one process works on at once, and what happens past that.
//!
//! Without a bound, a server whose CPU cannot keep up takes every call anyway: each one
//! gets a smaller share, all of them slow down together, and past the clients' deadlines
//! every call fails while the work for them goes on. With the bound, at most
//! [`InFlightLimit::max_in_flight`] calls are worked on; the next ones wait in a line of
//! bounded length for at most [`InFlightLimit::max_wait`], and a call that finds the line
//! full, or waits too long, gets `UNAVAILABLE` at once. Pipeds retry that, and the calls
//! that are taken finish in time. A caller's own `grpc-timeout` ends its wait sooner
//! (tonic applies it around this layer).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use tokio::sync::Semaphore;
use tonic::Status;
use tower::{Layer, Service};
use wisp_telemetry::metrics;

/// Default of `wisp serve --max-in-flight`.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1024;
/// Calls waiting for their turn, per call in flight.
pub const WAITING_PER_IN_FLIGHT: usize = 4;
/// Longest wait for a turn.
pub const MAX_WAIT: Duration = Duration::from_secs(2);

/// The bound on calls in flight, shared by every service the layer wraps.
#[derive(Debug, Clone)]
pub struct InFlightLimit {
    turns: Arc<Semaphore>,
    waiting: Arc<AtomicUsize>,
    max_in_flight: usize,
    max_waiting: usize,
    max_wait: Duration,
}

impl InFlightLimit {
    /// At most `max_in_flight` calls at once (at least one), with
    /// [`WAITING_PER_IN_FLIGHT`] times as many waiting for at most [`MAX_WAIT`].
    pub fn new(max_in_flight: usize) -> Self {
        let max_in_flight = max_in_flight.max(1);
        Self::with_line(
            max_in_flight,
            max_in_flight.saturating_mul(WAITING_PER_IN_FLIGHT),
            MAX_WAIT,
        )
    }

    pub fn with_line(max_in_flight: usize, max_waiting: usize, max_wait: Duration) -> Self {
        let max_in_flight = max_in_flight.clamp(1, Semaphore::MAX_PERMITS);
        InFlightLimit {
            turns: Arc::new(Semaphore::new(max_in_flight)),
            waiting: Arc::new(AtomicUsize::new(0)),
            max_in_flight,
            max_waiting,
            max_wait,
        }
    }

    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight
    }

    pub fn max_wait(&self) -> Duration {
        self.max_wait
    }

    /// Calls being worked on now.
    pub fn in_flight(&self) -> usize {
        self.max_in_flight - self.turns.available_permits()
    }

    /// Waits for a turn within the bounds; `None` when the call is to be turned away.
    async fn turn(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        if let Ok(turn) = self.turns.clone().try_acquire_owned() {
            return Some(turn);
        }
        // Counted while waiting, and given back however the wait ends (the caller going
        // away included).
        struct Place<'a>(&'a AtomicUsize);
        impl Drop for Place<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        let _place = Place(&self.waiting);
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.max_waiting {
            return None;
        }
        tokio::time::timeout(self.max_wait, self.turns.clone().acquire_owned())
            .await
            .ok()?
            .ok()
    }
}

#[derive(Debug, Clone)]
pub struct InFlightLayer {
    limit: InFlightLimit,
}

impl InFlightLayer {
    pub fn new(limit: InFlightLimit) -> Self {
        InFlightLayer { limit }
    }
}

impl<S> Layer<S> for InFlightLayer {
    type Service = InFlightService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        InFlightService {
            limit: self.limit.clone(),
            inner,
        }
    }
}

#[derive(Debug, Clone)]
pub struct InFlightService<S> {
    limit: InFlightLimit,
    inner: S,
}

impl<S, B> Service<Request<B>> for InFlightService<S>
where
    S: Service<Request<B>, Response = Response<tonic::body::Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let limit = self.limit.clone();
        // The clone is ready (the routes always are); keep `self.inner` for the next call.
        let mut inner = self.inner.clone();
        std::mem::swap(&mut inner, &mut self.inner);
        Box::pin(async move {
            let Some(turn) = limit.turn().await else {
                metrics::counter!(wisp_telemetry::GRPC_SHED).increment(1);
                return Ok(Status::unavailable(
                    "server busy: too many calls in progress; retry shortly",
                )
                .into_http());
            };
            let counted = InFlightGauge::up();
            let response = inner.call(req).await;
            drop((counted, turn));
            response
        })
    }
}

/// One call in the in-flight gauge, taken out when dropped (a caller gone included).
struct InFlightGauge(metrics::Gauge);

impl InFlightGauge {
    fn up() -> Self {
        let gauge = metrics::gauge!(wisp_telemetry::GRPC_IN_FLIGHT);
        gauge.increment(1.0);
        InFlightGauge(gauge)
    }
}

impl Drop for InFlightGauge {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::sync::Mutex;
    use tokio::sync::oneshot;

    /// Answers each call when the test says so.
    #[derive(Clone, Default)]
    struct Held {
        pending: Arc<Mutex<Vec<oneshot::Sender<()>>>>,
    }

    impl Held {
        fn release_all(&self) {
            for tx in self.pending.lock().unwrap().drain(..) {
                let _ = tx.send(());
            }
        }
    }

    impl Service<Request<()>> for Held {
        type Response = Response<tonic::body::Body>;
        type Error = Infallible;
        type Future = std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<Self::Response, Infallible>> + Send>,
        >;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: Request<()>) -> Self::Future {
            let (tx, rx) = oneshot::channel();
            self.pending.lock().unwrap().push(tx);
            Box::pin(async move {
                let _ = rx.await;
                Ok(Response::new(tonic::body::Body::empty()))
            })
        }
    }

    fn grpc_status(response: &Response<tonic::body::Body>) -> Option<String> {
        response
            .headers()
            .get("grpc-status")
            .map(|v| v.to_str().unwrap().to_owned())
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_bound_calls_wait_briefly_then_are_turned_away() {
        let held = Held::default();
        let limit = InFlightLimit::with_line(2, 1, Duration::from_secs(2));
        let mut svc = InFlightLayer::new(limit.clone()).layer(held.clone());
        let first = tokio::spawn(svc.call(Request::new(())));
        let second = tokio::spawn(svc.call(Request::new(())));
        tokio::task::yield_now().await;
        assert_eq!(limit.in_flight(), 2);

        // The line has room for one: the next call waits, the one after is refused at once.
        let waiting = tokio::spawn(svc.call(Request::new(())));
        tokio::task::yield_now().await;
        let refused = svc.call(Request::new(())).await.unwrap();
        assert_eq!(grpc_status(&refused).as_deref(), Some("14")); // UNAVAILABLE

        // The waiting call is turned away once its wait is over.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let waited = waiting.await.unwrap().unwrap();
        assert_eq!(grpc_status(&waited).as_deref(), Some("14"));

        // The calls in flight finish; their turns are given back.
        held.release_all();
        assert_eq!(grpc_status(&first.await.unwrap().unwrap()), None);
        assert_eq!(grpc_status(&second.await.unwrap().unwrap()), None);
        assert_eq!(limit.in_flight(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_call_gets_the_next_turn_and_a_gone_one_leaves_the_line() {
        let held = Held::default();
        let limit = InFlightLimit::with_line(1, 1, Duration::from_secs(2));
        let mut svc = InFlightLayer::new(limit.clone()).layer(held.clone());
        let first = tokio::spawn(svc.call(Request::new(())));
        tokio::task::yield_now().await;

        // A caller that gives up while waiting frees its place in the line at once.
        let gone = tokio::spawn(svc.call(Request::new(())));
        tokio::task::yield_now().await;
        gone.abort();
        let _ = gone.await;
        let next = tokio::spawn(svc.call(Request::new(())));
        tokio::task::yield_now().await;
        assert!(
            !next.is_finished(),
            "the line has room again: the call waits"
        );

        // When the call in flight ends, the waiting one is taken.
        held.release_all();
        assert_eq!(grpc_status(&first.await.unwrap().unwrap()), None);
        tokio::task::yield_now().await;
        assert_eq!(limit.in_flight(), 1);
        held.release_all();
        assert_eq!(grpc_status(&next.await.unwrap().unwrap()), None);
        assert_eq!(limit.in_flight(), 0);
    }
}
