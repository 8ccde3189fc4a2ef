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
//!
//! `wisp serve` installs its bound for the whole process ([`InFlightLimit::install`]):
//! each service's gate takes the turn once the caller is authenticated and the request's
//! body is read (a caller that stalls its upload holds no turn), and one principal (a
//! piped, an API key, a console user) may hold at most a quarter of the turns, one
//! project half of them: past its share, a caller gets `UNAVAILABLE` at once while the
//! others go on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use tokio::sync::Semaphore;
use tonic::Status;
use tower::{Layer, Service};
use wisp_telemetry::metrics;

use crate::gate::Principal;

/// Default of `wisp serve --max-in-flight`.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1024;
/// Calls waiting for their turn, per call in flight.
pub const WAITING_PER_IN_FLIGHT: usize = 4;
/// Longest wait for a turn.
pub const MAX_WAIT: Duration = Duration::from_secs(2);

/// Of the turns, one principal may hold at most this fraction, one project this one.
pub const PRINCIPAL_SHARE_DIVISOR: usize = 4;
pub const PROJECT_SHARE_DIVISOR: usize = 2;

/// The bound on calls in flight, shared by every service the layer wraps (or, installed,
/// by every gate of the process).
#[derive(Debug, Clone)]
pub struct InFlightLimit {
    turns: Arc<Semaphore>,
    waiting: Arc<AtomicUsize>,
    max_in_flight: usize,
    max_waiting: usize,
    max_wait: Duration,
    shares: Arc<Shares>,
}

/// What is held per principal and per project (turns here, decode-budget units in the
/// gate), each within its share.
#[derive(Debug)]
pub(crate) struct Shares {
    per_principal: usize,
    per_project: usize,
    held: Mutex<(HashMap<Principal, usize>, HashMap<String, usize>)>,
}

impl Shares {
    pub(crate) fn new(per_principal: usize, per_project: usize) -> Self {
        Shares {
            per_principal,
            per_project,
            held: Mutex::default(),
        }
    }

    /// Adds `n` to `owner`'s holdings if they stay within both shares.
    pub(crate) fn take(&self, owner: &Principal, n: usize) -> bool {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let (principals, projects) = &mut *held;
        let principal = principals.get(owner).copied().unwrap_or(0);
        let project = projects.get(&owner.project).copied().unwrap_or(0);
        if principal + n > self.per_principal || project + n > self.per_project {
            return false;
        }
        principals.insert(owner.clone(), principal + n);
        projects.insert(owner.project.clone(), project + n);
        true
    }

    pub(crate) fn give_back(&self, owner: &Principal, n: usize) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let (principals, projects) = &mut *held;
        if let Some(left) = principals.get_mut(owner) {
            *left = left.saturating_sub(n);
            if *left == 0 {
                principals.remove(owner);
            }
        }
        if let Some(left) = projects.get_mut(&owner.project) {
            *left = left.saturating_sub(n);
            if *left == 0 {
                projects.remove(&owner.project);
            }
        }
    }

    /// Nothing is held by anyone.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.0.is_empty() && held.1.is_empty()
    }
}

/// The bound the gates of this process take their turns from, if one is installed.
static PROCESS: OnceLock<InFlightLimit> = OnceLock::new();

/// A call's turn: its place among the calls in flight and in its caller's shares, given
/// back when dropped.
#[derive(Debug)]
pub struct Turn {
    _turn: tokio::sync::OwnedSemaphorePermit,
    _gauge: InFlightGauge,
    shares: Arc<Shares>,
    owner: Principal,
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.shares.give_back(&self.owner, 1);
    }
}

/// A turn for a call of `owner` from the process's installed bound; `Ok(None)` when
/// there is none (the Lambda functions: one call at a time per instance). The error is
/// the status to answer with.
pub(crate) async fn take_turn(owner: &Principal) -> Result<Option<Turn>, Status> {
    let Some(limit) = PROCESS.get() else {
        return Ok(None);
    };
    limit.turn_for(owner).await.map(Some)
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
            shares: Arc::new(Shares::new(
                (max_in_flight / PRINCIPAL_SHARE_DIVISOR).max(1),
                (max_in_flight / PROJECT_SHARE_DIVISOR).max(1),
            )),
        }
    }

    /// Makes this the bound every gate of the process takes its turns from; `false` if
    /// one was installed before (it stays).
    pub fn install(self) -> bool {
        PROCESS.set(self).is_ok()
    }

    /// A turn for a call of `owner`, within its shares and the bound; the error is the
    /// status to answer with (`UNAVAILABLE`, which pipeds retry).
    pub async fn turn_for(&self, owner: &Principal) -> Result<Turn, Status> {
        if !self.shares.take(owner, 1) {
            metrics::counter!(wisp_telemetry::GRPC_SHED).increment(1);
            return Err(Status::unavailable(
                "server busy: this caller has too many calls in progress; retry shortly",
            ));
        }
        let Some(turn) = self.turn().await else {
            self.shares.give_back(owner, 1);
            metrics::counter!(wisp_telemetry::GRPC_SHED).increment(1);
            return Err(Status::unavailable(
                "server busy: too many calls in progress; retry shortly",
            ));
        };
        Ok(Turn {
            _turn: turn,
            _gauge: InFlightGauge::up(),
            shares: self.shares.clone(),
            owner: owner.clone(),
        })
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

impl std::fmt::Debug for InFlightGauge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InFlightGauge")
    }
}

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

    fn owner(project: &str, id: &str) -> Principal {
        Principal {
            project: project.into(),
            id: id.into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn one_caller_holds_at_most_its_share_of_the_turns() {
        // 8 turns: 2 per principal, 4 per project.
        let limit = InFlightLimit::with_line(8, 8, Duration::from_secs(2));
        let slow = owner("other", "api-key:k");
        let held: Vec<Turn> = vec![
            limit.turn_for(&slow).await.unwrap(),
            limit.turn_for(&slow).await.unwrap(),
        ];
        let err = limit.turn_for(&slow).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::Unavailable);
        // The project's other callers get the rest of its half.
        let more = [
            limit.turn_for(&owner("other", "a")).await.unwrap(),
            limit.turn_for(&owner("other", "b")).await.unwrap(),
        ];
        assert!(limit.turn_for(&owner("other", "c")).await.is_err());
        // Another project's piped is not held up.
        let piped = owner("quickstart", "piped:p");
        drop(limit.turn_for(&piped).await.unwrap());
        assert_eq!(limit.in_flight(), 4);
        drop((held, more));
        assert_eq!(limit.in_flight(), 0);
        assert!(limit.shares.is_empty());
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
